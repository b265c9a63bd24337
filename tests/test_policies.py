"""onStop policies and escalation to a person, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from signal import SIGKILL, SIGTERM
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    ROOT,
    Run,
    agent_env,
    read_result,
    run_wrapper,
    validate,
    wait_until,
    wrapper_argv,
    write_scenario,
)

pytestmark = pytest.mark.usefixtures("no_leaks")

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]
WRAPPER = [sys.executable, "-m", "wrapper"]


def answer(text: str) -> list[dict[str, Any]]:
    return [{"assistant": {"text": text, "stopReason": "stop"}}, *END]


def signal(kind: str, message: str | None = None) -> dict[str, Any]:
    argv = [*WRAPPER, "signal", kind]
    if message is not None:
        argv += ["--message", message]
    return {"run": {"argv": argv}}


def records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def settings(tmp_path: Path, data: dict[str, Any]) -> list[str]:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(data))
    return ["--settings", str(path)]


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WRAPPER, *args],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        check=False,
    )


# -- signal ------------------------------------------------------------------------------


def test_a_completion_signal_allows_the_stop(tmp_path: Path) -> None:
    run = run_wrapper(
        tmp_path,
        [signal("complete", "Fixed the parser."), *answer("Done.")],
        options=["--on-stop", "signal"],
    )
    result = run.result
    assert run.returncode == 0, run.stderr
    assert result["onStop"] == "signal"
    assert result["stopAllowedBy"] == "signal"
    completion = result["completionSignal"]
    assert (completion["kind"], completion["message"], completion["attempt"]) == (
        "complete",
        "Fixed the parser.",
        1,
    )
    assert result["steerCount"] == 0
    config = json.loads((run.run_dir / "config.json").read_text())
    assert config["onStop"] == "signal"
    # Once the run is over a signal reaches nobody, and says so.
    late = cli(tmp_path, "signal", "complete", "--run-dir", str(run.run_dir))
    assert late.returncode == 1
    assert "is over (outcome ok)" in late.stderr


def test_a_stop_without_a_signal_is_blocked_with_instructions(tmp_path: Path) -> None:
    run = run_wrapper(
        tmp_path,
        answer("I think I am done."),
        options=["--context", "pipeline"],
        scenario_extra={"resumes": [[signal("complete", "Really done."), *answer("Done.")]]},
    )
    result = run.result
    assert result["onStop"] == "signal", "--context pipeline defaults to signal"
    assert result["success"] is True
    (steer,) = result["steers"]
    assert steer["handler"] == "onStop:signal"
    assert "signal complete" in steer["reason"]
    assert records(tmp_path)[1]["prompt"] == steer["reason"]
    assert result["completionSignal"]["attempt"] == 2


def test_stale_signals_do_not_count_and_the_limit_fails_the_run(tmp_path: Path) -> None:
    gate = tmp_path / "gate.py"
    gate.write_text(
        "import json, sys\n"
        "if not json.load(sys.stdin)['stop_hook_active']:\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'Add a test.'}))\n"
    )
    hooks = {"hooks": {"Stop": [{"hooks": [{"command": f"{sys.executable} {gate}"}]}]}}
    run = run_wrapper(
        tmp_path,
        [signal("complete"), *answer("Done.")],
        options=["--on-stop", "signal", "--max-steers", "2", *settings(tmp_path, hooks)],
        scenario_extra={"resumes": [answer("Added a test.")]},
    )
    result = run.result
    assert run.returncode == 1
    assert result["steers"][0]["handler"].endswith("gate.py")
    assert result["steers"][1]["handler"] == "onStop:signal", "attempt 1's signal is stale"
    assert result["error"]["kind"] == "no_completion_signal"
    assert result["completionSignal"] is None


def test_signal_outside_a_run_and_bad_usage(tmp_path: Path) -> None:
    proc = cli(tmp_path, "signal", "complete")
    assert proc.returncode == 1
    assert "AGENT_WRAPPER_RUN_DIR" in proc.stderr
    assert cli(tmp_path, "signal", "finished").returncode == 2


# -- idle ------------------------------------------------------------------------------------


def test_idle_nudges_then_the_agent_signals(tmp_path: Path) -> None:
    run = run_wrapper(
        tmp_path,
        answer("Waiting for input."),
        options=["--on-stop", "idle"],
        scenario_extra={"resumes": [[signal("complete"), *answer("Finished.")]]},
    )
    result = run.result
    assert result["success"] is True
    (steer,) = result["steers"]
    assert (steer["handler"], steer["reason"]) == (
        "onIdle",
        "Continue with the task, or signal completion.",
    )
    assert result["stopAllowedBy"] == "signal"


def test_idle_done_and_fail(tmp_path: Path) -> None:
    done = run_wrapper(
        tmp_path,
        answer("Done."),
        options=["--on-stop", "idle", *settings(tmp_path, {"onIdle": {"action": "done"}})],
    )
    assert (done.result["stopAllowedBy"], done.returncode) == ("idle_done", 0)
    other = tmp_path / "fail"
    other.mkdir()
    failed = run_wrapper(
        other,
        answer("Done."),
        options=["--on-stop", "idle", *settings(other, {"onIdle": {"action": "fail"}})],
    )
    assert failed.returncode == 1
    assert failed.result["error"]["kind"] == "idle_failed"


def test_idle_attempts_exhausted_escalate_and_time_out(tmp_path: Path) -> None:
    idle = {"onIdle": {"message": "Keep going.", "attempts": 1}}
    run = run_wrapper(
        tmp_path,
        answer("Stuck."),
        options=[
            "--on-stop",
            "idle",
            "--escalation-timeout",
            "1",
            *settings(tmp_path, {**idle, "notify": {"desktop": False}}),
        ],
        scenario_extra={"resumes": [answer("Still stuck.")]},
    )
    result = run.result
    assert [s["reason"] for s in result["steers"]] == ["Keep going."]
    (escalation,) = result["escalations"]
    assert escalation["answer"] == "timeout"
    assert escalation["question"] == "Still stuck."
    assert result["stopAllowedBy"] == "escalation_timeout"
    assert [e["type"] for e in run.events if e["type"].startswith("escalat")] == [
        "escalated",
        "escalation_answered",
    ]


def test_idle_attempts_reset_after_progress(tmp_path: Path) -> None:
    tool = [
        {"assistant": {"text": "Working.", "toolCalls": [{"name": "bash"}]}},
        {"tool": {"name": "bash"}},
    ]
    run = run_wrapper(
        tmp_path,
        answer("Paused."),
        options=["--on-stop", "idle", "--max-steers", "3", "--escalation-timeout", "1"],
        scenario_extra={"resumes": [[*tool, *answer("Paused again.")], answer("Idle.")]},
    )
    # Nudge, progress (a tool ran), nudge again, no progress: escalate.
    assert [s["handler"] for s in run.result["steers"]] == ["onIdle", "onIdle"]
    assert len(run.result["escalations"]) == 1


# -- escalate -----------------------------------------------------------------------------


def start_waiting(
    tmp_path: Path,
    steps: list[dict[str, Any]],
    resumes: list[list[dict[str, Any]]],
    *extra: str,
) -> tuple[subprocess.Popen[bytes], Path]:
    scenario = write_scenario(tmp_path, steps, resumes=resumes)
    run_dir = tmp_path / "run"
    options = ["--on-stop", "escalate", "--escalation-timeout", "60", *extra]
    proc = subprocess.Popen(
        wrapper_argv(run_dir, scenario, options=options),
        env=agent_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return proc, run_dir


def wait_for_question(run_dir: Path, escalation: str) -> dict[str, Any]:
    status_path = run_dir / "status.json"

    def waiting() -> bool:
        try:
            status = json.loads(status_path.read_text())
        except (OSError, ValueError):
            return False
        return bool(status["state"] == "waiting" and status["escalationId"] == escalation)

    assert wait_until(waiting, timeout=30), status_path.read_text()
    status: dict[str, Any] = json.loads(status_path.read_text())
    validate("status", status)
    return status


def finish(proc: subprocess.Popen[bytes], run_dir: Path) -> dict[str, Any]:
    try:
        proc.wait(timeout=HANG_LIMIT)
    finally:
        proc.kill()
        proc.wait()
    return read_result(run_dir / "result.json")


def test_escalation_answered_by_text_then_by_stop(tmp_path: Path) -> None:
    proc, run_dir = start_waiting(
        tmp_path, answer("Should I drop the old API?"), [answer("Dropped it. Anything else?")]
    )
    status = wait_for_question(run_dir, "esc-1")
    assert status["question"] == "Should I drop the old API?"
    shown = cli(tmp_path, "status", str(run_dir))
    assert "waiting for a person" in shown.stdout
    assert shown.returncode == 0
    assert "Should I drop the old API?" in shown.stdout
    assert cli(tmp_path, "reply", str(run_dir), "Yes, drop it.").returncode == 0
    wait_for_question(run_dir, "esc-2")
    assert cli(tmp_path, "reply", str(run_dir), "--stop").returncode == 0
    result = finish(proc, run_dir)
    assert result["success"] is True
    assert result["stopAllowedBy"] == "reply"
    assert [e["answer"] for e in result["escalations"]] == ["text", "stop"]
    assert records(tmp_path)[1]["prompt"] == "User answered: Yes, drop it."
    assert result["steers"][0]["handler"] == "reply"
    finished = cli(tmp_path, "status", str(run_dir))
    assert "finished, outcome ok" in finished.stdout
    assert finished.returncode == 0
    as_json = json.loads(cli(tmp_path, "status", str(run_dir), "--json").stdout)
    assert as_json["result"]["runId"] == result["runId"]


def test_replies_are_delivered_past_the_steer_limit(tmp_path: Path) -> None:
    proc, run_dir = start_waiting(
        tmp_path, answer("Continue?"), [answer("Continued.")], "--max-steers", "0"
    )
    wait_for_question(run_dir, "esc-1")
    assert cli(tmp_path, "reply", str(run_dir), "--continue").returncode == 0
    wait_for_question(run_dir, "esc-2")
    assert cli(tmp_path, "reply", str(run_dir), "--stop").returncode == 0
    result = finish(proc, run_dir)
    assert result["steerCount"] == 1
    assert records(tmp_path)[1]["prompt"] == "User wants you to continue"


def test_two_replies_racing_one_wins(tmp_path: Path) -> None:
    proc, run_dir = start_waiting(tmp_path, answer("Which one?"), [answer("ok")])
    try:
        wait_for_question(run_dir, "esc-1")
        racers = [
            subprocess.Popen(
                [*WRAPPER, "reply", str(run_dir), text, "--escalation", "esc-1"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for text in ("first", "second")
        ]
        outcomes = [
            (racer.communicate(timeout=HANG_LIMIT)[1], racer.returncode) for racer in racers
        ]
        assert sorted(code for _, code in outcomes) == [0, 1]
        assert any("esc-1 was already answered" in err for err, code in outcomes if code == 1)
        wait_for_question(run_dir, "esc-2")
        assert cli(tmp_path, "reply", str(run_dir), "--stop").returncode == 0
    finally:
        result = finish(proc, run_dir)
    assert result["escalations"][0]["text"] in ("first", "second")
    late = cli(tmp_path, "reply", str(run_dir), "late")
    assert late.returncode == 1
    assert "esc-2 was already answered (stop)" in late.stderr


def test_a_reply_for_an_earlier_question_never_answers_a_newer_one(tmp_path: Path) -> None:
    proc, run_dir = start_waiting(tmp_path, answer("One?"), [answer("Two?")])
    try:
        wait_for_question(run_dir, "esc-1")
        assert cli(tmp_path, "reply", str(run_dir), "yes", "--escalation", "esc-1").returncode == 0
        wait_for_question(run_dir, "esc-2")
        stale = cli(tmp_path, "reply", str(run_dir), "yes again", "--escalation", "esc-1")
        assert stale.returncode == 1
        assert "esc-1 was already answered (text)" in stale.stderr
        assert wait_for_question(run_dir, "esc-2")["state"] == "waiting"
        unknown = cli(tmp_path, "reply", str(run_dir), "--stop", "--escalation", "../esc-2")
        assert unknown.returncode == 1
        assert "no escalation" in unknown.stderr
        assert cli(tmp_path, "reply", str(run_dir), "--stop").returncode == 0
    finally:
        result = finish(proc, run_dir)
    assert [e["answer"] for e in result["escalations"]] == ["text", "stop"]


def test_a_reply_after_the_run_ended_while_waiting_says_so(tmp_path: Path) -> None:
    proc, run_dir = start_waiting(tmp_path, answer("Still there?"), [])
    try:
        wait_for_question(run_dir, "esc-1")
        proc.send_signal(SIGTERM)
    finally:
        result = finish(proc, run_dir)
    assert result["outcome"] == "aborted"
    late = cli(tmp_path, "reply", str(run_dir), "yes")
    assert late.returncode == 1
    assert "the run ended while it was waiting" in late.stderr


def test_a_reply_to_a_run_whose_wrapper_is_gone_is_refused(tmp_path: Path) -> None:
    proc, run_dir = start_waiting(tmp_path, answer("Still there?"), [])
    try:
        wait_for_question(run_dir, "esc-1")
        proc.send_signal(SIGKILL)
    finally:
        finish_code = proc.wait(timeout=HANG_LIMIT)
    assert finish_code == -SIGKILL
    late = cli(tmp_path, "reply", str(run_dir), "yes")
    assert late.returncode == 1
    assert "is gone" in late.stderr
    assert not (run_dir / "escalations" / "esc-1" / "answer.json").exists()


def test_the_notifier_gets_the_question_and_a_failing_one_is_only_logged(
    tmp_path: Path,
) -> None:
    got = tmp_path / "notified.json"
    notifier = tmp_path / "notify.py"
    notifier.write_text(f"import sys\nopen({str(got)!r}, 'w').write(sys.stdin.read())\n")
    summarizer = [sys.executable, "-c", "import sys; sys.stdin.read(); print('Two tools ran.')"]
    data = {
        "notify": {"command": [sys.executable, str(notifier)], "desktop": False},
        "summarizer": {"command": summarizer},
    }
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Looking.",
                "toolCalls": [{"name": "edit", "arguments": {"path": "src/foo.ts"}}],
            }
        },
        {"tool": {"name": "edit"}},
        *answer("x" * 900 + "Merge it?"),
    ]
    run = run_wrapper(
        tmp_path,
        steps,
        options=["--on-stop", "escalate", "--escalation-timeout", "1", *settings(tmp_path, data)],
    )
    payload = json.loads(got.read_text())
    assert payload["question"].endswith("Merge it?")
    assert len(payload["question"]) == 800
    assert payload["recentTools"] == "edit(src/foo.ts)"
    assert payload["summary"] == "Two tools ran."
    assert payload["escalationId"] == "esc-1"
    assert run.result["escalations"][0]["notified"] == ["command"]

    other = tmp_path / "failing"
    other.mkdir()
    failing = {"notify": {"command": [sys.executable, "-c", "raise SystemExit(3)"]}}
    failed: Run = run_wrapper(
        other,
        answer("Merge it?"),
        options=[
            "--on-stop",
            "escalate",
            "--escalation-timeout",
            "1",
            *settings(other, {**failing, "notify": {**failing["notify"], "desktop": False}}),
        ],
    )
    codes = [w["code"] for w in failed.result["warnings"]]
    assert "notify_failed" in codes
    assert failed.result["escalations"][0]["answer"] == "timeout"


def test_reply_without_a_waiting_question_fails(tmp_path: Path) -> None:
    run = run_wrapper(tmp_path, answer("Done."))
    proc = cli(tmp_path, "reply", str(run.run_dir), "hello")
    assert proc.returncode == 1
    assert "no question has been asked" in proc.stderr
    assert cli(tmp_path, "reply", str(run.run_dir)).returncode == 2
    nowhere = cli(tmp_path, "reply", str(tmp_path / "nowhere"), "hello")
    assert nowhere.returncode == 1
    assert "is not the directory of a wrapped run" in nowhere.stderr
    assert cli(tmp_path, "status", str(tmp_path / "nowhere")).returncode == 1


def test_status_exits_1_for_a_finished_run_that_failed(tmp_path: Path) -> None:
    run = run_wrapper(tmp_path, [{"stderr": "boom"}, {"exit": 3}])
    assert run.result["outcome"] == "error"
    shown = cli(tmp_path, "status", str(run.run_dir))
    assert shown.returncode == 1
    assert "finished, outcome error (not a success)" in shown.stdout
    assert cli(tmp_path, "status", str(run.run_dir), "--json").returncode == 1
    # the result gone, status.json's outcome still says how it ended
    (run.run_dir / "result.json").unlink()
    assert cli(tmp_path, "status", str(run.run_dir)).returncode == 1
    assert cli(tmp_path, "status").returncode == 2


def test_the_whole_run_timeout_ends_a_wait(tmp_path: Path) -> None:
    started = time.monotonic()
    run = run_wrapper(
        tmp_path, answer("Question?"), options=["--on-stop", "escalate", "--timeout", "3"]
    )
    assert time.monotonic() - started < 30
    assert run.returncode == 124
    assert run.result["escalations"][0]["answer"] is None
    late = cli(tmp_path, "reply", str(run.run_dir), "too late")
    assert late.returncode == 1, "nothing waits once the run has ended"


def test_a_reused_run_dir_does_not_resume_or_complete_the_previous_run(tmp_path: Path) -> None:
    steer = {"resumes": [[signal("complete"), *answer("Second attempt.")]]}
    first = run_wrapper(
        tmp_path, answer("First."), options=["--on-stop", "signal"], scenario_extra=steer
    )
    assert first.result["completionSignal"]["attempt"] == 2
    assert (first.run_dir / "session.jsonl").exists()
    # Same run directory: the old session and the old signals must not count.
    again = run_wrapper(
        tmp_path,
        answer("First."),
        options=["--on-stop", "signal", "--max-steers", "0"],
        scenario_extra=steer,
    )
    assert records(tmp_path)[-1]["resumed"] is False
    assert again.result["finalText"] == "First."
    assert again.result["error"]["kind"] == "no_completion_signal"


# -- the wrapper's own command -----------------------------------------------------------

SIGNAL_BY_BIN = (
    'test -x "$AGENT_WRAPPER_BIN" && "$AGENT_WRAPPER_BIN" signal complete --message Via-bin'
)


def signal_by_bin_run(tmp_path: Path, wrapper: list[str], env: dict[str, str]) -> dict[str, Any]:
    """A run whose agent signals completion through ``$AGENT_WRAPPER_BIN``
    alone, with no wrapper on its PATH."""
    scenario = write_scenario(
        tmp_path,
        [{"run": {"argv": ["/bin/sh", "-c", SIGNAL_BY_BIN]}}, *answer("Done.")],
    )
    run_dir = tmp_path / "run"
    argv = wrapper_argv(run_dir, scenario, options=["--on-stop", "signal"])
    proc = subprocess.run(
        [*wrapper, *argv[3:]],
        env={**env, "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        timeout=HANG_LIMIT,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = read_result(run_dir / "result.json")
    assert result["completionSignal"]["message"] == "Via-bin"
    return result


def test_the_agent_signals_through_the_wrapper_bin_of_its_environment(tmp_path: Path) -> None:
    signal_by_bin_run(
        tmp_path, [str(Path(sys.executable).absolute()), "-m", "wrapper"], agent_env(tmp_path)
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["wrapperBin"] == str(Path(sys.executable).absolute().with_name("agent-wrapper"))


def test_without_a_console_script_the_wrapper_bin_is_a_launcher(tmp_path: Path) -> None:
    # An interpreter with no agent-wrapper beside it, finding the package
    # through PYTHONPATH, as a run from a source checkout does.
    import site

    lonely = tmp_path / "python"
    lonely.mkdir()
    (lonely / "python3").symlink_to(Path(sys.executable).resolve())
    paths = [str(ROOT), *site.getsitepackages()]
    env = {**agent_env(tmp_path), "PYTHONPATH": os.pathsep.join(paths)}
    signal_by_bin_run(tmp_path, [str(lonely / "python3"), "-m", "wrapper"], env)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["wrapperBin"] == str(tmp_path / "run" / "bin" / "agent-wrapper")
