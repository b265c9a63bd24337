"""Where a run shows its events as they come: its own stdout (JSON lines, or
the live view on a terminal) or an output shared with other runs (a
batch's), and the events file beside it.

``RunOutput`` is made once per run, before anything is emitted: the run's
event stream writes through it from the first event on.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import trio

from wrapper.core.config import OutputMode, RunConfig, use_color
from wrapper.core.events import Event
from wrapper.core.limits import TICK_SECONDS
from wrapper.files.artifacts import StreamFile
from wrapper.process.invocation import run_command
from wrapper.sinks.stream import EventStream, OutputPump

if TYPE_CHECKING:
    from wrapper.sinks.pretty import PrettyView


def resolve_output(mode: OutputMode) -> OutputMode:
    if mode is OutputMode.AUTO:
        return OutputMode.PRETTY if os.isatty(1) else OutputMode.JSONL
    return mode


@dataclasses.dataclass(frozen=True, slots=True)
class LiveOutput:
    """Where a run shows its events as they come, when it shares the
    process's stdout with other runs: ``show`` gets each event and its
    JSON line; the pump is run by the owner."""

    pump: OutputPump
    show: Callable[[Event, bytes], None]


class RunOutput:
    """A run's output: ``stream`` (every event, to ``events_log`` and the
    live output), ``pump`` (the stdout it writes to, None for ``quiet``),
    ``view`` (the live view, on a terminal of the run's own). ``own_pump``:
    the run runs its pump itself; a shared one is its owner's."""

    def __init__(
        self,
        config: RunConfig,
        environ: Mapping[str, str],
        events_log: StreamFile,
        live: LiveOutput | None,
        clock_start: float,
    ) -> None:
        self.clock_start = clock_start
        mode = self.mode = resolve_output(config.output)
        self.own_pump = live is None
        self.view: PrettyView | None = None
        self.pump: OutputPump | None
        if live is not None:
            self.pump = live.pump
            self.stream = EventStream(events_log, live.show)
            return
        self.pump = OutputPump(1) if mode in (OutputMode.JSONL, OutputMode.PRETTY) else None
        wrapper = run_command(config.wrapper_bin)
        reply = f"{wrapper} reply {shlex.quote(str(config.run_dir))}"
        if mode is OutputMode.PRETTY:
            # Loaded for a live view only: a run without one keeps it out of
            # its memory.
            from wrapper.sinks.pretty import PrettyView  # noqa: PLC0415

            self.view = PrettyView(
                color=use_color(config.color, environ, os.isatty(1)),
                label=config.label,
                reply=reply,
                wrapper=wrapper,
            )
        live_lines = self.pump.write if self.pump is not None and self.view is None else None
        self.stream = EventStream(events_log, self._live_output(), live_lines=live_lines)

    def _live_output(self) -> Callable[[Event, bytes], None] | None:
        pump, view, start = self.pump, self.view, self.clock_start
        if pump is None:
            return None
        if view is None:
            return lambda event, line: pump.write(line)
        return lambda event, line: pump.write(
            view.render(event, trio.current_time() - start).encode(errors="replace")
        )

    async def tick_view(self) -> None:
        """Keeps a long tool's elapsed time moving in the live view (terminals only)."""
        view, pump = self.view, self.pump
        if view is None or pump is None:
            return
        while True:
            await trio.sleep(TICK_SECONDS)
            pump.write(view.ticker(trio.current_time() - self.clock_start).encode(errors="replace"))
