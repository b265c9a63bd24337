"""Process handling under pressure: orphan storms, processes that keep changing
pid, a second wrapper signal during cleanup, and what hooks leave behind.
Every test checks (through ``no_leaks``) that nothing it started outlives the
run; the time bounds are generous, only there to catch the slow paths."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    ROOT,
    agent_env,
    processes_matching,
    read_result,
    run_wrapper,
    state_of,
    wait_until,
    wrapper_argv,
    write_scenario,
)
from tests.dialect_support import mode_args

pytestmark = pytest.mark.usefixtures("no_leaks")

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]
PROCS = ROOT / "fixtures" / "procs"


def final(text: str = "Done.") -> dict[str, Any]:
    return {"assistant": {"text": text, "stopReason": "stop"}}


def marker(tmp_path: Path) -> str:
    return f"marker-{tmp_path.name}"


def marked(tmp_path: Path) -> list[tuple[int, str]]:
    return processes_matching(marker(tmp_path))


def in_a_tool(*steps: dict[str, Any], duration: float = 60) -> list[dict[str, Any]]:
    """The agent starts a tool, does ``steps`` inside it, and stays in it."""
    return [
        {"assistant": {"text": "Working.", "toolCalls": [{"name": "bash"}]}},
        *steps,
        {"tool": {"name": "bash", "duration": duration}},
    ]


def storm(tmp_path: Path, count: int = 3000) -> dict[str, Any]:
    argv = [sys.executable, str(PROCS / "storm.py"), str(count), "0.01", marker(tmp_path)]
    return {"run": {"argv": argv, "timeout": 120}}


def start_wrapper(
    tmp_path: Path, steps: list[dict[str, Any]], options: list[str]
) -> subprocess.Popen[bytes]:
    scenario = write_scenario(tmp_path, steps)
    return subprocess.Popen(
        wrapper_argv(tmp_path / "run", scenario, options=options),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=agent_env(tmp_path),
    )


# -- orphan storms ---------------------------------------------------------------------


def test_an_orphan_storm_does_not_delay_the_timeout(tmp_path: Path) -> None:
    # 3000 short-lived double-forked children, each adopted by the wrapper:
    # they must not pile up as zombies that the cleanup then wades through.
    run = run_wrapper(tmp_path, in_a_tool(storm(tmp_path)), options=["--timeout", "8"])
    assert run.returncode == 124
    assert run.result["error"]["kind"] == "timeout"
    # About a second after the deadline when all is well (start-up included
    # here); it took half a minute when each zombie cost a scan of /proc.
    assert run.elapsed < 8 + 10


def test_sigterm_during_an_orphan_storm_is_acted_on(tmp_path: Path) -> None:
    proc = start_wrapper(tmp_path, in_a_tool(storm(tmp_path)), [])
    time.sleep(8)  # the storm has left its orphans by now
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(HANG_LIMIT) == 128 + signal.SIGTERM
    assert time.monotonic() - signalled < 10
    assert read_result(tmp_path / "run" / "result.json")["outcome"] == "aborted"


# -- cleanup converges -----------------------------------------------------------------------


def test_a_process_that_keeps_changing_pid_is_caught(tmp_path: Path) -> None:
    # It forks and exits every few milliseconds, each time in a new session,
    # so a list of pids is out of date before it can be acted on.
    hopper = [sys.executable, str(PROCS / "hopper.py"), "0.003", marker(tmp_path)]
    run = run_wrapper(tmp_path, [{"run": {"argv": hopper}}, final(), *END])
    assert run.returncode == 0
    codes = [w["code"] for w in run.result["warnings"]]
    assert "leftover_processes" in codes
    assert "cleanup_incomplete" not in codes
    assert wait_until(lambda: not marked(tmp_path), timeout=5), marked(tmp_path)


# -- a second signal means now ----------------------------------------------------------------


def test_a_second_signal_kills_leftovers_without_waiting_for_kill_after(tmp_path: Path) -> None:
    steps = in_a_tool(
        {"spawn": {"seconds": 120, "setsid": True, "ignoreSigterm": True}},
        {"sleep": 0.5},  # time for the child to start ignoring SIGTERM
    )
    proc = start_wrapper(tmp_path, steps, ["--kill-after", "40"])
    assert wait_until(lambda: len(marked(tmp_path)) == 1, timeout=20)
    time.sleep(1.0)
    agent = json.loads((tmp_path / "run" / "status.json").read_text())["pid"]
    proc.send_signal(signal.SIGTERM)
    # The agent dies of SIGTERM; its child ignores it and is waited for.
    assert wait_until(lambda: not Path(f"/proc/{agent}").exists(), timeout=20)
    time.sleep(3.0)
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert proc.wait(HANG_LIMIT) == 128 + signal.SIGTERM
    assert time.monotonic() - signalled < 15  # well under --kill-after
    result = read_result(tmp_path / "run" / "result.json")
    assert result["outcome"] == "aborted"
    assert "SIGKILL" in [s["signal"] for s in result["signalsSent"]]
    assert marked(tmp_path) == []


def test_a_second_signal_during_the_cleanup_of_a_clean_exit_kills_at_once(
    tmp_path: Path,
) -> None:
    steps: list[dict[str, Any]] = [
        {"spawn": {"seconds": 120, "setsid": True, "ignoreSigterm": True}},
        {"sleep": 0.5},  # time for the child to start ignoring SIGTERM
        final(),
        *END,
    ]
    proc = start_wrapper(tmp_path, steps, ["--kill-after", "40"])
    run_dir = tmp_path / "run"
    assert wait_until(lambda: state_of(run_dir) not in (None, "starting"), timeout=20)
    agent = json.loads((run_dir / "status.json").read_text())["pid"]
    assert agent != proc.pid
    # The agent has exited; its child, ignoring SIGTERM, is being waited for.
    assert wait_until(lambda: not Path(f"/proc/{agent}").exists(), timeout=20)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    proc.wait(HANG_LIMIT)
    assert time.monotonic() - signalled < 15  # well under --kill-after
    result = read_result(run_dir / "result.json")
    assert "SIGKILL" in [s["signal"] for s in result["signalsSent"]]
    assert marked(tmp_path) == []


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


# -- hooks and observers ---------------------------------------------------------------------


def setsid_sleeper(tmp_path: Path, name: str, then_sleep: float = 0) -> str:
    """A hook script that starts a sleeper in a session of its own and exits
    (after ``then_sleep`` seconds); returns its command."""
    path = tmp_path / name
    path.write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys, time
            sys.stdin.read()
            subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(120)", {marker(tmp_path)!r}],
                start_new_session=True,
            )
            time.sleep({then_sleep})
            """
        )
    )
    return f"{sys.executable} {path}"


def settings(tmp_path: Path, event: str, command: str) -> list[str]:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"hooks": {event: [{"hooks": [{"command": command}]}]}}))
    return ["--settings", str(path)]


def test_a_stop_hooks_setsid_child_is_ended_with_the_run(tmp_path: Path) -> None:
    options = settings(tmp_path, "Stop", setsid_sleeper(tmp_path, "stop-hook.py"))
    run = run_wrapper(tmp_path, [final(), *END], options=options)
    assert run.returncode == 0
    assert run.result["outcome"] == "ok"
    assert "leftover_processes" in [w["code"] for w in run.result["warnings"]]
    assert marked(tmp_path) == []


def test_an_observers_setsid_child_is_ended_with_the_run(tmp_path: Path) -> None:
    # The observer is still running when the agent exits: its child is not
    # yet an orphan when the agent's leftovers are swept.
    observer = setsid_sleeper(tmp_path, "observer.py", then_sleep=2)
    options = settings(tmp_path, "PostToolUse", observer)
    steps: list[dict[str, Any]] = [
        {"assistant": {"text": "Working.", "toolCalls": [{"name": "bash"}]}},
        {"tool": {"name": "bash"}},
        final(),
        *END,
    ]
    run = run_wrapper(tmp_path, steps, options=options)
    assert run.returncode == 0
    assert "leftover_processes" in [w["code"] for w in run.result["warnings"]]
    assert marked(tmp_path) == []


def test_a_hooks_setsid_child_is_ended_when_the_wrapper_is_signalled(tmp_path: Path) -> None:
    options = settings(tmp_path, "Stop", setsid_sleeper(tmp_path, "stop-hook.py", then_sleep=60))
    proc = start_wrapper(tmp_path, [final(), *END], options)
    assert wait_until(lambda: len(marked(tmp_path)) == 1, timeout=20)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(HANG_LIMIT) == 128 + signal.SIGTERM
    result = read_result(tmp_path / "run" / "result.json")
    assert result["outcome"] == "aborted"
    assert "leftover_processes" in [w["code"] for w in result["warnings"]]
    assert marked(tmp_path) == []


# -- the agent's own words decide ---------------------------------------------------------------


def test_a_final_message_written_after_the_agent_exited_does_not_make_it_ok(
    tmp_path: Path,
) -> None:
    # The agent exits at once; the process it leaves holding its output
    # writes the final answer later (after the wrapper is surely up and has
    # seen the exit), within the drain time it is given.
    steps = [{"sleep": 4.0}, final("All done, trust me."), *END]
    run = run_wrapper(
        tmp_path, steps, options=["--drain-timeout", "20"], scenario_extra={"writer": "orphan"}
    )
    assert run.returncode == 1
    assert run.result["outcome"] == "error"
    assert run.result["error"]["kind"] == "exited_early"
    (late,) = [w for w in run.result["warnings"] if w["code"] == "late_final_message"]
    assert "All done, trust me." in late["message"]
    # Recorded all the same.
    texts = [e.get("text") for e in run.events if e["type"] == "assistant_message"]
    assert "All done, trust me." in texts
    assert b"All done, trust me." in (run.run_dir / "stdout.log").read_bytes()


@pytest.mark.parametrize("dialect", ["codex", "gemini"])
def test_a_stream_written_by_the_launchers_child_still_counts(tmp_path: Path, dialect: str) -> None:
    # Their launchers start the process that writes the stream and exit
    # after it: its last lines are in the pipe before the launcher's exit.
    scenario = write_scenario(
        tmp_path,
        [{"assistant": {"text": "Fixed it.", "deltas": 0}}, *END],
        writer="child",
    )
    run_dir = tmp_path / "run"
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
        "--",
        str(ROOT / "fixtures" / "fake_agent" / dialect),
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
    assert proc.returncode == 0, result["error"]
    assert result["outcome"] == "ok"
    assert result["finalText"] == "Fixed it."
    assert "late_final_message" not in [w["code"] for w in result["warnings"]]


# -- activity, not just output ----------------------------------------------------------------


def silent_tool(code: str) -> list[dict[str, Any]]:
    """A tool the agent reports only when it has finished (as opencode does):
    nothing on the stream while ``code`` runs in a child process."""
    return [
        {"assistant": {"text": "Running it.", "stopReason": "toolUse", "turnEnd": True}},
        {"run": {"argv": [sys.executable, "-c", code]}},
        final("It ran."),
        *END,
    ]


def test_a_busy_silent_tool_is_not_idleness(tmp_path: Path) -> None:
    # Its process is new at the first look and spends CPU time at the next.
    busy = "import time\nend = time.monotonic() + 2.5\nwhile time.monotonic() < end: pass"
    run = run_wrapper(tmp_path, silent_tool(busy), options=["--idle-timeout", "1"])
    assert run.returncode == 0, run.result["error"]
    assert run.result["outcome"] == "ok"


def test_a_new_process_is_not_idleness(tmp_path: Path) -> None:
    # The sleeping tool is new at the first look (after 2 s of silence) and
    # ends before the second (2 s later): its start may lag well over a
    # second on a loaded machine and still fall in that window.
    steps = silent_tool("import time; time.sleep(2.5)")
    run = run_wrapper(tmp_path, steps, options=["--idle-timeout", "2"])
    assert run.returncode == 0, run.result["error"]
    assert run.result["outcome"] == "ok"


def test_a_silent_agent_with_an_old_idle_child_is_still_idle(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"spawn": {"seconds": 60}},
        {"assistant": {"text": "Thinking.", "stopReason": "toolUse"}},
        {"sleep": 60},
    ]
    run = run_wrapper(tmp_path, steps, options=["--idle-timeout", "1"])
    assert run.returncode == 124
    assert run.result["error"]["kind"] == "idle_timeout"
    assert run.elapsed < 30
