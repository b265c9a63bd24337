"""Every lifecycle path, end to end: the real wrapper supervising the fake agent."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    agent_env,
    invoke,
    read_result,
    run_wrapper,
    state_of,
    validate,
    wait_until,
    wrapper_argv,
    write_scenario,
)

pytestmark = pytest.mark.usefixtures("no_leaks")


def final(text: str = "All done.", stop: str | None = "stop", **extra: Any) -> dict[str, Any]:
    return {"assistant": {"text": text, "stopReason": stop, **extra}}


def tool_turn(
    name: str = "bash", duration: float = 0.1, text: str = "Working on it."
) -> list[dict[str, Any]]:
    return [
        {
            "assistant": {
                "text": text,
                "stopReason": "toolUse",
                "toolCalls": [{"name": name, "arguments": {"command": "make test"}}],
            }
        },
        {"tool": {"name": name, "duration": duration, "result": "ok"}},
    ]


END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def test_successful_run(tmp_path: Path) -> None:
    run = run_wrapper(tmp_path, [*tool_turn(), final("Fixed it."), *END])
    assert run.returncode == 0
    result = run.result
    assert result["success"] is True
    assert result["outcome"] == "ok"
    assert (result["stopReason"], result["rawStopReason"]) == ("stop", "stop")
    assert result["finalText"] == "Fixed it."
    assert result["exitCode"] == 0
    assert result["forcedCleanup"] is False
    assert result["signalsSent"] == []
    assert result["toolsUsed"] == ["bash"]
    assert result["usage"]["totalTokens"] == 240
    assert result["sessionId"]
    assert result["model"] == "fake-model"
    assert result["task"] == "Do the task"
    assert result["dialect"] == "pi"
    assert result["error"] is None
    assert result["command"][-2:] == ["--scenario", str(tmp_path / "scenario.json")]
    assert len(result["attempts"]) == 1
    assert run.status["state"] == "finished"
    assert run.status["outcome"] == "ok"
    assert run.stdout_events[-1]["type"] == "result_written"
    assert run.stdout_events[-1]["path"] == str(run.run_dir / "result.json")
    for name in ("stdout.log", "stderr.log", "events.jsonl", "config.json"):
        assert (run.run_dir / name).exists()
    types = [e["type"] for e in run.events]
    assert types[:2] == ["run_started", "spawned"]
    assert run.events[0]["runDir"] == str(run.run_dir)
    assert types[-2:] == ["exited", "result_written"], "exited follows all the agent wrote"
    assert "tool_start" in types
    assert "assistant_message" in types


def test_stdout_log_is_the_childs_output_byte_for_byte(tmp_path: Path) -> None:
    steps = [{"line": "noise \x1b[31mred\x1b[0m"}, {"bytes_hex": "fffe00410a"}, final(), *END]
    run = run_wrapper(tmp_path, steps)
    log = (run.run_dir / "stdout.log").read_bytes()
    assert b"noise \x1b[31mred\x1b[0m\n\xff\xfe\x00A\n" in log
    assert log.count(b"\n") == len(log.splitlines())


def test_what_a_running_agent_wrote_is_in_stdout_log_short_of_one_small_buffer(
    tmp_path: Path,
) -> None:
    # Whoever reads stdout.log while the agent works finds its output there,
    # short of one write buffer: the buffer is the run's memory for its
    # whole life, so it is kept small.
    written = 300_000
    agent = (
        "import sys, time\n"
        f"for _ in range({written // 100}):\n"
        "    sys.stdout.write('x' * 99 + '\\n')\n"
        "sys.stdout.flush()\n"
        "time.sleep(120)\n"
    )
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--dialect", "pi"]
    argv += ["--run-dir", str(run_dir), "--", sys.executable, "-c", agent]
    log = run_dir / "stdout.log"
    with subprocess.Popen(argv, env=agent_env(tmp_path), stdin=subprocess.DEVNULL) as proc:
        try:
            shown = wait_until(
                lambda: log.exists() and log.stat().st_size >= written - 64 * 1024,
                timeout=HANG_LIMIT / 2,
            )
            assert shown, f"stdout.log holds {log.stat().st_size} of {written} bytes written"
            assert proc.poll() is None, "the agent still runs"
        finally:
            proc.terminate()
            proc.wait(HANG_LIMIT)


def test_early_tool_use_message_and_long_silent_tool_are_not_cut_off(tmp_path: Path) -> None:
    steps = [
        *tool_turn(duration=2.0, text="Interim: running the tests."),
        final("The real answer."),
        *END,
    ]
    run = run_wrapper(tmp_path, steps, options=["--grace", "0.3"])
    assert run.returncode == 0
    assert run.result["finalText"] == "The real answer."
    assert run.result["signalsSent"] == []
    assert run.result["forcedCleanup"] is False
    assert all(e["seq"] > run.of_type("tool_end")[0]["seq"] for e in run.of_type("grace_started"))


def test_lingering_after_final_is_cleaned_up_and_is_a_success(tmp_path: Path) -> None:
    steps = [final("Answer."), {"linger": {"seconds": 30}}]
    run = run_wrapper(tmp_path, steps, options=["--grace", "0.5"])
    assert run.returncode == 0
    assert run.result["outcome"] == "ok"
    assert run.result["forcedCleanup"] is True
    assert [s["signal"] for s in run.result["signalsSent"]] == ["SIGTERM"]
    assert run.result["exitSignal"] == "SIGTERM"
    assert run.result["finalText"] == "Answer."
    assert run.elapsed < 20


def test_settled_agent_that_lingers_is_ended_after_the_short_settle_grace(tmp_path: Path) -> None:
    steps = [final("Answer."), *END, {"linger": {"seconds": 30}}]
    run = run_wrapper(tmp_path, steps, options=["--grace", "20"])
    assert run.returncode == 0
    assert run.result["forcedCleanup"] is True
    assert run.of_type("grace_started")[-1]["settled"] is True
    assert run.elapsed < 15


def test_compaction_after_the_final_message_pauses_the_grace(tmp_path: Path) -> None:
    # pi 0.73 compacts its context after the agent_end of a run whose last
    # turn crossed the threshold, and exits once that is done: it is busy,
    # not lingering.
    steps = [final("Answer."), {"agent_end": {}}, {"compaction": {"duration": 1.5}}]
    run = run_wrapper(tmp_path, steps, options=["--grace", "0.5"])
    assert run.returncode == 0
    assert run.result["outcome"] == "ok"
    assert run.result["signalsSent"] == []
    assert run.result["forcedCleanup"] is False
    compactions = [(e["phase"], e["reason"]) for e in run.of_type("compaction")]
    assert compactions == [("start", "threshold"), ("end", "threshold")]
    assert run.of_type("grace_cancelled")[0]["reason"] == "the agent is compacting its context"


def test_child_ignoring_sigterm_is_sigkilled(tmp_path: Path) -> None:
    steps = [final("Answer."), {"linger": {"seconds": 30, "ignoreSigterm": True}}]
    run = run_wrapper(tmp_path, steps, options=["--grace", "0.2", "--kill-after", "0.5"])
    assert run.returncode == 0
    assert run.result["outcome"] == "ok"
    assert [s["signal"] for s in run.result["signalsSent"]] == ["SIGTERM", "SIGKILL"]
    assert run.result["exitSignal"] == "SIGKILL"
    assert run.result["forcedCleanup"] is True


def test_length_is_terminal_and_a_success(tmp_path: Path) -> None:
    run = run_wrapper(tmp_path, [final("Truncated answer", stop="length"), *END])
    assert run.returncode == 0
    assert run.result["stopReason"] == "length"
    assert run.result["finalText"] == "Truncated answer"


@pytest.mark.parametrize(("stop", "kind"), [("error", "agent_error"), ("aborted", "agent_aborted")])
def test_agents_own_error_or_abort_is_a_failure(tmp_path: Path, stop: str, kind: str) -> None:
    steps = [final("", stop=stop, errorMessage="provider said no"), *END]
    run = run_wrapper(tmp_path, steps)
    assert run.returncode == 1
    assert run.result["outcome"] == "error"
    assert run.result["success"] is False
    assert run.result["stopReason"] == stop
    assert run.result["error"]["kind"] == kind
    assert "provider said no" in run.result["error"]["message"]


def test_error_stop_that_lingers_is_still_cleaned_up(tmp_path: Path) -> None:
    steps = [final("", stop="error", errorMessage="boom"), {"linger": {"seconds": 30}}]
    run = run_wrapper(tmp_path, steps, options=["--grace", "0.3"])
    assert run.returncode == 1
    assert run.result["error"]["kind"] == "agent_error"
    assert run.result["forcedCleanup"] is True


def test_auto_retry_after_provider_error_survives(tmp_path: Path) -> None:
    steps = [
        final("", stop="error", errorMessage="529 overloaded"),
        {"agent_end": {"willRetry": True}},
        {
            "retry": {
                "attempt": 1,
                "maxAttempts": 3,
                "delayMs": 1500,
                "errorMessage": "529 overloaded",
            }
        },
        {"retry_end": {"success": True, "attempt": 1}},
        *tool_turn(duration=0.2),
        final("Recovered and done."),
        *END,
    ]
    run = run_wrapper(tmp_path, steps, options=["--grace", "0.3"])
    assert run.returncode == 0, run.result
    assert run.result["finalText"] == "Recovered and done."
    assert run.result["signalsSent"] == []
    assert run.of_type("grace_cancelled")
    assert run.of_type("retry")[0]["message"] == "529 overloaded"


def test_unknown_stop_reason_is_preserved_and_does_not_end_the_run(tmp_path: Path) -> None:
    steps = [final("thinking...", stop="pause_turn"), {"sleep": 1.0}, final("Done."), *END]
    run = run_wrapper(tmp_path, steps, options=["--grace", "0.2"])
    assert run.returncode == 0
    messages = run.of_type("assistant_message")
    assert (messages[0]["stopReason"], messages[0]["rawStopReason"]) == ("pause_turn", "pause_turn")
    assert run.result["finalText"] == "Done."
    assert run.result["signalsSent"] == []


def test_exit_mid_tool_is_a_failure(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Running tests",
                "stopReason": "toolUse",
                "toolCalls": [{"name": "bash", "arguments": {"command": "pytest"}}],
            }
        },
        {
            "event": {
                "type": "tool_execution_start",
                "toolCallId": "call_1",
                "toolName": "bash",
                "args": {},
            }
        },
        {"exit": 0},
    ]
    run = run_wrapper(tmp_path, steps)
    assert run.returncode == 1
    assert run.result["outcome"] == "error"
    assert run.result["error"]["kind"] == "exited_early"
    assert "without a final message" in run.result["error"]["message"]
    assert run.result["finalText"] is None
    # the agent's last word is kept, though it ended nothing
    assert (run.result["stopReason"], run.result["rawStopReason"]) == ("toolUse", "toolUse")
    assert run.result["attempts"][0]["stopReason"] == "toolUse"


def test_exit_after_an_unknown_stop_reason_keeps_it_as_the_last_word(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [final("Let me pause here.", stop="pause_turn"), {"exit": 0}]
    run = run_wrapper(tmp_path, steps)
    assert run.returncode == 1
    assert run.result["outcome"] == "error"
    assert run.result["error"]["kind"] == "exited_early"
    assert (run.result["stopReason"], run.result["rawStopReason"]) == ("pause_turn", "pause_turn")
    assert run.result["finalText"] is None


def test_death_by_signal_is_a_failure(tmp_path: Path) -> None:
    run = run_wrapper(tmp_path, [*tool_turn(), {"signal": "SIGSEGV"}])
    assert run.returncode == 1
    assert run.result["error"]["kind"] == "killed_by_signal"
    assert run.result["exitSignal"] == "SIGSEGV"
    assert run.result["exitCode"] is None


def test_nonzero_exit_after_final_is_a_failure_that_keeps_the_final_text(tmp_path: Path) -> None:
    run = run_wrapper(tmp_path, [final("Answer."), {"exit": 3}])
    assert run.returncode == 1
    assert run.result["error"]["kind"] == "nonzero_exit"
    assert run.result["exitCode"] == 3
    assert run.result["finalText"] == "Answer."


def test_spawn_failure_writes_result(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = invoke(
        [
            sys.executable,
            "-m",
            "wrapper",
            "run",
            "--output",
            "jsonl",
            "--run-dir",
            str(run_dir),
            "--dialect",
            "pi",
            "--task",
            "hi",
            "--",
            str(tmp_path / "no-such-agent"),
            "--mode",
            "json",
        ],
        tmp_path,
    )
    assert proc.returncode == 127
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "spawn_failed"
    assert result["error"]["kind"] == "spawn_failed"
    assert "No such file or directory" in result["error"]["message"]
    assert result["pid"] is None


def test_a_bare_command_name_not_on_path_says_so(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--run-dir"]
    argv += [str(run_dir), "--dialect", "pi", "--task", "hi", "--", "no-such-agent-cli"]
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 127
    message = read_result(run_dir / "result.json")["error"]["message"]
    assert message.startswith("no-such-agent-cli: not found on PATH")


def test_unusable_run_dir_does_not_block_the_run_or_result(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    scenario = write_scenario(tmp_path, [final("Answer."), *END])
    result_path = tmp_path / "out" / "result.json"
    argv = wrapper_argv(blocker / "run", scenario, options=["--result", str(result_path)])
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = read_result(result_path)
    assert result["outcome"] == "ok"
    assert result["finalText"] == "Answer."
    assert result["artifactErrors"][0]["artifact"] == "run_dir"
    assert result["artifacts"]["events"] is None


def test_log_write_failure_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # A directory an earlier run used (only such a one may hold files the
    # wrapper then writes to) whose events log fails every write as on a
    # full disk.
    (run_dir / ".agent-wrapper-run").write_text('{"runId": "earlier", "version": "0.1.0"}')
    (run_dir / "events.jsonl").symlink_to("/dev/full")
    scenario = write_scenario(tmp_path, [*tool_turn(), final("Answer."), *END])
    proc = invoke(wrapper_argv(run_dir, scenario), tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "ok"
    [error] = result["artifactErrors"]
    assert error["artifact"] == "events"
    assert "space" in error["error"].lower()


def test_result_written_to_stderr_with_exit_3_when_nowhere_else_works(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    scenario = write_scenario(tmp_path, [final("Answer."), *END])
    argv = wrapper_argv(blocker / "run", scenario, options=["--result", str(blocker / "r.json")])
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 3
    result = json.loads(proc.stderr.decode().strip().splitlines()[-1])
    validate("result", result)
    assert result["outcome"] == "ok"
    assert result["finalText"] == "Answer."


def test_child_environment_stdin_and_depth(tmp_path: Path) -> None:
    run = run_wrapper(tmp_path, [final(), *END], options=["--label", "env check"])
    [record] = [json.loads(x) for x in (tmp_path / "record.jsonl").read_text().splitlines()]
    env = record["env"]
    assert env["AGENT_WRAPPER_RUN_ID"] == run.result["runId"]
    assert env["AGENT_WRAPPER_RUN_DIR"] == str(run.run_dir)
    assert env["AGENT_WRAPPER_ATTEMPT"] == "1"
    assert env["AGENT_WRAPPER_DEPTH"] == "1"
    assert "AGENT_WRAPPER_PARENT_RUN_ID" not in env
    assert record["stdinIsDevNull"] is True
    assert record["prompt"] == "Do the task"
    assert run.result["label"] == "env check"


def test_agent_gets_pwd_of_its_working_directory(tmp_path: Path) -> None:
    # The caller's PWD names another directory, as when a runner exec()s the
    # wrapper from a process that changed directory without updating PWD.
    workdir = tmp_path / "work"
    workdir.mkdir()
    scenario = write_scenario(tmp_path, [final(), *END])
    env = agent_env(tmp_path, PWD=str(tmp_path / "stale"))
    proc = subprocess.run(
        wrapper_argv(tmp_path / "run", scenario),
        capture_output=True,
        timeout=HANG_LIMIT,
        env=env,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    [record] = [json.loads(x) for x in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert record["cwd"] == str(workdir)
    assert record["pwdEnv"] == str(workdir)
    assert read_result(tmp_path / "run" / "result.json")["cwd"] == str(workdir)


def test_nested_run_gets_depth_and_parent(tmp_path: Path) -> None:
    env = agent_env(tmp_path, AGENT_WRAPPER_DEPTH="1", AGENT_WRAPPER_RUN_ID="parent-run")
    run_wrapper(tmp_path, [final(), *END], env=env)
    [record] = [json.loads(x) for x in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert record["env"]["AGENT_WRAPPER_DEPTH"] == "2"
    assert record["env"]["AGENT_WRAPPER_PARENT_RUN_ID"] == "parent-run"


def test_too_deep_nesting_is_refused(tmp_path: Path) -> None:
    env = agent_env(tmp_path, AGENT_WRAPPER_DEPTH="3", AGENT_WRAPPER_RUN_ID="parent-run")
    run = run_wrapper(tmp_path, [final(), *END], env=env, options=["--max-depth", "3"])
    assert run.returncode == 1
    assert run.result["outcome"] == "refused"
    assert run.result["error"]["kind"] == "max_depth"
    assert not (tmp_path / "record.jsonl").exists(), "the agent must not have been started"


def test_task_starting_with_dash_reaches_the_agent_as_text(tmp_path: Path) -> None:
    run_wrapper(tmp_path, [final(), *END], task="--force the build")
    [record] = [json.loads(x) for x in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert record["prompt"].strip() == "--force the build"


def test_task_file_too_long_for_argv_goes_through_a_file(tmp_path: Path) -> None:
    task = "Refactor everything. " * 10_000
    task_file = tmp_path / "task.txt"
    task_file.write_text(task)
    scenario = write_scenario(tmp_path, [final(), *END])
    argv = wrapper_argv(
        tmp_path / "run", scenario, task=None, options=["--task-file", str(task_file)]
    )
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr
    [record] = [json.loads(x) for x in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert record["prompt"] == task
    assert read_result(tmp_path / "run" / "result.json")["task"] == task


def test_task_from_stdin_loses_the_newline_a_pipe_adds(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, [final(), *END])
    argv = wrapper_argv(tmp_path / "run", scenario, task=None, options=["--task-file", "-"])
    proc = subprocess.run(
        argv,
        input=b"Fix the bug.\n\n",
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    # One newline is the pipe's; the rest is the user's.
    assert read_result(tmp_path / "run" / "result.json")["task"] == "Fix the bug.\n"


def test_an_empty_task_file_is_a_usage_error(tmp_path: Path) -> None:
    task_file = tmp_path / "task.txt"
    task_file.write_text("\n")
    scenario = write_scenario(tmp_path, [final(), *END])
    argv = wrapper_argv(
        tmp_path / "run", scenario, task=None, options=["--task-file", str(task_file)]
    )
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 2
    assert b"is empty" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_timeout_ends_the_run(tmp_path: Path) -> None:
    steps = [*tool_turn(duration=30)]
    run = run_wrapper(tmp_path, steps, options=["--timeout", "1", "--kill-after", "1"])
    assert run.returncode == 124
    assert run.result["outcome"] == "timeout"
    assert run.result["error"]["kind"] == "timeout"
    assert run.result["signalsSent"][0]["signal"] == "SIGTERM"
    assert run.elapsed < 20


def test_garbage_and_partial_lines_do_not_stop_the_reader(tmp_path: Path) -> None:
    steps = [
        {"line": "Warning: config file not found"},
        {"line": "\x1b[33mcoloured noise\x1b[0m"},
        {"line": '{"type":"message_end","message":{"role":"assis'},
        {"line": "[1,2,3]"},
        {"line": ""},
        {"bytes_hex": "c3 28 ff 0a".replace(" ", "")},
        *tool_turn(),
        {
            "line": json.dumps(
                {
                    "type": "message_end",
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": "Final without newline"}],
                        "stopReason": "stop",
                    },
                }
            ),
            "newline": False,
        },
    ]
    run = run_wrapper(tmp_path, steps)
    assert run.returncode == 0, run.result
    assert run.result["finalText"] == "Final without newline"
    reasons = [e["reason"] for e in run.of_type("unparsed_line")]
    assert reasons.count("not JSON") >= 3
    assert "JSON list, not an object" in reasons
    assert "blank line" in reasons


def test_stderr_lines_are_events_and_logged(tmp_path: Path) -> None:
    run = run_wrapper(tmp_path, [{"stderr": "debug: loading model"}, final(), *END])
    assert [e["text"] for e in run.of_type("stderr_line")] == ["debug: loading model"]
    assert (run.run_dir / "stderr.log").read_text() == "debug: loading model\n"


def test_grandchild_left_in_the_group_is_cleaned_up(tmp_path: Path) -> None:
    steps = [{"spawn": {"seconds": 60}}, final(), *END]
    run = run_wrapper(tmp_path, steps)
    assert run.returncode == 0
    assert any(w["code"] == "leftover_processes" for w in run.result["warnings"])
    # no_leaks checks the grandchild (it carries the test's marker) is gone.


def test_grandchild_holding_the_pipe_does_not_hang_the_run(tmp_path: Path) -> None:
    steps = [{"spawn": {"seconds": 60, "keepStdout": True, "ignoreSigterm": True}}, final(), *END]
    run = run_wrapper(tmp_path, steps, options=["--drain-timeout", "0.5", "--kill-after", "0.5"])
    assert run.returncode == 0
    assert run.result["outcome"] == "ok"
    codes = {w["code"] for w in run.result["warnings"]}
    assert "pipe_held_open" in codes
    assert run.elapsed < 20


def test_broken_stdout_does_not_stop_supervision(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, [*tool_turn(duration=0.5), final("Answer."), *END])
    run_dir = tmp_path / "run"
    read_end, write_end = os.pipe()
    os.close(read_end)  # the runner went away before the run started
    proc = subprocess.run(
        wrapper_argv(run_dir, scenario),
        stdout=write_end,
        stderr=subprocess.PIPE,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        check=False,
    )
    os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    result = read_result(run_dir / "result.json")
    assert result["finalText"] == "Answer."
    assert any(w["code"] == "output_broken" for w in result["warnings"])


def _start_wrapper(
    tmp_path: Path, steps: list[dict[str, Any]], options: list[str]
) -> subprocess.Popen[bytes]:
    scenario = write_scenario(tmp_path, steps)
    return subprocess.Popen(
        wrapper_argv(tmp_path / "run", scenario, options=options),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=agent_env(tmp_path),
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT])
def test_wrapper_signal_cleans_up_and_exits_128_plus_n(
    tmp_path: Path, signum: signal.Signals
) -> None:
    steps = [*tool_turn(duration=60)]
    proc = _start_wrapper(tmp_path, steps, [])
    assert wait_until((tmp_path / "record.jsonl").exists)
    time.sleep(0.3)
    proc.send_signal(signum)
    assert proc.wait(HANG_LIMIT) == 128 + signum
    result = read_result(tmp_path / "run" / "result.json")
    assert result["outcome"] == "aborted"
    assert result["error"]["kind"] == "interrupted"
    assert signum.name in result["error"]["message"]
    assert result["signalsSent"][0]["signal"] == "SIGTERM"


def test_second_signal_goes_straight_to_sigkill(tmp_path: Path) -> None:
    steps = [{"ignore_sigterm": True}, *tool_turn(duration=60)]
    proc = _start_wrapper(tmp_path, steps, ["--kill-after", "30"])
    assert wait_until((tmp_path / "record.jsonl").exists)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    assert proc.wait(HANG_LIMIT) == 128 + signal.SIGTERM
    assert time.monotonic() - started < 15
    result = read_result(tmp_path / "run" / "result.json")
    assert [s["signal"] for s in result["signalsSent"]] == ["SIGTERM", "SIGKILL"]
    assert result["exitSignal"] == "SIGKILL"


def test_reused_run_dir_is_cleared_of_a_previous_result(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # As an earlier version left it: recognised by its config.json's runId.
    (run_dir / "config.json").write_text('{"runId": "earlier"}')
    (run_dir / "result.json").write_text('{"outcome": "ok", "stale": true}')
    (run_dir / "status.json").write_text('{"state": "finished"}')
    scenario = write_scenario(tmp_path, [*tool_turn(duration=60)])
    proc = subprocess.Popen(
        wrapper_argv(run_dir, scenario),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=agent_env(tmp_path),
    )
    assert wait_until((tmp_path / "record.jsonl").exists)
    assert not (run_dir / "result.json").exists()
    assert wait_until(lambda: state_of(run_dir) == "running")
    proc.terminate()
    assert proc.wait(HANG_LIMIT) == 143
    assert "stale" not in read_result(run_dir / "result.json")


def test_status_exists_from_the_moment_the_agent_starts(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    scenario = write_scenario(tmp_path, [*tool_turn(duration=60)])
    proc = subprocess.Popen(
        wrapper_argv(run_dir, scenario),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=agent_env(tmp_path),
    )
    try:
        assert wait_until((tmp_path / "record.jsonl").exists)
        status = json.loads((run_dir / "status.json").read_text())
        validate("status", status)
        assert status["state"] in ("starting", "running")
        assert status["wrapperPid"] == proc.pid
        assert wait_until(lambda: "bash" in (run_dir / "status.json").read_text())
        shown = invoke([sys.executable, "-m", "wrapper", "status", str(run_dir)], tmp_path)
        assert re.search(
            r": running, attempt 1, agent pid \d+, running tool bash", shown.stdout.decode()
        )
        proc.terminate()
        assert proc.wait(HANG_LIMIT) == 143
    finally:
        proc.kill()
        proc.wait()
    result = read_result(run_dir / "result.json")
    assert result["startedAt"] == status["startedAt"]


def test_runner_that_stops_reading_cannot_stall_timers_or_the_result(tmp_path: Path) -> None:
    stream = tmp_path / "big.jsonl"
    delta = {
        "type": "message_update",
        "assistantMessageEvent": {"type": "text_delta", "delta": "x" * 200},
    }
    stream.write_text((json.dumps(delta) + "\n") * 100_000)
    run_dir = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "wrapper",
        "run",
        "--output",
        "jsonl",
        "--dialect",
        "pi",
        "--run-dir",
        str(run_dir),
        "--timeout",
        "2",
        "--",
        "cat",
        str(stream),
    ]
    # The runner never reads: the wrapper's stdout pipe fills and stays full.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=agent_env(tmp_path)
    )
    try:
        assert proc.wait(HANG_LIMIT) == 124
    finally:
        assert proc.stdout is not None
        proc.stdout.close()
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "timeout"
    assert not any(w["code"] == "pipe_held_open" for w in result["warnings"])
