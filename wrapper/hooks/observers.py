"""Hooks fired from what the stream shows (``PostToolUse``,
``PostToolUseFailure``, ``PreCompact``, ``PostCompact``) and from what the
run does (``PermissionDenied`` after a PreToolUse refusal, ``Notification``
when the run waits for a person, refuses a steer or has spent most of a
cap): they observe and never hold the stream back. Jobs queue without
blocking the reader, run in the background with bounded concurrency and
their own time limits, and what is still running when the run ends gets a
short while to finish before it is killed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from wrapper.core.events import (
    Compaction,
    Escalated,
    Event,
    HookDecision,
    SteerRefused,
    ToolEnded,
    ToolStarted,
    WarningEvent,
)
from wrapper.core.hook_protocol import plain_text
from wrapper.core.limits import OBSERVER_CONCURRENCY, OBSERVER_QUEUE
from wrapper.core.settings import OBSERVED_EVENTS, Handler, Settings
from wrapper.hooks.runner import HookContext, failure_warnings, run_chain
from wrapper.hooks.stop_gate import StopGate
from wrapper.sinks.stream import EventStream

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
        #: The questions asking a person to approve a tool (``Notification``'s
        #: ``permission_prompt``), kept by the run's permission gate.
        self.approvals: set[str | None] = set()
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
        elif type(event) is Compaction and event.phase == "end":
            # Claude Code says whether a person asked for it; pi's stream
            # and Claude Code's carry the summary (cut by the dialect).
            trigger = "manual" if event.reason == "manual" else "auto"
            summary = plain_text(event.summary) if event.summary is not None else None
            extra = {"trigger": trigger, "compact_summary": summary, "reason": event.reason}
            self._queue("PostCompact", self._matching("PostCompact", trigger), extra)

    def observe_run(self, event: Event) -> None:
        """Called for the run's own events (the wrapper's as well as the
        agent's): the ones that notify a person, and the refusals of the
        PreToolUse handlers the agent ran itself."""
        if type(event) is Escalated:
            kind = "permission_prompt" if event.question in self.approvals else "idle_prompt"
            self.notify(kind, event.question or "The run waits for a person's answer.")
        elif type(event) is SteerRefused:
            self.notify("steer_refused", f"A steer was refused: {event.why}")
        elif (
            type(event) is HookDecision
            and event.event == "PreToolUse"
            and event.decision in ("block", "end")
            and event.tool_name is not None
        ):
            self.tool_denied(event.tool_name, event.tool_input, event.tool_use_id, event.reason)

    def watch(self, stream: EventStream) -> None:
        """Be told of every event ``stream`` carries (``observe_run``), after
        whoever was told before."""
        before = stream.observer

        def told(event: Event, now: float, attempt: int) -> None:
            if before is not None:
                before(event, now, attempt)
            self.observe_run(event)

        stream.observer = told

    def near_cap(self, spent: str) -> None:
        """Most of a spending cap is spent (``spent``, said)."""
        self.notify("budget_warning", f"Most of a spending cap is spent: {spent}.")

    def notify(self, kind: str, message: str) -> None:
        """``Notification``: something a person should know (``kind``: its
        ``notification_type``, which its matchers select)."""
        extra = {"message": message, "title": "agent-wrapper", "notification_type": kind}
        self._queue("Notification", self._matching("Notification", kind), extra)

    def tool_denied(
        self, tool: str, tool_input: Any, use_id: str | None, reason: str | None
    ) -> None:
        """``PermissionDenied``: ``tool`` was refused (by a PreToolUse
        handler, or over ACP by the permissions setting)."""
        extra = {
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": use_id,
            "reason": reason or "",
        }
        handlers = self._matching("PermissionDenied", tool, self.kind_of(tool))
        self._queue("PermissionDenied", handlers, extra)

    def _matching(self, name: str, value: str, kind: str | None = None) -> list[Handler]:
        """The handlers of ``name`` whose matcher takes ``value`` (a tool, of
        ``kind``; a notification's type; a compaction's trigger), as Claude
        Code's matchers select them."""
        groups = self.settings.hooks.get(name, ())
        return [h for g in groups if g.matches(value, kind) for h in g.handlers]

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
