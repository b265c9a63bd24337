"""The event stream: numbering, coalesced deltas in the log, every delta live."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import schema, validate
from wrapper.core.events import AgentWarning, Event, TextDelta, TurnStarted, WarningEvent
from wrapper.core.limits import LOG_FLUSH_INTERVAL
from wrapper.files.artifacts import ArtifactErrors, StreamFile
from wrapper.sinks.stream import COALESCE_MAX_CHARS, EventStream, LiveLogs


def open_stream(tmp_path: Path, live: list[bytes] | None = None) -> tuple[EventStream, Path]:
    path = tmp_path / "events.jsonl"
    log = StreamFile("events", path, ArtifactErrors(), enabled=True)

    def watch(event: Event, line: bytes) -> None:
        assert live is not None
        live.append(line)

    return EventStream(log, watch if live is not None else None), path


def logged(path: Path) -> list[dict[str, object]]:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    for event in events:
        validate("event", event)
    return events


def test_deltas_are_coalesced_in_the_log_and_sent_one_by_one_live(tmp_path: Path) -> None:
    live: list[bytes] = []
    stream, path = open_stream(tmp_path, live)
    stream.emit(TurnStarted(), 1.0)
    for piece in ("Hel", "lo ", "world"):
        stream.emit(TextDelta(text=piece), 2.0)
    stream.emit(WarningEvent(code="w", message="careful"), 3.0)
    stream.flush()
    events = logged(path)
    assert [e["type"] for e in events] == ["turn_start", "text_delta", "warning"]
    assert events[1]["text"] == "Hello world"
    assert events[1]["coalesced"] == 3
    assert events[1]["seq"] == 2
    assert events[2]["seq"] == 5
    assert [json.loads(line)["seq"] for line in live] == [1, 2, 3, 4, 5]
    assert stream.warnings == [{"code": "w", "message": "careful"}]


def test_a_long_run_of_deltas_is_cut_so_memory_stays_flat(tmp_path: Path) -> None:
    stream, path = open_stream(tmp_path)
    piece = "x" * 1000
    count = 3 * COALESCE_MAX_CHARS // len(piece)
    for _ in range(count):
        stream.emit(TextDelta(text=piece), 1.0)
    stream.flush()
    events = logged(path)
    assert len(events) >= 3
    assert all(len(str(e["text"])) <= COALESCE_MAX_CHARS + len(piece) for e in events)
    assert "".join(str(e["text"]) for e in events) == piece * count
    assert sum(int(str(e["coalesced"])) for e in events) == count


def _all_event_classes(cls: type[Event]) -> list[type[Event]]:
    found = []
    for sub in cls.__subclasses__():
        # The wrapper's own: another test's event type made up for a refusal
        # may not have been collected yet.
        if sub.TYPE and sub.__module__.startswith("wrapper."):
            found.append(sub)
        found += _all_event_classes(sub)
    return found


def test_every_event_type_is_in_the_schema_with_its_source() -> None:
    allowed = set(schema("event")["properties"]["type"]["enum"])
    classes = _all_event_classes(Event)
    assert len(classes) >= 19
    for cls in classes:
        assert cls.TYPE in allowed, cls
        assert cls.SOURCE in ("agent", "wrapper")


def test_warnings_say_whether_the_agent_or_the_wrapper_reported_them(tmp_path: Path) -> None:
    stream, path = open_stream(tmp_path)
    stream.emit(AgentWarning(code="agent_error", message="Codex: stream disconnected"), 1.0)
    stream.emit(WarningEvent(code="hook_failed", message="gate.py crashed"), 2.0)
    stream.flush()
    assert [(e["type"], e["source"]) for e in logged(path)] == [
        ("warning", "agent"),
        ("warning", "wrapper"),
    ]
    assert [w["code"] for w in stream.warnings] == ["agent_error", "hook_failed"]


#: Half of the size at which a run of deltas is cut in the log.
HALF = "z" * (COALESCE_MAX_CHARS // 2)
delta_texts = (
    st.just(HALF)
    | st.text(max_size=8)
    | st.text(alphabet='ab"\\\n\x00é😀', max_size=3)
    | st.builds(
        lambda n: "y" * n,
        st.integers(min_value=COALESCE_MAX_CHARS // 3, max_value=COALESCE_MAX_CHARS),
    )
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.lists(delta_texts, max_size=6), max_size=8),
    st.booleans(),
)
# A run that reaches the cut exactly, in the middle of a chunk.
@example(runs=[[HALF, HALF, "a"]], lines=True)
def test_a_run_of_deltas_at_once_writes_what_one_by_one_writes(
    tmp_path_factory: pytest.TempPathFactory, runs: list[list[str]], lines: bool
) -> None:
    """The same log and the same live bytes, byte for byte, whether the
    deltas of a chunk are emitted together or each on its own."""
    outputs = []
    for together in (False, True):
        path = tmp_path_factory.mktemp("stream") / "events.jsonl"
        log = StreamFile("events", path, ArtifactErrors(), enabled=True)
        live: list[bytes] = []

        def watch(event: Event, line: bytes, live: list[bytes] = live) -> None:
            live.append(line)

        stream = EventStream(log, watch, live_lines=live.append if lines else None)
        for index, run in enumerate(runs):
            now = 1_700_000_000.0 + index
            if together:
                stream.emit_texts(run, now)
            else:
                for text in run:
                    stream.emit(TextDelta(text=text), now)
            if index % 3 == 2:
                stream.emit(TurnStarted(), now)
        stream.flush()
        outputs.append((path.read_bytes(), b"".join(live)))
    assert outputs[0] == outputs[1]


class CountedLog(StreamFile):
    """A log that counts its flushes that wrote something."""

    def __init__(self, path: Path) -> None:
        super().__init__("events", path, ArtifactErrors(), enabled=True)
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += self.held
        super().flush()


def lines_in(path: Path) -> int:
    return path.read_bytes().count(b"\n")


async def test_a_busy_log_reaches_its_file_within_the_interval_and_not_line_by_line(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    # An agent that writes without ever pausing: only the interval flushes.
    path = tmp_path / "events.jsonl"
    log = CountedLog(path)
    stream = EventStream(log, None)
    logs = LiveLogs(stream, [], LOG_FLUSH_INTERVAL)
    step, seconds = 0.01, 5.0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(logs.run)
        emitted: list[float] = []
        while len(emitted) * step < seconds:
            stream.emit(TurnStarted(), 1.0)
            emitted.append(trio.current_time())
            await trio.sleep(step)
            now = trio.current_time()
            due = sum(at <= now - LOG_FLUSH_INTERVAL - step for at in emitted)
            assert lines_in(path) >= due, f"{now - emitted[0]:.2f}s in"
        nursery.cancel_scope.cancel()
    assert len(emitted) == 500
    assert log.flushes <= seconds / LOG_FLUSH_INTERVAL + 2, "a flush per interval, not per line"


async def test_what_a_pause_finds_held_is_written_at_once_deltas_included(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    path = tmp_path / "events.jsonl"
    stream = EventStream(StreamFile("events", path, ArtifactErrors(), enabled=True), None)
    logs = LiveLogs(stream, [], LOG_FLUSH_INTERVAL)
    stream.emit(TurnStarted(), 1.0)
    stream.emit(TextDelta(text="Hel"), 1.0)
    stream.emit(TextDelta(text="lo"), 1.0)
    assert lines_in(path) == 0
    logs.idle()
    assert [(e["type"], e.get("text")) for e in logged(path)] == [
        ("turn_start", None),
        ("text_delta", "Hello"),
    ]


async def test_deltas_held_for_coalescing_reach_the_log_within_the_interval(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    path = tmp_path / "events.jsonl"
    stream = EventStream(StreamFile("events", path, ArtifactErrors(), enabled=True), None)
    other = CountedLog(tmp_path / "stdout.log")
    logs = LiveLogs(stream, [other], LOG_FLUSH_INTERVAL)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(logs.run)
        await trio.sleep(10)
        assert other.flushes == 0, "nothing written, nothing flushed"
        stream.emit(TextDelta(text="Thinking"), 1.0)
        other.write(b"a line\n")
        await trio.sleep(LOG_FLUSH_INTERVAL)
        assert [e["text"] for e in logged(path)] == ["Thinking"]
        assert (tmp_path / "stdout.log").read_bytes() == b"a line\n"
        nursery.cancel_scope.cancel()
