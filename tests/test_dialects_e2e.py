"""The same lifecycle scenarios in every dialect: the real wrapper, the fake
agent speaking each CLI's stream format, started and resumed with each CLI's argv."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    ROOT,
    agent_env,
    read_events,
    read_result,
    wait_until,
    write_scenario,
)
from tests.dialect_support import LAUNCHERS, mode_args

pytestmark = pytest.mark.usefixtures("no_leaks")


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
        *mode_args(dialect),
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


def last_event_at(run_dir: Path) -> str | None:
    """When status.json last saw an agent event; None before the first."""
    try:
        at = json.loads((run_dir / "status.json").read_text()).get("lastEventAt")
    except (OSError, ValueError):
        return None
    return at if isinstance(at, str) else None


def current_tool(run_dir: Path) -> str | None:
    """The tool status.json says is running; None when none is, or before the first."""
    try:
        tool = json.loads((run_dir / "status.json").read_text()).get("currentTool")
    except (OSError, ValueError):
        return None
    return tool if isinstance(tool, str) else None


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
    # the last message's text alone, never glued to the interim "Looking."
    assert result["finalText"] == "Fixed it."
    assert result["sessionId"]
    assert len(result["toolsUsed"]) == 1
    assert any(e["type"] == "tool_start" for e in events)


@dialects
def test_a_failed_shell_command_reaches_the_failure_hook(dialect: str, tmp_path: Path) -> None:
    log = tmp_path / "observed.jsonl"
    observer = tmp_path / "observe.py"
    observer.write_text(
        "import json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(json.load(sys.stdin)) + '\\n')\n"
    )
    hook = {"hooks": [{"command": f"{sys.executable} {observer}"}]}
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "hooks": {"PostToolUse": [hook], "PostToolUseFailure": [hook]},
                "observers": {"drainTimeout": 60},
            }
        )
    )
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Building.",
                "toolCalls": [{"name": "bash", "arguments": {"command": "make"}}],
            }
        },
        {
            "tool": {
                "name": "bash",
                "result": "make: *** [all] Error 3",
                "isError": True,
                "details": {"exit": 3},
            }
        },
        final("The build fails."),
        *END,
    ]
    code, result, events = run_in(dialect, tmp_path, steps, options=("--settings", str(settings)))
    assert code == 0, result["error"]
    assert [e["isError"] for e in events if e["type"] == "tool_end"] == [True]
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [d["hook_event_name"] for d in seen] == ["PostToolUseFailure"]
    assert "Error 3" in seen[0]["error"]


def run_unknown_agent(
    tmp_path: Path, steps: list[dict[str, Any]], *options: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run without a task of an agent the wrapper does not know by name
    (the fake, in Claude Code's format, as ``mystery-agent``): its dialect
    is recognised from its stream."""
    agent = tmp_path / "bin" / "mystery-agent"
    agent.parent.mkdir()
    agent.symlink_to(ROOT / "fixtures" / "fake_agent" / "fake-agent")
    scenario = write_scenario(tmp_path, steps)
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--run-dir", str(run_dir)]
    argv += [*options, "--", str(agent), "--dialect", "claude", "-p", "--output-format"]
    argv += ["stream-json", "--verbose", "--scenario", str(scenario), "Fix the parser"]
    proc = subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return read_result(run_dir / "result.json"), read_events(run_dir / "events.jsonl")


#: An agent that exits by itself 0.6 s after its end-of-run line (Qwen Code
#: in Claude Code's format exits 0.5-0.8 s after its result).
SLOW_EXIT: list[dict[str, Any]] = [final("Fixed it."), *END, {"sleep": 0.6}]


def test_an_agent_recognised_from_its_stream_gets_that_dialects_graces(tmp_path: Path) -> None:
    result, events = run_unknown_agent(tmp_path, SLOW_EXIT)
    assert (result["outcome"], result["dialect"], result["agent"]) == (
        "ok",
        "claude",
        "mystery-agent",
    )
    assert result["signalsSent"] == [], "an agent exiting by itself is not signalled"
    assert result["forcedCleanup"] is False
    assert result["exitCode"] == 0
    graces = [e["seconds"] for e in events if e["type"] == "grace_started"]
    assert graces == [2.0], "Claude Code's grace, not the unknown agent's"


def test_graces_given_on_the_command_line_win_over_the_recognised_dialects(
    tmp_path: Path,
) -> None:
    result, _ = run_unknown_agent(tmp_path, SLOW_EXIT, "--grace", "0.2", "--settle-grace", "0.2")
    assert result["dialect"] == "claude"
    assert [s["signal"] for s in result["signalsSent"]] == ["SIGTERM"]
    assert result["forcedCleanup"] is True


#: What Claude Code 2.1.197 and Codex 0.169 say when an answer hits the
#: output-token limit (each then exits 1).
OUTPUT_LIMIT = {
    "claude": "Claude's response exceeded the 128000 output token maximum. To configure "
    "this behavior, set the CLAUDE_CODE_MAX_OUTPUT_TOKENS environment variable.",
    "codex": "Incomplete response returned, reason: max_output_tokens",
}


@pytest.mark.parametrize("dialect", sorted(OUTPUT_LIMIT))
def test_an_answer_cut_at_the_output_limit_says_the_agents_own_reason(
    dialect: str, tmp_path: Path
) -> None:
    steps: list[dict[str, Any]] = [
        {"stderr": "WARNING: proceeding, even though we could not update PATH"},
        final("The parser drops the", "length", errorMessage=OUTPUT_LIMIT[dialect]),
        *END,
    ]
    code, result, _ = run_in(dialect, tmp_path, steps)
    assert code == 1
    assert (result["outcome"], result["stopReason"], result["exitCode"]) == ("error", "length", 1)
    assert result["error"]["kind"] == "nonzero_exit"
    message = result["error"]["message"]
    assert message.startswith("the agent exited with status 1 after its final message: ")
    assert OUTPUT_LIMIT[dialect] in message
    assert "PATH" not in message, "an unrelated stderr line is not the reason"


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
    # a failed turn without text has no final text: null, never ""
    assert result["finalText"] is None


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
    assert result["finalText"] == "Tests pass."
    # the saved stream of both attempts, read again, ends on the same text
    summary = subprocess.run(
        [
            sys.executable,
            "-m",
            "wrapper",
            "normalize",
            "--summary",
            "--dialect",
            dialect,
            str(tmp_path / "run" / "stdout.log"),
        ],
        capture_output=True,
        timeout=HANG_LIMIT,
        check=True,
    )
    assert json.loads(summary.stdout)["finalText"] == "Tests pass."
    records = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert [r["prompt"] for r in records] == ["Fix the parser", "Run the tests."]
    assert records[1]["resumed"] is True


@dialects
def test_interrupted_during_a_tool_has_no_final_text(dialect: str, tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Running the command.",
                "toolCalls": [{"name": "bash", "arguments": {"command": "make"}}],
            }
        },
        {"tool": {"name": "bash", "duration": 60, "result": "built"}},
        final("Built."),
        *END,
    ]
    scenario = write_scenario(tmp_path, steps)
    run_dir = tmp_path / "run"
    agent = ROOT / "fixtures" / "fake_agent" / LAUNCHERS[dialect]
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--run-dir"]
    argv += [str(run_dir), "--task", "Build it", "--", str(agent), *mode_args(dialect)]
    argv += ["--scenario", str(scenario)]
    proc = subprocess.Popen(argv, env=agent_env(tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL)
    try:
        # the agent is in its tool: seen as the run's current tool, except
        # for opencode, which names a tool only once it finished (so wait
        # for its first events, then give it time to start the tool)
        if dialect == "opencode":
            assert wait_until(lambda: last_event_at(run_dir) is not None)
            time.sleep(1.0)
        else:
            assert wait_until(lambda: current_tool(run_dir) is not None), dialect
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "aborted"
    # the tool-calling turn's text is interim, not the answer
    assert result["finalText"] is None


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


def test_a_rejected_api_call_keeps_its_status(tmp_path: Path) -> None:
    steps = [
        final(
            "",
            "error",
            errorMessage="Failed to authenticate. API Error: 401 invalid x-api-key",
            apiErrorStatus=401,
        ),
        *END,
    ]
    code, result, events = run_in("claude", tmp_path, steps)
    assert code == 1
    assert result["outcome"] == "error"
    assert result["stopReason"] == "error"
    assert result["error"]["kind"] == "agent_error"
    assert result["error"]["apiStatus"] == 401
    assert "401 invalid x-api-key" in result["error"]["message"]
    assert result["finalText"] is None
    assert events[-1]["error"]["apiStatus"] == 401


@dialects
def test_an_error_without_a_status_has_a_null_api_status(dialect: str, tmp_path: Path) -> None:
    code, result, _ = run_in(dialect, tmp_path, [final("", "error", errorMessage="boom"), *END])
    assert code == 1
    assert result["error"]["apiStatus"] is None


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "absent"])
def test_claude_hooks_read_claudes_own_transcript(kept: bool, tmp_path: Path) -> None:
    session = "0b6f3c1e-2d4a-4c8e-9f00-5a7b1c2d3e4f"
    config_dir = tmp_path / "claude-config"
    transcript = config_dir / "projects" / "-work-project" / f"{session}.jsonl"
    if kept:
        transcript.parent.mkdir(parents=True)
        line = {"type": "assistant", "message": {"role": "assistant", "content": "Done."}}
        transcript.write_text(json.dumps(line) + "\n")
    seen = tmp_path / "hook-input.json"
    settings = stop_gate(tmp_path, f"open({str(seen)!r}, 'w').write(sys.stdin.read())\n")
    scenario = write_scenario(tmp_path, [final("Done."), *END], sessionId=session)
    run_dir = tmp_path / "run"
    agent = ROOT / "fixtures" / "fake_agent" / "claude"
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--run-dir", str(run_dir)]
    argv += ["--settings", str(settings), "--task", "Fix it", "--"]
    argv += [str(agent), *mode_args("claude"), "--scenario", str(scenario)]
    env = agent_env(tmp_path, CLAUDE_CONFIG_DIR=str(config_dir))
    proc = subprocess.run(
        argv, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=HANG_LIMIT, check=False
    )
    assert proc.returncode == 0
    hook_input = json.loads(seen.read_text())
    assert hook_input["session_id"] == session
    expected = transcript if kept else run_dir / "events.jsonl"
    assert hook_input["transcript_path"] == str(expected)


def test_gemini_quotes_the_error_event_before_a_bare_failed_result(tmp_path: Path) -> None:
    message = "Model stream ended with an invalid chunk or missing finish reason."
    steps = [final("", "error", errorMessage=message, errorAsEvent=True), *END]
    code, result, events = run_in("gemini", tmp_path, steps)
    assert code == 1
    assert result["error"]["kind"] == "agent_error"
    assert result["error"]["message"] == f"the agent's last turn failed: {message}"
    assert result["finalText"] is None
    # (a model the price table does not know adds its own warning, cost_unknown)
    said = [e["message"] for e in events if e["type"] == "warning" and e["code"] != "cost_unknown"]
    assert said == [f"Gemini CLI: {message}"]
