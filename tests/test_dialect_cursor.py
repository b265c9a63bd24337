"""Cursor Agent's stream-json -> normalized events: text, tool calls, the result line."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st

from tests.dialect_support import (
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
    Usage,
    is_terminal,
)
from wrapper.dialects.cursor import CursorDialect

SESSION = "c6b62c6f-7ead-4fd6-9922-e952131177ff"


def event(kind: str, **fields: Any) -> bytes:
    return line({"type": kind, "session_id": SESSION, **fields})


def say(text: str) -> bytes:
    return event(
        "assistant", message={"role": "assistant", "content": [{"type": "text", "text": text}]}
    )


def tool_call(subtype: str, call_id: str, name: str, **payload: Any) -> bytes:
    return event(
        "tool_call", subtype=subtype, call_id=call_id, tool_call={f"{name}ToolCall": payload}
    )


#: A run as Cursor's CLI reference and public captures show it (no shared capture exists).
DOCUMENTED_RUN = [
    event(
        "system",
        subtype="init",
        apiKeySource="login",
        cwd="/repo",
        model="Claude 4 Sonnet",
        permissionMode="default",
    ),
    event("user", message={"role": "user", "content": [{"type": "text", "text": "Summarize"}]}),
    event("thinking", subtype="delta", text="Let me"),
    event("thinking", subtype="completed"),
    say("I'll read the README."),
    tool_call("started", "toolu_1", "read", args={"path": "README.md"}),
    tool_call(
        "completed",
        "toolu_1",
        "read",
        args={"path": "README.md"},
        result={"success": {"content": "# Project", "totalLines": 54}},
    ),
    say("It is a sample project."),
    event(
        "result",
        subtype="success",
        is_error=False,
        duration_ms=1234,
        duration_api_ms=1234,
        result="I'll read the README.It is a sample project.",
        request_id="r1",
    ),
]


def parse_all(*lines: bytes) -> list[Event]:
    dialect = CursorDialect()
    return [item for raw in lines for item in dialect.parse(raw)]


def test_replay_documented_run() -> None:
    events = replay(CursorDialect(), DOCUMENTED_RUN)
    message = final(events)
    assert (message.stop_reason, message.raw_stop_reason) == ("stop", "success")
    # the result line joins every message; the final text is the last one alone
    assert message.text == "It is a sample project."
    assert message.model == "Claude 4 Sonnet"
    assert message.usage is None
    assert session_id(events) == SESSION
    assert events[0] == SessionStarted(session_id=SESSION, cwd="/repo")
    assert TextDelta(text="I'll read the README.") in events
    assert [m for m in messages(events) if is_terminal(m.stop_reason)] == [message]
    assert messages(events) == [message], "assistant lines are text, not messages"
    assert events[-1] == AgentEnded(will_retry=False, settled=True)
    assert recognisers(first_object(DOCUMENTED_RUN)) == ["cursor"]


def test_tool_calls_start_and_end() -> None:
    events = parse_all(*DOCUMENTED_RUN[5:7])
    assert events == [
        ToolStarted(tool="read", tool_call_id="toolu_1", summary="README.md"),
        ToolEnded(tool="read", tool_call_id="toolu_1"),
    ]
    assert isinstance(events[1], ToolEnded)
    assert events[1].result == "# Project"


@pytest.mark.parametrize(
    ("result", "is_error", "text"),
    [
        ({"success": {"exitCode": 0, "stdout": "ok\n", "stderr": ""}}, False, "ok\n"),
        ({"success": {"exitCode": 2, "stdout": "", "stderr": "bad"}}, True, None),
        ({"error": {"message": "sandbox denied"}}, True, None),
        ({"rejected": {"reason": "not allowed"}}, True, None),
        # how cursor-agent reports a command that exited non-zero
        ({"failure": {"command": "x", "exitCode": 2, "stdout": "", "stderr": "bad"}}, True, "bad"),
        ({"failure": {"exitCode": 1, "stdout": "half", "stderr": ""}}, True, "half"),
    ],
)
def test_shell_results(result: dict[str, Any], is_error: bool, text: str | None) -> None:
    [ended] = parse_all(tool_call("completed", "c1", "shell", args={"command": "x"}, result=result))
    assert isinstance(ended, ToolEnded)
    assert (ended.tool, ended.is_error) == ("shell", is_error)
    if text is not None:
        assert ended.result == text


def test_mcp_tool_is_named_by_its_tool() -> None:
    [started] = parse_all(
        tool_call("started", "c1", "mcp", args={"toolName": "search", "args": {"query": "q"}})
    )
    assert isinstance(started, ToolStarted)
    assert started.tool == "mcp:search"


def test_error_result_is_an_error_and_usage_is_read_in_camel_case() -> None:
    usage = {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 3, "cacheWriteTokens": 4}
    [message, _] = parse_all(
        event("result", subtype="error", is_error=True, result="Rate limited", usage=usage)
    )
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.raw_stop_reason) == ("error", "error")
    assert message.error_message == "Rate limited"
    assert message.usage == Usage(input=10, output=2, cache_read=3, cache_write=4, total_tokens=19)


# -- recognising -----------------------------------------------------------


def test_recognises_cursor_events_only() -> None:
    # Claude's init, which also has apiKeySource: the common table.
    assert recognisers(first_object(DOCUMENTED_RUN)) == ["cursor"]
    assert CursorDialect.recognises({"type": "tool_call", "subtype": "started"})


# -- its row of the common table (tests/test_dialect_common.py) --------------------

#: A completed Cursor ``tool_call`` line, its payload under ``<name>ToolCall`` keys.
cursor_tool_call = st.dictionaries(
    st.sampled_from(["shellToolCall", "ToolCall", "mcpToolCall", "x"]),
    st.fixed_dictionaries(
        {}, optional={"args": st.none() | st.dictionaries(st.text(max_size=3), st.integers())}
    ),
    max_size=2,
).map(lambda call: [line({"type": "tool_call", "subtype": "completed", "tool_call": call})])


def cursor_samples() -> Samples:
    session = "c6b62c6f"

    def event(kind: str, **fields: Any) -> bytes:
        return line({"type": kind, "session_id": session, **fields})

    def say(text: str) -> bytes:
        content = [{"type": "text", "text": text}]
        return event("assistant", message={"role": "assistant", "content": content})

    def shell(subtype: str, **payload: Any) -> bytes:
        call = {"shellToolCall": {"args": LS, **payload}}
        return event("tool_call", subtype=subtype, call_id="toolu_1", tool_call=call)

    init = event("system", subtype="init", apiKeySource="login", cwd="/w", permissionMode="default")
    return Samples(
        session=session,
        answer=[init, say(ANSWER), event("result", subtype="success", result=ANSWER)],
        tool_call=[
            init,
            shell("started"),
            shell("completed", result={"success": {"stdout": "a", "exitCode": 0}}),
        ],
        tool="shell",
        tool_id="toolu_1",
        error=[init, event("result", subtype="error", is_error=True, result=FAILURE)],
        cut_short=[init, say("I'll read the README.")],
        cut_short_text="I'll read the README.",
    )


ROW = Agent(
    name="cursor",
    command=("cursor-agent", "-p"),
    aliases=("/home/me/.local/bin/cursor-agent", "cursor"),
    types=("system", "assistant", "tool_call", "thinking", "result"),
    keys=("subtype", "message", "call_id", "tool_call", "is_error", "result", "usage"),
    samples=cursor_samples(),
    argv=Argv(
        task=("Fix it",),
        dashed_task=(" -v is broken",),
        resume=("cursor-agent", "-p", "--resume", RESUMED, "Go on"),
        missing_session="Cursor Agent reported no session id",
    ),
    display_name="Cursor Agent",
    extra_lines=cursor_tool_call,
)
