"""Claude Code's stream-json input (``claude -p --input-format stream-json
--output-format stream-json --verbose``), the client's side: what the
wrapper writes on its stdin, and when a prompt's turn is over. Values only.

Each line on stdin is a user message (``{"type":"user","message":{...}}``)
or a control request (``interrupt``); stdout is the usual stream, a
``system``/``init`` at the start of each turn and a ``result`` at its end
(checked on 2.1.197 and 2.1.332, see ``tests/data/real/twoway``). A user
message written while a tool runs reaches the model in the same turn, with
the tool's result; one written while the model answers becomes a turn of
its own after that turn's ``result``, which the wrapper could not tell
from the end of the turn: so a steer joins the running turn only while a
tool runs, and otherwise waits for one, or for the turn's end (then it is
the next prompt). Claude Code has no follow-up: one waits for the turn's end.

With ``--replay-user-messages`` (the wrapper adds it) Claude Code writes
each user message back on stdout once it takes it into the conversation
(``{"type":"user","message":{"role":"user","content":TEXT}}``): that echo is
a steer's acknowledgement. It comes late, when the model is next asked
(after the running tool), so a steer stays ``sent`` until then. One not
echoed by the turn's ``result`` missed the turn (the tool had just ended):
Claude Code makes it a turn of its own at once (``turn_coming``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wrapper.core.events import AgentEnded, Event, ToolEnded, ToolStarted
from wrapper.dialects.two_way import Answer, TurnNews

#: The option that makes Claude Code echo the user messages it takes.
REPLAY_OPTION = "--replay-user-messages"


def is_stream_input(command: Sequence[str]) -> bool:
    """Whether ``command`` gives Claude Code ``--input-format stream-json``."""
    options = list(command)
    options = options[: options.index("--")] if "--" in options else options
    for index, arg in enumerate(options):
        if arg == "--input-format=stream-json" or (
            arg == "--input-format" and options[index + 1 : index + 2] == ["stream-json"]
        ):
            return True
    return False


def with_replay(words: list[str]) -> list[str]:
    """``words`` (a stream-json input command) with ``REPLAY_OPTION``, once."""
    if REPLAY_OPTION in words:
        return words
    if "--" in words:
        at = words.index("--")
        return [*words[:at], REPLAY_OPTION, *words[at:]]
    return [*words, REPLAY_OPTION]


def user_message(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}}


class ClaudeInputClient:
    """The messages of one stream-json session, and what its turn is doing."""

    #: Claude Code echoes a steer only when the model is next asked.
    answers_at_turn_end = False

    def __init__(self) -> None:
        self._sent = 0
        #: A prompt's turn is under way (from its message to its ``result``).
        self.running = False
        self.closed = False
        self._tools = 0
        #: Steers written and not echoed yet: (ticket, text), oldest first.
        self._unechoed: list[tuple[str, str]] = []
        self._answers: list[Answer] = []
        #: Whether Claude Code echoes messages in this session (it echoes the
        #: task before the first ``result`` when it does).
        self._echoes = False
        #: The running turn is one Claude Code started of its own.
        self._own = False

    def prompt(self, text: str) -> dict[str, Any] | None:
        if self.closed:
            return None
        self.running, self._tools = True, 0
        return user_message(text)

    def takes(self, when: str) -> bool:
        """Whether a steer (``now``) would join the running turn now."""
        return when == "now" and self.running and self._tools > 0 and not self.closed

    def steer(self, text: str) -> dict[str, Any] | None:
        if not self.takes("now"):
            return None
        self._sent += 1
        self._unechoed.append((f"user-{self._sent}", text))
        return user_message(text)

    def ticket(self, message: dict[str, Any]) -> str:
        """The ticket of the steer just returned (the last one written)."""
        return self._unechoed[-1][0]

    def prompt_ticket(self, message: dict[str, Any]) -> str | None:
        return None  # its echo may come only at the turn's end: a prompt is taken as written

    def answers(self) -> list[Answer]:
        out, self._answers = self._answers, []
        return out

    def holds(self) -> bool:
        return False

    def held_prompt(self) -> str | None:
        return None

    def turn_coming(self) -> bool:
        """A steer not echoed by the turn's ``result`` missed the turn (it
        was written just after the tool's result): Claude Code makes it a
        turn of its own, at once."""
        return not self.running and self._echoes and bool(self._unechoed) and not self.closed

    def own_turn(self) -> None:
        self.running, self._tools, self._own = True, 0, True

    def echoed(self, text: str) -> None:
        """Claude Code wrote back a user message with ``text``: the oldest
        steer of that text is acknowledged."""
        self._echoes = True
        for index, (ticket, sent) in enumerate(self._unechoed):
            if sent == text:
                del self._unechoed[index]
                self._answers.append(Answer(ticket))
                return

    def follow_up(self, text: str) -> dict[str, Any] | None:
        return None

    def abort(self) -> dict[str, Any] | None:
        """The control request that interrupts the running turn (its tool
        stopped, a ``result`` ``error_during_execution``; the process stays)."""
        if not self.running or self.closed:
            return None
        self._sent += 1
        return {
            "type": "control_request",
            "request_id": f"interrupt-{self._sent}",
            "request": {"subtype": "interrupt"},
        }

    def close(self) -> None:
        self.closed = True

    def outbox(self) -> list[dict[str, Any]]:
        return []  # every message answers an intent

    def observe(self, event: Event) -> TurnNews | None:
        """``ended`` when ``event`` ends the turn (its ``result``),
        ``steerable`` when a steer can join it from now on (a tool started)."""
        if not self.running:
            return None
        if isinstance(event, ToolStarted):
            self._tools += 1
            return "steerable" if self._tools == 1 else None
        if isinstance(event, ToolEnded):
            self._tools = max(0, self._tools - 1)
        elif isinstance(event, AgentEnded):
            if self._own:
                # What its own turn did not echo, no later turn will: no more
                # turns are waited for on its account.
                self._unechoed.clear()
            self.running, self._own = False, False
            return "ended"
        return None
