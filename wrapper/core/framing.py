"""Turn byte chunks from a pipe into complete lines.

The framer never rescans bytes it has already searched: a chunk is split once
and only the unfinished tail is kept. A line longer than the cap is not held
in memory: once the tail grows past the cap the framer keeps only its first
bytes (enough to tell what kind of event it was) and counts the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Lines above this size are skipped, not parsed. Real agents put whole
#: conversations (with pasted files and images) on one line at the end of a
#: run, so the cap is generous; it exists so that one runaway line cannot
#: take the supervisor's memory with it.
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024

#: How much of an oversized line is kept from its start (to read its event
#: type from) and from its end (where fields written last, such as pi's
#: ``willRetry``, sit).
OVERSIZED_HEAD_BYTES = 512
OVERSIZED_TAIL_BYTES = 512


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line that exceeded the cap: its first and last bytes and its full size."""

    head: bytes
    size: int
    tail: bytes = b""


Frame = bytes | Oversized


class LineFramer:
    """Incremental splitter of a byte stream into ``\\n``-terminated lines.

    ``feed`` returns the lines completed by a chunk (without the newline);
    ``close`` returns the unterminated tail at end of stream, if any.
    """

    __slots__ = ("_head", "_max", "_partial", "_skipped", "_tail")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._max = max_line_bytes
        self._partial = bytearray()
        # When not None, the current line is over the cap: its byte count so
        # far, with ``_head`` holding its first bytes.
        self._skipped: int | None = None
        self._head = b""
        self._tail = b""

    @property
    def buffered(self) -> int:
        """Bytes held for the unfinished line (bounded by the cap)."""
        return len(self._partial)

    def feed(self, data: bytes | bytearray) -> list[Frame]:
        if b"\n" not in data:
            # No line ends here: hold the chunk without splitting it, so a
            # line over the cap costs no copy of the chunk.
            self._hold(data)
            return []
        pieces = bytes(data).split(b"\n") if isinstance(data, bytearray) else data.split(b"\n")
        tail = pieces.pop()
        frames: list[Frame] = []
        if pieces:
            first = pieces[0]
            if self._skipped is not None:
                frames.append(self._skipped_line(first))
            elif self._partial:
                self._partial += first
                line = bytes(self._partial)
                self._partial = bytearray()  # the buffer goes before the line is parsed
                frames.append(self._finish(line))
            else:
                frames.append(self._finish(first))
            limit = self._max
            for piece in pieces[1:]:
                frames.append(piece if len(piece) <= limit else self._oversized(piece))
        self._hold(tail)
        return frames

    def feed_region(self, data: bytes | bytearray) -> bytes | list[Frame]:
        """Like ``feed``, but when no line can be over the cap (the held tail
        and the chunk together are below it), the completed lines come back
        as one region, ``\n``-separated and unsplit, for readers that can
        handle a whole chunk at once; otherwise as the frames ``feed`` returns."""
        if self._skipped is not None or len(self._partial) + len(data) > self._max:
            return self.feed(data)
        cut = data.rfind(b"\n")
        if cut < 0:
            self._partial += data
            return []
        # The held tail and the chunk's lines are copied once, together, and
        # the old buffer is dropped before parsing, so a long line costs
        # about twice its size at most.
        region = b"".join((self._partial, memoryview(data)[:cut]))
        self._partial = bytearray(memoryview(data)[cut + 1 :])
        return region

    def close(self) -> list[Frame]:
        """End of stream: return the final line if it had no newline."""
        if self._skipped is not None:
            return [self._skipped_line(b"")]
        if self._partial:
            line = bytes(self._partial)
            self._partial = bytearray()
            return [self._finish(line)]
        return []

    def _finish(self, line: bytes) -> Frame:
        return line if len(line) <= self._max else self._oversized(line)

    @staticmethod
    def _oversized(line: bytes) -> Oversized:
        return Oversized(line[:OVERSIZED_HEAD_BYTES], len(line), line[-OVERSIZED_TAIL_BYTES:])

    def _skipped_line(self, end: bytes) -> Oversized:
        assert self._skipped is not None
        frame = Oversized(
            self._head, self._skipped + len(end), (self._tail + end)[-OVERSIZED_TAIL_BYTES:]
        )
        self._skipped = None
        self._head = self._tail = b""
        return frame

    def _hold(self, tail: bytes | bytearray) -> None:
        if not tail:
            return
        if self._skipped is not None:
            self._skipped += len(tail)
            self._tail = (self._tail + tail[-OVERSIZED_TAIL_BYTES:])[-OVERSIZED_TAIL_BYTES:]
        elif len(self._partial) + len(tail) > self._max:
            head = bytes(self._partial[:OVERSIZED_HEAD_BYTES]) + tail[:OVERSIZED_HEAD_BYTES]
            self._head = head[:OVERSIZED_HEAD_BYTES]
            self._tail = (
                bytes(self._partial[-OVERSIZED_TAIL_BYTES:]) + tail[-OVERSIZED_TAIL_BYTES:]
            )[-OVERSIZED_TAIL_BYTES:]
            self._skipped = len(self._partial) + len(tail)
            self._partial.clear()
        else:
            self._partial += tail
