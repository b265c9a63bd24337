"""A run can be followed while it goes on: its logs (``tail -f``) and where
it is (the first thing it says)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    agent_env,
    read_events,
    validate,
    wait_until,
    wrapper_argv,
    write_scenario,
)

pytestmark = pytest.mark.usefixtures("no_leaks")

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]
#: How long the slow tool runs: far longer than any bound below, so that
#: everything checked while it runs is checked before the run ends.
TOOL_SECONDS = 60
#: Generous: the logs are flushed within a second; a loaded machine (the
#: suite runs in parallel) may take longer to start the agent at all.
SEEN_WITHIN = 20.0


def slow_tool_run(tmp_path: Path) -> list[dict[str, Any]]:
    return [
        {"stderr": "fake: starting the build"},
        {
            "assistant": {
                "text": "Running the build.",
                "stopReason": "toolUse",
                "toolCalls": [{"name": "bash", "arguments": {"command": "make"}}],
            }
        },
        {"tool": {"name": "bash", "duration": TOOL_SECONDS, "result": "built"}},
        {"assistant": {"text": "Built.", "stopReason": "stop"}},
        *END,
    ]


def logged_events(path: Path) -> list[dict[str, Any]]:
    """The complete lines of events.jsonl as they stand (a line being written is left out)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def status_of(run_dir: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return data


def test_a_running_tool_is_in_the_logs_before_the_run_ends(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, slow_tool_run(tmp_path))
    run_dir = tmp_path / "run"
    argv = wrapper_argv(run_dir, scenario, options=["--output", "quiet"])
    events_log = run_dir / "events.jsonl"
    with subprocess.Popen(argv, env=agent_env(tmp_path), stdin=subprocess.DEVNULL) as proc:
        try:
            started = time.monotonic()
            assert wait_until(
                lambda: any(e["type"] == "tool_start" for e in logged_events(events_log)),
                timeout=SEEN_WITHIN,
            ), f"events.jsonl while the tool runs: {logged_events(events_log)}"
            seen_after = time.monotonic() - started
            assert proc.poll() is None, "the run is still going on"
            events = logged_events(events_log)
            for event in events:
                validate("event", event)
            types = [e["type"] for e in events]
            assert types[0] == "run_started"
            assert events[0]["runDir"] == str(run_dir)
            assert "spawned" in types
            assert "assistant_message" in types
            (tool,) = [e for e in events if e["type"] == "tool_start"]
            assert tool["tool"] == "bash"
            # The agent's own lines, byte for byte, up to the tool it runs.
            stdout = (run_dir / "stdout.log").read_bytes()
            assert b'"type":"tool_execution_start"' in stdout
            assert stdout.endswith(b"\n")
            assert (run_dir / "stderr.log").read_bytes() == b"fake: starting the build\n"
            assert any(
                e["type"] == "stderr_line" and e["text"] == "fake: starting the build"
                for e in events
            )
            # The tool started long before the bound ran out: the logs did not
            # wait for the run's end, nor for the tool's.
            assert seen_after < TOOL_SECONDS / 2
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(HANG_LIMIT) == 128 + signal.SIGTERM
    # Nothing was written twice or lost by the flushes along the way.
    final = read_events(events_log)
    assert [e["seq"] for e in final] == list(range(1, len(final) + 1))
    assert final[-1]["type"] == "result_written"
