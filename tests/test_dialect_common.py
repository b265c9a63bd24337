"""What every dialect must do alike, checked for each from a table of its particulars.

Bad input never raises, a line that is not JSON is kept as unparsed, the
executable's name picks the dialect, and a task that cannot be one argument is
a usage error that names the agent.
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

from tests.dialect_support import line, objects, replay
from wrapper.dialects import (
    DIALECTS,
    Dialect,
    UsageError,
    dialect_for_command,
    resolve_dialect,
)
from wrapper.dialects.base import MAX_ARG_BYTES
from wrapper.events import UnparsedLine
from wrapper.registry import BY_NAME

#: Nothing beyond the generic lines.
no_lines: st.SearchStrategy[list[bytes]] = st.just([])

#: How the agent's process may end: a status, or none when a signal killed it.
exit_codes = st.none() | st.integers(-1, 255)


@dataclass(frozen=True)
class Agent:
    """What the shared tests need to know about one agent CLI."""

    name: str
    #: A command line a user would give to run it.
    command: tuple[str, ...]
    #: The event types it writes, and the fields its handlers read.
    types: tuple[str, ...]
    keys: tuple[str, ...]
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
        noise=b"Loaded cached credentials.",
        display_name="Gemini CLI",
    ),
    Agent(
        name="opencode",
        command=("opencode", "run", "--format", "json"),
        types=("step_start", "text", "tool_use", "step_finish", "error", "done"),
        keys=("sessionID", "part", "error", "reason"),
        noise=b"INFO  service=bus",
        display_name="opencode",
    ),
    Agent(
        name="amp",
        command=("amp", "--stream-json"),
        types=("system", "assistant", "user", "result"),
        keys=("subtype", "message", "is_error", "result", "error", "session_id", "usage"),
        display_name="Amp",
    ),
    Agent(
        name="cursor",
        command=("cursor-agent", "-p"),
        aliases=("/home/me/.local/bin/cursor-agent", "cursor"),
        types=("system", "assistant", "tool_call", "thinking", "result"),
        keys=("subtype", "message", "call_id", "tool_call", "is_error", "result", "usage"),
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
