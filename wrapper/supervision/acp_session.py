"""The trio side of an ACP session: the client core wired to the agent's pipes.

The core decides; this module carries out what it says: messages are
written to the agent's stdin in order by one writer task (``LineWriter``:
a slow agent never blocks the reader of its stdout), every message both
ways is recorded in ``protocol.jsonl``, the core's request deadlines are kept by a
timer task, and ``CloseInput`` closes stdin once everything before it is
written. Everything else the core puts out (events, ``PermissionRequested``,
``TurnEnded``, ``Failed``) goes to ``on_output`` for the supervisor, which
answers through ``decide``, ``prompt``, ``cancel`` and ``close``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import trio

from wrapper.core.events import Event
from wrapper.dialects.acp import jsonrpc
from wrapper.dialects.acp.actions import (
    CloseInput,
    Output,
    PermissionRequested,
    PermissionWithdrawn,
    Send,
)
from wrapper.dialects.acp.client import AcpClient
from wrapper.dialects.acp.protocol_log import record, unparsed_line
from wrapper.dialects.base import decode_object
from wrapper.hooks.permission import PermissionGate
from wrapper.supervision.stdin_writer import LineWriter


class AcpDriver:
    """One ACP session over a child's stdin and the lines of its stdout (a
    ``LiveDriver``): a steer cancels the turn and is the next prompt."""

    steers_in_turn = False
    final_before_turn_end = False

    def __init__(
        self,
        client: AcpClient,
        stdin: trio.abc.SendStream,
        on_output: Callable[[Output], None],
        log: Callable[[bytes], None] | None = None,
        *,
        cancel_keeps_turn: bool = True,
    ) -> None:
        self.client = client
        self.cancel_keeps_turn = cancel_keeps_turn
        self.on_output = on_output
        self.log = log
        self.writer = LineWriter(stdin, log, client.written)
        self.started_at = self.writer.started_at
        #: Set once stdin is closed (asked for, or the agent stopped reading).
        self.input_closed = self.writer.input_closed
        self._timer: trio.CancelScope | None = None

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The writer and the deadline timer; returns once stdin is closed
        and nothing is left to write. Starts the session (``initialize``)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._deadlines)
            self._apply(self.client.start(trio.current_time()))
            task_status.started()
            await self.writer.write_all()
            nursery.cancel_scope.cancel()

    # -- the supervisor's calls -------------------------------------------------

    def feed(self, line: bytes) -> None:
        """One line of the agent's stdout."""
        now = trio.current_time()
        if self.log is not None:
            obj = decode_object(line)
            self.log(
                record(
                    now - self.started_at,
                    "in",
                    obj if isinstance(obj, dict) else unparsed_line(line),
                )
            )
        self._apply(self.client.feed(line, now))

    def output_ended(self) -> None:
        """The agent's stdout reached its end."""
        self._apply(self.client.output_ended())

    def decide(self, request_id: Any, allow: bool, reason: str | None = None) -> None:
        self._apply(self.client.decide_permission(request_id, allow, reason))

    def prompt(self, text: str) -> None:
        self._apply(self.client.prompt(text))

    @property
    def prompt_ticket(self) -> str | None:
        return self.client.prompt_ticket

    def cancel(self) -> None:
        self._apply(self.client.cancel())

    def abort(self) -> bool:
        outputs = self.client.cancel()
        self._apply(outputs)
        return bool(outputs)

    def takes(self, when: str) -> bool:
        return False  # ACP has no message into a running turn

    def steer(self, text: str) -> bool:
        return False

    def follow_up(self, text: str) -> bool:
        return False

    def observe(self, event: Event) -> None:
        pass  # the session's events are the client's own

    def close(self) -> None:
        self._apply(self.client.close())

    # -- carrying out -------------------------------------------------------------

    def _apply(self, outputs: list[Output]) -> None:
        for output in outputs:
            if isinstance(output, Send):
                self.writer.send(output.message, jsonrpc.encode(output.message))
            elif isinstance(output, CloseInput):
                self.writer.close()
            else:
                self.on_output(output)
        if self._timer is not None:
            self._timer.deadline = self._deadline()

    def _deadline(self) -> float:
        deadline = self.client.next_deadline()
        return math.inf if deadline is None else deadline

    async def _deadlines(self) -> None:
        while True:
            with trio.CancelScope(deadline=self._deadline()) as scope:
                self._timer = scope
                await trio.sleep_forever()
            self._timer = None
            self._apply(self.client.tick(trio.current_time()))


class PermissionRequests:
    """A live session's permission requests while they are decided: each
    goes to the run's gate (``gate()`` gives it, or None to allow all),
    answered at once when no hook decides it, else in the attempt's
    background (``nursery()``; a hook may take a while: the agent waits, and
    so does its idle limit, a tool being under way), and one the session
    answered by itself meanwhile (its turn ended first) stops being decided:
    a person asked about it is no longer (the question closes), and the next
    question in line is asked. Once the attempt is over (no ``session()`` or
    ``nursery()``) a request is left alone. How many wait at once is the
    client core's bound (``MAX_WAITING_PERMISSIONS``): it denies those past
    it before they come here."""

    def __init__(
        self,
        session: Callable[[], AcpDriver | None],
        nursery: Callable[[], trio.Nursery | None],
        gate: Callable[[], PermissionGate | None],
    ) -> None:
        self._session = session
        self._nursery = nursery
        self._gate = gate
        self._deciding: dict[jsonrpc.IdKey, trio.CancelScope] = {}

    def requested(self, request: PermissionRequested) -> None:
        nursery, session = self._nursery(), self._session()
        if nursery is None or session is None:
            return
        gate = self._gate()
        now = (True, None) if gate is None else gate.decided_now(request.tool)
        if now is not None:
            # Nothing to wait for: no task, however many the agent sends.
            session.decide(request.request_id, *now)
            return
        scope = trio.CancelScope()
        key = jsonrpc.id_key(request.request_id)
        if key is not None:
            self._deciding[key] = scope
        nursery.start_soon(self._answer, session, request, scope)

    def withdrawn(self, withdrawn: PermissionWithdrawn) -> None:
        key = jsonrpc.id_key(withdrawn.request_id)
        scope = self._deciding.pop(key, None) if key is not None else None
        if scope is not None:
            scope.cancel()

    async def _answer(
        self, session: AcpDriver, request: PermissionRequested, scope: trio.CancelScope
    ) -> None:
        allow, reason = True, None
        with scope:
            gate = self._gate()
            if gate is not None:
                allow, reason = await gate.decide(request.tool)
        key = jsonrpc.id_key(request.request_id)
        if key is not None:
            self._deciding.pop(key, None)
        if scope.cancelled_caught:
            return
        # A request cancelled meanwhile (session/cancel) is already answered.
        session.decide(request.request_id, allow, reason)
