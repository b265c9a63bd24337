"""Finding and following runs from outside: ``ps``, ``--latest`` and labels,
``watch`` of one run and of many, and the reader of run directories under
them (an events.jsonl line read back into its event)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import (
    FAKE_PI,
    HANG_LIMIT,
    agent_env,
    wait_until,
    write_scenario,
)
from wrapper.commands.watch import WatchOptions, watch_run, watch_table
from wrapper.core import events as ev
from wrapper.core.event_log import decode_event
from wrapper.core.events import envelope, event_types
from wrapper.files.rundir import EventTail

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]

# --- an events.jsonl line read back -------------------------------------------------

SAMPLES: list[ev.Event] = [
    ev.RunStarted(run_dir="/r"),
    ev.SessionStarted(session_id="s-1", cwd="/w", path="/w/s.jsonl"),
    ev.TurnStarted(),
    ev.AssistantMessage(
        stop_reason="stop",
        raw_stop_reason="end_turn",
        text="Done.",
        usage=ev.Usage(input=10, output=5, cache_read=1, total_tokens=16, cost_usd=0.25),
        model="m",
        tool_calls=(ev.ToolCall(name="bash", id="t1", summary="ls"),),
        error_message=None,
    ),
    ev.TextDelta(text="hel"),
    ev.ToolStarted(tool="bash", tool_call_id="t1", summary="ls -l"),
    ev.ToolEnded(tool="bash", tool_call_id="t1", summary="ls -l", is_error=True),
    ev.Retry(phase="start", retry_attempt=1, max_attempts=3, delay_ms=100, message="429"),
    ev.Compaction(phase="end", reason="overflow"),
    ev.AgentEnded(will_retry=False, settled=True),
    ev.UnparsedLine(text="garbage", reason="not JSON"),
    ev.OversizedLine(size=10, event_type="message"),
    ev.StderrLine(text="note"),
    ev.AgentWarning(code="reconnect", message="reconnecting"),
    ev.Spawned(pid=12, argv=("pi", "-p"), dialect="pi"),
    ev.GraceStarted(seconds=2.0, stop_reason="stop", settled=True),
    ev.GraceCancelled(reason="a new turn"),
    ev.SignalSent(signal="SIGTERM", reason="lingering", pids=(12, 13)),
    ev.Exited(exit_code=0, exit_signal=None),
    ev.HookStarted(event="Stop", handler="check.sh"),
    ev.HookDecision(event="Stop", handler="check.sh", decision="block", reason="tests fail"),
    ev.Steer(next_attempt=2, handler="check.sh", reason="tests fail"),
    ev.SteerRequested(id="s1", when="now", text_length=4),
    ev.SteerDelivered(id="s1", how="live", next_attempt=1),
    ev.SteerSent(id="s1", next_attempt=1),
    ev.SteerRefused(id="s2", why="over"),
    ev.Escalated(id="e1", question="which?", notified=("desktop",)),
    ev.EscalationAnswered(id="e1", answer="text", text="this one"),
    ev.WarningEvent(code="hook_failed", message="it failed"),
    ev.ResultWritten(
        path="/r/result.json",
        outcome="error",
        exit_status=1,
        error={"kind": "agent_error", "message": "boom"},
        cost_usd=0.004,
        cost_source="computed",
    ),
]


def test_every_event_type_has_a_sample() -> None:
    assert {(type(e).TYPE, type(e).SOURCE) for e in SAMPLES} == {
        (cls.TYPE, cls.SOURCE) for cls in event_types()
    }


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: f"{e.SOURCE}-{e.TYPE}")
def test_a_logged_event_reads_back_as_the_event_written(event: ev.Event) -> None:
    line = orjson.loads(orjson.dumps(envelope(event, 7, ts="2026-01-01T00:00:00.000Z", attempt=2)))
    stamped = decode_event(line)
    assert stamped is not None
    assert stamped.event == event
    assert type(stamped.event) is type(event)
    assert (stamped.seq, stamped.ts, stamped.attempt) == (7, "2026-01-01T00:00:00.000Z", 2)


def test_a_field_of_the_wrong_type_is_taken_as_absent_and_a_missing_one_refuses() -> None:
    read = decode_event({"type": "tool_start", "tool": "bash", "summary": 3, "seq": "x"})
    assert read is not None
    assert read.event == ev.ToolStarted(tool="bash")
    assert read.seq is None
    assert decode_event({"type": "tool_start", "tool": 5}) is None
    assert decode_event({"type": "no_such_event"}) is None


@given(
    st.dictionaries(
        st.sampled_from(["type", "source", "tool", "text", "usage", "argv", "pids", "seq", "x"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
            max_leaves=5,
        )
        | st.sampled_from([t.TYPE for t in event_types()]),
    )
)
def test_no_json_object_makes_the_reader_raise(line: dict[str, Any]) -> None:
    decode_event(line)


def test_the_event_tail_reads_only_complete_lines_and_skips_garbage(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    tool = orjson.dumps(envelope(ev.ToolStarted(tool="bash"), 1))
    log.write_bytes(b"not json\n[1]\n" + tool[:10])
    tail = EventTail(log)
    assert tail.read() == []
    with log.open("ab") as file:
        file.write(tool[10:] + b"\n")
    assert [s.event for s in tail.read()] == [ev.ToolStarted(tool="bash")]
    assert tail.read() == []
    # A reused run directory starts its log again: read from its start.
    log.write_bytes(orjson.dumps(envelope(ev.TurnStarted(), 1)) + b"\n")
    assert [s.event for s in tail.read()] == [ev.TurnStarted()]
    later = EventTail(log, from_end=True)
    with log.open("ab") as file:
        file.write(tool + b"\n")
    assert [s.event for s in later.read()] == [ev.ToolStarted(tool="bash")]


# --- run directories made by hand ------------------------------------------------


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def make_run(
    folder: Path,
    *,
    label: str | None,
    started: str,
    state: str = "running",
    tool: str | None = None,
    wrapper_pid: int | None = None,
    result: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    folder.mkdir(parents=True)
    run_id = f"run-{folder.name}"
    status = {
        "schemaVersion": 1,
        "runId": run_id,
        "state": "finished" if result is not None else state,
        "attempt": 1,
        "pid": None,
        "wrapperPid": wrapper_pid if wrapper_pid is not None else os.getpid(),
        "startedAt": started,
        "updatedAt": started,
        "lastEventAt": None,
        "currentTool": tool,
        "label": label,
        "outcome": result.get("outcome") if result else None,
        **(extra or {}),
    }
    (folder / "status.json").write_text(json.dumps(status))
    if result is not None:
        (folder / "result.json").write_text(
            json.dumps({"runId": run_id, "label": label, "startedAt": started, **result})
        )
    return folder


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_WRAPPER_")}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "wrapper", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=HANG_LIMIT,
        stdin=subprocess.DEVNULL,
        check=False,
    )


OK = {
    "outcome": "ok",
    "success": True,
    "exitStatus": 0,
    "endedAt": "2026-01-01T10:00:30.000Z",
    "usage": {"input": 100, "output": 20, "totalTokens": 120, "costUsd": 0.5},
    "steerCount": 1,
    "externalSteerCount": 2,
}


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A folder with a run of ``run``, a batch of two, and a run whose
    wrapper died: as ``ps`` finds them by default."""
    root = tmp_path / ".agent-wrapper"
    make_run(root / "runs" / "a", label="fix-1", started="2026-01-01T10:00:00.000Z", result=OK)
    make_run(
        root / "runs" / "b",
        label="fix-2",
        started="2026-01-01T11:00:00.000Z",
        tool="bash",
        extra={
            "usage": {"input": 7, "output": 3, "totalTokens": 10},
            "steers": {"hook": 0, "outside": 1},
        },
    )
    make_run(root / "batches" / "b1" / "x", label="dup", started="2026-01-01T09:00:00.000Z")
    make_run(
        root / "batches" / "b1" / "y",
        label="dup",
        started="2026-01-01T12:00:00.000Z",
        wrapper_pid=_dead_pid(),
    )
    return tmp_path


def test_ps_lists_every_run_running_first_with_unknown_figures_as_unknown(runs: Path) -> None:
    done = cli("ps", "--json", cwd=runs)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [run["label"] for run in listed] == ["fix-2", "dup", "dup", "fix-1"]
    by_dir = {Path(run["runDir"]).name: run for run in listed}
    assert by_dir["b"]["state"] == "running"
    assert by_dir["b"]["currentTool"] == "bash"
    assert by_dir["b"]["tokens"] == 10
    assert by_dir["b"]["costUsd"] is None
    assert by_dir["b"]["steers"] == {"hook": 0, "outside": 1}
    # A run whose status.json says nothing of tokens: unknown, never 0.
    assert by_dir["x"]["tokens"] is None
    assert by_dir["x"]["steers"] is None
    assert by_dir["y"]["state"] == "gone"
    assert by_dir["y"]["outcome"] == "wrapper_killed"
    assert by_dir["a"] | {"elapsedSeconds": None} == by_dir["a"] | {
        "state": "finished",
        "outcome": "ok",
        "tokens": 120,
        "costUsd": 0.5,
        "steers": {"hook": 1, "outside": 2},
        "exitStatus": 0,
        "elapsedSeconds": None,
    }
    assert by_dir["a"]["elapsedSeconds"] == 30.0
    assert Path(by_dir["a"]["runDir"]).is_absolute()

    table = cli("ps", cwd=runs).stdout.splitlines()
    assert table[0].split()[:3] == ["LABEL", "STATE", "TOOL"]
    assert table[1].split()[:3] == ["fix-2", "running", "bash"]
    row = table[-1].split()
    assert row[:2] == ["fix-1", "finished"]
    assert "$0.50" in row
    assert "1+2" in row
    assert "ok" in row
    assert table[-1].endswith(str(Path(".agent-wrapper/runs/a")))
    assert cli("ps", "nowhere", cwd=runs).returncode == 2


def test_a_run_still_starting_is_listed_and_watched_as_one_run(tmp_path: Path) -> None:
    run_dir = tmp_path / ".agent-wrapper" / "runs" / "new"
    run_dir.mkdir(parents=True)
    (run_dir / ".agent-wrapper-run").write_text(json.dumps({"runId": "run-new"}))
    listed = json.loads(cli("ps", "--json", cwd=tmp_path).stdout)
    assert [(Path(run["runDir"]).name, run["state"]) for run in listed] == [("new", "starting")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_WRAPPER_")}
    watching = subprocess.Popen(
        [sys.executable, "-m", "wrapper", "watch", str(run_dir)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    (run_dir / "result.json").write_text(json.dumps({"runId": "run-new", **OK}))
    out, _ = watching.communicate(timeout=HANG_LIMIT)
    # One run's view (its result line), not a table of the folder.
    assert out.startswith("■ ok"), out
    assert watching.returncode == 0


def test_ps_of_a_batch_folder_lists_its_runs(runs: Path) -> None:
    listed = json.loads(cli("ps", "--json", ".agent-wrapper/batches/b1", cwd=runs).stdout)
    assert sorted(Path(run["runDir"]).name for run in listed) == ["x", "y"]


def test_latest_and_a_label_name_the_right_run(runs: Path) -> None:
    latest = cli("status", "--latest", "--json", cwd=runs)
    # The newest run is the batch's line whose wrapper died: status says so.
    assert json.loads(latest.stdout)["status"]["runId"] == "run-y", latest.stderr
    assert latest.returncode == 1
    labelled = cli("status", "fix-1", "--json", cwd=runs)
    assert labelled.returncode == 0, labelled.stderr
    assert json.loads(labelled.stdout)["result"]["runId"] == "run-a"
    by_id = cli("status", "run-b", cwd=runs)
    assert by_id.returncode == 0
    assert "running tool bash" in by_id.stdout
    # reply's TEXT after --latest is the answer, not a run.
    replied = cli("reply", "--latest", "yes, go on", cwd=runs)
    assert replied.returncode == 1
    assert f"no question has been asked in {runs / '.agent-wrapper/batches/b1/y'}" in replied.stderr
    replied = cli("reply", "fix-2", "yes", cwd=runs)
    assert f"no question has been asked in {runs / '.agent-wrapper/runs/b'}" in replied.stderr


def test_an_ambiguous_or_unknown_label_is_a_usage_error_saying_what_to_do(runs: Path) -> None:
    for command in ("status", "steer", "abort", "reply", "watch"):
        extra = ["--text", "go"] if command == "steer" else []
        ambiguous = cli(command, "dup", *extra, cwd=runs)
        assert ambiguous.returncode == 2, (command, ambiguous.stderr)
        assert "2 runs are labelled 'dup'" in ambiguous.stderr
        assert str(Path(".agent-wrapper/batches/b1/x")) in ambiguous.stderr
        unknown = cli(command, "nothing-like-it", *extra, cwd=runs)
        assert unknown.returncode == 2
        assert "agent-wrapper ps" in unknown.stderr
    empty = cli("status", "--latest", cwd=runs / ".agent-wrapper")
    assert empty.returncode == 2
    assert "--latest: no run under" in empty.stderr


# --- watch, read back from the files --------------------------------------------


class Pane:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _log(run_dir: Path, *events: ev.Event) -> None:
    stamp = "2026-01-01T10:00:{:02d}.000Z"
    lines = [
        orjson.dumps(envelope(event, n, ts=stamp.format(n), attempt=1))
        for n, event in enumerate(events, 1)
    ]
    (run_dir / "events.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))


def test_watch_of_a_run_that_failed_shows_its_view_and_exits_as_the_run(tmp_path: Path) -> None:
    failed = {**OK, "outcome": "error", "success": False, "exitStatus": 1}
    run_dir = make_run(tmp_path / "r", label="L", started="2026-01-01T10:00:00.000Z", result=failed)
    _log(
        run_dir,
        ev.ToolStarted(tool="bash", summary="make"),
        ev.ResultWritten(
            path=str(run_dir / "result.json"),
            outcome="error",
            exit_status=1,
            error={"kind": "agent_error", "message": "the model failed"},
        ),
    )
    pane = Pane()
    assert watch_run(run_dir, WatchOptions(), out=pane) == 1  # type: ignore[arg-type]
    assert "⚙ bash  make" in pane.text
    assert "■ error in 2.0s" in pane.text
    assert "the model failed" in pane.text


def test_watch_prints_the_result_line_from_result_json_when_the_log_lacks_it(
    tmp_path: Path,
) -> None:
    timed_out = {**OK, "outcome": "timeout", "success": False, "exitStatus": 124}
    run_dir = make_run(
        tmp_path / "r", label=None, started="2026-01-01T10:00:00.000Z", result=timed_out
    )
    _log(run_dir, ev.ToolStarted(tool="bash"))
    pane = Pane()
    assert watch_run(run_dir, WatchOptions(), out=pane, sleep=lambda s: None) == 124  # type: ignore[arg-type]
    assert pane.text.index("⚙ bash") < pane.text.index("■ timeout in 30.0s")


def test_watch_of_a_run_whose_wrapper_died_says_so(tmp_path: Path) -> None:
    run_dir = make_run(
        tmp_path / "r", label=None, started="2026-01-01T10:00:00.000Z", wrapper_pid=_dead_pid()
    )
    pane = Pane()
    assert watch_run(run_dir, WatchOptions(), out=pane, sleep=lambda s: None) == 1  # type: ignore[arg-type]
    assert "is gone; no result" in pane.text


def test_watch_table_once_and_filtered(runs: Path) -> None:
    pane = Pane()
    folders = [runs / ".agent-wrapper" / "runs"]
    assert watch_table(folders, WatchOptions(once=True, only=("finished",)), out=pane) == 0  # type: ignore[arg-type]
    lines = pane.text.splitlines()
    assert [line.split()[0] for line in lines[1:-1]] == ["fix-1"]
    assert lines[-1] == "1 running · 1 ok · 0 not ok · cost so far $0.50 + 1 unknown"


# --- watch of real runs -------------------------------------------------------------


def _spec(tmp_path: Path, count: int, seconds: float) -> Path:
    scenario = write_scenario(
        tmp_path,
        [
            {"tool": {"name": "bash", "duration": seconds, "result": "built"}},
            {"assistant": {"text": "Done.", "stopReason": "stop"}},
            *END,
        ],
    )
    spec = tmp_path / "spec.jsonl"
    command = [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)]
    spec.write_text(
        "".join(
            json.dumps({"command": command, "task": "Build", "label": f"run-{n:02d}"}) + "\n"
            for n in range(count)
        )
    )
    return spec


def test_watch_of_a_batch_without_a_terminal_prints_a_line_per_change_and_ends(
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, 20, 1.0)
    env = agent_env(tmp_path)
    wrapper = [sys.executable, "-m", "wrapper"]
    batch = subprocess.Popen(
        [*wrapper, "batch", str(spec), "--jobs", "10", "--runs-dir", "b", "--output", "quiet"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        assert wait_until((tmp_path / "b").is_dir)
        watched = subprocess.run(
            [*wrapper, "watch", "b"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_LIMIT * 2,
            check=False,
        )
        assert batch.wait(timeout=HANG_LIMIT) == 0
    finally:
        batch.kill()
    assert watched.returncode == 0, watched.stderr
    lines = watched.stdout.splitlines()
    assert lines[-1].startswith("0 running · 20 ok · 0 not ok")
    for n in range(20):
        mine = [line for line in lines if f" run-{n:02d}: " in line]
        assert mine[-1].split(": ", 1)[1].startswith("finished ok in"), mine
    assert not any("\x1b[" in line for line in lines)


def _tmux(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["tmux", "-L", socket, *args], capture_output=True, text=True, timeout=30, check=False
    )


def _pane_shows(socket: str, needle: str, timeout: float) -> str:
    seen = ""

    def shows() -> bool:
        nonlocal seen
        seen = _tmux(socket, "capture-pane", "-p", "-t", socket).stdout
        return needle in seen

    assert wait_until(shows, timeout=timeout), seen
    return seen


tmux_needed = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)"
)


def _in_pane(tmp_path: Path, socket: str, command: list[str]) -> None:
    words = " ".join(f"'{arg}'" for arg in command)
    line = f"cd '{tmp_path}' && {words}; echo WATCH-EXIT=$?; sleep 60"
    assert (
        _tmux(socket, "new-session", "-d", "-s", socket, "-x", "160", "-y", "50", line).returncode
        == 0
    )


@tmux_needed
def test_watch_of_one_run_in_a_tmux_pane_shows_the_tool_then_the_result(tmp_path: Path) -> None:
    scenario = write_scenario(
        tmp_path,
        [
            {"tool": {"name": "bash", "duration": 3, "result": "built"}},
            {"assistant": {"text": "Built it.", "stopReason": "stop"}},
            *END,
        ],
    )
    env = agent_env(tmp_path)
    run = subprocess.Popen(
        [sys.executable, "-m", "wrapper", "run", "--label", "pane", "--output", "quiet",
         "--task", "Build", "--", str(FAKE_PI), "--mode", "json", "-p",
         "--scenario", str(scenario)],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    socket = f"aw-watch-{os.getpid()}"
    try:
        assert wait_until(lambda: any(tmp_path.glob(".agent-wrapper/runs/*/status.json")))
        _in_pane(tmp_path, socket, [sys.executable, "-m", "wrapper", "watch", "--latest"])
        seen = _pane_shows(socket, "WATCH-EXIT=", HANG_LIMIT)
        assert run.wait(timeout=HANG_LIMIT) == 0
    finally:
        run.kill()
        _tmux(socket, "kill-server")
    assert "▶ pane:" in seen
    assert seen.index("⚙ bash") < seen.index("Built it.") < seen.index("■ ok (stop)")
    assert "WATCH-EXIT=0" in seen


@tmux_needed
def test_watch_of_a_batch_in_a_tmux_pane_shows_the_table_and_ends(tmp_path: Path) -> None:
    spec = _spec(tmp_path, 20, 2.0)
    env = agent_env(tmp_path)
    batch = subprocess.Popen(
        [sys.executable, "-m", "wrapper", "batch", str(spec), "--jobs", "10", "--runs-dir", "b",
         "--output", "quiet"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    socket = f"aw-table-{os.getpid()}"
    try:
        assert wait_until((tmp_path / "b").is_dir)
        _in_pane(tmp_path, socket, [sys.executable, "-m", "wrapper", "watch", "b"])
        running = _pane_shows(socket, " running ", HANG_LIMIT)
        assert "LABEL" in running
        assert "STATE" in running
        assert "RUN DIR" in running
        seen = _pane_shows(socket, "WATCH-EXIT=", HANG_LIMIT * 2)
        assert batch.wait(timeout=HANG_LIMIT) == 0
    finally:
        batch.kill()
        _tmux(socket, "kill-server")
    assert "0 running · 20 ok · 0 not ok" in seen
    assert seen.count(" finished ") == 20
    assert "WATCH-EXIT=0" in seen


def test_the_table_ends_when_the_last_run_ends(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "r", label="L", started="2026-01-01T10:00:00.000Z")
    pane = Pane()
    looks = 0

    def sleep(seconds: float) -> None:
        nonlocal looks
        looks += 1
        if looks == 3:
            (run_dir / "result.json").write_text(json.dumps({"runId": "run-r", **OK}))

    started = time.monotonic()
    assert watch_table([tmp_path], WatchOptions(), out=pane, sleep=sleep) == 0  # type: ignore[arg-type]
    assert time.monotonic() - started < HANG_LIMIT
    assert pane.text.splitlines()[-1].startswith("0 running · 1 ok")


def test_the_table_fits_a_narrow_terminal_and_json_cuts_nothing(tmp_path: Path) -> None:
    from wrapper.commands import ps
    from wrapper.files.rundir import snapshot

    deep = tmp_path / ("a-very-long-folder-name-" * 4) / "runs" / "r1"
    make_run(
        deep,
        label="a-label-much-longer-than-any-column-should-show",
        started="2026-01-01T10:00:00.000Z",
        tool="a-tool-with-a-very-long-name",
    )
    snap = snapshot(deep)
    for width in (80, 100):
        lines = ps.table([snap], time.time(), width=width, color=False, cwd=Path("/"))
        assert all(len(line) <= width for line in lines), lines
        assert "…" in lines[1]
        assert lines[1].endswith("runs/r1")
    assert snap.to_json(time.time())["runDir"] == str(deep)
    assert snap.to_json(time.time())["label"] == "a-label-much-longer-than-any-column-should-show"


def test_the_table_of_runs_that_ended_exits_1_when_one_did_not_end_ok(tmp_path: Path) -> None:
    failed = {**OK, "outcome": "timeout", "success": False, "exitStatus": 124}
    make_run(tmp_path / "b" / "one", label="one", started="2026-01-01T10:00:00.000Z", result=OK)
    make_run(tmp_path / "b" / "two", label="two", started="2026-01-01T10:00:00.000Z", result=failed)
    done = cli("watch", "b", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == "0 running · 1 ok · 1 not ok · cost so far $1.00"
    assert "two: finished timeout in 30s" in done.stdout


def test_colours_follow_the_flag_and_no_color(runs: Path) -> None:
    folder = ".agent-wrapper/runs"
    assert "\x1b[" in cli("watch", folder, "--once", "--color", "always", cwd=runs).stdout
    assert "\x1b[" not in cli("watch", folder, "--once", cwd=runs).stdout
    assert "\x1b[" in cli("ps", "--color", "always", cwd=runs).stdout


def test_a_table_of_an_empty_folder_says_it_waits(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    pane = Pane()
    looks = 0

    def sleep(seconds: float) -> None:
        nonlocal looks
        looks += 1
        if looks == 2:
            started = "2026-01-01T10:00:00.000Z"
            make_run(tmp_path / "empty" / "r", label="r", started=started, result=OK)

    assert watch_table([tmp_path / "empty"], WatchOptions(), out=pane, sleep=sleep) == 0  # type: ignore[arg-type]
    lines = pane.text.splitlines()
    assert lines[0] == f"no runs under {tmp_path / 'empty'} yet; waiting for them (Ctrl-C to stop)"
    assert lines[-1].startswith("0 running · 1 ok")
