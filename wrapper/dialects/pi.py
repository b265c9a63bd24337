"""pi (``pi --mode json -p``, and ``pi --mode rpc`` driven on its stdin).

Stream: a ``session`` header, ``agent_start``, then per turn ``turn_start``,
``message_start``/``message_update``/``message_end`` (user, assistant and
tool-result messages), ``tool_execution_start``/``_update``/``_end``,
``turn_end``; finally ``agent_end`` (``willRetry``) and ``agent_settled``.
Retries after provider errors show as ``auto_retry_start``/``_end``, a
compaction of the context as ``compaction_start``/``_end`` (``reason``:
``threshold``, ``overflow`` or ``manual``; pi 0.73, checked against its
``docs/json.md`` and ``dist/core/agent-session.js``), which older versions
called ``auto_compaction_start``/``_end``: both names are read, and either
pauses the completion grace until the compaction ends. The end's
``result.summary`` is the summary PostCompact handlers get.

The task is the last positional argument. pi reads ``@path`` arguments as
files and anything starting with ``-`` as a flag, and has no ``--``, so such
a task is given a leading space; a task too long for one argument is written
to ``<run-dir>/task.md`` and passed as ``@<path>``. When the run has
PreToolUse handlers, pi is also given ``--extension
RUN_DIR/hooks/pi-extension.mjs``, which relays each tool call to them (see
``wrapper.hooks.native``).

In RPC mode (``--mode rpc``) the task is no argument: the wrapper writes it
as a ``prompt`` command on pi's stdin and steers as ``steer`` /
``follow_up`` (``wrapper.dialects.pi_rpc``); the events are the same, less
the session header.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    Compaction,
    Event,
    Retry,
    SessionStarted,
    StopReason,
    TextDelta,
    ToolCall,
    ToolEnded,
    TurnStarted,
    Usage,
    WarningEvent,
    canonical_stop_reason,
)
from wrapper.core.framing import Oversized
from wrapper.dialects._shared import no_session
from wrapper.dialects.base import (
    MAX_ARG_BYTES,
    CannotResume,
    Handler,
    Launch,
    UsageError,
    UsageKeys,
    as_float,
    as_int,
    as_str,
    counts,
    decode_value,
    retry_started,
    sniff_type,
    summarize_args,
    tool_result_text,
    tool_started,
)
from wrapper.dialects.deltas import JSON_STRING, NATURAL, DeltaDialect, DeltaLines
from wrapper.dialects.pi_rpc import PiRpcClient, is_rpc

#: Event types that only pi emits, for recognising a stream with no header.
_PI_TYPES = frozenset(
    {"agent_start", "agent_settled", "turn_start", "message_update", "tool_execution_start"}
)


#: pi 0.73 ends its print mode with ``agent_end`` (no ``willRetry``, so the
#: ordinary grace applies) and exits 0.1-0.7 s later on a loaded machine.
GRACE = 3.0
#: ``agent_settled`` means pi has nothing left to do: a pi that still runs
#: after it is lingering and is ended at once.
SETTLE_GRACE = 0.2


class PiDialect(DeltaDialect):
    name: ClassVar[str] = "pi"
    usage_granularity: ClassVar[str | None] = "message"
    #: What each tool does, for matchers that name a kind (``@execute``): pi's built-in tools; a
    #: tool not listed (an MCP server's) is ``other``.
    tool_kinds: ClassVar[Mapping[str, str]] = {
        "bash": "execute",
        "read": "read",
        "edit": "edit",
        "write": "edit",
        "grep": "search",
        "find": "search",
        "ls": "search",
    }
    streaming_command: ClassVar[str] = "pi --mode json -p"
    #: pi runs extensions given with ``--extension`` (beside the user's own);
    #: a ``tool_call`` handler that returns ``{block: true}`` refuses the tool
    #: (checked on 0.73.1).
    native_hooks_option: ClassVar[str | None] = "--extension"
    native_hooks_programs: ClassVar[frozenset[str]] = frozenset({"pi"})
    native_hooks_kind: ClassVar[str] = "extension"
    default_grace: ClassVar[float] = GRACE
    default_settle_grace: ClassVar[float] = SETTLE_GRACE
    #: The client of the RPC session being driven, which pi's answers go to.
    _client: PiRpcClient | None = None
    stop_reasons: ClassVar[Mapping[str, StopReason]] = {
        "stop": StopReason.STOP,
        "end_turn": StopReason.STOP,
        "endTurn": StopReason.STOP,
        "length": StopReason.LENGTH,
        "toolUse": StopReason.TOOL_USE,
        "tool_use": StopReason.TOOL_USE,
        "aborted": StopReason.ABORTED,
        "error": StopReason.ERROR,
    }

    def parse(self, line: bytes) -> list[Event]:
        if line.startswith(_UPDATE_PREFIX):
            events = _update_events(line)
            if events is not None:
                return events
        return super().parse(line)

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        kind = obj.get("type")
        if kind == "session":
            return "version" in obj and "id" in obj
        return isinstance(kind, str) and kind in _PI_TYPES

    def oversized(self, frame: Oversized) -> list[Event]:
        events = super().oversized(frame)
        if sniff_type(frame.head) == "agent_end":
            # pi writes willRetry after the message list that made the line huge.
            match = _WILL_RETRY.search(frame.tail)
            will_retry = match.group(1) == b"true" if match else None
            events.append(AgentEnded(will_retry=will_retry))
        return events

    def input_client(self, command: Sequence[str], cwd: str | None = None) -> PiRpcClient | None:
        self._client = PiRpcClient() if is_rpc(command) else None
        return self._client

    def launch(
        self, command: Sequence[str], task: str | None, run_dir: Path, *, resumable: bool = False
    ) -> Launch:
        option, files = self.native_hook_words()
        if task is None and is_rpc(command):
            raise UsageError(
                "pi --mode rpc needs a task (--task or --task-file): it takes its prompt "
                "on its stdin and waits silently without one"
            )
        if task is None:
            return Launch([*command, *option], files)
        argv = [*command, *option]
        if is_rpc(command):
            # Driven on its stdin: the task is the session's first ``prompt``.
            return Launch(argv, files, prompt=task)
        transcript = _session_path(command)
        if resumable and transcript is None and "--no-session" not in command:
            transcript = run_dir / SESSION_FILE
            argv += ["--session", str(transcript)]
        launch = _with_prompt(argv, task, run_dir / "task.md", transcript)
        launch.files.update(files)
        return launch

    def resume(
        self, command: Sequence[str], prompt: str, run_dir: Path, session_id: str | None
    ) -> Launch:
        option, files = self.native_hook_words()
        argv = [*command, *option]
        if is_rpc(command):
            # The next prompt on the live session: the same process.
            return Launch(argv, files, prompt=prompt)
        if "--no-session" in command:
            raise CannotResume(no_session("--no-session", "pi"))
        transcript = _session_path(command)
        if transcript is None:
            transcript = run_dir / SESSION_FILE
            argv += ["--session", str(transcript)]
        if not transcript.is_file():
            raise CannotResume(f"pi's session file {transcript} does not exist")
        launch = _with_prompt(argv, prompt, run_dir / "prompt.md", transcript)
        launch.files.update(files)
        return launch

    # -- handlers ------------------------------------------------------------

    def _session(self, obj: dict[str, Any]) -> list[Event]:
        return [SessionStarted(session_id=as_str(obj.get("id")), cwd=as_str(obj.get("cwd")))]

    def _turn_start(self, obj: dict[str, Any]) -> list[Event]:
        return [TurnStarted()]

    def _message_update(self, obj: dict[str, Any]) -> list[Event]:
        return _delta_events(obj.get("assistantMessageEvent"))

    def _message_end(self, obj: dict[str, Any]) -> list[Event]:
        message = obj.get("message")
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return []
        return [self.assistant_message(message)]

    def assistant_message(self, message: Mapping[str, Any]) -> AssistantMessage:
        raw = as_str(message.get("stopReason"))
        texts: list[str] = []
        calls: list[ToolCall] = []
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "text" and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif kind == "toolCall" and isinstance(block.get("name"), str):
                    calls.append(
                        ToolCall(
                            name=block["name"],
                            id=as_str(block.get("id")),
                            summary=summarize_args(block.get("arguments")),
                        )
                    )
        return AssistantMessage(
            stop_reason=canonical_stop_reason(raw, self.stop_reasons),
            raw_stop_reason=raw,
            text="\n".join(texts),
            usage=_usage(message.get("usage")),
            model=as_str(message.get("model")),
            tool_calls=tuple(calls),
            error_message=as_str(message.get("errorMessage")),
        )

    def _tool_start(self, obj: dict[str, Any]) -> list[Event]:
        tool = as_str(obj.get("toolName")) or "?"
        return [tool_started(tool, as_str(obj.get("toolCallId")), obj.get("args"))]

    def _tool_end(self, obj: dict[str, Any]) -> list[Event]:
        return [
            ToolEnded(
                tool=as_str(obj.get("toolName")) or "?",
                tool_call_id=as_str(obj.get("toolCallId")),
                is_error=obj.get("isError") is True,
                result=tool_result_text(obj.get("result")),
            )
        ]

    def _retry_start(self, obj: dict[str, Any]) -> list[Event]:
        return [retry_started(obj, _RETRY_KEYS, as_str(obj.get("errorMessage")))]

    def _retry_end(self, obj: dict[str, Any]) -> list[Event]:
        success = obj.get("success")
        return [
            Retry(
                phase="end",
                retry_attempt=as_int(obj.get("attempt")),
                success=success if isinstance(success, bool) else None,
                message=as_str(obj.get("finalError")),
            )
        ]

    def _compaction_start(self, obj: dict[str, Any]) -> list[Event]:
        return [Compaction(phase="start", reason=as_str(obj.get("reason")))]

    def _compaction_end(self, obj: dict[str, Any]) -> list[Event]:
        result = obj.get("result")
        summary = result.get("summary") if isinstance(result, dict) else None
        return [
            Compaction(
                phase="end",
                reason=as_str(obj.get("reason")),
                summary=tool_result_text(summary) if isinstance(summary, str) else None,
            )
        ]

    def _agent_end(self, obj: dict[str, Any]) -> list[Event]:
        will_retry = obj.get("willRetry")
        return [AgentEnded(will_retry=will_retry if isinstance(will_retry, bool) else None)]

    def _agent_settled(self, obj: dict[str, Any]) -> list[Event]:
        return [AgentEnded(will_retry=False, settled=True)]

    def _queue_update(self, obj: dict[str, Any]) -> list[Event]:
        if self._client is not None:
            self._client.received(obj)
        return []

    def _response(self, obj: dict[str, Any]) -> list[Event]:
        # RPC mode: pi's answer to a command the wrapper wrote; one it
        # refused is said, the run going on.
        no_run = self._client is not None and self._client.received(obj)
        if obj.get("success") is not False:
            return []
        command = as_str(obj.get("command")) or "?"
        why = as_str(obj.get("error")) or "no reason given"
        message = f"pi refused {command}: {why}"
        events: list[Event] = [WarningEvent(code="agent_refused_command", message=message)]
        if no_run:
            # The prompt of the run under way: pi stays idle, the run ends here, failed.
            failed = AssistantMessage(
                stop_reason=str(StopReason.ERROR), raw_stop_reason="prompt", error_message=message
            )
            events += [failed, AgentEnded(will_retry=False)]
        return events


#: Where ``auto_retry_start`` gives its attempt, most attempts and delay.
_RETRY_KEYS = ("attempt", "maxAttempts", "delayMs")

_WILL_RETRY = re.compile(rb'"willRetry"\s*:\s*(true|false)')

#: The session file the wrapper gives pi when a run may be resumed.
SESSION_FILE = "session.jsonl"


def _session_path(command: Sequence[str]) -> Path | None:
    """The ``--session PATH`` the user's command already gives pi, if any."""
    for index, arg in enumerate(command):
        if arg == "--session" and index + 1 < len(command):
            return Path(command[index + 1])
        if arg.startswith("--session="):
            return Path(arg.partition("=")[2])
    return None


def _with_prompt(argv: list[str], prompt: str, spill: Path, transcript: Path | None) -> Launch:
    """``argv`` plus the prompt as its last argument, or as ``@spill`` when too long.

    pi reads ``@path`` arguments as files and anything starting with ``-`` as
    a flag and has no ``--``, so such a prompt gets a leading space.
    """
    argument = " " + prompt if prompt.startswith(("-", "@")) else prompt
    if len(argument.encode()) <= MAX_ARG_BYTES and "\x00" not in argument:
        return Launch([*argv, argument], transcript=transcript)
    return Launch([*argv, f"@{spill}"], {spill: prompt}, transcript)


# ``message_update`` lines are the bulk of a stream and carry the whole
# partial message so far, which grows with every token; only the small
# ``assistantMessageEvent`` at their end matters. pi writes it as the last key,
# so it is decoded on its own when the line has that shape, and the whole line
# is decoded otherwise.
#
# Reading a line by its two ends must mean what decoding all of it would: in
# JSON the last of duplicated keys counts, so a second top-level ``type`` in
# the middle makes it another event. Every path below (one line, a chunk's
# lines, a whole region) first checks ``_one_type_key``, and each reads the
# same event from the end, so a line means the same however the pipe cut it.
_UPDATE_PREFIX = b'{"type":"message_update"'
_UPDATE_KEY = b'"assistantMessageEvent":'
_TYPE = b'"type"'
_FIRST_TYPE_KEY = b'{"type":'
# A key or value spelled with an escaped printable character (``"typ\u0065"``),
# which JSON writers never produce, so such a line is simply decoded in full.
_ESCAPED_PRINTABLE = re.compile(rb"\\u00[2-7]")


def _one_type_key(data: bytes) -> bool:
    """Whether every ``type`` key in ``data`` (whole lines) is the first key of
    its object, so that a line starting with one has no other at top level.

    Inside a JSON string a quote is escaped, so the bytes ``"type"`` are always
    a whole string, a key or (harmlessly) a value: counting is enough. An
    escaped spelling of the key is not counted, hence ``_ESCAPED_PRINTABLE``.
    """
    # Each ``{"type":`` holds a ``"type"`` of its own: equal counts mean that
    # every ``"type"`` is such a first key.
    if data.count(_TYPE) != data.count(_FIRST_TYPE_KEY):
        return False
    return b"\\u00" not in data or _ESCAPED_PRINTABLE.search(data) is None


def _update_events(line: bytes) -> list[Event] | None:
    """The events of a ``message_update`` line read from its end, or None
    when only decoding all of it can tell."""
    if not _one_type_key(line):
        return None
    start = line.rfind(_UPDATE_KEY)
    if start < 0:
        return None
    tail = line[start + len(_UPDATE_KEY) :].rstrip()
    if not tail.endswith(b"}"):
        return None
    # Decoded as the whole line would be; a valid end closing the object makes
    # this the last top-level key, the one that counts.
    update = decode_value(tail[:-1])
    return _delta_events(update) if isinstance(update, dict) else None


# pi's delta events (text, thinking, ...), exactly: three keys, nothing after
# them but the line's end. The delta string is checked by decoding it.
_DELTA_EVENT_START = b'"assistantMessageEvent":{"type":"'
_DELTA_LINES = DeltaLines(
    _UPDATE_PREFIX,
    head=re.escape(_DELTA_EVENT_START),
    kind=rb"[a-z_]{1,32}",
    tail=rb'","contentIndex":' + NATURAL + rb',"delta":(' + JSON_STRING + rb")\}\}",
    text_kinds=frozenset({b"text_delta"}),
    start=_DELTA_EVENT_START,
    check=_one_type_key,
)


def _delta_events(update: Any) -> list[Event]:
    if isinstance(update, dict) and update.get("type") == "text_delta":
        delta = update.get("delta")
        if isinstance(delta, str) and delta:
            return [TextDelta(text=delta)]
    return []


_USAGE_KEYS = UsageKeys("input", "output", "cacheRead", "cacheWrite", "totalTokens")


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    cost = raw.get("cost")
    return counts(raw, _USAGE_KEYS, as_float(cost.get("total")) if isinstance(cost, dict) else None)


_HANDLERS: dict[str, Handler] = {
    "session": PiDialect._session,
    "turn_start": PiDialect._turn_start,
    "response": PiDialect._response,
    "queue_update": PiDialect._queue_update,
    "message_update": PiDialect._message_update,
    "message_end": PiDialect._message_end,
    "tool_execution_start": PiDialect._tool_start,
    "tool_execution_end": PiDialect._tool_end,
    "auto_retry_start": PiDialect._retry_start,
    "auto_retry_end": PiDialect._retry_end,
    "compaction_start": PiDialect._compaction_start,
    "compaction_end": PiDialect._compaction_end,
    # the names before pi 0.73 (a pi of that time still runs somewhere)
    "auto_compaction_start": PiDialect._compaction_start,
    "auto_compaction_end": PiDialect._compaction_end,
    "agent_end": PiDialect._agent_end,
    "agent_settled": PiDialect._agent_settled,
}

PiDialect.handlers = _HANDLERS
PiDialect.delta_lines = _DELTA_LINES
