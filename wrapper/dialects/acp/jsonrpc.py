"""JSON-RPC 2.0 as the Agent Client Protocol frames it, without I/O.

One JSON object per line in each direction. The wrapper numbers its own
requests from 1; an agent's request ids may be ``0``, any number or a
string, so ids are compared by value *and* type and never by truthiness.
Every request the wrapper sends is kept in a table with its deadline (a
monotonic time, or None for a request bounded only by the run's limits):
the shell asks for the earliest one and reports the time; nothing here
reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

#: JSON-RPC error codes the wrapper sends or reads.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: ACP's "authentication required" error (the answer to ``session/new``).
AUTH_REQUIRED = -32000

#: A request id as it is compared: its JSON type, then its value (``1`` and
#: ``"1"`` are different ids; ``true`` is no id at all).
IdKey = tuple[str, int | float | str]


def id_key(value: Any) -> IdKey | None:
    """The key a request id is matched by, or None for a value that is no id."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    return None


def encode(message: Mapping[str, Any]) -> bytes:
    """One message as the line that carries it."""
    return orjson.dumps(message) + b"\n"


@dataclass(frozen=True, slots=True)
class Request:
    """A request from the agent (it expects an answer with the same id)."""

    id: Any
    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class Notification:
    """A JSON-RPC notification: a method called without an answer."""

    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class Response:
    """An answer: ``error`` is set (a dict) when it is an error response.

    ``id`` is None for an error the agent could not tie to a request (a
    parse error is answered so, without an ``id`` member, by some agents).
    """

    id: Any
    result: Any = None
    error: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Malformed:
    """An object that is no JSON-RPC message; ``reason`` says why."""

    reason: str


Message = Request | Notification | Response | Malformed


def classify(obj: Mapping[str, Any]) -> Message:
    """What a decoded object from the agent is.

    A missing ``"jsonrpc": "2.0"`` is tolerated (the shape decides); a
    message with neither ``method`` nor ``id`` is still a response when it
    carries ``error``.
    """
    method = obj.get("method")
    has_id = "id" in obj
    if isinstance(method, str):
        params = obj.get("params")
        if not has_id:
            return Notification(method, params)
        if id_key(obj["id"]) is None:
            return Malformed(f"request {method!r} with an id that is not a number or a string")
        return Request(obj["id"], method, params)
    if "method" in obj:
        return Malformed("a method name that is not a string")
    error = obj.get("error")
    if "result" in obj or "error" in obj:
        if "error" in obj and not isinstance(error, Mapping):
            return Malformed("an error that is not an object")
        if has_id and obj["id"] is not None and id_key(obj["id"]) is None:
            return Malformed("a response whose id is not a number or a string")
        return Response(obj.get("id"), obj.get("result"), error)
    return Malformed("neither a request, a notification nor a response")


def error_text(error: Mapping[str, Any]) -> str:
    """An error response as one line for a person: its message, then what its
    ``data`` adds (a ``message`` or ``details`` string); the code is left to
    the raw stop reason."""
    message = error.get("message")
    text = message if isinstance(message, str) and message else "error"
    data = error.get("data")
    if isinstance(data, Mapping):
        for key in ("message", "details"):
            extra = data.get(key)
            if isinstance(extra, str) and extra and extra not in text:
                text = f"{text}: {extra}"
                break
    return text


@dataclass(slots=True)
class Pending:
    """A request the wrapper sent and awaits the answer to."""

    id: int
    method: str
    params: Any
    #: Monotonic time after which the request counts as unanswered; None: no deadline.
    deadline: float | None


@dataclass(slots=True)
class Outbox:
    """Numbers the wrapper's requests and keeps those not answered yet."""

    next_id: int = 1
    pending: dict[IdKey, Pending] = field(default_factory=dict)

    def request(
        self, method: str, params: Any, deadline: float | None
    ) -> tuple[Pending, dict[str, Any]]:
        """A new request: its table entry and the message to send."""
        request = Pending(self.next_id, method, params, deadline)
        self.next_id += 1
        key = id_key(request.id)
        assert key is not None
        self.pending[key] = request
        message = {"jsonrpc": "2.0", "id": request.id, "method": method, "params": params}
        return request, message

    def settle(self, response_id: Any) -> Pending | None:
        """The request ``response_id`` answers, taken off the table (None when
        no request of ours has that id)."""
        key = id_key(response_id)
        return None if key is None else self.pending.pop(key, None)

    def next_deadline(self) -> float | None:
        deadlines = [p.deadline for p in self.pending.values() if p.deadline is not None]
        return min(deadlines, default=None)

    def expired(self, now: float) -> list[Pending]:
        """Requests whose deadline passed, taken off the table."""
        late = [p for p in self.pending.values() if p.deadline is not None and now >= p.deadline]
        for request in late:
            del self.pending[("number", request.id)]
        return late


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def result(request_id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
