"""What the supervisor asks of the client's side of a two-way mode in which
the agent takes JSON messages on its stdin (``pi_rpc``, ``claude_input``,
``codex_app_server``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from wrapper.core.events import Event

#: What an event tells the client of a two-way mode: the prompt's turn
#: ``ended``, or the turn is ``steerable`` from now on (a message joins it).
TurnNews = Literal["ended", "steerable"]


@dataclass(frozen=True, slots=True)
class Answer:
    """The agent's answer to a steer or follow-up the client wrote."""

    #: The client's name for the message (``InputClient.ticket``).
    ticket: str
    #: None: the agent took it; else why it refused it, in its words.
    refused: str | None = None


class InputClient(Protocol):
    """The client's side of an agent that takes JSON messages on its stdin
    (pi's RPC mode, Claude Code's stream-json input, Codex's app-server):
    the message to write for each intent (None when it cannot be sent now),
    what the agent's events say of its turn, and what else is to be written
    (``outbox``: a protocol that opens a session, or asks the client, before
    a prompt can go). Values only; the supervisor writes."""

    #: Whether the agent answers a steer by the end of the turn it was
    #: written in (pi, Codex), so that a turn's end waits for the answers.
    answers_at_turn_end: bool

    def prompt(self, text: str) -> dict[str, Any] | None:
        """A new prompt turn with ``text``."""

    def takes(self, when: str) -> bool:
        """Whether a steer (``now``) or a follow-up (``next-stop``) would
        join the running turn now."""

    def steer(self, text: str) -> dict[str, Any] | None: ...

    def follow_up(self, text: str) -> dict[str, Any] | None: ...

    def abort(self) -> dict[str, Any] | None:
        """The agent's own way to end the running turn."""

    def close(self) -> None: ...

    def observe(self, event: Event) -> TurnNews | None: ...

    def outbox(self) -> list[dict[str, Any]]:
        """The messages to write now that no intent returned (taken once);
        asked after every prompt and every event observed."""

    def ticket(self, message: dict[str, Any]) -> str:
        """The name of a steer or follow-up ``message`` just returned, which
        its ``Answer`` carries."""

    def prompt_ticket(self, message: dict[str, Any]) -> str | None:
        """The name of a prompt ``message`` just returned, when the agent
        answers prompts (its ``Answer`` carries it), else None."""

    def answers(self) -> list[Answer]:
        """The agent's answers to steers and follow-ups that came since
        last asked (taken once); asked after every event observed."""

    def holds(self) -> bool:
        """Whether the agent keeps messages it took for a prompt to come
        (pi keeps a steer that came as its run ended for its next run)."""

    def turn_coming(self) -> bool:
        """Whether the agent starts a turn of its own next, with a message
        it took too late for the turn that ended (Claude Code queues one
        that came just after the tool's result)."""

    def own_turn(self) -> None:
        """The turn the agent starts of its own counts as the running one."""

    def held_prompt(self) -> str | None:
        """The text of a prompt that makes the agent act on the messages it
        holds (``holds``), when the wrapper has none of its own to give."""
