"""Reading an agent's delta lines without decoding each one.

Most of a streamed answer is lines that each carry one small piece of text
(a token or a few) in a fixed layout. A dialect describes that layout as a
``DeltaLines``; the lines of a chunk that have it are recognised by one
regular-expression scan, their strings decoded by one ``orjson.loads`` call,
and turned into the very events that decoding each line in full would give.
A line that does not have the layout exactly, or whose string does not
decode, takes the full path: the layout is a shortcut, never a second
definition of the format.

The layout pins every key of a delta line, in order, so that a line that
matches it is one JSON object whose meaning is known from its bytes: no key
can be duplicated (in JSON the last of duplicated keys counts), and every
value but the delta string is a literal. Only the string's escapes, control
characters and UTF-8 remain to be checked, and decoding it does that.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import orjson

from wrapper.core.events import Event, TextDelta
from wrapper.core.framing import Frame
from wrapper.dialects.base import NOT_JSON, Dialect, decode_value, merge_deltas

#: A JSON string as it is written on one line, escapes included; whether it
#: is a valid one (no raw control characters, known escapes, UTF-8) is left
#: to decoding it.
JSON_STRING = rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
#: A JSON string with nothing in it to check: an id, a timestamp.
PLAIN_STRING = rb'"[A-Za-z0-9_.:+-]{0,128}"'
#: How much of a region's end is looked at to guess its lines' kind: a
#: delta line's end, kind included.
LAST_LINE = 512
#: A JSON integer that is not negative.
NATURAL = rb"(?:0|[1-9][0-9]{0,17})"

Match = tuple[bytes, bytes]
#: The raw strings of a region's delta lines, and their kinds (None: all of
#: the one text kind).
Scanned = tuple[list[bytes], list[bytes] | None]


class DeltaLines:
    """The layout of one agent's delta lines.

    A delta line is ``head``, then its kind (``kind``, a pattern), then
    ``tail``, which holds one group: its string as raw JSON. A delta whose
    kind is in ``text_kinds`` is text for the user (a ``TextDelta`` when not
    empty); any other kind (thinking, tool input) yields nothing.

    By default the layout is a whole line, which starts with ``prefix`` (a
    literal start of ``head``). With ``start``, only the end of the line is
    read, from the last occurrence of ``start`` on (the literal start of
    ``head``), for a layout whose first part is arbitrary JSON; ``prefix``
    and ``check`` (which must hold of a line, and of a region of whole lines
    exactly when it holds of each) are then what make the end mean what
    decoding the line would.
    """

    __slots__ = (
        "_check",
        "_line",
        "_newline_prefix",
        "_region",
        "_text_kind",
        "_text_region",
        "prefix",
        "start",
        "text_kinds",
    )

    def __init__(
        self,
        prefix: bytes,
        *,
        head: bytes,
        kind: bytes,
        tail: bytes,
        text_kinds: frozenset[bytes],
        start: bytes | None = None,
        check: Callable[[bytes], bool] | None = None,
    ) -> None:
        literal = start if start is not None else prefix
        if not head.startswith(re.escape(literal)) and not head.startswith(literal):
            raise ValueError("the head must start with its literal prefix")
        if re.compile(tail).groups != 1:
            raise ValueError("the tail must hold one group, the delta string")
        self.prefix = prefix
        self.start = start
        self.text_kinds = text_kinds
        self._check = check
        pattern = head + b"(" + kind + b")" + tail
        self._line = re.compile(pattern)
        # Each match ends where its line does: the lines are counted by them.
        self._region = re.compile(pattern + rb"(?=\n|\Z)")
        self._newline_prefix = b"\n" + prefix
        # The usual region, text deltas alone, is read by a pattern with the
        # kind spelled out and one group: a third less work for the regular
        # expression engine, and no (kind, string) pair to take apart.
        self._text_kind: bytes | None = None
        self._text_region: re.Pattern[bytes] | None = None
        if len(text_kinds) == 1:
            [self._text_kind] = text_kinds
            if re.fullmatch(kind, self._text_kind) is None:
                raise ValueError("the text kind must be one the kind pattern matches")
            self._text_region = re.compile(head + re.escape(self._text_kind) + tail + rb"(?=\n|\Z)")

    def match(self, line: bytes) -> Match | None:
        """(kind, raw string) of a delta line, or None when it is not one."""
        if self.start is None:
            found = self._line.fullmatch(line)
        else:
            if not line.startswith(self.prefix):
                return None
            if self._check is not None and not self._check(line):
                return None
            at = line.rfind(self.start)
            found = self._line.fullmatch(line, at) if at >= 0 else None
        return None if found is None else (found[1], found[2])

    def scan(self, region: bytes) -> Scanned | None:
        """The raw strings of every line of ``region`` (complete lines,
        ``\\n``-separated) with their kinds (None when all are of the text
        kind), or None unless all of them are delta lines.

        The line checks summed over the region: every line starts with
        ``prefix``, and one match ends at each line's end. For a whole-line
        layout ``prefix`` occurs nowhere else, so each match starts where its
        line does; for the other, ``check`` holds of the region.
        """
        lines = region.count(b"\n") + 1
        if not region.startswith(self.prefix) or region.count(self._newline_prefix) != lines - 1:
            return None
        if self.start is None:
            if region.count(self.prefix) != lines:
                return None
        elif self._check is not None and not self._check(region):
            return None
        text, text_kind = self._text_region, self._text_kind
        # Tried when the last line holds the text kind's bytes (a region's
        # lines are most often of one kind; whether all are, the match says),
        # else the general pattern at once.
        if text is not None and text_kind is not None and text_kind in region[-LAST_LINE:]:
            raws: list[bytes] = text.findall(region)
            if len(raws) == lines:
                return raws, None
        found: list[Match] = self._region.findall(region)
        if len(found) != lines:
            return None
        kinds, strings = zip(*found, strict=True)
        return list(strings), list(kinds)


class DeltaDialect(Dialect):
    """A dialect whose agent streams its text in delta lines of one layout.

    Subclasses set ``delta_lines``; a subclass that keeps the text streamed
    so far overrides ``took_texts``.
    """

    delta_lines: ClassVar[DeltaLines]

    def took_texts(self, texts: list[str]) -> None:
        """The texts of delta lines read by the fast path, in order (their
        full parse keeps whatever it keeps itself)."""

    def parse_frames(self, frames: Sequence[Frame], *, coalesce: bool) -> list[Event]:
        # Runs of delta lines are decoded together, the other lines one by one.
        shape = self.delta_lines
        events: list[Event] = []
        found: list[Match] = []
        lines: list[bytes] = []
        for frame in frames:
            if type(frame) is bytes:
                match = shape.match(frame)
                if match is not None:
                    found.append(match)
                    lines.append(frame)
                    continue
            if found:
                events += self._run(found, lines, coalesce=coalesce)
                found, lines = [], []
            events += self.parse(frame) if isinstance(frame, bytes) else self.oversized(frame)
        if found:
            events += self._run(found, lines, coalesce=coalesce)
        # Deltas that took the full path (another layout) merge too.
        return merge_deltas(events) if coalesce else events

    def parse_region(self, region: bytes, *, coalesce: bool) -> list[Event]:
        texts = self.delta_texts(region)
        if texts is None:
            return self.parse_frames(region.split(b"\n"), coalesce=coalesce)
        return _text_deltas(texts, coalesce=coalesce)

    def delta_texts(self, region: bytes) -> list[str] | None:
        found = self.delta_lines.scan(region)
        return self._texts(*found) if found is not None else None

    def _run(self, found: list[Match], lines: list[bytes], *, coalesce: bool) -> list[Event]:
        kinds, raws = zip(*found, strict=True)
        texts = self._texts(list(raws), list(kinds))
        if texts is None:
            # A string that does not decode makes its line malformed as a
            # whole: each line parsed in full says what it is.
            return [event for line in lines for event in self.parse(line)]
        return _text_deltas(texts, coalesce=coalesce)

    def _texts(self, raws: list[bytes], kinds: list[bytes] | None) -> list[str] | None:
        """The texts of a run of delta lines (the non-empty ones of a text
        kind; ``kinds`` None: all are), from their raw strings; None when
        one of the strings is not JSON."""
        # Column by column, so that no Python code runs per delta.
        try:
            texts: list[Any] = orjson.loads(b"[" + b",".join(raws) + b"]")
        except orjson.JSONDecodeError:  # one of them is not for the fast decoder
            texts = list(map(decode_value, raws))
            if NOT_JSON in texts:
                return None
        text_kinds = self.delta_lines.text_kinds
        if kinds is not None and not text_kinds.issuperset(kinds):
            texts = list(itertools.compress(texts, map(text_kinds.__contains__, kinds)))
        kept: list[str] = list(filter(None, texts)) if "" in texts else texts
        if kept:
            self.took_texts(kept)
        return kept


def _text_deltas(texts: list[str], *, coalesce: bool) -> list[Event]:
    """A text delta for each text, or one for all of them with ``coalesce``."""
    if not texts:
        return []
    if coalesce:
        return [TextDelta(text="".join(texts), coalesced=len(texts))]
    return [TextDelta(text=text) for text in texts]
