"""The wrapper as an Agent Client Protocol client: a state machine, no I/O.

One module, though long: the session's states and their transitions are one
table read together; what the core is given and returns is
``wrapper.dialects.acp.actions``.

The shell hands it the agent's stdout lines (``feed``), the time (``tick``)
and its own decisions (``prompt``, ``decide_permission``, ``cancel``,
``close``); each call returns what came of it, in order: normalized events
(``wrapper.core.events``) and actions for the shell (``Send`` a message on the
agent's stdin, ``PermissionRequested``, ``TurnEnded``, ``Failed``,
``CloseInput``).

Session: ``initialize`` -> ``session/new`` (-> ``authenticate`` and
``session/new`` again, only when the agent answers that authentication is
required and a method was given) -> ``session/prompt`` with the task -> one
prompt turn after another (each answered by a ``stopReason``) -> close.
``initialize``, ``authenticate`` and ``session/new`` have deadlines; a prompt
turn has none of its own (the run's limits bound it, and the shell cancels).

Normalization:

- ``agent_message_chunk`` (text content) -> ``TextDelta``; the turn's text is
  the assistant message's text: the text of the turn's last message where
  the chunks carry a ``messageId`` (a change of id starts a new message, as
  when an agent asks the model again after ``max_tokens``), else every
  chunk of the turn (the protocol then marks no boundary: a retry's text
  follows the text it replaces). Text that comes outside a prompt turn
  (after its answer, before the next prompt) belongs to no turn: a warning,
  once between two turns, and no part of any answer.
- ``tool_call`` / ``tool_call_update`` and the ``toolCall`` of a permission
  request (the turn's record: ``wrapper.dialects.acp.tools``)
  -> ``ToolStarted`` the first time an id is seen and ``ToolEnded``
  at ``completed`` / ``failed`` (once). ACP names no tool: the tool's name is
  its ``kind`` (``execute``, ``read``, ``edit``, ...; ``other`` when absent),
  its summary the title, its input ``rawInput`` (or ``{}``). A tool the
  wrapper refused ends there, as an error carrying the reason (some agents
  never report a refused call). A tool update outside a prompt turn (after
  its answer, between turns, after the close) is a warning, never a tool:
  the turn it belonged to is over.
- ``agent_thought_chunk``, ``plan``, ``usage_update`` (context fill, not
  tokens spent), ``available_commands_update`` and the other session
  updates are dropped.
- The prompt response ends the turn: an ``AssistantMessage`` whose stop
  reason maps ``stopReason`` (``end_turn`` -> stop, ``max_tokens`` and
  ``max_turn_requests`` -> length, ``refusal`` -> error, ``cancelled`` ->
  aborted; anything else kept as it is, never terminal), or ``error`` with
  the message of a JSON-RPC error. Usage comes from the response's ``usage``
  or its ``_meta.quota`` where an agent puts it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wrapper.core.events import (
    AgentWarning,
    AssistantMessage,
    SessionStarted,
    StopReason,
    TextDelta,
    Usage,
    canonical_stop_reason,
)
from wrapper.core.limits import LATE_TEXT_CHARS, MAX_WAITING_PERMISSIONS
from wrapper.dialects.acp import jsonrpc
from wrapper.dialects.acp.actions import (
    AcpOptions,
    CloseInput,
    Failed,
    Output,
    PermissionRequested,
    PermissionWithdrawn,
    PromptAnswered,
    Send,
    StoppedAnswering,
    TurnEnded,
)
from wrapper.dialects.acp.tools import TurnTools
from wrapper.dialects.base import as_count, as_str, decode_object

PROTOCOL_VERSION = 1

#: ``stopReason`` of a prompt response -> canonical stop reason.
STOP_REASONS: Mapping[str, StopReason] = {
    "end_turn": StopReason.STOP,
    "max_tokens": StopReason.LENGTH,
    "max_turn_requests": StopReason.LENGTH,
    "refusal": StopReason.ERROR,
    "cancelled": StopReason.ABORTED,
}


#: Messages to the agent handed to the shell but not written yet, past
#: which the error answers to the agent's own requests are dropped: its
#: stdin pipe holds about 600 such answers (64 KiB), so an agent this far
#: behind is not reading at all, and a flood of its requests must not grow
#: the queue without bound (each answer waiting costs memory until written).
MAX_UNWRITTEN_MESSAGES = 1024
#: How much of a method name an error answer repeats.
QUOTED_METHOD_CHARS = 100

#: How much of an agent's error message a failure quotes.
QUOTED_ERROR_CHARS = 500

#: Option kinds, most preferred first, for each decision on a permission request.
_ALLOW_KINDS = ("allow_once", "allow_always")
_REJECT_KINDS = ("reject_once", "reject_always")


class Phase(enum.Enum):
    NEW = "new"
    INITIALIZING = "initializing"
    AUTHENTICATING = "authenticating"
    CREATING_SESSION = "creating_session"
    PROMPTING = "prompting"
    #: Between turns: the session is alive and waits for a prompt.
    IDLE = "idle"
    CLOSED = "closed"
    FAILED = "failed"


@dataclass(slots=True)
class _Turn:
    """The turn in progress: its text and tools."""

    #: The text of the turn's current message (its last, once the turn is over).
    text: list[str] = field(default_factory=list)
    #: The ``messageId`` of the chunks of that message, when the agent names it.
    message_id: str | None = None


class AcpClient:
    """One ACP session with one agent process, driven by the shell."""

    def __init__(self, options: AcpOptions, *, passive: bool = False) -> None:
        self.options = options
        #: Reading one side of a session it does not hold (the agent's output
        #: saved in stdout.log): the session is the one the agent names, an
        #: answer to an unknown request that carries a ``stopReason`` (or an
        #: error) ends a turn, and what it would send is only discarded.
        self.passive = passive
        self.phase = Phase.NEW
        self.session_id: str | None = None
        self.agent_info: Mapping[str, Any] | None = None
        self.auth_methods: tuple[str, ...] = ()
        #: Prompt turns sent so far (the first carries the task).
        self.turns = 0
        #: The last prompt's name for the shell (``PromptAnswered``), and the
        #: prompt whose turn has not begun yet.
        self.prompt_ticket: str | None = None
        self._unanswered: str | None = None
        self._outbox = jsonrpc.Outbox()
        self._authenticated = False
        self._tools = TurnTools()
        self._turn = _Turn()
        #: The agent's stdout has ended (``output_ended``).
        self._output_gone = False
        #: Answer text chunks dropped since the last prompt: none belonged to a turn.
        self._late_chunks = 0
        #: This turn's permission requests denied at once (too many waiting).
        self._denied_at_once = 0
        #: Messages handed to the shell and not reported written (``written``).
        self.unwritten = 0
        #: Error answers to the agent's requests dropped while it did not read.
        self.replies_dropped = 0
        #: Permission requests not answered yet: id key -> (raw id, options, tool id).
        self._permissions: dict[jsonrpc.IdKey, tuple[Any, tuple[tuple[str, str], ...], str]] = {}

    # --- the shell's calls ----------------------------------------------

    def start(self, now: float) -> list[Output]:
        """Open the connection: the ``initialize`` request."""
        if self.phase is not Phase.NEW:
            return []
        self.phase = Phase.INITIALIZING
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": {"readTextFile": False, "writeTextFile": False},
                "terminal": False,
            },
            "clientInfo": {
                "name": self.options.client_name,
                "version": self.options.client_version,
            },
        }
        return [self._request("initialize", params, now + self.options.initialize_timeout)]

    def feed(self, line: bytes, now: float) -> list[Output]:
        """One line of the agent's stdout."""
        obj = decode_object(line)
        if not isinstance(obj, dict):
            return [obj]
        message = jsonrpc.classify(obj)
        if isinstance(message, jsonrpc.Malformed):
            return [
                AgentWarning(
                    code="acp_malformed", message=f"not a JSON-RPC message: {message.reason}"
                )
            ]
        if isinstance(message, jsonrpc.Response):
            return self._on_response(message, now)
        if isinstance(message, jsonrpc.Request):
            return self._on_request(message)
        return self._on_notification(message)

    def prompt(self, text: str) -> list[Output]:
        """The next prompt turn on the live session (a steer)."""
        if self.phase is not Phase.IDLE or self.session_id is None:
            return []
        out: list[Output] = [self._send_prompt(text)]
        if self._output_gone:
            # Its output ended between turns: this turn cannot be answered.
            out += self.output_ended()
        return out

    def decide_permission(
        self, request_id: Any, allow: bool, reason: str | None = None
    ) -> list[Output]:
        """Answer a ``PermissionRequested``: the option of the decision's kind
        (once before always); a refusal ends the tool as an error with ``reason``."""
        key = jsonrpc.id_key(request_id)
        entry = self._permissions.pop(key, None) if key is not None else None
        if entry is None:
            return []
        raw_id, options, call_id = entry
        kinds = _ALLOW_KINDS if allow else _REJECT_KINDS
        chosen = next((oid for kind in kinds for oid, k in options if k == kind), None)
        out: list[Output] = []
        if chosen is None:
            outcome: dict[str, Any] = {"outcome": "cancelled"}
            offered = ", ".join(k for _, k in options) or "none"
            out.append(
                AgentWarning(
                    code="acp_permission_option",
                    message=f"the agent offered no {'allow' if allow else 'reject'} option "
                    f"(offered: {offered}); the request was answered as cancelled",
                )
            )
        else:
            outcome = {"outcome": "selected", "optionId": chosen}
        out.append(self._send(jsonrpc.result(raw_id, {"outcome": outcome})))
        if not allow or chosen is None:
            out += self._tools.end(call_id, is_error=True, result=reason or "permission denied")
        return out

    def cancel(self) -> list[Output]:
        """Cancel the turn in progress (``session/cancel``); every permission
        request still open is answered as cancelled. Nothing outside a turn."""
        if self.phase is not Phase.PROMPTING or self.session_id is None:
            return []
        out: list[Output] = [
            self._send(jsonrpc.notification("session/cancel", {"sessionId": self.session_id}))
        ]
        return out + self._cancel_permissions()

    def close(self) -> list[Output]:
        """End the session: the shell closes the agent's stdin."""
        if self.phase in (Phase.CLOSED, Phase.FAILED):
            return []
        self.phase = Phase.CLOSED
        return [CloseInput()]

    def output_ended(self) -> list[Output]:
        """The agent's stdout reached its end (the process may live on)."""
        self._output_gone = True
        waiting = {
            Phase.INITIALIZING: "initialize",
            Phase.AUTHENTICATING: "authenticate",
            Phase.CREATING_SESSION: "session/new",
            Phase.PROMPTING: "session/prompt",
        }.get(self.phase)
        if waiting is None or self.passive:
            return []
        return [
            StoppedAnswering(
                f"the agent closed its output while the wrapper awaited its answer to {waiting}"
            )
        ]

    def next_deadline(self) -> float | None:
        """When ``tick`` has something to report, at the earliest."""
        return self._outbox.next_deadline()

    def tick(self, now: float) -> list[Output]:
        """Requests whose deadline passed fail the session."""
        late = self._outbox.expired(now)
        if not late:
            return []
        names = ", ".join(request.method for request in late)
        return self._fail(f"the agent did not answer {names} in time")

    # --- incoming ------------------------------------------------------

    def _on_response(self, response: jsonrpc.Response, now: float) -> list[Output]:
        if response.id is None:
            text = (
                jsonrpc.error_text(response.error) if response.error else "a response without an id"
            )
            return [AgentWarning(code="acp_error", message=f"the agent reported an error: {text}")]
        request = self._outbox.settle(response.id)
        if request is None and self.passive:
            return self._passive_response(response)
        if request is None:
            return [
                AgentWarning(
                    code="acp_unknown_response",
                    message=f"the agent answered a request never sent (id {response.id!r})",
                )
            ]
        if request.method == "session/prompt":
            return self._turn_ended(response)
        if request.method == "initialize":
            return self._initialized(response, now)
        if request.method == "authenticate":
            if response.error is not None:
                return self._fail(f"authenticate failed: {jsonrpc.error_text(response.error)}")
            self._authenticated = True
            return [self._new_session(now)]
        if request.method == "session/new":
            return self._session_created(response, now)
        return []

    def _passive_response(self, response: jsonrpc.Response) -> list[Output]:
        result = response.result
        if isinstance(result, Mapping) and isinstance(result.get("sessionId"), str):
            self.session_id = result["sessionId"]
            return [SessionStarted(session_id=self.session_id)]
        if response.error is not None or (isinstance(result, Mapping) and "stopReason" in result):
            return self._turn_ended(response)
        return []

    def _adopt_session(self, params: Mapping[str, Any]) -> None:
        """A passive reader takes the session the agent names."""
        if self.passive and self.session_id is None and isinstance(params.get("sessionId"), str):
            self.session_id = params["sessionId"]

    def _initialized(self, response: jsonrpc.Response, now: float) -> list[Output]:
        if response.error is not None:
            return self._fail(f"the agent refused initialize: {jsonrpc.error_text(response.error)}")
        result = response.result
        if not isinstance(result, Mapping):
            return self._fail("the agent's answer to initialize is not an object")
        version = result.get("protocolVersion")
        if version != PROTOCOL_VERSION:
            return self._fail(
                f"the agent speaks ACP protocol version {version!r}; "
                f"the wrapper speaks version {PROTOCOL_VERSION}"
            )
        info = result.get("agentInfo")
        self.agent_info = info if isinstance(info, Mapping) else None
        methods = result.get("authMethods")
        if isinstance(methods, list):
            self.auth_methods = tuple(
                m["id"] for m in methods if isinstance(m, Mapping) and isinstance(m.get("id"), str)
            )
        return [self._new_session(now)]

    def _session_created(self, response: jsonrpc.Response, now: float) -> list[Output]:
        error = response.error
        if error is not None:
            if error.get("code") == jsonrpc.AUTH_REQUIRED and not self._authenticated:
                method = self.options.auth_method
                said = _quoted(jsonrpc.error_text(error))
                if method is None and not self.auth_methods:
                    # Nothing the wrapper could send would do: such an agent
                    # is logged in by a command of its own.
                    return self._fail(
                        "the agent requires authentication and offers no method a client "
                        "can use: log in with the agent's own command first (--auth-method "
                        f"cannot help); it said: {said}"
                    )
                if method is None:
                    offered = ", ".join(self.auth_methods)
                    return self._fail(
                        f"the agent requires authentication (its methods: {offered}); name "
                        "the one to use with --auth-method or the settings' acp.authMethod; "
                        f"it said: {said}"
                    )
                self.phase = Phase.AUTHENTICATING
                deadline = now + self.options.authenticate_timeout
                return [self._request("authenticate", {"methodId": method}, deadline)]
            return self._fail(f"the agent refused session/new: {jsonrpc.error_text(error)}")
        result = response.result
        session = result.get("sessionId") if isinstance(result, Mapping) else None
        if not isinstance(session, str) or not session:
            return self._fail("the agent's answer to session/new has no sessionId")
        self.session_id = session
        return [
            SessionStarted(session_id=session, cwd=self.options.cwd),
            self._send_prompt(self.options.task),
        ]

    def _turn_ended(self, response: jsonrpc.Response) -> list[Output]:
        turn, self._turn = self._turn, _Turn()
        self.phase = Phase.IDLE
        out: list[Output] = []
        if self._unanswered is not None:
            # Answered before any update: an error refused the prompt itself.
            error = jsonrpc.error_text(response.error) if response.error is not None else None
            out.append(self._prompt_answered(error))
        out += self._cancel_permissions()
        text, calls = "".join(turn.text), tuple(self._tools.calls)
        self._tools.clear()
        if response.error is not None:
            code = response.error.get("code")
            # JSON-RPC codes are negative; an agent that puts the provider's
            # HTTP status there (Gemini's 401) says the API call failed.
            status = code if isinstance(code, int) and 400 <= code <= 599 else None
            message = AssistantMessage(
                stop_reason=str(StopReason.ERROR),
                raw_stop_reason=f"error {code}" if isinstance(code, int) else "error",
                text=text,
                tool_calls=calls,
                error_message=jsonrpc.error_text(response.error),
                api_status=status,
            )
        else:
            result = response.result if isinstance(response.result, Mapping) else {}
            raw = as_str(result.get("stopReason"))
            if raw is None:
                out.append(
                    AgentWarning(
                        code="acp_no_stop_reason", message="the prompt response has no stopReason"
                    )
                )
            usage, model = _usage(result)
            message = AssistantMessage(
                stop_reason=canonical_stop_reason(raw, STOP_REASONS),
                raw_stop_reason=raw,
                text=text,
                usage=usage,
                model=model,
                tool_calls=calls,
            )
        return [*out, message, TurnEnded(message)]

    def _on_request(self, request: jsonrpc.Request) -> list[Output]:
        if request.method != "session/request_permission":
            name = request.method[:QUOTED_METHOD_CHARS]
            message = f"method not supported: {name}"
            return self._refuse(request, jsonrpc.METHOD_NOT_FOUND, message)
        params = request.params if isinstance(request.params, Mapping) else {}
        self._adopt_session(params)
        if self.session_id is None or params.get("sessionId") != self.session_id:
            return self._refuse(request, jsonrpc.INVALID_PARAMS, "no such session")
        tool_call = params.get("toolCall")
        call_id = tool_call.get("toolCallId") if isinstance(tool_call, Mapping) else None
        if not isinstance(call_id, str) or not isinstance(tool_call, Mapping):
            return self._refuse(request, jsonrpc.INVALID_PARAMS, "toolCall.toolCallId missing")
        out = self._tools.update(tool_call, announce_end=False)
        options = tuple(
            (o["optionId"], o["kind"])
            for o in params.get("options") or ()
            if isinstance(o, Mapping)
            and isinstance(o.get("optionId"), str)
            and isinstance(o.get("kind"), str)
        )
        if self.passive:
            return out  # answered by whoever held the session
        tool = self._tools.info(call_id)
        if tool is None or len(self._permissions) >= MAX_WAITING_PERMISSIONS:
            return out + self._deny_at_once(request, options, call_id)
        key = jsonrpc.id_key(request.id)
        assert key is not None
        self._permissions[key] = (request.id, options, call_id)
        out.append(PermissionRequested(request.id, tool, options))
        return out

    def _deny_at_once(
        self, request: jsonrpc.Request, options: tuple[tuple[str, str], ...], call_id: str
    ) -> list[Output]:
        """A permission request past the bound of those waiting (or about a
        tool past the turn's bound): denied now, undecided, so that a flood
        of them holds no task or record and the agent is still answered."""
        chosen = next((oid for kind in _REJECT_KINDS for oid, k in options if k == kind), None)
        outcome = (
            {"outcome": "cancelled"}
            if chosen is None
            else {"outcome": "selected", "optionId": chosen}
        )
        why = f"denied undecided: {MAX_WAITING_PERMISSIONS} permission requests were waiting"
        out: list[Output] = [self._send(jsonrpc.result(request.id, {"outcome": outcome}))]
        out += self._tools.end(call_id, is_error=True, result=why)
        self._denied_at_once += 1
        if self._denied_at_once == 1:
            out.append(
                AgentWarning(
                    code="acp_permissions_denied",
                    message=f"the agent asked about more tools at once than the "
                    f"{MAX_WAITING_PERMISSIONS} permission requests that may wait for a "
                    "decision (or about more tools than a turn keeps a record of); those "
                    "past it were denied without running any hook or asking anyone",
                )
            )
        return out

    def _on_notification(self, note: jsonrpc.Notification) -> list[Output]:
        if note.method != "session/update":
            return []
        params = note.params if isinstance(note.params, Mapping) else {}
        self._adopt_session(params)
        if self.session_id is None:
            return [
                AgentWarning(
                    code="acp_early_message", message="a session/update before any session existed"
                )
            ]
        if params.get("sessionId") != self.session_id:
            return [
                AgentWarning(
                    code="acp_unknown_session", message="a session/update for another session"
                )
            ]
        update = params.get("update")
        if not isinstance(update, Mapping):
            return []
        if self._unanswered is not None and self.phase is Phase.PROMPTING:
            # The turn's first update: the agent took its prompt.
            return [self._prompt_answered(None), *self._on_update(update)]
        return self._on_update(update)

    def _on_update(self, update: Mapping[str, Any]) -> list[Output]:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update.get("content")
            text = content.get("text") if isinstance(content, Mapping) else None
            if isinstance(text, str) and text:
                if not self.passive and self.phase is not Phase.PROMPTING:
                    return self._late_text(text)
                turn = self._turn
                message_id = as_str(update.get("messageId"))
                if message_id is not None and message_id != turn.message_id:
                    # A new message of the same turn (the agent asked the
                    # model again): the answer is the last message, not every
                    # attempt's text glued together.
                    turn.text.clear()
                    turn.message_id = message_id
                turn.text.append(text)
                return [TextDelta(text=text)]
            return []
        if kind in ("tool_call", "tool_call_update"):
            if not self.passive and self.phase is not Phase.PROMPTING:
                # The turn has been answered: a tool reported now is not work
                # the run waits for, and must not reopen a run that ended.
                return [
                    AgentWarning(
                        code="acp_update_outside_turn",
                        message=f"a {kind} update arrived outside a prompt turn "
                        f"(tool {as_str(update.get('toolCallId'))!r}); it was ignored",
                    )
                ]
            return self._tools.update(update, announce_end=True)
        return []

    def _late_text(self, text: str) -> list[Output]:
        """Answer text that came when no prompt turn was open (after the
        turn's answer, or after the close): the turn it belonged to is over,
        and the next turn's answer must not begin with it. One warning
        between two turns, however many chunks."""
        self._late_chunks += 1
        if self._late_chunks > 1:
            return []
        quoted = text if len(text) <= LATE_TEXT_CHARS else text[:LATE_TEXT_CHARS] + "…"
        return [
            AgentWarning(
                code="acp_text_outside_turn",
                message="the agent sent answer text after its turn's answer; it belongs to "
                f"no turn and was left out of every answer: {quoted!r}",
            )
        ]

    # --- tools ---------------------------------------------------------

    def _cancel_permissions(self) -> list[Output]:
        """Every open permission request answered as cancelled; its tool did not run."""
        out: list[Output] = []
        for raw_id, _, call_id in self._permissions.values():
            out.append(self._send(jsonrpc.result(raw_id, {"outcome": {"outcome": "cancelled"}})))
            out.append(PermissionWithdrawn(raw_id))
            out += self._tools.end(call_id, is_error=True, result="cancelled before it was allowed")
        self._permissions.clear()
        return out

    # --- outgoing ------------------------------------------------------

    def written(self) -> None:
        """The shell wrote one message this client handed it (a ``Send``)."""
        self.unwritten = max(0, self.unwritten - 1)

    def _send(self, message: dict[str, Any]) -> Send:
        self.unwritten += 1
        return Send(message)

    def _refuse(self, request: jsonrpc.Request, code: int, message: str) -> list[Output]:
        """An error answer to a request of the agent's, unless the agent has
        stopped reading its input: an agent that sends requests without
        reading the answers would otherwise make them pile up without bound.
        Past the limit they are dropped (one warning); the wrapper's own
        messages (prompts, permission answers, cancels) never are."""
        if self.passive or self.unwritten < MAX_UNWRITTEN_MESSAGES:
            return [self._send(jsonrpc.error(request.id, code, message))]
        self.replies_dropped += 1
        if self.replies_dropped > 1:
            return []
        return [
            AgentWarning(
                code="acp_replies_dropped",
                message=f"the agent is not reading its input ({self.unwritten} messages to it "
                "wait unwritten) yet keeps sending requests; the error answers to its "
                f"requests the wrapper does not serve (such as {request.method[:80]!r}) are "
                "dropped until it reads again",
            )
        ]

    def _request(self, method: str, params: Any, deadline: float | None) -> Send:
        _, message = self._outbox.request(method, params, deadline)
        return self._send(message)

    def _new_session(self, now: float) -> Send:
        self.phase = Phase.CREATING_SESSION
        params = {
            "cwd": self.options.cwd,
            "mcpServers": [dict(s) for s in self.options.mcp_servers],
        }
        return self._request("session/new", params, now + self.options.session_timeout)

    def _send_prompt(self, text: str) -> Send:
        self.phase = Phase.PROMPTING
        self.turns += 1
        self._late_chunks = self._denied_at_once = 0
        params = {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
        pending, message = self._outbox.request("session/prompt", params, None)
        self.prompt_ticket = self._unanswered = str(pending.id)
        return self._send(message)

    def _prompt_answered(self, refused: str | None) -> PromptAnswered:
        ticket, self._unanswered = self._unanswered, None
        assert ticket is not None
        return PromptAnswered(ticket, refused)

    def _fail(self, message: str) -> list[Output]:
        """The session is over: the agent's stdin closes after the failure."""
        closing = self.phase is not Phase.CLOSED
        self.phase = Phase.FAILED
        return [Failed(message), *([CloseInput()] if closing else [])]


def _quoted(text: str) -> str:
    """An agent's error message as a failure quotes it: bounded, since the
    agent decides its length."""
    if len(text) > QUOTED_ERROR_CHARS:
        text = text[:QUOTED_ERROR_CHARS] + "…"
    return repr(text)


def _usage(result: Mapping[str, Any]) -> tuple[Usage | None, str | None]:
    """Token usage and model of a prompt response: its ``usage`` (opencode),
    else its ``_meta.quota`` (Gemini)."""
    usage = result.get("usage")
    if isinstance(usage, Mapping):
        return (
            Usage(
                input=as_count(usage.get("inputTokens")),
                output=as_count(usage.get("outputTokens")),
                cache_read=as_count(usage.get("cachedReadTokens")),
                cache_write=as_count(usage.get("cachedWriteTokens")),
                total_tokens=as_count(usage.get("totalTokens")),
            ),
            None,
        )
    meta = result.get("_meta")
    quota = meta.get("quota") if isinstance(meta, Mapping) else None
    if not isinstance(quota, Mapping):
        return None, None
    counts = quota.get("token_count")
    found = None
    if isinstance(counts, Mapping):
        found = Usage(
            input=as_count(counts.get("input_tokens")), output=as_count(counts.get("output_tokens"))
        )
    model = None
    models = quota.get("model_usage")
    if isinstance(models, list) and len(models) == 1 and isinstance(models[0], Mapping):
        model = as_str(models[0].get("model"))
    return found, model
