"""pi's RPC mode (``pi --mode rpc``), the client's side: what the wrapper
writes on pi's stdin, and when a prompt's run is over. Values only.

pi reads one JSON command a line (``prompt``, ``steer``, ``follow_up``,
``abort``) and writes the events of ``--mode json`` (read by ``PiDialect``)
plus a ``response`` to each command and ``queue_update``; a run ends with
one ``agent_end``, however many turns steers and follow-ups added to it
(checked on 0.73.1, see ``tests/data/real/twoway``). A ``prompt`` while a
run goes on is refused by pi, hence ``running``: a steer then lands in the
run, and between runs it waits to be the next prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wrapper.core.events import AgentEnded, Event
from wrapper.dialects.two_way import TurnNews


def is_rpc(command: Sequence[str]) -> bool:
    """Whether ``command`` starts pi in its RPC mode (``--mode rpc`` or ``--mode=rpc``)."""
    options = list(command)
    options = options[: options.index("--")] if "--" in options else options
    for index, arg in enumerate(options):
        if arg == "--mode=rpc" or (arg == "--mode" and options[index + 1 : index + 2] == ["rpc"]):
            return True
    return False


class PiRpcClient:
    """The commands of one pi RPC session, and whether a run is under way."""

    def __init__(self) -> None:
        self._sent = 0
        #: A prompt's run is under way (from its ``prompt`` to its ``agent_end``).
        self.running = False
        self.closed = False

    def _command(self, kind: str, text: str | None = None) -> dict[str, Any]:
        self._sent += 1
        command: dict[str, Any] = {"id": f"{kind}-{self._sent}", "type": kind}
        if text is not None:
            command["message"] = text
        return command

    def prompt(self, text: str) -> dict[str, Any] | None:
        """The command that starts a run with ``text``; None once closed."""
        if self.closed:
            return None
        self.running = True
        return self._command("prompt", text)

    def steer(self, text: str) -> dict[str, Any] | None:
        """The command that hands ``text`` to the running run (after its
        running tool, before its next model request); None when no run goes on."""
        return self._command("steer", text) if self.takes("now") else None

    def follow_up(self, text: str) -> dict[str, Any] | None:
        """The command that makes ``text`` the next turn once the run would
        stop (same run, one ``agent_end``); None when no run goes on."""
        return self._command("follow_up", text) if self.takes("next-stop") else None

    def abort(self) -> dict[str, Any] | None:
        """The command that ends the running run (its tool killed, an
        ``aborted`` message, ``agent_end``); None when no run goes on."""
        return self._command("abort") if self.running and not self.closed else None

    def takes(self, when: str) -> bool:
        """Whether a steer (``now``) or a follow-up (``next-stop``) would
        join the running run now."""
        return self.running and not self.closed

    def close(self) -> None:
        self.closed = True

    def outbox(self) -> list[dict[str, Any]]:
        return []  # every message answers an intent

    def observe(self, event: Event) -> TurnNews | None:
        """``ended`` when ``event`` ends the run under way (a retry announced
        does not); a running run takes steers throughout."""
        if not self.running or not isinstance(event, AgentEnded):
            return None
        if event.settled or event.will_retry is True:
            return None
        self.running = False
        return "ended"
