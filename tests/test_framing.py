"""The line framer, fed whole, byte by byte, and in arbitrary chunks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from wrapper.core.framing import (
    OVERSIZED_HEAD_BYTES,
    OVERSIZED_TAIL_BYTES,
    Frame,
    LineFramer,
    Oversized,
)


def frame_all(chunks: list[bytes], max_line: int = 1 << 20) -> list[Frame]:
    framer = LineFramer(max_line)
    frames: list[Frame] = []
    for chunk in chunks:
        frames += framer.feed(chunk)
    return frames + framer.close()


STREAM = b'{"type":"a"}\n{"type":"b"}\r\n\nnoise\n{"type":"tail"}'
EXPECTED = [b'{"type":"a"}', b'{"type":"b"}\r', b"", b"noise", b'{"type":"tail"}']


def test_whole_input() -> None:
    assert frame_all([STREAM]) == EXPECTED


def test_one_byte_at_a_time() -> None:
    assert frame_all([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


def test_trailing_partial_line_stays_buffered_until_close() -> None:
    framer = LineFramer()
    assert framer.feed(b"one\ntwo") == [b"one"]
    assert framer.buffered == 3
    assert framer.feed(b"") == []
    assert framer.close() == [b"two"]
    assert framer.close() == []


def test_oversized_line_is_skipped_with_its_size_and_head() -> None:
    big = b'{"type":"agent_end","messages":[' + b"x" * 5000 + b"]}"
    frames = frame_all(
        [b"ok\n", big[:100], big[100:3000], big[3000:] + b"\nafter\n"], max_line=1000
    )
    assert frames[0] == b"ok"
    assert isinstance(frames[1], Oversized)
    assert frames[1].size == len(big)
    assert frames[1].head == big[:OVERSIZED_HEAD_BYTES]
    assert frames[1].tail == big[-OVERSIZED_TAIL_BYTES:]
    assert frames[2] == b"after"


def test_oversized_line_costs_no_memory_while_read() -> None:
    framer = LineFramer(1000)
    for _ in range(100):
        framer.feed(b"y" * 10_000)
        assert framer.buffered <= 1000
    frames = framer.feed(b"\n")
    assert frames == [
        Oversized(b"y" * OVERSIZED_HEAD_BYTES, 1_000_000, b"y" * OVERSIZED_TAIL_BYTES)
    ]


def test_oversized_tail_at_end_of_stream() -> None:
    assert frame_all([b"z" * 50], max_line=10) == [Oversized(b"z" * 50, 50, b"z" * 50)]
    line = bytes(b for b in range(256) if b != 10)[:200] * 5
    assert frame_all([line[:7], line[7:900], line[900:]], max_line=10) == [
        Oversized(line[:OVERSIZED_HEAD_BYTES], 1000, line[-OVERSIZED_TAIL_BYTES:])
    ]


def test_line_exactly_at_the_cap_is_kept() -> None:
    assert frame_all([b"a" * 10 + b"\n"], max_line=10) == [b"a" * 10]
    assert frame_all([b"a" * 5, b"a" * 5, b"\n"], max_line=10) == [b"a" * 10]


@given(st.binary(max_size=2000), st.lists(st.integers(min_value=0, max_value=2000), max_size=20))
def test_any_split_gives_the_same_frames(data: bytes, cuts: list[int]) -> None:
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert frame_all(chunks, max_line=64) == frame_all([data], max_line=64)
    framer = LineFramer(64)
    frames: list[Frame] = []
    for chunk in chunks:
        frames += framer.feed(bytearray(chunk))
    assert frames + framer.close() == frame_all([data], max_line=64)


@given(st.binary(max_size=3000))
def test_frames_reassemble_the_stream(data: bytes) -> None:
    frames = frame_all([data])
    assert all(isinstance(f, bytes) for f in frames)
    rebuilt = b"\n".join(f for f in frames if isinstance(f, bytes))
    assert rebuilt == (data[:-1] if data.endswith(b"\n") else data)


@given(st.binary(max_size=2000), st.lists(st.integers(min_value=0, max_value=2000), max_size=20))
def test_regions_hold_the_same_lines_as_frames(data: bytes, cuts: list[int]) -> None:
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    framer = LineFramer(64)
    lines: list[Frame] = []
    for chunk in chunks:
        got = framer.feed_region(chunk)
        lines += got.split(b"\n") if isinstance(got, bytes) else got
    lines += framer.close()
    assert lines == frame_all([data], max_line=64)
