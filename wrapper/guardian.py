"""The guardian: ends the run and writes its result when the wrapper itself dies hard.

A SIGKILLed (or OOM-killed) wrapper runs no cleanup, and a parent-death
signal would reach only its direct children. So each run starts this small
process, before the agent, in a session of its own (a kill of the wrapper's
process group does not take it along), holding the read end of a pipe from
the wrapper. When the pipe reaches end of file without the wrapper having
said ``done``, the wrapper is gone, and the guardian:

1. ends every process of the run. It needs no word from the wrapper to find
   them, so that a wrapper killed in its first instant leaves nothing
   either: every process the run starts carries ``AGENT_WRAPPER_RUN_ID`` in
   its environment, the agent leads a session and a process group of its
   own, and the guardian keeps a list of the processes below the wrapper
   (for those that cleared their environment and left the agent's session).
   Those, their descendants and everything in their sessions and groups get
   SIGTERM, then SIGKILL, sweep after sweep until nothing is found;
2. writes result.json (``outcome: aborted``, ``error.kind: wrapper_killed``)
   where the run's configuration says it goes, unless the run's result is
   already there, and marks status.json finished.

Run as ``python wrapper/guardian.py WRAPPER_PID RUN_ID RUN_DIR RESULT_PATH
SPARED_ID...`` (the SPARED_IDs being the wrapper's own session and process
group, which hold the wrapper's parent and siblings, never the agent). While
it waits it has imported only psutil.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from pathlib import Path

import psutil

# typing costs the waiting guardian memory; the annotations need it only when checked.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: How often the tree below the wrapper is listed again.
POLL_SECONDS = 0.2
#: SIGTERM to SIGKILL once the wrapper is gone: time for the agent to save
#: its state, short enough that the run ends soon after its wrapper.
TERM_SECONDS = 1.0
#: After a SIGKILL, how long the processes get to leave the process table.
KILL_WAIT_SECONDS = 0.2
#: Pause between two sweeps that found nothing.
SWEEP_PAUSE_SECONDS = 0.1
#: The sweeps end once they have found nothing for this long: a process the
#: wrapper forked just before it died may still be on its way to exec the
#: agent (and to carry the run id); on a loaded machine that takes a moment.
QUIET_SECONDS = 0.5
#: At most this many sweeps send signals: the bound on the cleanup when
#: processes keep appearing (a fork bomb) or cannot die (state D).
MAX_SIGNAL_SWEEPS = 10
#: The wrapper's exit status as the result reports it: 128 + SIGKILL, the way
#: a wrapper dies without a word (the guardian is not its parent and cannot
#: learn the real one).
WRAPPER_KILLED_EXIT = 128 + signal.SIGKILL
#: The environment variable that marks every process of a run.
RUN_ID_VARIABLE = "AGENT_WRAPPER_RUN_ID"

_Known = dict[int, float]


class Watch:
    """What the guardian is told at its start: whose death to watch, which run is
    then its to end, and the sessions and groups never to touch."""

    # A plain class: dataclasses would cost the waiting guardian a megabyte.
    __slots__ = ("result_path", "run_dir", "run_id", "spared", "wrapper_pid")

    def __init__(
        self,
        *,
        wrapper_pid: int,
        run_id: str,
        run_dir: Path,
        result_path: Path,
        spared: frozenset[int] = frozenset(),
    ) -> None:
        self.wrapper_pid = wrapper_pid
        self.run_id = run_id
        self.run_dir = run_dir
        self.result_path = result_path
        self.spared = spared

    @classmethod
    def from_argv(cls, argv: list[str]) -> Watch:
        """Raises ``ValueError`` for a malformed command line."""
        if len(argv) < 5 or not argv[2]:
            raise ValueError(
                "usage: guardian.py WRAPPER_PID RUN_ID RUN_DIR RESULT_PATH [SPARED...]"
            )
        return cls(
            wrapper_pid=int(argv[1]),
            run_id=argv[2],
            run_dir=Path(argv[3]),
            result_path=Path(argv[4]),
            spared=frozenset(int(arg) for arg in argv[5:]),
        )


class Cleanup:
    """What the guardian did to the run's processes, for result.json."""

    __slots__ = ("signals_sent", "survivors")

    def __init__(self) -> None:
        self.signals_sent: list[dict[str, Any]] = []
        #: Processes still alive when the sweeps gave up (``name (pid N)``).
        self.survivors: list[str] = []


def main(argv: list[str]) -> int:
    try:
        watch = Watch.from_argv(argv)
    except ValueError:
        return 2
    # Waiting is its whole job: it must not slow the run it guards.
    os.nice(10)
    own = {os.getpid(), watch.wrapper_pid}
    known: _Known = {}
    try:
        wrapper: psutil.Process | None = psutil.Process(watch.wrapper_pid)
    except psutil.Error:
        wrapper = None  # already gone: the pipe is at its end too
    while True:
        readable, _, _ = select.select([0], [], [], POLL_SECONDS)
        if readable:
            data = os.read(0, 4096)
            if b"done" in data:
                return 0
            if not data:
                break
        if wrapper is not None:
            _remember(wrapper, known, own)
    cleanup = end_run(watch, known, own)
    finish_run(watch, cleanup)
    return 0


def _remember(wrapper: psutil.Process, known: _Known, own: set[int]) -> None:
    try:
        below = wrapper.children(recursive=True)
    except psutil.Error:
        return
    seen = set()
    for proc in below:
        seen.add(proc.pid)
        if proc.pid not in own and proc.pid not in known:
            with contextlib.suppress(psutil.Error):
                known[proc.pid] = proc.create_time()
    # Forget the dead; keep the living that left the tree (no subreaper).
    for pid in [pid for pid in known if pid not in seen and not psutil.pid_exists(pid)]:
        del known[pid]


# -- ending the run's processes ---------------------------------------------------------


def end_run(watch: Watch, known: _Known, own: set[int]) -> Cleanup:
    """SIGTERM, then SIGKILL, to every process of the run, sweep after sweep,
    until the sweeps find nothing for ``QUIET_SECONDS`` (bounded)."""
    cleanup = Cleanup()
    spared = set(watch.spared) | {os.getsid(0), os.getpgid(0)}
    sweeps = 0
    quiet_since: float | None = None
    while True:
        targets, groups = find_run(watch.run_id, known, own, spared)
        if not targets:
            now = time.monotonic()
            quiet_since = now if quiet_since is None else quiet_since
            if now - quiet_since >= QUIET_SECONDS:
                return cleanup
            time.sleep(SWEEP_PAUSE_SECONDS)
            continue
        quiet_since = None
        if sweeps == MAX_SIGNAL_SWEEPS:
            cleanup.survivors = [_describe(proc) for proc in targets]
            return cleanup
        sig = signal.SIGTERM if sweeps == 0 else signal.SIGKILL
        sweeps += 1
        for group in groups:
            with contextlib.suppress(OSError):
                os.killpg(group, sig)
        for proc in targets:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
        cleanup.signals_sent.append(
            {"signal": sig.name, "at": _iso(time.time()), "reason": "the wrapper died"}
        )
        wait = TERM_SECONDS if sig is signal.SIGTERM else KILL_WAIT_SECONDS
        psutil.wait_procs(targets, timeout=wait)


def find_run(
    run_id: str, known: _Known, own: set[int], spared: set[int]
) -> tuple[list[psutil.Process], set[int]]:
    """The live processes of the run, and the process groups to signal whole.

    A process is the run's when its environment carries the run id, when the
    guardian saw it below the wrapper, when it descends from one of those,
    or when it shares a session or a process group with one of those (the
    agent's session holds what cleared its environment). ``spared``
    sessions and groups are never taken for the run's.
    """
    table: dict[int, tuple[psutil.Process, int, int, int]] = {}
    marked: set[int] = set()
    for proc in psutil.process_iter():
        pid = proc.pid
        if pid in own:
            continue
        try:
            with proc.oneshot():
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                ppid = proc.ppid()
            sid, pgid = os.getsid(pid), os.getpgid(pid)
        except (psutil.Error, OSError):
            continue
        table[pid] = (proc, ppid, sid, pgid)
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(RUN_ID_VARIABLE) == run_id:
                marked.add(pid)
    for pid, created in known.items():
        entry = table.get(pid)
        with contextlib.suppress(psutil.Error):
            if entry is not None and entry[0].create_time() == created:
                marked.add(pid)
    # Never init's session or group (in a container, that can be everything).
    spared = spared | {0, 1}
    sessions = {table[pid][2] for pid in marked} - spared
    groups = {table[pid][3] for pid in marked} - spared
    found = marked | {
        pid for pid, (_, _, sid, pgid) in table.items() if sid in sessions or pgid in groups
    }
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    pending = list(found)
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in found:
                found.add(child)
                pending.append(child)
    return [table[pid][0] for pid in sorted(found)], groups


def _describe(proc: psutil.Process) -> str:
    try:
        return f"{proc.name()} (pid {proc.pid})"
    except psutil.Error:
        return f"pid {proc.pid}"


# -- the run's result ------------------------------------------------------------------------


def finish_run(watch: Watch, cleanup: Cleanup) -> None:
    """Write the result of a run whose wrapper died, and mark its status finished.

    Only a run that had begun in its directory (status.json names it) is
    touched; a result.json of this run that the wrapper managed to write
    stays as it is.
    """
    # Only a run whose wrapper died needs the writer: the waiting guardian stays small.
    from wrapper.artifacts import atomic_write, dump_json  # noqa: PLC0415

    status = _read_json(watch.run_dir / "status.json")
    if status is None or status.get("runId") != watch.run_id:
        return
    config = _read_json(watch.run_dir / "config.json")
    if config is not None and config.get("runId") != watch.run_id:
        config = None
    candidates = list(dict.fromkeys([watch.result_path, watch.run_dir / "result.json"]))
    existing = next(
        (
            found
            for path in candidates
            if (found := _read_json(path)) is not None and found.get("runId") == watch.run_id
        ),
        None,
    )
    if existing is not None:
        outcome = existing.get("outcome")
    else:
        outcome = "aborted"
        for path in candidates:
            result = wrapper_killed_result(
                watch=watch,
                status=status,
                config=config,
                cleanup=cleanup,
                ended_at=time.time(),
                result_path=path,
            )
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, dump_json(result))
            except OSError:
                continue
            break
    if status.get("state") != "finished":
        status.update(
            state="finished",
            outcome=outcome,
            updatedAt=_iso(time.time()),
            currentTool=None,
            question=None,
        )
        with contextlib.suppress(OSError):
            atomic_write(watch.run_dir / "status.json", dump_json(status))


def wrapper_killed_result(
    *,
    watch: Watch,
    status: dict[str, Any],
    config: dict[str, Any] | None,
    cleanup: Cleanup,
    ended_at: float,
    result_path: Path,
) -> dict[str, Any]:
    """result.json for a run whose wrapper died: what status.json and
    config.json knew, ``null`` for what only the wrapper knew."""
    conf = config or {}
    started = _epoch(status.get("startedAt")) or ended_at
    known_attempt, known_pid = status.get("attempt"), status.get("pid")
    attempt = known_attempt if isinstance(known_attempt, int) else 1
    pid = known_pid if isinstance(known_pid, int) else None
    forced = bool(cleanup.signals_sent)
    message = (
        f"the wrapper (pid {watch.wrapper_pid}) was killed before it finished the run "
        f"({status.get('state')}, attempt {attempt}); its guardian ended the run's processes "
        "and wrote this result"
    )
    warnings = [{"code": "wrapper_killed", "message": message}]
    if cleanup.survivors:
        warnings.append(
            {
                "code": "leftover_processes",
                "message": "still running after the guardian's last SIGKILL: "
                + ", ".join(cleanup.survivors),
            }
        )
    run_dir = watch.run_dir

    def artifact(name: str) -> str | None:
        path = run_dir / name
        return str(path) if path.exists() else None

    dialect = conf.get("dialect")
    attempts = []
    if attempt == 1:  # a later attempt's start is known only to the wrapper
        attempts.append(
            {
                "attempt": 1,
                "pid": pid,
                "startedAt": _iso(started),
                "endedAt": None if cleanup.survivors else _iso(ended_at),
                "exitCode": None,
                "exitSignal": None,
                "signalsSent": cleanup.signals_sent,
                "forcedCleanup": forced,
                "stopReason": None,
                "rawStopReason": None,
            }
        )
    return {
        "schemaVersion": 1,
        "runId": watch.run_id,
        "label": conf.get("label", status.get("label")),
        "success": False,
        "outcome": "aborted",
        "exitStatus": WRAPPER_KILLED_EXIT,
        "stopReason": None,
        "rawStopReason": None,
        "finalText": None,
        # apiStatus: no failed API call of the agent's is known here.
        "error": {"kind": "wrapper_killed", "message": message, "apiStatus": None},
        "exitCode": None,
        "exitSignal": None,
        "forcedCleanup": forced,
        "signalsSent": cleanup.signals_sent,
        "pid": pid,
        "startedAt": _iso(started),
        "endedAt": _iso(ended_at),
        "durationMs": max(round((ended_at - started) * 1000), 0),
        "usage": None,
        "model": None,
        "sessionId": None,
        "toolsUsed": [],
        "task": conf.get("task"),
        "command": conf.get("command") or [],
        "cwd": conf.get("cwd") or os.getcwd(),
        "dialect": dialect if isinstance(dialect, str) and dialect != "auto" else None,
        "attempts": attempts,
        "stopAllowedBy": None,
        "hookStopMessage": None,
        "steerCount": max(attempt - 1, 0),
        "maxSteers": conf.get("maxSteers", 0),
        "steers": [],
        "onStop": conf.get("onStop", "allow"),
        "completionSignal": None,
        "escalations": [],
        "warnings": warnings,
        "artifacts": {
            "runDir": str(run_dir),
            "result": str(result_path),
            "status": str(run_dir / "status.json"),
            "events": artifact("events.jsonl"),
            "stdout": artifact("stdout.log"),
            "stderr": artifact("stderr.log"),
            "config": artifact("config.json"),
        },
        "artifactErrors": [],
    }


def _read_json(path: Path) -> dict[str, Any] | None:
    import json  # noqa: PLC0415 - see finish_run

    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _iso(epoch: float) -> str:
    from wrapper.timefmt import iso  # noqa: PLC0415 - see finish_run

    return iso(epoch)


def _epoch(stamp: object) -> float | None:
    from datetime import datetime  # noqa: PLC0415 - see finish_run

    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


if __name__ == "__main__":
    # Run as a script, the guardian's own folder comes first on the path;
    # the package's parent must instead, for the lazy imports of the writer.
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    sys.exit(main(sys.argv))
