"""The guardian: the process the runner started, standing guard over the run.

For a run, the command forks first thing, before it parses its arguments
or imports anything heavy (``fork_for_run``). The parent, the process the
runner started and holds the pid of, becomes the guardian; the child, the
worker, parses the command line, does the run and starts the agent below
itself. Before it creates anything of the run it announces the run (id,
directory, result path) to the guardian on a pipe and leaves the
guardian's process group for one of its own (``announce``). A batch is
guarded the same way: its worker announces each run as it starts it, and
what the guardian does at the worker's death it does for every run
announced.

The guardian costs nothing while the run goes on. It replaces itself with
a fresh interpreter holding only built-in modules (``wrapper/process/guardian_waiter.py``),
blocks reading the announcement and then in ``waitpid`` on the worker,
passes on the stop signals it receives (SIGTERM, SIGINT, SIGHUP, SIGQUIT,
each once, as it comes), and exits with the worker's exit status. It is a
child subreaper: should the worker die, every process of the run it left
(the agent, a double-forked process that left the agent's session and
cleared its environment) reparents to the guardian, which thus knows the
whole tree without ever having looked at it.

When the worker dies by a signal (SIGKILL, the OOM killer, a crash), the
guardian (``worker_ended``):

1. ends every process of the run: its own descendants (everything the
   worker left), every process carrying the run's ``AGENT_WRAPPER_RUN_ID``,
   and everything in their sessions and process groups get SIGTERM, then
   SIGKILL, sweep after sweep until nothing is found;
2. writes result.json (``outcome: aborted``, ``error.kind: wrapper_killed``)
   where the run's configuration says it goes, unless the run's own result
   is already there, marks status.json finished, and exits 128 + the signal.

The worker asks the kernel for a signal when the guardian dies
(``PR_SET_PDEATHSIG``): a runner's ``kill -9`` hits the guardian, or the
guardian's whole process group, which the worker has left by then. The
worker then does the same, with its own descendants as the run's tree,
and exits. Either way the one that survives cleans up. A kill in the very
first instant finds nothing of the run yet: the worker ends at once when
its guardian is gone before the run was announced, and the guardian, when
the worker is gone before, ends the way the worker did.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from wrapper.core.signals import STOP_SIGNALS

# typing costs the waiting guardian memory; the annotations need it only when checked.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    import psutil

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
#: The run's exit status as result.json reports it when the guardian was
#: killed: 128 + SIGKILL, the way a process dies without a word.
WRAPPER_KILLED_EXIT = 128 + signal.SIGKILL
#: The environment variable that marks every process of a run.
RUN_ID_VARIABLE = "AGENT_WRAPPER_RUN_ID"
#: The signal the worker gets when the guardian dies. Not one of the stop
#: signals, whose handlers trio takes over; the worker checks that its
#: guardian is really gone before acting on it.
GUARDIAN_DEATH_SIGNAL = signal.SIGUSR2
#: prctl options.
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

_Known = dict[int, float]

#: In the worker: the guardian's pid (the one the runner holds) and process
#: group, the pipe to announce the run on, and the run once announced.
_guardian_pid: int | None = None
_guardian_pgid: int | None = None
_announce_fd: int | None = None
_watches: list[Watch] = []
#: Ends each run's record on the announcement pipe (no field is empty).
RECORD_END = b"\0\0"


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


def wrapper_pid() -> int:
    """The pid the runner holds for this run: the guardian's in the worker,
    else this process's own."""
    return _guardian_pid if _guardian_pid is not None else os.getpid()


def record_stop_signals() -> list[signal.Signals]:
    """Record the stop signals that arrive from now on, to be acted on once
    the run is up; returns the list they are appended to."""
    early: list[signal.Signals] = []
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, _frame: early.append(signal.Signals(signum)))
    return early


def _prctl(option: int, value: int) -> bool:
    import ctypes  # noqa: PLC0415 - only once forked

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def fork_for_run(argv: list[str] | None = None) -> None:
    """When the command line is a run (``argv``: ``sys.argv``), fork: this
    process becomes the run's guardian and never returns from here; the
    worker returns and does the run. It tells the guardian which run it is
    (``announce``) before it creates anything of it.

    Call before any thread is started. Does nothing in the worker, for any
    other subcommand, or where the system cannot fork.
    """
    global _guardian_pid, _guardian_pgid, _announce_fd  # properties of the whole process
    args = sys.argv if argv is None else argv
    if _guardian_pid is not None or args[1:2] not in (["run"], ["batch"]):
        return
    me = os.getpid()
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    try:
        worker = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return
    if worker == 0:
        os.close(read_end)
        _guardian_pid, _guardian_pgid, _announce_fd = me, os.getpgid(0), write_end
        _become_worker(me)
        return
    os.close(write_end)
    _become_guardian(worker, read_end)


def announce(run_id: str, run_dir: Path, result_path: Path, *, more: bool = False) -> None:
    """Tell the guardian which run this is, before anything of it exists (and
    from then on, end the run should the guardian die). ``more``: other runs
    of this process will be announced later (a batch), each before it
    starts. Does nothing in a process without a guardian."""
    global _waiter_command  # a property of the whole process
    fd = _announce_fd
    if fd is None or _guardian_pid is None:
        return
    if not _watches:
        leave_guardians_group()
        # Should the guardian die, its cleanup starts in a fresh interpreter.
        _waiter_command = waiter_command()
    _watches.append(
        Watch(
            wrapper_pid=_guardian_pid,
            run_id=run_id,
            run_dir=run_dir,
            result_path=result_path,
            # The runner's session and the guardian's group hold the guardian's
            # parent and siblings, never the agent (it gets a session of its own).
            spared=frozenset({os.getsid(0), _guardian_pgid or 0}),
        )
    )
    fields = [run_id, str(run_dir), str(result_path)]
    data = "\0".join(fields).encode(errors="surrogateescape") + RECORD_END
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass
    if not more:
        close_announcements()


def leave_guardians_group() -> None:
    """Move the worker to a process group of its own, before anything of a
    run exists: a kill of the runner's group reaches the guardian only (and
    before this, nothing of the run). Not earlier: the command line may
    still read the task from the terminal, which only its foreground group
    may do. Does nothing in a process without a guardian."""
    if _guardian_pid is not None:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)


def close_announcements() -> None:
    """No more runs will be announced."""
    global _announce_fd  # a property of the whole process
    if _announce_fd is not None:
        with contextlib.suppress(OSError):
            os.close(_announce_fd)
        _announce_fd = None


def _become_worker(guardian: int) -> None:
    signal.signal(GUARDIAN_DEATH_SIGNAL, _guardian_died)
    _prctl(PR_SET_PDEATHSIG, GUARDIAN_DEATH_SIGNAL)
    if os.getppid() != guardian:  # gone before it could ask
        _end_orphaned_run()


def _guardian_died(_signum: int, _frame: Any) -> None:
    if os.getppid() != _guardian_pid:
        _end_orphaned_run()


def _end_orphaned_run() -> None:
    """The guardian is gone (the runner's ``kill -9``): end the run as it would
    have, from wherever the worker is, and exit.

    This runs as a signal handler, at any point of the worker's life: in the
    middle of an import (the cleanup's own imports would then find that
    module half made) or with a lock held. So the cleanup runs in a fresh
    interpreter exec'd in place, as the guardian's waiting does: same pid,
    the run's processes still its children, the child-subreaper flag kept.
    Only where that cannot be started does it run here."""
    # Other stop signals are no use now: nobody waits for this process. Nor
    # is a second parent's death: the cleanup is not to be cut short.
    for sig in (*STOP_SIGNALS, GUARDIAN_DEATH_SIGNAL):
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_IGN)
    watches = list(_watches)
    if not watches:  # nothing of the run exists yet
        os._exit(WRAPPER_KILLED_EXIT)
    guardian = watches[0].wrapper_pid
    args = [ORPHANED, str(guardian), str(_guardian_pgid or 0)]
    for watch in watches:
        args += [watch.run_id, str(watch.run_dir), str(watch.result_path)]
    # Made when the first run was announced: not here, in a signal handler
    # that may have interrupted an import.
    command = _waiter_command
    if command is not None:
        with contextlib.suppress(OSError, ValueError):
            os.execv(command[0], [*command, *args])
    end_orphaned_run(watches)


#: The first argument of ``wrapper/process/guardian_waiter.py`` when a worker whose guardian
#: died execs it to end the run.
ORPHANED = "--orphaned"

#: The packages from outside the standard library that ending a run imports
#: once its wrapper died: this one, psutil, and orjson (for the result).
CLEANUP_PACKAGES = ("wrapper", "psutil", "orjson")

#: What ``python -I -S -c`` runs to start ``wrapper/process/guardian_waiter.py``: imported as a
#: top-level module from this package's directory, so that it is read
#: wherever the package is (a directory, a zip archive) and without the
#: package's own imports. Its arguments: that directory, then the waiter's.
WAITER_BOOTSTRAP = (
    "import sys;sys.path.insert(0,sys.argv[1]);import guardian_waiter as w;w.main(sys.argv[1:])"
)

#: This package's directory as it was imported: made absolute now, while the
#: current directory is the one a relative ``sys.path`` entry meant.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

#: In the worker: the command that starts the waiter to end the runs should the
#: guardian die (``None`` until the first run is announced, or where no waiter
#: can be started).
_waiter_command: list[str] | None = None


def waiter_command() -> list[str] | None:
    """The command line that starts ``wrapper/process/guardian_waiter.py`` in a fresh
    interpreter (``python -I -S``: no site, no environment, the least start-up
    and memory), to be followed by the waiter's own arguments; ``None`` where
    it could not be started.

    ``-S`` leaves out what site would have set up: the site-packages
    directories, and the import hooks that ``.pth`` files install (an
    editable install's finder, a zipapp's or PEX's own path set-up). So the
    command hands the waiter how this process imports: its ``sys.path``, and
    for each of ``CLEANUP_PACKAGES`` the directory this process found it in
    (``wrapper.process.guardian_waiter`` finds each there first). The waiter itself is read
    through this package's directory, never as a file by its path: a zipapp
    has none.
    """
    from importlib.machinery import PathFinder  # noqa: PLC0415 - only once forked

    if not sys.executable or PathFinder.find_spec("guardian_waiter", [_PACKAGE_DIR]) is None:
        return None
    # The path finder skips entries that are not strings; so does the waiter.
    path = [entry for entry in sys.path if isinstance(entry, str)]
    roots: list[str] = []
    for name in CLEANUP_PACKAGES:
        root = _found_in(name)
        if root is not None:
            roots += [name, root]
    return [
        sys.executable,
        "-I",
        "-S",
        "-c",
        WAITER_BOOTSTRAP,
        _PACKAGE_DIR,
        str(len(path)),
        *path,
        str(len(roots) // 2),
        *roots,
    ]


def _found_in(name: str) -> str | None:
    """The directory that holds the top-level package or module ``name`` as
    this process imported it, or would: without importing it, and asking
    every finder (an import hook too), as ``import`` does."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    if module is None:
        for finder in sys.meta_path:
            # A finder that fails only leaves the name to sys.path.
            try:
                spec = finder.find_spec(name, None)
            except Exception:
                spec = None
            if spec is not None:
                break
    if spec is None:  # not found, or a module half made
        return None
    if spec.submodule_search_locations:
        where = next(iter(spec.submodule_search_locations), None)
    else:
        where = spec.origin if spec.has_location else None
    return os.path.dirname(os.path.abspath(where)) if where else None


def orphaned_entry(args: list[str]) -> None:
    """``waiter --orphaned GUARDIAN GROUP [RUN_ID RUN_DIR RESULT]...``: the
    worker, exec'd afresh once its guardian died, ends the runs it had
    announced (``args``: what follows ``--orphaned``). Never returns."""
    from pathlib import Path  # noqa: PLC0415 - the waiting guardian does without

    guardian, group, fields = int(args[0]), int(args[1]), args[2:]
    spared = frozenset({os.getsid(0), group})
    watches = [
        Watch(
            wrapper_pid=guardian,
            run_id=fields[at],
            run_dir=Path(fields[at + 1]),
            result_path=Path(fields[at + 2]),
            spared=spared,
        )
        for at in range(0, len(fields) - 2, 3)
    ]
    end_orphaned_run(watches)


def end_orphaned_run(watches: list[Watch]) -> None:
    """End the runs of ``watches`` (the guardian of all of them is dead): their
    processes, then their results. Never returns."""
    try:
        me = os.getpid()
        cleanup = end_run(watches, known_below(me), {me, watches[0].wrapper_pid})
        for watch in watches:
            finish_run(watch, cleanup)
    finally:
        os._exit(WRAPPER_KILLED_EXIT)


def _become_guardian(worker: int, announced: int) -> None:
    """Become the guardian: a child subreaper that waits for ``worker``.

    The waiting is done by a fresh interpreter with nothing imported
    (``wrapper/process/guardian_waiter.py``, exec'd in place: same pid, same children, the
    subreaper flag kept): what this process holds would otherwise stay in
    memory for the whole run, and the pages the worker writes to would be
    copied, costing twice. Where that cannot be started, it waits here.
    """
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    # Held from now until the waiter has its handlers; not lost meanwhile.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    command = waiter_command()
    if command is not None:
        try:
            os.set_inheritable(announced, True)
            # The command line last: it is what shows in ps for the run.
            os.execv(command[0], [*command, str(worker), str(announced), *sys.argv])
        except (OSError, ValueError):
            pass
    _stand_guard(worker, announced)


def _stand_guard(worker: int, announced: int) -> None:
    """The guardian's waiting life, where no waiter could be started: what
    ``wrapper/process/guardian_waiter.py`` does."""

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(OSError):
            os.kill(worker, signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    announcement = b""
    try:
        while chunk := os.read(announced, 65536):
            announcement += chunk
    except OSError:
        pass
    finally:
        os.close(announced)
    try:
        _, status = os.waitpid(worker, 0)
    except ChildProcessError:  # cannot happen: the worker is its child
        status = signal.SIGKILL
    worker_ended(worker, status, announcement)


def worker_ended(worker: int, status: int, announcement: bytes) -> None:
    """The worker ended with wait status ``status``, having announced
    ``announcement`` (see ``announce``): clean up if it died by a signal, and
    exit as the run's exit status says. Never returns."""
    # Nothing left to pass them on to, and the cleanup is not to be cut short.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    watches = _read_announcement(announcement)
    me = os.getpid()
    # Not niced while it waits: the runner is to learn of the end at once.
    # Cleaning up must not come at the expense of the rest of the machine.
    with contextlib.suppress(OSError):
        os.nice(10)
    if not os.WIFSIGNALED(status):
        code = os.waitstatus_to_exitcode(status)
        if watches and _has_children():
            # The worker gave up on some of the run's processes: one more try.
            with contextlib.suppress(Exception):
                end_run(watches, known_below(me), {me})
        os._exit(code)
    died_by = os.WTERMSIG(status)
    if not watches:
        # Nothing of the run exists: end the way the worker did, as if the
        # runner had started it directly.
        with contextlib.suppress(OSError, ValueError):
            signal.signal(died_by, signal.SIG_DFL)
        with contextlib.suppress(OSError):
            os.kill(me, died_by)
        os._exit(128 + died_by)
    try:
        cleanup = end_run(watches, known_below(me), {me})
        for watch in watches:
            finish_run(
                watch,
                cleanup,
                exit_status=128 + died_by,
                who=f"the wrapper's worker process (pid {worker}) died of {_signal_name(died_by)}",
            )
    finally:
        os._exit(128 + died_by)


def _read_announcement(data: bytes) -> list[Watch]:
    """The runs the worker announced, whole (none when it ended, or died,
    before it announced one)."""
    from pathlib import Path  # noqa: PLC0415 - the waiting guardian does without

    watches = []
    # What follows the last record's end is a record cut short by a death.
    for record in data.split(RECORD_END)[:-1]:
        parts = record.decode(errors="surrogateescape").split("\0")
        if len(parts) != 3 or not parts[0]:
            continue
        watches.append(
            Watch(
                wrapper_pid=os.getpid(),
                run_id=parts[0],
                run_dir=Path(parts[1]),
                result_path=Path(parts[2]),
                spared=frozenset({os.getsid(0), os.getpgid(0)}),
            )
        )
    return watches


def _has_children() -> bool:
    try:
        with open(f"/proc/self/task/{os.getpid()}/children", "rb") as file:
            return bool(file.read().split())
    except OSError:
        return False


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


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
            if proc.environ().get(RUN_ID_VARIABLE) in run_ids:
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
        for path in candidates:
            result = wrapper_killed_result(
                watch=watch,
                status=status,
                config=config,
                cleanup=cleanup,
                ended_at=time.time(),
                result_path=path,
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
    exit_status: int = WRAPPER_KILLED_EXIT,
    who: str | None = None,
) -> dict[str, Any]:
    """result.json for a run whose wrapper died: what status.json and
    config.json knew, ``null`` for what only the wrapper knew."""
    conf = config or {}
    started = _epoch(status.get("startedAt")) or ended_at
    known_attempt, known_pid = status.get("attempt"), status.get("pid")
    attempt = known_attempt if isinstance(known_attempt, int) else 1
    pid = known_pid if isinstance(known_pid, int) else None
    forced = bool(cleanup.signals_sent)
    who = who or f"the wrapper (pid {watch.wrapper_pid}) was killed"
    message = (
        f"{who} before it finished the run ({status.get('state')}, attempt {attempt}); "
        "what remained of the wrapper ended the run's processes and wrote this result"
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

    from wrapper.core.registry import program_name  # noqa: PLC0415 - only for a dead wrapper

    dialect = conf.get("dialect")
    command = conf.get("command") or []
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
        "exitStatus": exit_status,
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
        "command": command,
        "cwd": conf.get("cwd") or os.getcwd(),
        "dialect": dialect if isinstance(dialect, str) and dialect != "auto" else None,
        "agent": program_name([str(arg) for arg in command]) if isinstance(command, list) else None,
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
    from wrapper.core.timefmt import iso  # noqa: PLC0415 - see finish_run

    return iso(epoch)


def _epoch(stamp: object) -> float | None:
    from datetime import datetime  # noqa: PLC0415 - see finish_run

    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None
