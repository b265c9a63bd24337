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
    validate,
    wait_until,
    wrapper_argv,
    write_scenario,
)
from wrapper.core.events import Event
from wrapper.core.framing import LineFramer
from wrapper.core.result import RUN_FILES, wrapper_killed_result
from wrapper.core.signals import WRAPPER_KILLED_EXIT
from wrapper.dialects.pi import PiDialect
from wrapper.process import sweep

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


LONG_RUN: list[dict[str, Any]] = [
    {"spawn": {"seconds": 60}},
    {"spawn": {"seconds": 60, "setsid": True}},
    {"spawn": {"seconds": 60, "ignoreSigterm": True}},
    {"assistant": {"text": "working", "stopReason": "toolUse"}},
    {"tool": {"duration": 60}},
]


def _status_command(run_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wrapper", "status", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        check=False,
    )


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _assert_wrapper_killed_result(result_path: Path, run_dir: Path) -> dict[str, Any]:
    """The guardian's result.json and status.json of a run whose wrapper was killed."""
    # The guardian writes it once the run's processes are gone.
    assert wait_until(result_path.exists, timeout=30), "the guardian wrote no result.json"
    result = read_result(result_path)
    assert result["outcome"] == "aborted"
    assert result["success"] is False
    assert result["exitStatus"] == 128 + signal.SIGKILL
    assert result["error"]["kind"] == "wrapper_killed"
    # status.json is marked finished right after result.json, as at the end
    # of any run: a reader that saw the result may still see the earlier state.
    assert wait_until(lambda: state_of(run_dir) == "finished", timeout=30), state_of(run_dir)
    status = _read_json(run_dir / "status.json")
    assert status is not None
    validate("status", status)
    assert status["state"] == "finished"
    assert status["outcome"] == "aborted"
    assert result["runId"] == status["runId"]
    return result


def test_sigkilled_wrapper_takes_the_agent_tree_with_it_and_leaves_a_result(
    tmp_path: Path,
) -> None:
    scenario = write_scenario(tmp_path, LONG_RUN)
    run_dir, result_path = tmp_path / "run", tmp_path / "elsewhere" / "out.json"
    argv = wrapper_argv(
        run_dir, scenario, options=["--result", str(result_path), "--label", "nightly"]
    )
    wrapper = subprocess.Popen(
        argv, env=agent_env(tmp_path), stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    try:
        # The three children (the marker is in their command lines).
        assert wait_until(lambda: len(marked(tmp_path)) == 3, timeout=20)
        time.sleep(0.5)  # time for the third child to start ignoring SIGTERM
        wrapper.kill()
        wrapper.wait(timeout=HANG_LIMIT)
        # A couple of seconds when the machine is idle; the bound only catches a hang.
        assert wait_until(lambda: not marked(tmp_path), timeout=15), marked(tmp_path)
        result = _assert_wrapper_killed_result(result_path, run_dir)
    finally:
        wrapper.kill()
        wrapper.wait()
    # Where the run's configuration said, and nowhere else.
    assert not (run_dir / "result.json").exists()
    assert result["label"] == "nightly"
    assert result["task"] == "Do the task"
    assert result["command"][0].endswith("pi")
    assert result["signalsSent"][0]["signal"] == "SIGTERM"
    assert any(s["signal"] == "SIGKILL" for s in result["signalsSent"]), "one ignored SIGTERM"
    assert str(wrapper.pid) in result["error"]["message"]
    shown = _status_command(run_dir)
    assert shown.returncode == 1
    assert "ended because the wrapper" in shown.stdout
    assert "killed" in shown.stdout


@pytest.mark.parametrize(
    ("after", "delay"),
    [
        *(("wrapper start", ms) for ms in (0, 20, 50, 100, 200, 400)),
        *(("agent start", ms) for ms in (0, 20, 50, 100, 200)),
    ],
    ids=lambda value: str(value).replace(" ", "-"),
)
def test_a_wrapper_sigkilled_at_any_moment_leaves_nothing_running(
    tmp_path: Path, after: str, delay: int
) -> None:
    # No preamble: the agent starts its children before it writes a byte, so
    # they outlive an agent that dies of its reader's death.
    scenario = write_scenario(tmp_path, LONG_RUN, preamble=False)
    run_dir = tmp_path / "run"
    wrapper = subprocess.Popen(
        wrapper_argv(run_dir, scenario),
        env=agent_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        if after == "agent start":
            # The first child of the wrapper's worker (the process the
            # wrapper forked), seen within a millisecond of its fork: before
            # the agent has even run.
            deadline = time.monotonic() + 30
            while not any(_children_of(worker) for worker in _children_of(wrapper.pid)):
                assert time.monotonic() < deadline, "the wrapper started no agent"
                time.sleep(0.001)
        time.sleep(delay / 1000)
        wrapper.kill()
        wrapper.wait(timeout=HANG_LIMIT)
    finally:
        wrapper.kill()
        wrapper.wait()
    began = (run_dir / "status.json").exists()
    assert wait_until(
        lambda: not marked(tmp_path) and not processes_matching(str(scenario)), timeout=20
    ), (marked(tmp_path), processes_matching(str(scenario)))
    if after == "agent start":
        assert began, "the agent starts after the run directory is set up"
    if began:
        _assert_wrapper_killed_result(run_dir / "result.json", run_dir)
        assert _status_command(run_dir).returncode == 1
    # Still nothing, once the guardian is done.
    assert not marked(tmp_path)
    assert not processes_matching(str(scenario))


def _children_of(pid: int) -> list[int]:
    children: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(child) for child in (task / "children").read_text().split()]
    except OSError:
        pass
    return children


def test_the_guardian_ends_only_the_processes_of_its_run(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, LONG_RUN)
    run_dir = tmp_path / "run"
    # The wrapper leads a process group, with an unrelated process in it.
    wrapper = subprocess.Popen(
        wrapper_argv(run_dir, scenario),
        env=agent_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        process_group=0,
    )
    bystanders: list[subprocess.Popen[bytes]] = []
    try:
        assert wait_until(lambda: len(marked(tmp_path)) == 3, timeout=20)
        status = _read_json(run_dir / "status.json")
        assert status is not None
        run_id = status["runId"]
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)", f"bystander-{tmp_path}"]
        base = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_WRAPPER_")}
        for env, group in [
            ({**base, "AGENT_WRAPPER_RUN_ID": run_id + "-other"}, None),  # another run
            ({**base, "SOMETHING": run_id}, None),  # the id, but not as the run's mark
            (base, wrapper.pid),  # in the wrapper's own process group
        ]:
            bystanders.append(
                subprocess.Popen(sleeper, env=env, process_group=group, stdin=subprocess.DEVNULL)
            )
        wrapper.kill()
        wrapper.wait(timeout=HANG_LIMIT)
        _assert_wrapper_killed_result(run_dir / "result.json", run_dir)
        assert not marked(tmp_path)
        assert [proc.poll() for proc in bystanders] == [None, None, None]
    finally:
        wrapper.kill()
        wrapper.wait()
        for proc in bystanders:
            proc.kill()
            proc.wait()


#: A worker whose guardian has just died, caught in the middle of importing
#: psutil (the module is there, half made): it ends its run.
ORPHANED_MID_IMPORT = """
import json, os, subprocess, sys, types
from pathlib import Path
from wrapper.core import environment
from wrapper.process import guardian, sweep

run_dir, run_id = Path(sys.argv[1]), sys.argv[2]
env = {**os.environ, environment.RUN_ID: run_id}
agent = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(60)", sys.argv[3]],
    env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
guardian._guardian_pid, guardian._guardian_pgid = os.getppid(), os.getpgid(0)
guardian._waiter_command = guardian.waiter_command()  # as the first announcement makes it
guardian._watches.append(sweep.Watch(
    wrapper_pid=os.getppid(), run_id=run_id, run_dir=run_dir,
    result_path=run_dir / "result.json",
))
sys.modules["psutil"] = types.ModuleType("psutil")
guardian._end_orphaned_run()
"""


def test_a_worker_orphaned_in_the_middle_of_an_import_still_ends_its_run(
    tmp_path: Path,
) -> None:
    # The guardian's death reaches the worker as a signal, whatever it is
    # doing: here, importing a module its cleanup needs too.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    status = {**_starting_status("r0"), "state": "running"}
    (run_dir / "status.json").write_text(json.dumps(status))
    worker = subprocess.run(
        [sys.executable, "-c", ORPHANED_MID_IMPORT, str(run_dir), "r0", f"marker-{tmp_path.name}"],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        check=False,
    )
    assert worker.returncode == WRAPPER_KILLED_EXIT, worker.stderr
    assert wait_until(lambda: not marked(tmp_path), timeout=10), marked(tmp_path)
    result = read_result(run_dir / "result.json")
    assert result["error"]["kind"] == "wrapper_killed"
    assert [s["signal"] for s in result["signalsSent"]][:1] == ["SIGTERM"]
    final = json.loads((run_dir / "status.json").read_text())
    assert (final["state"], final["outcome"]) == ("finished", "aborted")


def test_the_guardian_never_replaces_the_result_its_wrapper_wrote(tmp_path: Path) -> None:
    # The wrapper wrote result.json and died before its final status.json.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    status = {**_starting_status("r1"), "state": "running"}
    (run_dir / "status.json").write_text(json.dumps(status))
    own = {"runId": "r1", "outcome": "ok", "success": True}
    (run_dir / "result.json").write_text(json.dumps(own))
    watch = sweep.Watch(
        wrapper_pid=1, run_id="r1", run_dir=run_dir, result_path=run_dir / "result.json"
    )
    sweep.finish_run(watch, sweep.Cleanup())
    assert json.loads((run_dir / "result.json").read_text()) == own
    final = json.loads((run_dir / "status.json").read_text())
    validate("status", final)
    assert (final["state"], final["outcome"]) == ("finished", "ok")


def test_the_guardian_replaces_another_runs_result_at_the_result_path(tmp_path: Path) -> None:
    run_dir, elsewhere = tmp_path / "run", tmp_path / "out.json"
    run_dir.mkdir()
    (run_dir / "status.json").write_text(json.dumps(_starting_status("r2")))
    elsewhere.write_text(json.dumps({"runId": "yesterday", "outcome": "ok", "success": True}))
    watch = sweep.Watch(wrapper_pid=1, run_id="r2", run_dir=run_dir, result_path=elsewhere)
    sweep.finish_run(watch, sweep.Cleanup())
    result = read_result(elsewhere)
    assert (result["runId"], result["error"]["kind"]) == ("r2", "wrapper_killed")
    assert not (run_dir / "result.json").exists()


def test_the_guardian_leaves_a_directory_its_run_never_began_in(tmp_path: Path) -> None:
    # Another run's files: the wrapper died before it set the directory up.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    theirs = json.dumps(_starting_status("someone-else"))
    (run_dir / "status.json").write_text(theirs)
    watch = sweep.Watch(
        wrapper_pid=1, run_id="r3", run_dir=run_dir, result_path=run_dir / "result.json"
    )
    sweep.finish_run(watch, sweep.Cleanup())
    assert not (run_dir / "result.json").exists()
    assert (run_dir / "status.json").read_text() == theirs


def test_status_exits_1_for_a_run_its_wrapper_did_not_finish_or_that_failed(
    tmp_path: Path,
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    status = {**_starting_status("r4"), "state": "running", "wrapperPid": gone.pid}
    (run_dir / "status.json").write_text(json.dumps(status))
    shown = _status_command(run_dir)
    assert shown.returncode == 1
    assert "ended without finishing" in shown.stdout
    # A run its wrapper finished as a failure is a failure too.
    failed = {"runId": "r4", "outcome": "error", "success": False, "error": None}
    (run_dir / "result.json").write_text(json.dumps(failed))
    finished = {**status, "state": "finished", "outcome": "error"}
    (run_dir / "status.json").write_text(json.dumps(finished))
    shown = _status_command(run_dir)
    assert shown.returncode == 1
    assert "finished, outcome error" in shown.stdout
    (run_dir / "result.json").write_text(json.dumps({**failed, "outcome": "ok", "success": True}))
    (run_dir / "status.json").write_text(json.dumps({**finished, "outcome": "ok"}))
    assert _status_command(run_dir).returncode == 0


def _starting_status(run_id: str) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "runId": run_id,
        "state": "starting",
        "attempt": 1,
        "pid": None,
        "wrapperPid": 1,
        "startedAt": "2026-01-01T00:00:00.000Z",
        "updatedAt": "2026-01-01T00:00:00.000Z",
        "lastEventAt": None,
        "currentTool": None,
        "label": None,
        "question": None,
        "escalationId": None,
        "outcome": None,
        "usage": None,
        "steers": {"hook": 0, "outside": 0},
    }


def test_the_guardian_does_nothing_after_a_clean_finish(tmp_path: Path) -> None:
    run = run_wrapper(tmp_path, [final(), *END])
    assert run.result["success"] is True
    # No process of the wrapper (its worker included) is left behind.
    assert not processes_matching(str(run.run_dir))
    assert json.loads((run.run_dir / "status.json").read_text())["outcome"] == "ok"


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


def test_a_killed_runs_result_has_the_fields_of_any_other(tmp_path: Path) -> None:
    # A runner reads both with the same code: the guardian's result may hold
    # nulls where only the wrapper knew, never fewer or other fields.
    normal = run_wrapper(
        tmp_path,
        [
            {"assistant": {"text": "All done.", "stopReason": "stop"}},
            {"agent_end": {"willRetry": False}},
            {"agent_settled": {}},
        ],
    ).result
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    killed = wrapper_killed_result(
        run_id=normal["runId"],
        wrapper_pid=os.getpid(),
        run_dir=tmp_path / "run",
        status=status,
        config=None,
        signals_sent=[],
        survivors=[],
        ended_at=time.time(),
        result_path=tmp_path / "run" / "result.json",
        present=frozenset(RUN_FILES),
        cwd=str(tmp_path),
    )
    validate("result", killed)
    assert list(killed) == list(normal)
    assert list(killed["attempts"][0]) == list(normal["attempts"][0])
    assert list(killed["artifacts"]) == list(normal["artifacts"])
