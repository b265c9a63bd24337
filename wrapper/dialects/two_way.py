"""What the supervisor asks of the client's side of a two-way mode in which
the agent takes JSON messages on its stdin (``pi_rpc``, ``claude_input``,
``codex_app_server``)."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from wrapper.core.events import Event

#: What an event tells the client of a two-way mode: the prompt's turn
#: ``ended``, or the turn is ``steerable`` from now on (a message joins it).
TurnNews = Literal["ended", "steerable"]


class InputClient(Protocol):
    """The client's side of an agent that takes JSON messages on its stdin
    (pi's RPC mode, Claude Code's stream-json input, Codex's app-server):
    the message to write for each intent (None when it cannot be sent now),
    what the agent's events say of its turn, and what else is to be written
    (``outbox``: a protocol that opens a session, or asks the client, before
    a prompt can go). Values only; the supervisor writes."""

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
