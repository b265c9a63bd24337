"""Cost and caps seen from outside a run: result.json's ``cost``, a run
stopped at its cap, a cap that cannot be held said at once, and a run that
never loads the price table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import (
    HANG_LIMIT,
    ROOT,
    agent_env,
    read_events,
    read_result,
    run_wrapper,
    write_scenario,
)
from tests.test_deferral import RECORD_IMPORTS
from wrapper.core.config import RunConfig
from wrapper.core.events import AssistantMessage, Usage
from wrapper.files.prices import INSTALL_LINE, table_version
from wrapper.supervision import spending

FAKE_CODEX = ROOT / "fixtures" / "fake_agent" / "codex"
DONE: list[dict[str, Any]] = [
    {"assistant": {"text": "All done.", "stopReason": "stop"}},
    {"agent_end": {"willRetry": False}},
]

needs_table = pytest.mark.skipif(
    table_version() is None, reason="the cost extra (genai-prices) is not installed"
)


def working(count: int, usage: dict[str, Any]) -> list[dict[str, Any]]:
    """``count`` messages that each call a tool and report ``usage``, then the end."""
    steps: list[dict[str, Any]] = []
    for n in range(count):
        steps.append({"assistant": {"text": f"step {n}", "stopReason": "toolUse", "usage": usage}})
        steps.append({"tool": {"duration": 0.05}})
    return [*steps, *DONE]


def usage_reports(events: list[dict[str, Any]]) -> int:
    return sum(1 for e in events if e["type"] == "assistant_message" and e.get("usage"))


def test_a_run_is_stopped_at_max_tokens_within_one_usage_report(tmp_path: Path) -> None:
    # each message reports 1,000 tokens: the third reaches the cap of 2,500
    run = run_wrapper(
        tmp_path,
        working(8, {"input": 800, "output": 200}),
        options=["--max-tokens", "2500"],
        env=agent_env(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache")),
    )
    result = run.result
    assert run.returncode == 1
    assert result["outcome"] == "error"
    assert result["error"]["kind"] == "budget_exceeded"
    assert "3,000 tokens" in result["error"]["message"]
    assert "--max-tokens cap of 2,500" in result["error"]["message"]
    assert usage_reports(run.events) == 3
    assert result["usage"]["input"] == 2400
    assert result["cost"]["capEnforced"] == "message"
    assert result["cost"]["granularity"] == "message"
    # stopped the way an abort stops it: the agent's tree was signalled
    assert result["signalsSent"]
    assert "budget_exceeded" not in run.stderr or "--max-tokens" in run.stderr


def test_a_run_is_stopped_at_max_cost_set_in_the_settings(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"limits": {"maxCost": 0.75}}))
    run = run_wrapper(
        tmp_path,
        working(5, {"input": 100, "output": 10, "cost": {"total": 0.4}}),
        options=["--settings", str(settings)],
    )
    assert run.returncode == 1
    assert run.result["error"]["kind"] == "budget_exceeded"
    assert "$0.8000" in run.result["error"]["message"]
    assert "--max-cost cap of $0.75" in run.result["error"]["message"]
    assert usage_reports(run.events) == 2
    cost = run.result["cost"]
    assert (cost["source"], cost["usd"]) == ("agent", pytest.approx(0.8))


def test_a_run_under_its_caps_ends_ok_with_its_cost(tmp_path: Path) -> None:
    run = run_wrapper(
        tmp_path,
        working(2, {"input": 100, "output": 10, "cost": {"total": 0.25}}),
        options=["--max-cost", "10", "--max-tokens", "100000"],
    )
    assert run.returncode == 0, run.stderr
    cost = run.result["cost"]
    assert cost["usd"] == pytest.approx(0.5 + 0.0006)
    assert cost["source"] == "agent"
    assert cost["capEnforced"] == "message"
    assert cost["models"] == [{"requested": "fake-model", "matched": None, "usd": cost["usd"]}]


def codex_run(tmp_path: Path, model: str, *options: str, env: dict[str, str] | None = None) -> Any:
    """A Codex turn that works a while (a price looked up at the start
    arrives meanwhile), then reports its usage at its end."""
    scenario = write_scenario(
        tmp_path,
        [
            {"tool": {"duration": 2}},
            {
                "assistant": {
                    "text": "All done.",
                    "stopReason": "stop",
                    "usage": {"input": 4000, "output": 1000, "cacheRead": 2000},
                }
            },
            {"agent_end": {"willRetry": False}},
        ],
    )
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet"]
    argv += ["--run-dir", str(tmp_path / "run"), *options, "--task", "hi", "--"]
    argv += [str(FAKE_CODEX), "exec", "--json", "--model", model, "--scenario", str(scenario)]
    proc = subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=env or agent_env(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache")),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return proc, read_result(tmp_path / "run" / "result.json")


@needs_table
def test_codex_cost_is_computed_from_its_model_option(tmp_path: Path) -> None:
    proc, result = codex_run(tmp_path, "openai/gpt-5-codex")
    assert proc.returncode == 0, proc.stderr.decode()
    cost = result["cost"]
    assert result["usage"]["costUsd"] is None, "usage.costUsd stays what the agent said"
    assert cost["source"] == "computed"
    assert cost["models"] == [
        {"requested": "gpt-5-codex", "matched": "gpt-5", "usd": pytest.approx(0.01525)}
    ]
    assert cost["usd"] == pytest.approx((4000 * 1.25 + 2000 * 0.125 + 1000 * 10) / 1e6)
    assert cost["priceData"] == f"genai-prices {table_version()}"
    assert cost["granularity"] == "turn"
    assert cost["capEnforced"] is None
    # the answer is cached per model and table version
    assert (tmp_path / "cache" / "agent-wrapper" / "prices" / str(table_version())).is_dir()


def test_an_unknown_model_costs_null_with_a_warning_naming_it(tmp_path: Path) -> None:
    proc, result = codex_run(tmp_path, "nosuch-model-x")
    assert proc.returncode == 0, proc.stderr.decode()
    cost = result["cost"]
    assert cost["usd"] is None
    assert cost["source"] == "unknown"
    assert cost["models"] == [{"requested": "nosuch-model-x", "matched": None, "usd": None}]
    said = [w["message"] for w in result["warnings"] if w["code"] == "cost_unknown"]
    assert len(said) == 1
    assert "nosuch-model-x" in said[0]


def test_a_cost_cap_that_cannot_be_held_is_said_at_once(tmp_path: Path) -> None:
    proc, result = codex_run(tmp_path, "nosuch-model-x", "--max-cost", "0.01")
    assert proc.returncode == 0, proc.stderr.decode()
    stderr = proc.stderr.decode()
    assert "warning: --max-cost cannot be held: the price of nosuch-model-x is unknown" in stderr
    codes = [w["code"] for w in result["warnings"]]
    assert "cap_not_enforced" in codes
    assert result["cost"]["capEnforced"] is False
    events = read_events(tmp_path / "run" / "events.jsonl")
    warned = next(i for i, e in enumerate(events) if e.get("code") == "cap_not_enforced")
    ended = next(i for i, e in enumerate(events) if e["type"] == "exited")
    assert warned < ended, "said while the agent ran, not at the end"


@needs_table
def test_a_computed_cost_cap_stops_the_run_before_its_next_turn(tmp_path: Path) -> None:
    # a Stop hook that always sends the agent back to work: the cap ends it
    settings = tmp_path / "settings.json"
    block = {"type": "command", "command": 'echo \'{"decision": "block", "reason": "more"}\''}
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [block]}]}}))
    proc, result = codex_run(
        tmp_path, "gpt-5-codex", "--max-cost", "0.01", "--settings", str(settings)
    )
    assert proc.returncode == 1, proc.stderr.decode()
    assert result["error"]["kind"] == "budget_exceeded"
    assert "$0.0152" in result["error"]["message"]
    assert "--max-cost cap of $0.01" in result["error"]["message"]
    assert result["steerCount"] == 0
    assert result["cost"]["capEnforced"] == "turn"


@needs_table
def test_a_run_never_loads_the_price_table(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = agent_env(tmp_path, XDG_CACHE_HOME=str(cache))
    looked_up = subprocess.run(
        [sys.executable, "-m", "wrapper", "prices", "gpt-5-codex"],
        capture_output=True,
        env=env,
        timeout=HANG_LIMIT,
        check=False,
    )
    assert looked_up.returncode == 0, looked_up.stderr.decode()
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(RECORD_IMPORTS)
    env.update(PYTHONPATH=str(tmp_path / "site"), IMPORT_LOG=str(tmp_path / "imports"))
    proc, result = codex_run(tmp_path, "gpt-5-codex", "--max-cost", "5", env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert result["cost"]["source"] == "computed"
    loaded = {name for log in tmp_path.glob("imports.*") for name in log.read_text().splitlines()}
    assert "wrapper.supervision.spending" in loaded, "the run's own imports are seen"
    assert not {name for name in loaded if name.startswith("genai_prices")}


class Stream:
    """What a run's event stream is told (``emit``), kept."""

    def __init__(self) -> None:
        self.emitted: list[Any] = []

    def emit(self, event: Any) -> None:
        self.emitted.append(event)


def spending_of(tmp_path: Path, *command: str, **caps: Any) -> tuple[spending.Spending, Stream]:
    from wrapper.dialects.codex import CodexDialect

    config = RunConfig(
        command=command,
        run_id="r",
        run_dir=tmp_path,
        result_path=tmp_path / "result.json",
        cwd=tmp_path,
        **caps,
    )
    stream = Stream()
    spent = spending.Spending(
        config,
        CodexDialect(),
        {"XDG_CACHE_HOME": str(tmp_path / "cache")},
        stream,  # type: ignore[arg-type]
        lambda why: None,
        say_on_stderr=False,
    )
    return spent, stream


async def test_without_the_table_the_warning_names_the_model_and_the_install_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(spending, "table_version", lambda: None)
    spent, stream = spending_of(tmp_path, "codex", "exec", "--json", "-m", "gpt-5-codex")
    spent.observe(AssistantMessage(stop_reason="stop", usage=Usage(input=10, output=5)))
    with trio.fail_after(HANG_LIMIT):
        await spent.settle(stopped=False)
    cost = spent.to_json()
    assert (cost["usd"], cost["source"]) == (None, "unknown")
    (warning,) = stream.emitted
    assert warning.code == "cost_unknown"
    assert "gpt-5-codex" in warning.message
    assert INSTALL_LINE in warning.message


async def test_a_cap_passed_when_the_agent_had_ended_is_a_warning(tmp_path: Path) -> None:
    spent, stream = spending_of(tmp_path, "codex", "exec", "--json", max_tokens=100)
    stops: list[str] = []
    spent.on_over = stops.append
    spent.ended = True
    spent.observe(AssistantMessage(stop_reason="stop", usage=Usage(input=100, output=5)))
    assert stops == [], "nothing left to stop"
    await spent.settle(stopped=False)
    (warning,) = [e for e in stream.emitted if e.code == "cap_passed"]
    assert "--max-tokens cap of 100" in warning.message
    assert spent.to_json()["capEnforced"] == "turn"


def test_a_batch_line_takes_caps_as_every_run_option(tmp_path: Path) -> None:
    from tests.test_batch import line, read_report, run_batch, scenario, write_spec

    steps = working(6, {"input": 800, "output": 200})
    spec = write_spec(
        tmp_path,
        [
            line(
                scenario(tmp_path, "capped", steps),
                label="capped",
                maxTokens=2500,
                expect={"errorKind": "budget_exceeded"},
            ),
            line(scenario(tmp_path, "free", steps), label="free"),
        ],
    )
    # the batch's --max-cost is every line's default: a line's own key beats it
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "quiet", "--max-cost", "9")
    assert proc.returncode == 0, proc.stderr.decode()
    capped = read_result(tmp_path / "runs" / "capped" / "result.json")
    assert capped["error"]["kind"] == "budget_exceeded"
    assert "--max-tokens cap of 2,500" in capped["error"]["message"]
    free = read_result(tmp_path / "runs" / "free" / "result.json")
    assert free["outcome"] == "ok"
    assert free["cost"]["capEnforced"] == "message"
    assert read_report(tmp_path / "runs")["exitStatus"] == 0


def test_claude_code_is_stopped_within_one_message_of_the_cap(tmp_path: Path) -> None:
    # Claude Code gives the turn's usage only on its result line; its
    # assistant lines' usage is what the cap is held on meanwhile
    from tests.dialect_support import LAUNCHERS, mode_args

    scenario = write_scenario(tmp_path, working(8, {"input": 800, "output": 200}))
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet"]
    argv += ["--run-dir", str(tmp_path / "run"), "--max-tokens", "2500", "--task", "hi", "--"]
    argv += [str(LAUNCHERS["claude"]), *mode_args("claude"), "--scenario", str(scenario)]
    proc = subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    result = read_result(tmp_path / "run" / "result.json")
    assert proc.returncode == 1, proc.stderr.decode()
    assert result["error"]["kind"] == "budget_exceeded"
    assert "3,000 tokens" in result["error"]["message"]
    events = read_events(tmp_path / "run" / "events.jsonl")
    said = [e for e in events if e["type"] == "assistant_message"]
    assert len(said) == 3
    assert result["cost"]["capEnforced"] == "message"


@needs_table
def test_the_prices_command_says_which_models_have_a_price(tmp_path: Path) -> None:
    env = agent_env(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache"))

    def prices(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "wrapper", "prices", *args],
            capture_output=True,
            env=env,
            timeout=HANG_LIMIT,
            check=False,
        )

    known = prices("openai/gpt-5-codex")
    assert known.returncode == 0, known.stderr.decode()
    assert known.stdout.decode().startswith("gpt-5-codex: priced as gpt-5 (openai)")
    unknown = prices("--json", "gpt-5-codex", "nosuch-model-x")
    assert unknown.returncode == 1
    answer = json.loads(unknown.stdout)
    assert answer["prices"]["nosuch-model-x"] is None
    assert "nosuch-model-x" in answer["reasons"]["nosuch-model-x"]
    assert answer["prices"]["gpt-5-codex"]["matched"] == "gpt-5"
