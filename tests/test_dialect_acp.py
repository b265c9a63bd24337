"""The acp dialect as the rest of the wrapper sees it: the argv, the prompt
beside it, and the reading of a saved stdout.log (the agent's side alone)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.acp_replay import CAPTURES, records, replay
from tests.test_acp_core import EXPECTED
from wrapper.dialects.acp import AcpDialect
from wrapper.dialects.base import UsageError
from wrapper.events import AssistantMessage, SessionStarted, ToolEnded, ToolStarted


def stdout_log(name: str) -> list[bytes]:
    """What the agent of a recorded session wrote on its stdout."""
    lines = []
    for row in records(CAPTURES / f"{name}.jsonl"):
        if row["dir"] == "in":
            msg = row["msg"]
            lines.append(msg["unparsed"].encode() if "unparsed" in msg else orjson.dumps(msg))
    return lines


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_stdout_log_alone_reads_like_the_live_session(name: str) -> None:
    dialect = AcpDialect()
    events = [event for line in stdout_log(name) for event in dialect.parse(line)]
    live = replay(CAPTURES / f"{name}.jsonl")
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
    resumed = AcpDialect().resume(command, "Go on", tmp_path, "S-1")
    assert (resumed.argv, resumed.prompt) == (command, "Go on")


def test_no_task_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="needs a task"):
        AcpDialect().launch(["opencode", "acp"], None, tmp_path)


def test_recognises_json_rpc_messages() -> None:
    assert AcpDialect.recognises({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert not AcpDialect.recognises({"type": "init", "session_id": "s"})
