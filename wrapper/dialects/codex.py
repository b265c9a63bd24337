"""Codex (``codex exec --json``).

Checked against Codex 0.46 (the shared capture), the ``codex exec`` JSON
events reference (codex-rs/exec ``exec_events.rs``: ``thread.started``,
``turn.started``/``completed``/``failed``, ``item.started``/``updated``/
``completed``, ``error``), and the 0.42 ``--experimental-json`` spelling
(``session.created``, items with ``item_type`` and ``assistant_message``),
which is accepted too.

One ``codex exec`` runs one turn. ``thread.started`` gives the session id.
Items are the turn's parts: ``agent_message`` (text, shown as a
``TextDelta``; the last one is the turn's final text), ``reasoning``,
``command_execution``, ``file_change``, ``mcp_tool_call`` and ``web_search``
(tools: ``ToolStarted``/``ToolEnded``), ``todo_list`` and ``error``.

End of run: ``turn.completed`` is ``stop`` (with the turn's usage),
``turn.failed`` is ``error``; each is followed by an ``AgentEnded`` that says
the run is settled. The raw stop reason is the event's type. A turn that
failed after an error saying ``Incomplete response returned, reason:
max_output_tokens`` is ``length`` (raw still ``turn.failed``) with the text
said so far. The final text is the last ``agent_message`` after the last tool
started: what was said before a tool is interim.

Errors that end nothing are never terminal: a top-level ``error`` reading
``Reconnecting... N/M`` is a ``Retry``; any other top-level ``error`` and an
``error`` item (Codex calls those non-fatal) become an ``AgentWarning``
(``agent_error``), so they reach ``result.json``'s warnings without deciding
the outcome. An interrupted turn emits no final event: ``on_exit`` reports
exit 130/143 as ``aborted``, any other non-zero exit as ``error`` (with the
last error message seen).

Codex counts cached input inside ``input_tokens``; the normalized ``input``
is the uncached part, ``cache_read`` the cached one.

The task is the last argument, after ``--`` (``--image`` takes several
values and would swallow it otherwise). Resuming follows ``codex exec
resume``: ``resume SESSION_ID`` after all of the user's flags, before ``--``
and the prompt (``codex exec --json … resume ID -- PROMPT``: the flags stay
before the subcommand, the order reported to work with Codex 0.151). A
command with ``--ephemeral`` keeps no session to resume. Codex reads a long
prompt only from stdin, which the wrapper closes, so a task longer than one
argument is a usage error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from wrapper.core.events import (
    AgentEnded,
    AgentWarning,
    AssistantMessage,
    Event,
    Retry,
    SessionStarted,
    StopReason,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnStarted,
    Usage,
    canonical_stop_reason,
)
from wrapper.dialects._shared import CommandLineDialect, exit_message
from wrapper.dialects.base import (
    Handler,
    as_count,
    as_int,
    as_str,
    split_input,
    summarize_args,
    tool_result_text,
)

#: Item types that are a tool at work.
_TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})

#: Event types only Codex emits, for recognising a stream.
_CODEX_TYPES = frozenset(
    {
        "thread.started",
        "session.created",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.completed",
    }
)

_RECONNECTING = re.compile(r"Reconnecting\.*\s*(?:(\d+)/(\d+))?")

#: How Codex says the model stopped at its output token limit (``Incomplete
#: response returned, reason: max_output_tokens``) before failing the turn.
_OUTPUT_LIMIT = re.compile(r"reason:\s*max_output_tokens")


#: Codex usually exits within 0.1 s of ``turn.completed`` but sometimes takes
#: more than 0.2 s; its shutdown must not be cut short.
GRACE = 2.0
SETTLE_GRACE = 2.0


class CodexDialect(CommandLineDialect):
    name: ClassVar[str] = "codex"
    default_grace: ClassVar[float] = GRACE
    default_settle_grace: ClassVar[float] = SETTLE_GRACE
    stop_reasons: ClassVar[Mapping[str, StopReason]] = {
        "turn.completed": StopReason.STOP,
        "turn.failed": StopReason.ERROR,
    }
    streaming_command: ClassVar[str] = "codex exec --json"
    agent_name: ClassVar[str] = "Codex"
    resume_flag: ClassVar[tuple[str, ...]] = ("resume",)
    no_session_flag: ClassVar[str | None] = "--ephemeral"
    session_source: ClassVar[str] = "thread id (no thread.started line was seen)"

    def _reset(self) -> None:
        self._text = ""
        self._tools: dict[str, str] = {}
        self._ended = False
        self._last_error: str | None = None
        #: The error that said the model's output was cut at its token limit.
        self._output_limit: str | None = None

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        return obj.get("type") in _CODEX_TYPES

    def exit_final(self, exit_code: int | None) -> AssistantMessage | None:
        if self._ended:
            return None
        return exit_message(exit_code, text=self._text, error_message=self._last_error)

    # -- handlers ------------------------------------------------------------

    def _thread_started(self, obj: dict[str, Any]) -> list[Event]:
        return [SessionStarted(session_id=as_str(obj.get("thread_id")))]

    def _session_created(self, obj: dict[str, Any]) -> list[Event]:
        return [SessionStarted(session_id=as_str(obj.get("session_id")))]

    def _turn_started(self, obj: dict[str, Any]) -> list[Event]:
        self._text = ""
        self._ended = False
        return [TurnStarted()]

    def _turn_completed(self, obj: dict[str, Any]) -> list[Event]:
        return self._final("turn.completed", usage=_usage(obj.get("usage")))

    def _turn_failed(self, obj: dict[str, Any]) -> list[Event]:
        error = obj.get("error")
        message = as_str(error.get("message")) if isinstance(error, dict) else None
        if message is not None and _OUTPUT_LIMIT.search(message):
            self._output_limit = message
        stop_reason = StopReason.LENGTH if self._output_limit is not None else None
        return self._final(
            "turn.failed",
            error_message=message or self._output_limit or self._last_error,
            stop_reason=stop_reason,
        )

    def _final(
        self,
        raw: str,
        *,
        usage: Usage | None = None,
        error_message: str | None = None,
        stop_reason: StopReason | None = None,
    ) -> list[Event]:
        self._ended = True
        self._output_limit = None
        final = AssistantMessage(
            stop_reason=str(stop_reason)
            if stop_reason is not None
            else canonical_stop_reason(raw, self.stop_reasons),
            raw_stop_reason=raw,
            text=self._text,
            usage=usage,
            error_message=error_message,
        )
        return [final, AgentEnded(will_retry=False, settled=True)]

    def _error(self, obj: dict[str, Any]) -> list[Event]:
        message = as_str(obj.get("message"))
        if message is None:
            return []
        reconnecting = _RECONNECTING.match(message)
        if reconnecting is not None:
            attempt, most = reconnecting.groups()
            return [
                Retry(
                    phase="start",
                    retry_attempt=int(attempt) if attempt else None,
                    max_attempts=int(most) if most else None,
                    message=message,
                )
            ]
        self._last_error = message
        if _OUTPUT_LIMIT.search(message):
            self._output_limit = message
        return [AgentWarning(code="agent_error", message=f"Codex reported an error: {message}")]

    def _item(self, obj: dict[str, Any]) -> list[Event]:
        item = obj.get("item")
        if not isinstance(item, dict):
            return []
        kind = item.get("type", item.get("item_type"))
        completed = obj.get("type") == "item.completed"
        if kind in ("agent_message", "assistant_message"):
            text = as_str(item.get("text"))
            if not text:
                return []
            if not completed:
                # a message still being written: the text so far, should the
                # turn be cut off before it completes
                self._text = text
                return []
            self._text = text
            return [TextDelta(text=text)]
        if kind == "error" and completed:
            message = as_str(item.get("message")) or "an error item without a message"
            if _OUTPUT_LIMIT.search(message):
                self._output_limit = message
            return [AgentWarning(code="agent_error", message=f"Codex reported an error: {message}")]
        if kind not in _TOOL_ITEMS or obj.get("type") == "item.updated":
            return []
        item_id = as_str(item.get("id")) or ""
        events: list[Event] = []
        if item_id not in self._tools:
            # what was said before a tool ran is interim, never the final text
            self._text = ""
            tool, args = _tool(kind, item)
            self._tools[item_id] = tool
            events.append(
                ToolStarted(
                    tool=tool,
                    tool_call_id=item_id or None,
                    summary=_summary(kind, item, args),
                    args=args,
                )
            )
        if completed:
            events.append(
                ToolEnded(
                    tool=self._tools.pop(item_id),
                    tool_call_id=item_id or None,
                    is_error=_failed(item),
                    result=_result(item),
                )
            )
        return events


def _tool(kind: str, item: Mapping[str, Any]) -> tuple[str, Any]:
    """The tool's name and its arguments as Codex gave them."""
    if kind == "command_execution":
        return kind, {"command": item.get("command")}
    if kind == "file_change":
        return kind, {"changes": item.get("changes")}
    if kind == "web_search":
        return kind, {"query": item.get("query")}
    server, tool = as_str(item.get("server")), as_str(item.get("tool"))
    name = f"{server}.{tool}" if server and tool else tool or kind
    return name, item.get("arguments")


def _summary(kind: str, item: Mapping[str, Any], args: Any) -> str | None:
    if kind == "file_change":
        changes = item.get("changes")
        paths = [
            change["path"]
            for change in (changes if isinstance(changes, list) else ())
            if isinstance(change, dict) and isinstance(change.get("path"), str)
        ]
        return summarize_args(" ".join(paths)) if paths else None
    return summarize_args(args)


def _failed(item: Mapping[str, Any]) -> bool:
    if item.get("status") in ("failed", "declined"):
        return True
    exit_code = as_int(item.get("exit_code"))
    return (exit_code is not None and exit_code != 0) or isinstance(item.get("error"), dict)


def _result(item: Mapping[str, Any]) -> str | None:
    error = item.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return tool_result_text(error["message"])
    for key in ("aggregated_output", "result"):
        if item.get(key) is not None:
            return tool_result_text(item[key])
    return None


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    uncached, cached = split_input(raw, "input_tokens", "cached_input_tokens")
    output = as_count(raw.get("output_tokens"))
    total = as_count(raw.get("total_tokens"))
    given = as_count(raw.get("input_tokens"))
    if total is None and given is not None and output is not None:
        total = given + output
    return Usage(
        input=uncached,
        output=output,
        cache_read=cached,
        total_tokens=total,
    )


_HANDLERS: dict[str, Handler] = {
    "thread.started": CodexDialect._thread_started,
    "session.created": CodexDialect._session_created,
    "turn.started": CodexDialect._turn_started,
    "turn.completed": CodexDialect._turn_completed,
    "turn.failed": CodexDialect._turn_failed,
    "item.started": CodexDialect._item,
    "item.updated": CodexDialect._item,
    "item.completed": CodexDialect._item,
    "error": CodexDialect._error,
}

CodexDialect.handlers = _HANDLERS
