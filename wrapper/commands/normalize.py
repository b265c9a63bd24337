"""``agent-wrapper normalize``: a saved raw stream (a run's ``stdout.log``, a
capture) through a dialect, printed as normalized events or summed up.

The same pure path as a live run (``StreamReader``: framer and dialect),
then the summary and the completion tracker; the
process's exit status, when given, is fed in as a live run would. A run's
``protocol.jsonl`` (an ACP session, both directions) is recognised by its
first record and replayed through the ACP client core instead.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from wrapper.core.completion import CompletionTracker, Limits
from wrapper.core.config import READ_CHUNK_BYTES
from wrapper.core.events import AgentWarning, Event, TextDelta, WarningEvent, envelope
from wrapper.core.framing import Frame, LineFramer
from wrapper.core.jsonout import dumps
from wrapper.core.summary import RunSummary, WarningCounter
from wrapper.dialects import DIALECTS, Dialect, SniffingDialect
from wrapper.dialects.acp.protocol_log import replay
from wrapper.dialects.base import decode_object, recognised_any, unrecognised_output
from wrapper.dialects.reading import StreamReader


def normalize(
    source: BinaryIO,
    out: BinaryIO,
    *,
    dialect_name: str = "auto",
    summary: bool = False,
    exit_code: int | None = None,
    max_line_bytes: int,
) -> list[str]:
    """Write the events (or with ``summary`` the summary) of ``source`` to
    ``out``; returns what a person should be told on stderr."""
    dialect: Dialect = SniffingDialect() if dialect_name == "auto" else DIALECTS[dialect_name]()
    totals = RunSummary()
    tracker = CompletionTracker(Limits(grace=math.inf, settle_grace=math.inf, kill_after=0), 0.0)
    warnings: list[dict[str, str]] = []
    counter = WarningCounter()
    seq = 0

    def show(event: Event) -> None:
        nonlocal seq
        if isinstance(event, WarningEvent | AgentWarning):
            warnings.append({"code": event.code, "message": event.message})
        seq += 1
        if not summary:
            out.write(dumps(envelope(event, seq)) + b"\n")

    tally = _Tally()
    for event in _events(source, dialect, exit_code, max_line_bytes, tally):
        noted: list[WarningEvent] = []
        if type(event) is not TextDelta:
            noted = totals.observe(event)
            tracker.observe(event, 0.0)
        for shown in (event, *noted):
            if not isinstance(shown, WarningEvent | AgentWarning) or counter.keep(shown.code):
                show(shown)
    for dropped in counter.dropped():
        show(dropped)
    chosen = dialect.chosen if isinstance(dialect, SniffingDialect) else dialect
    if tally.protocol:
        chosen = DIALECTS["acp"]()
    told: list[str] = []
    if not tally.recognised:
        why = unrecognised_output(chosen or dialect, tally.lines, whose="the stream")
        show(WarningEvent(code=OUTPUT_UNRECOGNISED, message=why))
        told.append(f"warning: {why}")
    if summary:
        final = tracker.final
        last_word = final or tracker.last_message
        usage = totals.usage
        report = {
            "dialect": chosen.name if chosen is not None else None,
            "stopReason": last_word.stop_reason if last_word else None,
            "rawStopReason": last_word.raw_stop_reason if last_word else None,
            "finalText": final.text or None if final else None,
            "sessionId": totals.session_id,
            "model": totals.model,
            "usage": usage.to_json() if usage is not None else None,
            "toolsUsed": totals.tools_used,
            "warnings": warnings,
        }
        out.write(dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    return told


#: The warning that a stream held no line its dialect recognised.
OUTPUT_UNRECOGNISED = "output_unrecognised"


@dataclass(slots=True)
class _Tally:
    """How many lines the stream had, and whether the dialect recognised one."""

    lines: int = 0
    recognised: bool = False
    #: The stream is a ``protocol.jsonl``, replayed as an ACP session.
    protocol: bool = False


def _events(
    source: BinaryIO, dialect: Dialect, exit_code: int | None, max_line_bytes: int, tally: _Tally
) -> Iterator[Event]:
    chunks = _chunks(source)
    # The first line tells a protocol.jsonl from an agent's stream: the
    # chunks read to find it are read again by the path it picks.
    probe = LineFramer(max_line_bytes)
    held: list[bytes] = []
    first: list[Frame] = []
    for data in chunks:
        held.append(data)
        first = probe.feed(data)
        if first or sum(map(len, held)) > max_line_bytes:
            break
    else:
        first = probe.close()
    stream = itertools.chain(held, chunks)
    if first and _protocol_record(first[0]) is not None:
        tally.protocol = True
        yield from _replayed(stream, max_line_bytes, tally)
        return
    reader = StreamReader(dialect, max_line_bytes, coalesce=False)
    for data in stream:
        events, texts = reader.feed(data)
        yield from events if texts is None else (TextDelta(text=text) for text in texts)
    tail, unread = reader.close()
    tally.lines, tally.recognised = reader.lines, reader.recognised
    yield from tail
    yield from unread
    if exit_code is not None:
        yield from dialect.on_exit(exit_code, None)


def _chunks(source: BinaryIO) -> Iterator[bytes]:
    while data := source.read(READ_CHUNK_BYTES):
        yield data


def _replayed(chunks: Iterable[bytes], max_line_bytes: int, tally: _Tally) -> Iterator[Event]:
    """A run's protocol.jsonl, replayed through the ACP client core."""
    framer = LineFramer(max_line_bytes)
    records: list[dict[str, Any]] = []
    for frames in itertools.chain((framer.feed(data) for data in chunks), [framer.close()]):
        for frame in frames:
            tally.lines += 1
            found = _protocol_record(frame)
            if found is not None:
                records.append(found)
    events = [item for item in replay(records)[1] if isinstance(item, Event)]
    tally.recognised = recognised_any(events)
    yield from events


def _protocol_record(frame: Frame) -> dict[str, Any] | None:
    """A line of ``protocol.jsonl`` (``t``, ``dir``, ``msg``), else None."""
    if not isinstance(frame, bytes):
        return None
    obj = decode_object(frame)
    if isinstance(obj, dict) and {"t", "dir", "msg"} <= obj.keys() and len(obj) == 3:
        return obj
    return None


def main(
    path: str, *, dialect_name: str, summary: bool, exit_code: int | None, max_line_bytes: int
) -> int:
    """Normalize ``path`` (``-`` for stdin) to stdout; 1 if it cannot be read."""
    try:
        source = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
        with source:
            told = normalize(
                source,
                sys.stdout.buffer,
                dialect_name=dialect_name,
                summary=summary,
                exit_code=exit_code,
                max_line_bytes=max_line_bytes,
            )
    except BrokenPipeError:
        # The reader took what it wanted (``normalize FILE | head``): like
        # other filters, stop quietly, and as a success. What is still
        # buffered for stdout goes nowhere rather than failing again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        print(f"agent-wrapper normalize: {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for line in told:
        print(f"agent-wrapper normalize: {line}", file=sys.stderr)
    return 0
