"""Ending a run whose wrapper died: the sweeps that end its processes,
and the result.json and status.json its wrapper could not write.

The guardian, or a worker whose guardian died, calls these once; until
then nothing here runs, and psutil and the result's writer stay unloaded
(the waiting guardian stays small).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from wrapper.core import environment
from wrapper.core.limits import (
    KILL_WAIT_SECONDS,
    MAX_SIGNAL_SWEEPS,
    QUIET_SECONDS,
    SWEEP_PAUSE_SECONDS,
    TERM_SECONDS,
)
from wrapper.core.signals import WRAPPER_KILLED_EXIT

# typing costs the waiting guardian memory; the annotations need it only when checked.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    import psutil


_Known = dict[int, float]


class Watch:
    """What the guardian and the worker know of the run from the start: which
    run is theirs to end, and the sessions and groups never to touch."""

    # A plain class: dataclasses would cost the waiting guardian memory.
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
        #: The pid the runner holds: the guardian's.
        self.wrapper_pid = wrapper_pid
        self.run_id = run_id
        self.run_dir = run_dir
        self.result_path = result_path
        self.spared = spared


class Cleanup:
    """What the guardian did to the run's processes, for result.json."""

    __slots__ = ("signals_sent", "survivors")

    def __init__(self) -> None:
        self.signals_sent: list[dict[str, Any]] = []
        #: Processes still alive when the sweeps gave up (``name (pid N)``).
        self.survivors: list[str] = []


def known_below(pid: int) -> _Known:
    """The live descendants of ``pid``, with their start times (so that a pid
    reused later is not taken for one of them)."""
    import psutil  # noqa: PLC0415 - needed only once the run has to be ended

    known: _Known = {}
    try:
        below = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return known
    for proc in below:
        with contextlib.suppress(psutil.Error):
            known[proc.pid] = proc.create_time()
    return known


# -- ending the run's processes ---------------------------------------------------------


def end_run(watches: list[Watch], known: _Known, own: set[int]) -> Cleanup:
    """SIGTERM, then SIGKILL, to every process of the runs, sweep after sweep,
    until the sweeps find nothing for ``QUIET_SECONDS`` (bounded)."""
    import psutil  # noqa: PLC0415 - see known_below

    cleanup = Cleanup()
    run_ids = {watch.run_id for watch in watches}
    spared = {os.getsid(0), os.getpgid(0)}
    for watch in watches:
        spared |= watch.spared
    sweeps = 0
    quiet_since: float | None = None
    while True:
        targets, groups = find_run(run_ids, known, own, spared)
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
    run_ids: set[str], known: _Known, own: set[int], spared: set[int]
) -> tuple[list[psutil.Process], set[int]]:
    """The live processes of the runs, and the process groups to signal whole.

    A process is a run's when its environment carries the run's id, when the
    guardian saw it below the wrapper, when it descends from one of those,
    or when it shares a session or a process group with one of those (the
    agent's session holds what cleared its environment). ``spared``
    sessions and groups are never taken for the run's.
    """
    import psutil  # noqa: PLC0415 - see known_below

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
            if proc.environ().get(environment.RUN_ID) in run_ids:
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
    import psutil  # noqa: PLC0415 - see known_below

    try:
        return f"{proc.name()} (pid {proc.pid})"
    except psutil.Error:
        return f"pid {proc.pid}"


# -- the run's result ------------------------------------------------------------------------


def finish_run(
    watch: Watch,
    cleanup: Cleanup,
    *,
    exit_status: int = WRAPPER_KILLED_EXIT,
    who: str | None = None,
) -> None:
    """Write the result of a run whose wrapper died, and mark its status finished.

    ``who`` says what died (default: the wrapper, killed), ``exit_status``
    is the run's exit status the result reports.

    Only a run that had begun in its directory (status.json names it) is
    touched; a result.json of this run that the wrapper managed to write
    stays as it is.
    """
    # Only a run whose wrapper died needs the writer: the waiting guardian stays small.
    from wrapper.core.result import RUN_FILES, wrapper_killed_result  # noqa: PLC0415
    from wrapper.files.artifacts import atomic_write, dump_json  # noqa: PLC0415

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
        present = frozenset(name for name in RUN_FILES if (watch.run_dir / name).exists())
        for path in candidates:
            result = wrapper_killed_result(
                run_id=watch.run_id,
                wrapper_pid=watch.wrapper_pid,
                run_dir=watch.run_dir,
                status=status,
                config=config,
                signals_sent=cleanup.signals_sent,
                survivors=cleanup.survivors,
                ended_at=time.time(),
                result_path=path,
                present=present,
                cwd=os.getcwd(),
                exit_status=exit_status,
                who=who,
            )
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, dump_json(result))
            except OSError:
                continue
            break
    if status.get("state") != "finished":
        from wrapper.files.control_socket import remove_left  # noqa: PLC0415 - see above

        remove_left(status.get("control"))
        status.update(
            state="finished",
            outcome=outcome,
            updatedAt=_iso(time.time()),
            currentTool=None,
            question=None,
            control=None,
            controlUnavailable=status.get("controlUnavailable"),
            pendingSteers=[],
        )
        with contextlib.suppress(OSError):
            atomic_write(watch.run_dir / "status.json", dump_json(status))


def _read_json(path: Path) -> dict[str, Any] | None:
    import json  # noqa: PLC0415 - see finish_run

    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _iso(epoch: float) -> str:
    from wrapper.core.timefmt import iso  # noqa: PLC0415 - see finish_run

    return iso(epoch)
