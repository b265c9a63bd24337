"""opencode (``opencode run --format json``).

Checked against opencode 1.14.25 (the shared capture) and the ``run``
command's source of the 1.1x line (``packages/opencode/src/cli/cmd/run.ts``).

Every line has ``type``, ``timestamp`` and ``sessionID`` (the session id; the
first one seen becomes a ``SessionStarted``). A step is one model call:
``step_start`` (a ``TurnStarted``), ``text`` parts (complete texts, shown as
``TextDelta``), ``reasoning`` parts, ``tool_use`` (emitted once the tool has
finished, so it becomes both ``ToolStarted`` and ``ToolEnded``) and
``step_finish`` (``reason``, ``tokens``, ``cost``). A tool failed when its
state is ``error``, and a shell command also when it ran to ``completed``
with a non-zero ``metadata.exit`` (its exit status: opencode reports a
command that failed as a tool that worked). A failure is an ``error``
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

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    Event,
    SessionStarted,
    StopReason,
    TextDelta,
    ToolEnded,
    TurnStarted,
    Usage,
    canonical_stop_reason,
    is_terminal,
)
from wrapper.core.registry import program
from wrapper.dialects._shared import CommandLineDialect, exit_message
from wrapper.dialects.base import (
    Handler,
    Launch,
    as_count,
    as_float,
    as_int,
    as_str,
    tool_result_text,
    tool_started,
)

#: Event types of ``run --format json``, for recognising a stream.
_OPENCODE_TYPES = frozenset(
    {"step_start", "step_finish", "text", "reasoning", "tool_use", "error", "done"}
)


#: opencode disposes of its instance after the last step and exits 0.3-1.6 s
#: after its final event on a loaded machine.
GRACE = 5.0
SETTLE_GRACE = 5.0


class OpencodeDialect(CommandLineDialect):
    name: ClassVar[str] = "opencode"
    usage_granularity: ClassVar[str | None] = "message"
    model_options: ClassVar[tuple[str, ...]] = ("-m", "--model")
    #: What each tool does, for matchers that name a kind (``@execute``): opencode's built-in
    #: tools; a tool not listed (an MCP server's) is ``other``.
    tool_kinds: ClassVar[Mapping[str, str]] = {
        "bash": "execute",
        "read": "read",
        "write": "edit",
        "edit": "edit",
        "patch": "edit",
        "multiedit": "edit",
        "apply_patch": "edit",
        "glob": "search",
        "grep": "search",
        "list": "search",
        "codesearch": "search",
        "webfetch": "fetch",
        "websearch": "fetch",
    }
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
    streaming_command: ClassVar[str] = "opencode run --format json"
    agent_name: ClassVar[str] = "opencode"
    resume_flag: ClassVar[tuple[str, ...]] = ("--session",)
    session_source: ClassVar[str] = "session id (no line carried a sessionID)"

    #: ``opencode run`` takes the run's PreToolUse handlers as a plugin named
    #: in ``OPENCODE_CONFIG_CONTENT`` (``wrapper.hooks.native_agents``); its
    #: ``tool.execute.before`` hook throwing refuses the tool (checked on 1.18.33).
    native_hooks_programs: ClassVar[frozenset[str]] = frozenset({"opencode"})
    native_hooks_kind: ClassVar[str] = "plugin"

    def takes_native_hooks(self, command: Sequence[str]) -> bool:
        found = program(command)
        if found is None or found[0] not in self.native_hooks_programs:
            return False
        words = list(found[1])
        return "run" in (words[: words.index("--")] if "--" in words else words)

    def launch(
        self, command: Sequence[str], task: str | None, run_dir: Path, *, resumable: bool = False
    ) -> Launch:
        launch = super().launch(command, task, run_dir, resumable=resumable)
        launch.files.update([self.native_hooks] if self.native_hooks else [])
        return launch

    def resume(
        self, command: Sequence[str], prompt: str, run_dir: Path, session_id: str | None
    ) -> Launch:
        launch = super().resume(command, prompt, run_dir, session_id)
        launch.files.update([self.native_hooks] if self.native_hooks else [])
        return launch

    def _reset(self) -> None:
        self._session: str | None = None
        self._text = ""
        self._ended = False

    def _session_change(self, obj: dict[str, Any]) -> list[Event]:
        """A ``SessionStarted`` when ``obj`` belongs to a session not seen last."""
        session = as_str(obj.get("sessionID"))
        if session is None or session == self._session:
            return []
        # a new session's steps owe nothing to another's
        self._session, self._text, self._ended = session, "", False
        return [SessionStarted(session_id=session)]

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        return obj.get("type") in _OPENCODE_TYPES and isinstance(obj.get("sessionID"), str)

    def exit_final(self, exit_code: int | None) -> AssistantMessage | None:
        # No text: opencode reports a tool only once it finished, so the step's
        # text may be that of a message handing off to a tool still running.
        return None if self._ended else exit_message(exit_code)

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
        errored = state.get("status") == "error"
        output = state.get("error") if errored else state.get("output")
        failed = errored or _nonzero_exit(state.get("metadata"))
        return [
            tool_started(tool, call_id, args),
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


def _nonzero_exit(metadata: Any) -> bool:
    """Whether a tool's ``metadata`` gives the non-zero exit status of a command."""
    code = as_int(metadata.get("exit")) if isinstance(metadata, dict) else None
    return code is not None and code != 0


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


def _in_session(handler: Handler) -> Handler:
    """``handler``, after the ``SessionStarted`` its line's session may bring:
    every opencode line names its session."""

    def handle(dialect: OpencodeDialect, obj: dict[str, Any]) -> list[Event]:
        return dialect._session_change(obj) + handler(dialect, obj)

    return handle


OpencodeDialect.handlers = {
    kind: _in_session(handler)
    for kind, handler in {
        "step_start": OpencodeDialect._step_start,
        "text": OpencodeDialect._text_part,
        "tool_use": OpencodeDialect._tool_use,
        "step_finish": OpencodeDialect._step_finish,
        "error": OpencodeDialect._error,
        "done": OpencodeDialect._done,
    }.items()
}
