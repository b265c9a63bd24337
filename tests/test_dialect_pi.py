"""pi's stream -> normalized events: stop-reason mapping, raw kept, bad lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.dialect_support import line
from tests.dialect_table import ANSWER, FAILURE, LS, Agent, Argv, Samples
from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    Compaction,
    OversizedLine,
    Retry,
    SessionStarted,
    TextDelta,
    ToolEnded,
    ToolStarted,
    UnparsedLine,
    is_terminal,
)
from wrapper.core.framing import LineFramer, Oversized
from wrapper.dialects import (
    SniffingDialect,
    UsageError,
    resolve_dialect,
)
from wrapper.dialects.base import MAX_ARG_BYTES, CannotResume, merge_deltas
from wrapper.dialects.pi import PiDialect


def message_end(stop_reason: Any, text: str = "hi", **extra: Any) -> bytes:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stopReason": stop_reason,
        "model": "m1",
        "usage": {
            "input": 5,
            "output": 7,
            "cacheRead": 1,
            "cacheWrite": 0,
            "totalTokens": 13,
            "cost": {"total": 0.25},
        },
        **extra,
    }
    return line({"type": "message_end", "message": message})


@pytest.mark.parametrize(
    ("raw", "canonical", "terminal"),
    [
        ("stop", "stop", True),
        ("end_turn", "stop", True),
        ("endTurn", "stop", True),
        ("length", "length", True),
        ("toolUse", "toolUse", False),
        ("tool_use", "toolUse", False),
        ("aborted", "aborted", True),
        ("error", "error", True),
    ],
)
def test_known_stop_reasons_map_and_keep_the_raw_value(
    raw: str, canonical: str, terminal: bool
) -> None:
    [event] = PiDialect().parse(message_end(raw))
    assert isinstance(event, AssistantMessage)
    assert event.stop_reason == canonical
    assert event.raw_stop_reason == raw
    assert is_terminal(event.stop_reason) is terminal


@pytest.mark.parametrize("raw", ["pause_turn", "refusal", "STOP", ""])
def test_unknown_stop_reason_is_preserved_and_not_terminal(raw: str) -> None:
    [event] = PiDialect().parse(message_end(raw))
    assert isinstance(event, AssistantMessage)
    assert event.stop_reason == raw
    assert event.raw_stop_reason == raw
    assert not is_terminal(event.stop_reason)


@pytest.mark.parametrize("raw", [None, 42, ["stop"]])
def test_missing_or_malformed_stop_reason_is_none_and_not_terminal(raw: Any) -> None:
    [event] = PiDialect().parse(message_end(raw))
    assert isinstance(event, AssistantMessage)
    assert event.stop_reason is None
    assert not is_terminal(event.stop_reason)


def test_assistant_message_fields() -> None:
    content = [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "Running it."},
        {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls  -la"}},
    ]
    raw = line(
        {
            "type": "message_end",
            "message": {
                "role": "assistant",
                "content": content,
                "stopReason": "toolUse",
                "model": "m",
                "usage": {"input": 1, "output": 2, "totalTokens": 3, "cost": {"total": 0.5}},
            },
        }
    )
    [event] = PiDialect().parse(raw)
    assert isinstance(event, AssistantMessage)
    assert event.text == "Running it."
    assert [(c.name, c.id, c.summary) for c in event.tool_calls] == [("bash", "c1", "ls -la")]
    assert event.usage is not None
    assert (event.usage.input, event.usage.output, event.usage.cost_usd) == (1, 2, 0.5)
    assert event.usage.cache_read is None


def test_error_message_is_kept() -> None:
    [event] = PiDialect().parse(message_end("error", text="", errorMessage="529 overloaded"))
    assert isinstance(event, AssistantMessage)
    assert event.error_message == "529 overloaded"


def test_user_and_tool_result_messages_are_not_assistant_messages() -> None:
    for role in ("user", "toolResult"):
        raw = line({"type": "message_end", "message": {"role": role, "content": "x"}})
        assert PiDialect().parse(raw) == []


def test_lifecycle_events() -> None:
    dialect = PiDialect()
    assert dialect.parse(line({"type": "session", "version": 3, "id": "s1", "cwd": "/w"})) == [
        SessionStarted(session_id="s1", cwd="/w")
    ]
    delta = {
        "type": "message_update",
        "assistantMessageEvent": {"type": "text_delta", "delta": "He"},
    }
    assert dialect.parse(line(delta)) == [TextDelta(text="He")]
    thinking = {
        "type": "message_update",
        "assistantMessageEvent": {"type": "thinking_delta", "delta": "x"},
    }
    assert dialect.parse(line(thinking)) == []
    start = {
        "type": "tool_execution_start",
        "toolCallId": "t",
        "toolName": "read",
        "args": {"path": "a.py"},
    }
    assert dialect.parse(line(start)) == [
        ToolStarted(tool="read", tool_call_id="t", summary="a.py")
    ]
    end = {"type": "tool_execution_end", "toolCallId": "t", "toolName": "read", "isError": True}
    assert dialect.parse(line(end)) == [ToolEnded(tool="read", tool_call_id="t", is_error=True)]
    retry = {
        "type": "auto_retry_start",
        "attempt": 1,
        "maxAttempts": 3,
        "delayMs": 2000,
        "errorMessage": "x",
    }
    assert dialect.parse(line(retry)) == [
        Retry(phase="start", retry_attempt=1, max_attempts=3, delay_ms=2000, message="x")
    ]
    assert dialect.parse(line({"type": "agent_end", "willRetry": True})) == [
        AgentEnded(will_retry=True)
    ]
    assert dialect.parse(line({"type": "agent_end", "messages": []})) == [
        AgentEnded(will_retry=None)
    ]
    assert dialect.parse(line({"type": "agent_settled"})) == [
        AgentEnded(will_retry=False, settled=True)
    ]
    assert dialect.parse(line({"type": "brand_new_event"})) == []


@pytest.mark.parametrize("prefix", ["", "auto_"], ids=["pi-0.73", "before-0.73"])
def test_compaction_is_read_under_both_of_its_names(prefix: str) -> None:
    # pi 0.73.1 (docs/json.md): compaction_start {reason}, compaction_end
    # {reason, result, aborted, willRetry}; before 0.73 the same events were
    # auto_compaction_start/_end, the end without a reason.
    dialect = PiDialect()
    start = {"type": f"{prefix}compaction_start", "reason": "threshold"}
    end = {
        "type": f"{prefix}compaction_end",
        "reason": "threshold",
        "result": {"summary": "s", "firstKeptEntryId": "e1", "tokensBefore": 150000},
        "aborted": False,
        "willRetry": False,
    }
    assert dialect.parse(line(start)) == [Compaction(phase="start", reason="threshold")]
    assert dialect.parse(line(end)) == [Compaction(phase="end", reason="threshold")]


def test_fields_of_the_wrong_type_do_not_raise() -> None:
    dialect = PiDialect()
    objects: list[dict[str, Any]] = [
        {"type": ["message_end"]},
        {"type": "message_end", "message": "nope"},
        {
            "type": "message_end",
            "message": {"role": "assistant", "content": [1, None, {"type": "text"}]},
        },
        {"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "delta": 5}},
        {"type": "tool_execution_start", "toolName": None, "args": [1]},
        {"type": "auto_retry_start", "attempt": "one"},
        {"type": "session", "id": 7},
    ]
    for obj in objects:
        dialect.parse(line(obj))


# -- launching ---------------------------------------------------------------------


@pytest.mark.parametrize("task", ["-v is broken", "--help me", "@README.md explain"])
def test_task_that_looks_like_a_flag_or_file_still_reaches_pi_as_text(
    task: str, tmp_path: Path
) -> None:
    argv = PiDialect().launch(["pi", "-p"], task, tmp_path).argv
    assert argv[-1].strip() == task
    assert not argv[-1].startswith(("-", "@"))


def test_task_too_long_for_one_argument_goes_through_a_file(tmp_path: Path) -> None:
    task = "x" * (MAX_ARG_BYTES + 1)
    launch = PiDialect().launch(["pi", "-p"], task, tmp_path)
    path = tmp_path / "task.md"
    assert launch.argv == ["pi", "-p", f"@{path}"]
    assert launch.files == {path: task}


def test_auto_dialect_unknown_executable_with_task_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--dialect"):
        resolve_dialect("auto", ["my-agent"], True)


def test_auto_dialect_without_task_recognises_the_stream() -> None:
    dialect = resolve_dialect("auto", ["my-agent"], False)
    assert isinstance(dialect, SniffingDialect)
    assert dialect.parse(b"starting up...") == []
    events = dialect.parse(line({"type": "session", "version": 3, "id": "s9"}))
    assert isinstance(dialect.chosen, PiDialect)
    assert isinstance(events[0], UnparsedLine)
    assert events[1] == SessionStarted(session_id="s9")
    [message] = dialect.parse(message_end("stop"))
    assert isinstance(message, AssistantMessage)


def test_sniffing_gives_up_with_a_warning_and_keeps_every_line() -> None:
    dialect = SniffingDialect()
    events = []
    for i in range(300):
        events += dialect.parse(f'{{"kind": {i}}}'.encode())
    assert events[0].TYPE == "warning"
    assert sum(1 for e in events if isinstance(e, UnparsedLine)) == 300


def test_an_oversized_agent_end_still_ends_the_run() -> None:
    line = b'{"type":"agent_end","messages":[' + b"x" * 5000 + b'],"willRetry":false}'
    (frame,) = LineFramer(1000).feed(line + b"\n")
    assert isinstance(frame, Oversized)
    events = PiDialect().oversized(frame)
    assert events == [
        OversizedLine(size=len(line), event_type="agent_end"),
        AgentEnded(will_retry=False),
    ]
    retrying = frame.tail.replace(b"false", b"true")
    (_, ended) = PiDialect().oversized(Oversized(frame.head, frame.size, retrying))
    assert ended == AgentEnded(will_retry=True)
    (other,) = PiDialect().oversized(Oversized(b'{"type":"turn_end","message":{', 9999, b"}}"))
    assert other == OversizedLine(size=9999, event_type="turn_end")


def test_a_run_that_may_steer_gets_a_session_file_it_can_resume(tmp_path: Path) -> None:
    command = ["pi", "--mode", "json", "-p"]
    launch = PiDialect().launch(command, "Fix it", tmp_path, resumable=True)
    session = tmp_path / "session.jsonl"
    assert launch.argv == [*command, "--session", str(session), "Fix it"]
    assert launch.transcript == session
    with pytest.raises(CannotResume, match="does not exist"):
        PiDialect().resume(command, "Run the tests", tmp_path, None)
    session.write_text('{"type":"session","id":"s"}\n')
    resumed = PiDialect().resume(command, "-Run the tests", tmp_path, None)
    assert resumed.argv == [*command, "--session", str(session), " -Run the tests"]


def test_the_users_own_session_is_kept_and_no_session_cannot_resume(tmp_path: Path) -> None:
    own = tmp_path / "mine.jsonl"
    command = ["pi", "-p", f"--session={own}"]
    launch = PiDialect().launch(command, "Fix it", tmp_path, resumable=True)
    assert launch.argv == [*command, "Fix it"]
    assert launch.transcript == own
    plain = PiDialect().launch(["pi", "-p"], "Fix it", tmp_path)
    assert plain.argv == ["pi", "-p", "Fix it"], "no session file unless the run may steer"
    with pytest.raises(CannotResume, match="--no-session"):
        PiDialect().resume(["pi", "--no-session"], "x", tmp_path, "id")


def update_line(delta: str, kind: str = "text_delta") -> bytes:
    event = {"type": kind, "contentIndex": 0, "delta": delta}
    return line(
        {"type": "message_update", "message": {"role": "assistant"}, "assistantMessageEvent": event}
    )


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.text(max_size=12).map(update_line),
            st.text(max_size=5).map(lambda t: update_line(t, "thinking_delta")),
            st.just(message_end("stop", "fin")),
            st.just(b"garbage"),
            st.just(b""),
        ),
        max_size=40,
    )
)
def test_the_bulk_path_gives_what_the_line_path_gives(lines: list[bytes]) -> None:
    region = b"\n".join(lines)
    slow = PiDialect().parse_frames(region.split(b"\n"), coalesce=False)
    fast = PiDialect().parse_region(region, coalesce=True)
    assert merge_deltas(slow) == fast
    assert sum(e.coalesced for e in fast if isinstance(e, TextDelta)) == sum(
        1 for e in slow if isinstance(e, TextDelta)
    )


# -- its row of the common table (tests/test_dialect_common.py) --------------------


def pi_samples() -> Samples:
    session = line({"type": "session", "version": 3, "id": "pi-1", "cwd": "/w"})

    def message_end(stop: str, content: list[dict[str, Any]], **extra: Any) -> bytes:
        message = {"role": "assistant", "content": content, "stopReason": stop, **extra}
        return line({"type": "message_end", "message": message})

    call = {"toolCallId": "c1", "toolName": "bash"}
    return Samples(
        session="pi-1",
        answer=[
            session,
            line({"type": "agent_start"}),
            line({"type": "turn_start"}),
            message_end("stop", [{"type": "text", "text": ANSWER}]),
            line({"type": "agent_end", "willRetry": False}),
        ],
        tool_call=[
            session,
            message_end("toolUse", [{"type": "toolCall", "id": "c1", "name": "bash"}]),
            line({"type": "tool_execution_start", **call, "args": LS}),
            line({"type": "tool_execution_end", **call, "result": "a", "isError": False}),
        ],
        tool="bash",
        tool_id="c1",
        error=[session, message_end("error", [], errorMessage=FAILURE)],
        cut_short=[
            session,
            line({"type": "turn_start"}),
            line(
                {
                    "type": "message_update",
                    "assistantMessageEvent": {"type": "text_delta", "delta": "Half"},
                }
            ),
        ],
        cut_short_text=None,
    )


ROW = Agent(
    name="pi",
    command=("/usr/local/bin/pi", "-p"),
    types=(
        "message_end",
        "message_update",
        "tool_execution_start",
        "tool_execution_end",
        "auto_retry_start",
        "auto_retry_end",
        "agent_end",
        "session",
        "turn_start",
    ),
    keys=(
        "message",
        "assistantMessageEvent",
        "toolName",
        "args",
        "willRetry",
        "id",
        "attempt",
        "isError",
        "role",
        "content",
        "stopReason",
        "usage",
    ),
    samples=pi_samples(),
    argv=Argv(
        task=("Fix it",),
        dashed_task=(" -v is broken",),
        resume=None,
        missing_session=None,
        no_session_flag="--no-session",
    ),
)
