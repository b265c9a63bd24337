"""Signalling and ending the agent's process tree.

The agent is started as the leader of its own process group and session, so
one ``killpg`` reaches everything that stayed in the group. Descendants are
also signalled one by one from a snapshot, to reach those that moved to a
group of their own.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil


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
    for proc in members:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            continue
        if proc.pid not in reached:
            reached.append(proc.pid)
    return reached


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
