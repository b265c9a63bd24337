"""opencode (``opencode run --format json``).

Checked against opencode 1.14.25 (the shared capture) and the ``run``
command's source of the 1.1x line (``packages/opencode/src/cli/cmd/run.ts``).

Every line has ``type``, ``timestamp`` and ``sessionID`` (the session id; the
first one seen becomes a ``SessionStarted``). A step is one model call:
``step_start`` (a ``TurnStarted``), ``text`` parts (complete texts, shown as
``TextDelta``), ``reasoning`` parts, ``tool_use`` (emitted once the tool has
finished, so it becomes both ``ToolStarted`` and ``ToolEnded``) and
``step_finish`` (``reason``, ``tokens``, ``cost``). A failure is an ``error``
line (``error.name``, ``error.data.message``). Newer builds end with ``done``
(``reason: idle``); 1.14 has no final event at all and simply exits.

End of run: each ``step_finish`` becomes an ``AssistantMessage`` with the
step's text and usage; its ``reason`` maps through the table below
(``stop``, ``length``, ``tool-calls`` -> ``toolUse``, ``content-filter`` and
``error`` -> ``error``), so the last step with a terminal reason is the final
message and a new ``step_start`` cancels it. An ``error`` line is a terminal
``AssistantMessage``: ``MessageAbortedError`` is ``aborted``,
``MessageOutputLengthError`` ``length``, any other error ``error`` (raw
reason: the error's name). ``done`` is an ``AgentEnded`` that says the run
is settled. When the process exits with no terminal message since the last
step began, ``on_exit`` reports exit 130/143 as ``aborted`` and any other
non-zero exit as ``error``, without the step's text (it may belong to a
message handing off to a tool that is still running).

The task is the last argument, after ``--`` (opencode reads the words after
``--`` as the message, and ``--file`` takes several values and would
swallow it otherwise); resuming adds ``--session SESSION_ID``. opencode reads
a long prompt only from stdin, which the wrapper closes, so a task longer
than one argument is a usage error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from wrapper.dialects._shared import exit_message, prompt_argument
from wrapper.dialects.base import (
    CannotResume,
    Dialect,
    Launch,
    as_count,
    as_float,
    as_str,
    decode_object,
    summarize_args,
    tool_result_text,
)
from wrapper.events import (
    AgentEnded,
    AssistantMessage,
    Event,
    SessionStarted,
    StopReason,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnStarted,
    Usage,
    canonical_stop_reason,
    is_terminal,
)

_Handler = Callable[["OpencodeDialect", dict[str, Any]], list[Event]]

#: Event types of ``run --format json``, for recognising a stream.
_OPENCODE_TYPES = frozenset(
    {"step_start", "step_finish", "text", "reasoning", "tool_use", "error", "done"}
)


#: opencode disposes of its instance after the last step and exits 0.3-1.6 s
#: after its final event on a loaded machine.
GRACE = 5.0
SETTLE_GRACE = 5.0


class OpencodeDialect(Dialect):
    name: ClassVar[str] = "opencode"
    default_grace: ClassVar[float] = GRACE
    default_settle_grace: ClassVar[float] = SETTLE_GRACE
    stop_reasons: ClassVar[Mapping[str, StopReason]] = {
        # step_finish reasons (the AI SDK's finish reasons)
        "stop": StopReason.STOP,
        "length": StopReason.LENGTH,
        "tool-calls": StopReason.TOOL_USE,
        "content-filter": StopReason.ERROR,
        "error": StopReason.ERROR,
        # error names with a meaning of their own; any other error is an error
        "MessageAbortedError": StopReason.ABORTED,
        "MessageOutputLengthError": StopReason.LENGTH,
    }

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """Forget what belongs to one process (a resumed attempt starts afresh)."""
        self._session: str | None = None
        self._text = ""
        self._ended = False

    def parse(self, line: bytes) -> list[Event]:
        obj = decode_object(line)
        if not isinstance(obj, dict):
            return [obj]
        kind = obj.get("type")
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return []
        events: list[Event] = []
        session = as_str(obj.get("sessionID"))
        if session is not None and session != self._session:
            # a new session's steps owe nothing to another's
            self._session, self._text, self._ended = session, "", False
            events.append(SessionStarted(session_id=session))
        return events + handler(self, obj)

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        return obj.get("type") in _OPENCODE_TYPES and isinstance(obj.get("sessionID"), str)

    def launch(
        self, command: Sequence[str], task: str | None, run_dir: Path, *, resumable: bool = False
    ) -> Launch:
        if task is None:
            return Launch(list(command))
        return Launch([*command, "--", prompt_argument("opencode", task)])

    def resume(
        self, command: Sequence[str], prompt: str, run_dir: Path, session_id: str | None
    ) -> Launch:
        if session_id is None:
            raise CannotResume(
                "opencode reported no session id (no line carried a sessionID), "
                "so there is no session to resume"
            )
        argument = prompt_argument("opencode", prompt)
        return Launch([*command, "--session", session_id, "--", argument])

    def on_exit(self, exit_code: int | None, exit_signal: int | None) -> list[Event]:
        # No text: opencode reports a tool only once it finished, so the step's
        # text may be that of a message handing off to a tool still running.
        message = None if self._ended else exit_message(exit_code)
        self._reset()
        return [message] if message is not None else []

    # -- handlers ------------------------------------------------------------

    def _step_start(self, obj: dict[str, Any]) -> list[Event]:
        self._text = ""
        self._ended = False
        return [TurnStarted()]

    def _text_part(self, obj: dict[str, Any]) -> list[Event]:
        part = obj.get("part")
        text = as_str(part.get("text")) if isinstance(part, dict) else None
        if not text:
            return []
        self._text += text
        return [TextDelta(text=text)]

    def _tool_use(self, obj: dict[str, Any]) -> list[Event]:
        part = obj.get("part")
        if not isinstance(part, dict):
            return []
        tool = as_str(part.get("tool")) or "?"
        call_id = as_str(part.get("callID"))
        state = part.get("state")
        state = state if isinstance(state, dict) else {}
        args = state.get("input")
        failed = state.get("status") == "error"
        output = state.get("error") if failed else state.get("output")
        return [
            ToolStarted(tool=tool, tool_call_id=call_id, summary=summarize_args(args), args=args),
            ToolEnded(
                tool=tool, tool_call_id=call_id, is_error=failed, result=tool_result_text(output)
            ),
        ]

    def _step_finish(self, obj: dict[str, Any]) -> list[Event]:
        part = obj.get("part")
        part = part if isinstance(part, dict) else {}
        raw = as_str(part.get("reason"))
        stop_reason = canonical_stop_reason(raw, self.stop_reasons)
        self._ended = is_terminal(stop_reason)
        return [
            AssistantMessage(
                stop_reason=stop_reason,
                raw_stop_reason=raw,
                text=self._text,
                usage=_usage(part.get("tokens"), as_float(part.get("cost"))),
            )
        ]

    def _error(self, obj: dict[str, Any]) -> list[Event]:
        error = obj.get("error")
        error = error if isinstance(error, dict) else {}
        name = as_str(error.get("name")) or "error"
        data = error.get("data")
        message = as_str(data.get("message")) if isinstance(data, dict) else None
        self._ended = True
        return [
            AssistantMessage(
                stop_reason=str(self.stop_reasons.get(name, StopReason.ERROR)),
                raw_stop_reason=name,
                text=self._text,
                error_message=message or as_str(error.get("message")) or name,
            )
        ]

    def _done(self, obj: dict[str, Any]) -> list[Event]:
        return [AgentEnded(will_retry=False, settled=True)]


def _usage(tokens: Any, cost: float | None) -> Usage | None:
    if not isinstance(tokens, dict):
        return None if cost is None else Usage(cost_usd=cost)
    cache = tokens.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    return Usage(
        input=as_count(tokens.get("input")),
        output=as_count(tokens.get("output")),
        cache_read=as_count(cache.get("read")),
        cache_write=as_count(cache.get("write")),
        total_tokens=as_count(tokens.get("total")),
        cost_usd=cost,
    )


_HANDLERS: dict[str, _Handler] = {
    "step_start": OpencodeDialect._step_start,
    "text": OpencodeDialect._text_part,
    "tool_use": OpencodeDialect._tool_use,
    "step_finish": OpencodeDialect._step_finish,
    "error": OpencodeDialect._error,
    "done": OpencodeDialect._done,
}
