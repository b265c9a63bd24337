"""The same lifecycle scenarios in every dialect: the real wrapper, the fake
agent speaking each CLI's stream format, started and resumed with each CLI's argv."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    ROOT,
    agent_env,
    read_events,
    read_result,
    write_scenario,
)

pytestmark = pytest.mark.usefixtures("no_leaks")

#: dialect -> the fake agent's launcher for it
LAUNCHERS = {
    "pi": "pi",
    "claude": "claude",
    "codex": "codex",
    "gemini": "gemini",
    "opencode": "opencode",
    "amp": "amp",
    "cursor": "cursor-agent",
}

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def final(text: str = "All done.", stop: str = "stop", **extra: Any) -> dict[str, Any]:
    return {"assistant": {"text": text, "stopReason": stop, **extra}}


def run_in(
    dialect: str,
    tmp_path: Path,
    steps: list[dict[str, Any]],
    *,
    options: tuple[str, ...] = (),
    extra: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    scenario = write_scenario(tmp_path, steps, **(extra or {}))
    run_dir = tmp_path / "run"
    agent = ROOT / "fixtures" / "fake_agent" / LAUNCHERS[dialect]
    argv = [
        sys.executable,
        "-m",
        "wrapper",
        "run",
        "--output",
        "quiet",
        "--run-dir",
        str(run_dir),
        "--task",
        "Fix the parser",
        *options,
        "--",
        str(agent),
        "--scenario",
        str(scenario),
    ]
    proc = subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    result = read_result(run_dir / "result.json")
    assert result["dialect"] == dialect, proc.stderr
    return proc.returncode, result, read_events(run_dir / "events.jsonl")


dialects = pytest.mark.parametrize("dialect", sorted(LAUNCHERS))


def stop_gate(tmp_path: Path, body: str) -> Path:
    """A settings file whose one Stop hook runs the Python ``body``."""
    gate = tmp_path / "gate.py"
    gate.write_text("import json, shutil, sys\n" + body)
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps({"hooks": {"Stop": [{"hooks": [{"command": f"{sys.executable} {gate}"}]}]}})
    )
    return settings


@dialects
def test_final_answer_after_a_tool(dialect: str, tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Looking.",
                "toolCalls": [{"name": "bash", "arguments": {"command": "ls"}}],
            }
        },
        {"tool": {"name": "bash", "duration": 0.2, "result": "a.py"}},
        final("Fixed it."),
        *END,
    ]
    code, result, events = run_in(dialect, tmp_path, steps)
    assert code == 0, result["error"]
    assert result["outcome"] == "ok"
    assert result["stopReason"] == "stop"
    assert result["rawStopReason"]
    assert "Fixed it." in (result["finalText"] or "")
    assert result["sessionId"]
    assert len(result["toolsUsed"]) == 1
    assert any(e["type"] == "tool_start" for e in events)


@dialects
def test_lingering_after_the_end_is_cleaned_up(dialect: str, tmp_path: Path) -> None:
    steps = [final("Done."), *END, {"linger": {"seconds": 60}}]
    options = ("--grace", "1", "--settle-grace", "1")
    code, result, _ = run_in(dialect, tmp_path, steps, options=options)
    assert code == 0, result["error"]
    assert result["forcedCleanup"] is True
    assert result["signalsSent"][0]["signal"] == "SIGTERM"


@dialects
@pytest.mark.parametrize(("stop", "kind"), [("error", "agent_error"), ("aborted", "agent_aborted")])
def test_the_agents_own_failure(dialect: str, stop: str, kind: str, tmp_path: Path) -> None:
    steps = [final("", stop, errorMessage="provider exploded"), *END]
    code, result, _ = run_in(dialect, tmp_path, steps)
    assert code == 1
    assert result["outcome"] == "error"
    assert result["stopReason"] == stop
    assert result["error"]["kind"] == kind


@dialects
def test_steering_resumes_the_same_session(dialect: str, tmp_path: Path) -> None:
    settings = stop_gate(
        tmp_path,
        "if not json.load(sys.stdin)['stop_hook_active']:\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'Run the tests.'}))\n",
    )
    code, result, _ = run_in(
        dialect,
        tmp_path,
        [final("Claimed victory."), *END],
        options=("--settings", str(settings)),
        extra={"resumes": [[final("Tests pass."), *END]]},
    )
    assert code == 0, result["error"]
    assert result["steerCount"] == 1
    assert "Tests pass." in (result["finalText"] or "")
    records = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert [r["prompt"] for r in records] == ["Fix the parser", "Run the tests."]
    assert records[1]["resumed"] is True


@pytest.mark.parametrize("dialect", sorted(set(LAUNCHERS) - {"pi"}))
def test_steering_into_a_session_the_agent_lost_fails_honestly(
    dialect: str, tmp_path: Path
) -> None:
    settings = stop_gate(
        tmp_path,
        f"shutil.rmtree({str(tmp_path / 'agent-home')!r}, ignore_errors=True)\n"
        "print(json.dumps({'decision': 'block', 'reason': 'Run the tests.'}))\n",
    )
    code, result, _ = run_in(
        dialect,
        tmp_path,
        [final("Claimed victory."), *END],
        options=("--settings", str(settings), "--max-steers", "2"),
    )
    assert code == 1
    assert result["outcome"] == "error"
    assert result["error"]["kind"] == "steer_failed"
    message = result["error"]["message"]
    assert message.startswith("the agent could not be resumed to take the steer: it exited")
    assert "no session found with id" in message
    # One refused resume is enough: the wrapper does not steer into it again.
    assert [a["exitCode"] for a in result["attempts"]] == [0, 1]
    assert result["stopAllowedBy"] == "cannot_steer"
