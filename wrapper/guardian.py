"""The guardian: ends the agent's tree when the wrapper itself dies hard.

A SIGKILLed (or OOM-killed) wrapper runs no cleanup, and a parent-death
signal would reach only its direct children. So each run starts this small
process in a session of its own (a kill of the wrapper's process group does
not take it along), holding the read end of a pipe from the wrapper. It
keeps a current list of every process below the wrapper, polling, so that it
still knows them once they have been reparented away. When the pipe reaches
end of file without the wrapper having said ``done``, the wrapper is gone:
the guardian sends SIGTERM to everything it knew (and its process groups),
then SIGKILL to what is left.

Run as ``python -m wrapper.guardian WRAPPER_PID``; it imports only psutil.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys

import psutil

#: How often the tree below the wrapper is listed again.
POLL_SECONDS = 0.2
#: SIGTERM to SIGKILL once the wrapper is gone.
TERM_SECONDS = 1.0

_Known = dict[int, float]


def main(argv: list[str]) -> int:
    try:
        wrapper = psutil.Process(int(argv[1]))
    except (IndexError, ValueError, psutil.Error):
        return 2
    # Waiting is its whole job: it must not slow the run it guards.
    os.nice(10)
    known: _Known = {}
    own = {os.getpid(), wrapper.pid}
    while True:
        readable, _, _ = select.select([0], [], [], POLL_SECONDS)
        if readable:
            data = os.read(0, 4096)
            if b"done" in data:
                return 0
            if not data:
                break
        _remember(wrapper, known, own)
    _end(known, own)
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


def _end(known: _Known, own: set[int]) -> None:
    targets = _still_known(known)
    # Whatever they started since the last poll is below them now.
    for proc in list(targets):
        with contextlib.suppress(psutil.Error):
            targets += proc.children(recursive=True)
    groups = {group for proc in targets if (group := _group_led_by(proc)) is not None}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for group in groups:
            with contextlib.suppress(OSError):
                os.killpg(group, sig)
        for proc in targets:
            if proc.pid not in own:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(sig)
        if sig is signal.SIGTERM:
            _, targets = psutil.wait_procs(targets, timeout=TERM_SECONDS)


def _still_known(known: _Known) -> list[psutil.Process]:
    """The known processes that are still the same processes (pids get reused)."""
    alive = []
    for pid, created in known.items():
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.create_time() == created:
                alive.append(proc)
    return alive


def _group_led_by(proc: psutil.Process) -> int | None:
    """The process group ``proc`` leads, if it leads one (the wrapper started
    the agent and its helpers as group leaders; other groups are not ours)."""
    with contextlib.suppress(OSError):
        if os.getpgid(proc.pid) == proc.pid:
            return proc.pid
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv))
