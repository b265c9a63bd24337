"""Steers and aborts from outside an ACP run at the moments the session is
not yet, or no longer, taking prompts: while the agent starts (``initialize``
and ``session/new`` take seconds on some agents), before its first answer,
and an abort while its turn runs. Against ``tests/acp_scripted_agent.py``,
asserted as a user sees them (the receipt, result.json, the protocol log)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import HANG_LIMIT, read_events, read_result, wait_until

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "tests" / "acp_scripted_agent.py"


def chunk(text: str) -> dict[str, Any]:
    content = {"type": "text", "text": text}
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"update": {"sessionUpdate": "agent_message_chunk", "content": content}},
    }


class AcpRun:
    """The wrapper running the scripted agent in the background."""

    def __init__(self, tmp_path: Path, script: dict[str, Any], *options: str) -> None:
        path = tmp_path / "script.json"
        path.write_text(json.dumps(script))
        self.run_dir = tmp_path / "run"
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "wrapper", "run", "--output", "quiet"),
                *("--run-dir", str(self.run_dir), "--dialect", "acp", "--task", "Build it"),
                *options,
                *("--", sys.executable, str(AGENT), str(path)),
            ],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert wait_until(lambda: self.status().get("control") is not None), self.status()

    def status(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads((self.run_dir / "status.json").read_text())
        except (OSError, ValueError):
            return {}
        return data

    def sent(self, method: str) -> list[dict[str, Any]]:
        """The messages of ``method`` the wrapper sent the agent so far."""
        try:
            lines = (self.run_dir / "protocol.jsonl").read_bytes().splitlines()
        except OSError:
            return []
        records = [orjson.loads(line) for line in lines if line.strip()]
        return [r["msg"] for r in records if r["dir"] == "out" and r["msg"].get("method") == method]

    def came_in(self) -> list[dict[str, Any]]:
        lines = (self.run_dir / "protocol.jsonl").read_bytes().splitlines()
        records = [orjson.loads(line) for line in lines if line.strip()]
        return [r["msg"] for r in records if r["dir"] == "in"]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "wrapper", *args, str(self.run_dir), "--json"],
            capture_output=True,
            text=True,
            timeout=HANG_LIMIT,
            check=False,
        )

    def finish(self) -> tuple[int, dict[str, Any], list[dict[str, Any]], str]:
        _, stderr = self.proc.communicate(timeout=HANG_LIMIT)
        result = read_result(self.run_dir / "result.json")
        events = read_events(self.run_dir / "events.jsonl")
        return self.proc.returncode, result, events, stderr.decode(errors="replace")


def before(events: list[dict[str, Any]], first: str, then: str) -> bool:
    """Whether the first event of type ``first`` came before any of ``then``."""
    types = [e["type"] for e in events]
    return first in types and (then not in types or types.index(first) < types.index(then))


def codes(result: dict[str, Any]) -> list[str]:
    return [w["code"] for w in result["warnings"]]


def test_a_steer_while_the_agent_starts_goes_right_after_the_first_prompt(
    tmp_path: Path,
) -> None:
    # ``initialize`` takes 5 s (more than --kill-after): the steer comes
    # before any session exists.
    run = AcpRun(tmp_path, {"slowStart": 5, "turn": [chunk("Done.")]})
    steered = run.cli("steer", "--text", "Fix the parser first")
    receipt = json.loads(steered.stdout)
    assert steered.returncode == 0, (steered.stdout, steered.stderr)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 2)
    code, result, events, stderr = run.finish()
    assert before(events, "steer_requested", "session"), "the agent started first: no test"
    assert (code, result["outcome"]) == (0, "ok"), stderr
    assert result["error"] is None
    prompts = [p["params"]["prompt"][0]["text"] for p in run.sent("session/prompt")]
    assert prompts[0] == "Build it"
    assert "Fix the parser first" in prompts[1]
    assert not run.sent("session/cancel"), "there was no turn to cancel"
    assert not [e for e in events if e["type"] == "signal_sent"], "the agent was signalled"
    assert len({a["pid"] for a in result["attempts"]}) == 1
    assert [s["outcome"] for s in result["externalSteers"]] == ["delivered"]


def test_a_steer_before_the_first_answer_waits_for_it(tmp_path: Path) -> None:
    answer = tmp_path / "answer-now"
    run = AcpRun(tmp_path, {"turn": [{"$untilFile": [str(answer), 30]}, chunk("Done.")]})
    assert wait_until(lambda: run.status().get("lastEventAt") is not None), run.status()
    # The steer waits for its delivery, which comes after the answer: the
    # turn is let answer once the run holds the steer.
    receipts: list[subprocess.CompletedProcess[str]] = []
    sender = threading.Thread(
        target=lambda: receipts.append(run.cli("steer", "--text", "Fix the parser first"))
    )
    sender.start()
    assert wait_until(lambda: bool(run.status().get("pendingSteers"))), run.status()
    answer.touch()
    sender.join(HANG_LIMIT)
    (steered,) = receipts
    assert steered.returncode == 0, (steered.stdout, steered.stderr)
    code, result, events, stderr = run.finish()
    assert before(events, "session", "steer_requested")
    assert before(events, "steer_requested", "assistant_message"), "answered first: no test"
    assert (code, result["outcome"]) == (0, "ok"), stderr
    # The first turn was let end: answered, not cancelled.
    assert not run.sent("session/cancel")
    assert [a["stopReason"] for a in result["attempts"]] == ["stop", "stop"]
    assert "turn_cancelled" not in codes(result)


def test_a_turn_cancelled_for_a_steer_records_no_warning(tmp_path: Path) -> None:
    tool = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "kind": "execute"}},
    }
    done = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "failed"}
        },
    }
    script = {"turns": [[tool, {"$untilCancel": 30}, done], [chunk("Done.")]]}
    run = AcpRun(tmp_path, script, "--steer-timeout", "0.5")
    assert wait_until(lambda: run.status().get("currentTool") is not None), run.status()
    steered = run.cli("steer", "--text", "Fix the parser first")
    assert steered.returncode == 0, (steered.stdout, steered.stderr)
    code, result, events, stderr = run.finish()
    assert (code, result["outcome"]) == (0, "ok"), stderr
    assert run.sent("session/cancel"), "the turn was not cancelled for the steer"
    assert result["attempts"][0]["stopReason"] == "aborted"
    # The steer's own events say why the turn ended; no warning is due.
    assert "turn_cancelled" not in codes(result)
    assert [e["how"] for e in events if e["type"] == "steer_delivered"] == ["live"]


def test_an_abort_gives_the_cancel_a_moment_before_the_signal(tmp_path: Path) -> None:
    run = AcpRun(tmp_path, {"turn": [chunk("Working"), {"$untilCancel": 30}]})
    assert wait_until(lambda: run.status().get("lastEventAt") is not None), run.status()
    started = time.monotonic()
    aborted = run.cli("abort", "--reason", "out of budget")
    assert aborted.returncode == 0, (aborted.stdout, aborted.stderr)
    code, result, _, stderr = run.finish()
    assert time.monotonic() - started < 20
    assert (code, result["outcome"]) == (143, "aborted"), stderr
    # The agent answered the cancel before anything ended it.
    answers = [m for m in run.came_in() if (m.get("result") or {}).get("stopReason")]
    assert [m["result"]["stopReason"] for m in answers] == ["cancelled"]
    assert result["attempts"][0]["stopReason"] == "aborted"
    assert not {"late_final_message", "agent_output_closed"} & set(codes(result)), codes(result)


TOOL = {
    "jsonrpc": "2.0",
    "method": "session/update",
    "params": {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "kind": "execute"}},
}


def test_a_steer_is_delivered_once_the_agent_takes_its_prompt(tmp_path: Path) -> None:
    # The steer's prompt is answered only after 2 s: until the agent's turn
    # begins, the steer is on its input, not delivered.
    script = {"turns": [[TOOL, {"$untilCancel": 30}], [{"$sleep": 2}, chunk("Done.")]]}
    run = AcpRun(tmp_path, script, "--steer-timeout", "0.5")
    assert wait_until(lambda: run.status().get("currentTool") is not None), run.status()
    steered = run.cli("steer", "--text", "Fix the parser first")
    receipt = json.loads(steered.stdout)
    assert steered.returncode == 0, (steered.stdout, steered.stderr)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 2)
    code, result, events, stderr = run.finish()
    assert (code, result["outcome"]) == (0, "ok"), stderr
    types = [e["type"] for e in events]
    sent, delivered = types.index("steer_sent"), types.index("steer_delivered")
    # Delivered with the turn's first update, not when the prompt was written.
    assert sent < delivered
    assert "text_delta" not in types[sent:delivered] or types.index("text_delta", sent) > delivered
    gap = _ts(events[delivered]) - _ts(events[sent])
    assert gap >= 1.5, f"delivered {gap:.2f} s after it was sent: before the agent took it"
    assert [s["outcome"] for s in result["externalSteers"]] == ["delivered"]


def test_a_steer_prompt_the_agent_refuses_is_refused_with_its_reason(tmp_path: Path) -> None:
    refusal = {"code": -32602, "message": "prompt rejected: unsupported content"}
    script = {"turns": [[TOOL, {"$untilCancel": 30}], [{"$refuse": refusal}]]}
    run = AcpRun(tmp_path, script, "--steer-timeout", "0.5")
    assert wait_until(lambda: run.status().get("currentTool") is not None), run.status()
    steered = run.cli("steer", "--text", "Fix the parser first")
    receipt = json.loads(steered.stdout)
    assert steered.returncode == 1, (steered.stdout, steered.stderr)
    assert receipt["state"] == "refused"
    assert "prompt rejected: unsupported content" in receipt["why"]
    _, result, events, stderr = run.finish()
    (record,) = result["externalSteers"]
    assert record["outcome"] == "refused", stderr
    assert "steer_delivered" not in [e["type"] for e in events]


def _ts(event: dict[str, Any]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()
