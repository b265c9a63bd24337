"""Pause and ask at a cap (``--on-budget escalate``), seen from outside a
run: the agent interrupted, a person asked, the run going on in the same
session with its cap raised, or ended as the cap ends it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import FAKE_PI, agent_env, read_events, validate, wrapper_argv, write_scenario
from tests.test_cost_runs import working
from tests.test_policies import cli, finish, records, wait_for_question

pytestmark = pytest.mark.usefixtures("no_leaks")

#: Each message reports 1,000 tokens: the third reaches a cap of 2,500.
THOUSAND = {"input": 800, "output": 200}


def start_capped(
    tmp_path: Path, resumes: list[list[dict[str, Any]]], *extra: str
) -> tuple[subprocess.Popen[bytes], Path]:
    scenario = write_scenario(tmp_path, working(8, THOUSAND), resumes=resumes)
    run_dir = tmp_path / "run"
    options = ["--max-tokens", "2500", "--on-budget", "escalate", *extra]
    proc = subprocess.Popen(
        wrapper_argv(run_dir, scenario, options=options),
        env=agent_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return proc, run_dir


def test_reply_continue_raises_the_cap_and_the_same_session_goes_on(tmp_path: Path) -> None:
    proc, run_dir = start_capped(tmp_path, [working(1, THOUSAND)], "--escalation-timeout", "60")
    status = wait_for_question(run_dir, "esc-1")
    assert "--max-tokens cap of 2,500" in status["question"]
    assert "--continue to raise the cap by 2,500 tokens" in status["question"]
    assert cli(tmp_path, "reply", str(run_dir), "--continue").returncode == 0
    result = finish(proc, run_dir)
    assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
    assert result["outcome"] == "ok"
    validate("result", result)
    # the agent was interrupted at the cap, then resumed in its own session
    _, second = records(tmp_path)
    assert second["resumed"] is True
    assert "budget was raised to 5,000 tokens" in second["prompt"]
    assert len(result["attempts"]) == 2
    assert [e["answer"] for e in result["escalations"]] == ["continue"]
    assert result["steers"][0]["handler"] == "onBudget"
    assert result["cost"]["caps"] == {"maxCost": None, "maxTokens": 5000}
    # past the first cap, under the raised one
    assert 3000 < result["usage"]["input"] + result["usage"]["output"] < 5000
    events = read_events(run_dir / "events.jsonl")
    assert [e["type"] for e in events if e["type"] in ("escalated", "escalation_answered")] == [
        "escalated",
        "escalation_answered",
    ]


def test_reply_stop_ends_the_run_as_the_cap_does(tmp_path: Path) -> None:
    proc, run_dir = start_capped(tmp_path, [working(1, THOUSAND)], "--escalation-timeout", "60")
    wait_for_question(run_dir, "esc-1")
    assert cli(tmp_path, "reply", str(run_dir), "--stop").returncode == 0
    result = finish(proc, run_dir)
    assert proc.returncode == 1
    assert result["outcome"] == "error"
    assert result["error"]["kind"] == "budget_exceeded"
    assert "--max-tokens cap of 2,500" in result["error"]["message"]
    assert "a person answered stop" in result["error"]["message"]
    assert len(records(tmp_path)) == 1, "the agent was not resumed"
    assert result["cost"]["caps"] == {"maxCost": None, "maxTokens": 2500}


def test_no_answer_within_the_escalation_timeout_ends_the_run(tmp_path: Path) -> None:
    proc, run_dir = start_capped(tmp_path, [], "--escalation-timeout", "0.5")
    result = finish(proc, run_dir)
    assert proc.returncode == 1
    assert result["error"]["kind"] == "budget_exceeded"
    assert "nobody answered within --escalation-timeout" in result["error"]["message"]
    assert [e["answer"] for e in result["escalations"]] == ["timeout"]


def test_reply_text_steers_the_agent_with_it(tmp_path: Path) -> None:
    proc, run_dir = start_capped(tmp_path, [working(1, THOUSAND)], "--escalation-timeout", "60")
    wait_for_question(run_dir, "esc-1")
    assert cli(tmp_path, "reply", str(run_dir), "Finish up quickly.").returncode == 0
    result = finish(proc, run_dir)
    assert result["outcome"] == "ok"
    assert records(tmp_path)[1]["prompt"] == "Finish up quickly."
    assert result["cost"]["caps"]["maxTokens"] == 5000


def test_on_budget_in_the_settings_and_a_bad_value_refused(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"limits": {"maxTokens": 2500, "onBudget": "ask"}}))
    bad = cli(tmp_path, "run", "--settings", str(settings), "--dialect", "pi", "--", "true")
    assert bad.returncode == 2
    assert "limits.onBudget: expected one of stop, escalate" in bad.stderr
    settings.write_text(json.dumps({"limits": {"maxTokens": 2500, "onBudget": "escalate"}}))
    scenario = write_scenario(tmp_path, working(8, THOUSAND))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        wrapper_argv(run_dir, scenario, options=["--settings", str(settings)]),
        env=agent_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_question(run_dir, "esc-1")
    assert cli(tmp_path, "reply", str(run_dir), "--stop").returncode == 0
    assert finish(proc, run_dir)["error"]["kind"] == "budget_exceeded"


async def test_the_mcp_servers_reply_tool_answers_a_pause_at_the_cap(tmp_path: Path) -> None:
    from tests.test_mcp_registry import pi, server

    defaults = {"steer_timeout": 0.3, "max_tokens": 2500, "on_budget": "escalate"}
    async with server(tmp_path, defaults=defaults) as tools:
        command = pi(tmp_path, working(8, THOUSAND), [working(1, THOUSAND)])
        run_id = (await tools.start(command=command, task="Work"))["run_id"]
        with trio.fail_after(30):
            while (status := await tools.status(run_id=run_id))["state"] != "waiting":
                await trio.sleep(0.05)
        assert "--max-tokens cap of 2,500" in status["question"]
        replied = await tools.reply(run_id=run_id, go_on=True)
        assert replied["answered"] == "continue"
        await tools.wait(timeout=60)
        result = await tools.result(run_id=run_id)
        assert result["outcome"] == "ok"


def test_a_live_session_is_paused_and_goes_on_in_the_same_process(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, working(8, THOUSAND), resumes=[working(1, THOUSAND)])
    run_dir = tmp_path / "run"
    # pi's RPC mode: the session is one process taking its prompts on stdin
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--run-dir", str(run_dir)]
    argv += ["--max-tokens", "2500", "--on-budget", "escalate", "--task", "Do the task", "--"]
    argv += [str(FAKE_PI), "--mode", "rpc", "--scenario", str(scenario)]
    proc = subprocess.Popen(argv, env=agent_env(tmp_path), stdout=subprocess.DEVNULL)
    wait_for_question(run_dir, "esc-1")
    assert cli(tmp_path, "reply", str(run_dir), "--continue").returncode == 0
    result = finish(proc, run_dir)
    assert result["outcome"] == "ok"
    assert result["cost"]["caps"]["maxTokens"] == 5000
    events = read_events(run_dir / "events.jsonl")
    assert len([e for e in events if e["type"] == "spawned"]) == 1, "one process"
