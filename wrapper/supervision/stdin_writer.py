"""Lines to an agent's stdin, written in order by one task: a slow agent
never blocks the reader of its stdout; every line is recorded in
``protocol.jsonl`` as it is handed over."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import orjson
import trio

from wrapper.core.timefmt import iso


class LineWriter:
    """Lines to a child's stdin from one task, in order; ``close`` ends them."""

    def __init__(
        self,
        stdin: trio.abc.SendStream,
        log: Callable[[bytes], None] | None,
        on_written: Callable[[], None] | None = None,
    ) -> None:
        self.stdin = stdin
        self.log = log
        self.on_written = on_written
        self.started_at = trio.current_time()
        self._send, self._outgoing = trio.open_memory_channel[bytes | None](math.inf)
        #: Set once stdin is closed (asked for, or the agent stopped reading).
        self.input_closed = trio.Event()
        self._record: Callable[[float, str, dict[str, Any]], bytes] | None = None
        if log is not None:
            # Only an ACP session keeps a protocol log: the ACP client's
            # modules, which its module imports, load for such a run only.
            from wrapper.dialects.acp.protocol_log import record  # noqa: PLC0415

            self._record = record
            log(record(0.0, "wrapper", {"event": "start", "at": iso(time.time())}))

    def send(self, message: dict[str, Any], line: bytes | None = None) -> None:
        """Write ``message`` (as ``line`` when given, else its JSON)."""
        if self.log is not None and self._record is not None:
            self.log(self._record(trio.current_time() - self.started_at, "out", message))
        # Once stdin is closed nothing more reaches the agent.
        with contextlib.suppress(trio.ClosedResourceError):
            self._send.send_nowait(line if line is not None else orjson.dumps(message) + b"\n")

    def close(self) -> None:
        with contextlib.suppress(trio.ClosedResourceError):
            self._send.send_nowait(None)

    async def write_all(self) -> None:
        async for line in self._outgoing:
            if line is None:
                break
            try:
                await self.stdin.send_all(line)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                break  # the agent stopped reading: its exit tells the rest
            if self.on_written is not None:
                self.on_written()
        self._send.close()
        self.input_closed.set()
        await self.stdin.aclose()
