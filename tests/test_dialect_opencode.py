"""opencode's ``run --format json`` stream -> normalized events: steps, errors, exits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.dialect_support import (
    capture,
    final,
    first_object,
    line,
    messages,
    recognisers,
    replay,
    session_id,
)
from tests.dialect_table import ANSWER, FAILURE, LS, RESUMED, Agent, Argv, Samples
from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    Event,
    SessionStarted,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnStarted,
    Usage,
    is_terminal,
)
from wrapper.dialects.opencode import OpencodeDialect

SESSION = "ses_236c713fcffel8QozOz4ca0AYK"


def event(kind: str, **fields: Any) -> bytes:
    return line({"type": kind, "timestamp": 1, "sessionID": SESSION, **fields})


def step_finish(reason: Any, **part: Any) -> bytes:
    tokens = {
        "total": 16,
        "input": 10,
        "output": 2,
        "reasoning": 0,
        "cache": {"write": 1, "read": 3},
    }
    return event(
        "step_finish",
        part={"type": "step-finish", "reason": reason, "tokens": tokens, "cost": 0.25, **part},
    )


def error_event(name: str, message: str = "boom") -> bytes:
    return event("error", error={"name": name, "data": {"message": message}})


def parse_all(*lines: bytes) -> list[Event]:
    dialect = OpencodeDialect()
    return [item for raw in lines for item in dialect.parse(raw)]


# -- steps ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "canonical"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool-calls", "toolUse"),
        ("content-filter", "error"),
        ("error", "error"),
        ("unknown", "unknown"),
        (None, None),
    ],
)
def test_step_finish_reason(reason: str | None, canonical: str | None) -> None:
    [message] = messages(parse_all(step_finish(reason)))
    assert (message.stop_reason, message.raw_stop_reason) == (canonical, reason)


def test_a_step_is_a_turn_with_its_text_and_usage() -> None:
    events = parse_all(
        event("step_start", part={"type": "step-start"}),
        event("text", part={"type": "text", "text": "Hel"}),
        event("text", part={"type": "text", "text": "lo"}),
        step_finish("stop"),
    )
    assert events == [
        SessionStarted(session_id=SESSION),
        TurnStarted(),
        TextDelta(text="Hel"),
        TextDelta(text="lo"),
        AssistantMessage(
            stop_reason="stop",
            raw_stop_reason="stop",
            text="Hello",
            usage=Usage(
                input=10, output=2, cache_read=3, cache_write=1, total_tokens=16, cost_usd=0.25
            ),
        ),
    ]


def test_the_last_terminal_step_is_the_final_message() -> None:
    events = parse_all(
        event("step_start"),
        event("text", part={"text": "Reading."}),
        step_finish("tool-calls"),
        event("step_start"),
        event("text", part={"text": "Done."}),
        step_finish("stop"),
    )
    assert [m.stop_reason for m in messages(events)] == ["toolUse", "stop"]
    assert final(events).text == "Done."
    assert events.count(TurnStarted()) == 2, "a new step cancels a pending final message"


def test_tool_use_is_started_and_ended_at_once() -> None:
    read = {
        "type": "tool",
        "tool": "read",
        "callID": "c1",
        "state": {"status": "completed", "input": {"filePath": "/a.md"}, "output": "text"},
    }
    failed = {
        "type": "tool",
        "tool": "bash",
        "callID": "c2",
        "state": {"status": "error", "input": {"command": "false"}, "error": "exit 1"},
    }
    events = parse_all(event("tool_use", part=read), event("tool_use", part=failed))
    assert events[1:] == [
        ToolStarted(tool="read", tool_call_id="c1", summary="/a.md"),
        ToolEnded(tool="read", tool_call_id="c1"),
        ToolStarted(tool="bash", tool_call_id="c2", summary="false"),
        ToolEnded(tool="bash", tool_call_id="c2", is_error=True),
    ]
    assert isinstance(events[4], ToolEnded)
    assert events[4].result == "exit 1"


@pytest.mark.parametrize(("exit_status", "failed"), [(3, True), (0, False), (None, False)])
def test_a_shell_command_fails_by_its_exit_status(exit_status: int | None, failed: bool) -> None:
    # opencode reports a command that ran as a completed tool whatever its
    # exit status, which only the metadata gives (1.18.33 captures).
    metadata: dict[str, Any] = {"output": "make: *** Error 3", "truncated": False}
    if exit_status is not None:
        metadata["exit"] = exit_status
    state = {
        "status": "completed",
        "input": {"command": "make"},
        "output": "make: *** Error 3",
        "metadata": metadata,
    }
    part = {"type": "tool", "tool": "bash", "callID": "c1", "state": state}
    [_, _, ended] = parse_all(event("tool_use", part=part))
    assert ended == ToolEnded(tool="bash", tool_call_id="c1", is_error=failed)
    assert isinstance(ended, ToolEnded)
    assert ended.result == "make: *** Error 3"


# -- errors and the end of the run ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("MessageAbortedError", "aborted"),
        ("MessageOutputLengthError", "length"),
        ("UnknownError", "error"),
        ("ProviderAuthError", "error"),
        ("APIError", "error"),
    ],
)
def test_error_events_are_terminal(name: str, canonical: str) -> None:
    message = final(parse_all(error_event(name, "Model not found")))
    assert (message.stop_reason, message.raw_stop_reason) == (canonical, name)
    assert message.error_message == "Model not found"


def test_done_says_the_run_is_settled() -> None:
    events = parse_all(step_finish("stop"), event("done", reason="idle", rejected=[]))
    assert events[-1] == AgentEnded(will_retry=False, settled=True)


def test_session_is_reported_once() -> None:
    events = parse_all(event("step_start"), event("step_start"))
    assert events.count(SessionStarted(session_id=SESSION)) == 1


# -- the process's exit ----------------------------------------------------------------------


def test_an_exit_during_a_tool_reports_no_interim_text() -> None:
    # opencode prints a tool only once it finished: the text may be interim
    lines = [event("step_start"), event("text", part={"text": "Running the command."})]
    message = replay(OpencodeDialect(), lines, 143)[-1]
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.text) == ("aborted", "")


# -- real capture: three runs of opencode 1.14.25 ----------------------------------------------


def runs(lines: list[bytes]) -> dict[str, list[bytes]]:
    by_session: dict[str, list[bytes]] = {}
    for raw in lines:
        by_session.setdefault(json.loads(raw)["sessionID"], []).append(raw)
    return by_session


def test_replay_capture_v1_14_25() -> None:
    lines = capture("opencode_v1.14.25.jsonl")
    text_run, tool_run, error_run = runs(lines).values()

    events = replay(OpencodeDialect(), text_run)
    message = final(events)
    assert (message.stop_reason, message.raw_stop_reason) == ("stop", "stop")
    assert message.text == "\n\nHello"
    assert session_id(events) == SESSION
    assert message.usage == Usage(
        input=14406, output=21, cache_read=1840, cache_write=0, total_tokens=16267, cost_usd=0.0
    )

    events = replay(OpencodeDialect(), tool_run)
    assert [(e.tool, e.summary) for e in events if isinstance(e, ToolStarted)] == [
        ("read", "/home/ubuntu/work/sortie/README.md")
    ]
    assert not messages(events), "1.14 has no final event: a clean exit adds nothing"

    events = replay(OpencodeDialect(), error_run, exit_code=1)
    message = final(events)
    assert (message.stop_reason, message.raw_stop_reason) == ("error", "UnknownError")
    assert message.error_message == "Model not found: nonexistent/nonexistent."
    assert session_id(events) == "ses_236c4ba84ffeKJLGiwxfHIx8Au"
    assert [m for m in messages(events) if is_terminal(m.stop_reason)] == [message]

    assert recognisers(first_object(lines)) == ["opencode"]


# -- recognising --------------------------------------------------------------


def test_recognises_events_with_a_session_id_only() -> None:
    assert OpencodeDialect.recognises({"type": "step_start", "sessionID": "ses_1"})
    gemini_tool = {"type": "tool_use", "tool_name": "x", "tool_id": "t"}
    for other in (gemini_tool, {"type": "error", "message": "x"}, {"type": "text"}):
        assert not OpencodeDialect.recognises(other)


# -- its row of the common table (tests/test_dialect_common.py) --------------------


def opencode_samples() -> Samples:
    session = "ses_236c713f"

    def event(kind: str, **fields: Any) -> bytes:
        return line({"type": kind, "timestamp": 1, "sessionID": session, **fields})

    def step_finish(reason: str) -> bytes:
        return event("step_finish", part={"type": "step-finish", "reason": reason})

    state = {"status": "completed", "input": LS, "output": "a"}
    return Samples(
        session=session,
        answer=[event("step_start"), event("text", part={"text": ANSWER}), step_finish("stop")],
        tool_call=[
            event("step_start"),
            event("tool_use", part={"tool": "bash", "callID": "c1", "state": state}),
        ],
        tool="bash",
        tool_id="c1",
        error=[event("error", error={"name": "UnknownError", "data": {"message": FAILURE}})],
        # opencode reports a tool once it finished: the text before it may be
        # interim, so an exit implies a final message without it
        cut_short=[
            event("step_start"),
            event("text", part={"text": "Hm"}),
            step_finish("tool-calls"),
        ],
        cut_short_text="",
    )


ROW = Agent(
    name="opencode",
    command=("opencode", "run", "--format", "json"),
    types=("step_start", "text", "tool_use", "step_finish", "error", "done"),
    keys=("sessionID", "part", "error", "reason"),
    samples=opencode_samples(),
    argv=Argv(
        task=("--", "Fix it"),
        dashed_task=("--", "-v is broken"),
        resume=("opencode", "run", "--format", "json", "--session", RESUMED, "--", "Go on"),
        missing_session="opencode reported no session id",
    ),
    noise=b"INFO  service=bus",
    display_name="opencode",
)
