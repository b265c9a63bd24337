"""Hooks fired from what the stream shows (``PostToolUse``,
``PostToolUseFailure``, ``PreCompact``): they observe and never hold the
stream back. Jobs queue without blocking the reader, run in the background
with bounded concurrency and their own time limits, and what is still
running when the run ends gets a short while to finish before it is killed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from wrapper.core.events import Compaction, Event, ToolEnded, ToolStarted, WarningEvent
from wrapper.core.hook_protocol import plain_text
from wrapper.core.limits import OBSERVER_CONCURRENCY, OBSERVER_QUEUE
from wrapper.core.settings import OBSERVED_EVENTS, Handler, Settings
from wrapper.hooks.runner import HookContext, failure_warnings, run_chain
from wrapper.hooks.stop_gate import StopGate

_Job = tuple[str, list[Handler], dict[str, Any]]


class Observers:
    def __init__(
        self,
        settings: Settings,
        ctx: HookContext,
        gate: StopGate,
    ) -> None:
        """``gate``: the run's stop gate, which gives every hook's common
        input, and whose dialect knows what each of the agent's tools does
        (for matchers that name a kind)."""
        self.settings = settings
        self.ctx = ctx
        self.common: Callable[[str], dict[str, Any]] = gate.hook_input
        self.kind_of = gate.dialect.tool_kind
        #: Whether any observer is configured at all (the run skips them otherwise).
        self.wanted = any(settings.hooks.get(event) for event in OBSERVED_EVENTS)
        self.dropped = 0
        self._send, self._receive = trio.open_memory_channel[_Job](OBSERVER_QUEUE)
        self._tool_args: dict[str, Any] = {}
        self._scope = trio.CancelScope()
        self._done = trio.Event()

    def observe(self, event: Event) -> None:
        """Called for every event of the stream (only when ``wanted``)."""
        if type(event) is ToolStarted:
            if event.tool_call_id is not None:
                self._tool_args[event.tool_call_id] = event.args
        elif type(event) is ToolEnded:
            args = self._tool_args.pop(event.tool_call_id, None) if event.tool_call_id else None
            name = "PostToolUseFailure" if event.is_error else "PostToolUse"
            extra: dict[str, Any] = {
                "tool_name": event.tool,
                "tool_input": args,
                "tool_use_id": event.tool_call_id,
            }
            result = plain_text(event.result) if event.result is not None else None
            extra["error" if event.is_error else "tool_response"] = result
            kind = self.kind_of(event.tool)
            self._queue(name, self.settings.handlers(name, event.tool, kind), extra)
        elif type(event) is Compaction and event.phase == "start":
            extra = {"trigger": "auto", "custom_instructions": None, "reason": event.reason}
            self._queue("PreCompact", self.settings.handlers("PreCompact"), extra)

    def _queue(self, name: str, handlers: list[Handler], extra: dict[str, Any]) -> None:
        if not handlers:
            return
        try:
            self._send.send_nowait((name, handlers, {**self.common(name), **extra}))
        except (trio.WouldBlock, trio.ClosedResourceError):
            self.dropped += 1

    async def run(self) -> None:
        limiter = trio.Semaphore(OBSERVER_CONCURRENCY)
        with self._scope:
            async with trio.open_nursery() as jobs:
                async for job in self._receive:
                    await limiter.acquire()
                    jobs.start_soon(self._job, job, limiter)
        self._done.set()

    async def _job(self, job: _Job, limiter: trio.Semaphore) -> None:
        try:
            name, handlers, payload = job
            results = await run_chain(handlers, name, payload, self.ctx, blocking=False)
            for warning in failure_warnings(name, handlers, results):
                self.ctx.emit(warning)
        finally:
            limiter.release()

    async def close(self) -> None:
        """No more jobs; let the running ones finish for a short while, then kill them."""
        self._send.close()
        if not self.wanted:
            return
        drain = self.settings.observer_drain
        with trio.move_on_after(drain):
            await self._done.wait()
        if not self._done.is_set():
            self._scope.cancel()
            self.ctx.emit(
                WarningEvent(
                    code="hook_observers_cut",
                    message="observer hooks were still running when the run ended; "
                    f"stopped them after {drain:g}s (observers.drainTimeout)",
                )
            )
        if self.dropped:
            self.ctx.emit(
                WarningEvent(
                    code="hook_observers_dropped",
                    message=f"{self.dropped} observer hook runs were dropped: more than "
                    f"{OBSERVER_QUEUE} were waiting",
                )
            )
