"""Ending what the agent (or a hook) left behind: its process group and,
the wrapper being a subreaper, every process below the wrapper that is not
one of its own helpers."""

from __future__ import annotations

import signal
from collections.abc import Callable

import trio

from wrapper.core.events import Event, WarningEvent
from wrapper.core.limits import CLEANUP_ROUNDS, LEFTOVER_POLL, REAP_TIMEOUT
from wrapper.process import proctree
from wrapper.process.proctree import RunClaim


async def end_leftovers(
    pgid: int | None,
    who: str,
    *,
    claim: RunClaim | None,
    hurry: trio.Event,
    kill_after: float,
    emit: Callable[[Event], None],
    record_signal: Callable[[signal.Signals, str, list[int]], None],
) -> None:
    """End what the agent left behind, also after a clean exit (MCP servers
    and the like): its process group and, the wrapper being a subreaper,
    every process below the wrapper that is not one of its own helpers.
    SIGTERM, then rounds of freezing and SIGKILL until nothing is left; a
    second wrapper signal skips the SIGTERM or cuts its wait short."""

    def group_alive() -> bool:
        return pgid is not None and proctree.group_alive(pgid)

    warned = False
    for round_ in range(CLEANUP_ROUNDS):
        # A stopped process cannot fork: one that keeps changing its pid
        # is caught by freezing the tree before signalling it.
        if pgid is not None:
            proctree.signal_group(pgid, signal.SIGSTOP)
        procs, _converged = proctree.freeze(lambda: proctree.leftovers(claim), claim)
        procs = proctree.still_alive(procs)
        if not procs and not group_alive():
            return
        if not warned:
            warned = True
            what = proctree.describe(procs) if procs else "processes in its group"
            emit(
                WarningEvent(
                    code="leftover_processes",
                    message=f"{who} {what} running; terminating them",
                )
            )
        if round_ == 0 and not hurry.is_set():
            sig, wait = signal.SIGTERM, kill_after
        else:
            sig, wait = signal.SIGKILL, REAP_TIMEOUT
        pids = [pgid] if pgid is not None and proctree.signal_group(pgid, sig) else []
        pids += proctree.signal_each(procs, sig)
        if sig is signal.SIGTERM:
            # Let them act on it (SIGKILL needs no such help).
            if pgid is not None:
                proctree.signal_group(pgid, signal.SIGCONT)
            proctree.signal_each(procs, signal.SIGCONT)
        record_signal(sig, "leftover processes", list(dict.fromkeys(pids)))
        with trio.move_on_after(wait):
            async with trio.open_nursery() as watch:
                if sig is signal.SIGTERM:
                    watch.start_soon(_cancel_on, hurry, watch.cancel_scope)
                while True:
                    await trio.sleep(LEFTOVER_POLL)
                    procs = proctree.still_alive(procs)
                    if not procs and not group_alive():
                        watch.cancel_scope.cancel()
                        break
    left = proctree.leftovers(claim)
    if left:
        emit(
            WarningEvent(
                code="cleanup_incomplete",
                message=f"{proctree.describe(left)} could not be ended after "
                f"{CLEANUP_ROUNDS} rounds of cleanup and may still be running",
            )
        )


async def _cancel_on(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
