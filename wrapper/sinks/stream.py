"""Where events go: the event log, the wrapper's stdout, status.json.

``EventStream`` numbers each event, stamps it, and hands the same envelope to
every sink. Writing to the wrapper's stdout happens in a worker thread fed by
``OutputPump``, so a runner that reads slowly (or not at all) can hold back
the stream but never the supervisor's timers.
"""

from __future__ import annotations

import bisect
import itertools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson
import trio

from wrapper.core.events import (
    AgentWarning,
    Event,
    TextDelta,
    WarningEvent,
    envelope,
    payload_keys,
)
from wrapper.core.jsonout import dumps
from wrapper.core.limits import OUTPUT_BACKLOG_BYTES
from wrapper.core.summary import WarningCounter
from wrapper.core.timefmt import iso
from wrapper.files.artifacts import ArtifactErrors, StreamFile, atomic_write

#: A run of deltas is written as one event once it holds this much text, so
#: that memory stays flat however long the agent streams without a message end.
COALESCE_MAX_CHARS = 64 * 1024


class OutputPump:
    """Writes bytes to a file descriptor from a worker thread.

    A broken descriptor (the runner went away, the pane closed) turns the pump
    off; the run goes on.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.broken: str | None = None
        self._chunks: list[bytes] = []
        self._size = 0
        self._data = trio.Event()
        self._room = trio.Event()
        self._idle = trio.Event()
        self._idle.set()

    def write(self, data: bytes) -> None:
        if self.broken is not None or not data:
            return
        self._chunks.append(data)
        self._size += len(data)
        self._idle = trio.Event() if self._idle.is_set() else self._idle
        self._data.set()

    async def wait_for_room(self) -> None:
        while self._size > OUTPUT_BACKLOG_BYTES and self.broken is None:
            if self._room.is_set():
                self._room = trio.Event()
            await self._room.wait()

    async def run(self) -> None:
        while True:
            await self._data.wait()
            self._data = trio.Event()
            data = b"".join(self._chunks)
            self._chunks.clear()
            self._size = 0
            self._room.set()
            if self.broken is None:
                try:
                    await trio.to_thread.run_sync(_write_all, self.fd, data, abandon_on_cancel=True)
                except OSError as exc:
                    self.broken = exc.strerror or str(exc)
                    self._chunks.clear()
                    self._size = 0
                    self._room.set()
            if not self._chunks:
                self._idle.set()

    async def drain(self) -> None:
        """Wait until everything written so far has reached the descriptor."""
        await self._idle.wait()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class EventStream:
    """Numbers events (``seq`` from 1), stamps them and fans them out.

    ``events.jsonl`` gets runs of ``text_delta`` coalesced into one event
    (with ``coalesced``, the number of deltas); the live output, when there is
    one, gets each. Deltas nobody watches live cost no envelope at all: they
    are the bulk of a stream.
    """

    def __init__(
        self,
        log: StreamFile,
        live: Callable[[Event, bytes], None] | None,
        *,
        live_lines: Callable[[bytes], None] | None = None,
    ) -> None:
        self._log = log
        self._live = live
        #: Takes the lines of many events at once, when the live output is
        #: those lines as they are (``--output jsonl``).
        self._live_lines = live_lines
        self.seq = 0
        self.attempt = 1
        #: Every warning emitted, for result.json.
        self.warnings: list[dict[str, Any]] = []
        # The first delta of the run being coalesced: (seq, time, attempt).
        self._pending: tuple[int, float, int] | None = None
        self._pending_parts: list[str] = []
        self._pending_chars = 0
        self._pending_count = 0
        #: Told of every event but text deltas, with its time and attempt
        #: (the run's telemetry, when it exports any).
        self.observer: Callable[[Event, float, int], None] | None = None
        #: Told when deltas start to be held back for coalescing (what keeps
        #: the log current for its readers writes them out in time).
        self.on_held: Callable[[], None] | None = None
        self._warned = WarningCounter()

    def emit(self, event: Event, now: float | None = None) -> None:
        if isinstance(event, WarningEvent | AgentWarning) and not self._warned.keep(event.code):
            return
        self.seq += 1
        now = time.time() if now is None else now
        if isinstance(event, TextDelta):
            if self._pending is None:
                self._pending = (self.seq, now, self.attempt)
                if self.on_held is not None:
                    self.on_held()
            self._pending_parts.append(event.text)
            self._pending_chars += len(event.text)
            self._pending_count += event.coalesced
            if self._pending_chars >= COALESCE_MAX_CHARS:
                self._flush_pending()
            if self._live is not None:
                self._live(event, self._encode(event, self.seq, now, self.attempt))
            return
        if isinstance(event, WarningEvent | AgentWarning):
            self.warnings.append({"code": event.code, "message": event.message})
        self._flush_pending()
        if self.observer is not None:
            self.observer(event, now, self.attempt)
        line = self._encode(event, self.seq, now, self.attempt)
        self._log.write(line)
        if self._live is not None:
            self._live(event, line)

    def emit_texts(self, texts: Sequence[str], now: float) -> None:
        """``emit`` of a ``TextDelta`` for each of ``texts`` (the agent's
        deltas of one chunk, one each), writing the same bytes for less
        work per delta: the bulk of a stream written out event by event."""
        first = self.seq + 1
        self.seq += len(texts)
        attempt = self.attempt
        if self._live_lines is not None:
            self._live_lines(_delta_lines(texts, first, now, attempt))
        elif self._live is not None:
            for seq, text in enumerate(texts, first):
                delta = TextDelta(text=text)
                self._live(delta, self._encode(delta, seq, now, attempt))
        # Into the pending merged delta, flushed where ``emit`` would flush it:
        # after the delta that brings it to COALESCE_MAX_CHARS.
        start = 0
        while start < len(texts):
            if self._pending is None:
                self._pending = (first + start, now, attempt)
                if self.on_held is not None:
                    self.on_held()
            room = COALESCE_MAX_CHARS - self._pending_chars
            sizes = list(itertools.accumulate(map(len, itertools.islice(texts, start, None))))
            taken = min(start + bisect.bisect_left(sizes, room) + 1, len(texts))
            self._pending_parts += texts[start:taken]
            self._pending_chars += sizes[taken - start - 1]
            self._pending_count += taken - start
            if self._pending_chars >= COALESCE_MAX_CHARS:
                self._flush_pending()
            start = taken

    def report_dropped_warnings(self) -> None:
        """One warning for each code of which more were emitted than kept."""
        for warning in self._warned.dropped():
            self.emit(warning)

    def flush(self) -> None:
        self._flush_pending()
        self._log.flush()

    @property
    def log(self) -> StreamFile:
        """The event log (events.jsonl)."""
        return self._log

    @property
    def held(self) -> bool:
        """Whether some event is not yet in the log's file (coalescing, or buffered)."""
        return self._pending is not None or self._log.held

    @staticmethod
    def _encode(event: Event, seq: int, now: float, attempt: int, **extra: Any) -> bytes:
        line = envelope(event, seq, ts=iso(now), attempt=attempt)
        line.update(extra)
        return dumps(line) + b"\n"

    def _flush_pending(self) -> None:
        if self._pending is None:
            return
        seq, now, attempt = self._pending
        merged = TextDelta(text="".join(self._pending_parts))
        count = self._pending_count
        self._pending = None
        self._pending_parts.clear()
        self._pending_chars = self._pending_count = 0
        self._log.write(self._encode(merged, seq, now, attempt, coalesced=count))


class LiveLogs:
    """Keeps a run's logs current for whoever follows them while it runs.

    What the logs hold in their write buffers (and the text deltas held back
    for coalescing) reaches the files when the agent's output pauses
    (``idle``, told by its readers) and, while it does not, at most
    ``interval`` after it was written (``run``, in the background). A run
    whose agent writes nothing costs no wakeups: the background task sleeps
    without a timer until something is written. ``logs``: the run's logs
    beside the stream's own.
    """

    def __init__(
        self, stream: EventStream, logs: Sequence[StreamFile | None], interval: float
    ) -> None:
        self._stream = stream
        self._logs = [log for log in logs if log is not None]
        self.interval = interval
        self._last = -float("inf")
        self._written = trio.Event()
        stream.on_held = stream.log.on_held = self._held
        for log in self._logs:
            log.on_held = self._held
        if stream.held or any(log.held for log in self._logs):
            self._written.set()

    def _held(self) -> None:
        self._written.set()

    def idle(self) -> None:
        """A reader of the agent's output found no more ready: what it wrote goes out now."""
        self.flush(trio.current_time())

    def flush(self, now: float) -> None:
        self._last = now
        if self._stream.held:
            self._stream.flush()
        for log in self._logs:
            if log.held:
                log.flush()

    async def run(self) -> None:
        """Flush what is held, at most ``interval`` after the last flush."""
        while True:
            await self._written.wait()
            await trio.sleep_until(self._last + self.interval)
            self._written = trio.Event()
            self.flush(trio.current_time())


# A text delta's line, as ``EventStream._encode`` writes it, from parts.
if payload_keys(TextDelta) != (("text", "text"),):
    raise TypeError("the text delta lines below no longer match the event's payload")
_DELTA_HEAD = b'{"type":"' + TextDelta.TYPE.encode() + b'","seq":'
_DELTA_SOURCE = b',"source":"' + TextDelta.SOURCE.encode() + b'","text":'


def _delta_lines(texts: Sequence[str], first: int, now: float, attempt: int) -> bytes:
    middle = b',"ts":' + orjson.dumps(iso(now)) + b',"attempt":%d' % attempt + _DELTA_SOURCE
    dumps = orjson.dumps
    return b"".join(
        [
            b"%s%d%s%s}\n" % (_DELTA_HEAD, seq, middle, dumps(text))
            for seq, text in enumerate(texts, first)
        ]
    )


class StatusWriter:
    """Keeps status.json current, at most once per interval except when forced."""

    def __init__(
        self, path: Path, errors: ArtifactErrors, interval: float, *, enabled: bool
    ) -> None:
        self.path = path
        self._errors = errors
        self.interval = interval
        self._enabled = enabled
        self._last = -float("inf")
        self._fields: dict[str, Any] = {}
        self._dirty = False
        #: Wall-clock time of the agent's last event (formatted only when written).
        self.last_event: float | None = None
        #: Called when a change is held back by the interval: whoever writes
        #: it once the interval is over sleeps until then, and only then.
        self.on_held: Callable[[], None] | None = None
        #: The run's progress (usage, steers so far), taken at each write:
        #: what changes with every event costs nothing between writes.
        self.progress: Callable[[], Mapping[str, Any]] | None = None

    def touch(self, now: float, wall: float) -> None:
        """The agent produced an event: cheap, the file is rewritten at most once per interval."""
        self.last_event = wall
        self._dirty = True
        if now - self._last >= self.interval:
            self.write(now)
        elif self.on_held is not None:
            self.on_held()

    def update(self, now: float, *, force: bool = False, **fields: Any) -> None:
        self._fields.update(fields)
        self._dirty = True
        if force or now - self._last >= self.interval:
            self.write(now)
        elif self.on_held is not None:
            self.on_held()

    def adopt(self, now: float, fields: dict[str, Any]) -> None:
        """Go on from ``fields``, which the run's start just wrote (at ``now``);
        where this writer writes nothing, they are only held, as ``update``
        would hold them."""
        self._fields.update(fields)
        if not self._enabled or self._errors.failed("status"):
            self._dirty = True
            return
        self._last = now
        self._dirty = False

    @property
    def fields(self) -> Mapping[str, Any]:
        """status.json as it stands in memory, written or still held (read
        only: a reader in the run's process need not wait for the file)."""
        if self.progress is not None:
            self._fields.update(self.progress())
        return MappingProxyType(self._fields)

    @property
    def next_write(self) -> float:
        """When a change held back now may be written."""
        return self._last + self.interval

    async def flush_held(self) -> None:
        """Write the changes the interval held back, once it is over (run in
        the background while a run writes status.json). Sleeps, without a
        timer, while nothing is held back: a silent agent costs no wakeups."""
        held = trio.Event()
        self.on_held = held.set
        try:
            while True:
                await held.wait()
                await trio.sleep_until(self.next_write)
                held = trio.Event()
                self.on_held = held.set
                self.write(trio.current_time())
        finally:
            self.on_held = None

    def write(self, now: float) -> None:
        if not self._enabled or self._errors.failed("status") or not self._dirty:
            return
        self._last = now
        self._dirty = False
        self._fields["updatedAt"] = iso(time.time())
        if self.last_event is not None:
            self._fields["lastEventAt"] = iso(self.last_event)
        if self.progress is not None:
            self._fields.update(self.progress())
        try:
            atomic_write(self.path, dumps(self._fields, option=orjson.OPT_INDENT_2), durable=False)
        except OSError as exc:
            self._errors.record("status", self.path, exc)

    @property
    def pending(self) -> bool:
        return self._dirty
