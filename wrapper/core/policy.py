"""Stop policies, pure: what a stop means once the Stop hooks have allowed it.

* ``allow``: nothing more; the stop stands.
* ``signal``: the stop is blocked until the agent has run
  ``agent-wrapper signal complete`` in the attempt that stops; ``escalate``
  hands the run to a person, ``continue`` (or nothing) blocks again with
  instructions. At the steer limit without a signal the run fails
  (``no_completion_signal``).
* ``idle``: the stop counts as the agent going idle: ``onIdle`` says whether
  to nudge it (up to ``attempts`` times, reset when a tool ran since the last
  nudge, then escalate), call it done, fail, or escalate.
* ``escalate``: a person is asked, and answers, lets it stop, or says nothing
  until the escalation times out (the shell carries that out).

In every policy but ``allow``, a ``complete`` signal of the stopping attempt
allows the stop at once; signals of earlier attempts are stale and ignored.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from wrapper.core.outcome import ErrorKind
from wrapper.core.settings import IdleSettings
from wrapper.core.steering import AllowedBy
from wrapper.core.timefmt import iso

#: The steer handler names the policies record.
SIGNAL_HANDLER = "onStop:signal"
IDLE_HANDLER = "onIdle"
REPLY_HANDLER = "reply"


@dataclass(frozen=True, slots=True)
class Allow:
    """Let the agent stop, allowed for ``by``."""

    by: AllowedBy


@dataclass(frozen=True, slots=True)
class Nudge:
    """Steer the agent with ``reason`` (after ``cooldown`` seconds)."""

    handler: str
    reason: str
    cooldown: float = 0.0


@dataclass(frozen=True, slots=True)
class Escalate:
    """Ask people ``question`` before the agent may stop."""

    question: str | None


@dataclass(frozen=True, slots=True)
class Fail:
    """End the run as a failure, the stop allowed for ``by``."""

    by: AllowedBy
    kind: ErrorKind
    message: str


Action = Allow | Nudge | Escalate | Fail


@dataclass(slots=True, kw_only=True)
class EscalationRecord:
    """One escalated question, whom it was sent to and its answer."""

    id: str
    at: float
    question: str | None
    notified: list[str] = field(default_factory=list)
    answer: str | None = None
    text: str | None = None
    answered_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": iso(self.at),
            "question": self.question,
            "notified": self.notified,
            "answer": self.answer,
            "text": self.text,
            "answeredAt": iso(self.answered_at) if self.answered_at is not None else None,
        }


@dataclass(slots=True, kw_only=True)
class StopPolicy:
    """What a stop is answered with, and what was answered so far."""

    on_stop: str = "allow"
    idle: IdleSettings = field(default_factory=IdleSettings)
    #: The ``complete`` signal that allowed the final stop, as the agent sent it.
    completion: dict[str, Any] | None = None
    escalations: list[EscalationRecord] = field(default_factory=list)
    _nudges: int = 0
    _tool_runs_at_nudge: int = 0

    def decide(
        self,
        *,
        signals: list[dict[str, Any]],
        at_limit: bool,
        tool_runs: int,
        signal_help: str,
        last_text: str | None,
    ) -> Action | None:
        """The policy's answer to a stop the hooks allowed; None leaves it allowed."""
        if self.on_stop == "allow":
            return None
        completes = [s for s in signals if s.get("kind") == "complete"]
        if completes:
            self.completion = completes[-1]
            return Allow(AllowedBy.SIGNAL)
        latest = signals[-1] if signals else None
        if latest is not None and latest.get("kind") == "escalate":
            return Escalate(latest.get("message") or last_text)
        if self.on_stop == "escalate":
            return Escalate(last_text)
        if self.on_stop == "signal":
            if at_limit:
                return Fail(
                    AllowedBy.MAX_STEERS,
                    ErrorKind.NO_COMPLETION_SIGNAL,
                    "the steer limit was reached and the agent never signalled completion",
                )
            return Nudge(SIGNAL_HANDLER, signal_help)
        return self._idle(at_limit=at_limit, tool_runs=tool_runs, last_text=last_text)

    def _idle(self, *, at_limit: bool, tool_runs: int, last_text: str | None) -> Action:
        idle = self.idle
        if idle.action == "done":
            return Allow(AllowedBy.IDLE_DONE)
        if idle.action == "fail":
            return Fail(
                AllowedBy.IDLE_FAIL,
                ErrorKind.IDLE_FAILED,
                "the agent stopped without signalling completion (onIdle: fail)",
            )
        if idle.action == "escalate":
            return Escalate(last_text)
        if tool_runs > self._tool_runs_at_nudge:  # progress since the last nudge
            self._nudges = 0
        if idle.attempts is not None and self._nudges >= idle.attempts:
            return Escalate(last_text)
        if at_limit:
            return Allow(AllowedBy.MAX_STEERS)
        self._nudges += 1
        self._tool_runs_at_nudge = tool_runs
        return Nudge(IDLE_HANDLER, idle.message, idle.cooldown)

    def open_escalation(self, question: str | None) -> EscalationRecord:
        record = EscalationRecord(
            id=f"esc-{len(self.escalations) + 1}", at=time.time(), question=question
        )
        self.escalations.append(record)
        return record

    def to_json(self) -> dict[str, Any]:
        completion = self.completion
        return {
            "onStop": self.on_stop,
            "completionSignal": (
                {
                    "kind": completion.get("kind"),
                    "message": completion.get("message"),
                    "attempt": completion.get("attempt"),
                    "at": iso(completion["at"])
                    if isinstance(completion.get("at"), int | float)
                    else None,
                }
                if completion is not None
                else None
            ),
            "escalations": [record.to_json() for record in self.escalations],
        }
