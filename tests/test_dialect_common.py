"""What every dialect must do alike, checked for each from a table of its particulars.

A new dialect is one row (``ROW`` in its own ``tests/test_dialect_<name>.py``,
gathered by ``tests/dialect_table.py``): its sample lines (a plain answer, a
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
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.dialect_support import (
    capture,
    final,
    first_object,
    messages,
    recognisers,
    replay,
    session_id,
)
from tests.dialect_table import (
    ANSWER,
    FAILURE,
    RESUMED,
    Agent,
    Capture,
    captures,
    exit_codes,
    rows,
)
from wrapper.core.events import (
    AssistantMessage,
    StopReason,
    ToolEnded,
    ToolStarted,
    UnparsedLine,
    is_terminal,
)
from wrapper.core.registry import BY_NAME
from wrapper.dialects import (
    DIALECTS,
    CannotResume,
    UsageError,
    dialect_for_command,
    resolve_dialect,
)
from wrapper.dialects.base import MAX_ARG_BYTES

AGENTS = rows()
CAPTURES = captures()


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
    assert named <= set(BY_NAME[agent.name].executables)


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
