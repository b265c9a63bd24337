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

``codex app-server`` (JSON-RPC lines without ``"jsonrpc"``, checked against
the captures of 0.169.0 in ``tests/data/real/twoway``; its client is
``codex_app_server``) is read by the same dialect: a line with a ``method``
and no ``type`` is the app-server's. ``thread/started`` gives the session
(the thread id), ``turn/started`` is a turn's start, ``item/started`` /
``item/completed`` carry the same items in camelCase (``agentMessage``,
``commandExecution``, ``fileChange``, ``mcpToolCall``, ``dynamicToolCall``,
``webSearch``) and are read as above, ``item/agentMessage/delta`` is text
as it comes, ``thread/tokenUsage/updated`` counts each model request (the
turn's sum goes with its final message), a top-level ``error`` notification
is a ``Retry`` when it says ``willRetry``, else a warning. The end of a turn
is ``turn/completed``: its turn's ``status`` is the raw stop reason
(``completed`` → ``stop``, ``interrupted`` → ``aborted``, ``failed`` →
``error`` with the turn's error message; any other is kept, never guessed).
Answers and the app-server's own requests go to the client. The task and
every later prompt go on stdin; a resume is the next prompt on the live
process, or, in a new process, a ``turn/start`` after ``thread/resume``.

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

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
from wrapper.core.registry import program
from wrapper.dialects._shared import CommandLineDialect, exit_message
from wrapper.dialects.base import (
    Handler,
    Launch,
    UsageError,
    as_count,
    as_int,
    as_str,
    decode_object,
    split_input,
    summarize_args,
    tool_result_text,
)

if TYPE_CHECKING:
    from wrapper.dialects.codex_app_server import CodexAppServerClient

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
    model_options: ClassVar[tuple[str, ...]] = ("-m", "--model")
    #: What each tool does, for matchers that name a kind (``@execute``): Codex's items
    #: (``command_execution``, ...) and its own tool names; a tool not listed (an MCP server's) is
    #: ``other``.
    tool_kinds: ClassVar[Mapping[str, str]] = {
        "command_execution": "execute",
        # what its hooks call the shell tool (0.169.0)
        "Bash": "execute",
        "shell": "execute",
        "local_shell": "execute",
        "exec_command": "execute",
        "view_image": "read",
        "file_change": "edit",
        "apply_patch": "edit",
        "web_search": "fetch",
    }
    default_grace: ClassVar[float] = GRACE
    default_settle_grace: ClassVar[float] = SETTLE_GRACE
    stop_reasons: ClassVar[Mapping[str, StopReason]] = {
        "turn.completed": StopReason.STOP,
        "turn.failed": StopReason.ERROR,
        # ``codex app-server``: the status of ``turn/completed``'s turn.
        "completed": StopReason.STOP,
        "interrupted": StopReason.ABORTED,
        "failed": StopReason.ERROR,
    }
    streaming_command: ClassVar[str] = "codex exec --json"
    agent_name: ClassVar[str] = "Codex"
    resume_flag: ClassVar[tuple[str, ...]] = ("resume",)
    no_session_flag: ClassVar[str | None] = "--ephemeral"
    session_source: ClassVar[str] = "thread id (no thread.started line was seen)"

    #: ``codex exec`` takes the run's PreToolUse handlers as a hook given with
    #: ``-c``, trusted with ``-c`` too (``wrapper.hooks.native_agents``;
    #: checked on 0.169.0). The app-server asks the wrapper before a command.
    native_hooks_programs: ClassVar[frozenset[str]] = frozenset({"codex"})
    native_hooks_kind: ClassVar[str] = "config"

    def takes_native_hooks(self, command: Sequence[str]) -> bool:
        found = program(command)
        if found is None or found[0] not in self.native_hooks_programs:
            return False
        return "exec" in found[1] and not is_app_server(command)

    #: The client of the app-server session being read, which learns what
    #: it needs of the answers and requests among the lines.
    _client: CodexAppServerClient | None = None
    #: The thread the next app-server process continues (a resume).
    _resume_thread: str | None = None

    def _reset(self) -> None:
        self._text = ""
        self._tools: dict[str, str] = {}
        self._ended = False
        self._last_error: str | None = None
        #: The error that said the model's output was cut at its token limit.
        self._output_limit: str | None = None
        #: app-server: the agent message whose deltas are being read, and
        #: the token counts of the turn's model requests so far.
        self._message_id: str | None = None
        self._streamed: set[str] = set()
        self._turn_usage: Usage | None = None

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        if "type" not in obj and obj.get("method") in _APP_METHODS:
            return True
        return obj.get("type") in _CODEX_TYPES

    def input_client(
        self, command: Sequence[str], cwd: str | None = None
    ) -> CodexAppServerClient | None:
        if not is_app_server(command):
            return None
        # Loaded for an app-server session only: a run that reads ``codex
        # exec`` needs none of it.
        from wrapper.dialects.codex_app_server import CodexAppServerClient  # noqa: PLC0415

        self._client = CodexAppServerClient(cwd, resume=self._resume_thread)
        return self._client

    def launch(
        self, command: Sequence[str], task: str | None, run_dir: Path, *, resumable: bool = False
    ) -> Launch:
        if not is_app_server(command):
            words = [*command, *self.native_hook_args]
            return super().launch(words, task, run_dir, resumable=resumable)
        if task is None:
            raise UsageError(
                "codex app-server needs a task (--task or --task-file): it takes its prompt "
                "on its stdin and waits silently without one"
            )
        # Driven on its stdin: the task is the session's first turn.
        self._resume_thread = None
        return Launch(list(command), prompt=task)

    def resume(
        self, command: Sequence[str], prompt: str, run_dir: Path, session_id: str | None
    ) -> Launch:
        if is_app_server(command):
            # The next prompt on the live session: the same process; a new
            # one continues the thread.
            self._resume_thread = session_id
            return Launch(list(command), prompt=prompt)
        return super().resume([*command, *self.native_hook_args], prompt, run_dir, session_id)

    def parse(self, line: bytes) -> list[Event]:
        obj = decode_object(line)
        if not isinstance(obj, dict):
            return [obj]
        kind = obj.get("type")
        if kind is None and ("method" in obj or "id" in obj):
            return self._app_server(obj)
        handler = self.handlers.get(kind) if isinstance(kind, str) else None
        return handler(self, obj) if handler is not None else []

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

    # -- codex app-server ------------------------------------------------------

    def _app_server(self, obj: dict[str, Any]) -> list[Event]:
        """One JSON-RPC message of ``codex app-server``: its notifications
        are the stream; answers and requests are the client's business."""
        events = self._client.received(obj) if self._client is not None else []
        method = obj.get("method")
        if not isinstance(method, str) or "id" in obj:
            if self._client is None and isinstance(obj.get("error"), dict):
                why = as_str(obj["error"].get("message")) or "no reason given"
                events.append(AgentWarning(code="agent_error", message=f"Codex refused: {why}"))
            return events
        handler = _APP_HANDLERS.get(method)
        params = obj.get("params")
        if handler is None or not isinstance(params, dict):
            return events
        return [*events, *handler(self, params)]

    def _app_thread_started(self, params: dict[str, Any]) -> list[Event]:
        thread = params.get("thread")
        if not isinstance(thread, dict):
            return []
        return [SessionStarted(session_id=as_str(thread.get("id")), cwd=as_str(thread.get("cwd")))]

    def _app_turn_started(self, params: dict[str, Any]) -> list[Event]:
        self._turn_usage = None
        return self._turn_started(params)

    def _app_turn_completed(self, params: dict[str, Any]) -> list[Event]:
        turn = params.get("turn")
        turn = turn if isinstance(turn, dict) else {}
        status = as_str(turn.get("status"))
        error = turn.get("error")
        message = as_str(error.get("message")) if isinstance(error, dict) else None
        self._ended = True
        # A command the turn's end cut short gets no ``item/completed``
        # (0.169.0, interrupted): it ended with the turn.
        cut = [
            ToolEnded(tool=tool, tool_call_id=call_id or None, is_error=True)
            for call_id, tool in self._tools.items()
        ]
        self._tools = {}
        final = AssistantMessage(
            stop_reason=canonical_stop_reason(status, self.stop_reasons),
            raw_stop_reason=status,
            text=self._text,
            usage=self._turn_usage,
            error_message=message or (self._last_error if status == "failed" else None),
        )
        self._turn_usage = None
        return [*cut, final, AgentEnded(will_retry=False, settled=True)]

    def _app_item(self, params: dict[str, Any], state: str) -> list[Event]:
        item = params.get("item")
        if not isinstance(item, dict):
            return []
        kind = _APP_ITEMS.get(as_str(item.get("type")) or "")
        if kind is None:
            return []
        if kind == "agent_message":
            item_id = as_str(item.get("id")) or ""
            if state == "completed" and item_id in self._streamed:
                # Its text came as deltas: it is only kept as said so far.
                self._streamed.discard(item_id)
                self._text = as_str(item.get("text")) or self._text
                return []
        shaped = {
            **item,
            "type": kind,
            "aggregated_output": item.get("aggregatedOutput"),
            "exit_code": item.get("exitCode"),
        }
        if kind == "mcp_tool_call" and item.get("type") == "dynamicToolCall":
            shaped["server"] = item.get("namespace")
        return self._item({"type": f"item.{state}", "item": shaped})

    def _app_item_started(self, params: dict[str, Any]) -> list[Event]:
        return self._app_item(params, "started")

    def _app_item_completed(self, params: dict[str, Any]) -> list[Event]:
        return self._app_item(params, "completed")

    def _app_message_delta(self, params: dict[str, Any]) -> list[Event]:
        delta = as_str(params.get("delta"))
        if not delta:
            return []
        item_id = as_str(params.get("itemId")) or ""
        if item_id != self._message_id:
            self._message_id, self._text = item_id, ""
        self._streamed.add(item_id)
        self._text += delta
        return [TextDelta(text=delta)]

    def _app_token_usage(self, params: dict[str, Any]) -> list[Event]:
        counts = params.get("tokenUsage")
        last = counts.get("last") if isinstance(counts, dict) else None
        if not isinstance(last, dict):
            return []
        request = _usage(
            {
                "input_tokens": last.get("inputTokens"),
                "cached_input_tokens": last.get("cachedInputTokens"),
                "output_tokens": last.get("outputTokens"),
                "total_tokens": last.get("totalTokens"),
            }
        )
        so_far = self._turn_usage
        self._turn_usage = request if so_far is None or request is None else so_far + request
        return []

    def _app_error(self, params: dict[str, Any]) -> list[Event]:
        error = params.get("error")
        message = as_str(error.get("message")) if isinstance(error, dict) else None
        if message is None:
            return []
        if params.get("willRetry") is True:
            return [Retry(phase="start", message=message)]
        return self._error({"message": message})


def is_app_server(command: Sequence[str]) -> bool:
    """Whether ``command`` runs ``codex app-server`` (the subcommand among
    the words before ``--``, a ``-c`` value aside)."""
    words = list(command)
    words = words[: words.index("--")] if "--" in words else words
    for index, word in enumerate(words[1:], start=1):
        if word == "app-server" and words[index - 1] not in ("-c", "--config"):
            return True
    return False


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

#: ``codex app-server``'s item types, as ``codex exec --json`` names them.
_APP_ITEMS: Mapping[str, str] = {
    "agentMessage": "agent_message",
    "commandExecution": "command_execution",
    "fileChange": "file_change",
    "mcpToolCall": "mcp_tool_call",
    "dynamicToolCall": "mcp_tool_call",
    "webSearch": "web_search",
}

_APP_HANDLERS: Mapping[str, Handler] = {
    "thread/started": CodexDialect._app_thread_started,
    "turn/started": CodexDialect._app_turn_started,
    "turn/completed": CodexDialect._app_turn_completed,
    "item/started": CodexDialect._app_item_started,
    "item/completed": CodexDialect._app_item_completed,
    "item/agentMessage/delta": CodexDialect._app_message_delta,
    "thread/tokenUsage/updated": CodexDialect._app_token_usage,
    "error": CodexDialect._app_error,
}

#: Methods only the app-server sends, for recognising its stream.
_APP_METHODS = frozenset(_APP_HANDLERS) - {"error"}
