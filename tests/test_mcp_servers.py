"""What an mcp_tool handler's ``input`` becomes for a hook input, and a
server's ``${VAR}`` expanded: pure, no server."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrapper.core.mcp_servers import McpServer, parse_servers, tool_arguments
from wrapper.core.settings import merge_settings

HOOK_INPUT = {
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "make test", "args": ["-k", "x"]},
    "stop_hook_active": False,
}


def handler_with(arguments: dict[str, Any]) -> Any:
    settings = {
        "mcpServers": {"gate": {"command": "gate-server"}},
        "hooks": {
            "Stop": [
                {"hooks": [{"type": "mcp_tool", "server": "gate", "tool": "t", "input": arguments}]}
            ]
        },
    }
    (handler,) = merge_settings(["s.json"], lambda _where: settings).handlers("Stop")
    return handler


@pytest.mark.parametrize(
    ("template", "filled"),
    [
        ({"c": "${tool_input.command}"}, {"c": "make test"}),
        # One placeholder alone keeps the value's type.
        ({"active": "${stop_hook_active}"}, {"active": False}),
        ({"input": "${tool_input}"}, {"input": HOOK_INPUT["tool_input"]}),
        # Inside text: a string as is, anything else as JSON.
        ({"s": "run ${tool_input.command} now"}, {"s": "run make test now"}),
        ({"s": "args=${tool_input.args}"}, {"s": 'args=["-k","x"]'}),
        ({"s": "${tool_input.args.1}"}, {"s": "x"}),
        # A path the input lacks: empty.
        ({"s": "${nope.deeper}", "t": "a${nope}b"}, {"s": "", "t": "ab"}),
        # Nested objects and lists, and values that are not strings, as they are.
        ({"o": {"l": ["${tool_name}", 3, None]}}, {"o": {"l": ["Bash", 3, None]}}),
        ({}, {}),
    ],
)
def test_the_input_is_filled_from_the_hook_input(
    template: dict[str, Any], filled: dict[str, Any]
) -> None:
    assert tool_arguments(handler_with(template), HOOK_INPUT) == filled


def test_a_server_is_expanded_from_the_environment_when_called() -> None:
    (server,) = parse_servers(
        "s.json",
        {
            "gate": {
                "command": "${HOME}/bin/gate",
                "args": ["--level", "${LEVEL:-strict}"],
                "env": {"TOKEN": "${TOKEN}"},
            }
        },
    ).values()
    expanded = server.expanded({"HOME": "/h", "TOKEN": "t"})
    assert (expanded.command, expanded.args, expanded.env) == (
        "/h/bin/gate",
        ("--level", "strict"),
        (("TOKEN", "t"),),
    )
    assert server.command == "${HOME}/bin/gate", "the configured server is left as it was"


def test_the_transport_follows_the_fields_and_the_type() -> None:
    servers = parse_servers(
        "s.json",
        {
            "a": {"command": "x"},
            "b": {"url": "https://h/mcp"},
            "c": {"type": "streamable-http", "url": "http://h/mcp", "headers": {"A": "b"}},
        },
    )
    assert [s.transport for s in servers.values()] == ["stdio", "http", "http"]
    assert isinstance(servers["c"], McpServer)
    assert servers["c"].headers == (("A", "b"),)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    payload=st.dictionaries(st.text(max_size=8), JSON, max_size=4),
    text=st.text(alphabet="${}._ab0", max_size=20),
)
def test_any_hook_input_and_any_template_string_fill_without_raising(
    payload: dict[str, Any], text: str
) -> None:
    filled = tool_arguments(handler_with({"x": text, "y": [text]}), payload)
    assert set(filled) == {"x", "y"}
