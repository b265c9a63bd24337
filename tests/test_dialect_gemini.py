"""Gemini CLI's stream-json -> normalized events: the result line, limits, exit codes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.dialect_support import (
    final,
    line,
    messages,
    replay,
)
from tests.dialect_table import ANSWER, FAILURE, LS, RESUMED, Agent, Argv, Capture, Samples
from wrapper.core.events import (
    AgentEnded,
    AgentWarning,
    AssistantMessage,
    Event,
    SessionStarted,
    TextDelta,
    ToolEnded,
    ToolStarted,
    Usage,
)
from wrapper.dialects.gemini import GeminiDialect

INIT = line({"type": "init", "timestamp": "t", "session_id": "s-1", "model": "gemini-x"})
STATS = {
    "total_tokens": 150,
    "input_tokens": 100,
    "output_tokens": 50,
    "cached": 30,
    "input": 70,
    "duration_ms": 5,
    "tool_calls": 0,
    "models": {},
}


def say(text: str, *, delta: bool = True) -> bytes:
    return line({"type": "message", "role": "assistant", "content": text, "delta": delta})


def error_event(message: str, severity: str = "error") -> bytes:
    return line({"type": "error", "timestamp": "t", "severity": severity, "message": message})


def result(status: str = "success", **fields: Any) -> bytes:
    return line({"type": "result", "timestamp": "t", "status": status, "stats": STATS, **fields})


def parse_all(*lines: bytes) -> list[Event]:
    dialect = GeminiDialect()
    return [event for raw in lines for event in dialect.parse(raw)]


# -- the result line -------------------------------------------------------------------


def test_success_is_stop_with_text_usage_and_a_settled_end() -> None:
    events = parse_all(INIT, say("Hel"), say("lo."), result())
    assert events == [
        SessionStarted(session_id="s-1"),
        TextDelta(text="Hel"),
        TextDelta(text="lo."),
        AssistantMessage(
            stop_reason="stop",
            raw_stop_reason="success",
            text="Hello.",
            usage=Usage(input=70, output=50, cache_read=30, total_tokens=150),
            model="gemini-x",
        ),
        AgentEnded(will_retry=False, settled=True),
    ]


@pytest.mark.parametrize(
    ("message", "canonical"),
    [
        ("Maximum session turns exceeded", "error"),
        ("Reached the turn limit for this session", "error"),
        ("Response truncated due to token limits.", "length"),
        ("Context window will overflow", "length"),
    ],
)
def test_success_after_a_limit_error_is_not_a_stop(message: str, canonical: str) -> None:
    final_message = final(parse_all(INIT, error_event(message), result()))
    assert (final_message.stop_reason, final_message.raw_stop_reason) == (canonical, message)
    assert final_message.error_message == message


def test_other_error_events_are_warnings_and_do_not_change_a_success() -> None:
    events = parse_all(INIT, error_event("Loop detected, stopping execution", "warning"))
    assert events[1:] == [
        AgentWarning(code="agent_warning", message="Gemini CLI: Loop detected, stopping execution")
    ]
    assert final(parse_all(error_event("Invalid stream"), result())).stop_reason == "stop"


def test_error_status_is_error_with_its_message() -> None:
    failure = {"type": "FatalAuthenticationError", "message": "API key not valid"}
    message = final(parse_all(INIT, result("error", error=failure)))
    assert (message.stop_reason, message.raw_stop_reason) == ("error", "error")
    assert message.error_message == "API key not valid"


def test_cancellation_error_is_aborted() -> None:
    failure = {"type": "FatalCancellationError", "message": "Operation cancelled."}
    message = final(parse_all(INIT, result("error", error=failure)))
    assert (message.stop_reason, message.raw_stop_reason) == ("aborted", "error")


def test_final_text_is_the_text_after_the_last_tool() -> None:
    events = parse_all(
        say("Let me look."),
        line(
            {
                "type": "tool_use",
                "tool_name": "read_file",
                "tool_id": "t1",
                "parameters": {"path": "a"},
            }
        ),
        line(
            {
                "type": "tool_result",
                "tool_id": "t1",
                "status": "error",
                "error": {"message": "nope"},
            }
        ),
        say("It is missing.", delta=False),
        result(),
    )
    assert events[1:3] == [
        ToolStarted(tool="read_file", tool_call_id="t1", summary="a"),
        ToolEnded(tool="read_file", tool_call_id="t1", is_error=True),
    ]
    assert isinstance(events[2], ToolEnded)
    assert events[2].result == "nope"
    assert final(events).text == "It is missing."


def test_user_messages_are_not_events() -> None:
    assert parse_all(line({"type": "message", "role": "user", "content": "do it"})) == []


# -- the process's exit ------------------------------------------------------------------


def test_turn_limit_exit_says_so() -> None:
    events = replay(GeminiDialect(), [INIT, say("Partial")], 53)
    message = events[-1]
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.raw_stop_reason) == ("error", "exit 53")
    assert message.text == "Partial"
    assert message.error_message == "the session turn limit was reached"


def test_cancelled_after_an_error_result_is_aborted() -> None:
    events = replay(GeminiDialect(), [INIT, result("error", error={"message": "x"})], 130)
    assert [m.stop_reason for m in messages(events)] == ["error", "aborted"]
    assert final(events).raw_stop_reason == "exit 130"


# -- recognising -------------------------------------------------------------


def test_recognises_its_init_only() -> None:
    assert GeminiDialect.recognises({"type": "init", "session_id": "s", "model": "m"})
    for other in ({"type": "init"}, {"type": "session", "id": "s"}, {"type": "result"}):
        assert not GeminiDialect.recognises(other)


# -- errors without a message, and attempts read as one stream -------------------------


def test_an_error_result_without_an_error_object_quotes_the_error_event() -> None:
    events = parse_all(
        INIT, error_event("Model stream ended with an invalid chunk."), result("error")
    )
    message = final(events)
    assert (message.stop_reason, message.raw_stop_reason) == ("error", "error")
    assert message.error_message == "Model stream ended with an invalid chunk."
    assert message.text == ""


def test_a_second_session_in_the_same_log_starts_its_text_afresh() -> None:
    second = line({"type": "init", "timestamp": "t", "session_id": "s-1", "model": "gemini-x"})
    events = parse_all(
        INIT, say("Hello from mock."), result(), second, say("Steered and done."), result()
    )
    assert [m.text for m in messages(events)] == ["Hello from mock.", "Steered and done."]


def test_text_after_a_result_is_not_glued_to_the_last_answer() -> None:
    events = parse_all(INIT, say("First."), result(), say("Second."), result())
    assert [m.text for m in messages(events)] == ["First.", "Second."]


# -- its row of the common table (tests/test_dialect_common.py) --------------------


def gemini_samples() -> Samples:
    init = line({"type": "init", "timestamp": "t", "session_id": "g-1", "model": "gemini-x"})

    def event(kind: str, **fields: Any) -> bytes:
        return line({"type": kind, "timestamp": "t", **fields})

    def say(text: str) -> bytes:
        return event("message", role="assistant", content=text, delta=True)

    return Samples(
        session="g-1",
        answer=[init, say(ANSWER), event("result", status="success", stats={})],
        tool_call=[
            init,
            event("tool_use", tool_name="run_shell_command", tool_id="t1", parameters=LS),
            event("tool_result", tool_id="t1", status="success", output="a"),
        ],
        tool="run_shell_command",
        tool_id="t1",
        error=[init, event("result", status="error", error={"type": "Api", "message": FAILURE})],
        cut_short=[init, say("Partial")],
        cut_short_text="Partial",
    )


ROW = Agent(
    name="gemini",
    command=("gemini", "--output-format", "stream-json"),
    types=("init", "message", "tool_use", "tool_result", "error", "result"),
    keys=(
        "session_id",
        "model",
        "role",
        "content",
        "delta",
        "tool_name",
        "tool_id",
        "parameters",
        "status",
        "output",
        "error",
        "message",
        "severity",
        "stats",
    ),
    samples=gemini_samples(),
    argv=Argv(
        task=("-p", "Fix it"),
        dashed_task=("-p", " -v is broken"),
        resume=(
            *("gemini", "--output-format", "stream-json"),
            *("--resume", RESUMED, "-p", "Go on"),
        ),
        missing_session="Gemini CLI reported no session id",
    ),
    noise=b"Loaded cached credentials.",
    display_name="Gemini CLI",
)


CAPTURES = [
    Capture(
        "gemini_snapshot_tooluse.jsonl",
        "gemini",
        ("stop", "success"),
        "Final answer",
        Usage(input=0, output=0, cache_read=0, total_tokens=0),
        session="test-session-id",
        model="test-model",
        tools=(("testTool", "value1"),),
    ),
    Capture(
        "gemini_real_autherror_v0.50.jsonl",
        "gemini",
        ("error", "error"),
        "",
        Usage(input=0, output=0, cache_read=0, total_tokens=0),
        session="a559d264-82c8-48a4-85ec-0fbe645d82e0",
        model="auto",
        error_message="[API Error: … API_KEY_INVALID …]",
        exit_code=1,
    ),
]
