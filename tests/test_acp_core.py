"""The ACP client core: real sessions replayed through it, and hostile input.

The recorded sessions (tests/data/real/acp) are replayed from the agent's
side; the core must send what the recording client sent (same methods, same
ids, same answers) and report the stop reasons, text and tools a user of
the wrapper would expect of each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.acp_replay import CAPTURES, replay, shape
from wrapper.core.events import (
    AgentWarning,
    SessionStarted,
    TextDelta,
    ToolEnded,
    ToolStarted,
    UnparsedLine,
    Usage,
)
from wrapper.core.limits import MAX_TOOLS_PER_TURN, MAX_WAITING_PERMISSIONS
from wrapper.dialects.acp import client as acp_client
from wrapper.dialects.acp import jsonrpc
from wrapper.dialects.acp.actions import (
    AcpOptions,
    CloseInput,
    Failed,
    Output,
    PermissionRequested,
    Send,
    StoppedAnswering,
    TurnEnded,
)
from wrapper.dialects.acp.client import AcpClient, Phase

# capture -> the canonical stop reason of each prompt turn (none: the agent
# was signalled before it answered), whether a tool ran and how it ended
# (None: no tool reported; "open": started, never ended).
EXPECTED: dict[str, tuple[list[str], bool | str | None]] = {
    "gemini-0.61.0/plain": (["stop"], None),
    "gemini-0.61.0/tool_allow": (["stop"], False),
    "gemini-0.61.0/yolo_tool": (["stop"], False),
    "gemini-0.61.0/tool_reject": (["stop"], True),
    "gemini-0.61.0/second_prompt": (["stop", "stop"], None),
    "gemini-0.61.0/length": (["stop"], None),
    "gemini-0.61.0/overflow": (["length"], None),
    "gemini-0.61.0/auth": (["error"], None),
    "gemini-0.61.0/overload": (["stop"], None),
    "gemini-0.61.0/cancel_tool": (["aborted"], False),
    "gemini-0.61.0/cancel_permission": (["aborted"], True),
    "gemini-0.61.0/cancel_then_prompt": (["aborted", "stop"], False),
    "gemini-0.61.0/sigterm": ([], "open"),
    "gemini-0.61.0/sigterm_relaunch": ([], "open"),
    "gemini-0.61.0/sigterm_leader": ([], "open"),
    "gemini-0.61.0/sigterm_leader_relaunch": (["stop"], False),
    "opencode-1.18.33/plain": (["stop"], None),
    "opencode-1.18.33/tool_allow": (["stop"], False),
    "opencode-1.18.33/ask_tool_allow": (["stop"], False),
    "opencode-1.18.33/ask_tool_reject": (["stop"], True),
    "opencode-1.18.33/second_prompt": (["stop", "stop"], None),
    "opencode-1.18.33/length": (["stop"], None),
    "opencode-1.18.33/auth": (["error"], None),
    "opencode-1.18.33/ask_cancel_tool": (["aborted"], False),
    "opencode-1.18.33/ask_cancel_permission": (["aborted"], True),
    "opencode-1.18.33/ask_cancel_then_prompt": (["aborted", "stop"], False),
    "opencode-1.18.33/ask_sigterm": ([], "open"),
    "claude-code-acp-0.16.2/plain": (["stop"], None),
    "claude-code-acp-0.16.2/exit_wait_90s": (["stop"], None),
    "claude-code-acp-0.16.2/tool_allow": (["stop"], False),
    "claude-code-acp-0.16.2/tool_reject": (["stop"], True),
    "claude-code-acp-0.16.2/second_prompt": (["stop", "stop"], None),
    "claude-code-acp-0.16.2/length": (["error"], None),
    "claude-code-acp-0.16.2/auth": (["error"], None),
    "claude-code-acp-0.16.2/cancel_tool": (["aborted"], "open"),
    "claude-code-acp-0.16.2/cancel_permission": (["aborted"], True),
    "claude-code-acp-0.16.2/cancel_then_prompt": (["aborted", "stop"], "open"),
    "claude-code-acp-0.16.2/sigterm": ([], "open"),
    "codex-acp-0.16.0/plain": (["stop"], None),
    "codex-acp-0.16.0/exit_wait_90s": (["stop"], None),
    "codex-acp-0.16.0/tool_allow": (["stop"], None),
    "codex-acp-0.16.0/tool_reject": (["stop"], None),
    "codex-acp-0.16.0/second_prompt": (["stop", "stop"], None),
    "codex-acp-0.16.0/auth": (["error"], None),
    "codex-acp-0.16.0/ask_tool_allow": (["stop"], False),
    "codex-acp-0.16.0/ask_tool_reject": (["aborted"], True),
    "codex-acp-0.16.0/ask_length": (["error"], None),
    "codex-acp-0.16.0/ask_cancel_tool": (["aborted"], "open"),
    "codex-acp-0.16.0/ask_cancel_permission": (["aborted"], True),
    "codex-acp-0.16.0/ask_cancel_then_prompt": (["aborted", "stop"], "open"),
    "codex-acp-0.16.0/ask_sigterm": ([], "open"),
    "qwen-0.24.4/plain": (["stop"], None),
    "qwen-0.24.4/tool_allow": (["stop"], False),
    "qwen-0.24.4/tool_reject": (["stop"], True),
    "qwen-0.24.4/second_prompt": (["stop", "stop"], None),
    # Qwen Code asks the model to go on after an output-token limit, then ends the turn.
    "qwen-0.24.4/length": (["stop"], None),
    "qwen-0.24.4/auth": (["error"], None),
    "qwen-0.24.4/cancel_tool": (["aborted"], True),
    # Qwen Code answers the pending prompt "cancelled" when it gets SIGTERM.
    "qwen-0.24.4/sigterm": (["aborted"], True),
    "kilo-7.7.9/plain": (["stop"], None),
    "kilo-7.7.9/ask_tool_allow": (["stop"], False),
    "kilo-7.7.9/ask_tool_reject": (["stop"], True),
    "kilo-7.7.9/second_prompt": (["stop", "stop"], None),
    "kilo-7.7.9/length": (["stop"], None),
    "kilo-7.7.9/auth": (["error"], None),
    "kilo-7.7.9/ask_cancel_tool": (["aborted"], False),
    "kilo-7.7.9/ask_sigterm": ([], "open"),
}


def test_every_capture_has_an_expectation() -> None:
    found = {f"{p.parent.name}/{p.stem}" for p in CAPTURES.glob("*/*.jsonl")}
    assert found - {n for n in found if n.endswith("/bad_input")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replayed_session(name: str) -> None:
    stops, tool = EXPECTED[name]
    result = replay(CAPTURES / f"{name}.jsonl")
    # The core sent what the recording client sent, in the same order.
    assert [shape(m) for m in result.sent] == [shape(m) for m in result.recorded]
    assert [t.message.stop_reason for t in result.turns] == stops
    assert not [e for e in result.events if isinstance(e, AgentWarning | UnparsedLine)]
    sessions = [e for e in result.events if isinstance(e, SessionStarted)]
    assert len(sessions) == 1
    assert sessions[0].session_id == result.client.session_id
    started = [e for e in result.events if isinstance(e, ToolStarted)]
    ended = [e for e in result.events if isinstance(e, ToolEnded)]
    if tool is None:
        assert not started
        assert not ended
    else:
        assert started
        assert {e.tool for e in started} == {"execute"}
        if tool == "open":
            assert not ended
        else:
            assert [e.is_error for e in ended][:1] == [tool]
    # Each turn's message carries the text streamed during it: all of it, or
    # its last message's where the agent names the messages (opencode).
    deltas = "".join(e.text for e in result.events if isinstance(e, TextDelta))
    if len(stops) == result.client.turns:
        assert result.client.phase is Phase.IDLE
        texts = [t.message.text for t in result.turns]
        if b'"messageId"' in (CAPTURES / f"{name}.jsonl").read_bytes():
            assert all(text in deltas for text in texts)
            assert deltas.endswith(texts[-1])
        else:
            assert "".join(texts) == deltas
    else:
        assert result.client.phase is Phase.PROMPTING


def test_plain_answer_text_usage_and_model() -> None:
    result = replay(CAPTURES / "gemini-0.61.0/plain.jsonl")
    (turn,) = result.turns
    assert turn.message.text == "PLAIN-OK"
    assert turn.message.raw_stop_reason == "end_turn"
    assert turn.message.usage == Usage(input=20, output=10)
    assert turn.message.model == "gemini-2.5-flash"


def test_usage_from_the_prompt_response() -> None:
    (turn,) = replay(CAPTURES / "opencode-1.18.33/plain.jsonl").turns
    assert turn.message.usage == Usage(input=20, output=10, total_tokens=30)


def test_overflow_is_length_with_the_raw_reason_kept() -> None:
    (turn,) = replay(CAPTURES / "gemini-0.61.0/overflow.jsonl").turns
    assert (turn.message.stop_reason, turn.message.raw_stop_reason) == ("length", "max_tokens")


def test_error_response_ends_the_turn_with_its_message() -> None:
    (turn,) = replay(CAPTURES / "codex-acp-0.16.0/ask_length.jsonl").turns
    assert turn.message.stop_reason == "error"
    assert turn.message.error_message is not None
    assert "max_output_tokens" in turn.message.error_message
    (gemini,) = replay(CAPTURES / "gemini-0.61.0/auth.jsonl").turns
    assert gemini.message.api_status == 401
    assert gemini.message.raw_stop_reason == "error 401"


def test_tool_named_by_kind_with_title_and_input() -> None:
    result = replay(CAPTURES / "claude-code-acp-0.16.2/tool_allow.jsonl")
    asked = [o for o in result.outputs if isinstance(o, PermissionRequested)]
    assert len(asked) == 1
    assert asked[0].tool.name == "execute"
    assert asked[0].tool.title == "`printf tool-ok > tool-out.txt`"
    assert asked[0].tool.input == {"command": "printf tool-ok > tool-out.txt"}
    # One tool call for the two tool_call messages of the same id.
    assert len([e for e in result.events if isinstance(e, ToolStarted)]) == 1
    (turn,) = result.turns
    assert [c.name for c in turn.message.tool_calls] == ["execute"]


def test_refused_tool_ends_with_the_reason() -> None:
    # Gemini never reports a refused call: the refusal itself ends it.
    result = replay(CAPTURES / "gemini-0.61.0/tool_reject.jsonl")
    (ended,) = [e for e in result.events if isinstance(e, ToolEnded)]
    assert ended.is_error
    assert ended.result == "refused"


# --- hostile and edge input -------------------------------------------------


def _line(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message)


def _client(**options: Any) -> AcpClient:
    return AcpClient(AcpOptions(task="do it", cwd="/w", **options))


def _sent(outputs: list[Output]) -> list[dict[str, Any]]:
    return [o.message for o in outputs if isinstance(o, Send)]


INIT_OK = {"protocolVersion": 1, "agentInfo": {"name": "a", "version": "1"}, "authMethods": []}


def _in_session(client: AcpClient) -> None:
    client.start(0.0)
    client.feed(_line(jsonrpc.result(1, INIT_OK)), 1.0)
    client.feed(_line(jsonrpc.result(2, {"sessionId": "s"})), 2.0)
    assert client.phase is Phase.PROMPTING


def test_handshake_messages() -> None:
    client = _client()
    (init,) = _sent(client.start(0.0))
    assert init["method"] == "initialize"
    assert init["id"] == 1
    assert init["params"]["protocolVersion"] == 1
    assert init["params"]["clientCapabilities"]["terminal"] is False
    (new,) = _sent(client.feed(_line(jsonrpc.result(1, INIT_OK)), 1.0))
    assert new["method"] == "session/new"
    assert new["params"] == {"cwd": "/w", "mcpServers": []}
    out = client.feed(_line(jsonrpc.result(2, {"sessionId": "s"})), 2.0)
    (prompt,) = _sent(out)
    assert prompt["method"] == "session/prompt"
    assert prompt["params"] == {"sessionId": "s", "prompt": [{"type": "text", "text": "do it"}]}


def test_non_json_line_is_an_event_and_the_session_goes_on() -> None:
    client = _client()
    _in_session(client)
    out = client.feed(b"this is not json", 3.0)
    assert [type(o) for o in out] == [UnparsedLine]
    out = client.feed(_line(jsonrpc.result(3, {"stopReason": "end_turn"})), 4.0)
    assert [o.message.stop_reason for o in out if isinstance(o, TurnEnded)] == ["stop"]


def test_response_to_unknown_id_is_a_warning() -> None:
    client = _client()
    _in_session(client)
    for stray in (77, "3", 3.5, 0):
        (warning,) = client.feed(_line({"jsonrpc": "2.0", "id": stray, "result": {}}), 3.0)
        assert isinstance(warning, AgentWarning)
        assert warning.code == "acp_unknown_response"
    assert client.phase is Phase.PROMPTING


def test_idless_parse_error_from_the_agent_is_a_warning() -> None:
    client = _client()
    _in_session(client)
    error = {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}
    (warning,) = client.feed(_line(error), 3.0)
    assert isinstance(warning, AgentWarning)
    assert "Parse error" in warning.message


def test_response_before_any_request() -> None:
    client = _client()
    (warning,) = client.feed(_line(jsonrpc.result(1, INIT_OK)), 0.0)
    assert isinstance(warning, AgentWarning)
    assert warning.code == "acp_unknown_response"
    assert client.phase is Phase.NEW


def test_updates_before_initialize_returns_are_dropped() -> None:
    client = _client()
    client.start(0.0)
    update = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "x"},
            },
        },
    }
    (warning,) = client.feed(_line(update), 0.5)
    assert isinstance(warning, AgentWarning)
    assert warning.code == "acp_early_message"
    client.feed(_line(jsonrpc.result(1, INIT_OK)), 1.0)
    client.feed(_line(jsonrpc.result(2, {"sessionId": "s"})), 2.0)
    out = client.feed(_line(jsonrpc.result(3, {"stopReason": "end_turn"})), 3.0)
    (turn,) = [o for o in out if isinstance(o, TurnEnded)]
    assert turn.message.text == ""


def test_agent_that_never_answers_initialize_fails_at_its_deadline() -> None:
    client = _client(initialize_timeout=30.0)
    client.start(100.0)
    assert client.next_deadline() == 130.0
    assert client.tick(129.9) == []
    failed, closing = client.tick(130.0)
    assert closing == CloseInput()
    assert isinstance(failed, Failed)
    assert "initialize" in failed.message
    assert client.phase is Phase.FAILED
    assert client.next_deadline() is None


def test_prompt_turn_has_no_deadline() -> None:
    client = _client()
    _in_session(client)
    assert client.next_deadline() is None
    assert client.tick(10.0**9) == []


def test_other_protocol_version_fails() -> None:
    client = _client()
    client.start(0.0)
    failed, closing = client.feed(_line(jsonrpc.result(1, {**INIT_OK, "protocolVersion": 2})), 1.0)
    assert closing == CloseInput()
    assert isinstance(failed, Failed)
    assert "version 2" in failed.message


def test_authentication_only_when_required_and_a_method_is_given() -> None:
    required = {"code": jsonrpc.AUTH_REQUIRED, "message": "Authentication required"}
    client = _client()
    client.start(0.0)
    client.feed(
        _line(jsonrpc.result(1, {**INIT_OK, "authMethods": [{"id": "key", "name": "Key"}]})), 1.0
    )
    failed, closing = client.feed(_line({"jsonrpc": "2.0", "id": 2, "error": required}), 2.0)
    assert closing == CloseInput()
    assert isinstance(failed, Failed)
    assert "key" in failed.message

    client = _client(auth_method="key")
    client.start(0.0)
    client.feed(_line(jsonrpc.result(1, INIT_OK)), 1.0)
    (auth,) = _sent(client.feed(_line({"jsonrpc": "2.0", "id": 2, "error": required}), 2.0))
    assert auth["method"] == "authenticate"
    assert auth["params"] == {"methodId": "key"}
    assert client.next_deadline() == 2.0 + 30.0
    (new,) = _sent(client.feed(_line(jsonrpc.result(3, {})), 3.0))
    assert new["method"] == "session/new"
    # A second "authentication required" does not loop.
    failed, closing = client.feed(_line({"jsonrpc": "2.0", "id": 4, "error": required}), 4.0)
    assert closing == CloseInput()
    assert isinstance(failed, Failed)


def test_agent_requests_other_than_permission_are_refused() -> None:
    client = _client()
    _in_session(client)
    request = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "fs/read_text_file",
        "params": {"sessionId": "s", "path": "/x"},
    }
    (reply,) = _sent(client.feed(_line(request), 3.0))
    assert reply["id"] == 0
    assert reply["error"]["code"] == jsonrpc.METHOD_NOT_FOUND


def _permission(request_id: Any, options: list[tuple[str, str]]) -> bytes:
    return _line(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "session/request_permission",
            "params": {
                "sessionId": "s",
                "toolCall": {
                    "toolCallId": "t1",
                    "kind": "execute",
                    "title": "rm -rf /",
                    "status": "pending",
                },
                "options": [{"optionId": o, "name": o, "kind": k} for o, k in options],
            },
        }
    )


OPTIONS = [("always", "allow_always"), ("once", "allow_once"), ("no", "reject_once")]


@pytest.mark.parametrize("request_id", [0, "uuid-1", 7])
def test_permission_answer_echoes_the_id(request_id: Any) -> None:
    client = _client()
    _in_session(client)
    out = client.feed(_permission(request_id, OPTIONS), 3.0)
    (asked,) = [o for o in out if isinstance(o, PermissionRequested)]
    assert asked.tool.name == "execute"
    assert asked.tool.input == {}
    assert [e.tool for e in out if isinstance(e, ToolStarted)] == ["execute"]
    (reply,) = _sent(client.decide_permission(request_id, allow=True))
    assert reply == {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"outcome": {"outcome": "selected", "optionId": "once"}},
    }
    # Answered once only.
    assert client.decide_permission(request_id, allow=True) == []


def test_denied_permission_picks_a_reject_option_and_ends_the_tool() -> None:
    client = _client()
    _in_session(client)
    client.feed(_permission(0, OPTIONS), 3.0)
    out = client.decide_permission(0, allow=False, reason="not that")
    assert _sent(out)[0]["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}
    (ended,) = [e for e in out if isinstance(e, ToolEnded)]
    assert ended.is_error
    assert ended.result == "not that"


def test_denied_without_a_reject_option_is_cancelled_with_a_warning() -> None:
    client = _client()
    _in_session(client)
    client.feed(_permission(0, [("once", "allow_once")]), 3.0)
    out = client.decide_permission(0, allow=False)
    assert _sent(out)[0]["result"]["outcome"] == {"outcome": "cancelled"}
    assert any(isinstance(o, AgentWarning) for o in out)


def test_cancel_answers_open_permission_requests() -> None:
    client = _client()
    _in_session(client)
    client.feed(_permission("p", OPTIONS), 3.0)
    sent = _sent(client.cancel())
    assert sent[0] == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
    assert sent[1] == {"jsonrpc": "2.0", "id": "p", "result": {"outcome": {"outcome": "cancelled"}}}
    assert client.decide_permission("p", allow=True) == []
    out = client.feed(_line(jsonrpc.result(3, {"stopReason": "cancelled"})), 4.0)
    (turn,) = [o for o in out if isinstance(o, TurnEnded)]
    assert turn.message.stop_reason == "aborted"
    # Nothing to cancel between turns.
    assert client.cancel() == []


def test_steer_is_the_next_prompt_on_the_same_session() -> None:
    client = _client()
    _in_session(client)
    assert client.prompt("too early") == []
    client.feed(_line(jsonrpc.result(3, {"stopReason": "end_turn"})), 4.0)
    (prompt,) = _sent(client.prompt("keep going"))
    assert prompt["id"] == 4
    assert prompt["params"]["sessionId"] == "s"
    assert prompt["params"]["prompt"] == [{"type": "text", "text": "keep going"}]
    assert client.turns == 2
    out = client.feed(_line(jsonrpc.result(4, {"stopReason": "max_turn_requests"})), 5.0)
    (turn,) = [o for o in out if isinstance(o, TurnEnded)]
    assert turn.message.stop_reason == "length"
    assert client.close() == [CloseInput()]
    assert client.close() == []


def test_unknown_stop_reason_is_kept_and_not_terminal() -> None:
    client = _client()
    _in_session(client)
    out = client.feed(_line(jsonrpc.result(3, {"stopReason": "paused"})), 4.0)
    (turn,) = [o for o in out if isinstance(o, TurnEnded)]
    assert turn.message.stop_reason == "paused"
    assert turn.message.raw_stop_reason == "paused"


def test_update_for_another_session_is_ignored() -> None:
    client = _client()
    _in_session(client)
    update = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "other",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "x"},
            },
        },
    }
    (warning,) = client.feed(_line(update), 3.0)
    assert isinstance(warning, AgentWarning)
    assert warning.code == "acp_unknown_session"


@pytest.mark.parametrize(
    "line",
    [
        b"[1, 2]",
        b'{"jsonrpc": "2.0", "id": true, "method": "x"}',
        b'{"jsonrpc": "2.0", "id": 3, "error": "boom"}',
        b'{"jsonrpc": "2.0"}',
        b'{"jsonrpc": "2.0", "method": 5}',
    ],
)
def test_malformed_messages_never_raise(line: bytes) -> None:
    client = _client()
    _in_session(client)
    out = client.feed(line, 3.0)
    assert len(out) == 1
    assert isinstance(out[0], AgentWarning | UnparsedLine)
    assert client.phase is Phase.PROMPTING


def test_bad_input_capture_from_codex() -> None:
    # codex-acp answered a non-JSON line with an error that has no id member.
    rows = [
        orjson.loads(r)
        for r in Path(CAPTURES / "codex-acp-0.16.0/bad_input.jsonl").read_bytes().splitlines()
    ]
    (idless,) = [
        r["msg"] for r in rows if r["dir"] == "in" and "id" not in r["msg"] and "error" in r["msg"]
    ]
    client = _client()
    _in_session(client)
    (warning,) = client.feed(_line(idless), 3.0)
    assert isinstance(warning, AgentWarning)
    assert warning.code == "acp_error"


def _update(update: dict[str, Any], session: str = "s") -> bytes:
    return _line(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session, "update": update},
        }
    )


@pytest.mark.parametrize("closed", [True, False])
def test_a_tool_update_outside_a_turn_starts_no_tool(closed: bool) -> None:
    # After the turn's answer (and the session's close), a stray tool report
    # must not look like new work: it would undo the run's end.
    client = _client()
    _in_session(client)
    client.feed(_update({"sessionUpdate": "agent_message_chunk", "content": {"text": "Done."}}), 3)
    client.feed(_line(jsonrpc.result(3, {"stopReason": "end_turn"})), 4.0)
    if closed:
        client.close()
    stray = {"sessionUpdate": "tool_call", "toolCallId": "late", "kind": "execute", "title": "x"}
    out = client.feed(_update(stray), 5.0)
    assert not [o for o in out if isinstance(o, ToolStarted | ToolEnded)]
    (warning,) = out
    assert isinstance(warning, AgentWarning)
    assert warning.code == "acp_update_outside_turn"


def test_the_turns_text_is_its_last_messages_when_chunks_name_their_message() -> None:
    # An agent that asks the model again (after max_tokens, say) streams a
    # new message: only the last one is the answer.
    client = _client()
    _in_session(client)
    for message_id, text in (
        ("m1", "Partial ans"),
        ("m1", "wer..."),
        ("m2", "Full "),
        ("m2", "answer."),
    ):
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        client.feed(_update({**chunk, "messageId": message_id}), 3.0)
    out = client.feed(_line(jsonrpc.result(3, {"stopReason": "end_turn"})), 4.0)
    (turn,) = [o for o in out if isinstance(o, TurnEnded)]
    assert turn.message.text == "Full answer."


def test_without_message_ids_the_turns_text_is_all_of_it() -> None:
    client = _client()
    _in_session(client)
    for text in ("One. ", "Two."):
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        client.feed(_update(chunk), 3.0)
    out = client.feed(_line(jsonrpc.result(3, {"stopReason": "end_turn"})), 4.0)
    (turn,) = [o for o in out if isinstance(o, TurnEnded)]
    assert turn.message.text == "One. Two."


def test_authentication_required_with_no_method_listed_asks_for_the_agents_login() -> None:
    said = "Authentication required: " + "x" * 2000
    client = _client()
    client.start(0.0)
    client.feed(_line(jsonrpc.result(1, INIT_OK)), 1.0)
    error = {"code": jsonrpc.AUTH_REQUIRED, "message": said}
    failed, _ = client.feed(_line({"jsonrpc": "2.0", "id": 2, "error": error}), 2.0)
    assert isinstance(failed, Failed)
    assert "agent's own command" in failed.message
    assert "name the one to use" not in failed.message
    # Its words are quoted, within bounds.
    assert "Authentication required: xxx" in failed.message
    assert len(failed.message) < 800


def test_an_agent_that_does_not_read_gets_no_endless_queue_of_answers() -> None:
    client = _client()
    _in_session(client)
    for _ in range(3):  # initialize, session/new and the prompt went out
        client.written()
    out: list[Output] = []
    for n in range(5000):
        request = {"jsonrpc": "2.0", "id": n, "method": "fs/read_text_file", "params": {}}
        out += client.feed(_line(request), 3.0)
    answers = _sent(out)
    assert len(answers) == acp_client.MAX_UNWRITTEN_MESSAGES
    (warning,) = [o for o in out if isinstance(o, AgentWarning)]
    assert warning.code == "acp_replies_dropped"
    # The wrapper's own messages still go out; answers resume once it reads.
    assert _sent(client.cancel())
    for _ in range(len(answers) + 1):
        client.written()
    request = {"jsonrpc": "2.0", "id": "again", "method": "fs/read_text_file", "params": {}}
    (answer,) = _sent(client.feed(_line(request), 4.0))
    assert answer["id"] == "again"


def test_the_output_ending_mid_turn_means_the_agent_stopped_answering() -> None:
    client = _client()
    _in_session(client)
    (stopped,) = client.output_ended()
    assert isinstance(stopped, StoppedAnswering)
    assert "session/prompt" in stopped.message
    # Between turns (or once closed) nothing is owed, until the next prompt.
    client.feed(_line(jsonrpc.result(3, {"stopReason": "end_turn"})), 4.0)
    assert client.output_ended() == []
    _, stopped = client.prompt("more")
    assert isinstance(stopped, StoppedAnswering)
    client.close()
    assert client.output_ended() == []


def test_text_after_the_turns_answer_is_no_part_of_the_next_turn() -> None:
    client = _client()
    _in_session(client)
    said = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Done."}}
    client.feed(_update(said), 3.0)
    client.feed(_line(jsonrpc.result(3, {"stopReason": "end_turn"})), 4.0)
    late = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Also"}}
    (warning,) = client.feed(_update(late), 4.1)
    assert isinstance(warning, AgentWarning)
    assert warning.code == "acp_text_outside_turn"
    assert "'Also'" in warning.message
    # One warning between two turns, however many chunks.
    assert client.feed(_update(late), 4.2) == []
    client.prompt("go on")
    client.feed(_update(said), 5.0)
    out = client.feed(_line(jsonrpc.result(4, {"stopReason": "end_turn"})), 6.0)
    (turn,) = [o for o in out if isinstance(o, TurnEnded)]
    assert turn.message.text == "Done."


def _asking(n: int) -> bytes:
    """A permission request about tool ``t<n>``, id ``p<n>``."""
    call = {"toolCallId": f"t{n}", "kind": "execute", "title": f"echo {n}", "status": "pending"}
    options = [{"optionId": o, "name": o, "kind": k} for o, k in OPTIONS]
    params = {"sessionId": "s", "toolCall": call, "options": options}
    request = {"jsonrpc": "2.0", "id": f"p{n}", "method": "session/request_permission"}
    return _line({**request, "params": params})


def test_a_flood_of_permission_requests_waits_bounded_and_the_rest_is_denied_at_once() -> None:
    client = _client()
    _in_session(client)
    waiting = MAX_WAITING_PERMISSIONS
    out: list[Output] = []
    for n in range(30_000):
        out += client.feed(_asking(n), 3.0)
    asked = [o for o in out if isinstance(o, PermissionRequested)]
    assert len(asked) == waiting
    # Every request past them was answered at once, with a reject option.
    answers = _sent(out)
    assert len(answers) == 30_000 - waiting
    assert {a["result"]["outcome"]["optionId"] for a in answers} == {"no"}
    assert answers[0]["id"] == f"p{waiting}"
    warnings = [o for o in out if isinstance(o, AgentWarning)]
    assert [w.code for w in warnings] == ["acp_permissions_denied", "acp_tools_untracked"]
    # The turn keeps a record of a bounded number of tools.
    started = [o for o in out if isinstance(o, ToolStarted)]
    assert len(started) == MAX_TOOLS_PER_TURN
    ended = [o for o in out if isinstance(o, ToolEnded)]
    assert all(e.is_error and "denied undecided" in (e.result or "") for e in ended)
    # The next turn starts with none waiting: a request waits for its decision again.
    client.decide_permission("p0", allow=True)
    client.feed(_line(jsonrpc.result(3, {"stopReason": "end_turn"})), 4.0)
    client.prompt("again")
    (again,) = [o for o in client.feed(_asking(0), 5.0) if isinstance(o, PermissionRequested)]
    assert again.request_id == "p0"
