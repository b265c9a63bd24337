"""The acp dialect as the rest of the wrapper sees it: the argv, the prompt
beside it, and the reading of a saved stdout.log (the agent's side alone)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from tests.acp_replay import CAPTURES as RECORDED
from tests.acp_replay import records, replay
from tests.dialect_support import line
from tests.dialect_table import ANSWER, FAILURE, LS, Agent, Argv, Samples
from tests.test_acp_core import EXPECTED
from wrapper.core.events import AssistantMessage, SessionStarted, ToolEnded, ToolStarted
from wrapper.core.hook_protocol import Decision, interpret_answer
from wrapper.core.settings import SettingsError
from wrapper.dialects import dialect_for_command, resolve_dialect
from wrapper.dialects.acp.dialect import AcpDialect
from wrapper.dialects.base import UsageError
from wrapper.files.settings_file import load_settings

SESSION = "0a5b2c1e-5b6f-4f0e-9a41-3a0d2f7c9e11"


def rpc(**fields: object) -> bytes:
    return line({"jsonrpc": "2.0", **fields})


def update(**fields: object) -> bytes:
    return rpc(method="session/update", params={"sessionId": SESSION, "update": fields})


NEW_SESSION = rpc(id=2, result={"sessionId": SESSION})


def chunk(text: str) -> bytes:
    return update(sessionUpdate="agent_message_chunk", content={"type": "text", "text": text})


ROW = Agent(
    name="acp",
    command=("gemini", "--acp"),
    aliases=("opencode", "cursor-agent", "qwen", "goose", "kimi", "copilot", "droid"),
    types=("session/update",),
    keys=("method", "params", "id", "result", "error"),
    samples=Samples(
        session=SESSION,
        answer=[NEW_SESSION, chunk(ANSWER), rpc(id=3, result={"stopReason": "end_turn"})],
        tool_call=[
            NEW_SESSION,
            update(
                sessionUpdate="tool_call",
                toolCallId="call-1",
                kind="execute",
                title="ls",
                status="pending",
                rawInput=LS,
            ),
            update(sessionUpdate="tool_call_update", toolCallId="call-1", status="completed"),
        ],
        tool="execute",
        tool_id="call-1",
        error=[NEW_SESSION, rpc(id=3, error={"code": -32603, "message": FAILURE})],
        cut_short=[NEW_SESSION, chunk("Do")],
        cut_short_text=None,
    ),
    # The task and a steer go over the protocol; the command is never changed.
    argv=Argv(task=(), dashed_task=(), resume=None, missing_session=None),
    noise=b"Failed to parse JSON message",
)


def stdout_log(name: str) -> list[bytes]:
    """What the agent of a recorded session wrote on its stdout."""
    lines = []
    for row in records(RECORDED / f"{name}.jsonl"):
        if row["dir"] == "in":
            msg = row["msg"]
            lines.append(msg["unparsed"].encode() if "unparsed" in msg else orjson.dumps(msg))
    return lines


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_stdout_log_alone_reads_like_the_live_session(name: str) -> None:
    dialect = AcpDialect()
    events = [event for line in stdout_log(name) for event in dialect.parse(line)]
    live = replay(RECORDED / f"{name}.jsonl")
    finals = [e for e in events if isinstance(e, AssistantMessage)]
    assert [(m.stop_reason, m.text) for m in finals] == [
        (t.message.stop_reason, t.message.text) for t in live.turns
    ]
    started = [e.tool_call_id for e in events if isinstance(e, ToolStarted)]
    live_started = [e.tool_call_id for e in live.events if isinstance(e, ToolStarted)]
    assert started == live_started
    # Only the tools the wrapper itself refused or cancelled end differently.
    ended = {e.tool_call_id for e in events if isinstance(e, ToolEnded)}
    assert ended <= {e.tool_call_id for e in live.events if isinstance(e, ToolEnded)}
    sessions = [e.session_id for e in events if isinstance(e, SessionStarted)]
    assert sessions == [live.client.session_id]


def test_launch_keeps_the_command_and_carries_the_task_beside_it(tmp_path: Path) -> None:
    command = ["gemini", "--acp", "-m", "x"]
    launch = AcpDialect().launch(command, "-v is broken", tmp_path)
    assert launch.argv == command
    assert launch.prompt == "-v is broken"
    # A steer is the next prompt on the live session: the same command, no new argv.
    steer = AcpDialect().resume(command, "Go on", tmp_path, "S-1")
    assert (steer.argv, steer.prompt) == (command, "Go on")


@pytest.mark.parametrize("name", ["acp", "auto"])
def test_no_task_is_a_usage_error(name: str) -> None:
    with pytest.raises(UsageError, match="acp dialect needs a task"):
        resolve_dialect(name, ["opencode", "acp"], has_task=False)


@pytest.mark.parametrize(
    "command",
    [
        ["gemini", "--acp"],
        ["npx", "@zed-industries/claude-code-acp@0.16.2"],
        ["env", "X=1", "gemini", "-m", "x", "--acp"],
        ["opencode", "acp"],
        ["claude-code-acp"],
        ["/opt/bin/codex-acp", "--verbose"],
    ],
)
def test_acp_commands_are_recognised(command: list[str]) -> None:
    assert dialect_for_command(command) is AcpDialect


@pytest.mark.parametrize("command", [["gemini", "-p", "hi"], ["opencode", "run", "acp"]])
def test_other_modes_stay_their_own_dialect(command: list[str]) -> None:
    assert dialect_for_command(command) is not AcpDialect


def test_recognises_json_rpc_messages() -> None:
    assert AcpDialect.recognises({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert not AcpDialect.recognises({"type": "init", "session_id": "s"})


def test_the_permissions_setting_and_claude_s_own_permissions_object(tmp_path: Path) -> None:

    ours = tmp_path / "ours.json"
    ours.write_text(json.dumps({"permissions": "deny"}))
    assert load_settings([str(ours)]).permissions == "deny"
    claude = tmp_path / "claude.json"
    claude.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]}}))
    loaded = load_settings([str(claude)])
    assert loaded.permissions is None
    assert any("'permissions' is not used" in note for note in loaded.notes)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"permissions": "ask"}))
    with pytest.raises(SettingsError, match="permissions: expected one of allow, deny"):
        load_settings([str(bad)])


def test_a_pretooluse_answer_s_permission_decision() -> None:

    deny = interpret_answer(
        {"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no"}}
    )
    assert (deny.decision, deny.permission, deny.reason) == (Decision.BLOCK, "deny", "no")
    ask = interpret_answer({"hookSpecificOutput": {"permissionDecision": "ask"}})
    assert (ask.decision, ask.permission) == (Decision.BLOCK, "ask")
    allow = interpret_answer(
        {"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"a": 1}}}
    )
    assert (allow.decision, allow.permission, allow.updated_input) == (
        Decision.ALLOW,
        "allow",
        {"a": 1},
    )
    plain = interpret_answer({"hookSpecificOutput": {"updatedInput": {"a": 2}}})
    assert (plain.decision, plain.permission, plain.updated_input) == (
        Decision.ALLOW,
        None,
        {"a": 2},
    )
