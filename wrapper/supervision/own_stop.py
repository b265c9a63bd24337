"""The wrapper's own stop signal, awaited after the agent died of one the
wrapper did not send.

A job cancelled as a whole signals every one of its processes, the agent
often first (Slurm's scancel under its default process tracking, a kill of
a process group): the agent's death is then seen before the wrapper's own
signal. Waiting a moment for that signal before deciding the outcome ends
such a run ``aborted``, as it would have had the signals come the other way
round, not ``error``.
"""

from __future__ import annotations

import trio

from wrapper.core.limits import OWN_STOP_WAIT
from wrapper.core.result import AttemptRecord
from wrapper.core.signals import STOP_SIGNALS


def died_of_foreign_stop(record: AttemptRecord) -> bool:
    """Whether the agent died of a stop signal that the wrapper did not send it."""
    exit_ = record.exit
    tracker = record.tracker
    return (
        exit_ is not None
        and exit_.signal in STOP_SIGNALS
        and not record.signals_sent
        and not (tracker is not None and tracker.signalled)
    )


class OwnStop:
    """Told of each stop signal the wrapper receives; awaited after a death
    by a foreign one."""

    def __init__(self) -> None:
        self._arrived: trio.Event | None = None

    def arrived(self) -> None:
        """A stop signal of the wrapper's own came."""
        if self._arrived is not None:
            self._arrived.set()

    async def wait(self) -> None:
        """Return when a stop signal of the wrapper's own comes, or after
        ``OWN_STOP_WAIT`` seconds without one."""
        self._arrived = trio.Event()
        try:
            with trio.move_on_after(OWN_STOP_WAIT):
                await self._arrived.wait()
        finally:
            self._arrived = None
