"""Claude Code's stream-json -> normalized events: the result line decides, exits imply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.dialect_support import (
    capture,
    final,
    line,
    messages,
    replay,
)
from tests.dialect_table import ANSWER, FAILURE, LS, RESUMED, Agent, Argv, Capture, Samples
from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    Compaction,
    Retry,
    SessionStarted,
    StopReason,
    TextDelta,
    ToolCall,
    ToolEnded,
    ToolStarted,
    Usage,
    is_terminal,
)
from wrapper.core.outcome import ProcessExit, RunFacts, decide
from wrapper.dialects import resolve_dialect
from wrapper.dialects.claude import ClaudeDialect
from wrapper.dialects.cursor import CursorDialect

SESSION = "40e7b02d-c0f9-4876-9010-f514d4eb0603"


def init(**extra: Any) -> bytes:
    return line(
        {
            "type": "system",
            "subtype": "init",
            "session_id": SESSION,
            "cwd": "/w",
            "model": "claude-x",
            "tools": ["Bash"],
            "apiKeySource": "none",
            "claude_code_version": "2.1.3",
            **extra,
        }
    )


def result(**fields: Any) -> bytes:
    return line(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "Done.",
            "session_id": SESSION,
            "total_cost_usd": 0.5,
            "usage": {
                "input_tokens": 10,
                "output_tokens": 20,
                "cache_read_input_tokens": 30,
                "cache_creation_input_tokens": 40,
            },
            **fields,
        }
    )


def assistant(*content: dict[str, Any], msg_id: str = "m1", **message: Any) -> bytes:
    body = {
        "id": msg_id,
        "model": "claude-x",
        "role": "assistant",
        "content": list(content),
        "stop_reason": None,
        "usage": {"input_tokens": 1, "output_tokens": 2},
        **message,
    }
    return line({"type": "assistant", "message": body, "session_id": SESSION})


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def last_message(*lines: bytes) -> AssistantMessage:
    dialect = ClaudeDialect()
    events = [event for raw in lines for event in dialect.parse(raw)]
    return messages(events)[-1]


# -- the result line -------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "canonical", "raw"),
    [
        # terminal_reason aborted_* wins over everything
        ({"terminal_reason": "aborted_streaming"}, "aborted", "aborted_streaming"),
        (
            {
                "terminal_reason": "aborted_tools",
                "is_error": True,
                "subtype": "error_during_execution",
            },
            "aborted",
            "aborted_tools",
        ),
        # is_error comes next, whatever the subtype or stop_reason says
        ({"is_error": True}, "error", "is_error"),
        ({"is_error": True, "stop_reason": "end_turn"}, "error", "is_error"),
        ({"is_error": True, "terminal_reason": "api_error"}, "error", "api_error"),
        ({"is_error": True, "subtype": "error_max_turns"}, "error", "error_max_turns"),
        (
            {"is_error": True, "subtype": "error_max_turns", "terminal_reason": "max_turns"},
            "error",
            "max_turns",
        ),
        ({"subtype": "error_during_execution"}, "error", "error_during_execution"),
        # then the API's stop reason
        ({"stop_reason": "end_turn", "terminal_reason": "completed"}, "stop", "end_turn"),
        ({"stop_reason": "stop_sequence"}, "stop", "stop_sequence"),
        ({"stop_reason": "max_tokens"}, "length", "max_tokens"),
        (
            {"stop_reason": "model_context_window_exceeded"},
            "length",
            "model_context_window_exceeded",
        ),
        ({"stop_reason": "tool_use"}, "toolUse", "tool_use"),
        ({"stop_reason": "tool_deferred"}, "toolUse", "tool_deferred"),
        # before 2.1.2xx there is no stop_reason: the subtype says it
        ({}, "stop", "success"),
        # an unknown value is kept as it is, and is not terminal
        ({"stop_reason": "brand_new"}, "brand_new", "brand_new"),
    ],
)
def test_result_stop_reason(fields: dict[str, Any], canonical: str, raw: str) -> None:
    message = last_message(result(**fields))
    assert (message.stop_reason, message.raw_stop_reason) == (canonical, raw)
    assert is_terminal(message.stop_reason) == (canonical in ("stop", "length", "aborted", "error"))


def test_missing_model_reported_as_success_with_is_error_is_an_error() -> None:
    text_404 = 'API Error: 404 {"type":"not_found_error","message":"model: claude-nope"}'
    message = last_message(result(subtype="success", is_error=True, result=text_404))
    assert message.stop_reason == StopReason.ERROR
    assert message.error_message == text_404


def test_result_is_the_final_message_and_says_the_run_is_settled() -> None:
    dialect = ClaudeDialect()
    dialect.parse(init())
    events = dialect.parse(result(stop_reason="end_turn"))
    assert events == [
        AssistantMessage(
            stop_reason="stop",
            raw_stop_reason="end_turn",
            text="Done.",
            usage=Usage(
                input=10, output=20, cache_read=30, cache_write=40, total_tokens=100, cost_usd=0.5
            ),
            model="claude-x",
        ),
        AgentEnded(will_retry=False, settled=True),
    ]


def test_error_result_keeps_the_errors_list_as_the_message() -> None:
    message = last_message(
        result(subtype="error_max_budget_usd", is_error=True, errors=["over budget", "0.5 USD"])
    )
    assert message.stop_reason == StopReason.ERROR
    assert message.error_message == "over budget; 0.5 USD"


# -- progress before the result ----------------------------------------------------


def test_assistant_lines_are_progress_never_terminal() -> None:
    dialect = ClaudeDialect()
    tool_line = assistant(text("Listing."), tool_use("t1", "Bash", command="ls  -la"))
    events = dialect.parse(tool_line)
    assert events == [
        AssistantMessage(
            stop_reason="toolUse",
            text="Listing.",
            model="claude-x",
            tool_calls=(ToolCall(name="Bash", id="t1", summary="ls -la"),),
        ),
        ToolStarted(tool="Bash", tool_call_id="t1", summary="ls -la"),
    ]
    assert isinstance(events[1], ToolStarted)
    assert events[1].args == {"command": "ls  -la"}
    [plain] = dialect.parse(assistant(text("All done."), stop_reason="end_turn"))
    assert isinstance(plain, AssistantMessage)
    assert plain.stop_reason is None
    assert plain.raw_stop_reason == "end_turn"
    assert plain.usage is None, "the result line carries the total; nothing is counted twice"


def test_thinking_only_lines_are_not_messages() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "s"}
    assert ClaudeDialect().parse(assistant(thinking)) == []


def test_tool_results_end_the_tool_they_answer() -> None:
    dialect = ClaudeDialect()
    dialect.parse(assistant(tool_use("t1", "Read", file_path="a.py")))
    block = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "is_error": True,
        "content": "no such file",
    }
    [ended] = dialect.parse(line({"type": "user", "message": {"content": [block]}}))
    assert ended == ToolEnded(tool="Read", tool_call_id="t1", is_error=True)
    assert isinstance(ended, ToolEnded)
    assert ended.result == "no such file"


def test_partial_message_text_deltas_of_the_main_agent_only() -> None:
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "hi"},
    }
    dialect = ClaudeDialect()
    assert dialect.parse(line({"type": "stream_event", "event": delta})) == [TextDelta(text="hi")]
    sub = {"type": "stream_event", "event": delta, "parent_tool_use_id": "t9"}
    assert dialect.parse(line(sub)) == []
    stop = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
    assert dialect.parse(line({"type": "stream_event", "event": stop})) == []


def test_system_lines() -> None:
    dialect = ClaudeDialect()
    assert dialect.parse(init()) == [SessionStarted(session_id=SESSION, cwd="/w")]
    retry = {
        "type": "system",
        "subtype": "api_retry",
        "attempt": 2,
        "max_retries": 10,
        "retry_delay_ms": 1500,
        "error_status": 529,
        "error": "overloaded",
    }
    assert dialect.parse(line(retry)) == [
        Retry(
            phase="start", retry_attempt=2, max_attempts=10, delay_ms=1500, message="529 overloaded"
        )
    ]
    compact = {
        "type": "system",
        "subtype": "compact_boundary",
        "compact_metadata": {"trigger": "auto"},
    }
    # The end waits for the next line, which may be the summary's message.
    assert dialect.parse(line(compact)) == []
    assert dialect.parse(line({"type": "system", "subtype": "status", "status": "requesting"})) == [
        Compaction(phase="end", reason="auto")
    ]
    assert (
        dialect.parse(line({"type": "system", "subtype": "status", "status": "requesting"})) == []
    )
    assert dialect.parse(line({"type": "rate_limit_event"})) == []


# -- the process's exit ------------------------------------------------------------------


def test_exit_without_result_line_keeps_the_usage_and_model_so_far() -> None:
    # Which exit means what is the common table's business; here what Claude adds.
    dialect = ClaudeDialect()
    events = replay(
        dialect,
        [init(), assistant(text("Working on it."), msg_id="m1"), assistant(msg_id="m1")],
        143,
    )
    message = events[-1]
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.raw_stop_reason) == ("aborted", "exit 143")
    assert message.text == "Working on it."
    # the usage seen so far, each message counted once
    assert message.usage == Usage(input=1, output=2, total_tokens=3)
    assert message.model == "claude-x"


# -- real captures -------------------------------------------------------------------


def test_captures_end_on_the_result_line_and_keep_the_partial_deltas() -> None:
    # What each capture comes to is in the common table; here what is Claude's own.
    events = replay(ClaudeDialect(), capture("claude_tooluse_v2.1.3.jsonl"))
    assert events[-1] == AgentEnded(will_retry=False, settled=True)
    assert TextDelta(text="hi") in replay(ClaudeDialect(), capture("claude_partial_hi.jsonl"))


# -- recognising ---------------------------------------------------


def test_recognises_its_init_only() -> None:
    # Amp's, Cursor's and the other agents' first lines: the common table.
    assert ClaudeDialect.recognises({"type": "system", "subtype": "init", "session_id": "u-1"})
    assert ClaudeDialect.recognises({"type": "stream_event", "event": {}})
    assert not ClaudeDialect.recognises({"type": "result"})


# -- failed API calls and interim text ----------------------------------------------


def test_a_401_keeps_the_api_status_and_reports_no_answer() -> None:
    synthetic = assistant(
        text("Failed to authenticate. API Error: 401 invalid x-api-key"), model="<synthetic>"
    )
    failed = result(
        is_error=True,
        api_error_status=401,
        terminal_reason="completed",
        result="Failed to authenticate. API Error: 401 invalid x-api-key",
    )
    message = last_message(init(), synthetic, failed)
    assert (message.stop_reason, message.raw_stop_reason) == ("error", "is_error")
    assert message.api_status == 401
    assert message.error_message == "Failed to authenticate. API Error: 401 invalid x-api-key"
    # the error is not an answer, and the synthetic line names no model
    assert message.text == ""
    assert message.model == "claude-x"
    verdict = decide(RunFacts(final=message, exit=ProcessExit(1, None)))
    assert verdict.error is not None
    assert verdict.error.to_json() == {
        "kind": "agent_error",
        "message": "the agent's last turn failed: "
        "Failed to authenticate. API Error: 401 invalid x-api-key",
        "apiStatus": 401,
    }


def test_an_answer_cut_at_the_output_limit_fails_with_claudes_own_reason() -> None:
    # Claude Code 2.1.197 against the mock server (the conformance tier's
    # capture): a synthetic line with error max_output_tokens, an error
    # result saying so, then exit 1.
    path = Path(__file__).parent / "data" / "real" / "claude-2.1.197" / "length.jsonl"
    events = replay(ClaudeDialect(), path.read_bytes().splitlines(), 1)
    message = final(events)
    assert (message.stop_reason, message.raw_stop_reason) == ("length", "max_output_tokens")
    assert message.text == "This answer is cut short because it ran out of output tok"
    reason = (
        "API Error: Claude's response exceeded the 32000 output token maximum. To configure "
        "this behavior, set the CLAUDE_CODE_MAX_OUTPUT_TOKENS environment variable."
    )
    assert message.error_message == reason
    verdict = decide(
        RunFacts(final=message, exit=ProcessExit(1, None), stderr_tail="Warning: a notice")
    )
    assert verdict.error is not None
    assert verdict.error.to_json() == {
        "kind": "nonzero_exit",
        "message": f"the agent exited with status 1 after its final message: {reason}",
        "apiStatus": None,
    }


def test_a_terminal_reason_that_says_more_than_completed_is_the_raw_reason() -> None:
    message = last_message(init(), result(is_error=True, terminal_reason="prompt_too_long"))
    assert (message.stop_reason, message.raw_stop_reason) == ("error", "prompt_too_long")
    assert message.api_status is None


def test_the_text_of_a_tool_calling_message_is_never_the_final_text() -> None:
    events = replay(
        ClaudeDialect(),
        [
            init(),
            assistant(text("Running the command."), msg_id="m1"),
            assistant(tool_use("t1", "Bash", command="make"), msg_id="m1"),
        ],
        143,
    )
    message = events[-1]
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.raw_stop_reason) == ("aborted", "exit 143")
    assert message.text == ""


# -- where Claude Code keeps its transcript --------------------------------------------


@pytest.mark.parametrize(
    ("command", "mode"),
    [
        (["claude", "-p", "--output-format", "stream-json"], "default"),
        (["claude", "-p", "--permission-mode", "plan"], "plan"),
        (["claude", "-p", "--permission-mode=acceptEdits"], "acceptEdits"),
        (["claude", "--dangerously-skip-permissions", "-p"], "bypassPermissions"),
        (["claude", "--dangerously-skip-permissions", "--permission-mode", "plan"], "plan"),
        (["claude", "-p", "--permission-mode"], "default"),
        (["claude", "-p", "--", "--permission-mode", "plan"], "default"),
    ],
)
def test_permission_mode_is_read_from_claudes_command_line(command: list[str], mode: str) -> None:
    assert ClaudeDialect().permission_mode(command) == mode


def test_permission_mode_is_default_for_agents_without_claudes_options() -> None:
    for name in ("pi", "amp", "codex"):
        dialect = resolve_dialect(name, [name], has_task=True)
        assert dialect.permission_mode([name, "--dangerously-skip-permissions"]) == "default"


def test_the_transcript_is_searched_under_the_agents_config_dir() -> None:
    dialect = ClaudeDialect()
    configured = {"CLAUDE_CONFIG_DIR": "/cfg", "HOME": "/home/me"}
    assert dialect.transcript_search("abc-1", configured) == (
        Path("/cfg"),
        "projects/*/abc-1.jsonl",
    )
    at_home = dialect.transcript_search("abc-1", {"HOME": "/home/me"})
    assert at_home == (Path("/home/me/.claude"), "projects/*/abc-1.jsonl")
    # an id that could escape the directory or act as a pattern is not searched
    for unsafe in ("../x", "*", "a/b", "", None):
        assert dialect.transcript_search(unsafe, configured) is None
    assert CursorDialect().transcript_search("abc-1", configured) is None


def test_a_recognised_claude_stream_searches_claudes_transcript_too() -> None:
    sniffing = resolve_dialect("auto", ["my-agent"], has_task=False)
    env = {"CLAUDE_CONFIG_DIR": "/cfg"}
    assert sniffing.transcript_search("abc-1", env) is None
    init = {"type": "system", "subtype": "init", "session_id": "abc-1", "tools": []}
    sniffing.parse(json.dumps(init).encode())
    assert sniffing.transcript_search("abc-1", env) == (Path("/cfg"), "projects/*/abc-1.jsonl")


# -- its row of the common table (tests/test_dialect_common.py) --------------------


def claude_samples(session: str, init: dict[str, Any]) -> Samples:
    """Lines of Claude Code's stream, and of the streams built on it (Amp's)."""

    def say(*content: dict[str, Any]) -> bytes:
        message = {"id": "m1", "model": "x", "role": "assistant", "content": list(content)}
        return line({"type": "assistant", "message": message, "session_id": session})

    def result(**fields: Any) -> bytes:
        body = {"type": "result", "subtype": "success", "is_error": False, "session_id": session}
        return line({**body, **fields})

    start = line({"type": "system", "subtype": "init", "session_id": session, **init})
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": LS}
    answered = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}
    return Samples(
        session=session,
        answer=[start, say({"type": "text", "text": ANSWER}), result(result=ANSWER)],
        tool_call=[
            start,
            say(tool_use),
            line({"type": "user", "message": {"role": "user", "content": [answered]}}),
        ],
        tool="Bash",
        tool_id="toolu_1",
        error=[
            start,
            result(subtype="error_during_execution", is_error=True, errors=[FAILURE]),
        ],
        cut_short=[start, say({"type": "text", "text": "Working on it."})],
        cut_short_text="Working on it.",
    )


ROW = Agent(
    name="claude",
    command=("/opt/bin/claude", "-p"),
    types=("system", "assistant", "user", "stream_event", "result"),
    keys=(
        "subtype",
        "message",
        "event",
        "content",
        "usage",
        "is_error",
        "terminal_reason",
        "stop_reason",
        "result",
        "errors",
        "session_id",
        "parent_tool_use_id",
        "total_cost_usd",
    ),
    samples=claude_samples(
        "40e7b02d",
        {
            "cwd": "/w",
            "model": "claude-x",
            "tools": ["Bash"],
            "apiKeySource": "none",
            "claude_code_version": "2.1.3",
        },
    ),
    argv=Argv(
        task=("--", "Fix it"),
        dashed_task=("--", "-v is broken"),
        resume=("/opt/bin/claude", "-p", "--resume", RESUMED, "--", "Go on"),
        missing_session="Claude Code reported no session id",
        no_session_flag="--no-session-persistence",
    ),
    noise=b"Warning: no stdin data received",
    display_name="Claude Code",
)


CAPTURES = [
    Capture(
        "claude_tooluse_v2.1.3.jsonl",
        "claude",
        ("stop", "success"),
        "Here are the files in the current directory.",
        Usage(
            input=18,
            output=424,
            cache_read=17254,
            cache_write=25067,
            total_tokens=42763,
            cost_usd=0.24722425,
        ),
        session="40e7b02d-c0f9-4876-9010-f514d4eb0603",
        model="claude-opus-4-5-20251101",
        tools=(("Bash", "ls -la"),),
    ),
    Capture(
        "claude_partial_hi.jsonl",
        "claude",
        ("stop", "end_turn"),
        "hi",
        Usage(
            input=2, output=4, cache_read=0, cache_write=31984, total_tokens=31990, cost_usd=0.31995
        ),
        session="b2251092-456c-4056-82be-64e609ec4e11",
        model="claude-opus-5",
    ),
]
