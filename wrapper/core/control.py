"""Steering a running agent from outside, pure: the requests a run's control
socket takes, the record of every external steer, and the message a steer
becomes.

A request is one JSON object on one line: ``{"op": "steer", "text": TEXT,
"when": "now" | "next-stop"}`` or ``{"op": "abort", "reason": TEXT}``. The
run answers on the same connection with receipts, one JSON object a line:
a steer is ``queued`` first (or ``refused`` at once), then ``delivered`` or
``refused``, with ``sent`` between for a steer written into a live session
whose agent has not acknowledged it yet; an abort is ``accepted`` (or
``refused``: the run is ending).

External steers are apart from the Stop hooks' steering (``steering``):
they have their own limit and their own list in result.json, and a stop
that carries one runs no Stop handlers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from wrapper.core.timefmt import iso

#: ``now``: as soon as the agent can take it; ``next-stop``: a follow-up,
#: given when the agent next stops instead of ending the run.
WHEN = ("now", "next-stop")
When = Literal["now", "next-stop"]
#: A request is one line of at most this many bytes.
REQUEST_MAX_BYTES = 1024 * 1024
#: An abort's reason is cut to this many characters.
REASON_MAX_CHARS = 1000
#: The socket's name in the run directory, and its file name elsewhere.
SOCKET_NAME = "control.sock"
#: The longest socket path the system takes (``sun_path`` is 108 bytes on
#: Linux, 104 on macOS, the terminating NUL included).
SOCKET_PATH_MAX_BYTES = 103

_SURROGATE = re.compile("[\ud800-\udfff]")


class BadRequest(ValueError):
    """A request the run cannot take; the text says why, for its sender."""


@dataclass(frozen=True, slots=True)
class SteerRequest:
    text: str
    when: When = "now"


@dataclass(frozen=True, slots=True)
class AbortRequest:
    reason: str | None = None


def parse_request(raw: bytes) -> SteerRequest | AbortRequest:
    """The request on one line, checked; raises ``BadRequest``."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise BadRequest("the request is not JSON (send one JSON object on one line)") from None
    if not isinstance(data, dict):
        raise BadRequest("the request is not a JSON object")
    op = data.get("op")
    if op == "steer":
        text, when = data.get("text"), data.get("when", "now")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest('a steer needs a non-empty "text"')
        if "\0" in text or _SURROGATE.search(text):
            raise BadRequest("the steer's text holds a NUL or is not valid Unicode text")
        if when not in WHEN:
            raise BadRequest(f'"when" is one of {", ".join(WHEN)}, not {when!r}')
        return SteerRequest(text, when)
    if op == "abort":
        reason = data.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise BadRequest('an abort\'s "reason" is a string')
        if reason is not None:
            reason = " ".join(_SURROGATE.sub("\ufffd", reason).replace("\0", " ").split())
        return AbortRequest(reason[:REASON_MAX_CHARS] if reason else None)
    raise BadRequest(f'unknown "op" {op!r} (steer or abort)')


def socket_path(run_dir: str, run_id: str, runtime_dir: str) -> str:
    """Where a run's control socket goes: in its run directory when the path
    is short enough for a socket, else ``runtime_dir/RUN_ID.sock``."""
    inside = os.path.join(run_dir, SOCKET_NAME)
    if len(os.fsencode(inside)) <= SOCKET_PATH_MAX_BYTES:
        return inside
    return os.path.join(runtime_dir, f"{run_id}.sock")


#: ``queued``: the wrapper holds it; ``sent``: written on a live agent's
#: input, not acknowledged yet; ``delivered``: the agent acknowledged it (or
#: was started or resumed with it); ``refused``: it will never reach the agent.
State = Literal["queued", "sent", "delivered", "refused"]


@dataclass(slots=True)
class ExternalSteer:
    """One steer from outside and what became of it."""

    id: str
    text: str
    when: When
    requested_at: float
    state: State = "queued"
    #: ``resume`` (the agent resumed in its session with it) or ``live``
    #: (written into the running session).
    how: str | None = None
    why: str | None = None
    #: The attempt that received it.
    attempt: int | None = None
    ended_at: float | None = None
    #: What the live session calls it while it waits for the agent's answer.
    ticket: str | None = None
    #: Why the agent refused it live: it goes again as the next prompt, and
    #: only a refusal of that too settles it ``refused``.
    refused_live: str | None = None

    def receipt(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "when": self.when,
            "how": self.how,
            "why": self.why,
            "attempt": self.attempt,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "textLength": len(self.text),
            "when": self.when,
            "outcome": self.state,
            "how": self.how,
            "why": self.why,
            "attempt": self.attempt,
            "requestedAt": iso(self.requested_at),
            "endedAt": iso(self.ended_at) if self.ended_at is not None else None,
        }


class ExternalSteers:
    """Every external steer of a run, in the order they came."""

    def __init__(self, max_steers: int) -> None:
        self.max_steers = max_steers
        self.items: list[ExternalSteer] = []

    def request(self, request: SteerRequest, now: float) -> ExternalSteer:
        """Record a steer: queued, or refused at once when the limit is reached."""
        steer = ExternalSteer(f"s{len(self.items) + 1}", request.text, request.when, now)
        taken = sum(item.state != "refused" for item in self.items)
        self.items.append(steer)
        if taken >= self.max_steers:
            self.refuse(
                steer,
                f"the limit of {self.max_steers} steers from outside is reached "
                "(--max-external-steers)",
                now,
            )
        return steer

    @property
    def queued(self) -> list[ExternalSteer]:
        return [item for item in self.items if item.state == "queued"]

    @property
    def sent(self) -> list[ExternalSteer]:
        """The steers written into a live session that its agent has not answered yet."""
        return [item for item in self.items if item.state == "sent"]

    @property
    def delivered_count(self) -> int:
        # A steer on the agent's input counts against --max-external-steers
        # as a delivered one does: neither is the wrapper's to withdraw.
        return sum(item.state in ("delivered", "sent") for item in self.items)

    def refuse(self, steer: ExternalSteer, why: str, now: float) -> None:
        steer.state, steer.why, steer.ended_at = "refused", why, now

    def deliver(self, steers: Sequence[ExternalSteer], how: str, attempt: int, now: float) -> None:
        for steer in steers:
            steer.state, steer.how, steer.attempt, steer.ended_at = "delivered", how, attempt, now
            steer.ticket = steer.why = None

    def send(self, steer: ExternalSteer, ticket: str, attempt: int) -> None:
        """``steer`` is on the live agent's input as ``ticket``, unanswered."""
        steer.state, steer.how, steer.attempt, steer.ticket = "sent", "live", attempt, ticket

    def refused_live(self, steer: ExternalSteer, why: str) -> None:
        """The agent refused ``steer`` live: it waits again, for the next prompt."""
        steer.state, steer.refused_live, steer.ticket = "queued", why, None
        steer.how = steer.attempt = None
        steer.why = f"the agent refused it live ({why}); it goes as the next prompt"

    def pending_json(self) -> list[dict[str, Any]]:
        """status.json's ``pendingSteers``."""
        return [
            {"id": item.id, "when": item.when, "requestedAt": iso(item.requested_at)}
            for item in self.queued
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "externalSteerCount": self.delivered_count,
            "externalSteers": [item.to_json() for item in self.items],
        }


def delivered_how(how: str | None) -> str:
    """How a steer was delivered, in words: ``live`` or ``by resume``."""
    return "live" if how == "live" else f"by {how}"


def message(
    steers: Sequence[ExternalSteer],
    hook: tuple[str, str] | None = None,
    cut: str | None = None,
) -> str:
    """The prompt that carries ``steers``, after a Stop handler's block
    (``(handler, reason)``) when one came at the same stop. One steer alone
    is its text; together, each part is marked with where it came from.
    ``cut``: the tool call the steers interrupted, said after them (an agent
    may resume its session without a call that had no result yet)."""
    if hook is None and len(steers) == 1:
        text = steers[0].text
    else:
        parts = [f"[Stop hook {hook[0]}]\n{hook[1]}"] if hook is not None else []
        parts += [f"[Steer {steer.id} from outside the run]\n{steer.text}" for steer in steers]
        text = "\n\n".join(parts)
    if cut is not None:
        text += f"\n\n[Your tool call {cut} was interrupted to deliver this; it did not finish.]"
    return text
