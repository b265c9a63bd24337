"""The fake agent speaking ACP, driven by the wrapper's ACP client core.

Each test runs the fake as a process, talks to it through the core (the
same decisions the wrapper's shell will take: answer permissions, steer
with a next prompt, cancel, close) and checks what a user would see: the
turns' stop reasons, text and tools, and that every message both sides
sent is valid against the published ACP schema (when it is available).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.acp_schema import check_conversation, require_schema
from wrapper.core.events import Event, ToolEnded, ToolStarted
from wrapper.dialects.acp.actions import (
    AcpOptions,
    CloseInput,
    Failed,
    Output,
    PermissionRequested,
    Send,
    TurnEnded,
)
from wrapper.dialects.acp.client import AcpClient

FAKE = Path(__file__).resolve().parent.parent / "fixtures" / "fake_agent"

#: Only to catch a hang.
HANG = 30.0

TOOL_TURN: list[dict[str, Any]] = [
    {
        "assistant": {
            "text": "Running it.",
            "stopReason": "toolUse",
            "toolCalls": [{"name": "bash", "arguments": {"command": "ls -l"}}],
        }
    },
    {"tool": {"name": "bash", "result": "a b c"}},
    {"assistant": {"text": "Done.", "stopReason": "stop"}},
]


@dataclass
class Session:
    client: AcpClient
    proc: subprocess.Popen[bytes]
    outputs: list[Output] = field(default_factory=list)
    #: (direction, message): ``out`` client -> agent, ``in`` agent -> client.
    wire: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    exit_code: int | None = None

    @property
    def events(self) -> list[Event]:
        return [o for o in self.outputs if isinstance(o, Event)]

    @property
    def turns(self) -> list[TurnEnded]:
        return [o for o in self.outputs if isinstance(o, TurnEnded)]


def converse(
    tmp_path: Path,
    steps: list[dict[str, Any]],
    *,
    resumes: list[list[dict[str, Any]]] | None = None,
    allow: Callable[[PermissionRequested], bool] = lambda _: True,
    steers: tuple[str, ...] = (),
    cancel_on: Callable[[Output], bool] = lambda _: False,
    args: tuple[str, ...] = (),
) -> Session:
    """Play a scenario over ACP; steer with ``steers`` after each turn, then close."""
    scenario = tmp_path / "scenario.json"
    scenario.write_text(
        json.dumps({"version": 1, "steps": steps, **({"resumes": resumes} if resumes else {})})
    )
    proc = subprocess.Popen(
        [sys.executable, str(FAKE), "--dialect", "acp", "--scenario", str(scenario), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "FAKE_AGENT_DIALECT": ""},
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    session = Session(AcpClient(AcpOptions(task="do the task", cwd=str(tmp_path))), proc)
    pending_steers = list(steers)
    deadline = time.monotonic() + HANG

    def act(outputs: list[Output]) -> None:
        for output in outputs:
            session.outputs.append(output)
            if cancel_on(output):
                act(session.client.cancel())
            if isinstance(output, Send):
                session.wire.append(("out", output.message))
                assert proc.stdin is not None
                proc.stdin.write(orjson.dumps(output.message) + b"\n")
                proc.stdin.flush()
            elif isinstance(output, CloseInput):
                assert proc.stdin is not None
                proc.stdin.close()
            elif isinstance(output, PermissionRequested):
                act(
                    session.client.decide_permission(
                        output.request_id, allow(output), "denied by test"
                    )
                )
            elif isinstance(output, TurnEnded):
                if pending_steers:
                    act(session.client.prompt(pending_steers.pop(0)))
                else:
                    act(session.client.close())
            elif isinstance(output, Failed):
                raise AssertionError(output.message)

    act(session.client.start(time.monotonic()))
    buffer = b""
    fd = proc.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        assert left > 0, "the conversation hung"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                session.wire.append(("in", orjson.loads(line)))
                act(session.client.feed(line, time.monotonic()))
    session.exit_code = proc.wait(timeout=HANG)
    return session


def test_plain_answer(tmp_path: Path) -> None:
    session = converse(
        tmp_path, [{"assistant": {"text": "Hello there.", "stopReason": "stop", "deltas": 3}}]
    )
    (turn,) = session.turns
    assert turn.message.stop_reason == "stop"
    assert turn.message.text == "Hello there."
    assert turn.message.usage is not None
    assert turn.message.usage.output == 20
    assert session.exit_code == 0


def test_tool_call_asks_permission_and_runs(tmp_path: Path) -> None:
    session = converse(tmp_path, TOOL_TURN)
    asked = [o for o in session.outputs if isinstance(o, PermissionRequested)]
    assert [(a.tool.name, a.tool.title, a.tool.input) for a in asked] == [
        ("execute", "ls -l", {"command": "ls -l"})
    ]
    ended = [e for e in session.events if isinstance(e, ToolEnded)]
    assert [(e.tool, e.is_error, e.result) for e in ended] == [("execute", False, "a b c")]
    (turn,) = session.turns
    assert turn.message.text == "Running it.Done."
    assert [c.name for c in turn.message.tool_calls] == ["execute"]


def test_refused_tool_does_not_run(tmp_path: Path) -> None:
    session = converse(tmp_path, TOOL_TURN, allow=lambda _: False)
    ended = [e for e in session.events if isinstance(e, ToolEnded)]
    assert [(e.is_error, e.result) for e in ended] == [(True, "denied by test")]
    # Its result never reached the client.
    assert "a b c" not in json.dumps([m for _, m in session.wire])
    assert session.turns[0].message.stop_reason == "stop"


def test_yolo_asks_nothing(tmp_path: Path) -> None:
    session = converse(tmp_path, TOOL_TURN, args=("--yolo",))
    assert not [o for o in session.outputs if isinstance(o, PermissionRequested)]
    assert [e.tool for e in session.events if isinstance(e, ToolStarted)] == ["execute"]


def test_steer_plays_the_next_turn_in_the_same_process(tmp_path: Path) -> None:
    session = converse(
        tmp_path,
        [{"assistant": {"text": "Claimed done.", "stopReason": "stop"}}],
        resumes=[[{"assistant": {"text": "Really done.", "stopReason": "stop"}}]],
        steers=("Run the tests first.",),
    )
    assert [t.message.text for t in session.turns] == ["Claimed done.", "Really done."]
    prompts = [m for way, m in session.wire if way == "out" and m.get("method") == "session/prompt"]
    assert [p["params"]["prompt"][0]["text"] for p in prompts] == [
        "do the task",
        "Run the tests first.",
    ]
    assert session.exit_code == 0


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ({"text": "cut", "stopReason": "length"}, ("length", "max_tokens")),
        ({"text": "", "stopReason": "aborted"}, ("aborted", "cancelled")),
        ({"text": "", "stopReason": "error", "errorMessage": "quota"}, ("error", "error -32603")),
    ],
)
def test_endings(tmp_path: Path, step: dict[str, Any], expected: tuple[str, str]) -> None:
    (turn,) = converse(tmp_path, [{"assistant": step}]).turns
    assert (turn.message.stop_reason, turn.message.raw_stop_reason) == expected
    if expected[0] == "error":
        assert turn.message.error_message is not None
        assert "quota" in turn.message.error_message


def test_cancel_while_asked_for_permission(tmp_path: Path) -> None:
    session = converse(tmp_path, TOOL_TURN, cancel_on=lambda o: isinstance(o, PermissionRequested))
    (turn,) = session.turns
    assert turn.message.stop_reason == "aborted"
    assert "a b c" not in json.dumps([m for _, m in session.wire])


def test_cancel_mid_turn_reports_nothing_more(tmp_path: Path) -> None:
    steps = [
        {
            "assistant": {
                "text": "one two three four",
                "stopReason": "stop",
                "deltas": 4,
                "duration": 1.0,
            }
        }
    ]
    session = converse(
        tmp_path,
        steps,
        cancel_on=lambda o: isinstance(o, Event) and getattr(o, "text", "") == "one ",
    )
    (turn,) = session.turns
    assert turn.message.stop_reason == "aborted"
    assert turn.message.text.startswith("one ")
    assert "four" not in turn.message.text


def test_non_json_line_and_unknown_method_get_errors(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"version": 1, "steps": []}))
    lines = (
        b"not json\n" + orjson.dumps({"jsonrpc": "2.0", "id": 5, "method": "fs/nothing"}) + b"\n"
    )
    done = subprocess.run(
        [sys.executable, str(FAKE), "--dialect", "acp", "--scenario", str(scenario)],
        input=lines,
        capture_output=True,
        timeout=HANG,
        check=False,
    )
    replies = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [(r["id"], r["error"]["code"]) for r in replies] == [(None, -32700), (5, -32601)]
    assert done.returncode == 0


def test_every_message_is_valid_against_the_published_schema(tmp_path: Path) -> None:
    require_schema()
    wire: list[tuple[str, dict[str, Any]]] = []
    wire += converse(tmp_path, TOOL_TURN).wire
    wire += converse(tmp_path, TOOL_TURN, allow=lambda _: False).wire
    wire += converse(
        tmp_path,
        [
            {
                "assistant": {
                    "thinking": "hmm",
                    "text": "cut",
                    "stopReason": "length",
                    "deltas": 2,
                }
            }
        ],
        resumes=[[{"assistant": {"text": "", "stopReason": "error", "errorMessage": "x"}}]],
        steers=("again",),
    ).wire
    wire += converse(
        tmp_path, TOOL_TURN, cancel_on=lambda o: isinstance(o, PermissionRequested)
    ).wire
    assert check_conversation(wire) == []
    methods = {m.get("method") for _, m in wire}
    assert {"initialize", "session/new", "session/prompt", "session/update"} <= methods
    assert {"session/request_permission", "session/cancel"} <= methods


def test_the_schema_check_does_check() -> None:
    require_schema()
    bad = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "max_output"}}
    prompt = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/prompt",
        "params": {"sessionId": "s", "prompt": []},
    }
    assert check_conversation([("out", prompt), ("in", bad)]) != []
