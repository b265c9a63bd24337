"""The tools of one ACP prompt turn, as the client core reports them: each
started the first time its id is seen (from a ``tool_call``, a
``tool_call_update`` or the tool of a permission request) and ended once
(``completed``, ``failed``, or refused by the wrapper). ACP names no tool:
its name is its ``kind`` (``other`` when absent), its summary the title, its
input ``rawInput``. The record is the turn's: a turn keeps at most
``MAX_TOOLS_PER_TURN`` tools, those past it are not reported (one warning)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wrapper.core.events import AgentWarning, ToolCall, ToolEnded, ToolStarted
from wrapper.core.limits import MAX_TOOLS_PER_TURN
from wrapper.dialects.acp.actions import Output, ToolInfo
from wrapper.dialects.base import as_str, summarize_args, tool_result_text

#: A tool the agent has not named a kind for.
OTHER_TOOL = "other"


@dataclass(slots=True)
class _Tool:
    """What is known so far of one tool call."""

    kind: str | None = None
    title: str | None = None
    raw_input: Any = None
    started: bool = False
    ended: bool = False

    def info(self, call_id: str) -> ToolInfo:
        raw = self.raw_input if self.raw_input is not None else {}
        return ToolInfo(call_id, self.kind or OTHER_TOOL, self.title, raw)


class TurnTools:
    """The tools of the turn under way."""

    def __init__(self) -> None:
        self._tools: dict[str, _Tool] = {}
        #: The turn's calls, in the order they started (its message's ``toolCalls``).
        self.calls: list[ToolCall] = []
        #: Tools not reported, past the bound.
        self._untracked = 0

    def clear(self) -> None:
        """The turn is over: a tool reported after it is no tool of it."""
        self._tools.clear()
        self.calls = []
        self._untracked = 0

    def info(self, call_id: str) -> ToolInfo | None:
        """What is known of a tool of the turn, or None when it has no record."""
        tool = self._tools.get(call_id)
        return None if tool is None else tool.info(call_id)

    def update(self, update: Mapping[str, Any], *, announce_end: bool) -> list[Output]:
        """A ``tool_call`` / ``tool_call_update`` (or a permission request's
        ``toolCall``, with ``announce_end`` False: its status is not the tool's)."""
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            return [AgentWarning(code="acp_malformed", message="a tool call without a toolCallId")]
        tool = self._tools.get(call_id)
        if tool is None:
            if len(self._tools) >= MAX_TOOLS_PER_TURN:
                return self._not_reported(call_id)
            tool = self._tools[call_id] = _Tool()
        tool.kind = as_str(update.get("kind")) or tool.kind
        tool.title = as_str(update.get("title")) or tool.title
        if "rawInput" in update:
            tool.raw_input = update["rawInput"]
        out: list[Output] = []
        if not tool.started:
            tool.started = True
            info = tool.info(call_id)
            summary = summarize_args(info.title) if info.title else summarize_args(info.input)
            out.append(
                ToolStarted(tool=info.name, tool_call_id=call_id, summary=summary, args=info.input)
            )
            self.calls.append(ToolCall(name=info.name, id=call_id, summary=summary))
        status = update.get("status")
        if announce_end and status in ("completed", "failed"):
            result = update.get("content")
            if not result and "rawOutput" in update:
                result = update["rawOutput"]
            out += self.end(call_id, is_error=status == "failed", result=tool_result_text(result))
        return out

    def end(self, call_id: str, *, is_error: bool, result: str | None) -> list[Output]:
        """The tool ended (once; nothing for a tool without a record)."""
        tool = self._tools.get(call_id)
        if tool is None or tool.ended:
            return []
        tool.ended = True
        info = tool.info(call_id)
        tool.raw_input = None  # an ended tool's input is not needed again
        summary = summarize_args(info.title) if info.title else None
        return [
            ToolEnded(
                tool=info.name,
                tool_call_id=call_id,
                summary=summary,
                is_error=is_error,
                result=result,
            )
        ]

    def _not_reported(self, call_id: str) -> list[Output]:
        self._untracked += 1
        if self._untracked > 1:
            return []
        return [
            AgentWarning(
                code="acp_tools_untracked",
                message=f"the agent reported more than {MAX_TOOLS_PER_TURN} tools in one "
                f"turn; those past it (from {call_id[:80]!r} on) are not reported",
            )
        ]
