"""What the supervisor asks of the client's side of a two-way mode in which
the agent takes JSON messages on its stdin (``pi_rpc``, ``claude_input``)."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from wrapper.core.events import Event

#: What an event tells the client of a two-way mode: the prompt's turn
#: ``ended``, or the turn is ``steerable`` from now on (a message joins it).
TurnNews = Literal["ended", "steerable"]


class InputClient(Protocol):
    """The client's side of an agent that takes JSON messages on its stdin
    (pi's RPC mode, Claude Code's stream-json input): the message to write
    for each intent (None when it cannot be sent now), and what the agent's
    events say of its turn. Values only; the supervisor writes."""

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
