"""Codex's app-server (``codex app-server``), the client's side: what the
wrapper writes on its stdin, what it answers, and when a prompt's turn is
over. Values only.

The app-server speaks JSON-RPC 2.0 lines without the ``"jsonrpc"`` member,
both ways (checked on 0.169.0, see ``tests/data/real/twoway``). The session
opens with ``initialize``, the ``initialized`` notification and
``thread/start`` (only ``cwd`` is given: the user's ``-c approval_policy=…``
and config decide the rest), written at once (0.169.0 takes them so); the
thread's id comes back in ``thread/start``'s answer and ``thread/started``.
A prompt is ``turn/start`` on that thread, answered with the turn's id at
once; prompts wait for the thread. While a turn runs, ``turn/steer`` (with
the turn's id) hands a message to it: after the running command, or, while
the model answers, in place of the answer being generated. The turn ends
with the ``turn/completed`` notification; a follow-up is the next
``turn/start`` after it. ``turn/interrupt`` ends the running turn
(``turn/completed`` status ``interrupted``). The end of stdin ends the
app-server (exit 0), mid-turn included.

A new process for a session that had one (a resume) opens it with
``thread/resume`` (``excludeTurns``), the thread's id known, and its turn
follows at once (0.169.0: the request holds the earlier turns; no
``thread/started`` comes).

The app-server's own requests (approvals: ``item/commandExecution/
requestApproval`` and the like) are declined at once, with a warning that
tells the user to let Codex run unasked (``-c approval_policy="never"``):
nobody answers them during a supervised run. The answer to ``turn/steer``
is the steer's acknowledgement; one the app-server refuses (``no active
turn``: the turn had just ended) is said to the wrapper (``answers``),
which gives it again as the next prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    Event,
    StopReason,
    TurnStarted,
    WarningEvent,
)
from wrapper.core.version import VERSION
from wrapper.dialects.two_way import Answer, TurnNews

#: The name the wrapper gives itself in ``initialize``.
CLIENT_NAME = "agent-wrapper"

#: The answer that declines each approval request the app-server makes
#: (0.169.0's schema): the v2 requests take ``decline``, the legacy ones
#: ``denied``; any other request is answered with an error.
_DECLINES: Mapping[str, Mapping[str, Any]] = {
    "item/commandExecution/requestApproval": {"decision": "decline"},
    "item/fileChange/requestApproval": {"decision": "decline"},
    "execCommandApproval": {"decision": "denied"},
    "applyPatchApproval": {"decision": "denied"},
}

#: The requests without which a prompt's turn cannot run.
_OPENING = frozenset({"initialize", "thread/start", "thread/resume", "turn/start"})

#: JSON-RPC's code for a method the client does not offer.
_NO_SUCH_METHOD = -32601

#: How much of the command a declined request names (a command can be a script).
_SHOWN = 200

#: How to let Codex run without asking, told with every declined request.
APPROVAL_HINT = (
    'run it with -c approval_policy="never" (and a sandbox that lets it work) '
    "so that it does not ask"
)


def text_input(texts: Sequence[str]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text} for text in texts]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _id_of(value: Any) -> str | None:
    found = _dict(value).get("id")
    return found if isinstance(found, str) and found else None


def declined(method: str, params: Mapping[str, Any]) -> str:
    """What a person is told of a request of the app-server's that was declined."""
    what = params.get("command") or params.get("reason") or params.get("itemId")
    if isinstance(what, str) and len(what) > _SHOWN:
        what = what[: _SHOWN - 1] + "…"
    about = f" ({what})" if isinstance(what, str) and what else ""
    return f"Codex asked {method}{about} and the wrapper declined it: {APPROVAL_HINT}"


class CodexAppServerClient:
    """The messages of one app-server session, and what its turn is doing."""

    #: The app-server answers turn/steer at once.
    answers_at_turn_end = True

    def __init__(self, cwd: str | None = None, resume: str | None = None) -> None:
        self.cwd = cwd
        #: The thread a new process continues, if any.
        self.resume = resume
        self._ids = 0
        #: The requests sent and not answered yet: id -> (method, texts).
        self._asked: dict[int, tuple[str, list[str]]] = {}
        self._outbox: list[dict[str, Any]] = []
        self.opened = False
        self.thread_id: str | None = None
        #: The running turn's id, once the app-server said it.
        self.turn_id: str | None = None
        #: A prompt's turn is under way (from its ``turn/start`` to its end).
        self.running = False
        self.closed = False
        #: Prompts written before the thread existed.
        self._waiting: list[list[str]] = []
        #: The app-server's answers to steers (and prompts asked about), not taken yet.
        self._answers: list[Answer] = []
        #: The ``turn/start`` requests whose answer is to be told.
        self._prompts: set[int] = set()

    # -- what the wrapper asks -------------------------------------------------------

    def _request(
        self, method: str, params: dict[str, Any], texts: Sequence[str] = ()
    ) -> dict[str, Any]:
        self._ids += 1
        self._asked[self._ids] = (method, list(texts))
        return {"id": self._ids, "method": method, "params": params}

    def _turn_start(self, texts: list[str]) -> dict[str, Any]:
        assert self.thread_id is not None
        params = {"threadId": self.thread_id, "input": text_input(texts)}
        return self._request("turn/start", params, texts)

    def prompt(self, text: str) -> dict[str, Any] | None:
        """The ``turn/start`` of a new turn with ``text``; None while the
        thread is being opened (it goes once it exists, see ``outbox``) or
        once closed."""
        if self.closed:
            return None
        texts = [text]
        self.running, self.turn_id = True, None
        if not self.opened:
            self.opened = True
            info = {"name": CLIENT_NAME, "version": VERSION}
            self._outbox.append(self._request("initialize", {"clientInfo": info}))
            self._outbox.append({"method": "initialized"})
            params: dict[str, Any] = {"cwd": self.cwd} if self.cwd is not None else {}
            if self.resume is None:
                self._outbox.append(self._request("thread/start", params))
            else:
                params = {"threadId": self.resume, **params, "excludeTurns": True}
                self._outbox.append(self._request("thread/resume", params))
                self.thread_id = self.resume
        if self.thread_id is None:
            self._waiting.append(texts)
            return None
        return self._turn_start(texts)

    def takes(self, when: str) -> bool:
        """Whether a steer (``now``) would join the running turn now (its id
        known); a follow-up waits for the turn's end."""
        return when == "now" and self.running and self.turn_id is not None and not self.closed

    def steer(self, text: str) -> dict[str, Any] | None:
        if not self.takes("now"):
            return None
        assert self.thread_id is not None
        params = {
            "threadId": self.thread_id,
            "expectedTurnId": self.turn_id,
            "input": text_input([text]),
        }
        return self._request("turn/steer", params, [text])

    def follow_up(self, text: str) -> dict[str, Any] | None:
        return None

    def abort(self) -> dict[str, Any] | None:
        """``turn/interrupt`` of the running turn (its command killed, the
        turn completed ``interrupted``; the process stays)."""
        if not self.running or self.closed or self.turn_id is None or self.thread_id is None:
            return None
        params = {"threadId": self.thread_id, "turnId": self.turn_id}
        return self._request("turn/interrupt", params)

    def close(self) -> None:
        self.closed = True

    def ticket(self, message: dict[str, Any]) -> str:
        return str(message["id"])

    def prompt_ticket(self, message: dict[str, Any]) -> str | None:
        """The app-server answers ``turn/start`` with the turn (or an error)."""
        self._prompts.add(message["id"])
        return str(message["id"])

    def answers(self) -> list[Answer]:
        out, self._answers = self._answers, []
        return out

    def holds(self) -> bool:
        return False  # a refused steer is the wrapper's again (``answers``)

    def turn_coming(self) -> bool:
        return False  # a message it did not take in the turn is answered as refused or held

    def own_turn(self) -> None:
        pass

    def held_prompt(self) -> str | None:
        return None

    def outbox(self) -> list[dict[str, Any]]:
        """The messages to write now that nobody asked for: the session's
        opening, a prompt that waited for the thread, answers to the
        app-server's requests."""
        out, self._outbox = self._outbox, []
        return out

    # -- what the app-server says ----------------------------------------------------

    def received(self, message: Mapping[str, Any]) -> list[Event]:
        """A decoded line of the app-server's: what the client learns of
        it, and the warnings it calls for."""
        method = message.get("method")
        params = _dict(message.get("params"))
        if isinstance(method, str) and "id" in message:
            return self._requested(message["id"], method, params)
        if isinstance(method, str):
            self._notified(method, params)
            return []
        answered = message.get("id")
        asked = self._asked.pop(answered, None) if isinstance(answered, int) else None
        if asked is None:
            return []
        if "error" in message:
            return self._refused(answered, asked, _dict(message.get("error")))
        if asked[0] == "turn/steer" or answered in self._prompts:
            self._prompts.discard(answered)
            self._answers.append(Answer(str(answered)))
        self._answered(asked[0], _dict(message.get("result")))
        return []

    def _requested(self, request_id: Any, method: str, params: dict[str, Any]) -> list[Event]:
        decline = _DECLINES.get(method)
        if decline is not None:
            self._outbox.append({"id": request_id, "result": dict(decline)})
        else:
            error = {"code": _NO_SUCH_METHOD, "message": f"{CLIENT_NAME} does not answer {method}"}
            self._outbox.append({"id": request_id, "error": error})
        return [WarningEvent(code="agent_request_declined", message=declined(method, params))]

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method == "thread/started":
            self._thread(_id_of(params.get("thread")))
        elif method == "turn/started" and self.running:
            self.turn_id = _id_of(params.get("turn")) or self.turn_id
        elif method == "turn/completed":
            self.turn_id = None

    def _answered(self, method: str, result: dict[str, Any]) -> None:
        if method == "thread/start":
            self._thread(_id_of(result.get("thread")))
        elif method == "turn/start" and self.running and self.turn_id is None:
            self.turn_id = _id_of(result.get("turn"))

    def _refused(
        self, request_id: Any, asked: tuple[str, list[str]], error: dict[str, Any]
    ) -> list[Event]:
        method = asked[0]
        why = error.get("message") if isinstance(error.get("message"), str) else "no reason given"
        message = f"Codex refused {method}: {why}"
        if method == "turn/steer":
            self._answers.append(Answer(str(request_id), f"Codex refused it: {why}"))
            message += "; the steer goes again as the next prompt"
        elif request_id in self._prompts:
            self._prompts.discard(request_id)
            self._answers.append(Answer(str(request_id), f"Codex refused it: {why}"))
        events: list[Event] = [WarningEvent(code="agent_refused_command", message=message)]
        if method in _OPENING and self.running and self.turn_id is None:
            # No turn will run for the prompt: it ends here, failed.
            failed = AssistantMessage(
                stop_reason=str(StopReason.ERROR), raw_stop_reason=method, error_message=message
            )
            events += [failed, AgentEnded(will_retry=False, settled=True)]
        return events

    def _thread(self, thread_id: str | None) -> None:
        if thread_id is None or self.thread_id is not None:
            return
        self.thread_id = thread_id
        for texts in self._waiting:
            self._outbox.append(self._turn_start(texts))
        self._waiting = []

    def observe(self, event: Event) -> TurnNews | None:
        """``steerable`` when the turn started (a steer joins it from now
        on), ``ended`` when ``event`` ends it (its ``turn/completed``)."""
        if not self.running:
            return None
        if isinstance(event, TurnStarted):
            return "steerable" if self.takes("now") else None
        if isinstance(event, AgentEnded):
            self.running, self.turn_id = False, None
            return "ended"
        return None
