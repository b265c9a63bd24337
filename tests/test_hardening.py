"""Fault injection: the real wrapper against the fake agent misbehaving, and the
wrapper itself killed hard. Every test checks (through ``no_leaks``) that no
process the agent started outlives the run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import (
    HANG_LIMIT,
    agent_env,
    processes_matching,
    read_result,
    run_wrapper,
    state_of,
    wait_until,
    wrapper_argv,
    write_scenario,
)
from wrapper.dialects.pi import PiDialect
from wrapper.events import Event
from wrapper.framing import LineFramer

pytestmark = pytest.mark.usefixtures("no_leaks")

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def final(text: str = "Done.") -> dict[str, Any]:
    return {"assistant": {"text": text, "stopReason": "stop"}}


def marked(tmp_path: Path) -> list[tuple[int, str]]:
    return processes_matching(f"marker-{tmp_path.name}")


# -- processes that leave the tree ------------------------------------------------------


@pytest.mark.parametrize("setsid", [False, True], ids=["orphan", "setsid-orphan"])
def test_orphans_of_a_clean_exit_are_found_and_ended(tmp_path: Path, setsid: bool) -> None:
    # The agent starts a server and exits at once: the server is orphaned
    # (reparented), and with setsid it is in no group the wrapper knows.
    run = run_wrapper(
        tmp_path,
        [{"spawn": {"seconds": 60, "setsid": setsid}}, final(), *END],
    )
    assert run.returncode == 0
    assert run.result["success"] is True
    (warning,) = [w for w in run.result["warnings"] if w["code"] == "leftover_processes"]
    assert "python" in warning["message"]
    assert marked(tmp_path) == []


def test_orphans_that_ignore_sigterm_are_killed(tmp_path: Path) -> None:
    run = run_wrapper(
        tmp_path,
        [
            {"spawn": {"seconds": 60, "setsid": True, "ignoreSigterm": True}},
            {"sleep": 0.5},  # time for the child to start ignoring SIGTERM
            final(),
            *END,
        ],
        options=["--kill-after", "0.5"],
    )
    assert run.result["success"] is True
    sent = [s["signal"] for s in run.result["signalsSent"]]
    assert sent == ["SIGTERM", "SIGKILL"]
    assert marked(tmp_path) == []


def test_a_setsid_grandchild_of_a_lingering_agent_is_ended(tmp_path: Path) -> None:
    run = run_wrapper(
        tmp_path,
        [{"spawn": {"seconds": 60, "setsid": True}}, final(), {"linger": {"seconds": 60}}],
        options=["--grace", "0.2"],
    )
    assert run.result["success"] is True
    assert run.result["forcedCleanup"] is True
    assert marked(tmp_path) == []


# -- the wrapper dies hard -------------------------------------------------------------------


def test_sigkilled_wrapper_takes_the_agent_tree_with_it(tmp_path: Path) -> None:
    scenario = write_scenario(
        tmp_path,
        [
            {"spawn": {"seconds": 60}},
            {"spawn": {"seconds": 60, "setsid": True}},
            {"spawn": {"seconds": 60, "ignoreSigterm": True}},
            {"assistant": {"text": "working", "stopReason": "toolUse"}},
            {"tool": {"duration": 60}},
        ],
    )
    argv = wrapper_argv(tmp_path / "run", scenario)
    wrapper = subprocess.Popen(
        argv, env=agent_env(tmp_path), stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    try:
        # The three children (the marker is in their command lines).
        assert wait_until(lambda: len(marked(tmp_path)) == 3, timeout=20)
        time.sleep(1.0)  # the guardian, polling every 0.2 s, has listed them
        wrapper.kill()
        wrapper.wait(timeout=HANG_LIMIT)
        # A couple of seconds when the machine is idle; the bound only catches a hang.
        assert wait_until(lambda: not marked(tmp_path), timeout=15), marked(tmp_path)
        shown = subprocess.run(
            [sys.executable, "-m", "wrapper", "status", str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=HANG_LIMIT,
            check=False,
        )
        assert "ended without finishing" in shown.stdout
    finally:
        wrapper.kill()
        wrapper.wait()


def test_the_guardian_does_nothing_after_a_clean_finish(tmp_path: Path) -> None:
    run = run_wrapper(tmp_path, [final(), *END])
    assert run.result["success"] is True
    assert not processes_matching("guardian.py " + str(os.getpid()))
    # No guardian is left behind for this run either.
    assert wait_until(lambda: not _guardians_of_dead_parents(), timeout=10)


def _guardians_of_dead_parents() -> list[tuple[int, str]]:
    found = []
    for pid, cmdline in processes_matching("wrapper/guardian.py"):
        parent = cmdline.split()[-1]
        if parent.isdigit() and not Path(f"/proc/{parent}").exists():
            found.append((pid, cmdline))
    return found


# -- hangs -------------------------------------------------------------------------------------


def test_idle_agent_is_ended_as_a_timeout(tmp_path: Path) -> None:
    run = run_wrapper(
        tmp_path,
        [{"assistant": {"text": "thinking", "stopReason": "toolUse"}}, {"sleep": 60}],
        options=["--idle-timeout", "1"],
    )
    assert run.returncode == 124
    assert run.result["outcome"] == "timeout"
    assert run.result["error"]["kind"] == "idle_timeout"
    assert run.elapsed < 20


def test_a_silent_tool_is_not_idleness(tmp_path: Path) -> None:
    run = run_wrapper(
        tmp_path,
        [
            {"assistant": {"text": "testing", "toolCalls": [{"name": "bash"}]}},
            {"tool": {"name": "bash", "duration": 2.5}},
            final(),
            *END,
        ],
        options=["--idle-timeout", "1"],
    )
    assert run.returncode == 0, run.result["error"]


# -- input ----------------------------------------------------------------------------------------


def test_an_oversized_end_of_run_event_still_counts(tmp_path: Path) -> None:
    huge_end = {
        "type": "agent_end",
        "messages": [{"role": "user", "content": "x" * 50_000}],
        "willRetry": False,
    }
    run = run_wrapper(
        tmp_path,
        [final(), {"event": huge_end}, {"linger": {"seconds": 60}}],
        options=["--max-line-bytes", "20000", "--grace", "30"],
    )
    assert run.result["success"] is True
    (oversized,) = [e for e in run.events if e["type"] == "oversized_line"]
    assert oversized["eventType"] == "agent_end"
    assert oversized["size"] > 50_000
    (grace,) = [e for e in run.events if e["type"] == "grace_started" and e["settled"]]
    assert grace["seconds"] == pytest.approx(0.2)
    assert run.elapsed < 15, "the settle grace, not --grace 30, ended the lingering agent"
    assert (run.run_dir / "stdout.log").stat().st_size > 50_000, "the bytes are still logged"


STREAM = (
    b"".join(
        json.dumps(obj).encode() + b"\n"
        for obj in [
            {"type": "session", "version": 3, "id": "s1", "cwd": "/w"},
            {"type": "turn_start"},
            {
                "type": "message_update",
                "message": {"role": "assistant"},
                "assistantMessageEvent": {"type": "text_delta", "delta": "Hel"},
            },
            {
                "type": "message_update",
                "message": {"role": "assistant"},
                "assistantMessageEvent": {"type": "text_delta", "delta": "lo"},
            },
            {"type": "tool_execution_start", "toolName": "bash", "toolCallId": "c1", "args": {}},
            {"type": "tool_execution_end", "toolName": "bash", "toolCallId": "c1", "result": {}},
            {
                "type": "message_end",
                "message": {"role": "assistant", "content": "Hello", "stopReason": "stop"},
            },
            {"type": "agent_end", "willRetry": False},
        ]
    )
    + b'\x1b[31mnoise\xff\x00\n[1,2]\n{"type":"agent_settled"}'
)


def normalize(chunks: list[bytes]) -> list[Event]:
    framer, dialect = LineFramer(200), PiDialect()
    events: list[Event] = []
    for chunk in chunks:
        for frame in framer.feed(chunk):
            events += dialect.parse(frame) if isinstance(frame, bytes) else dialect.oversized(frame)
    for frame in framer.close():
        events += dialect.parse(frame) if isinstance(frame, bytes) else dialect.oversized(frame)
    return events


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=30))
def test_any_split_of_a_stream_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert normalize(chunks) == normalize([STREAM])


@given(st.lists(st.binary(max_size=300), max_size=20))
def test_arbitrary_bytes_never_raise_through_framer_and_dialect(chunks: list[bytes]) -> None:
    normalize(chunks)


# -- a real terminal ----------------------------------------------------------------------------


@pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)"
)
def test_killing_the_tmux_pane_cleans_up_and_writes_the_result(tmp_path: Path) -> None:
    scenario = write_scenario(
        tmp_path,
        [
            {"spawn": {"seconds": 60}},
            {"assistant": {"text": "working", "stopReason": "toolUse"}},
            {"tool": {"duration": 60}},
        ],
    )
    run_dir = tmp_path / "run"
    argv = wrapper_argv(run_dir, scenario, options=["--output", "pretty"])
    session = f"aw-{tmp_path.name}"[:60]
    env = agent_env(tmp_path)
    socket = ["-L", session]
    command = " ".join(f"'{arg}'" for arg in argv)
    subprocess.run(
        ["tmux", *socket, "new-session", "-d", "-s", session, "-x", "120", "-y", "40", command],
        env=env,
        check=True,
        timeout=HANG_LIMIT,
    )
    try:
        assert wait_until(lambda: state_of(run_dir) == "running")
        assert wait_until(lambda: len(marked(tmp_path)) == 1)
        subprocess.run(["tmux", *socket, "kill-pane", "-t", session], check=True, timeout=30)
        result_path = run_dir / "result.json"
        assert wait_until(result_path.exists, timeout=20)
        result = read_result(result_path)
        assert result["outcome"] == "aborted"
        assert result["exitStatus"] == 128 + signal.SIGHUP
        assert wait_until(lambda: not marked(tmp_path), timeout=10)
    finally:
        subprocess.run(["tmux", *socket, "kill-server"], check=False, timeout=30)


@pytest.mark.parametrize("when", [0.0, 0.1, "agent started"])
def test_a_signal_while_the_wrapper_starts_still_ends_everything(
    tmp_path: Path, when: float | str
) -> None:
    # The agent is started before the wrapper's own start-up is over; a
    # signal at any moment of it must still end the agent and leave a result.
    scenario = write_scenario(
        tmp_path,
        [
            {"spawn": {"seconds": 60}},
            {"assistant": {"text": "x", "stopReason": "toolUse"}},
            {"tool": {"duration": 60}},
        ],
    )
    run_dir = tmp_path / "run"
    wrapper = subprocess.Popen(
        wrapper_argv(run_dir, scenario),
        env=agent_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        if isinstance(when, str):  # the agent runs; the wrapper may still be importing
            assert wait_until((tmp_path / "record.jsonl").exists, timeout=20)
        else:
            time.sleep(when)
        wrapper.send_signal(signal.SIGTERM)
        code = wrapper.wait(timeout=HANG_LIMIT)
    finally:
        wrapper.kill()
        wrapper.wait()
    if (run_dir / "result.json").exists():
        result = read_result(run_dir / "result.json")
        assert code == 128 + signal.SIGTERM
        assert result["outcome"] == "aborted"
    else:
        # Killed before it could set anything up: nothing was started either.
        assert code == -signal.SIGTERM
        assert when != "agent started"
    assert wait_until(lambda: not marked(tmp_path), timeout=15)
    assert wait_until(lambda: not processes_matching(str(scenario)), timeout=15)
