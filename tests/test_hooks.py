"""Stop hooks and steering, end to end: the real wrapper, the fake agent, real hook scripts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    FAKE_PI,
    HANG_LIMIT,
    ROOT,
    Run,
    agent_env,
    invoke,
    read_result,
    run_wrapper,
    wait_until,
    wrapper_argv,
    write_scenario,
)

pytestmark = pytest.mark.usefixtures("no_leaks")

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def final(text: str, stop: str = "stop") -> dict[str, Any]:
    return {"assistant": {"text": text, "stopReason": stop}}


def answer(text: str) -> list[dict[str, Any]]:
    return [final(text), *END]


def running_tests() -> list[dict[str, Any]]:
    return [
        {
            "assistant": {
                "text": "Running the tests.",
                "toolCalls": [{"name": "bash", "arguments": {"command": "pytest -q"}}],
            }
        },
        {"tool": {"name": "bash", "duration": 0.1, "result": "12 passed"}},
        final("All 12 tests pass."),
        *END,
    ]


def hook_script(tmp_path: Path, name: str, body: str) -> str:
    """A Python hook script; returns the command string that runs it."""
    path = tmp_path / name
    path.write_text("import json, os, sys, time\n" + textwrap.dedent(body))
    return f"{sys.executable} {path}"


def settings_file(tmp_path: Path, data: dict[str, Any], name: str = "settings.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def stop_hooks(*handlers: dict[str, Any], event: str = "Stop") -> dict[str, Any]:
    return {"hooks": {event: [{"hooks": list(handlers)}]}}


def command(cmd: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": cmd, **extra}


def records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_with(
    tmp_path: Path,
    settings: dict[str, Any] | None,
    steps: list[dict[str, Any]],
    *,
    resumes: list[list[dict[str, Any]]] | None = None,
    options: tuple[str, ...] = (),
    task: str | None = "Fix the parser",
) -> Run:
    opts = list(options)
    if settings is not None:
        opts += ["--settings", str(settings_file(tmp_path, settings))]
    extra = {"resumes": resumes} if resumes is not None else None
    return run_wrapper(tmp_path, steps, task=task, options=opts, scenario_extra=extra)


BLOCK_ONCE = """
    event = json.load(sys.stdin)
    if not event["stop_hook_active"]:
        print(json.dumps({"decision": "block", "reason": "You did not run the tests."}))
"""

ALWAYS_BLOCK = """
    json.load(sys.stdin)
    print(json.dumps({"decision": "block", "reason": "Not good enough yet."}))
"""


# -- steering ------------------------------------------------------------------------


def test_blocked_stop_steers_the_agent_in_the_same_session(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", BLOCK_ONCE)
    run = run_with(
        tmp_path,
        stop_hooks(command(gate)),
        answer("Fixed the parser."),
        resumes=[running_tests()],
    )
    result = run.result
    assert run.returncode == 0, run.stderr
    assert result["success"] is True
    assert result["finalText"] == "All 12 tests pass."
    assert result["stopAllowedBy"] == "handlers"
    assert result["steerCount"] == 1
    assert result["maxSteers"] == 3
    (steer,) = result["steers"]
    assert (steer["attempt"], steer["reason"]) == (2, "You did not run the tests.")
    assert steer["handler"].endswith("gate.py")
    assert [a["attempt"] for a in result["attempts"]] == [1, 2]
    assert result["toolsUsed"] == ["bash"]
    # Usage covers both attempts: the fake reports 100 input tokens per message.
    assert result["usage"]["input"] == 300

    first, second = records(tmp_path)
    assert first["prompt"] == "Fix the parser"
    assert second["prompt"] == "You did not run the tests."
    assert first["session"] == second["session"] == str(run.run_dir / "session.jsonl")
    assert second["resumed"] is True
    assert second["env"]["AGENT_WRAPPER_ATTEMPT"] == "2"

    attempts_seen = {e["attempt"] for e in run.events if e["type"] == "assistant_message"}
    assert attempts_seen == {1, 2}
    decisions = [e["decision"] for e in run.events if e["type"] == "hook_decision"]
    assert decisions == ["block", "allow"]
    assert [e["nextAttempt"] for e in run.events if e["type"] == "steer"] == [2]


def test_a_hook_that_always_blocks_stops_at_the_steer_limit(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", ALWAYS_BLOCK)
    run = run_with(
        tmp_path,
        stop_hooks(command(gate)),
        answer("Done."),
        options=("--max-steers", "2"),
    )
    result = run.result
    assert len(result["attempts"]) == 3
    assert result["steerCount"] == 2
    assert result["stopAllowedBy"] == "max_steers"
    assert result["success"] is True, "the agent's own answer was fine; the limit allowed it"
    assert run.returncode == 0
    assert any(w["code"] == "max_steers_reached" for w in result["warnings"])
    assert len(records(tmp_path)) == 3
    # the handlers run once more at the limit, only to learn that the gate did not pass
    assert [e["decision"] for e in run.events if e["type"] == "hook_decision"] == ["block"] * 3
    (line,) = [ln for ln in run.stderr.splitlines() if "never passed" in ln]
    assert "Not good enough yet." in line
    assert "--fail-on-max-steers" in line


def test_fail_on_max_steers_makes_a_gate_that_never_passed_a_failure(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", ALWAYS_BLOCK)
    run = run_with(
        tmp_path,
        stop_hooks(command(gate)),
        answer("Done."),
        options=("--max-steers", "1", "--fail-on-max-steers"),
    )
    assert run.returncode == 1
    assert run.result["outcome"] == "error"
    assert run.result["error"]["kind"] == "gate_not_passed"
    assert "Not good enough yet." in run.result["error"]["message"]
    assert run.result["steerCount"] == 1
    assert "never passed" in run.stderr.splitlines()[-1]

    again = tmp_path / "settings"
    again.mkdir()
    settings = {**stop_hooks(command(gate)), "stop": {"maxSteers": 0, "failOnMaxSteers": True}}
    run = run_with(again, settings, answer("Done."))
    assert (run.returncode, run.result["error"]["kind"]) == (1, "gate_not_passed")
    assert len(run.result["attempts"]) == 1


def test_a_gate_that_passes_at_the_steer_limit_ends_ok_without_a_warning(
    tmp_path: Path,
) -> None:
    gate = hook_script(tmp_path, "gate.py", BLOCK_ONCE)
    run = run_with(
        tmp_path,
        stop_hooks(command(gate)),
        answer("Done."),
        options=("--max-steers", "1", "--fail-on-max-steers"),
    )
    assert (run.returncode, run.result["outcome"]) == (0, "ok")
    assert run.result["stopAllowedBy"] == "handlers"
    assert not [w for w in run.result["warnings"] if w["code"] == "max_steers_reached"]
    assert "never passed" not in run.stderr


def test_the_live_view_says_the_gate_never_passed(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", ALWAYS_BLOCK)
    scenario = write_scenario(tmp_path, answer("Done."))
    options = ["--max-steers", "1", "--output", "pretty"]
    options += ["--settings", str(settings_file(tmp_path, stop_hooks(command(gate))))]
    proc = subprocess.run(
        wrapper_argv(tmp_path / "run", scenario, task="Fix it", options=options),
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0
    shown = proc.stdout.decode()
    (line,) = [ln for ln in shown.splitlines() if "never passed" in ln]
    assert "--fail-on-max-steers" in line
    assert "■ ok" in shown
    assert b"never passed" not in proc.stderr, "the live view already said it"


def test_settings_max_steers_is_overridden_by_the_flag(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", ALWAYS_BLOCK)
    settings = {**stop_hooks(command(gate)), "stop": {"maxSteers": 5}}
    run = run_with(tmp_path, settings, answer("Done."), options=("--max-steers", "1"))
    assert run.result["maxSteers"] == 1
    assert len(run.result["attempts"]) == 2

    run_dir_two = tmp_path / "two"
    run_dir_two.mkdir()
    run = run_with(run_dir_two, {**settings, "stop": {"maxSteers": 0}}, answer("Done."))
    assert run.result["maxSteers"] == 0
    assert run.result["stopAllowedBy"] == "max_steers"
    assert len(run.result["attempts"]) == 1


def test_extend_max_steers_raises_the_limit(tmp_path: Path) -> None:
    gate = hook_script(
        tmp_path,
        "gate.py",
        """
        event = json.load(sys.stdin)
        print(json.dumps({"decision": "block", "reason": "again", "extendMaxSteers": 2}))
        """,
    )
    run = run_with(
        tmp_path, stop_hooks(command(gate)), answer("Done."), options=("--max-steers", "1")
    )
    assert run.result["maxSteers"] == 2
    assert run.result["steerCount"] == 2
    assert run.result["stopAllowedBy"] == "max_steers"


def test_exit_2_blocks_with_stderr_and_allow_false_blocks_with_its_prompt(tmp_path: Path) -> None:
    exit2 = hook_script(
        tmp_path,
        "exit2.py",
        """
        if not json.load(sys.stdin)["stop_hook_active"]:
            sys.stderr.write("Run the linter first.\\n")
            sys.exit(2)
        """,
    )
    allow_false = hook_script(
        tmp_path,
        "allow_false.py",
        """
        if json.load(sys.stdin)["steer_count"] == 1:
            print(json.dumps({"allow": False, "prompt": "Now update the changelog."}))
        """,
    )
    run = run_with(
        tmp_path,
        stop_hooks(command(exit2), command(allow_false)),
        answer("Done."),
    )
    reasons = [s["reason"] for s in run.result["steers"]]
    assert reasons == ["Run the linter first.", "Now update the changelog."]
    assert [r["prompt"] for r in records(tmp_path)][1:] == reasons
    assert run.result["success"] is True


def test_continue_false_ends_the_run_and_wins_over_a_block(tmp_path: Path) -> None:
    gate = hook_script(
        tmp_path,
        "gate.py",
        """
        json.load(sys.stdin)
        print(json.dumps({"decision": "block", "reason": "keep going",
                          "continue": False, "stopReason": "Budget exhausted, stopping."}))
        """,
    )
    run = run_with(tmp_path, stop_hooks(command(gate)), answer("Partial fix."))
    result = run.result
    assert result["stopAllowedBy"] == "hook_continue_false"
    assert result["hookStopMessage"] == "Budget exhausted, stopping."
    assert result["stopReason"] == "stop", "the message is for people, never a stop reason"
    assert result["steerCount"] == 0
    assert len(records(tmp_path)) == 1


def test_first_block_wins_and_later_handlers_do_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "second-ran"
    first = hook_script(tmp_path, "first.py", BLOCK_ONCE)
    second = hook_script(
        tmp_path,
        "second.py",
        f"""
        json.load(sys.stdin)
        open({str(marker)!r}, "a").write("ran\\n")
        """,
    )
    run = run_with(tmp_path, stop_hooks(command(first), command(second)), answer("Done."))
    assert run.result["steerCount"] == 1
    # Skipped at the blocked stop, run at the allowed one.
    assert marker.read_text() == "ran\n"


# -- fail-open -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "warning"),
    [
        ("raise RuntimeError('boom')", "exited with status 1"),
        ("print('{not json')", "malformed JSON"),
        ("print(json.dumps({'decision': 'block'}))", "blocked without a reason"),
        ("sys.exit(2)", "gave no reason"),
        ("os.kill(os.getpid(), 9)", "killed by signal 9"),
    ],
    ids=["crash", "malformed", "no-reason", "exit2-silent", "killed"],
)
def test_a_broken_hook_allows_the_stop_with_a_warning(
    tmp_path: Path, body: str, warning: str
) -> None:
    gate = hook_script(tmp_path, "gate.py", "json.load(sys.stdin)\n" + body + "\n")
    run = run_with(tmp_path, stop_hooks(command(gate)), answer("Done."))
    result = run.result
    assert run.returncode == 0
    assert result["success"] is True
    assert result["stopAllowedBy"] == "handlers"
    assert result["steerCount"] == 0
    (failed,) = [w for w in result["warnings"] if w["code"] == "hook_failed"]
    assert warning in failed["message"]
    assert "the stop was allowed" in failed["message"]


@pytest.mark.parametrize(
    ("body", "options", "settings", "warning"),
    [
        ("raise RuntimeError('boom')", ("--hooks-fail-closed",), {}, "exited with status 1"),
        ("print('{not json')", (), {"stop": {"failClosed": True}}, "malformed JSON"),
        ("time.sleep(120)", ("--hooks-fail-closed",), {}, "timed out after 1s"),
    ],
    ids=["crash-flag", "garbage-settings", "timeout-flag"],
)
def test_fail_closed_hooks_end_the_run_when_a_stop_handler_fails(
    tmp_path: Path, body: str, options: tuple[str, ...], settings: dict[str, Any], warning: str
) -> None:
    gate = hook_script(tmp_path, "gate.py", "json.load(sys.stdin)\n" + body + "\n")
    ran = tmp_path / "second-ran"
    second = hook_script(tmp_path, "second.py", f"open({str(ran)!r}, 'w').close()\n")
    hooks = stop_hooks(command(gate, timeout=1), command(second))
    run = run_with(tmp_path, {**hooks, **settings}, answer("Done."), options=options)
    result = run.result
    assert run.returncode == 1
    assert (result["outcome"], result["success"]) == ("error", False)
    assert result["error"]["kind"] == "hook_failed"
    assert f"Stop handler {gate}" in result["error"]["message"]
    assert warning in result["error"]["message"]
    assert result["stopAllowedBy"] == "hook_failed"
    assert "agent-wrapper: error: Stop handler " in run.stderr
    assert not ran.exists(), "the handlers after the failed one do not run"
    config = json.loads((run.run_dir / "config.json").read_text())
    assert config["hooksFailClosed"] is True


def test_fail_closed_hooks_still_block_and_allow_as_usual(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", BLOCK_ONCE)
    run = run_with(
        tmp_path,
        stop_hooks(command(gate)),
        answer("Claimed."),
        resumes=[running_tests()],
        options=("--hooks-fail-closed",),
    )
    assert run.returncode == 0
    assert run.result["steerCount"] == 1
    assert run.result["stopAllowedBy"] == "handlers"


def test_a_hanging_hook_is_killed_at_its_timeout(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", "time.sleep(120)\n")
    started = time.monotonic()
    run = run_with(tmp_path, stop_hooks(command(gate, timeout=1)), answer("Done."))
    assert time.monotonic() - started < 20
    assert run.result["success"] is True
    (failed,) = [w for w in run.result["warnings"] if w["code"] == "hook_failed"]
    assert "timed out after 1s" in failed["message"]
    # no_leaks checks that the sleeping hook (its path is under tmp_path) is gone.


# -- when steering is impossible --------------------------------------------------------


def test_without_a_task_a_block_cannot_steer(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", ALWAYS_BLOCK)
    run = run_with(tmp_path, stop_hooks(command(gate)), answer("Done."), task=None)
    result = run.result
    assert run.returncode == 1
    assert result["success"] is False
    assert result["stopAllowedBy"] == "cannot_steer"
    assert result["error"]["kind"] == "steer_failed"
    assert "no --task" in result["error"]["message"]
    assert result["finalText"] == "Done."


def test_an_agent_without_a_session_cannot_be_steered(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", ALWAYS_BLOCK)
    scenario = write_scenario(tmp_path, answer("Done."))
    settings = settings_file(tmp_path, stop_hooks(command(gate)))
    argv = [*wrapper_argv(tmp_path / "run", scenario, options=["--settings", str(settings)])]
    argv.append("--no-session")
    proc = subprocess.run(
        argv, capture_output=True, timeout=HANG_LIMIT, env=agent_env(tmp_path), check=False
    )
    result = read_result(tmp_path / "run" / "result.json")
    assert proc.returncode == 1
    assert result["stopAllowedBy"] == "cannot_steer"
    assert "--no-session" in result["error"]["message"]


def test_an_agent_that_cannot_be_restarted_ends_with_a_steer_failure(tmp_path: Path) -> None:
    agent = tmp_path / "pi"
    agent.write_text(f'#!/bin/sh\nexec {FAKE_PI} "$@"\n')
    agent.chmod(0o755)
    # The gate removes the agent, so the resume cannot start.
    gate = hook_script(tmp_path, "gate.py", f"    os.remove({str(agent)!r})" + ALWAYS_BLOCK)
    scenario = write_scenario(tmp_path, answer("First answer."))
    settings = settings_file(tmp_path, stop_hooks(command(gate)))
    argv = wrapper_argv(
        tmp_path / "run", scenario, options=["--settings", str(settings)], agent=agent
    )
    proc = subprocess.run(
        argv, capture_output=True, timeout=HANG_LIMIT, env=agent_env(tmp_path), check=False
    )
    result = read_result(tmp_path / "run" / "result.json")
    assert proc.returncode == 1
    assert result["error"]["kind"] == "steer_failed"
    assert "could not be restarted" in result["error"]["message"]
    assert result["finalText"] == "First answer.", "the last attempt that ran tells the answer"
    assert result["attempts"][-1]["pid"] is None


# -- time limits and signals -------------------------------------------------------------


def test_attempt_timeout_goes_through_the_stop_hooks(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", BLOCK_ONCE)
    run = run_with(
        tmp_path,
        stop_hooks(command(gate)),
        [{"sleep": 60}],
        resumes=[answer("Finished after the nudge.")],
        # Each attempt has this limit: the resumed one must be able to start
        # and answer within it on a loaded machine.
        options=("--attempt-timeout", "4"),
    )
    result = run.result
    assert result["success"] is True
    assert result["finalText"] == "Finished after the nudge."
    assert result["steerCount"] == 1
    first_stop = next(e for e in run.events if e["type"] == "hook_decision")
    assert first_stop["attempt"] == 1


def test_attempt_timeout_without_hooks_is_a_timeout(tmp_path: Path) -> None:
    run = run_with(tmp_path, None, [{"sleep": 60}], options=("--attempt-timeout", "1"))
    assert run.returncode == 124
    assert run.result["outcome"] == "timeout"
    assert run.result["error"]["kind"] == "attempt_timeout"
    assert run.result["stopAllowedBy"] == "no_handlers"


def test_the_whole_run_timeout_ends_hooks_too(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", "time.sleep(120)\n")
    started = time.monotonic()
    run = run_with(
        tmp_path,
        stop_hooks(command(gate)),
        answer("Done."),
        options=("--timeout", "2"),
    )
    assert time.monotonic() - started < 20
    assert run.returncode == 124
    assert run.result["outcome"] == "timeout"
    assert run.result["error"]["kind"] == "timeout"
    assert run.result["stopAllowedBy"] is None


def test_a_signal_during_a_hook_aborts_the_run(tmp_path: Path) -> None:
    started_file = tmp_path / "hook-started"
    gate = hook_script(
        tmp_path, "gate.py", f"open({str(started_file)!r}, 'w').close()\ntime.sleep(120)\n"
    )
    scenario = write_scenario(tmp_path, answer("Done."))
    settings = settings_file(tmp_path, stop_hooks(command(gate)))
    argv = wrapper_argv(tmp_path / "run", scenario, options=["--settings", str(settings)])
    proc = subprocess.Popen(argv, env=agent_env(tmp_path), stdout=subprocess.DEVNULL)
    try:
        assert wait_until(started_file.exists)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    result = read_result(tmp_path / "run" / "result.json")
    assert result["outcome"] == "aborted"
    assert result["error"]["kind"] == "interrupted"


# -- hook input, events, matching ----------------------------------------------------------


def test_hook_input_says_the_permission_mode_claudes_command_line_gives(tmp_path: Path) -> None:
    dump = tmp_path / "input.json"
    gate = hook_script(tmp_path, "dump.py", f"open({str(dump)!r}, 'w').write(sys.stdin.read())\n")
    scenario = write_scenario(tmp_path, answer("Done."))
    settings = settings_file(tmp_path, stop_hooks(command(gate)))
    argv = wrapper_argv(
        tmp_path / "run",
        scenario,
        options=["--settings", str(settings)],
        agent=ROOT / "fixtures" / "fake_agent" / "claude",
    )
    for flags, mode in (
        (["--permission-mode", "acceptEdits"], "acceptEdits"),
        (["--dangerously-skip-permissions"], "bypassPermissions"),
    ):
        proc = subprocess.run(
            [*argv, "--output-format=stream-json", *flags],
            capture_output=True,
            timeout=HANG_LIMIT,
            env=agent_env(tmp_path),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(dump.read_text())["permission_mode"] == mode


def test_stop_hook_input_carries_the_claude_and_wrapper_fields(tmp_path: Path) -> None:
    dump = tmp_path / "input.json"
    gate = hook_script(
        tmp_path,
        "dump.py",
        f"""
        data = json.load(sys.stdin)
        data["env_project_dir"] = os.environ.get("CLAUDE_PROJECT_DIR")
        open({str(dump)!r}, "w").write(json.dumps(data))
        """,
    )
    run = run_with(
        tmp_path,
        stop_hooks(command(gate)),
        running_tests(),
        options=("--label", "worker-7"),
        task="Make the tests pass",
    )
    data = json.loads(dump.read_text())
    assert data["hook_event_name"] == "Stop"
    assert data["permission_mode"] == "default"
    assert data["stop_hook_active"] is False
    assert data["last_assistant_message"] == "All 12 tests pass."
    assert data["session_id"] == run.result["sessionId"]
    assert data["transcript_path"] == str(run.run_dir / "session.jsonl")
    assert data["cwd"] == str(tmp_path)
    assert data["env_project_dir"] == str(tmp_path)
    assert data["run_id"] == run.result["runId"]
    assert data["agent_type"] == "worker-7"
    assert data["task"] == "Make the tests pass"
    assert (data["outcome"], data["stop_reason"], data["raw_stop_reason"]) == (
        "ok",
        "stop",
        "stop",
    )
    assert data["error"] is None
    assert data["usage"]["input"] == 200
    assert data["tools_used"] == ["bash"]
    assert (data["steer_count"], data["max_steers"]) == (0, 3)
    assert data["duration_ms"] >= 0


def test_subagent_runs_fire_subagent_stop(tmp_path: Path) -> None:
    sub = hook_script(tmp_path, "sub.py", BLOCK_ONCE)
    top = hook_script(tmp_path, "top.py", ALWAYS_BLOCK)
    settings = {
        "hooks": {
            "SubagentStop": [{"hooks": [command(sub)]}],
            "Stop": [{"hooks": [command(top)]}],
        }
    }
    run = run_with(tmp_path, settings, answer("Done."), options=("--subagent",))
    assert run.result["steerCount"] == 1
    assert {e["event"] for e in run.events if e["type"] == "hook_started"} == {"SubagentStop"}


def test_error_retry_steers_before_user_handlers(tmp_path: Path) -> None:
    settings = {"stop": {"retryOnError": True, "maxRetries": 1}}
    run = run_with(
        tmp_path,
        settings,
        answer("I was unable to build it: the compiler raised an exception."),
        resumes=[answer("I was unable to build it again."), answer("never played")],
    )
    result = run.result
    assert result["steerCount"] == 1, "maxRetries bounds the built-in retries"
    (steer,) = result["steers"]
    assert steer["handler"] == "retryOnError"
    assert steer["reason"].startswith("The previous approach hit an error.")
    assert records(tmp_path)[1]["prompt"] == steer["reason"]
    assert result["stopAllowedBy"] == "no_handlers"


def test_error_retry_leaves_successful_answers_alone(tmp_path: Path) -> None:
    settings = {"stop": {"retryOnError": True}}
    run = run_with(tmp_path, settings, answer("Fixed the error; all tests pass successfully."))
    assert run.result["steerCount"] == 0


def test_user_prompt_submit_adds_context_and_can_refuse(tmp_path: Path) -> None:
    context = hook_script(
        tmp_path,
        "context.py",
        """
        data = json.load(sys.stdin)
        print(json.dumps({"hookSpecificOutput": {"additionalContext": "Repo uses tabs."}}))
        """,
    )
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [command(context)]}]}}
    run = run_with(tmp_path, settings, answer("Done."))
    assert run.result["success"] is True
    assert records(tmp_path)[0]["prompt"] == "Fix the parser\n\nRepo uses tabs."

    refuse = hook_script(
        tmp_path,
        "refuse.py",
        "json.load(sys.stdin)\nprint('no secrets', file=sys.stderr)\nsys.exit(2)\n",
    )
    blocked_dir = tmp_path / "blocked"
    blocked_dir.mkdir()
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [command(refuse)]}]}}
    run = run_with(blocked_dir, settings, answer("Done."))
    assert run.returncode == 1
    assert run.result["outcome"] == "refused"
    assert run.result["error"]["kind"] == "prompt_blocked"
    assert "no secrets" in run.result["error"]["message"]
    assert records(blocked_dir) == [], "the agent never started"


def test_subagent_start_context_is_appended_to_the_task(tmp_path: Path) -> None:
    context = hook_script(tmp_path, "context.py", "json.load(sys.stdin)\nprint('Budget: 5 min.')\n")
    settings = {"hooks": {"SubagentStart": [{"hooks": [command(context)]}]}}
    run_with(tmp_path, settings, answer("Done."), options=("--subagent",))
    assert records(tmp_path)[0]["prompt"] == "Fix the parser\n\nBudget: 5 min."


def test_post_tool_use_observers_follow_the_matcher(tmp_path: Path) -> None:
    log = tmp_path / "observed.jsonl"
    observer = hook_script(
        tmp_path,
        "observe.py",
        f"""
        data = json.load(sys.stdin)
        open({str(log)!r}, "a").write(json.dumps(data) + "\\n")
        """,
    )
    settings = {
        "hooks": {
            "PostToolUse": [
                {"matcher": "bash|read", "hooks": [command(observer)]},
                {"matcher": "Edit", "hooks": [command(observer)]},
            ],
            "PostToolUseFailure": [{"matcher": "*", "hooks": [command(observer)]}],
            "PreCompact": [{"hooks": [command(observer)]}],
        },
        # Room for slow starts on a loaded machine: each observer must finish.
        "observers": {"drainTimeout": 60},
    }
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Two tools.",
                "toolCalls": [
                    {"name": "bash", "arguments": {"command": "make"}},
                    {"name": "write", "arguments": {"path": "x"}},
                ],
            }
        },
        {"tool": {"name": "bash", "result": "built"}},
        {"tool": {"name": "write", "result": "disk full", "isError": True}},
        {"compaction": {"reason": "threshold"}},
        *answer("Done."),
    ]
    run = run_with(tmp_path, settings, steps)
    assert run.result["success"] is True
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    by_event = {d["hook_event_name"]: d for d in seen}
    assert len(seen) == 3, "PostToolUse (bash), PostToolUseFailure (write), PreCompact"
    assert by_event["PreCompact"]["trigger"] == "auto"
    bash = by_event["PostToolUse"]
    assert (bash["tool_name"], bash["tool_input"], bash["tool_response"]) == (
        "bash",
        {"command": "make"},
        "built",
    )
    failure = by_event["PostToolUseFailure"]
    assert (failure["tool_name"], failure["error"]) == ("write", "disk full")


def test_a_failing_observer_is_a_warning_shown_at_the_end(tmp_path: Path) -> None:
    observer = hook_script(tmp_path, "observe.py", "json.load(sys.stdin)\nsys.exit(3)\n")
    settings = {"hooks": {"PostToolUse": [{"hooks": [command(observer)]}]}}
    steps: list[dict[str, Any]] = [
        {"assistant": {"text": "One tool.", "toolCalls": [{"name": "bash", "arguments": {}}]}},
        {"tool": {"name": "bash", "result": "ok"}},
        *answer("Done."),
    ]
    run = run_with(tmp_path, settings, steps, options=("--output", "quiet"))
    assert run.returncode == 0
    (failed,) = [w for w in run.result["warnings"] if w["code"] == "hook_failed"]
    assert failed["message"].startswith("PostToolUse handler ")
    assert "exited with status 3" in failed["message"]
    assert f"agent-wrapper: warning: {failed['message']}" in run.stderr.splitlines()


def test_an_observer_still_running_at_the_end_is_cut_after_the_drain(tmp_path: Path) -> None:
    sleeper = hook_script(tmp_path, "sleeper.py", "import time; time.sleep(600)")
    settings = {
        "hooks": {"PostToolUse": [{"hooks": [command(sleeper)]}]},
        "observers": {"drainTimeout": 0.5},
    }
    steps: list[dict[str, Any]] = [
        {"assistant": {"text": "One tool.", "toolCalls": [{"name": "bash", "arguments": {}}]}},
        {"tool": {"name": "bash", "result": "ok"}},
        *answer("Done."),
    ]
    run = run_with(tmp_path, settings, steps)
    assert run.result["success"] is True
    cut = [w["message"] for w in run.result["warnings"] if w["code"] == "hook_observers_cut"]
    assert cut == [
        "observer hooks were still running when the run ended; "
        "stopped them after 0.5s (observers.drainTimeout)"
    ]


def test_an_event_name_far_from_any_known_one_stays_a_note(tmp_path: Path) -> None:
    settings = {"hooks": {"BeforeDeploy": [{"hooks": [command("true")]}]}}
    run = run_with(tmp_path, settings, answer("Done."))
    assert run.returncode == 0
    notes = [w["message"] for w in run.result["warnings"] if w["code"] == "settings_note"]
    assert any("hooks.BeforeDeploy: unknown hook event" in n for n in notes)


def test_hook_failures_and_settings_notes_end_a_quiet_run_on_stderr(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", "json.load(sys.stdin)\nsys.exit(5)\n")
    settings = {**stop_hooks(command(gate)), "permissions": {"allow": ["Bash"]}}
    run = run_with(tmp_path, settings, answer("Done."), options=("--output", "quiet"))
    assert run.returncode == 0
    lines = run.stderr.splitlines()
    tail = lines[-2:]
    assert tail[0].startswith("agent-wrapper: warning: ")
    assert "'permissions'" in tail[0]
    assert tail[1].startswith("agent-wrapper: warning: Stop handler ")
    assert "exited with status 5" in tail[1]
    assert "the stop was allowed" in tail[1]
    codes = [w["code"] for w in run.result["warnings"]]
    assert codes.count("hook_failed") == 1
    assert codes.count("settings_note") == 1


def test_unenforceable_events_are_reported_loudly(tmp_path: Path) -> None:
    settings = {"hooks": {"PermissionRequest": [{"hooks": [command("true")]}]}}
    run = run_with(tmp_path, settings, answer("Done."))
    assert "NOT ENFORCED" in run.stderr
    notes = [w["message"] for w in run.result["warnings"] if w["code"] == "settings_note"]
    assert any("PermissionRequest" in n and "NOT ENFORCED" in n for n in notes)


def test_pre_tool_use_is_not_enforced_on_an_agent_without_hooks_of_its_own(
    tmp_path: Path,
) -> None:
    settings = {"hooks": {"PreToolUse": [{"matcher": "shell", "hooks": [command("true")]}]}}
    scenario = write_scenario(tmp_path, answer("Done."))
    path = settings_file(tmp_path, settings)
    argv = wrapper_argv(tmp_path / "run", scenario, options=["--settings", str(path)])
    codex = tmp_path / "codex"
    codex.symlink_to(ROOT / "fixtures" / "fake_agent" / "fake-agent")
    argv[argv.index("--") + 1 :] = [str(codex), "exec", "--json", "--scenario", str(scenario)]
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = read_result(tmp_path / "run" / "result.json")
    notes = [w["message"] for w in result["warnings"] if w["code"] == "settings_note"]
    assert any("hooks.PreToolUse: NOT ENFORCED" in n for n in notes)


def test_a_live_view_shows_a_settings_note_once(tmp_path: Path) -> None:
    settings = {"hooks": {"PermissionRequest": [{"hooks": [command("true")]}]}}
    scenario = write_scenario(tmp_path, answer("Done."))
    options = ["--output", "pretty", "--settings", str(settings_file(tmp_path, settings))]
    proc = invoke(wrapper_argv(tmp_path / "run", scenario, options=options), tmp_path)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout.decode() + proc.stderr.decode()
    assert said.count("NOT ENFORCED") == 1, said


# -- judges ----------------------------------------------------------------------------------


def judge_command(tmp_path: Path, name: str, steps: list[dict[str, Any]]) -> list[str]:
    scenario = tmp_path / f"{name}.json"
    scenario.write_text(json.dumps({"version": 1, "steps": steps}))
    return [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)]


def test_prompt_handler_asks_the_evaluator(tmp_path: Path) -> None:
    evaluator = judge_command(
        tmp_path,
        "judge",
        [{"event": {"ok": False, "reason": "The diff has no test."}}, *answer("judged")],
    )
    settings = {
        **stop_hooks({"type": "prompt", "prompt": "Is this done? $ARGUMENTS"}),
        "evaluator": {"command": evaluator},
    }
    run = run_with(tmp_path, settings, answer("Done."), options=("--max-steers", "1"))
    assert [s["reason"] for s in run.result["steers"]] == ["The diff has no test."]
    judge_prompt = next(r["prompt"] for r in records(tmp_path) if "Is this done?" in r["prompt"])
    assert '"hook_event_name": "Stop"' in judge_prompt
    assert '"last_assistant_message": "Done."' in judge_prompt


def test_a_failing_evaluator_fails_open(tmp_path: Path) -> None:
    evaluator = judge_command(tmp_path, "judge", [*answer("I think it is fine.")])
    settings = {
        **stop_hooks({"type": "prompt", "prompt": "Is this done?"}),
        "evaluator": {"command": evaluator},
    }
    run = run_with(tmp_path, settings, answer("Done."))
    assert run.result["steerCount"] == 0
    (failed,) = [w for w in run.result["warnings"] if w["code"] == "hook_failed"]
    assert "gave no" in failed["message"]


def test_agent_handler_runs_a_nested_verifier(tmp_path: Path) -> None:
    verifier = judge_command(
        tmp_path,
        "verifier",
        answer('Checked.\n```json\n{"ok": false, "reason": "Add a regression test."}\n```'),
    )
    settings = stop_hooks({"type": "agent", "prompt": "Verify the work.", "command": verifier})
    run = run_with(tmp_path, settings, answer("Done."), options=("--max-steers", "1"))
    assert [s["reason"] for s in run.result["steers"]] == ["Add a regression test."]
    nested = read_result(run.run_dir / "hooks" / "verifier-1" / "result.json")
    assert nested["label"] == "verifier"
    assert nested["task"].startswith("Verify the work.")
    verifier_record = next(r for r in records(tmp_path) if "Verify the work." in r["prompt"])
    assert verifier_record["env"]["AGENT_WRAPPER_DEPTH"] == "2"
    assert verifier_record["env"]["AGENT_WRAPPER_PARENT_RUN_ID"] == run.result["runId"]


# -- commands and settings files ---------------------------------------------------------------


def test_commands_expand_variables_and_shell_is_opt_in(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    expanded = hook_script(
        tmp_path,
        "expanded.py",
        f"json.load(sys.stdin)\nopen({str(out)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n",
    )
    settings = stop_hooks(
        command(expanded + " '$literal' ${CLAUDE_PROJECT_DIR}/x"),
        command(f"echo piped | {sys.executable} -c 'import sys; sys.stdin.read()'", shell=True),
    )
    run = run_with(tmp_path, settings, answer("Done."))
    assert out.read_text() == f"$literal {tmp_path}/x\n"
    assert run.result["warnings"] == []


@pytest.mark.parametrize(
    ("hook", "path"),
    [
        (command(f"{sys.executable} gates/missing.py"), "its script gates/missing.py"),
        (command("python3 -u missing.py --strict"), "its script missing.py"),
        (command("./gates/missing-gate --fast"), "./gates/missing-gate does not exist"),
        ({"args": ["bash", "gates/nope.sh"]}, "its script gates/nope.sh does not exist"),
        (command("no-such-gate-program"), "no-such-gate-program is not found on PATH"),
    ],
)
def test_a_hook_whose_program_or_script_is_missing_is_a_settings_error(
    tmp_path: Path, hook: dict[str, Any], path: str
) -> None:
    settings = settings_file(tmp_path, stop_hooks(hook))
    scenario = write_scenario(tmp_path, answer("Done."))
    proc = run_cli(
        tmp_path,
        "run",
        "--settings",
        str(settings),
        "--task",
        "x",
        "--",
        str(FAKE_PI),
        "--scenario",
        str(scenario),
    )
    assert proc.returncode == 2
    assert f"{settings}: hooks.Stop[0].hooks[0]: command " in proc.stderr
    assert path in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / ".agent-wrapper").exists(), "no run was started"


def test_the_bundled_example_finds_its_script_through_claude_project_dir(tmp_path: Path) -> None:
    example = ROOT / "examples" / "hooks" / "settings.json"
    assert "$CLAUDE_PROJECT_DIR/" in example.read_text()
    scenario = ROOT / "fixtures" / "fake_agent" / "scenarios" / "steer.json"
    argv = wrapper_argv(
        tmp_path / "run", scenario, task="Fix the parser", options=["--settings", str(example)]
    )
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = read_result(tmp_path / "run" / "result.json")
    assert result["steerCount"] == 1
    assert result["steers"][0]["reason"].startswith("You have not run the tests.")

    # Started where the script is not, the run refuses at once and says why,
    # instead of reading the interpreter's exit status 2 as a block.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=elsewhere,
        check=False,
    )
    assert proc.returncode == 2
    assert f"{elsewhere}/examples/hooks/require-tests.py does not exist" in proc.stderr


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wrapper", *args],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        check=False,
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"hooks": {"Stop": {}}}', "hooks.Stop: expected a list"),
        ('{"hooks": {"Stop": [{"hooks": [{"command": "a | b"}]}]}}', '"shell": true'),
        ('{"hooks": {"Stop": [{"hooks": [{"command": "x", "timeout": "1"}]}]}}', "timeout"),
        ('{"hooks": {"Stop": [{"hooks": [{"type": "prompt", "prompt": "p"}]}]}}', "evaluator"),
        ('{"hooks": {"Stop": [{"hooks": [{"type": "webhook"}]}]}}', "not a handler type"),
        ('{"stop": {"maxRetries": -1}}', "stop.maxRetries"),
        ('{"stop": {"retry": true}}', "stop.retry: unknown key"),
        ('{"stop": {"failClosed": "yes"}}', "stop.failClosed: expected true or false"),
        ('{"hooks": {"Stopp": []}}', 'hooks: unknown event "Stopp"; did you mean "Stop"?'),
        ('{"hooks": {"stop": []}}', 'unknown event "stop"; did you mean "Stop"?'),
        ('{"hooks": {"PostTooluse": []}}', 'did you mean "PostToolUse"?'),
    ],
)
def test_a_malformed_settings_file_is_a_usage_error(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    scenario = write_scenario(tmp_path, answer("Done."))
    proc = run_cli(
        tmp_path,
        "run",
        "--settings",
        str(path),
        "--task",
        "x",
        "--",
        str(FAKE_PI),
        "--scenario",
        str(scenario),
    )
    assert proc.returncode == 2
    assert str(path) in proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / ".agent-wrapper").exists(), "no run was started"


def test_settings_files_merge_in_order(tmp_path: Path) -> None:
    log = tmp_path / "order.txt"
    one = hook_script(tmp_path, "one.py", f"open({str(log)!r}, 'a').write('one\\n')\n")
    two = hook_script(tmp_path, "two.py", f"open({str(log)!r}, 'a').write('two\\n')\n")
    first = settings_file(
        tmp_path, {**stop_hooks(command(one)), "stop": {"maxSteers": 7}}, "a.json"
    )
    second = settings_file(
        tmp_path, {**stop_hooks(command(two)), "stop": {"maxSteers": 9}}, "b.json"
    )
    run = run_wrapper(
        tmp_path,
        answer("Done."),
        options=["--settings", str(first), "--settings", str(second)],
    )
    assert log.read_text() == "one\ntwo\n", "hook lists concatenate in file order"
    assert run.result["maxSteers"] == 9, "a later file replaces other keys"


def test_hook_test_prints_the_decision(tmp_path: Path) -> None:
    gate = hook_script(tmp_path, "gate.py", BLOCK_ONCE)
    settings = settings_file(tmp_path, stop_hooks(command(gate)))
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text(
        json.dumps({"type": "assistant", "message": {"role": "assistant", "content": "Hi"}})
        + "\n{torn"
    )
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"stop_hook_active": False, "transcript_path": str(transcript)}))
    proc = run_cli(tmp_path, "hook-test", "--settings", str(settings), "--event", str(event))
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["event"], report["decision"]) == ("Stop", "block")
    assert report["reason"] == "You did not run the tests."

    event.write_text(json.dumps({"stop_hook_active": True}))
    proc = run_cli(tmp_path, "hook-test", "--settings", str(settings), "--event", str(event))
    assert json.loads(proc.stdout)["decision"] == "allow"
    assert (proc.returncode, proc.stderr) == (0, "")

    event.write_text("[1]")
    proc = run_cli(tmp_path, "hook-test", "--settings", str(settings), "--event", str(event))
    assert proc.returncode == 2
    assert "not a JSON object" in proc.stderr


def test_hook_test_checks_the_handlers_as_a_run_does(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text("{}")
    missing = settings_file(
        tmp_path, stop_hooks(command(f"{sys.executable} gone.py")), "missing.json"
    )
    proc = run_cli(tmp_path, "hook-test", "--settings", str(missing), "--event", str(event))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "its script gone.py does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr

    script = tmp_path / "gate.sh"
    script.write_text('#!/bin/sh\necho \'{"decision": "block", "reason": "no"}\'\n')
    locked = settings_file(tmp_path, stop_hooks(command("./gate.sh")), "locked.json")
    proc = run_cli(tmp_path, "hook-test", "--settings", str(locked), "--event", str(event))
    assert proc.returncode == 2
    assert "./gate.sh is not executable" in proc.stderr


def test_hook_test_exit_status_is_the_decision(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text("{}")

    def hook_test_with(name: str, settings: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        path = settings_file(tmp_path, settings, f"{name}.json")
        return run_cli(tmp_path, "hook-test", "--settings", str(path), "--event", str(event))

    blocks = hook_script(tmp_path, "block.py", ALWAYS_BLOCK)
    assert hook_test_with("block", stop_hooks(command(blocks))).returncode == 1
    ends = hook_script(tmp_path, "end.py", 'print(json.dumps({"continue": False}))')
    proc = hook_test_with("end", stop_hooks(command(ends)))
    assert (proc.returncode, json.loads(proc.stdout)["decision"]) == (1, "end")
    proc = hook_test_with("none", stop_hooks(command(blocks), event="SubagentStop"))
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["note"] == "no handler is configured for Stop"

    crashes = hook_script(tmp_path, "crash.py", "raise RuntimeError('boom')")
    proc = hook_test_with("crash", stop_hooks(command(crashes)))
    assert (proc.returncode, json.loads(proc.stdout)["decision"]) == (0, "allow")
    (warning,) = proc.stderr.splitlines()
    assert warning.startswith("agent-wrapper hook-test: warning: Stop handler ")
    assert "exited with status 1" in warning

    proc = hook_test_with("closed", {**stop_hooks(command(crashes)), "stop": {"failClosed": True}})
    assert (proc.returncode, json.loads(proc.stdout)["decision"]) == (1, "end")


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ('{"hook_event_name": 5}', 'hook_event_name: expected a string such as "Stop"'),
        ('{"hook_event_name": ["Stop"]}', "hook_event_name: expected a string"),
        ('{"hook_event_name": null}', "hook_event_name: expected a string"),
        ('{"transcript_path": {}}', "transcript_path: expected a string or null"),
        ('{"cwd": "/no/such/dir"}', "cwd: /no/such/dir is not a directory"),
        ('{"cwd": "a\\u0000b"}', "cwd: contains a NUL character"),
        ('"Stop"', "not a JSON object"),
        ("{torn", "unexpected"),
    ],
)
def test_hook_test_refuses_a_malformed_event_in_one_line(
    tmp_path: Path, event: str, message: str
) -> None:
    gate = hook_script(tmp_path, "gate.py", BLOCK_ONCE)
    settings = settings_file(tmp_path, stop_hooks(command(gate)))
    path = tmp_path / "event.json"
    path.write_text(event)
    proc = run_cli(tmp_path, "hook-test", "--settings", str(settings), "--event", str(path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"agent-wrapper hook-test: --event {path}: ")
    assert message.lower() in line.lower()


def test_hooks_see_the_run_identity_in_their_environment(tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    gate = hook_script(
        tmp_path,
        "env.py",
        f"""
        env = {{k: v for k, v in os.environ.items() if k.startswith(("AGENT_WRAPPER", "CLAUDE"))}}
        status = os.path.join(env["AGENT_WRAPPER_RUN_DIR"], "status.json")
        env["state"] = json.load(open(status))["state"]
        open({str(dump)!r}, "w").write(json.dumps(env))
        """,
    )
    run = run_with(tmp_path, stop_hooks(command(gate)), answer("Done."))
    env = json.loads(dump.read_text())
    assert env["AGENT_WRAPPER_RUN_ID"] == run.result["runId"]
    assert env["AGENT_WRAPPER_ATTEMPT"] == "1"
    assert env["CLAUDE_PROJECT_DIR"] == str(tmp_path)
    assert env["state"] == "stopping", "status.json says the Stop handlers are running"
    assert os.environ.get("AGENT_WRAPPER_RUN_ID") is None


def test_a_hook_being_started_is_never_taken_for_the_agents_leftovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leftover sweep at the end of an attempt runs while observer hooks
    may be starting; a hook it saw as the agent's would be killed (and its
    run reported as a leftover)."""
    import trio

    from wrapper.hooks.runner import run_process
    from wrapper.process import proctree

    monkeypatch.setattr(proctree, "_subreaper", True)
    seen: list[int] = []

    async def main() -> None:
        async def sweep() -> None:
            while True:
                seen.extend(p.pid for p in proctree.leftovers())
                await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sweep)
            for _ in range(5):
                done = await run_process(
                    [sys.executable, "-c", "pass"], b"", dict(os.environ), tmp_path, HANG_LIMIT
                )
                assert done.exit_code == 0
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert seen == [], "hook processes were listed as the agent's leftovers"
