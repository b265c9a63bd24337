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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from wrapper.core.limits import (
    ARGUMENT_MAX_BYTES,
    COMMAND_LINE_SLACK_BYTES,
    LISTED_REFUSED_STEERS,
    STEER_MAX_BYTES,
    STEER_PROMPT_RESERVE_BYTES,
)
from wrapper.core.timefmt import iso

#: ``now``: as soon as the agent can take it; ``next-stop``: a follow-up,
#: given when the agent next stops instead of ending the run.
WHEN = ("now", "next-stop")
When = Literal["now", "next-stop"]
#: A JSON string escape is at most six bytes for one byte of text (a control
#: character is ``\\u0001``).
JSON_ESCAPE_MAX = 6
#: A request is one line of at most this many bytes: a text within
#: ``STEER_MAX_BYTES`` fits however its sender escaped it, so that the size
#: of the text decides, the same number for the sender and the run. Only
#: the run's own user can connect (the socket is 0600).
REQUEST_MAX_BYTES = JSON_ESCAPE_MAX * STEER_MAX_BYTES + 1024
#: An abort's reason is cut to this many characters.
REASON_MAX_CHARS = 1000
#: The socket's name in the run directory, and its file name elsewhere.
SOCKET_NAME = "control.sock"
#: The longest socket path the system takes (``sun_path`` is 108 bytes on
#: Linux, 104 on macOS, the terminating NUL included).
SOCKET_PATH_MAX_BYTES = 103
#: The name of the directory made for a run's socket alone, where the run
#: directory's path is too long for one; ``tempfile.mkdtemp`` adds this many
#: random characters (a name another user cannot make first).
PRIVATE_DIR_PREFIX = "agent-wrapper-"
PRIVATE_DIR_RANDOM_CHARS = 8

_SURROGATE = re.compile("[\ud800-\udfff]")


class BadRequest(ValueError):
    """A request the run cannot take; the text says why, for its sender."""


@dataclass(frozen=True, slots=True)
class SteerRequest:
    """A steer sent to the run's socket: the text, and when it is to reach the agent."""

    text: str
    when: When = "now"


@dataclass(frozen=True, slots=True)
class AbortRequest:
    """An abort sent to the run's socket, with the sender's reason."""

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
        if len(text.encode()) > STEER_MAX_BYTES:
            raise BadRequest(too_long(STEER_MAX_BYTES))
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


def fits_socket(path: str) -> bool:
    """Whether ``path`` is short enough to bind a socket to."""
    return len(os.fsencode(path)) <= SOCKET_PATH_MAX_BYTES


#: ``queued``: the wrapper holds it; ``sent``: written on a live agent's
#: input, not acknowledged yet; ``delivered``: the agent acknowledged it (or
#: was started or resumed with it); ``refused``: it will never reach the agent.
State = Literal["queued", "sent", "delivered", "refused"]


def text_bytes(text: str) -> int:
    """The size of a steer's text, as the sender and the run count it."""
    return len(text.encode("utf-8", "surrogatepass"))


def too_long(limit: int) -> str:
    """Why a steer over ``limit`` bytes is refused."""
    return f"a steer this run can take is at most {limit} bytes"


def steer_max_bytes(
    argv: Sequence[str] | None,
    probe: str,
    environment: Mapping[str, str],
    arg_max: int,
) -> int:
    """The most a steer's text may hold in a run whose agent is resumed with
    ``argv`` (the resume's command line with ``probe`` as its prompt; None
    when the prompt goes elsewhere than the command line: stdin, a file).

    On the command line the prompt is one argument (``ARGUMENT_MAX_BYTES``)
    and the whole command line, the agent's ``environment`` included, is
    ``arg_max``; from both goes ``STEER_PROMPT_RESERVE_BYTES``, for what is
    added to the prompt after the agent was interrupted."""
    if argv is None:
        return STEER_MAX_BYTES
    probe_size = text_bytes(probe)
    # Each string of the command line costs its bytes, its NUL and a pointer.
    rest = sum(text_bytes(word) + 1 + 8 for word in argv) - probe_size
    rest += sum(text_bytes(name) + text_bytes(value) + 2 + 8 for name, value in environment.items())
    around = max((text_bytes(word) - probe_size for word in argv if probe in word), default=0)
    room = min(ARGUMENT_MAX_BYTES - 1 - around, arg_max - rest)
    room -= STEER_PROMPT_RESERVE_BYTES + COMMAND_LINE_SLACK_BYTES
    return max(0, min(STEER_MAX_BYTES, room))


@dataclass(slots=True)
class ExternalSteer:
    """One steer from outside and what became of it. A refused steer keeps
    its text's size and digest only."""

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
    #: The text's length in characters, and its SHA-256 once the text is dropped.
    length: int = field(init=False, default=0)
    digest: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.length = len(self.text)

    def drop_text(self) -> None:
        """A refused steer is never given: its text is not kept."""
        self.digest = self.text_sha256()
        self.text = ""

    def text_sha256(self) -> str:
        if self.digest is not None:
            return self.digest
        # Loaded by the first steer that needs it, not by every run's start.
        import hashlib  # noqa: PLC0415

        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()

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
            "textLength": self.length,
            "textSha256": self.text_sha256(),
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
        #: The steers taken, and the first refused ones.
        self.items: list[ExternalSteer] = []
        #: Steers ever requested (their ids count on).
        self.count = 0
        #: Refused steers not kept, past ``LISTED_REFUSED_STEERS``.
        self.omitted = 0

    def request(
        self, request: SteerRequest, now: float, max_bytes: int = STEER_MAX_BYTES
    ) -> ExternalSteer:
        """Record a steer: queued, or refused at once when the limit of steers
        is reached, or when it is larger than ``max_bytes``, alone or joined
        with the steers that wait into one prompt (the earlier ones go)."""
        self.count += 1
        steer = ExternalSteer(f"s{self.count}", request.text, request.when, now)
        taken = sum(item.state != "refused" for item in self.items)
        why = None
        if taken >= self.max_steers:
            why = (
                f"the limit of {self.max_steers} steers from outside is reached "
                "(--max-external-steers)"
            )
        elif (size := text_bytes(steer.text)) > max_bytes:
            why = f"{too_long(max_bytes)} (this one is {size})"
        else:
            # The steers that wait go together as one prompt, whatever their ``when``.
            waiting = self.queued
            joined = text_bytes(message([*waiting, steer])) if waiting else 0
            if joined > max_bytes:
                ids = ", ".join(item.id for item in waiting)
                why = (
                    f"{too_long(max_bytes)}, and with the steers waiting ({ids}) "
                    f"joined into one prompt this one makes {joined}: send it once they went"
                )
        if why is None or sum(item.state == "refused" for item in self.items) < (
            LISTED_REFUSED_STEERS
        ):
            self.items.append(steer)
        else:
            self.omitted += 1
        if why is not None:
            self.refuse(steer, why, now)
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
        steer.drop_text()

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
        listed, refused = [], 0
        for item in self.items:
            if item.state == "refused":
                refused += 1
                if refused > LISTED_REFUSED_STEERS:
                    continue
            listed.append(item.to_json())
        return {
            "externalSteerCount": self.delivered_count,
            "externalSteers": listed,
            "externalSteersOmitted": self.omitted + max(0, refused - LISTED_REFUSED_STEERS),
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
