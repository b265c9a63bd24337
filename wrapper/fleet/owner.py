"""What one process owns around its runs: the stop signals, reaping the
orphans a subreaper adopts, and for the command line its one run.

A ``Run`` relies on none of these; the owner (``execute`` for the command
line, the batch for its many runs) sets them up once and hands each run a
signal as ``Run.interrupt``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from wrapper.core.config import RunConfig
from wrapper.core.signals import STOP_SIGNALS
from wrapper.dialects import Dialect, Launch
from wrapper.process.proctree import owns_process, reap_orphans
from wrapper.supervision.early import EarlyStart
from wrapper.supervision.run import Run

if TYPE_CHECKING:
    from wrapper.sinks.trace_ids import PlannedIds


async def execute(
    config: RunConfig,
    dialect: Dialect,
    launch: Launch,
    environ: Mapping[str, str],
    early: EarlyStart | None = None,
    *,
    early_signals: list[signal.Signals] | None = None,
    planned_ids: PlannedIds | None = None,
) -> int:
    """The command line's run: the process's duties around one ``Run``;
    returns the run's exit status.

    ``launch`` is the dialect's argv for the task (computed before the run, so
    that a task the agent cannot take is a usage error, not a failed run).
    ``early`` is what the command line already started; ``early_signals``
    the stop signals it recorded when it started nothing. ``planned_ids``:
    the trace ids the agent started early was given (``trace_ids.plan_ids``).
    """
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        run = Run(config, dialect, launch, environ, early, planned_ids=planned_ids)
        if early is None and early_signals:
            run.interrupts += early_signals
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay_signals, signals, lambda _sig: (run,))
            if owns_process():
                nursery.start_soon(reap_orphans_on_sigchld)
            exit_status = await run.execute()
            nursery.cancel_scope.cancel()
    return exit_status


async def relay_signals(signals: Any, runs: Callable[[signal.Signals], Iterable[Run]]) -> None:
    """Hand each stop signal the process receives to every run ``runs``
    names for it (told of the signal, it says which runs are going on)."""
    async for signum in signals:
        sig = signal.Signals(signum)
        for run in runs(sig):
            run.interrupt(sig)


async def reap_orphans_on_sigchld() -> None:
    """Reap the processes the wrapper adopted as they die (it is a subreaper),
    so that a storm of short-lived orphans never piles up as zombies."""
    with trio.open_signal_receiver(signal.SIGCHLD) as sigchld:
        reap_orphans()
        async for _ in sigchld:
            reap_orphans()
