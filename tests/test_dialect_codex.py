"""Codex's ``exec --json`` stream -> normalized events: turn end, errors, exits."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.dialect_support import (
    final,
    line,
    messages,
    replay,
)
from tests.dialect_table import ANSWER, FAILURE, RESUMED, Agent, Argv, Capture, Samples
from wrapper.core.events import (
    AgentEnded,
    AgentWarning,
    AssistantMessage,
    Event,
    Retry,
    SessionStarted,
    StopReason,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnStarted,
    Usage,
)
from wrapper.dialects.codex import CodexDialect

THREAD = "019a2d7a-6455-7170-a661-c6d8b94c630a"
START = [
    line({"type": "thread.started", "thread_id": THREAD}),
    line({"type": "turn.started"}),
]


def item(event: str, **fields: Any) -> bytes:
    return line({"type": event, "item": {"id": "item_0", **fields}})


def agent_message(value: str, **fields: Any) -> bytes:
    return item("item.completed", type="agent_message", text=value, **fields)


def completed(**usage: int) -> bytes:
    return line({"type": "turn.completed", "usage": usage})


def parse_all(*lines: bytes) -> list[Event]:
    dialect = CodexDialect()
    return [event for raw in lines for event in dialect.parse(raw)]


# -- end of the turn ------------------------------------------------------------------


def test_turn_completed_is_stop_with_the_last_agent_message_and_usage() -> None:
    events = parse_all(
        *START,
        agent_message("Looking."),
        agent_message("Done: 3 files."),
        completed(input_tokens=100, cached_input_tokens=60, output_tokens=7),
    )
    assert events[:2] == [SessionStarted(session_id=THREAD), TurnStarted()]
    assert events[2:4] == [TextDelta(text="Looking."), TextDelta(text="Done: 3 files.")]
    assert events[4:] == [
        AssistantMessage(
            stop_reason="stop",
            raw_stop_reason="turn.completed",
            text="Done: 3 files.",
            usage=Usage(input=40, output=7, cache_read=60, total_tokens=107),
        ),
        AgentEnded(will_retry=False, settled=True),
    ]


def test_reported_total_and_reasoning_tokens_are_kept() -> None:
    [message, _] = parse_all(
        completed(
            input_tokens=12,
            cached_input_tokens=2,
            output_tokens=3,
            reasoning_output_tokens=1,
            total_tokens=15,
        )
    )
    assert isinstance(message, AssistantMessage)
    assert message.usage == Usage(input=10, output=3, cache_read=2, total_tokens=15)


def test_turn_failed_is_error_with_its_message() -> None:
    failed = {"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized"}}
    [message, ended] = parse_all(line(failed))
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.raw_stop_reason) == ("error", "turn.failed")
    assert message.error_message == "unexpected status 401 Unauthorized"
    assert ended == AgentEnded(will_retry=False, settled=True)


# -- errors that end nothing ---------------------------------------------------------


def test_reconnecting_error_is_a_retry() -> None:
    notice = "Reconnecting... 2/5 (stream disconnected before completion)"
    assert parse_all(line({"type": "error", "message": notice})) == [
        Retry(phase="start", retry_attempt=2, max_attempts=5, message=notice)
    ]
    [plain] = parse_all(line({"type": "error", "message": "Reconnecting... (401 Unauthorized)"}))
    assert plain == Retry(phase="start", message="Reconnecting... (401 Unauthorized)")


def test_other_errors_are_warnings_never_terminal() -> None:
    events = parse_all(
        line({"type": "error", "message": "unexpected status 401"}),
        item("item.completed", type="error", message="Falling back to HTTPS transport."),
    )
    assert events == [
        AgentWarning(code="agent_error", message="Codex reported an error: unexpected status 401"),
        AgentWarning(
            code="agent_error", message="Codex reported an error: Falling back to HTTPS transport."
        ),
    ]
    assert not any(isinstance(event, AssistantMessage) for event in events)


def test_a_failed_run_ends_on_turn_failed_despite_earlier_errors() -> None:
    events = replay(
        CodexDialect(),
        [
            *START,
            line({"type": "error", "message": "Reconnecting... 1/5 (unexpected status 401)"}),
            line({"type": "error", "message": "unexpected status 401: Missing bearer"}),
            line({"type": "turn.failed", "error": {"message": "unexpected status 401"}}),
        ],
        exit_code=1,
    )
    assert [m.stop_reason for m in messages(events)] == ["error"]


# -- the process's exit ----------------------------------------------------------------


def test_exit_without_a_final_event_quotes_the_last_error() -> None:
    events = replay(
        CodexDialect(),
        [*START, agent_message("Half way."), line({"type": "error", "message": "stream closed"})],
        130,
    )
    message = events[-1]
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.raw_stop_reason) == ("aborted", "exit 130")
    assert message.text == "Half way."
    assert message.error_message == "stream closed"


# -- items ----------------------------------------------------------------------------


def test_command_execution_started_then_completed() -> None:
    command = {"type": "command_execution", "command": "bash -lc 'npm test'"}
    events = parse_all(
        item("item.started", **command, aggregated_output="", status="in_progress"),
        item("item.updated", **command, aggregated_output="1 failing", status="in_progress"),
        item(
            "item.completed", **command, aggregated_output="1 failing", exit_code=1, status="failed"
        ),
    )
    assert events == [
        ToolStarted(tool="command_execution", tool_call_id="item_0", summary="bash -lc 'npm test'"),
        ToolEnded(tool="command_execution", tool_call_id="item_0", is_error=True),
    ]
    assert isinstance(events[1], ToolEnded)
    assert events[1].result == "1 failing"


def test_items_seen_only_completed_start_and_end_at_once() -> None:
    changes = [{"path": "src/a.py", "kind": "update"}, {"path": "src/b.py", "kind": "add"}]
    events = parse_all(
        item("item.completed", type="file_change", changes=changes, status="completed")
    )
    assert events == [
        ToolStarted(tool="file_change", tool_call_id="item_0", summary="src/a.py src/b.py"),
        ToolEnded(tool="file_change", tool_call_id="item_0"),
    ]
    [started, _] = parse_all(item("item.completed", type="web_search", query="trio nursery"))
    assert started == ToolStarted(tool="web_search", tool_call_id="item_0", summary="trio nursery")


def test_mcp_tool_call_is_named_by_server_and_tool() -> None:
    call = {"type": "mcp_tool_call", "server": "fs", "tool": "read_file"}
    events = parse_all(
        item("item.started", **call, arguments={"path": "/x"}, status="in_progress"),
        item(
            "item.completed",
            **call,
            arguments={"path": "/x"},
            result=None,
            error={"message": "File not found"},
            status="failed",
        ),
    )
    assert events == [
        ToolStarted(tool="fs.read_file", tool_call_id="item_0", summary="/x"),
        ToolEnded(tool="fs.read_file", tool_call_id="item_0", is_error=True),
    ]
    assert isinstance(events[1], ToolEnded)
    assert events[1].result == "File not found"


def test_reasoning_and_todo_items_are_not_events() -> None:
    assert parse_all(item("item.completed", type="reasoning", text="**Thinking**")) == []
    todo = {"type": "todo_list", "items": [{"text": "a", "completed": False}]}
    assert parse_all(item("item.started", **todo), item("item.completed", **todo)) == []


def test_older_item_type_and_assistant_message_spelling() -> None:
    events = parse_all(
        line({"type": "session.created", "session_id": "s-0.42"}),
        line(
            {
                "type": "item.completed",
                "item": {"id": "i", "item_type": "assistant_message", "text": "Hi."},
            }
        ),
        line({"type": "turn.completed", "usage": {"input_tokens": 2, "output_tokens": 5}}),
    )
    assert events[0] == SessionStarted(session_id="s-0.42")
    message = final(events)
    assert message.text == "Hi."
    assert message.stop_reason == StopReason.STOP


# -- recognising ---------------------------------------------------------


def test_recognises_codex_events_only() -> None:
    assert CodexDialect.recognises({"type": "thread.started", "thread_id": "t"})
    assert CodexDialect.recognises({"type": "session.created", "session_id": "s"})
    for other in ({"type": "turn_start"}, {"type": "error", "message": "x"}, {"type": "init"}):
        assert not CodexDialect.recognises(other)


# -- the output limit and the final text ----------------------------------------------


def test_a_turn_cut_at_the_output_limit_is_length_with_its_partial_text() -> None:
    limit = "Incomplete response returned, reason: max_output_tokens"
    events = replay(
        CodexDialect(),
        [
            *START,
            item("item.updated", type="agent_message", text="The parser drops the"),
            line({"type": "error", "message": limit}),
            line({"type": "turn.failed", "error": {"message": limit}}),
        ],
        1,
    )
    message = final(events)
    assert (message.stop_reason, message.raw_stop_reason) == ("length", "turn.failed")
    assert message.text == "The parser drops the"
    assert message.error_message == limit


def test_text_before_a_tool_is_interim() -> None:
    command = {"type": "command_execution", "command": "make", "status": "in_progress"}
    events = replay(
        CodexDialect(),
        [*START, agent_message("Running make."), item("item.started", **command)],
        130,
    )
    message = events[-1]
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.text) == ("aborted", "")


# -- its row of the common table (tests/test_dialect_common.py) --------------------

#: Item bodies of Codex ``item.completed`` lines, in the shapes its handlers read.
codex_items = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.sampled_from(["a", "b"]),
            "type": st.sampled_from(["agent_message", "command_execution", "mcp_tool_call"]),
            "text": st.text(max_size=5),
            "exit_code": st.integers(-2, 2),
            "error": st.none() | st.fixed_dictionaries({"message": st.integers()}),
            "changes": st.lists(st.integers() | st.text(max_size=3), max_size=2),
        },
    ),
    max_size=3,
).map(lambda bodies: [line({"type": "item.completed", "item": body}) for body in bodies])


def codex_samples() -> Samples:
    start = [
        line({"type": "thread.started", "thread_id": "019a2d7a"}),
        line({"type": "turn.started"}),
    ]

    def item(event: str, **fields: Any) -> bytes:
        return line({"type": event, "item": {"id": "item_1", **fields}})

    command = {"type": "command_execution", "command": "ls"}
    return Samples(
        session="019a2d7a",
        answer=[
            *start,
            item("item.completed", type="agent_message", text=ANSWER),
            line({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}),
        ],
        tool_call=[
            *start,
            item("item.started", **command, status="in_progress"),
            item("item.completed", **command, status="completed", exit_code=0),
        ],
        tool="command_execution",
        tool_id="item_1",
        error=[*start, line({"type": "turn.failed", "error": {"message": FAILURE}})],
        cut_short=[*start, item("item.completed", type="agent_message", text="Half way.")],
        cut_short_text="Half way.",
    )


ROW = Agent(
    name="codex",
    command=("codex", "exec", "--json"),
    types=(
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.completed",
        "error",
    ),
    keys=("thread_id", "item", "usage", "error", "message"),
    samples=codex_samples(),
    argv=Argv(
        task=("--", "Fix it"),
        dashed_task=("--", "-v is broken"),
        resume=("codex", "exec", "--json", "resume", RESUMED, "--", "Go on"),
        missing_session="Codex reported no thread id",
        no_session_flag="--ephemeral",
    ),
    noise=b"2025-10-28 WARN codex_core: something",
    display_name="Codex",
    extra_lines=codex_items,
)


CAPTURES = [
    Capture(
        "codex_tooluse_v0.46.jsonl",
        "codex",
        ("stop", "turn.completed"),
        "Files here: `stream-output-1.jsonl`, `stream-output-2.jsonl`, `test.js`.",
        Usage(input=1048, output=129, cache_read=4992, total_tokens=6169),
        session="019a2d7a-6455-7170-a661-c6d8b94c630a",
        tools=(("command_execution", "bash -lc ls"),),
    ),
    Capture(
        "codex_docs_sample.jsonl",
        "codex",
        ("stop", "turn.completed"),
        "Yep — there’s a `README.md` in the repository root.",
        Usage(input=315, output=122, cache_read=24448, total_tokens=24885),
        session="0199a213-81c0-7800-8aa1-bbab2a035a53",
        tools=(("command_execution", "bash -lc ls"),),
    ),
]
