"""Finding and ending the agent's process tree.

The agent is started as the leader of its own process group and session, so
one ``killpg`` reaches everything that stayed in the group. Descendants are
also signalled one by one from a snapshot, to reach those that moved to a
group or session of their own. The wrapper makes itself a child subreaper,
so a process whose parent exited (a double fork, a daemonized MCP server) is
reparented to the wrapper instead of init and stays findable: after the
agent exits, whatever is left below the wrapper, apart from the wrapper's
own helpers, is the agent's leftovers.

psutil is imported only by the functions that need it: a run whose agent
leaves nothing behind never does, and the memory of a waiting run stays
smaller.

Processes the wrapper adopted are reaped by pid, never with a wait on any
child, which would take the exit status of a process trio is waiting for:
the agent and the hook handlers are left to their own waiters. Adopted
orphans are reaped as they die (``reap_orphans``, on SIGCHLD), so that a storm
of short-lived double-forked processes never piles up as zombies that each
later cleanup pass would have to look at.

Ending a tree is a race with processes that keep forking: a process that
forks and exits every few milliseconds (a new pid each time) outruns any
listing. So a tree is first frozen (SIGSTOP to everything found, listed again
until nothing new appears, a bounded number of times) and then killed: a
stopped process cannot fork.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wrapper.core import environment
from wrapper.core.limits import (
    FREEZE_QUICK_LOOKS,
    FREEZE_ROUNDS,
    IDLE_BASELINE_SHARE,
    IDLE_CPU_SHARE,
)

if TYPE_CHECKING:
    import psutil

#: prctl option that makes orphaned descendants reparent to the caller.
PR_SET_CHILD_SUBREAPER = 36

#: Whether this process is a subreaper: set once by the command line, which
#: owns the process (a library caller's other children are not ours to end).
_subreaper = False

#: Pids of the wrapper's own helpers (hook handlers): never
#: taken for the agent's leftovers.
OWN_HELPERS: set[int] = set()

#: Pids of children the wrapper waits for by pid itself (the agent): never
#: reaped by ``reap_orphans``, which would take their exit status.
WAITED: set[int] = set()

#: How many helpers (hook handlers) have been started: the run sweeps up
#: after them at its end only when there were any.
helpers_started = 0

#: Spawns under way: their pid is not known yet (a thread may be forking),
#: so ``reap_orphans`` holds off until they are registered.
_spawning = 0


def become_subreaper() -> bool:
    """Make orphaned descendants reparent to this process (Linux); False where unsupported."""
    global _subreaper  # a property of the whole process
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        _subreaper = False
    return _subreaper


def owns_process() -> bool:
    """Whether this process is the wrapper's own (the command line made it a
    subreaper), so that every child below it is the wrapper's doing."""
    return _subreaper


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around a spawn whose pid is registered (``OWN_HELPERS``, ``WAITED``) only
    once it returns: the orphan reaper leaves every child alone meanwhile."""
    global _spawning  # the process's children are a property of the whole process
    _spawning += 1
    try:
        yield
    finally:
        _spawning -= 1


def prepare_to_signal() -> None:
    """Load what signalling a tree needs (psutil), ahead of the moment it is needed."""
    import psutil  # noqa: F401, PLC0415 - loaded here for later use


def register_helper(pid: int) -> None:
    """``pid`` is one of the wrapper's helpers, not one of the agent's leftovers."""
    global helpers_started  # counts for the whole process, like OWN_HELPERS
    helpers_started += 1
    OWN_HELPERS.add(pid)


def own_children() -> list[int]:
    """The wrapper's direct children: one small read per thread of
    ``/proc/self/task/*/children``, not a scan of every process."""
    found: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        tasks = []
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children", "rb") as file:
                found += [int(pid) for pid in file.read().split()]
        except (OSError, ValueError):
            return _children_by_scan()
    return found if tasks else _children_by_scan()


def _children_by_scan() -> list[int]:
    import psutil  # noqa: PLC0415 - only when processes are looked at closely

    try:
        return [proc.pid for proc in psutil.Process().children()]
    except psutil.Error:
        return []


def reap_orphans() -> int:
    """Reap the adopted children that have exited, each by its pid; never one
    that someone else waits for (the agent, the wrapper's helpers). Returns
    how many were reaped. Cheap enough to call on every SIGCHLD."""
    if not _subreaper or _spawning:
        return 0
    reaped = 0
    for pid in own_children():
        if pid in OWN_HELPERS or pid in WAITED:
            continue
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if done:
            reaped += 1
    return reaped


def descendants(pid: int) -> list[psutil.Process]:
    import psutil  # noqa: PLC0415 - only when processes are looked at closely

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


@dataclass(frozen=True, slots=True)
class TreeLook:
    """One look at a process tree, to tell work from silence."""

    #: CPU seconds (user and system) of the tree's live processes, including
    #: what the children they reaped had spent.
    cpu: float
    pids: frozenset[int]


def look_at_tree(pid: int) -> TreeLook:
    """CPU time and pids of ``pid`` and its descendants (one process listing)."""
    import psutil  # noqa: PLC0415 - only when processes are looked at closely

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return TreeLook(0.0, frozenset())
    cpu = 0.0
    pids = set()
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        cpu += times.user + times.system + times.children_user + times.children_system
        pids.add(proc.pid)
    return TreeLook(cpu, frozenset(pids))


class ActivityWatch:
    """Looks at an agent's tree as its output arrives (no more than a few
    times per idle window), to tell, when the idle limit comes due, whether
    the tree worked since: CPU time spent, or a process that was not there.
    A process merely existing (an MCP server, an agent that relaunched
    itself as its child) is no work."""

    def __init__(self, idle_timeout: float | None) -> None:
        self.idle_timeout = idle_timeout
        self._baseline: TreeLook | None = None
        self._baseline_at = -math.inf

    def refresh(self, pid: int | None, now: float) -> None:
        idle = self.idle_timeout
        if idle is not None and now - self._baseline_at >= idle * IDLE_BASELINE_SHARE:
            self.look(pid, now)

    def look(self, pid: int | None, now: float) -> TreeLook | None:
        """A new baseline (None when there is no agent to look at)."""
        if pid is None:
            return None
        look = look_at_tree(pid)
        self._baseline, self._baseline_at = look, now
        return look

    def worked(self, pid: int | None, now: float) -> bool:
        before, since = self._baseline, self._baseline_at
        look = self.look(pid, now)
        if before is None or look is None:
            return False
        cpu = look.cpu - before.cpu
        return cpu > IDLE_CPU_SHARE * (now - since) or bool(look.pids - before.pids)


def signal_tree(pid: int, sig: signal.Signals) -> list[int]:
    """Send ``sig`` to the group led by ``pid`` and to every descendant of ``pid``.

    Returns the pids that were signalled; never raises for processes that are gone.
    """
    members = descendants(pid)
    reached: list[int] = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
        reached.append(pid)
    reached += signal_each(members, sig)
    return list(dict.fromkeys(reached))


def signal_each(procs: list[psutil.Process], sig: signal.Signals) -> list[int]:
    import psutil  # noqa: PLC0415 - only when processes are looked at closely

    reached = []
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            continue
        reached.append(proc.pid)
    return reached


class RunClaim:
    """Which processes below the wrapper are one run's, when several runs
    share the wrapper (a batch): the run's agents and what they started
    (their sessions and process groups), and whatever carries the run's id
    in its environment. Another run's agent, or an orphan that cleared its
    environment and left the agent's session, is never this run's."""

    __slots__ = ("agents", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        #: The pids of the run's agents, one per attempt (each leads a session).
        self.agents: set[int] = set()

    def __call__(self, pid: int) -> bool:
        if pid in self.agents:
            return True
        if pid in WAITED:  # another run's agent
            return False
        try:
            if os.getsid(pid) in self.agents or os.getpgid(pid) in self.agents:
                return True
        except OSError:
            return False
        return process_run_id(pid) == self.run_id


#: How the run's id starts in /proc/PID/environ.
_RUN_ID_ENTRY = environment.RUN_ID.encode() + b"="


def process_run_id(pid: int) -> str | None:
    """The ``AGENT_WRAPPER_RUN_ID`` in ``pid``'s environment, if it can be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            data = file.read()
    except OSError:
        return None
    for entry in data.split(b"\0"):
        if entry.startswith(_RUN_ID_ENTRY):
            return entry.partition(b"=")[2].decode(errors="replace")
    return None


def leftovers(claim: Callable[[int], bool] | None = None) -> list[psutil.Process]:
    """Live processes below the wrapper that are not its own helpers (or theirs);
    with ``claim``, only the subtrees of the wrapper's children it claims.

    Only for a subreaper, whose children are all the wrapper's doing; zombies
    among its adopted children are reaped on the way.
    """
    if not _subreaper:
        return []
    me = os.getpid()
    # One listing of all processes for the whole tree: a listing per child
    # costs seconds once there are thousands of them.
    by_parent: dict[int, list[tuple[int, str]]] = {}
    for pid, ppid, state in _process_table():
        by_parent.setdefault(ppid, []).append((pid, state))
    found: list[psutil.Process] = []
    pending = [
        entry
        for entry in by_parent.get(me, [])
        if entry[0] not in OWN_HELPERS and (claim is None or entry[1] == "Z" or claim(entry[0]))
    ]
    while pending:
        pid, state = pending.pop()
        pending += by_parent.get(pid, [])
        if state == "Z":
            if pid not in WAITED and any(pid == child for child, _ in by_parent.get(me, [])):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            continue
        import psutil  # noqa: PLC0415 - only when something is left

        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(pid))
    return found


def _process_table() -> list[tuple[int, int, str]]:
    """(pid, parent pid, state) of every process: one small read per process."""
    table = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                fields = file.read().rpartition(b")")[2].split()
            table.append((int(name), int(fields[1]), fields[0].decode()))
        except (OSError, ValueError, IndexError):
            continue
    return table


def still_alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running; the dead among the wrapper's own
    children are reaped, one pid at a time."""
    me = os.getpid()
    return [proc for proc in procs if _alive(proc, me)]


def describe(procs: list[psutil.Process], limit: int = 5) -> str:
    """``python3 (pid 12), node (pid 40), ...`` for messages."""
    import psutil  # noqa: PLC0415 - only when processes are looked at closely

    names = []
    for proc in procs[:limit]:
        try:
            names.append(f"{proc.name()} (pid {proc.pid})")
        except psutil.Error:
            names.append(f"pid {proc.pid}")
    more = f" and {len(procs) - limit} more" if len(procs) > limit else ""
    return ", ".join(names) + more


def _alive(proc: psutil.Process, me: int) -> bool:
    import psutil  # noqa: PLC0415 - only when processes are looked at closely

    try:
        if proc.status() != psutil.STATUS_ZOMBIE:
            return True
        if proc.ppid() == me:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(proc.pid, os.WNOHANG)
    except psutil.Error:
        pass
    return False


def adopted(claim: Callable[[int], bool] | None = None) -> list[int]:
    """The wrapper's direct children that are neither its helpers nor waited
    for by pid (the agent): processes it adopted (with ``claim``, those it
    claims). A quick look, for a process that forks and exits faster than a
    full listing. Only for a subreaper: a library caller's other children
    are not the agent's."""
    if not _subreaper or _spawning:
        return []
    return [
        pid
        for pid in own_children()
        if pid not in OWN_HELPERS and pid not in WAITED and (claim is None or claim(pid))
    ]


def freeze(
    find: Callable[[], list[psutil.Process]], claim: Callable[[int], bool] | None = None
) -> tuple[list[psutil.Process], bool]:
    """Stop (SIGSTOP) every process ``find`` lists, and its process group,
    listing again until nothing new appears. Returns the processes stopped
    and whether the tree stopped growing within ``FREEZE_ROUNDS``.

    After each full listing the wrapper's adopted children are looked at
    quickly, a few times over: a process that forks and exits is reparented
    to the subreaper, so that is where a fast one turns up, and one look
    costs microseconds where a full listing costs milliseconds."""
    frozen: dict[int, psutil.Process] = {}
    me = os.getpid()

    def stop(pid: int, proc: psutil.Process | None) -> bool:
        if pid in frozen or pid == me:
            return False
        import psutil  # noqa: PLC0415 - only when something is left

        try:
            # Stopped first, looked at after: it cannot change meanwhile.
            os.kill(pid, signal.SIGSTOP)
            proc = proc or psutil.Process(pid)
        except (OSError, psutil.Error):
            return False
        frozen[pid] = proc
        _signal_group_of(pid, signal.SIGSTOP)
        return True

    for _round in range(FREEZE_ROUNDS):
        new = sum(stop(proc.pid, proc) for proc in find())
        for _look in range(FREEZE_QUICK_LOOKS):
            quick = sum(stop(pid, None) for pid in adopted(claim))
            if not quick:
                break
            new += quick
        if not new:
            return list(frozen.values()), True
    return list(frozen.values()), False


def _signal_group_of(pid: int, sig: signal.Signals) -> None:
    """Signal ``pid``'s process group too (its children not yet listed are in
    it), unless that is the wrapper's own group."""
    try:
        pgid = os.getpgid(pid)
    except OSError:
        return
    if pgid > 1 and pgid != os.getpgrp():
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    """Whether any process is still in the process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
