"""The normalized event vocabulary shared by every dialect.

Every agent's raw stream is turned into these events. Agent events come from
the child's output; wrapper events record what the supervisor itself did. An
event knows nothing about envelopes (``seq``, ``ts``, ``attempt``): the sinks
add those when they write it.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


class StopReason(enum.StrEnum):
    """Canonical reasons an assistant turn ended."""

    #: The model finished its answer.
    STOP = "stop"
    #: The model ran out of output tokens or context.
    LENGTH = "length"
    #: The model handed off to a tool; the agent goes on working.
    TOOL_USE = "toolUse"
    #: The turn was cancelled.
    ABORTED = "aborted"
    #: The provider or the agent failed the turn.
    ERROR = "error"


#: A terminal stop means the agent has nothing more to do unless something
#: (a retry, a new turn) later proves otherwise.
TERMINAL_STOP_REASONS: frozenset[str] = frozenset(
    {StopReason.STOP, StopReason.LENGTH, StopReason.ABORTED, StopReason.ERROR}
)


#: The raw stop reason of the final message that stands for a two-way
#: session which could not go on (set-up refused, a request unanswered): the
#: agent's stderr is quoted with its error, as it often says why there.
SESSION_FAILED = "protocol error"


def canonical_stop_reason(raw: str | None, table: Mapping[str, StopReason]) -> str | None:
    """Map an agent's raw stop reason to a canonical one.

    An unknown raw value is returned unchanged: it is never guessed, and since
    it is not a canonical value it is never terminal.
    """
    if raw is None:
        return None
    canonical = table.get(raw)
    return str(canonical) if canonical is not None else raw


def is_terminal(stop_reason: str | None) -> bool:
    return stop_reason in TERMINAL_STOP_REASONS


#: The integers every JSON file the wrapper writes can carry: its encoder
#: writes 64-bit integers, signed or unsigned, and nothing wider (nor could
#: most readers take a wider one back). A figure outside this range, or a
#: cost that is not a finite number, cannot be represented.
JSON_INT_MIN = -(2**63)
JSON_INT_MAX = 2**64 - 1

_COUNTS = ("input", "output", "cache_read", "cache_write", "total_tokens")
_FIGURES = (*_COUNTS, "cost_usd")


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts and cost; ``None`` where the agent did not say.

    A figure that cannot be represented in JSON (see ``JSON_INT_MAX``) is
    ``None`` and named in ``unrepresentable``, so that whoever reports the
    usage can warn; such a figure stays unknown in every sum it enters, since
    a partial sum would be a wrong number.
    """

    input: int | None = None
    output: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    #: Fields (by their JSON names) that could not be represented; never written.
    unrepresentable: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        lost = [
            name
            for name in _COUNTS
            if (value := getattr(self, name)) is not None
            and not JSON_INT_MIN <= value <= JSON_INT_MAX
        ]
        cost = self.cost_usd
        if cost is not None and not math.isfinite(cost):
            lost.append("cost_usd")
        if lost:
            for name in lost:
                object.__setattr__(self, name, None)
            names = dict.fromkeys((*self.unrepresentable, *map(_camel, lost)))
            object.__setattr__(self, "unrepresentable", tuple(names))

    def __add__(self, other: Usage) -> Usage:
        lost = self.unrepresentable + other.unrepresentable
        return Usage(
            **{
                name: None
                if _camel(name) in lost
                else _add(getattr(self, name), getattr(other, name))
                for name in _FIGURES
            },
            unrepresentable=tuple(dict.fromkeys(lost)),
        )

    def to_json(self) -> dict[str, Any]:
        return {_camel(name): getattr(self, name) for name in _FIGURES}


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def sum_usage(usages: Iterable[Usage | None]) -> Usage | None:
    total: Usage | None = None
    for usage in usages:
        if usage is not None:
            total = usage if total is None else total + usage
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call an assistant message asked for."""

    name: str
    id: str | None = None
    summary: str | None = None


@functools.cache
def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every normalized event."""

    TYPE: ClassVar[str] = ""
    SOURCE: ClassVar[str] = "agent"

    def payload(self) -> dict[str, Any]:
        """The type-specific fields, camelCase, ready for JSON."""
        return {key: _jsonable(getattr(self, name)) for name, key in _field_names(type(self))}


#: Keys the sinks put around every event's payload. A payload key among them
#: would silently overwrite the envelope (a retry's number passing for the
#: wrapper's attempt), so an event type that declares one is refused.
ENVELOPE_KEYS: frozenset[str] = frozenset({"type", "seq", "ts", "attempt", "source", "runId"})


def envelope(event: Event, seq: int, **stamp: Any) -> dict[str, Any]:
    """An event as one JSON object: its type and number, the ``stamp`` a
    sink adds (a live run's ``ts`` and ``attempt``; ``normalize`` adds none),
    its source, then its payload. The one encoding of an event."""
    line: dict[str, Any] = {"type": event.TYPE, "seq": seq}
    line.update(stamp)
    line["source"] = event.SOURCE
    line.update(event.payload())
    return line


_FIELD_NAMES: dict[type, tuple[tuple[str, str], ...]] = {}


def _field_names(cls: type[Event]) -> tuple[tuple[str, str], ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = payload_keys(cls)
        _FIELD_NAMES[cls] = names
    return names


def payload_keys(cls: type[Event]) -> tuple[tuple[str, str], ...]:
    """(attribute, JSON key) of each payload field of ``cls``.

    Raises ``TypeError`` when a JSON key clashes with the envelope.
    """
    names = tuple((f.name, _camel(f.name)) for f in fields(cls) if f.metadata.get("payload", True))
    clashes = sorted(key for _, key in names if key in ENVELOPE_KEYS)
    if clashes:
        raise TypeError(
            f"event type {cls.__name__} has payload field(s) {clashes} "
            "that would overwrite the event envelope"
        )
    return names


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, Usage):
        return value.to_json()
    if isinstance(value, tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, ToolCall):
        return {"name": value.name, "id": value.id, "summary": value.summary}
    return value


#: Field metadata for data an event carries for hooks but not into the logs
#: (raw tool arguments, tool output): the agent's own stream keeps it.
NOT_LOGGED: Mapping[str, Any] = {"payload": False}


# --- agent events -----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStarted(Event):
    """The agent's session began (its id, where known)."""

    TYPE: ClassVar[str] = "session"
    session_id: str | None = None
    cwd: str | None = None
    #: A session file the agent keeps, when the dialect knows it.
    path: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted(Event):
    """The agent began a turn."""

    TYPE: ClassVar[str] = "turn_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage(Event):
    """One finished assistant message, with its canonical and raw stop reason."""

    TYPE: ClassVar[str] = "assistant_message"
    stop_reason: str | None = None
    raw_stop_reason: str | None = None
    text: str = ""
    usage: Usage | None = None
    model: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    error_message: str | None = None
    #: The provider's HTTP status when the agent said its API call failed
    #: (for result.json's ``error``; the agent's own stream keeps it).
    api_status: int | None = field(default=None, metadata=NOT_LOGGED, compare=False)
    #: The usage of each message of the turn so far, where the agent reports
    #: it on progress lines but leaves the turn's own ``usage`` to its final
    #: message (Claude Code): what a cap is checked on before the turn ends,
    #: never summed into the run's usage (the final message's counts it).
    progress_usage: tuple[Usage, ...] = field(default=(), metadata=NOT_LOGGED, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(Event):
    """A piece of the assistant's text as it streams."""

    TYPE: ClassVar[str] = "text_delta"
    text: str
    #: How many of the agent's deltas this one stands for (several when the
    #: wrapper merged a chunk's deltas because nobody watches them one by one).
    coalesced: int = field(default=1, metadata=NOT_LOGGED, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted(Event):
    """The agent started running a tool."""

    TYPE: ClassVar[str] = "tool_start"
    tool: str
    tool_call_id: str | None = None
    summary: str | None = None
    #: The tool's arguments as the agent gave them (for hooks; not logged).
    args: Any = field(default=None, metadata=NOT_LOGGED, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolEnded(Event):
    """A tool the agent ran ended."""

    TYPE: ClassVar[str] = "tool_end"
    tool: str
    tool_call_id: str | None = None
    summary: str | None = None
    is_error: bool = False
    #: The tool's output as text, cut and cleaned (for hooks; not logged).
    result: str | None = field(default=None, metadata=NOT_LOGGED, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry(Event):
    """The agent retries after a failure (``phase`` ``start``) or gave up (``end``)."""

    TYPE: ClassVar[str] = "retry"
    phase: str = "start"
    #: The agent's own retry number (``retryAttempt``), not the wrapper's attempt.
    retry_attempt: int | None = None
    max_attempts: int | None = None
    delay_ms: int | None = None
    message: str | None = None
    success: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction(Event):
    """The agent compacts its context (a phase of it)."""

    TYPE: ClassVar[str] = "compaction"
    phase: str = "start"
    reason: str | None = None
    #: The summary the compaction made, as the stream carries it, cut (an
    #: ``end`` phase's, for hooks; not logged); None where it carries none.
    summary: str | None = field(default=None, metadata=NOT_LOGGED, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentEnded(Event):
    """The agent's own end-of-run marker.

    ``will_retry`` true means the agent is about to try again; ``settled`` true
    means the agent says it is completely done (nothing queued, no retry).
    """

    TYPE: ClassVar[str] = "agent_end"
    will_retry: bool | None = None
    settled: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class UnparsedLine(Event):
    """A line of the agent's output that is no event of its format."""

    TYPE: ClassVar[str] = "unparsed_line"
    text: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OversizedLine(Event):
    """A line of the agent's output longer than the cap, kept only in part."""

    TYPE: ClassVar[str] = "oversized_line"
    size: int
    #: The raw event type read from the line's first bytes, when there was one.
    event_type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StderrLine(Event):
    """A line the agent wrote to its stderr."""

    TYPE: ClassVar[str] = "stderr_line"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentWarning(Event):
    """An error or warning the agent reported without ending its turn (a
    reconnect, a fallback, a loop detector): recorded, never terminal."""

    TYPE: ClassVar[str] = "warning"
    code: str
    message: str


# --- wrapper events ---------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WrapperEvent(Event):
    """What the wrapper did, as opposed to what the agent said."""

    SOURCE: ClassVar[str] = "wrapper"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(WrapperEvent):
    """The run began (always its first event): where it is, so that whoever
    reads its output can follow it, steer it or abort it."""

    TYPE: ClassVar[str] = "run_started"
    #: The run directory, or None when it could not be made (nothing to steer by).
    run_dir: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Spawned(WrapperEvent):
    """The agent's process was started."""

    TYPE: ClassVar[str] = "spawned"
    pid: int
    argv: tuple[str, ...]
    dialect: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class GraceStarted(WrapperEvent):
    """The agent said it was done: it has this long to exit by itself."""

    TYPE: ClassVar[str] = "grace_started"
    seconds: float
    stop_reason: str | None
    #: True when the agent said it is completely done (a shorter settle grace).
    settled: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class GraceCancelled(WrapperEvent):
    """The agent went on after all: the grace is off."""

    TYPE: ClassVar[str] = "grace_cancelled"
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalSent(WrapperEvent):
    """The wrapper signalled the agent's processes."""

    TYPE: ClassVar[str] = "signal_sent"
    signal: str
    reason: str
    pids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Exited(WrapperEvent):
    """The agent's process ended."""

    TYPE: ClassVar[str] = "exited"
    exit_code: int | None
    exit_signal: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HookStarted(WrapperEvent):
    """A hook handler was started."""

    TYPE: ClassVar[str] = "hook_started"
    #: The hook event (``Stop``, ``PostToolUse``, ...).
    event: str
    handler: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HookDecision(WrapperEvent):
    """What a hook handler answered."""

    TYPE: ClassVar[str] = "hook_decision"
    event: str
    handler: str
    #: ``allow``, ``block`` or ``end``.
    decision: str
    reason: str | None = None
    #: Set when the handler failed and the wrapper allowed the stop anyway.
    warning: str | None = None
    exit_code: int | None = None
    duration_ms: int = 0
    #: The tool a PreToolUse decision was about, its input and call id (for
    #: the ``PermissionDenied`` handlers of a refusal, not the logs).
    tool_name: str | None = field(default=None, metadata=NOT_LOGGED, compare=False)
    tool_input: Any = field(default=None, metadata=NOT_LOGGED, compare=False)
    tool_use_id: str | None = field(default=None, metadata=NOT_LOGGED, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Steer(WrapperEvent):
    """A stop was blocked: the agent is resumed with ``reason`` as its next prompt."""

    TYPE: ClassVar[str] = "steer"
    #: The attempt that will carry the steer.
    next_attempt: int
    handler: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerRequested(WrapperEvent):
    """A steer came from outside the run (``agent-wrapper steer``)."""

    TYPE: ClassVar[str] = "steer_requested"
    id: str
    #: ``now`` or ``next-stop``.
    when: str
    text_length: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerDelivered(WrapperEvent):
    """A steer from outside reached the agent: ``how`` is ``resume`` (its
    session resumed with it) or ``live`` (written into the running session)."""

    TYPE: ClassVar[str] = "steer_delivered"
    id: str
    how: str
    #: The attempt that carries it.
    next_attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerSent(WrapperEvent):
    """A steer from outside was written into the live session's running
    turn; the agent has not acknowledged it yet (``steer_delivered`` follows
    once it does)."""

    TYPE: ClassVar[str] = "steer_sent"
    id: str
    #: The attempt (the live session's turn) it was written into.
    next_attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerRefused(WrapperEvent):
    """A steer from outside will never reach the agent; ``why`` says why."""

    TYPE: ClassVar[str] = "steer_refused"
    id: str
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalated(WrapperEvent):
    """A person was asked to decide; the run waits for an answer."""

    TYPE: ClassVar[str] = "escalated"
    id: str
    question: str | None
    notified: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationAnswered(WrapperEvent):
    """An escalated question got its answer."""

    TYPE: ClassVar[str] = "escalation_answered"
    id: str
    #: ``text``, ``continue``, ``stop`` or ``timeout``.
    answer: str
    text: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WarningEvent(WrapperEvent):
    """Something went wrong that the run goes on despite."""

    TYPE: ClassVar[str] = "warning"
    code: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultWritten(WrapperEvent):
    """result.json was written (or could not be)."""

    TYPE: ClassVar[str] = "result_written"
    path: str | None
    outcome: str
    exit_status: int
    #: result.json's ``error`` (``kind``, ``message``, ``apiStatus``), or None on success.
    error: Mapping[str, Any] | None = None
    #: What the run cost (None: unknown, never 0) and where the figure
    #: comes from, as result.json's ``cost`` says (``core.cost.run_cost``).
    cost_usd: float | None = None
    cost_source: str | None = None


def event_types() -> list[type[Event]]:
    """Every concrete event type, wrapper events included."""
    found: list[type[Event]] = []
    pending: list[type[Event]] = [Event]
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if cls.TYPE:
            found.append(cls)
    return found


# Refuse an envelope clash when the module is loaded, not when the first such
# event is written in the middle of a run.
for _cls in event_types():
    _field_names(_cls)
