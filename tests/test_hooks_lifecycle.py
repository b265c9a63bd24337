"""The run's own hook events, end to end through the fake agent:
``SessionStart`` (before each agent session's first prompt), ``StopFailure``
(a turn that failed on an API error) and ``SessionEnd`` (once the outcome is
decided, whatever it is); and what observers are given of a tool's output."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    agent_env,
    read_events,
    read_result,
    wait_until,
    wrapper_argv,
    write_scenario,
)
from tests.test_acp_e2e import HANG, result_of, start
from tests.test_hooks import (
    ALWAYS_BLOCK,
    answer,
    command,
    hook_script,
    records,
    run_cli,
    run_with,
    settings_file,
)
from wrapper.core.hook_protocol import plain_text, stop_failure_error

pytestmark = pytest.mark.usefixtures("no_leaks")


def recorder(tmp_path: Path, name: str, reply: str = "") -> str:
    """A handler that appends its input to ``NAME.jsonl`` and prints ``reply``."""
    log = tmp_path / f"{name}.jsonl"
    return hook_script(
        tmp_path,
        f"{name}.py",
        f"""
        data = json.load(sys.stdin)
        open({str(log)!r}, "a").write(json.dumps(data) + "\\n")
        sys.stdout.write({reply!r})
        """,
    )


def seen(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    log = tmp_path / f"{name}.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def hooks(**events: list[dict[str, Any]]) -> dict[str, Any]:
    return {"hooks": {event: [{"hooks": handlers}] for event, handlers in events.items()}}


def decisions(events: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "hook_decision" and e["event"] == event]


# -- SessionStart --------------------------------------------------------------------------


def test_session_start_context_goes_before_the_task_and_fires_again_on_resume(
    tmp_path: Path,
) -> None:
    start = recorder(tmp_path, "start", reply="Branch: main.")
    block = hook_script(tmp_path, "block.py", ALWAYS_BLOCK)
    settings = {**hooks(SessionStart=[command(start)], Stop=[command(block)])}
    settings["stop"] = {"maxSteers": 1}
    run = run_with(tmp_path, settings, answer("Done."), resumes=[answer("Better.")])
    assert run.result["steerCount"] == 1
    startup, resumed = seen(tmp_path, "start")
    assert (startup["hook_event_name"], startup["source"]) == ("SessionStart", "startup")
    assert startup["session_id"] is None, "no session exists before the agent starts"
    assert resumed["source"] == "resume"
    assert resumed["session_id"] == run.result["sessionId"]
    prompts = [r["prompt"] for r in records(tmp_path)]
    assert prompts == [
        "Branch: main.\n\nFix the parser",
        "Branch: main.\n\nNot good enough yet.",
    ]
    assert [d["decision"] for d in decisions(run.events, "SessionStart")] == ["allow", "allow"]


def test_session_start_context_comes_before_user_prompt_submit_context(tmp_path: Path) -> None:
    start = recorder(tmp_path, "start", reply="Session note.")
    submit = recorder(
        tmp_path,
        "submit",
        reply=json.dumps({"hookSpecificOutput": {"additionalContext": "Prompt note."}}),
    )
    settings = hooks(SessionStart=[command(start)], UserPromptSubmit=[command(submit)])
    run = run_with(tmp_path, settings, answer("Done."))
    assert run.result["success"] is True
    assert records(tmp_path)[0]["prompt"] == "Session note.\n\nFix the parser\n\nPrompt note."


def test_a_failing_session_start_handler_is_a_warning_and_the_task_goes_as_it_is(
    tmp_path: Path,
) -> None:
    broken = hook_script(tmp_path, "broken.py", "json.load(sys.stdin)\nsys.exit(4)\n")
    run = run_with(tmp_path, hooks(SessionStart=[command(broken)]), answer("Done."))
    assert run.result["success"] is True
    assert records(tmp_path)[0]["prompt"] == "Fix the parser"
    (warning,) = [w["message"] for w in run.result["warnings"] if w["code"] == "hook_failed"]
    assert warning.startswith("SessionStart handler ")
    assert "exited with status 4; it was skipped" in warning


def test_session_start_without_a_task_runs_but_cannot_add_context(tmp_path: Path) -> None:
    start = recorder(tmp_path, "start", reply="Some context.")
    run = run_with(tmp_path, hooks(SessionStart=[command(start)]), answer("Done."), task=None)
    assert run.result["success"] is True
    assert [s["source"] for s in seen(tmp_path, "start")] == ["startup"]
    (dropped,) = [w for w in run.result["warnings"] if w["code"] == "hook_context_dropped"]
    assert "--task" in dropped["message"]


# -- StopFailure ---------------------------------------------------------------------------


def test_stop_failure_fires_on_an_api_error_and_the_error_retry_still_steers(
    tmp_path: Path,
) -> None:
    failure = recorder(tmp_path, "failure")
    stop = recorder(tmp_path, "stop")
    settings = {
        **hooks(StopFailure=[command(failure)], Stop=[command(stop)]),
        "stop": {"retryOnError": True, "maxRetries": 1},
    }
    failed = [{"assistant": {"text": "", "stopReason": "error", "errorMessage": "API error: down"}}]
    run = run_with(tmp_path, settings, failed, resumes=[answer("Recovered.")])
    assert run.result["success"] is True
    assert run.result["finalText"] == "Recovered."
    assert [s["handler"] for s in run.result["steers"]] == ["retryOnError"]
    (event,) = seen(tmp_path, "failure")
    assert event["hook_event_name"] == "StopFailure"
    assert event["error"] == "unknown"
    assert event["error_details"] == "API error: down"
    assert len(seen(tmp_path, "stop")) == 1, "the Stop handlers run at the stop that passed"


def test_stop_failure_does_not_fire_on_a_successful_stop(tmp_path: Path) -> None:
    failure = recorder(tmp_path, "failure")
    run = run_with(tmp_path, hooks(StopFailure=[command(failure)]), answer("Done."))
    assert run.result["success"] is True
    assert seen(tmp_path, "failure") == []


@pytest.mark.parametrize(
    ("status", "message", "name"),
    [
        (429, "", "rate_limit"),
        (401, "", "authentication_failed"),
        (402, "", "billing_error"),
        (400, "", "invalid_request"),
        (529, "", "server_error"),
        (None, "API Error: max_output_tokens", "max_output_tokens"),
        (None, "socket hang up", "unknown"),
    ],
)
def test_stop_failure_names_the_error_as_claude_code_does(
    status: int | None, message: str, name: str
) -> None:
    assert stop_failure_error(status, message) == name


# -- SessionEnd ----------------------------------------------------------------------------


def test_session_end_fires_once_with_the_outcome_before_the_result_is_written(
    tmp_path: Path,
) -> None:
    end = recorder(tmp_path, "end")
    block = hook_script(tmp_path, "block.py", ALWAYS_BLOCK)
    settings = {**hooks(SessionEnd=[command(end)], Stop=[command(block)])}
    settings["stop"] = {"maxSteers": 1}
    run = run_with(tmp_path, settings, answer("Done."), resumes=[answer("Better.")])
    (event,) = seen(tmp_path, "end")
    assert event["hook_event_name"] == "SessionEnd"
    assert event["reason"] == "other"
    assert (event["outcome"], event["success"], event["exit_status"]) == ("ok", True, 0)
    assert event["stop_reason"] == "stop"
    assert event["error"] is None
    assert event["steer_count"] == 1
    assert [s["reason"] for s in event["steers"]] == ["Not good enough yet."]
    assert event["last_assistant_message"] == "Better."
    assert event["duration_ms"] == run.result["durationMs"]
    types = [e["type"] for e in run.events]
    (decision,) = decisions(run.events, "SessionEnd")
    assert run.events.index(decision) < types.index("result_written")


def test_session_end_fires_on_a_timeout(tmp_path: Path) -> None:
    end = recorder(tmp_path, "end")
    slow = [{"sleep": 60}, *answer("never")]
    run = run_with(tmp_path, hooks(SessionEnd=[command(end)]), slow, options=("--timeout", "2"))
    assert run.result["outcome"] == "timeout"
    (event,) = seen(tmp_path, "end")
    assert (event["outcome"], event["exit_status"]) == ("timeout", 124)
    assert event["error"]["kind"] == "timeout"


def start_run(tmp_path: Path, settings: dict[str, Any], steps: list[dict[str, Any]]) -> Any:
    scenario = write_scenario(tmp_path, steps)
    path = settings_file(tmp_path, settings)
    argv = wrapper_argv(tmp_path / "run", scenario, options=["--settings", str(path)])
    return subprocess.Popen(argv, env=agent_env(tmp_path), stdout=subprocess.DEVNULL)


def test_session_end_fires_when_a_signal_aborts_the_run(tmp_path: Path) -> None:
    end = recorder(tmp_path, "end")
    proc = start_run(tmp_path, hooks(SessionEnd=[command(end)]), [{"sleep": 60}])
    try:
        assert wait_until((tmp_path / "record.jsonl").exists)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    (event,) = seen(tmp_path, "end")
    assert event["outcome"] == "aborted"
    assert event["error"]["kind"] == "interrupted"


def test_a_second_signal_cuts_session_end_and_the_result_is_still_written(
    tmp_path: Path,
) -> None:
    started = tmp_path / "end-started"
    end = hook_script(tmp_path, "end.py", f"open({str(started)!r}, 'w').close()\ntime.sleep(120)\n")
    proc = start_run(tmp_path, hooks(SessionEnd=[command(end)]), [{"sleep": 60}])
    try:
        assert wait_until((tmp_path / "record.jsonl").exists)
        proc.send_signal(signal.SIGTERM)
        assert wait_until(started.exists)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    result = read_result(tmp_path / "run" / "result.json")
    assert result["outcome"] == "aborted"
    (cut,) = [w["message"] for w in result["warnings"] if w["message"].startswith("SessionEnd")]
    assert "were stopped by a signal that came while they ran" in cut


def test_session_end_handlers_are_cut_at_their_bound(tmp_path: Path) -> None:
    end = hook_script(tmp_path, "end.py", "json.load(sys.stdin)\ntime.sleep(120)\n")
    run = run_with(tmp_path, hooks(SessionEnd=[command(end)]), answer("Done."))
    assert run.returncode == 0
    assert run.result["success"] is True
    (cut,) = [w["message"] for w in run.result["warnings"] if w["code"] == "hook_failed"]
    assert "were stopped after 5s, their bound" in cut
    assert run.elapsed < 60  # generous: the handler would take 120 s


def test_session_end_is_in_the_event_log(tmp_path: Path) -> None:
    end = recorder(tmp_path, "end")
    run = run_with(tmp_path, hooks(SessionEnd=[command(end)]), answer("Done."))
    logged = read_events(tmp_path / "run" / "events.jsonl")
    (decision,) = decisions(logged, "SessionEnd")
    assert decision["decision"] == "allow"
    assert run.result["success"] is True


# -- what observers are given --------------------------------------------------------------


def test_observers_get_tool_output_without_control_characters(tmp_path: Path) -> None:
    observer = recorder(tmp_path, "observed")
    output = "\x1b[32mok\x1b[0m\tline 1\r\nline 2\x07\x01 done"
    steps: list[dict[str, Any]] = [
        {"assistant": {"text": "One tool.", "toolCalls": [{"name": "bash", "arguments": {}}]}},
        {"tool": {"name": "bash", "result": output}},
        {"assistant": {"text": "Two.", "toolCalls": [{"name": "bash", "arguments": {}}]}},
        {"tool": {"name": "bash", "result": "\x1b[31mfailed\x1b[0m\x08!", "isError": True}},
        *answer("Done."),
    ]
    settings = {
        **hooks(PostToolUse=[command(observer)], PostToolUseFailure=[command(observer)]),
        "observers": {"drainTimeout": 60},
    }
    run = run_with(tmp_path, settings, steps)
    assert run.result["success"] is True
    by_event = {e["hook_event_name"]: e for e in seen(tmp_path, "observed")}
    assert by_event["PostToolUse"]["tool_response"] == "ok\tline 1\nline 2 done"
    assert by_event["PostToolUseFailure"]["error"] == "failed!"


def test_plain_text_keeps_printable_text_whole() -> None:
    text = "naïve — 日本語\tcol\nnext"
    assert plain_text(text) == text
    assert plain_text("a\x1b]0;title\x07b\x9bc\x7f") == "abc"


# -- hook-test ------------------------------------------------------------------------------


@pytest.mark.parametrize("event", ["SessionStart", "SessionEnd", "StopFailure"])
def test_hook_test_runs_the_run_events_handlers(tmp_path: Path, event: str) -> None:
    handler = recorder(tmp_path, "seen", reply="Context for the session.")
    settings = settings_file(tmp_path, hooks(**{event: [command(handler)]}))
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"hook_event_name": event, "source": "startup"}))
    proc = run_cli(tmp_path, "hook-test", "--settings", str(settings), "--event", str(path))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["event"], report["decision"]) == (event, "allow")
    (ran,) = report["handlers"]
    assert ran["additionalContext"] == "Context for the session."
    assert [s["hook_event_name"] for s in seen(tmp_path, "seen")] == [event]


def test_a_steer_on_a_live_session_starts_no_new_session(tmp_path: Path) -> None:
    start_hook = recorder(tmp_path, "start", reply="Session note.")
    block = hook_script(tmp_path, "block.py", ALWAYS_BLOCK)
    settings = hooks(SessionStart=[command(start_hook)], Stop=[command(block)])
    settings["stop"] = {"maxSteers": 1}
    path = settings_file(tmp_path, settings)
    steps: list[dict[str, Any]] = [{"assistant": {"text": "Fixed.", "stopReason": "stop"}}]
    resumes = [[{"assistant": {"text": "Better.", "stopReason": "stop"}}]]
    proc = start(tmp_path, steps, "--task", "Fix it", "--settings", str(path), resumes=resumes)
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert result_of(tmp_path)["steerCount"] == 1
    assert [s["source"] for s in seen(tmp_path, "start")] == ["startup"]
    out = [
        json.loads(line)["msg"]
        for line in (tmp_path / "run" / "protocol.jsonl").read_text().splitlines()
    ]
    prompts = [m["params"]["prompt"][0]["text"] for m in out if m.get("method") == "session/prompt"]
    assert prompts == ["Session note.\n\nFix it", "Not good enough yet."]
