"""Gemini CLI (``gemini --output-format stream-json``).

Checked against Gemini CLI 0.50 (the shared auth-error capture), the
``nonInteractiveCli`` stream-json test snapshot, and the non-interactive
source of the 0.2x to 0.5x line (``nonInteractiveCli.ts``, ``utils/errors.ts``).

Stream: ``init`` (session id, model), ``message`` (``role`` user or
assistant; assistant text arrives in ``delta: true`` pieces), ``tool_use``
(``tool_name``, ``tool_id``, ``parameters``), ``tool_result`` (``tool_id``,
``status``, ``output`` or ``error``), ``error`` (``severity`` ``warning`` or
``error``; never the end of the run) and finally ``result`` (``status``,
``error``, ``stats`` with token counts).

End of run: the ``result`` line, followed by an ``AgentEnded`` that says the
run is settled.

* ``status: success`` is ``stop``, unless an earlier ``error`` event said the
  session turn limit was hit (``Maximum session turns exceeded``: ``error``)
  or a token limit (``length``); the raw reason is then that message.
* ``status: error`` is ``error`` (raw ``error``, the message in
  ``error_message``, else that of the last ``error`` event before it), or
  ``aborted`` when its error type is a cancellation.
* Without a ``result`` line ``on_exit`` decides from the exit status: 130
  (cancelled; also after an error result) and 143 are ``aborted``, 53 (turn
  limit) and any other non-zero status ``error``.

``error`` events are also kept as ``AgentWarning`` (``agent_error`` or
``agent_warning``) so that they reach ``result.json``'s warnings.

The final text is the assistant's text after its last tool call; a new
``init`` (the next attempt, when a resumed run's logs are read as one)
starts it afresh. Gemini counts cached input inside ``input_tokens``; the
normalized ``input`` is the uncached part (the stats' ``input``),
``cache_read`` the cached one.

The task goes in as ``-p TASK``, a task starting with ``-`` with a leading
space so that it is not read as a flag; resuming adds ``--resume
SESSION_ID``. Gemini appends stdin to the prompt but reads no prompt file
(``@path`` includes obey ``.gitignore``, which hides the run directory), so a
task longer than one argument is a usage error.
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
    SessionStarted,
    StopReason,
    TextDelta,
    ToolEnded,
    Usage,
    canonical_stop_reason,
)
from wrapper.dialects._shared import INTERRUPTED_EXITS, CommandLineDialect, exit_message
from wrapper.dialects.base import (
    Handler,
    as_count,
    as_str,
    split_input,
    tool_result_text,
    tool_started,
)
from wrapper.dialects.deltas import JSON_STRING, PLAIN_STRING, DeltaDialect, DeltaLines

#: Gemini's exit status when the session turn limit was reached.
EXIT_TURN_LIMIT = 53

#: Lower-cased fragments of ``error`` event messages that name a limit, and
#: what the end of the run then means.
_LIMITS: tuple[tuple[str, StopReason], ...] = (
    ("session turns", StopReason.ERROR),
    ("turn limit", StopReason.ERROR),
    ("token limit", StopReason.LENGTH),
    ("context window", StopReason.LENGTH),
)


#: Gemini CLI 0.61 exits 0.2-0.7 s after its ``result`` line when it used no
#: tool, but 3-8 s after it (17-26 s seen on a loaded machine) once a shell
#: tool ran: its exit clean-up disposes of the tool services. A kill meanwhile
#: can lose the session a steer resumes, so its grace is long; a Gemini that
#: really lingers is ended all the same, only later.
GRACE = 30.0
SETTLE_GRACE = 30.0


# Assistant text arrives as ``message`` lines of one piece each, in this layout.
_DELTA_PREFIX = b'{"type":"message","timestamp":'
_DELTA_LINES = DeltaLines(
    _DELTA_PREFIX,
    head=re.escape(_DELTA_PREFIX) + PLAIN_STRING + rb',"role":"',
    kind=rb"assistant",
    tail=rb'","content":(' + JSON_STRING + rb'),"delta":true\}',
    text_kinds=frozenset({b"assistant"}),
)


class GeminiDialect(CommandLineDialect, DeltaDialect):
    name: ClassVar[str] = "gemini"
    model_options: ClassVar[tuple[str, ...]] = ("-m", "--model")
    #: What each tool does, for matchers that name a kind (``@execute``): Gemini CLI's built-in
    #: tools; a tool not listed (an MCP server's) is ``other``.
    tool_kinds: ClassVar[Mapping[str, str]] = {
        "run_shell_command": "execute",
        "read_file": "read",
        "read_many_files": "read",
        "write_file": "edit",
        "replace": "edit",
        "glob": "search",
        "search_file_content": "search",
        "grep_search": "search",
        "list_directory": "search",
        "web_fetch": "fetch",
        "google_web_search": "fetch",
    }
    default_grace: ClassVar[float] = GRACE
    default_settle_grace: ClassVar[float] = SETTLE_GRACE
    stop_reasons: ClassVar[Mapping[str, StopReason]] = {
        "success": StopReason.STOP,
        "error": StopReason.ERROR,
    }
    streaming_command: ClassVar[str] = "gemini --output-format stream-json"
    agent_name: ClassVar[str] = "Gemini CLI"
    prompt_flag: ClassVar[tuple[str, ...]] = ("-p",)
    guard_dash: ClassVar[bool] = True

    def _reset(self) -> None:
        self._model: str | None = None
        self._text = ""
        self._tools: dict[str, str] = {}
        self._limit: tuple[StopReason, str] | None = None
        self._result_stop: str | None = None
        #: The last ``error`` event's message, for a result that names none.
        self._last_error: str | None = None

    def took_texts(self, texts: list[str]) -> None:
        self._text += "".join(texts)

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        return obj.get("type") == "init" and isinstance(obj.get("session_id"), str)

    def exit_final(self, exit_code: int | None) -> AssistantMessage | None:
        if self._result_stop is not None and (
            exit_code not in INTERRUPTED_EXITS or self._result_stop != StopReason.ERROR
        ):
            return None
        detail = "the session turn limit was reached" if exit_code == EXIT_TURN_LIMIT else None
        return exit_message(exit_code, text=self._text, model=self._model, error_message=detail)

    # -- handlers ------------------------------------------------------------

    def _init(self, obj: dict[str, Any]) -> list[Event]:
        # a new session (a resumed attempt in the same log) owes nothing to
        # the text and errors of the one before
        self._reset()
        self._model = as_str(obj.get("model"))
        return [SessionStarted(session_id=as_str(obj.get("session_id")))]

    def _message(self, obj: dict[str, Any]) -> list[Event]:
        content = obj.get("content")
        if obj.get("role") != "assistant" or not isinstance(content, str) or not content:
            return []
        self._text = self._text + content if obj.get("delta") is True else content
        return [TextDelta(text=content)]

    def _tool_use(self, obj: dict[str, Any]) -> list[Event]:
        tool = as_str(obj.get("tool_name")) or "?"
        call_id = as_str(obj.get("tool_id"))
        if call_id is not None:
            self._tools[call_id] = tool
        self._text = ""
        return [tool_started(tool, call_id, obj.get("parameters"))]

    def _tool_result(self, obj: dict[str, Any]) -> list[Event]:
        call_id = as_str(obj.get("tool_id"))
        error = obj.get("error")
        output = obj.get("output")
        if output is None and isinstance(error, dict):
            output = error.get("message")
        return [
            ToolEnded(
                tool=self._tools.pop(call_id, "?") if call_id else "?",
                tool_call_id=call_id,
                is_error=obj.get("status") == "error",
                result=tool_result_text(output),
            )
        ]

    def _error(self, obj: dict[str, Any]) -> list[Event]:
        message = as_str(obj.get("message")) or "an error event without a message"
        lowered = message.lower()
        for fragment, reason in _LIMITS:
            if fragment in lowered:
                self._limit = (reason, message)
                break
        severity = "warning" if obj.get("severity") == "warning" else "error"
        if severity == "error":
            self._last_error = message
        return [AgentWarning(code=f"agent_{severity}", message=f"Gemini CLI: {message}")]

    def _result(self, obj: dict[str, Any]) -> list[Event]:
        raw = as_str(obj.get("status"))
        stop_reason = canonical_stop_reason(raw, self.stop_reasons)
        error = obj.get("error")
        error = error if isinstance(error, dict) else {}
        error_message = as_str(error.get("message"))
        if raw == "error" and error_message is None:
            error_message = self._last_error
        if raw == "success" and self._limit is not None:
            reason, raw = self._limit
            stop_reason, error_message = str(reason), raw
        elif raw == "error" and "cancel" in (as_str(error.get("type")) or "").lower():
            stop_reason = str(StopReason.ABORTED)
        self._result_stop = stop_reason
        stats = obj.get("stats")
        final = AssistantMessage(
            stop_reason=stop_reason,
            raw_stop_reason=raw,
            text=self._text,
            usage=_usage(stats),
            model=_model(stats) or self._model,
            error_message=error_message,
        )
        # text after the result belongs to another turn
        self._text = ""
        return [final, AgentEnded(will_retry=False, settled=True)]


def _usage(stats: Any) -> Usage | None:
    if not isinstance(stats, dict):
        return None
    uncached, cached = split_input(stats, "input_tokens", "cached")
    reported = as_count(stats.get("input"))
    return Usage(
        input=uncached if reported is None else reported,
        output=as_count(stats.get("output_tokens")),
        cache_read=cached,
        total_tokens=as_count(stats.get("total_tokens")),
    )


def _model(stats: Any) -> str | None:
    """The model the stats name, when they name exactly one."""
    models = stats.get("models") if isinstance(stats, dict) else None
    if isinstance(models, dict) and len(models) == 1:
        [name] = models
        return name if isinstance(name, str) else None
    return None


_HANDLERS: dict[str, Handler] = {
    "init": GeminiDialect._init,
    "message": GeminiDialect._message,
    "tool_use": GeminiDialect._tool_use,
    "tool_result": GeminiDialect._tool_result,
    "error": GeminiDialect._error,
    "result": GeminiDialect._result,
}

GeminiDialect.handlers = _HANDLERS
GeminiDialect.delta_lines = _DELTA_LINES
