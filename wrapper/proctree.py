"""Finding and ending the agent's process tree.

The agent is started as the leader of its own process group and session, so
one ``killpg`` reaches everything that stayed in the group. Descendants are
also signalled one by one from a snapshot, to reach those that moved to a
group or session of their own. The wrapper makes itself a child subreaper,
so a process whose parent exited (a double fork, a daemonized MCP server) is
reparented to the wrapper instead of init and stays findable: after the
agent exits, whatever is left below the wrapper, apart from the wrapper's
own helpers, is the agent's leftovers.

Processes the wrapper adopted are reaped by pid, never with a wait on any
child, which would take the exit status of a process trio is waiting for.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

#: prctl option that makes orphaned descendants reparent to the caller.
PR_SET_CHILD_SUBREAPER = 36

#: Whether this process is a subreaper: set once by the command line, which
#: owns the process (a library caller's other children are not ours to end).
_subreaper = False

#: Pids of the wrapper's own helpers (the guardian, hook handlers): never
#: taken for the agent's leftovers.
OWN_HELPERS: set[int] = set()


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


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


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
    reached = []
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            continue
        reached.append(proc.pid)
    return reached


def leftovers() -> list[psutil.Process]:
    """Live processes below the wrapper that are not its own helpers (or theirs).

    Only for a subreaper, whose children are all the wrapper's doing; zombies
    among its adopted children are reaped on the way.
    """
    if not _subreaper:
        return []
    me = os.getpid()
    try:
        children = psutil.Process(me).children()
    except psutil.Error:
        return []
    found: list[psutil.Process] = []
    for child in children:
        if child.pid in OWN_HELPERS:
            continue
        for proc in [child, *descendants(child.pid)]:
            if _alive(proc, me):
                found.append(proc)
    return found


def still_alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running; the dead among the wrapper's own
    children are reaped, one pid at a time."""
    me = os.getpid()
    return [proc for proc in procs if _alive(proc, me)]


def describe(procs: list[psutil.Process], limit: int = 5) -> str:
    """``python3 (pid 12), node (pid 40), ...`` for messages."""
    names = []
    for proc in procs[:limit]:
        try:
            names.append(f"{proc.name()} (pid {proc.pid})")
        except psutil.Error:
            names.append(f"pid {proc.pid}")
    more = f" and {len(procs) - limit} more" if len(procs) > limit else ""
    return ", ".join(names) + more


def _alive(proc: psutil.Process, me: int) -> bool:
    try:
        if proc.status() != psutil.STATUS_ZOMBIE:
            return True
        if proc.ppid() == me:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(proc.pid, os.WNOHANG)
    except psutil.Error:
        pass
    return False


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


def start_guardian(run_id: str, run_dir: Path, result_path: Path) -> subprocess.Popen[bytes] | None:
    """Start the guardian that ends the run's processes and writes its result if
    the wrapper dies hard (only when the wrapper owns its process; see
    ``wrapper.guardian``). It is told everything it needs now, so that it can
    act from the first instant without a word more from the wrapper."""
    if not owns_process():
        return None
    # The wrapper's own session and group hold its parent and siblings,
    # never the agent (which gets a session of its own): never the run's to end.
    spared = {os.getsid(0), os.getpgid(0)}
    argv = [
        sys.executable,
        str(Path(__file__).with_name("guardian.py")),
        str(os.getpid()),
        run_id,
        str(run_dir),
        str(result_path),
        *map(str, sorted(spared)),
    ]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None
    OWN_HELPERS.add(proc.pid)
    return proc


def stop_guardian(proc: subprocess.Popen[bytes] | None) -> None:
    """Tell the guardian the wrapper finished cleanly. It reads ``done`` before
    the end of its pipe and exits on its own; the wrapper does not wait for it
    (it may still be starting), and its exit status goes to whoever adopts it."""
    if proc is None or proc.stdin is None:
        return
    with contextlib.suppress(OSError):
        proc.stdin.write(b"done\n")
        proc.stdin.close()
    OWN_HELPERS.discard(proc.pid)
