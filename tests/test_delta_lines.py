"""The fast path of delta lines (Claude's ``stream_event`` deltas, Gemini's
``message`` pieces) means what decoding each line in full means, however
the pipe cuts the stream, for lines of the layout and lines that only look
like it. (pi's own layout is held by tests/test_hostile.py.)"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wrapper.core.events import AssistantMessage, Event, TextDelta, UnparsedLine
from wrapper.core.framing import LineFramer
from wrapper.dialects.base import Dialect, merge_deltas
from wrapper.dialects.claude import ClaudeDialect
from wrapper.dialects.cursor import CursorDialect
from wrapper.dialects.deltas import DeltaDialect, DeltaLines
from wrapper.dialects.gemini import GeminiDialect
from wrapper.dialects.pi import PiDialect

#: Delta strings as JSON text: ordinary, escaped, non-ASCII, empty, a
#: surrogate pair, and some no decoder takes (or only the standard one).
delta_texts = st.one_of(
    st.text(max_size=6).map(json.dumps),
    st.text(max_size=6).map(lambda t: json.dumps(t, ensure_ascii=False)),
    st.sampled_from(
        [
            '""',
            '"\\ud800"',
            '"\\ud83d\\ude00"',
            '"naïve → ok"',
            '"a\\x"',
            '"a\x01b"',
            '"a\x1b[31mb"',
            '"\\"text_delta\\""',
            '"a\\\\"',
            '"\xff"',
        ]
    ),
)


def claude_delta(
    text: str,
    *,
    kind: str = '"type":"text_delta","text"',
    index: str = "0",
    session: str = '"5d0c6f1e-2b7a-4f3e-9c21-7e4a8b9d0f12"',
    parent: str = "null",
    head: str = '{"type":"stream_event"',
    extra: str = "",
) -> bytes:
    return (
        f'{head},"event":{{"type":"content_block_delta","index":{index},'
        f'"delta":{{{kind}:{text}}}}},"session_id":{session},'
        f'"parent_tool_use_id":{parent},"uuid":"eb54db22-d15d-4e57-aea4-836f98810456"{extra}}}'
    ).encode()


claude_kinds = st.sampled_from(
    [
        '"type":"text_delta","text"',
        '"type":"thinking_delta","thinking"',
        '"type":"input_json_delta","partial_json"',
        '"type":"text_delta","thinking"',
        '"type":"text_delta","type"',  # a duplicated key: the last one counts
        '"type":"text\\u005fdelta","text"',
    ]
)
#: Lines of the layout, and lines with something of it changed (each
#: change alone is rare among all of them at once).
claude_deltas = st.builds(claude_delta, delta_texts, kind=claude_kinds) | st.builds(
    claude_delta,
    delta_texts,
    kind=claude_kinds,
    index=st.sampled_from(["0", "12", "007", "-1"]),
    session=st.sampled_from(['"s-1"', '"s\\u002d1"', '"sé"', "null"]),
    parent=st.sampled_from(["null", '"toolu_01"']),
    head=st.sampled_from(['{"type":"stream_event"', '{"type": "stream_event"']),
    extra=st.sampled_from(["", ',"uuid":"again"', ',"event":{"type":"message_stop"}']),
)
claude_others = st.sampled_from(
    [
        b'{"type":"system","subtype":"init","session_id":"s-1","model":"m"}',
        b'{"type":"stream_event","event":{"type":"content_block_stop","index":0},'
        b'"session_id":"s-1","parent_tool_use_id":null,"uuid":"u"}',
        b'{"type":"assistant","message":{"model":"m","content":[{"type":"text","text":"hi"}]}}',
        b'{"type":"result","subtype":"success","is_error":false,"result":"hi"}',
        b"not json",
        b"",
    ]
)


def gemini_delta(
    text: str,
    *,
    stamp: str = '"2026-11-23T04:47:57.910Z"',
    role: str = '"assistant"',
    delta: str = "true",
    head: str = '{"type":"message"',
    extra: str = "",
) -> bytes:
    return (
        f'{head},"timestamp":{stamp},"role":{role},"content":{text},"delta":{delta}{extra}}}'
    ).encode()


gemini_deltas = st.builds(gemini_delta, delta_texts) | st.builds(
    gemini_delta,
    delta_texts,
    stamp=st.sampled_from(['"2026-11-23T04:47:57.910Z"', '"<TIMESTAMP>"', "1", '"\\u0031"']),
    role=st.sampled_from(['"assistant"', '"user"']),
    delta=st.sampled_from(["true", "false"]),
    head=st.sampled_from(['{"type":"message"', '{ "type":"message"']),
    extra=st.sampled_from(["", ',"content":"again"', ',"role":"user"']),
)
gemini_others = st.sampled_from(
    [
        b'{"type":"init","timestamp":"t","session_id":"s-1","model":"m"}',
        b'{"type":"message","timestamp":"t","role":"assistant","content":"whole"}',
        b'{"type":"tool_use","timestamp":"t","tool_name":"ls","tool_id":"t1","parameters":{}}',
        b"not json",
        b"",
    ]
)


def glued(lines: Any) -> Any:
    """A delta line cut short with a whole one after it: its end alone looks right."""
    return st.builds(lambda a, b, at: a[: at % len(a)] + b, lines, lines, st.integers(0))


CASES: dict[str, tuple[Callable[[], DeltaDialect], Any, Any]] = {
    "claude": (ClaudeDialect, claude_deltas, claude_others | glued(claude_deltas)),
    "cursor": (CursorDialect, claude_deltas, claude_others | glued(claude_deltas)),
    "gemini": (GeminiDialect, gemini_deltas, gemini_others | glued(gemini_deltas)),
}


def full_parse(make: Callable[[], DeltaDialect], lines: list[bytes]) -> tuple[list[Any], Any]:
    """What decoding every line in full makes of them, and what the dialect
    then says at an abnormal exit (the text it kept): the meaning to agree with."""
    reference = make()
    events = [event for line in lines for event in Dialect.parse(reference, line)]
    return events, reference.on_exit(1, None)


def read_as_the_supervisor(
    make: Callable[[], DeltaDialect], stream: bytes, cuts: list[int], *, coalesce: bool
) -> tuple[list[Any], Any]:
    dialect = make()
    framer = LineFramer(1 << 20)
    events: list[Any] = []
    bounds = [0, *sorted(set(cuts)), len(stream)]
    for start, end in itertools.pairwise(bounds):
        region = framer.feed_region(stream[start:end])
        if isinstance(region, bytes):
            # As the supervisor reads it: the texts alone when every delta is written out.
            texts = None if coalesce else dialect.delta_texts(region)
            if texts is not None:
                events += [TextDelta(text=text) for text in texts]
            else:
                events += dialect.parse_region(region, coalesce=coalesce)
        else:
            events += dialect.parse_frames(region, coalesce=coalesce)
    events += dialect.parse_frames(framer.close(), coalesce=coalesce)
    return events, dialect.on_exit(1, None)


def agree(make: Callable[[], DeltaDialect], lines: list[bytes], cuts: list[int]) -> None:
    stream = b"\n".join(lines) + b"\n"
    cuts = [cut % (len(stream) + 1) for cut in cuts]
    expected, end = full_parse(make, lines)
    deltas = sum(1 for event in expected if isinstance(event, TextDelta))
    for chunking in ([], cuts, list(range(len(stream)))):
        assert read_as_the_supervisor(make, stream, chunking, coalesce=False) == (expected, end)
        coalesced, coalesced_end = read_as_the_supervisor(make, stream, chunking, coalesce=True)
        assert merge_deltas(coalesced) == merge_deltas(expected)
        assert coalesced_end == end
        assert sum(e.coalesced for e in coalesced if isinstance(e, TextDelta)) == deltas


@pytest.mark.parametrize("name", CASES)
def test_delta_lines_mean_the_same_however_they_are_chunked(name: str) -> None:
    make, deltas, others = CASES[name]

    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
    @given(
        st.lists(st.one_of(deltas, deltas, others), min_size=1, max_size=8),
        st.lists(st.integers(min_value=0, max_value=4000), max_size=6),
    )
    def check(lines: list[bytes], cuts: list[int]) -> None:
        agree(make, lines, cuts)

    check()


@pytest.mark.parametrize("name", CASES)
def test_even_a_damaged_delta_line_means_what_its_full_parse_means(name: str) -> None:
    make, deltas, _ = CASES[name]

    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
    @given(
        st.lists(
            st.tuples(deltas, st.integers(min_value=0), st.binary(max_size=4)),
            min_size=1,
            max_size=6,
        ),
        st.lists(st.integers(min_value=0, max_value=4000), max_size=6),
    )
    def check(damaged: list[tuple[bytes, int, bytes]], cuts: list[int]) -> None:
        lines = []
        for line, position, junk in damaged:
            at = position % (len(line) + 1)
            lines.append(line[:at] + junk.replace(b"\n", b"") + line[at:])
        agree(make, lines, cuts)

    check()


def test_a_claude_answer_streamed_in_deltas_is_one_text() -> None:
    lines = [claude_delta(json.dumps(part)) for part in ("Hel", "lo, ", "naïve ", "wörld")]
    lines.insert(2, claude_delta('"hmm"', kind='"type":"thinking_delta","thinking"'))
    region = b"\n".join(lines)
    [merged] = ClaudeDialect().parse_region(region, coalesce=True)
    assert merged == TextDelta(text="Hello, naïve wörld")
    assert merged.coalesced == 4
    each = ClaudeDialect().parse_region(region, coalesce=False)
    assert [e.text for e in each if isinstance(e, TextDelta)] == ["Hel", "lo, ", "naïve ", "wörld"]


def test_a_malformed_delta_string_makes_its_line_unparsed_and_no_other() -> None:
    lines = [claude_delta('"a"'), claude_delta('"b\x01"'), claude_delta('"c"')]
    events: list[Event] = ClaudeDialect().parse_region(b"\n".join(lines), coalesce=True)
    assert [type(e) for e in events] == [TextDelta, UnparsedLine, TextDelta]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["a", "c"]


def test_gemini_keeps_the_text_its_fast_path_read_for_the_final_message() -> None:
    dialect = GeminiDialect()
    lines = [gemini_delta(json.dumps(part)) for part in ("Done", ": ok")]
    assert dialect.parse_region(b"\n".join(lines), coalesce=True) == [TextDelta(text="Done: ok")]
    [final] = dialect.on_exit(1, None)
    assert isinstance(final, AssistantMessage)
    assert final.text == "Done: ok"


def pi_delta(text: str, *, kind: str = "text_delta", before: str = "", after: str = "") -> bytes:
    message = '{"role":"assistant","content":[{"type":"text","text":"so far"}]}'
    event = f'{{"type":"{kind}","contentIndex":0,"delta":{text}}}'
    return (
        f'{{"type":"message_update","message":{message}{before},'
        f'"assistantMessageEvent":{event}{after}}}'
    ).encode()


#: Per dialect: a plain text delta line of a given JSON string, and lines that
#: hold the bytes of its text kind without being one (so that counting those
#: bytes alone cannot tell a region of text deltas).
TEXT_REGIONS: dict[str, tuple[Callable[[], DeltaDialect], Callable[[str], bytes], Any]] = {
    "pi": (
        PiDialect,
        pi_delta,
        st.sampled_from(
            [
                pi_delta('"\\"text_delta\\""', kind="thinking_delta"),
                pi_delta('"x"', before=',"type":"message_end"'),
                pi_delta('"x"', after=',"note":"text_delta"'),
                pi_delta('"x"', kind="text\\u005fdelta"),
                b'{"type":"turn_start","note":"text_delta"}',
            ]
        ),
    ),
    **{
        name: (
            make,
            claude_delta,
            st.sampled_from(
                [
                    claude_delta('"x"', extra=',"event":{"type":"message_stop"}'),
                    claude_delta('"x"', index="-1"),
                    claude_delta('"x"', session="null"),
                    claude_delta('"x"', parent='"toolu_01"'),
                    claude_delta('"x"', kind='"type":"text_delta","text"', head='{"type": "x"'),
                ]
            ),
        )
        for name, make in (("claude", ClaudeDialect), ("cursor", CursorDialect))
    },
    "gemini": (
        GeminiDialect,
        gemini_delta,
        st.sampled_from(
            [
                gemini_delta('"assistant"', role='"user"'),
                gemini_delta('"x"', extra=',"role":"user"'),
                gemini_delta('"x"', delta="false"),
            ]
        ),
    ),
}


@pytest.mark.parametrize("name", TEXT_REGIONS)
def test_a_region_of_text_deltas_is_read_whole_and_a_look_alike_is_not(name: str) -> None:
    make, plain, look_alikes = TEXT_REGIONS[name]

    @settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None)
    @given(
        st.lists(delta_texts, min_size=1, max_size=10),
        st.lists(st.tuples(st.integers(min_value=0), look_alikes), max_size=2),
        st.lists(st.integers(min_value=0, max_value=4000), max_size=6),
    )
    def check(texts: list[str], others: list[tuple[int, bytes]], cuts: list[int]) -> None:
        lines = [plain(text) for text in texts]
        region = b"\n".join(lines)
        scanned = make().delta_lines.scan(region)
        # Every line of the layout and of the text kind: read by the text
        # pattern (pi reads a line with an escaped printable character in full).
        if scanned is not None or not any("\\u00" in text for text in texts):
            assert scanned == ([text.encode() for text in texts], None)
        for at, other in others:
            lines.insert(at % (len(lines) + 1), other)
        if others:
            # Not read as text deltas alone (a thinking delta is still a delta line).
            mixed = make().delta_lines.scan(b"\n".join(lines))
            assert mixed is None or mixed[1] is not None
        agree(make, lines, cuts)

    check()


def test_a_layout_is_told_its_text_kind_fits_its_kind_pattern() -> None:
    with pytest.raises(ValueError, match="text kind"):
        DeltaLines(
            b"{",
            head=rb"\{",
            kind=rb"[a-z]+",
            tail=rb':("[a-z]*")\}',
            text_kinds=frozenset({b"TEXT"}),
        )
    with pytest.raises(ValueError, match="one group"):
        DeltaLines(b"{", head=rb"\{", kind=rb"[a-z]+", tail=rb"\}", text_kinds=frozenset())
