"""What every dialect must do alike, checked for each from a table of its particulars.

A new dialect is one row of ``AGENTS``: its sample lines (a plain answer, a
tool call, a failure, a run cut short) and its command line (where the task
and the resumed session go). From them every dialect is checked to end a run
on its answer or its error, to start and end a tool, to read meaning into an
exit only when the stream did not end the run, to recognise its own stream
and no other's, to place a task and a session as its CLI wants, and to keep
bad input as unparsed lines without ever raising.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.dialect_support import (
    capture,
    final,
    first_object,
    line,
    messages,
    objects,
    recognisers,
    replay,
    session_id,
)
from wrapper.dialects import (
    DIALECTS,
    CannotResume,
    Dialect,
    UsageError,
    dialect_for_command,
    resolve_dialect,
)
from wrapper.dialects.base import MAX_ARG_BYTES
from wrapper.events import (
    AssistantMessage,
    StopReason,
    ToolEnded,
    ToolStarted,
    UnparsedLine,
    Usage,
    is_terminal,
)
from wrapper.registry import BY_NAME

#: Nothing beyond the generic lines.
no_lines: st.SearchStrategy[list[bytes]] = st.just([])

#: How the agent's process may end: a status, or none when a signal killed it.
exit_codes = st.none() | st.integers(-1, 255)


@dataclass(frozen=True)
class Samples:
    """Lines of one agent's stream for what every dialect must read alike.

    Each list is a whole run, opening as the real CLI opens its stream.
    """

    #: The session id the lines report.
    session: str
    #: A plain answer whose final text is ``ANSWER``.
    answer: list[bytes]
    #: One call of the tool ``tool`` (id ``tool_id``, run on ``ls``), started and ended.
    tool_call: list[bytes]
    tool: str
    tool_id: str
    #: A run that fails with the message ``FAILURE``.
    error: list[bytes]
    #: A run cut short before its end-of-run line, and the final text an exit
    #: then implies (None: the exit status implies nothing for this agent).
    cut_short: list[bytes]
    cut_short_text: str | None


@dataclass(frozen=True)
class Argv:
    """Where the agent's command line takes the task and the session."""

    #: What follows the command for the task ``Fix it``.
    task: tuple[str, ...]
    #: What follows it for the task ``-v is broken``.
    dashed_task: tuple[str, ...]
    #: The whole argv that resumes session ``S-1`` of ``command`` with ``Go on``
    #: (None: resuming needs more than a session id, see the dialect's own tests).
    resume: tuple[str, ...] | None
    #: How ``CannotResume`` names what the stream did not report.
    missing_session: str | None
    #: The flag of the user's command that means no session is kept.
    no_session_flag: str | None = None


ANSWER = "Done."
FAILURE = "quota gone"
RESUMED = "S-1"


@dataclass(frozen=True)
class Agent:
    """What the shared tests need to know about one agent CLI."""

    name: str
    #: A command line a user would give to run it.
    command: tuple[str, ...]
    #: The event types it writes, and the fields its handlers read.
    types: tuple[str, ...]
    keys: tuple[str, ...]
    samples: Samples
    argv: Argv
    #: Other executables that run it, with the rest of ``command`` as it is.
    aliases: tuple[str, ...] = ()
    #: A line it prints that is not JSON, where one is known.
    noise: bytes | None = None
    #: How a usage error names it; None when every task can be given to it.
    display_name: str | None = None
    #: Lines of its own to fuzz after the generic ones.
    extra_lines: st.SearchStrategy[list[bytes]] = no_lines

    @property
    def dialect(self) -> type[Dialect]:
        return DIALECTS[self.name]

    @property
    def commands(self) -> list[tuple[str, ...]]:
        return [self.command, *((alias, *self.command[1:]) for alias in self.aliases)]

    @cached_property
    def fuzz_lines(self) -> st.SearchStrategy[list[bytes]]:
        """Up to four made-up events of its types, then its own extra lines."""
        events = st.lists(objects(self.types, self.keys), max_size=4)
        return st.builds(lambda objs, extra: [*map(line, objs), *extra], events, self.extra_lines)


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

#: A completed Cursor ``tool_call`` line, its payload under ``<name>ToolCall`` keys.
cursor_tool_call = st.dictionaries(
    st.sampled_from(["shellToolCall", "ToolCall", "mcpToolCall", "x"]),
    st.fixed_dictionaries(
        {}, optional={"args": st.none() | st.dictionaries(st.text(max_size=3), st.integers())}
    ),
    max_size=2,
).map(lambda call: [line({"type": "tool_call", "subtype": "completed", "tool_call": call})])


# -- each agent's sample lines ------------------------------------------------------------

LS = {"command": "ls"}


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


AGENTS = [
    Agent(
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
    ),
    Agent(
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
    ),
    Agent(
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
    ),
    Agent(
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
    ),
    Agent(
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
    ),
    Agent(
        name="amp",
        command=("amp", "--stream-json", "--mode", "smart"),
        types=("system", "assistant", "user", "result"),
        keys=("subtype", "message", "is_error", "result", "error", "session_id", "usage"),
        samples=claude_samples("T-2775dc92", {"cwd": "/w", "tools": ["oracle"]}),
        argv=Argv(
            task=("-x", "Fix it"),
            dashed_task=("-x", " -v is broken"),
            # the thread is continued by a subcommand; the user's flags follow it
            resume=(
                *("amp", "threads", "continue", RESUMED),
                *("--stream-json", "--mode", "smart", "-x", "Go on"),
            ),
            missing_session="Amp reported no session id",
        ),
        display_name="Amp",
    ),
    Agent(
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
    ),
]


def each(agents: Sequence[Agent]) -> list[Any]:
    return [pytest.param(agent, id=agent.name) for agent in agents]


def test_every_dialect_has_a_row() -> None:
    assert [agent.name for agent in AGENTS] == list(DIALECTS)


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("agent", each(AGENTS))
@given(raw=st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(agent: Agent, raw: bytes) -> None:
    agent.dialect().parse(raw)


@pytest.mark.parametrize("agent", each(AGENTS))
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_arbitrary_json_objects_never_raise(agent: Agent, data: st.DataObject) -> None:
    lines = data.draw(agent.fuzz_lines, label="lines")
    replay(agent.dialect(), lines, data.draw(exit_codes, label="exit code"))


@pytest.mark.parametrize(
    ("agent", "noise"),
    [pytest.param(agent, agent.noise, id=agent.name) for agent in AGENTS if agent.noise],
)
def test_non_objects_become_unparsed_lines(agent: Agent, noise: bytes) -> None:
    [event] = agent.dialect().parse(noise)
    assert isinstance(event, UnparsedLine)
    assert event.reason == "not JSON"


@pytest.mark.parametrize("agent", each(AGENTS))
@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "blank line"),
        (b"   ", "blank line"),
        (b"Warning: something odd", "not JSON"),
        (b'{"type":"message_end","mess', "not JSON"),
        (b"[1, 2]", "JSON list, not an object"),
        (b'"text"', "JSON str, not an object"),
        (b"\xff\xfe\x00garbage", "not JSON"),
    ],
)
def test_lines_that_are_not_objects_say_why(agent: Agent, raw: bytes, reason: str) -> None:
    [event] = agent.dialect().parse(raw)
    assert isinstance(event, UnparsedLine)
    assert event.reason == reason


@pytest.mark.parametrize("agent", each(AGENTS))
def test_escape_sequences_in_front_of_a_line_change_nothing(agent: Agent) -> None:
    plain, escaped = agent.dialect(), agent.dialect()
    for raw in agent.samples.answer:
        assert escaped.parse(b"\x1b[2K\x1b[1G" + raw) == plain.parse(raw)


# -- the end of a run --------------------------------------------------------------------


@pytest.mark.parametrize("agent", each(AGENTS))
def test_a_plain_answer_ends_the_run_on_stop_with_its_text(agent: Agent) -> None:
    events = replay(agent.dialect(), agent.samples.answer)
    message = final(events)
    assert (message.stop_reason, message.text) == (StopReason.STOP, ANSWER)
    assert message.error_message is None
    assert [m for m in messages(events) if is_terminal(m.stop_reason)] == [message]
    assert session_id(events) == agent.samples.session


@pytest.mark.parametrize("agent", each(AGENTS))
def test_a_failure_ends_the_run_on_error_with_its_message(agent: Agent) -> None:
    events = replay(agent.dialect(), agent.samples.error, exit_code=1)
    message = final(events)
    assert message.stop_reason == StopReason.ERROR
    assert message.error_message == FAILURE
    assert message.text == ""
    assert [m for m in messages(events) if is_terminal(m.stop_reason)] == [message]


@pytest.mark.parametrize("agent", each(AGENTS))
def test_a_tool_call_starts_and_ends_the_tool(agent: Agent) -> None:
    samples = agent.samples
    events = replay(agent.dialect(), samples.tool_call, exit_code=None)
    tools = [event for event in events if isinstance(event, ToolStarted | ToolEnded)]
    assert [(type(e), e.tool, e.tool_call_id) for e in tools] == [
        (ToolStarted, samples.tool, samples.tool_id),
        (ToolEnded, samples.tool, samples.tool_id),
    ]
    started, ended = tools
    assert isinstance(started, ToolStarted)
    assert started.summary == "ls"
    assert isinstance(ended, ToolEnded)
    assert not ended.is_error


@pytest.mark.parametrize("agent", each(AGENTS))
@pytest.mark.parametrize(
    ("exit_code", "canonical"), [(130, "aborted"), (143, "aborted"), (1, "error"), (2, "error")]
)
def test_an_exit_before_the_end_of_the_run_implies_its_final_message(
    agent: Agent, exit_code: int, canonical: str
) -> None:
    samples = agent.samples
    events = replay(agent.dialect(), samples.cut_short, exit_code)
    last = events[-1]
    if samples.cut_short_text is None:
        # the agent's own lifecycle events end its runs; its exit status says nothing
        assert not isinstance(last, AssistantMessage) or last.raw_stop_reason != f"exit {exit_code}"
        return
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.raw_stop_reason) == (canonical, f"exit {exit_code}")
    assert last.text == samples.cut_short_text


@pytest.mark.parametrize("agent", each(AGENTS))
@pytest.mark.parametrize(("exit_code", "signal"), [(0, None), (None, 9)])
def test_a_clean_exit_or_death_by_signal_implies_nothing(
    agent: Agent, exit_code: int | None, signal: int | None
) -> None:
    dialect = agent.dialect()
    for raw in agent.samples.cut_short:
        dialect.parse(raw)
    assert dialect.on_exit(exit_code, signal) == []


@pytest.mark.parametrize("agent", each(AGENTS))
def test_an_exit_after_the_end_of_the_run_implies_nothing_and_the_next_starts_afresh(
    agent: Agent,
) -> None:
    samples, dialect = agent.samples, agent.dialect()
    answered = messages(replay(dialect, samples.answer, exit_code=143))
    assert [m.stop_reason for m in answered if is_terminal(m.stop_reason)] == ["stop"]
    failed = messages(replay(dialect, samples.error, exit_code=1))
    assert [m.raw_stop_reason == "exit 1" for m in failed if is_terminal(m.stop_reason)] == [False]
    # the next attempt (a resumed run) owes nothing to the one that ended
    if samples.cut_short_text is not None:
        [message] = replay(dialect, [], exit_code=143)
        assert isinstance(message, AssistantMessage)
        assert (message.stop_reason, message.text) == ("aborted", "")


# -- recognising -------------------------------------------------------------------------


@pytest.mark.parametrize("agent", each(AGENTS))
def test_its_first_line_is_recognised_as_its_own_and_no_others(agent: Agent) -> None:
    for lines in (agent.samples.answer, agent.samples.tool_call):
        assert recognisers(first_object(lines)) == [agent.name]


# -- recognising and launching -----------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "command"),
    [
        pytest.param(agent, command, id=f"{agent.name}-{command[0]}")
        for agent in AGENTS
        for command in agent.commands
    ],
)
def test_executable_names_the_dialect(agent: Agent, command: tuple[str, ...]) -> None:
    assert dialect_for_command(command) is agent.dialect
    assert type(resolve_dialect("auto", command, has_task=True)) is agent.dialect


@pytest.mark.parametrize("agent", each(AGENTS))
def test_the_registry_entry_names_the_dialect(agent: Agent) -> None:
    assert agent.dialect.name == agent.name
    named = {os.path.basename(command[0]) for command in agent.commands}
    assert named == set(BY_NAME[agent.name].executables)


@pytest.mark.parametrize(
    ("agent", "display_name"),
    [
        pytest.param(agent, agent.display_name, id=agent.name)
        for agent in AGENTS
        if agent.display_name
    ],
)
@pytest.mark.parametrize("task", ["x" * (MAX_ARG_BYTES + 1), "a\x00b"], ids=["too-long", "nul"])
def test_task_that_cannot_be_one_argument_is_a_usage_error(
    agent: Agent, display_name: str, task: str, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match=display_name):
        agent.dialect().launch(agent.command, task, tmp_path)


@pytest.mark.parametrize("agent", each(AGENTS))
def test_the_task_goes_where_the_agent_takes_it(agent: Agent, tmp_path: Path) -> None:
    dialect = agent.dialect()
    launch = dialect.launch(agent.command, "Fix it", tmp_path)
    assert launch.argv == [*agent.command, *agent.argv.task]
    assert launch.files == {}
    dashed = dialect.launch(agent.command, "-v is broken", tmp_path).argv
    assert dashed == [*agent.command, *agent.argv.dashed_task]


@pytest.mark.parametrize("agent", each(AGENTS))
def test_no_task_runs_the_command_as_given(agent: Agent, tmp_path: Path) -> None:
    assert agent.dialect().launch(agent.command, None, tmp_path).argv == list(agent.command)


RESUMING = [agent for agent in AGENTS if agent.argv.resume is not None]


@pytest.mark.parametrize("agent", each(RESUMING))
def test_resume_continues_the_session_with_the_prompt(agent: Agent, tmp_path: Path) -> None:
    launch = agent.dialect().resume(agent.command, "Go on", tmp_path, RESUMED)
    assert tuple(launch.argv) == agent.argv.resume


@pytest.mark.parametrize("agent", each(RESUMING))
def test_resume_without_a_reported_session_cannot_be_done(agent: Agent, tmp_path: Path) -> None:
    missing = agent.argv.missing_session
    assert missing is not None
    with pytest.raises(CannotResume, match=f"^{missing}"):
        agent.dialect().resume(agent.command, "Go on", tmp_path, None)


@pytest.mark.parametrize(
    "agent", each([agent for agent in AGENTS if agent.argv.no_session_flag is not None])
)
def test_a_command_that_keeps_no_session_cannot_be_resumed(agent: Agent, tmp_path: Path) -> None:
    flag = agent.argv.no_session_flag
    assert flag is not None
    command = [*agent.command, flag]
    with pytest.raises(CannotResume, match=f"has {flag}, so .* keeps no session to resume"):
        agent.dialect().resume(command, "Go on", tmp_path, RESUMED)


# -- real captures -------------------------------------------------------------------------


@dataclass(frozen=True)
class Capture:
    """A stream a real CLI wrote (``../shared/streams``) and what its run must come to."""

    file: str
    dialect: str
    #: The final message's canonical and raw stop reason, text and usage.
    stop: tuple[str, str]
    text: str
    usage: Usage
    session: str
    model: str | None = None
    error_message: str | None = None
    #: Every tool started, with the summary of its arguments; each one ends.
    tools: tuple[tuple[str, str], ...] = ()
    exit_code: int = 0


CAPTURES = [
    Capture(
        "amp_stream_json_official.jsonl",
        "amp",
        ("stop", "success"),
        "2 + 2 equals 4.",
        Usage(input=12783, output=8, cache_read=12416, cache_write=367, total_tokens=25574),
        session="T-2775dc92-90ed-4f85-8b73-8f9766029e83",
    ),
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


@pytest.mark.parametrize("case", [pytest.param(case, id=case.file) for case in CAPTURES])
def test_a_real_capture_comes_to_its_final_message(case: Capture) -> None:
    lines = capture(case.file)
    events = replay(DIALECTS[case.dialect](), lines, case.exit_code)
    message = final(events)
    assert (message.stop_reason, message.raw_stop_reason) == case.stop
    assert (message.text, message.usage) == (case.text, case.usage)
    assert (message.model, message.error_message) == (case.model, case.error_message)
    assert [m for m in messages(events) if is_terminal(m.stop_reason)] == [message]
    assert session_id(events) == case.session
    started = [(e.tool, e.summary) for e in events if isinstance(e, ToolStarted)]
    assert started == list(case.tools)
    assert sum(isinstance(e, ToolEnded) for e in events) == len(case.tools)
    assert recognisers(first_object(lines)) == [case.dialect]
