"""An agent known by its name but started without its JSON mode is refused
before it starts: it would do, and bill, the whole task unwatched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import wrapper
from tests.conftest import FAKE_AGENT, HANG_LIMIT, ROOT, agent_env, write_scenario
from tests.dialect_support import mode_args
from wrapper.core.registry import AGENTS, lacks_mode

FAKE_CLAUDE = ROOT / "fixtures" / "fake_agent" / "claude"
DONE: list[dict[str, Any]] = [
    {"assistant": {"text": "Done.", "stopReason": "stop"}},
    {"agent_end": {"willRetry": False}},
    {"agent_settled": {}},
]


@pytest.mark.parametrize(
    "command",
    [
        "pi --mode json -p go",
        "pi --mode=json -p go",
        "pi --mode rpc",
        "claude -p --output-format stream-json --verbose go",
        "claude -p --output-format=stream-json go",
        "claude -p --input-format stream-json --output-format stream-json --verbose",
        "npx -y @anthropic-ai/claude-code -p --output-format stream-json go",
        "gemini -o stream-json -p go",
        "gemini --output-format stream-json -p go",
        "gemini --acp",
        "codex exec --json go",
        "codex exec --experimental-json go",
        "codex app-server",
        "opencode run --format json go",
        "amp -x --stream-json go",
        "cursor-agent -p --output-format stream-json go",
        "opencode acp",
        "qwen -p go",  # known by no dialect of its own in this form
        "python3 agent.py --json",
        "./my-claude-wrapper.sh -p go",
    ],
)
def test_command_lines_in_a_json_mode_or_unknown_pass(command: str) -> None:
    assert lacks_mode(command.split()) is None


@pytest.mark.parametrize(
    ("command", "dialect"),
    [
        ("pi -p go", "pi"),
        ("pi --mode text -p go", "pi"),
        ("claude -p go", "claude"),
        ("claude -p --output-format json go", "claude"),
        ("claude -p -- --output-format stream-json", "claude"),
        ("env FOO=1 claude -p go", "claude"),
        ("npx @anthropic-ai/claude-code -p go", "claude"),
        ("gemini -p go", "gemini"),
        ("codex exec go", "codex"),
        ("opencode run go", "opencode"),
        ("amp -x go", "amp"),
        ("cursor-agent -p go", "cursor"),
    ],
)
def test_a_known_agent_without_its_json_mode_is_found(command: str, dialect: str) -> None:
    agent = lacks_mode(command.split())
    assert agent is not None
    assert agent.name == dialect


def test_every_one_way_agent_names_its_mode() -> None:
    for agent in AGENTS:
        assert agent.mode or agent.needs, f"{agent.name} names no JSON mode"


def _run(
    tmp_path: Path, *options: str, agent_args: tuple[str, ...] = ("-p",)
) -> tuple[subprocess.CompletedProcess[bytes], Path]:
    scenario = write_scenario(tmp_path, DONE)
    record = tmp_path / "record.jsonl"
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet"]
    argv += ["--run-dir", str(tmp_path / "run"), "--task", "Fix it", *options, "--"]
    argv += [str(FAKE_CLAUDE), *agent_args, "--scenario", str(scenario)]
    proc = subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return proc, record


def test_claude_without_stream_json_is_refused_before_it_starts(tmp_path: Path) -> None:
    proc, record = _run(tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert "claude is started without the option of the JSON mode" in lines[0]
    assert "`claude -p --output-format stream-json --verbose`" in lines[0]
    assert "--no-check-mode" in lines[0]
    assert not record.exists(), "the agent was started"
    assert not (tmp_path / "run" / "result.json").exists()


def test_no_check_mode_starts_it_as_it_is(tmp_path: Path) -> None:
    proc, record = _run(tmp_path, "--no-check-mode")
    assert record.exists(), proc.stderr
    assert json.loads((tmp_path / "run" / "result.json").read_text())["agent"] == "claude"


def test_an_explicit_dialect_is_not_second_guessed(tmp_path: Path) -> None:
    proc, record = _run(tmp_path, "--dialect", "claude")
    assert record.exists(), proc.stderr


def test_the_json_mode_given_runs(tmp_path: Path) -> None:
    proc, record = _run(tmp_path, agent_args=("-p", *mode_args("claude")))
    assert proc.returncode == 0, proc.stderr
    assert record.exists()


def _batch(tmp_path: Path, lines: list[dict[str, object]]) -> subprocess.CompletedProcess[bytes]:
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return subprocess.run(
        [sys.executable, "-m", "wrapper", "batch", str(spec), "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_a_batch_is_checked_up_front_and_a_line_may_turn_the_check_off(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, DONE)
    line: dict[str, object] = {
        "command": [str(FAKE_CLAUDE), "-p", "--scenario", str(scenario)],
        "task": "Fix it",
    }
    proc = _batch(tmp_path, [line | {"label": "ok"}, line | {"label": "no mode"}])
    assert proc.returncode == 2
    assert "line 1: " in proc.stderr.decode()
    assert "--no-check-mode" in proc.stderr.decode()
    assert not (tmp_path / "record.jsonl").exists(), "no run started"
    proc = _batch(tmp_path, [line | {"label": "unchecked", "checkMode": False}])
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "runs" / "batch.json").read_text())
    assert [run["outcome"] for run in report["results"]] == ["ok"]


def test_the_api_names_its_own_argument(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, DONE)
    command = [str(FAKE_CLAUDE), "-p", "--scenario", str(scenario)]
    with pytest.raises(ValueError, match=r"check_mode=False") as caught:
        wrapper.run(command, task="Fix it", run_dir=tmp_path / "refused")
    assert "--no-check-mode" not in str(caught.value)
    result = wrapper.run(command, task="Fix it", run_dir=tmp_path / "run", check_mode=False)
    assert result.data["agent"] == "claude"


def test_the_fake_agent_under_its_own_name_is_not_checked(tmp_path: Path) -> None:
    assert lacks_mode([str(FAKE_AGENT), "-p", "go"]) is None
