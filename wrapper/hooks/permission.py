"""Whether a live session's agent may run a tool it asks about: its
PreToolUse handlers decide (Claude Code's protocol), a person when a
handler asks for one, else the permissions setting."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from wrapper.core.config import RunConfig
from wrapper.core.events import Event, WarningEvent
from wrapper.core.hook_protocol import Decision
from wrapper.core.limits import PERMISSION_HOOK_CONCURRENCY
from wrapper.core.settings import Handler
from wrapper.hooks.native import refused_input_reason, refused_input_warning
from wrapper.hooks.runner import HookContext, run_chain
from wrapper.hooks.stop_gate import StopGate

if TYPE_CHECKING:  # the ACP client's modules load only for a run that speaks ACP
    from wrapper.dialects.acp.actions import ToolInfo


class PermissionGate:
    """Decides the permission requests of one run's live session."""

    def __init__(
        self,
        config: RunConfig,
        gate: StopGate,
        emit: Callable[[Event], None],
        hook_ctx: HookContext,
    ) -> None:
        self._config = config
        self._gate = gate
        self._emit = emit
        self._hook_ctx = hook_ctx
        #: PreToolUse chains running at once (an agent may ask in parallel).
        self._running = trio.Semaphore(PERMISSION_HOOK_CONCURRENCY)
        #: Told of each tool refused: its name, input, call id and the
        #: reason (the run's ``PermissionDenied`` observers).
        self.on_denied: Callable[[str, Any, str | None, str], None] | None = None
        #: The questions that ask a person to approve a tool (a
        #: ``Notification`` says ``permission_prompt`` for them).
        self.approvals: set[str | None] = set()

    def decided_now(self, tool: ToolInfo) -> tuple[bool, str | None] | None:
        """The decision on ``tool`` when no PreToolUse handler takes part
        (the permissions setting alone), else None: the handlers decide."""
        if self._handlers(tool):
            return None
        return self._by_setting(tool)

    def _handlers(self, tool: ToolInfo) -> list[Handler]:
        """The PreToolUse handlers whose matcher takes ``tool`` (by its name or kind)."""
        kind = self._gate.dialect.tool_kind(tool.name)
        return self._config.settings.pre_tool_use_handlers(tool.name, kind)

    def _by_setting(self, tool: ToolInfo) -> tuple[bool, str | None]:
        """The permissions setting's answer, when no handler decided. Its
        deny is told like a handler's: Claude Code fires ``PermissionDenied``
        for denials no hook made too (its auto mode's)."""
        if self._config.permissions == "deny":
            return self._denied(tool, "denied by the permissions setting (deny)")
        return True, None

    async def decide(self, tool: ToolInfo) -> tuple[bool, str | None]:
        """A live session's agent asks before running ``tool``: its PreToolUse
        handlers decide (Claude's protocol), else the permissions setting.
        Returns (allow, the reason of a refusal)."""
        handlers = self._handlers(tool)
        if handlers:
            payload = self._gate.hook_input(
                "PreToolUse",
                tool_name=tool.name,
                tool_input=tool.input,
                tool_use_id=tool.tool_call_id,
            )
            async with self._running:
                results = await run_chain(
                    handlers, "PreToolUse", payload, self._hook_ctx, blocking=True
                )
            for handler, result in zip(handlers, results, strict=False):
                if result.updated_input is not None and result.decision is Decision.ALLOW:
                    # The answer to an ACP permission request is one of its
                    # options, never a new input: running the call unchanged
                    # would run what the handler meant to replace.
                    self._emit(refused_input_warning(handler.name, tool.name, "an ACP agent"))
                    return self._denied(tool, refused_input_reason(handler.name))
                if result.decision is Decision.ALLOW and result.permission != "allow":
                    continue
                if result.decision is Decision.ALLOW:
                    return True, None
                if result.permission == "ask":
                    allowed, why = await self._ask_about(tool, handler.name, result.reason)
                    return (True, None) if allowed else self._denied(tool, why)
                return self._denied(
                    tool, result.reason or f"denied by PreToolUse handler {handler.name}"
                )
        return self._by_setting(tool)

    def _denied(self, tool: ToolInfo, why: str | None) -> tuple[bool, str | None]:
        """``tool`` is refused (by a PreToolUse handler, a person it asked,
        or the permissions setting): its ``PermissionDenied`` handlers are
        told (``on_denied``)."""
        if self.on_denied is not None:
            self.on_denied(tool.name, tool.input, tool.tool_call_id, why or "")
        return False, why

    async def _ask_about(
        self, tool: ToolInfo, handler: str, why: str | None
    ) -> tuple[bool, str | None]:
        """A PreToolUse handler asks for a person's approval of ``tool``: with
        the ``escalate`` stop policy a person is asked (``reply --continue``
        allows it; ``--stop``, a text or no answer refuses it); else it is denied."""
        if self._config.on_stop != "escalate":
            self._emit(
                WarningEvent(
                    code="permission_ask_denied",
                    message=f"PreToolUse handler {handler} asked for a person's approval of "
                    f"{tool.name!r}; it was denied (a person is asked only with "
                    "--on-stop escalate)",
                )
            )
            return False, why or f"{handler} asked for a person's approval; nobody was asked"
        what = tool.title or tool.name
        question = (
            f"The agent wants to run {tool.name}: {what}"
            + (f" ({why})" if why else "")
            + ". Allow it? (reply --continue to allow, --stop to refuse)"
        )
        self.approvals.add(question)
        try:
            record = await self._gate.ask_person(question, then="running")
        finally:
            self.approvals.discard(question)
        if record.answer == "continue":
            return True, None
        if record.answer == "text":
            return False, f"refused by a person: {record.text}"
        if record.answer == "stop":
            return False, "refused by a person"
        return False, "nobody answered the question in time"
