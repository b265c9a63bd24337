"""Hostile agent output: figures no JSON number can carry, JSON only the
standard parser reads. Whatever the agent prints, the wrapper and
``normalize`` end normally, with result.json and events a person can read."""

from __future__ import annotations

import io
import itertools
import json
import math
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.conftest import (
    HANG_LIMIT,
    ROOT,
    agent_env,
    read_events,
    read_result,
    validate,
    write_scenario,
)
from tests.dialect_support import LAUNCHERS, mode_args
from wrapper.commands.normalize import normalize
from wrapper.core.config import READ_CHUNK_BYTES
from wrapper.core.events import JSON_INT_MAX, JSON_INT_MIN, AssistantMessage, Usage, WarningEvent
from wrapper.core.framing import LineFramer
from wrapper.core.summary import USAGE_UNREPRESENTABLE, RunSummary
from wrapper.dialects import SNIFF_BYTES, SNIFF_LINES, SniffingDialect
from wrapper.dialects.base import Dialect, merge_deltas
from wrapper.dialects.pi import PiDialect

dialects = pytest.mark.parametrize("dialect", sorted(LAUNCHERS))

HUGE = 2**64 - 1  # the largest count that can be written; two of them cannot

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def representable(value: int) -> bool:
    return JSON_INT_MIN <= value <= JSON_INT_MAX


def wrapper(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "wrapper", *args],
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def normalized(stream: bytes, dialect: str, *, summary: bool) -> Any:
    out = io.BytesIO()
    normalize(
        io.BytesIO(stream),
        out,
        dialect_name=dialect,
        summary=summary,
        exit_code=0,
        max_line_bytes=1 << 26,
    )
    if summary:
        return json.loads(out.getvalue())
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    for event in events:
        assert "ts" not in event
    return events


def unrepresentable_warnings(warnings: list[dict[str, Any]]) -> list[str]:
    return [w["message"] for w in warnings if w["code"] == USAGE_UNREPRESENTABLE]


# -- usage as a value --------------------------------------------------------------------

counts = st.one_of(st.none(), st.integers(), st.integers(min_value=2**63, max_value=2**66))
costs = st.one_of(st.none(), st.floats(), st.floats(min_value=1e307))


def expected_sum(values: list[Any], fits: Any) -> tuple[Any, bool]:
    """What a running total of ``values`` must show, and whether a figure was lost:
    once a figure or a partial sum does not fit, the total is unknown for good."""
    total = None
    for value in values:
        if value is None:
            continue
        if not fits(value):
            return None, True
        total = value if total is None else total + value
        if not fits(total):
            return None, True
    return total, False


@given(st.lists(st.tuples(counts, counts, costs), min_size=1, max_size=4))
def test_usage_of_any_size_sums_to_something_writable(figures: list[tuple[Any, ...]]) -> None:
    usages = [Usage(input=a, total_tokens=b, cost_usd=c) for a, b, c in figures]
    total = usages[0]
    for usage in usages[1:]:
        total = total + usage
    written = orjson.loads(orjson.dumps(total.to_json()))  # raises if a figure cannot be written
    for index, name, fits in (
        (0, "input", representable),
        (1, "totalTokens", representable),
        (2, "costUsd", math.isfinite),
    ):
        value, lost = expected_sum([figure[index] for figure in figures], fits)
        assert written[name] == value
        assert (name in total.unrepresentable) == lost


def test_a_lost_figure_stays_lost_and_is_warned_about_once() -> None:
    summary = RunSummary()
    message = AssistantMessage(stop_reason="toolUse", usage=Usage(input=HUGE, output=1))
    assert summary.observe(message) == []
    (warning,) = summary.observe(message)
    assert warning.code == USAGE_UNREPRESENTABLE
    assert "input" in warning.message
    # A later message does not bring back a partial (wrong) sum, nor repeat the warning.
    assert summary.observe(AssistantMessage(stop_reason="stop", usage=Usage(input=3))) == []
    assert summary.usage is not None
    assert summary.usage.to_json()["input"] is None
    assert summary.usage.to_json()["output"] == 2


# -- the live run and normalize, in every dialect ------------------------------------------


def huge_usage_steps() -> list[dict[str, Any]]:
    usage = {
        "input": HUGE,
        "output": HUGE,
        "cacheRead": 0,
        "cacheWrite": 0,
        "cost": {"total": 1e308},
    }
    return [
        {
            "assistant": {
                "text": "Looking.",
                "toolCalls": [{"name": "bash", "arguments": {"command": "ls"}}],
                "usage": usage,
            }
        },
        {"tool": {"name": "bash", "result": "a.py"}},
        {"assistant": {"text": "Done.", "stopReason": "stop", "usage": usage}},
        *END,
    ]


@pytest.mark.usefixtures("no_leaks")
@dialects
def test_usage_beyond_64_bits_in_a_live_run_and_in_normalize(dialect: str, tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, huge_usage_steps())
    run_dir = tmp_path / "run"
    agent = ROOT / "fixtures" / "fake_agent" / LAUNCHERS[dialect]
    proc = wrapper(
        "run", "--output", "jsonl", "--run-dir", str(run_dir), "--task", "Go",
        "--", str(agent), *mode_args(dialect), "--scenario", str(scenario),
        tmp_path=tmp_path,
    )  # fmt: skip
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "ok"
    assert (result["finalText"] or "").endswith("Done.")
    assert result["usage"]["input"] is None
    assert result["usage"]["output"] is None
    assert result["usage"]["costUsd"] is None
    assert unrepresentable_warnings(result["warnings"])
    events = read_events(run_dir / "events.jsonl")
    assert [
        e
        for e in events
        if e["code" if e["type"] == "warning" else "type"] == USAGE_UNREPRESENTABLE
    ]
    status = json.loads((run_dir / "status.json").read_text())
    validate("status", status)
    assert status["state"] == "finished"

    # The same stream, saved, through normalize: the same figures, the same warning.
    stream = (run_dir / "stdout.log").read_bytes()
    summary = normalized(stream, dialect, summary=True)
    assert summary["usage"]["input"] is None
    assert (summary["finalText"] or "").endswith("Done.")
    assert unrepresentable_warnings(summary["warnings"])
    lines = normalized(stream, dialect, summary=False)
    assert any(e["type"] == "warning" and e["code"] == USAGE_UNREPRESENTABLE for e in lines)
    for event in lines:
        validate("event", {**event, "ts": "2026-01-01T00:00:00Z", "attempt": 1})


# -- crafted streams in each dialect's shape -----------------------------------------------

#: Markers the fake agent prints that the tests then replace with hostile JSON.
TEXT_MARK = b"XMARKX"
COUNT_MARK = b"111111111"
COST_MARK = b"0.123456"


@pytest.fixture(scope="module")
def marked_streams(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """One stream per dialect, as its fake agent prints it, with markers in
    the final text, an input count and (where the dialect has one) the cost."""
    tmp_path = tmp_path_factory.mktemp("streams")
    usage: dict[str, Any] = {"input": int(COUNT_MARK), "output": 7, "cacheRead": 0}
    usage |= {"cacheWrite": 0, "cost": {"total": float(COST_MARK)}}
    text = f"Done {TEXT_MARK.decode()} now."
    steps = [{"assistant": {"text": text, "stopReason": "stop", "usage": usage}}, *END]
    scenario = write_scenario(tmp_path, steps)
    streams = {}
    for dialect, launcher in LAUNCHERS.items():
        proc = subprocess.run(
            [
                str(ROOT / "fixtures" / "fake_agent" / launcher),
                "--scenario",
                str(scenario),
                "--",
                "Go",
            ],
            capture_output=True,
            timeout=HANG_LIMIT,
            env=agent_env(tmp_path),
            stdin=subprocess.DEVNULL,
            check=True,
        )
        assert TEXT_MARK in proc.stdout
        assert COUNT_MARK in proc.stdout
        streams[dialect] = proc.stdout
    return streams


#: Replacements that make a line JSON the fast decoder refuses but that is still JSON.
LONE_SURROGATES = [
    (TEXT_MARK, rb"\ud800"),  # a high surrogate with no low one after it
    (TEXT_MARK, rb"\udfff\ud83d"),  # a low one first, then a high one at the end
]


@dialects
@pytest.mark.parametrize("mark", LONE_SURROGATES, ids=["high", "low-high"])
def test_a_lone_surrogate_is_still_read(
    dialect: str, mark: tuple[bytes, bytes], marked_streams: dict[str, bytes]
) -> None:
    stream = marked_streams[dialect].replace(*mark)
    summary = normalized(stream, dialect, summary=True)
    count = mark[1].count(b"\\u")
    assert summary["finalText"] is not None
    assert "Done " + "\ufffd" * count + " now." in summary["finalText"]
    assert summary["stopReason"] == "stop"
    events = normalized(stream, dialect, summary=False)
    assert not [e for e in events if e["type"] == "unparsed_line"]


@dialects
@pytest.mark.parametrize(
    ("figure", "cost_lost"),
    [
        (b"1e400", True),
        (b"184467440737095516160", False),  # a float cost, but no 64-bit count
        (b"-1" + b"0" * 400, True),
        (b"NaN", True),
        (b"Infinity", True),
    ],
    ids=["exp-overflow", "beyond-64-bits", "400-digits", "NaN", "Infinity"],
)
def test_a_figure_no_number_can_carry_is_null_with_a_warning(
    dialect: str, figure: bytes, cost_lost: bool, marked_streams: dict[str, bytes]
) -> None:
    stream = marked_streams[dialect].replace(COUNT_MARK, figure).replace(COST_MARK, figure)
    summary = normalized(stream, dialect, summary=True)
    assert summary["stopReason"] == "stop"
    assert summary["finalText"] is not None
    assert "XMARKX" in summary["finalText"]
    assert summary["usage"]["input"] is None
    if cost_lost and COST_MARK in marked_streams[dialect]:
        assert summary["usage"]["costUsd"] is None
    assert unrepresentable_warnings(summary["warnings"])


@pytest.mark.usefixtures("no_leaks")
@dialects
def test_hostile_lines_replayed_by_cat_in_a_live_run(
    dialect: str, marked_streams: dict[str, bytes], tmp_path: Path
) -> None:
    stream = marked_streams[dialect].replace(TEXT_MARK, rb"\ud800").replace(COUNT_MARK, b"1e400")
    stream = stream.replace(COST_MARK, b"1e400")
    (tmp_path / "stream.jsonl").write_bytes(stream)
    run_dir = tmp_path / "run"
    proc = wrapper(
        "run", "--output", "jsonl", "--run-dir", str(run_dir), "--dialect", dialect,
        "--", "cat", str(tmp_path / "stream.jsonl"),
        tmp_path=tmp_path,
    )  # fmt: skip
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "ok"
    assert result["finalText"] is not None
    assert "Done \ufffd now." in result["finalText"]
    assert result["usage"]["input"] is None
    assert unrepresentable_warnings(result["warnings"])
    assert (run_dir / "stdout.log").read_bytes() == stream, (
        "the agent's bytes are kept as they were"
    )
    events = read_events(run_dir / "events.jsonl")
    assert not [e for e in events if e["type"] == "unparsed_line"]
    stdout_events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert any("\ufffd" in json.dumps(e, ensure_ascii=False) for e in stdout_events)


def test_normalize_on_the_command_line_exits_0_without_a_traceback(tmp_path: Path) -> None:
    big = {"input": HUGE, "output": 1, "cost": {"total": 1e308}}
    message = {
        "type": "message_end",
        "message": {"role": "assistant", "content": [], "stopReason": "toolUse", "usage": big},
    }
    stream = b"".join(json.dumps(message).encode() + b"\n" for _ in range(2))
    (tmp_path / "stream.jsonl").write_bytes(stream)
    for args in (["--summary"], []):
        proc = wrapper("normalize", "--dialect", "pi", *args, "stream.jsonl", tmp_path=tmp_path)
        assert proc.returncode == 0
        assert proc.stderr == b""
        assert b'"usage_unrepresentable"' in proc.stdout


# -- one line, one meaning, however it is chunked ------------------------------------------


def pi_update(
    delta: str,
    *,
    event_extra: str = "",
    before_event: str = "",
    after_event: str = "",
    event_type: str = "text_delta",
    content_index: str = "0",
) -> bytes:
    """A pi ``message_update`` line, written as pi writes it unless told otherwise."""
    message = (
        '{"role":"assistant","content":[{"type":"text","text":"so \\"type\\": far"}],'
        '"stopReason":"stop"}'
    )
    event = f'{{"type":"{event_type}","contentIndex":{content_index},"delta":{delta}{event_extra}}}'
    return (
        f'{{"type":"message_update","message":{message}{before_event},'
        f'"assistantMessageEvent":{event}{after_event}}}'
    ).encode()


#: Deltas as JSON text: ordinary, escaped, empty, and some no decoder takes.
delta_texts = st.one_of(
    st.text(max_size=6).map(json.dumps),
    st.text(max_size=6).map(lambda t: json.dumps(t, ensure_ascii=False)),
    st.sampled_from(['""', '"\\ud800"', '"a\\x"', '"a\x01b"', '"\\"text_delta\\""']),
)

#: Ways to make a line mean something else than its first bytes say.
update_lines = st.builds(
    pi_update,
    delta_texts,
    event_extra=st.sampled_from(
        [
            "",
            ',"delta":"second"',  # a duplicated key: the last one counts
            ',"type":"thinking_delta"',
            ',"partial":{"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"x"}}',
        ]
    ),
    before_event=st.sampled_from(
        ["", ',"type":"message_end"', ',"typ\\u0065":"message_end"', ',"type" :"message_end"']
    ),
    after_event=st.sampled_from(["", ',"type":"message_end"', ',"note":"text_delta"']),
    event_type=st.sampled_from(["text_delta", "thinking_delta", "text\\u005fdelta"]),
    content_index=st.sampled_from(["0", "12", "007", "-1"]),
)
other_lines = st.sampled_from(
    [
        b'{"type":"turn_start"}',
        b'{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"stop"}}',
        b"not json",
        b"",
        b'{"type":"message_update","message":{}}',
    ]
)


def full_parse(lines: list[bytes]) -> list[Any]:
    """What decoding every line in full makes of them: the meaning to agree with."""
    reference = PiDialect()
    return [event for line in lines for event in Dialect.parse(reference, line)]


def read_as_the_supervisor(stream: bytes, cuts: list[int], *, coalesce: bool) -> list[Any]:
    dialect = PiDialect()
    framer = LineFramer(1 << 20)
    events: list[Any] = []
    bounds = [0, *sorted(set(cuts)), len(stream)]
    for start, end in itertools.pairwise(bounds):
        region = framer.feed_region(stream[start:end])
        if isinstance(region, bytes):
            events += dialect.parse_region(region, coalesce=coalesce)
        else:
            events += dialect.parse_frames(region, coalesce=coalesce)
    events += dialect.parse_frames(framer.close(), coalesce=coalesce)
    return events


@given(
    st.lists(st.one_of(update_lines, other_lines), min_size=1, max_size=8),
    st.lists(st.integers(min_value=0, max_value=4000), max_size=6),
)
def test_a_line_means_the_same_however_it_is_chunked(lines: list[bytes], cuts: list[int]) -> None:
    stream = b"\n".join(lines) + b"\n"
    cuts = [cut % (len(stream) + 1) for cut in cuts]
    expected = full_parse(lines)
    line_by_line = [event for line in lines for event in PiDialect().parse(line)]
    assert line_by_line == expected
    for chunking in ([], cuts, list(range(len(stream)))):
        assert read_as_the_supervisor(stream, chunking, coalesce=False) == expected
        coalesced = read_as_the_supervisor(stream, chunking, coalesce=True)
        assert merge_deltas(coalesced) == merge_deltas(expected)


@given(
    st.lists(
        st.tuples(update_lines, st.integers(min_value=0), st.binary(max_size=4)),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.integers(min_value=0, max_value=4000), max_size=6),
)
def test_even_a_damaged_line_means_the_same_however_it_is_chunked(
    damaged: list[tuple[bytes, int, bytes]], cuts: list[int]
) -> None:
    # Bytes spliced anywhere in a line (a pi line read from its two ends may
    # then differ from a full decoding: see docs/guarantees.md), but never with chunking.
    lines = []
    for line, position, junk in damaged:
        at = position % (len(line) + 1)
        lines.append(line[:at] + junk.replace(b"\n", b"") + line[at:])
    stream = b"\n".join(lines) + b"\n"
    cuts = [cut % (len(stream) + 1) for cut in cuts]
    whole = [event for line in lines for event in PiDialect().parse(line)]
    for chunking in ([], cuts, list(range(len(stream)))):
        assert read_as_the_supervisor(stream, chunking, coalesce=False) == whole
        coalesced = read_as_the_supervisor(stream, chunking, coalesce=True)
        assert merge_deltas(coalesced) == merge_deltas(whole)


# -- bounded memory -------------------------------------------------------------------------


def unknown_line(size: int) -> bytes:
    """A JSON object no agent's dialect claims, ``size`` bytes long."""
    head = b'{"kind":"telemetry","blob":"'
    return head + b"z" * (size - len(head) - 2) + b'"}'


@given(st.lists(st.integers(min_value=1, max_value=400_000), min_size=1, max_size=40))
@example([400_000] * 3)
def test_auto_detection_holds_at_most_a_mebibyte(sizes: list[int]) -> None:
    dialect = SniffingDialect()
    events: list[Any] = []
    for size in sizes:
        events += dialect.parse(unknown_line(max(size, 40)))
        assert sum(map(len, dialect._held)) <= SNIFF_BYTES
    events += dialect.flush()
    # Nothing is lost: every line is reported, and giving up is said once.
    assert [type(e).__name__ for e in events].count("UnparsedLine") == len(sizes)
    gave_up = [e for e in events if isinstance(e, WarningEvent)]
    total = sum(max(size, 40) for size in sizes)
    assert len(gave_up) == (1 if total > SNIFF_BYTES or len(sizes) >= SNIFF_LINES else 0)


def test_recognition_within_the_bound_still_replays_what_was_held() -> None:
    dialect = SniffingDialect()
    assert dialect.parse(unknown_line(SNIFF_BYTES // 2)) == []
    end = {"role": "assistant", "content": [{"type": "text", "text": "Hi"}], "stopReason": "stop"}
    assert dialect.parse(json.dumps({"type": "message_end", "message": end}).encode()) == []
    events = dialect.parse(b'{"type":"session","version":3,"id":"s1","cwd":"/w"}')
    assert dialect.chosen is not None
    assert dialect.chosen.name == "pi"
    assert [type(e).__name__ for e in events] == ["AssistantMessage", "SessionStarted"]


@pytest.mark.usefixtures("no_leaks")
def test_an_unrecognisable_stream_of_big_lines_gives_up_after_a_mebibyte(tmp_path: Path) -> None:
    lines = [unknown_line(600_000) for _ in range(3)]
    lines.append(b'{"type":"session","version":3,"id":"s1","cwd":"/w"}')
    stream = b"\n".join(lines) + b"\n"
    (tmp_path / "stream.jsonl").write_bytes(stream)
    run_dir = tmp_path / "run"
    proc = wrapper(
        "run", "--output", "quiet", "--run-dir", str(run_dir),
        "--", "cat", str(tmp_path / "stream.jsonl"),
        tmp_path=tmp_path,
    )  # fmt: skip
    assert b"Traceback" not in proc.stderr
    result = read_result(run_dir / "result.json")
    (warning,) = [w for w in result["warnings"] if w["code"] == "dialect_unknown"]
    assert "2 lines" in warning["message"]
    events = read_events(run_dir / "events.jsonl")
    assert [e["type"] for e in events].count("unparsed_line") == 4
    assert not [e for e in events if e["type"] == "session"], "no longer interpreted"
    assert (run_dir / "stdout.log").read_bytes() == stream


LINE_MIB = 16


def long_line_chunks(kind: str, size: int) -> list[bytes]:
    """One ``kind`` line of about ``size`` bytes of ASCII text, as the pipe delivers it."""
    message = b'"message":{"role":"assistant","content":[{"type":"text","text":"'
    if kind == "update":
        head = b'{"type":"message_update",' + message
        tail = b'"}]},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"d"}}\n'
    else:
        head = b'{"type":"message_end",' + message
        tail = b'"}],"stopReason":"stop"}}\n'
    body = b"x" * READ_CHUNK_BYTES
    return [head, *[body] * ((size - len(head) - len(tail)) // len(body)), tail]


def test_the_framer_holds_a_long_line_at_about_twice_its_size() -> None:
    chunks = long_line_chunks("update", LINE_MIB << 20)
    size = sum(map(len, chunks)) - 1
    framer = LineFramer()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        regions = [framer.feed_region(chunk) for chunk in chunks]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [len(r) for r in regions if r] == [size]
    assert peak <= 2.2 * size, f"{peak / size:.2f} times the line"


PEAK_PROBE = """
import sys
from wrapper.dialects.pi import PiDialect
from wrapper.core.framing import LineFramer
from tests.test_hostile import LINE_MIB, long_line_chunks

def memory(key):
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) * 1024 for l in status if l.startswith(key))

chunks = long_line_chunks(sys.argv[1], LINE_MIB << 20)
size = sum(map(len, chunks))
dialect, framer = PiDialect(), LineFramer()
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")  # the peak so far is forgotten: only reading the line counts
base = memory("VmRSS:")
events = []
for chunk in chunks:
    region = framer.feed_region(chunk)
    if isinstance(region, bytes):
        events += dialect.parse_region(region, coalesce=True)
    else:
        events += dialect.parse_frames(region, coalesce=True)
del region, chunk
print((memory("VmHWM:") - base) / size, [type(e).__name__ for e in events])
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize(
    ("kind", "bound", "event"),
    [
        # read from its two ends: the line and one copy while it is completed
        ("update", 2.4, "TextDelta"),
        # decoded in full: the line, the decoder's working copy, the text
        ("end", 3.4, "AssistantMessage"),
    ],
)
def test_peak_memory_of_one_long_ascii_line(kind: str, bound: float, event: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PEAK_PROBE, kind],
        capture_output=True,
        timeout=HANG_LIMIT,
        cwd=ROOT,
        check=True,
    )
    ratio, events = proc.stdout.decode().split(" ", 1)
    assert event in events
    assert float(ratio) <= bound, f"{float(ratio):.2f} times the line"


# -- arguments that are not UTF-8 ------------------------------------------------------


@pytest.mark.parametrize("output", ["quiet", "jsonl", "pretty"])
def test_arguments_that_are_not_utf8_still_end_in_a_result(tmp_path: Path, output: str) -> None:
    # File names and labels are bytes on POSIX; Python hands the ones that are
    # not UTF-8 over as lone surrogates, which no JSON can carry.
    odd = os.fsdecode(b"\xff\xfe")
    scenario = write_scenario(tmp_path, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
    run_dir = tmp_path / f"run-{odd}"
    proc = wrapper(
        *("run", "--output", output, "--run-dir", str(run_dir), "--label", f"label-{odd}"),
        *("--task", "Do the task", "--", str(ROOT / "fixtures" / "fake_agent" / "pi")),
        *("--mode", "json", "-p", "--scenario", str(scenario), f"--extra-{odd}"),
        tmp_path=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"Traceback" not in proc.stderr
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "ok"
    assert result["label"] == "label-\ufffd\ufffd"
    assert result["command"][-1] == "--extra-\ufffd\ufffd"
    assert result["artifacts"]["runDir"].endswith("run-\ufffd\ufffd")
    # The agent itself got the exact bytes.
    spawned = next(e for e in read_events(run_dir / "events.jsonl") if e["type"] == "spawned")
    assert "--extra-\ufffd\ufffd" in spawned["argv"]
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "finished"
