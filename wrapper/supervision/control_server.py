"""The run's control socket: ``agent-wrapper steer`` and ``abort`` (and
``wrapper.steer``, ``wrapper.abort``) connect, send one request and read
its receipts on the same connection (``wrapper.core.control``).

Nothing polls: the server waits in ``accept`` and each connection waits for
its steer to settle, so a run nobody steers costs no wakeups. Every client
is bounded: the request must arrive within ``REQUEST_TIMEOUT`` and fit in
``REQUEST_MAX_BYTES``, a receipt that cannot be written within
``SEND_TIMEOUT`` is given up, and past ``MAX_CONNECTIONS`` at once a client
is told to come back later.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from wrapper.core.control import (
    REQUEST_MAX_BYTES,
    AbortRequest,
    BadRequest,
    ExternalSteer,
    SteerRequest,
    parse_request,
)
from wrapper.core.jsonout import dumps
from wrapper.files import control_socket

#: How long a client may take to send its request.
REQUEST_TIMEOUT = 5.0
#: How long a receipt may take to be written to a client that does not read.
SEND_TIMEOUT = 5.0
#: Connections served at once; more are answered at once and closed.
MAX_CONNECTIONS = 64
#: Connections the system holds for the server before it accepts them.
BACKLOG = 128
#: At the run's end, how long the last receipts may take to go out.
CLOSE_TIMEOUT = 1.0


class Controller(Protocol):
    """What the socket's requests are carried out by: the run."""

    def steer(self, request: SteerRequest) -> ExternalSteer: ...

    def changed(self, steer: ExternalSteer, state: str) -> Awaitable[dict[str, Any] | None]:
        """Waits for ``steer`` to leave ``state``: its receipt then, or None
        when it never will (the run ended with it sent)."""
        ...

    def abort(self, request: AbortRequest) -> str | None:
        """None: accepted; else why it was refused."""
        ...

    def finished(self) -> Awaitable[str | None]:
        """Waits for the run's end; its outcome."""
        ...


class ControlServer:
    def __init__(
        self, place: control_socket.Place, controller: Controller, warn: Callable[[str], None]
    ) -> None:
        self.place = place
        self.path = place.path
        self.controller = controller
        self.warn = warn
        self._inode: int | None = None
        self._connections = 0
        self._idle = trio.Event()
        self._idle.set()
        self._scope: trio.CancelScope | None = None

    # Ctrl-C under a caller's loop goes to its main task, which ends the run
    # as SIGINT does; raised here it would cancel the run halfway.
    @trio.lowlevel.enable_ki_protection
    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen until ``close``; ``task_status`` is told the path once
        clients can connect (or None when no socket could be made)."""
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await sock.bind(self.path)
            os.chmod(self.path, 0o600)
            self._inode = os.lstat(self.path).st_ino
            sock.listen(BACKLOG)
        except OSError as exc:
            sock.close()
            control_socket.remove(self.place, None)
            self.warn(f"the run takes no steer or abort: cannot listen at {self.path}: {exc}")
            task_status.started(None)
            return
        listener = trio.SocketListener(sock)
        try:
            with trio.CancelScope() as self._scope:
                async with trio.open_nursery() as nursery:
                    task_status.started(self.path)
                    while True:
                        try:
                            stream = await listener.accept()
                        except OSError as exc:
                            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS):
                                await trio.sleep(0.1)  # out of descriptors: let some close
                                continue
                            raise
                        nursery.start_soon(self._serve_one, stream)
        finally:
            control_socket.remove(self.place, self._inode)
            with trio.CancelScope(shield=True):
                await listener.aclose()

    async def close(self) -> None:
        """Stop listening, once the receipts being written went out (bounded)."""
        with trio.move_on_after(CLOSE_TIMEOUT):
            await self._idle.wait()
        if self._scope is not None:
            self._scope.cancel()
        control_socket.remove(self.place, self._inode)

    @trio.lowlevel.enable_ki_protection  # as ``serve``: a task of its own
    async def _serve_one(self, stream: trio.SocketStream) -> None:
        self._connections += 1
        self._idle = trio.Event() if self._connections == 1 else self._idle
        try:
            async with stream:
                if self._connections > MAX_CONNECTIONS:
                    await _send(
                        stream,
                        {"state": "busy", "why": "the run is busy with other requests; try again"},
                    )
                    return
                await self._answer(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the client went away; a queued steer stays queued
        finally:
            self._connections -= 1
            if not self._connections:
                self._idle.set()

    async def _answer(self, stream: trio.SocketStream) -> None:
        request: SteerRequest | AbortRequest | None = None
        with trio.move_on_after(REQUEST_TIMEOUT):
            try:
                request = parse_request(await _read_request(stream))
            except BadRequest as exc:
                await _send(stream, _error(str(exc)))
                # What the client still sends is read and dropped (within the
                # request's time), so that closing does not reset the
                # connection before it read the answer.
                await stream.send_eof()
                while await stream.receive_some(65536):
                    pass
                return
        if request is None:
            await _send(stream, _error(f"no request within {REQUEST_TIMEOUT:g}s"))
            return
        if isinstance(request, AbortRequest):
            refused = self.controller.abort(request)
            if refused is not None:
                await _send(stream, {"state": "refused", "why": refused})
                return
            await _send(stream, {"state": "accepted"})
            outcome = await self.controller.finished()
            await _send(stream, {"state": "ended", "outcome": outcome})
            return
        steer = self.controller.steer(request)
        receipt: dict[str, Any] | None = steer.receipt()
        # ``sent`` is said too, and the acknowledgement after it.
        while receipt is not None:
            await _send(stream, receipt)
            if receipt["state"] not in ("queued", "sent"):
                return
            receipt = await self.controller.changed(steer, receipt["state"])


async def _read_request(stream: trio.SocketStream) -> bytes:
    """One line (or everything up to the client's end of sending)."""
    buffer = bytearray()
    while b"\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            break
        buffer += data
        if len(buffer) > REQUEST_MAX_BYTES + 1:
            raise BadRequest(f"the request is larger than {REQUEST_MAX_BYTES} bytes")
    line = bytes(buffer).split(b"\n", 1)[0]
    if len(line) > REQUEST_MAX_BYTES:
        raise BadRequest(f"the request is larger than {REQUEST_MAX_BYTES} bytes")
    if not line.strip():
        raise BadRequest("the request is empty (send one JSON object on one line)")
    return line


def _error(message: str) -> dict[str, Any]:
    return {"state": "error", "error": message}


async def _send(stream: trio.SocketStream, answer: dict[str, Any]) -> None:
    with trio.move_on_after(SEND_TIMEOUT):
        await stream.send_all(dumps(answer) + b"\n")
