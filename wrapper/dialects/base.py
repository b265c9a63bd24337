"""What every dialect shares: the interface, JSON decoding, small helpers.

One module, though long: the interface and the helpers each dialect module
uses with it, read together when a dialect is written.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from wrapper.core.config import DEFAULT_GRACE, DEFAULT_SETTLE_GRACE
from wrapper.core.events import (
    JSON_INT_MAX,
    JSON_INT_MIN,
    AssistantMessage,
    Event,
    OversizedLine,
    Retry,
    StopReason,
    TextDelta,
    ToolStarted,
    UnparsedLine,
    Usage,
    WarningEvent,
)
from wrapper.core.framing import Frame, Oversized
from wrapper.core.limits import ARGUMENT_MAX_BYTES
from wrapper.core.matchers import OTHER_KIND
from wrapper.core.registry import program, program_name

if TYPE_CHECKING:
    from wrapper.dialects.two_way import InputClient

#: Linux refuses a single argv element longer than this (the terminating
#: NUL counts in ``ARGUMENT_MAX_BYTES``).
MAX_ARG_BYTES = ARGUMENT_MAX_BYTES - 1

#: An unparsed line is kept in full in stdout.log; the event carries this much.
UNPARSED_TEXT_CHARS = 2000

#: Tool argument summaries are for people skimming a log, not for replay.
SUMMARY_CHARS = 120

_TYPE_FIELD = re.compile(rb'"type"\s*:\s*"([A-Za-z0-9_.:/-]{1,64})"')

# CSI and OSC escape sequences (colours, titles, hyperlinks) that terminals
# and loggers sometimes glue in front of a JSON line.
_ESCAPES = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def strip_escapes(data: bytes) -> bytes:
    """``data`` without terminal escape sequences."""
    return _ESCAPES.sub(b"", data)


class UsageError(Exception):
    """The run cannot start as asked; the message says what to change."""


#: A tool's result handed to hooks is cut to this many characters.
TOOL_RESULT_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Launch:
    """The argv to start, and files the wrapper must write before it."""

    argv: list[str]
    files: dict[Path, str] = field(default_factory=dict)
    #: The agent's own session transcript, when the dialect knows where it is.
    transcript: Path | None = None
    #: The prompt a protocol hands over on the agent's stdin (ACP), when the
    #: argv does not carry it; for a resume, the next prompt on the session
    #: that is still alive.
    prompt: str | None = None


class CannotResume(Exception):
    """The agent's session cannot be continued; the message says why."""


def decode_object(line: bytes) -> dict[str, Any] | UnparsedLine:
    """Decode one line as a JSON object, or say why it is not one."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        cleaned = _ESCAPES.sub(b"", line).strip(b"\x00 \t\r")
        value = NOT_JSON
        if cleaned != line:
            with contextlib.suppress(orjson.JSONDecodeError):
                value = orjson.loads(cleaned)
        if value is NOT_JSON:
            value = loads_standard(cleaned)
        if value is NOT_JSON:
            reason = "blank line" if not line.strip() else "not JSON"
            return unparsed(line, reason)
    if not isinstance(value, dict):
        return unparsed(line, f"JSON {type(value).__name__}, not an object")
    return value


#: What ``loads_standard`` and ``decode_value`` return for text that is not JSON.
NOT_JSON: Any = object()


def decode_value(data: bytes) -> Any:
    """``data`` decoded as JSON the way ``decode_object`` decodes a line (the
    fast decoder, then the standard one for what only it reads), or ``NOT_JSON``."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return loads_standard(data)


# JSON that the fast decoder refuses but the standard one reads: a lone
# UTF-16 surrogate escape (``\ud800``), a number beyond a double's range
# (``1e400``), and the ``NaN``/``Infinity`` that Python's own encoder writes
# by default (an agent written in Python may well print them). Only text with
# one of these shapes is worth a second, slower decoding.
_STANDARD_ONLY = re.compile(rb"\\u[dD][89a-fA-F]|[eE][+]?[0-9]{3}|[0-9]{309}|NaN|Infinity")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _decode_int(text: str) -> int | float:
    # As the fast decoder does: an integer beyond 64 bits becomes a float, so
    # that every integer the dialects see can be written back out. A float is
    # also what spares Python's limit on converting long digit strings.
    value = int(text) if len(text) <= _INT_DIGITS else JSON_INT_MAX + 1
    return value if JSON_INT_MIN <= value <= JSON_INT_MAX else float(text)


#: Digits of the longest integer that can be within the 64-bit range (a sign
#: included): longer digit strings are out of range without converting them.
_INT_DIGITS = 21


_STANDARD_DECODER = json.JSONDecoder(parse_int=_decode_int)


def loads_standard(data: bytes) -> Any:
    """``data`` decoded by the standard library's JSON parser, for the few
    JSON texts the fast decoder refuses (call it once that one failed), or
    ``NOT_JSON``. Lone surrogates in strings become U+FFFD, so that whatever
    the wrapper writes from them can be encoded."""
    if _STANDARD_ONLY.search(data) is None:
        return NOT_JSON
    try:
        value = _STANDARD_DECODER.decode(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return NOT_JSON
    return _replace_surrogates(value) if _SURROGATE_ESCAPE.search(data) else value


def _fix(text: str) -> str:
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def _replace_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys included)
    replaced by U+FFFD; containers are changed in place, without recursion
    (the parser allows nesting deeper than Python's stack would)."""
    if isinstance(value, str):
        return _fix(value)
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            for index, item in enumerate(node):
                if isinstance(item, str):
                    node[index] = _fix(item)
                elif isinstance(item, list | dict):
                    stack.append(item)
        elif isinstance(node, dict):
            items = list(node.items())
            node.clear()
            for key, item in items:
                if isinstance(item, list | dict):
                    stack.append(item)
                node[_fix(key)] = _fix(item) if isinstance(item, str) else item
    return value


def merge_deltas(events: list[Event]) -> list[Event]:
    """Runs of consecutive text deltas merged into one delta each."""
    merged: list[Event] = []
    run: list[TextDelta] = []
    for event in [*events, None]:
        if type(event) is TextDelta:
            run.append(event)
            continue
        if len(run) == 1:
            merged.append(run[0])
        elif run:
            text = "".join(delta.text for delta in run)
            merged.append(TextDelta(text=text, coalesced=sum(d.coalesced for d in run)))
        run = []
        if event is not None:
            merged.append(event)
    return merged


def sniff_type(head: bytes) -> str | None:
    """The ``type`` of a JSON event, read from the first bytes of its line."""
    match = _TYPE_FIELD.search(head)
    return match.group(1).decode() if match else None


def unparsed(line: bytes, reason: str) -> UnparsedLine:
    text = line[: UNPARSED_TEXT_CHARS * 4].decode("utf-8", "replace")[:UNPARSED_TEXT_CHARS]
    return UnparsedLine(text=text, reason=reason)


_SUMMARY_KEYS = ("command", "cmd", "file_path", "path", "pattern", "url", "query", "prompt")


def summarize_args(args: Any) -> str | None:
    """The one argument a person wants to see for a tool call."""
    if isinstance(args, str):
        return _clip(args)
    if not isinstance(args, Mapping):
        return None
    for key in _SUMMARY_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return _clip(value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return _clip(" ".join(value))
    for value in args.values():
        if isinstance(value, str) and value:
            return _clip(value)
    return None


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def tool_result_text(value: Any) -> str | None:
    """A tool's result as text for people and hooks: text parts joined, binary
    content (images, base64 data) replaced by a note, cut to ``TOOL_RESULT_CHARS``."""
    text = _result_text(value)
    if text is None:
        return None
    if len(text) > TOOL_RESULT_CHARS:
        text = text[:TOOL_RESULT_CHARS] + f"… [{len(text) - TOOL_RESULT_CHARS} more characters]"
    return text


def _result_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return "[binary content omitted]" if "\x00" in value else value
    if isinstance(value, list):
        parts = [part for part in map(_result_text, value) if part]
        return "\n".join(parts) if parts else None
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind in ("image", "image_url", "audio", "file", "blob") or "data" in value:
            mime = value.get("mimeType") or value.get("mime_type") or kind or "binary"
            return f"[{mime} content omitted]"
        for key in ("text", "content", "output", "result"):
            if key in value:
                return _result_text(value[key])
        return None
    return str(value)


def tool_started(tool: str, call_id: str | None, args: Any) -> ToolStarted:
    """A tool call's start, with the summary of its arguments."""
    return ToolStarted(tool=tool, tool_call_id=call_id, summary=summarize_args(args), args=args)


def retry_started(obj: Mapping[str, Any], keys: tuple[str, str, str], message: str | None) -> Retry:
    """The start of a retry, its attempt, most attempts and delay (ms) read
    from ``obj`` under ``keys`` (in that order)."""
    attempt, most, delay = keys
    return Retry(
        phase="start",
        retry_attempt=as_int(obj.get(attempt)),
        max_attempts=as_int(obj.get(most)),
        delay_ms=as_int(obj.get(delay)),
        message=message,
    )


@dataclass(frozen=True, slots=True)
class UsageKeys:
    """The keys under which an agent reports each token count (None: it does not)."""

    input: str | None
    output: str | None
    cache_read: str | None = None
    cache_write: str | None = None
    total: str | None = None


def counts(raw: Mapping[str, Any], keys: UsageKeys, cost: float | None = None) -> Usage:
    """Token counts read from ``raw`` under the keys an agent spells them with."""
    return Usage(
        input=_count(raw, keys.input),
        output=_count(raw, keys.output),
        cache_read=_count(raw, keys.cache_read),
        cache_write=_count(raw, keys.cache_write),
        total_tokens=_count(raw, keys.total),
        cost_usd=cost,
    )


def _count(raw: Mapping[str, Any], key: str | None) -> int | None:
    return None if key is None else as_count(raw.get(key))


def split_input(
    raw: Mapping[str, Any], input_key: str, cached_key: str
) -> tuple[int | None, int | None]:
    """(uncached, cached) input tokens, for an agent whose input count
    (under ``input_key``) includes the cached tokens (under ``cached_key``)."""
    given = as_count(raw.get(input_key))
    cached = as_count(raw.get(cached_key))
    return (given - cached if given is not None and cached is not None else given), cached


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_float(value: Any) -> float | None:
    if type(value) is float:
        return value
    if type(value) is not int:
        return None
    try:
        return float(value)
    except OverflowError:  # too large for a double: Usage reports it as unrepresentable
        return math.inf if value > 0 else -math.inf


def as_count(value: Any) -> int | None:
    """A token count. A JSON integer beyond 64 bits reaches the dialects as a
    float (see ``_decode_int``); it comes back as an integer outside that
    range, so that ``Usage`` reports it as unrepresentable rather than losing
    it silently. Any other non-integer is no count."""
    if type(value) is int:
        return value
    if type(value) is float and not JSON_INT_MIN <= value <= JSON_INT_MAX:
        return int(value) if math.isfinite(value) else JSON_INT_MAX + 1
    return None


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


#: Events that say a line was not understood: a stream made only of these
#: was not the output the dialect reads.
NOT_RECOGNISED: tuple[type[Event], ...] = (UnparsedLine, OversizedLine, WarningEvent)


def recognised_any(events: Sequence[Event]) -> bool:
    """Whether ``events`` hold one the dialect made of a line it understood."""
    return any(not isinstance(event, NOT_RECOGNISED) for event in events)


def unrecognised_output(dialect: Dialect, lines: int, *, whose: str = "its output") -> str:
    """Why a stream of ``lines`` lines in which ``dialect`` recognised none is
    likely so, for a person: the wrong dialect, or the agent not in its JSON
    streaming mode (with the command line that turns it on, when known)."""
    if lines == 0:
        return f"{whose} was empty (no line at all)"
    counted = (
        f"the one line of {whose} was not"
        if lines == 1
        else f"none of the {lines} lines of {whose} was"
    )
    if not dialect.streaming_command:
        return (
            f"{counted} recognised as any known agent's event: pass --dialect, "
            "and make sure the agent's JSON streaming mode is on"
        )
    return (
        f"{counted} recognised as a {dialect.name} event: either the agent is not "
        f"{dialect.name} (choose the dialect with --dialect), or its JSON streaming mode "
        f"is not on (the {dialect.name} dialect reads the output of "
        f"`{dialect.streaming_command}`)"
    )


#: A dialect's method that normalizes one decoded event of a given type.
Handler = Callable[[Any, dict[str, Any]], list[Event]]


class Dialect:
    """One agent CLI's format. An instance is used for one run and may keep state.

    Subclasses set ``name``, ``stop_reasons``, ``streaming_command`` and
    ``handlers`` (one method per raw event type, which ``parse`` calls), and
    implement ``recognises`` and ``launch`` (``CommandLineDialect`` in
    ``_shared`` declares the argv instead); the program names an agent goes
    by are in its ``wrapper.core.registry`` entry. State kept across lines is set
    in ``_reset``, which ``on_exit`` calls after asking ``exit_final`` what
    the exit implies.
    """

    name: ClassVar[str] = ""
    #: Raw stop reason -> canonical one. Unlisted values are kept as they are.
    stop_reasons: ClassVar[Mapping[str, StopReason]] = {}
    #: Defaults of ``--grace`` and ``--settle-grace`` for this agent: long
    #: enough to cover the time the real CLI takes to exit by itself after its
    #: final message (measured by the conformance tier), so that an agent
    #: shutting down normally is never signalled.
    default_grace: ClassVar[float] = DEFAULT_GRACE
    default_settle_grace: ClassVar[float] = DEFAULT_SETTLE_GRACE
    #: Programs that write this dialect's stream but take their own time to
    #: exit after its end: program name -> (grace, settle grace).
    graces_by_program: ClassVar[Mapping[str, tuple[float, float]]] = {}

    @classmethod
    def graces(cls, command: Sequence[str]) -> tuple[float, float]:
        """(grace, settle grace) by default for the program ``command`` runs."""
        return cls.graces_by_program.get(
            program_name(command) or "", (cls.default_grace, cls.default_settle_grace)
        )

    #: Whether a run must have a task (an agent driven over a protocol
    #: waits for its prompt; without one it would sit silent).
    needs_task: ClassVar[bool] = False

    #: Raw event ``type`` -> the method that normalizes such an event.
    handlers: ClassVar[Mapping[str, Handler]] = {}
    #: How the agent is run in the JSON streaming mode this dialect reads (told
    #: to a user whose agent's output had no line the dialect recognised).
    streaming_command: ClassVar[str] = ""
    #: Whether the agent is driven over a protocol the dialect holds itself
    #: (ACP, ``AcpDialect.hold_session``); see also ``input_client``.
    two_way: ClassVar[bool] = False
    #: How the agent's own command line sets its permission mode, which hook
    #: input carries as ``permission_mode`` in Claude Code's names: options
    #: whose value is the mode, and flags that each stand for one mode.
    permission_mode_options: ClassVar[tuple[str, ...]] = ()
    permission_mode_flags: ClassVar[Mapping[str, str]] = {}
    #: The agent's own option that names a file with its hooks (Claude Code's
    #: ``--settings``, pi's ``--extension``), for the programs that take it:
    #: the wrapper hands the user's PreToolUse handlers to the agent through it.
    native_hooks_option: ClassVar[str | None] = None
    native_hooks_programs: ClassVar[frozenset[str]] = frozenset()
    #: What that option names: a ``settings`` file (Claude Code's format,
    #: merged with the user's) or an ``extension`` (pi's, added to the user's);
    #: or, for an agent that takes its hooks otherwise, a ``plugin`` (opencode's,
    #: named in its configuration from the environment) or ``config`` (Codex's
    #: ``-c`` overrides, in ``native_hook_args``).
    native_hooks_kind: ClassVar[str] = "settings"
    #: How often the agent reports its usage (what a cost cap is checked
    #: on): ``message`` (each assistant message), ``turn`` (once a prompt's
    #: turn is over), or None when it is not known to report any.
    usage_granularity: ClassVar[str | None] = "turn"
    #: The agent's own options that name its model (``-m NAME``), read for
    #: pricing when its stream does not name the model.
    model_options: ClassVar[tuple[str, ...]] = ("--model",)

    #: What each of the agent's tools does (a kind of ``TOOL_KINDS``), for
    #: hook matchers that name a kind (``@execute``); one not listed is ``other``.
    tool_kinds: ClassVar[Mapping[str, str]] = {}

    def tool_kind(self, tool: str) -> str:
        """What the agent's tool ``tool`` does, as a matcher names it."""
        return self.tool_kinds.get(tool, OTHER_KIND)

    #: The file given to the agent with ``native_hooks_option`` (its path and
    #: text, written with every launch), once the run has one.
    native_hooks: tuple[Path, str] | None = None
    #: The words that give the agent the run's hooks on its command line,
    #: for a ``config`` kind, once the run has them.
    native_hook_args: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._reset()

    def input_client(self, command: Sequence[str], cwd: str | None = None) -> InputClient | None:
        """The client of the two-way mode ``command`` starts the agent in, when
        it takes JSON messages on its stdin (the launch then carries the task
        as its ``prompt``); None for an agent that is only read. ``cwd`` is
        the agent's working directory, for a protocol that names it."""
        return None

    def takes_native_hooks(self, command: Sequence[str]) -> bool:
        """Whether the program ``command`` runs takes hooks through
        ``native_hooks_option``."""
        found = program(command)
        return bool(self.native_hooks_option and found and found[0] in self.native_hooks_programs)

    def native_hook_words(self) -> tuple[list[str], dict[Path, str]]:
        """The option that gives the agent the run's hooks, and the file to write."""
        if self.native_hooks is None or self.native_hooks_option is None:
            return [], {}
        path, text = self.native_hooks
        return [self.native_hooks_option, str(path)], {path: text}

    def user_native_settings(self, command: Sequence[str]) -> tuple[int, int, str] | None:
        """Where ``command`` already gives ``native_hooks_option``: the slice
        of its words (start, end) and the value; None if it does not."""
        option = self.native_hooks_option
        if option is None:
            return None
        found = None
        for i, word in enumerate(command):
            if word == "--":
                break
            if word == option and i + 1 < len(command):
                found = (i, i + 2, command[i + 1])
            elif word.startswith(option + "="):
                found = (i, i + 1, word[len(option) + 1 :])
        return found

    def _reset(self) -> None:
        """Forget what belongs to one process (a resumed attempt starts afresh)."""

    def parse(self, line: bytes) -> list[Event]:
        """Normalize one raw line: decode it and hand it to the handler of its
        ``type`` (unknown types add nothing). Never raises on bad input."""
        obj = decode_object(line)
        if not isinstance(obj, dict):
            return [obj]
        kind = obj.get("type")
        handler = self.handlers.get(kind) if isinstance(kind, str) else None
        return handler(self, obj) if handler is not None else []

    def parse_frames(self, frames: Sequence[Frame], *, coalesce: bool) -> list[Event]:
        """Normalize the lines of one chunk. With ``coalesce``, consecutive
        text deltas become one (nobody watches them one by one); a dialect
        may do this faster than line by line."""
        events: list[Event] = []
        for frame in frames:
            events += self.parse(frame) if isinstance(frame, bytes) else self.oversized(frame)
        return merge_deltas(events) if coalesce else events

    def parse_region(self, region: bytes, *, coalesce: bool) -> list[Event]:
        """``parse_frames`` for complete lines handed over unsplit (see
        ``LineFramer.feed_region``)."""
        return self.parse_frames(region.split(b"\n"), coalesce=coalesce)

    def delta_texts(self, region: bytes) -> list[str] | None:
        """When the lines of ``region`` (as for ``parse_region``) are all
        delta lines, the texts ``parse_region`` would give one by one as
        text deltas (the same state kept), without making them events;
        None when they are not, or the dialect cannot tell cheaply."""
        return None

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        """Whether a decoded event plainly comes from this agent."""
        raise NotImplementedError

    def launch(
        self, command: Sequence[str], task: str | None, run_dir: Path, *, resumable: bool = False
    ) -> Launch:
        """The argv that starts ``command`` with ``task``.

        With ``resumable`` the run may later be continued by ``resume``; a
        dialect whose agent keeps its session only where asked (pi) arranges
        one here. Raises ``UsageError`` when the task cannot be given to this
        agent.
        """
        raise NotImplementedError

    def resume(
        self, command: Sequence[str], prompt: str, run_dir: Path, session_id: str | None
    ) -> Launch:
        """The argv that continues the run's session with ``prompt`` as the next message.

        ``session_id`` is the id the stream reported, if any. Raises
        ``CannotResume`` when the session cannot be continued.
        """
        raise CannotResume(f"the {self.name or 'unknown'} dialect cannot resume a session")

    def oversized(self, frame: Oversized) -> list[Event]:
        """A line too long to parse: reported with its event type, plus what a
        dialect can still tell from its first and last bytes (an end-of-run
        event carrying a whole conversation still ends the run)."""
        return [OversizedLine(size=frame.size, event_type=sniff_type(frame.head))]

    def on_exit(self, exit_code: int | None, exit_signal: int | None) -> list[Event]:
        """Events implied by how the process ended, for agents whose exit status
        carries meaning (an abort shown only as exit 130, say). Called once,
        after the last line was parsed: the final message ``exit_final``
        implies, if any; then what belonged to this process is forgotten."""
        message = self.exit_final(exit_code)
        self._reset()
        return [message] if message is not None else []

    def tools_run_unasked(self) -> Sequence[str]:
        """The tools a two-way agent ran without asking permission (its own
        auto-approve mode): PreToolUse handlers could not decide on them."""
        return ()

    def exit_final(self, exit_code: int | None) -> AssistantMessage | None:
        """The final message an exit with ``exit_code`` implies, given what the
        stream said so far (see ``_shared.exit_message``); most dialects: none."""
        return None

    def permission_mode(self, command: Sequence[str]) -> str:
        """The permission mode the user's ``command`` runs the agent in: the
        last option or flag that says one, else ``default``."""
        mode = "default"
        words = iter(command[1:])
        for word in words:
            if word == "--":
                break
            name, equals, value = word.partition("=")
            if word in self.permission_mode_flags:
                mode = self.permission_mode_flags[word]
            elif word in self.permission_mode_options:
                mode = next(words, "") or mode
            elif equals and name in self.permission_mode_options and value:
                mode = value
        return mode

    def transcript_search(
        self, session_id: str | None, env: Mapping[str, str]
    ) -> tuple[Path, str] | None:
        """Where the agent keeps its own transcript of ``session_id`` in an
        agent environment ``env``: a directory and a glob pattern under it
        (the caller searches; a dialect does no I/O). None when it keeps none
        the wrapper can find."""
        return None
