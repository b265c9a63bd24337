"""The trio side of an ACP session, against the fake agent speaking ACP.

A session as the supervisor will hold it: the agent started once, its
permission requests answered, a steer sent as the next prompt on the live
session, stdin closed at the end (the agent then exits by itself), and
protocol.jsonl replaying to the same turns.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import trio

from wrapper.core.events import Event, ToolEnded
from wrapper.core.framing import LineFramer
from wrapper.dialects.acp.actions import AcpOptions, Failed, Output, PermissionRequested, TurnEnded
from wrapper.dialects.acp.client import AcpClient
from wrapper.dialects.acp.protocol_log import replay
from wrapper.supervision.acp_session import AcpDriver

FAKE = Path(__file__).resolve().parent.parent / "fixtures" / "fake_agent"

#: Only to catch a hang.
HANG = 30.0


async def session(
    tmp_path: Path,
    scenario: dict[str, Any],
    *,
    steers: tuple[str, ...] = (),
    allow: bool = True,
    argv: list[str] | None = None,
    initialize_timeout: float = 30.0,
) -> tuple[list[Output], int, list[dict[str, Any]]]:
    """Outputs, the agent's exit status and protocol.jsonl's records."""
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"version": 1, **scenario}))
    command = argv or [sys.executable, str(FAKE), "--dialect", "acp", "--scenario", str(path)]
    log = bytearray()
    outputs: list[Output] = []
    left = list(steers)
    with trio.fail_after(HANG):
        proc = await trio.lowlevel.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        client = AcpClient(
            AcpOptions(task="do it", cwd=str(tmp_path), initialize_timeout=initialize_timeout)
        )

        def on_output(output: Output) -> None:
            outputs.append(output)
            if isinstance(output, PermissionRequested):
                driver.decide(output.request_id, allow, "not allowed here")
            elif isinstance(output, TurnEnded):
                if left:
                    driver.prompt(left.pop(0))
                else:
                    driver.close()
            elif isinstance(output, Failed):
                proc.kill()

        driver = AcpDriver(client, proc.stdin, on_output, log.extend)
        async with trio.open_nursery() as nursery:
            await nursery.start(driver.run)
            framer = LineFramer()
            while data := await proc.stdout.receive_some(65536):
                for frame in framer.feed(data):
                    assert isinstance(frame, bytes)
                    if frame.strip():
                        driver.feed(frame)
            code = await proc.wait()
    records = [orjson.loads(line) for line in bytes(log).splitlines()]
    return outputs, code, records


def turns(outputs: list[Output]) -> list[TurnEnded]:
    return [o for o in outputs if isinstance(o, TurnEnded)]


TOOL = {
    "steps": [
        {
            "assistant": {
                "text": "Running it.",
                "stopReason": "toolUse",
                "toolCalls": [{"name": "bash", "arguments": {"command": "make"}}],
            }
        },
        {"tool": {"name": "bash", "result": "built"}},
        {"assistant": {"text": "Built.", "stopReason": "stop"}},
    ],
    "resumes": [[{"assistant": {"text": "Tests pass.", "stopReason": "stop"}}]],
}


async def test_steer_on_the_live_session_then_close(tmp_path: Path) -> None:
    outputs, code, records = await session(tmp_path, TOOL, steers=("Now run the tests.",))
    assert [t.message.text for t in turns(outputs)] == ["Running it.Built.", "Tests pass."]
    assert [t.message.stop_reason for t in turns(outputs)] == ["stop", "stop"]
    ended = [o for o in outputs if isinstance(o, ToolEnded)]
    assert [(e.tool, e.is_error) for e in ended] == [("execute", False)]
    # The agent exited by itself once its stdin was closed.
    assert code == 0
    # protocol.jsonl has both directions and replays to the same turns.
    assert {r["dir"] for r in records} == {"wrapper", "in", "out"}
    assert records[0]["msg"]["event"] == "start"
    _, replayed = replay(records)
    assert [t.message for t in turns(replayed)] == [t.message for t in turns(outputs)]
    assert [e for e in replayed if isinstance(e, Event)] == [
        e for e in outputs if isinstance(e, Event)
    ]


async def test_denied_tool(tmp_path: Path) -> None:
    outputs, code, _ = await session(tmp_path, TOOL, allow=False)
    ended = [o for o in outputs if isinstance(o, ToolEnded)]
    assert [(e.is_error, e.result) for e in ended] == [(True, "not allowed here")]
    assert code == 0


async def test_agent_that_never_answers_initialize(tmp_path: Path) -> None:
    silent = [sys.executable, "-c", "import time; time.sleep(60)"]
    with trio.fail_after(HANG):
        outputs, _, records = await session(
            tmp_path, {"steps": []}, argv=silent, initialize_timeout=0.5
        )
    failed = [o for o in outputs if isinstance(o, Failed)]
    assert len(failed) == 1
    assert "initialize" in failed[0].message
    assert [r["msg"].get("method") for r in records if r["dir"] == "out"] == ["initialize"]
