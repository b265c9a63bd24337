"""What real MCP client CLIs gave their model as our tools' results
(captured by the conformance tier, tests/data/real/mcp/), read back as the
tier's mock model reads them: every client's wrapping still yields the
answer's fields, so the tier's parent scenarios can follow a conversation;
and the mock finds the tool calls of a conversation in each wire format.
No real CLI is needed here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.real import mock_server as m

CAPTURES = sorted((Path(__file__).parent / "data" / "real" / "mcp").glob("*-delegate.json"))


def result_text(block: dict[str, Any]) -> str:
    """A result block's text, whichever client wrote it."""
    if "response" in block:  # Gemini CLI's functionResponse
        response = block["response"]
        return m._text_of(response.get("output", response))
    return m._text_of(block.get("content", block.get("output")))


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.stem for c in CAPTURES])
def test_each_clients_result_still_holds_the_answer(capture: Path) -> None:
    entries = json.loads(capture.read_text())
    by_tool = {entry["tool"]: result_text(entry["result"]) for entry in entries}
    assert set(by_tool) == {"status", "start", "wait", "result"}
    assert "no run 'no-such-run'" in by_tool["status"]
    assert (m.find_answer(by_tool["start"], "run_id") or {}).get("run_id") == "RUN_ID"
    ended = (m.find_answer(by_tool["wait"], "ended") or {}).get("ended")
    assert [run["outcome"] for run in ended or []] == ["ok"]
    final = m.find_answer(by_tool["result"], "final_text") or {}
    assert final.get("final_text") == m.PLAIN_ANSWER


def test_the_captures_cover_four_clients() -> None:
    assert {c.name.split("-")[0] for c in CAPTURES} == {"claude", "codex", "gemini", "opencode"}


CONVERSATIONS = {
    "anthropic": {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "x_start", "input": {"a": 1}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "R"}],
                    }
                ],
            },
        ]
    },
    "responses": {
        "input": [
            {
                "type": "function_call",
                "namespace": "ns",
                "name": "start",
                "arguments": '{"a": 1}',
                "call_id": "c1",
            },
            {"type": "function_call_output", "call_id": "c1", "output": "R"},
        ]
    },
    "chat": {
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "x_start", "arguments": '{"a": 1}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "R"},
        ]
    },
    "gemini": {
        "contents": [
            {"role": "model", "parts": [{"functionCall": {"name": "x_start", "args": {"a": 1}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "x_start", "response": {"output": "R"}}}],
            },
        ]
    },
}


@pytest.mark.parametrize("wire", list(CONVERSATIONS))
def test_the_mock_finds_each_call_and_its_result(wire: str) -> None:
    (call,) = m.conversation_calls(CONVERSATIONS[wire])
    assert call.name == ("ns.start" if wire == "responses" else "x_start")
    assert (call.args, call.result) == ({"a": 1}, "R")
