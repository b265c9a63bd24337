"""The guardian: the process the runner started, standing guard over the run.

For a run, the command forks first thing, before it parses its arguments
or imports anything heavy (``fork_for_run``). The parent, the process the
runner started and holds the pid of, becomes the guardian; the child, the
worker, parses the command line, does the run and starts the agent below
itself. Before it creates anything of the run it announces the run (id,
directory, result path) to the guardian on a pipe and leaves the
guardian's process group for one of its own (``announce``). A batch (and the MCP server) is
guarded the same way: its worker announces each run as it starts it, and
what the guardian does at the worker's death it does for every run
announced.

The guardian costs nothing while the run goes on. It replaces itself with
a small compiled program (``wrapper/process/waiter.c``, where the package
was built with a C compiler) or else a fresh interpreter holding only
built-in modules (``wrapper/process/guardian_waiter.py``),
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

from wrapper.core.signals import STOP_SIGNALS, WRAPPER_KILLED_EXIT
from wrapper.process.sweep import Watch, end_run, finish_run, known_below

# typing costs the waiting guardian memory; the annotations need it only when checked.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


#: The signal the worker gets when the guardian dies. Not one of the stop
#: signals, whose handlers trio takes over; the worker checks that its
#: guardian is really gone before acting on it.
GUARDIAN_DEATH_SIGNAL = signal.SIGUSR2
#: prctl options.
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


#: In the worker: the guardian's pid (the one the runner holds) and process
#: group, the pipe to announce the run on, and the run once announced.
_guardian_pid: int | None = None
_guardian_pgid: int | None = None
_announce_fd: int | None = None
_watches: list[Watch] = []
#: Ends each run's record on the announcement pipe (no field is empty).
RECORD_END = b"\0\0"


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
    if _guardian_pid is not None or args[1:2] not in (["run"], ["batch"], ["mcp"]):
        return
    me = os.getpid()
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    # Held from before the fork: a stop signal sent to the guardian while it
    # sets itself up waits for its waiter to pass it on, instead of reaching
    # Python's default handling halfway through the set-up.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        worker = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        os.close(read_end)
        os.close(write_end)
        return
    if worker == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
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

#: The compiled waiter's file name in this package's directory: built from
#: ``waiter.c`` when the package is built (``setup.py``), absent where no C
#: compiler was found (the Python waiter then waits).
WAITER_PROGRAM = "_waiter"
#: The environment variable that chooses the guardian's waiter: ``python``
#: for the Python one, or the path of a program to try first; unset, the
#: compiled one where it was built. For tests and diagnosis.
WAITER_VARIABLE = "AGENT_WRAPPER_GUARDIAN_WAITER"
PYTHON_WAITER = "python"

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

    The waiting is done by the compiled waiter (``wrapper/process/waiter.c``,
    a few hundred kB), else by a fresh interpreter with nothing imported
    (``wrapper/process/guardian_waiter.py``), exec'd in place: same pid, same
    children, the subreaper flag kept. What this process holds would
    otherwise stay in memory for the whole run, and the pages the worker
    writes to would be copied, costing twice. The compiled waiter execs the
    Python one's cleanup only when there is one to do. Where neither can be
    started, it waits here.
    """
    # The stop signals are held (since before the fork) until the waiter has
    # its handlers; not lost meanwhile.
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    command = waiter_command()
    if command is not None:
        try:
            os.set_inheritable(announced, True)
        except OSError:
            command = None
    if command is not None:
        handed = [str(worker), str(announced)]
        program = compiled_waiter()
        if program is not None:
            # Where it fails to start (not built for this machine, not
            # executable), the Python waiter does the same.
            with contextlib.suppress(OSError, ValueError):
                os.execv(program, [program, *handed, str(len(command)), *command, *sys.argv])
        # The command line last: it is what shows in ps for the run.
        with contextlib.suppress(OSError, ValueError):
            os.execv(command[0], [*command, *handed, *sys.argv])
    _stand_guard(worker, announced)


def compiled_waiter() -> str | None:
    """The compiled waiter to try first (``wrapper/process/waiter.c``, built
    with the package as ``WAITER_PROGRAM`` beside this module where a C
    compiler was found), or ``None`` for the Python one: ``WAITER_VARIABLE``
    set to ``python`` chooses the Python waiter, set to a path that program."""
    chosen = os.environ.get(WAITER_VARIABLE, "")
    if chosen == PYTHON_WAITER:
        return None
    return chosen or os.path.join(_PACKAGE_DIR, WAITER_PROGRAM)


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
