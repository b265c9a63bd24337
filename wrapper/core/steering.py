"""Steering decisions, pure: whether a stop is allowed, or the agent is sent
back to work in its session, and the record of every steer for result.json.

At each stop: once the steer count has reached the limit, the Stop handlers
run once more, only to learn whether the gate passed (a block can no longer
steer), and the stop is allowed. Otherwise the built-in error retry goes first, then the
Stop handlers in order (the first block wins). A block becomes a steer when
the run can be resumed; when it cannot, the stop is allowed as
``cannot_steer`` and the run is not a success.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from wrapper.core.hook_protocol import RETRY_PROMPT, Decision, HandlerResult, looks_like_failure
from wrapper.core.limits import LOST_PROMPT_CHARS
from wrapper.core.timefmt import iso

#: ``extendMaxSteers`` cannot raise the limit beyond this.
MAX_STEERS_CEILING = 100
#: The handler name recorded for the built-in error retry.
RETRY_HANDLER = "retryOnError"


class AllowedBy(enum.StrEnum):
    """Why the run's final stop was allowed (``stopAllowedBy``)."""

    NO_HANDLERS = "no_handlers"
    HANDLERS = "handlers"
    MAX_STEERS = "max_steers"
    HOOK_CONTINUE_FALSE = "hook_continue_false"
    CANNOT_STEER = "cannot_steer"
    PROMPT_BLOCKED = "prompt_blocked"
    #: The agent signalled completion (``agent-wrapper signal complete``).
    SIGNAL = "signal"
    #: A person answered an escalation with ``--stop``.
    REPLY = "reply"
    IDLE_DONE = "idle_done"
    IDLE_FAIL = "idle_fail"
    ESCALATION_TIMEOUT = "escalation_timeout"
    #: A Stop handler failed and hooks fail closed: the run ends as an error.
    HOOK_FAILED = "hook_failed"


@dataclass(frozen=True, slots=True)
class SteerRecord:
    """One steer a Stop handler gave the agent."""

    #: The attempt that received the steer as its prompt.
    attempt: int
    handler: str
    reason: str
    at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "handler": self.handler,
            "reason": self.reason,
            "at": iso(self.at),
        }


@dataclass(frozen=True, slots=True)
class Block:
    """A stop was blocked by ``handler``; ``reason`` is the next prompt."""

    handler: str
    reason: str


@dataclass(slots=True)
class Steering:
    """The steers and retries of a run so far, against their limits."""

    max_steers: int
    steers: list[SteerRecord] = field(default_factory=list)
    retries_used: int = 0
    allowed_by: AllowedBy | None = None
    #: ``stopReason`` of a ``continue: false`` answer: a message for people.
    stop_message: str | None = None
    #: Why the run fails although its stop was allowed (a block that could not
    #: be carried out, no completion signal, ...), and the error kind.
    failure: str | None = None
    failure_kind: str | None = None
    #: The agent's last resume carried a steer from outside, not a block:
    #: the next stop's handlers are told ``stop_hook_active: false``.
    resumed_from_outside: bool = False

    @property
    def steer_count(self) -> int:
        return len(self.steers)

    @property
    def at_limit(self) -> bool:
        return self.steer_count >= self.max_steers

    @property
    def hook_active(self) -> bool:
        """Whether the agent works on because a Stop handler blocked its last stop."""
        return self.steer_count > 0 and not self.resumed_from_outside

    def resume_from_outside(self) -> None:
        """A steer from outside sends the agent back to work: the stop it
        ended on (if any) is no longer the run's last."""
        self.resumed_from_outside = True
        self.allowed_by = None
        self.failure = self.failure_kind = None

    def retry_on_error(self, last_text: str, max_retries: int) -> Block | None:
        """The built-in error retry's steer, if this stop deserves one."""
        if self.retries_used >= max_retries or not looks_like_failure(last_text):
            return None
        return Block(RETRY_HANDLER, RETRY_PROMPT)

    def decide(
        self, results: Sequence[HandlerResult], handler_names: Sequence[str]
    ) -> Block | None:
        """Fold the Stop handlers' answers (in order, as run) into a block or an allowed stop."""
        for result in results:
            if result.extend_max_steers is not None:
                self.max_steers = max(
                    self.max_steers, min(result.extend_max_steers, MAX_STEERS_CEILING)
                )
        for name, result in zip(handler_names, results, strict=False):
            if result.decision is Decision.END:
                self.allow(AllowedBy.HOOK_CONTINUE_FALSE)
                self.stop_message = result.reason
                return None
            if result.decision is Decision.BLOCK and result.reason is not None:
                return Block(name, result.reason)
        context = with_context(results, handler_names)
        if context is not None:
            # Claude Code's Stop ``additionalContext``: the agent goes on with
            # it, a steer like a block's reason.
            return context
        self.allow(AllowedBy.HANDLERS if results else AllowedBy.NO_HANDLERS)
        return None

    def decide_at_limit(
        self, results: Sequence[HandlerResult], handler_names: Sequence[str]
    ) -> Block | None:
        """Fold the Stop handlers' answers at the steer limit: the stop is
        allowed whatever they say; the returned block, if any, is the one that
        says the gate never passed."""
        for name, result in zip(handler_names, results, strict=False):
            if result.decision is Decision.END:
                self.allow(AllowedBy.HOOK_CONTINUE_FALSE)
                self.stop_message = result.reason
                return None
            if result.decision is Decision.BLOCK and result.reason is not None:
                self.allow(AllowedBy.MAX_STEERS)
                return Block(name, result.reason)
        self.allow(AllowedBy.HANDLERS)
        return None

    def allow(self, why: AllowedBy, failure: str | None = None, kind: str = "steer_failed") -> None:
        self.allowed_by = why
        self.failure = failure
        self.failure_kind = kind if failure is not None else None

    def record(self, block: Block, attempt: int) -> None:
        if block.handler == RETRY_HANDLER:
            self.retries_used += 1
        self.steers.append(SteerRecord(attempt, block.handler, block.reason, time.time()))
        self.resumed_from_outside = False
        self.allowed_by = None
        self.failure = self.failure_kind = None

    def to_json(self) -> dict[str, Any]:
        return {
            "stopAllowedBy": str(self.allowed_by) if self.allowed_by is not None else None,
            "hookStopMessage": self.stop_message,
            "steerCount": self.steer_count,
            "maxSteers": self.max_steers,
            "steers": [steer.to_json() for steer in self.steers],
        }


def with_context(results: Sequence[HandlerResult], handler_names: Sequence[str]) -> Block | None:
    """The first ``additionalContext`` the Stop handlers that allowed gave,
    as the steer it makes."""
    for name, result in zip(handler_names, results, strict=False):
        if result.decision is Decision.ALLOW and result.warning is None and result.context:
            return Block(name, result.context)
    return None


def prompt_not_taken(prompt: str) -> str:
    """Why a live run stopped although its stop hooks gave ``prompt``: the
    agent exited while they ran."""
    more = "…" if len(prompt) > LOST_PROMPT_CHARS else ""
    return (
        "the agent exited while the stop hooks ran, so the next prompt they "
        f"gave ({prompt[:LOST_PROMPT_CHARS] + more!r}) never reached it; an agent "
        "driven on its stdin must wait for its input to close"
    )


def fit_context(
    before: list[str], after: list[str], room: int
) -> tuple[list[str], list[str], int | None]:
    """The context to add before and after a prompt, cut to ``room`` bytes
    (the blank lines between included): what comes last goes first. The
    third value is the size it had when it was cut, else None."""
    parts = [*before, *after]
    size = sum(len(part.encode()) + 2 for part in parts)
    if size <= room:
        return before, after, None
    note = (
        f"\n[hook context cut: {size} bytes, more than the {room} a steer's prompt leaves for it]"
    )
    fitted, left = [], room - len(note.encode())
    for part in parts:
        cost = len(part.encode()) + 2
        if cost > left:
            if left > 2:
                fitted.append(part.encode()[: left - 2].decode(errors="ignore"))
            break
        fitted.append(part)
        left -= cost
    if fitted:
        fitted[-1] += note
    return fitted[: len(before)], fitted[len(before) :], size
