"""Reading an agent's stdout through its dialect, composed once: bytes ->
lines (``LineFramer``) -> normalized events (the dialect), counting the
lines until the dialect recognises one.

A live run (``wrapper.supervision.attempt``) and ``agent-wrapper normalize``
both read a stream through ``StreamReader``; what follows the events (the
summary, the completion tracker, the sinks) is theirs. Pure: it is fed
bytes and returns events.
"""

from __future__ import annotations

from wrapper.core.events import Event
from wrapper.core.framing import LineFramer
from wrapper.dialects import Dialect, SniffingDialect
from wrapper.dialects.base import recognised_any


class StreamReader:
    """One stream's framer and dialect. ``coalesce``: consecutive text
    deltas become one event (nobody watches them one by one)."""

    __slots__ = ("coalesce", "dialect", "framer", "lines", "recognised")

    def __init__(self, dialect: Dialect, max_line_bytes: int, *, coalesce: bool) -> None:
        self.dialect = dialect
        self.framer = LineFramer(max_line_bytes)
        self.coalesce = coalesce
        #: How many lines the stream had until the dialect recognised one (all
        #: of them, when it never did): counted only while that is told.
        self.lines = 0
        #: Whether the dialect recognised a line of the stream.
        self.recognised = False

    def feed(self, data: bytes | bytearray) -> tuple[list[Event], list[str] | None]:
        """The events of the lines ``data`` completes; or, when every
        delta is wanted and the lines are all of the dialect's delta layout,
        no events and the deltas' texts (the bulk of a stream, with no event
        made per delta)."""
        if not self.recognised:
            self.lines += data.count(b"\n")
        region = self.framer.feed_region(data)
        if not isinstance(region, bytes):
            return self._seen(self.dialect.parse_frames(region, coalesce=self.coalesce)), None
        texts = None if self.coalesce else self.dialect.delta_texts(region)
        if texts is not None:
            self.recognised = True  # lines of the dialect's own delta layout
            return [], texts
        return self._seen(self.dialect.parse_region(region, coalesce=self.coalesce)), None

    def close(self) -> tuple[list[Event], list[Event]]:
        """End of stream: the events of its unterminated last line, and what
        a dialect still being guessed held back (reported as not understood)."""
        tail = self.framer.close()
        if not self.recognised:
            self.lines += len(tail)
        events = self._seen(self.dialect.parse_frames(tail, coalesce=self.coalesce))
        held = self.dialect.flush() if isinstance(self.dialect, SniffingDialect) else []
        return events, held

    def _seen(self, events: list[Event]) -> list[Event]:
        if not self.recognised:
            self.recognised = recognised_any(events)
        return events
