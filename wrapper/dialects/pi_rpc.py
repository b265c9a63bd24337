"""pi's RPC mode (``pi --mode rpc``), the client's side: what the wrapper
writes on pi's stdin, and when a prompt's run is over. Values only.

pi reads one JSON command a line (``prompt``, ``steer``, ``follow_up``,
``abort``) and writes the events of ``--mode json`` (read by ``PiDialect``)
plus a ``response`` to each command and ``queue_update``; a run ends with
one ``agent_end``, however many turns steers and follow-ups added to it
(checked on 0.73.1, see ``tests/data/real/twoway``). A ``prompt`` while a
run goes on is refused by pi, hence ``running``: a steer then lands in the
run, and between runs it waits to be the next prompt.

pi's ``response`` to a ``steer`` or ``follow_up`` is its acknowledgement:
``success: false`` (a text naming one of its extension commands) means it
never took it. One that comes as a run ends is acknowledged and kept in
pi's queue (``queue_update``) for its next prompt's run: the client says so
(``holds``), so that the session is not closed on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wrapper.core.events import AgentEnded, Event
from wrapper.dialects.two_way import Answer, TurnNews

#: The prompt that makes pi act on the messages it kept for its next run
#: when the wrapper has no prompt of its own to give: pi puts them after it.
HELD_PROMPT = "Messages for you came as you were finishing; they follow."


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

    #: pi answers every command at once.
    answers_at_turn_end = True

    def __init__(self) -> None:
        self._sent = 0
        #: A prompt's run is under way (from its ``prompt`` to its ``agent_end``).
        self.running = False
        self.closed = False
        #: Steers and follow-ups written and not answered yet, by id.
        self._asked: set[str] = set()
        self._answers: list[Answer] = []
        #: How many messages pi keeps queued, as its last ``queue_update`` said.
        self._queued = 0
        #: The id of the prompt that started the run under way.
        self._prompt_id: str | None = None

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
        command = self._command("prompt", text)
        self._prompt_id = command["id"]
        return command

    def steer(self, text: str) -> dict[str, Any] | None:
        """The command that hands ``text`` to the running run (after its
        running tool, before its next model request); None when no run goes on."""
        return self._asked_for(self._command("steer", text)) if self.takes("now") else None

    def follow_up(self, text: str) -> dict[str, Any] | None:
        """The command that makes ``text`` the next turn once the run would
        stop (same run, one ``agent_end``); None when no run goes on."""
        if not self.takes("next-stop"):
            return None
        return self._asked_for(self._command("follow_up", text))

    def _asked_for(self, command: dict[str, Any]) -> dict[str, Any]:
        self._asked.add(command["id"])
        return command

    def ticket(self, message: dict[str, Any]) -> str:
        return str(message["id"])

    def prompt_ticket(self, message: dict[str, Any]) -> str | None:
        """pi answers a prompt once its preflight passed (or why not)."""
        self._asked.add(message["id"])
        return str(message["id"])

    def answers(self) -> list[Answer]:
        out, self._answers = self._answers, []
        return out

    def holds(self) -> bool:
        """Whether pi keeps steers or follow-ups for its next run (none runs)."""
        return not self.running and self._queued > 0

    def turn_coming(self) -> bool:
        return False  # a message it did not take in the turn is answered as refused or held

    def own_turn(self) -> None:
        pass

    def held_prompt(self) -> str | None:
        return HELD_PROMPT if self.holds() else None

    def received(self, obj: dict[str, Any]) -> bool:
        """A ``response`` or ``queue_update`` line of pi's; True when it
        refuses the prompt of the run under way (no run comes: pi stays idle)."""
        if obj.get("type") == "queue_update":
            queued = [obj.get("steering"), obj.get("followUp")]
            self._queued = sum(len(part) for part in queued if isinstance(part, list))
            return False
        command_id = obj.get("id")
        refused = None
        if obj.get("success") is not True:
            error = obj.get("error")
            refused = error if isinstance(error, str) and error else "no reason given"
        if isinstance(command_id, str) and command_id in self._asked:
            self._asked.discard(command_id)
            self._answers.append(Answer(command_id, refused))
        return refused is not None and self.running and command_id == self._prompt_id

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
