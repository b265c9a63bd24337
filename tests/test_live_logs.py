"""A run can be followed while it goes on: its logs (``tail -f``), where it
is (the first thing it says) and its progress in status.json."""

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
from tests.test_external_steer import Running, _hook, _settings, cli

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


def working(seconds: float = TOOL_SECONDS) -> list[dict[str, Any]]:
    """A message (with its usage) and a tool that runs ``seconds``."""
    return [
        {
            "assistant": {
                "text": "Running the build.",
                "stopReason": "toolUse",
                "toolCalls": [{"name": "bash", "arguments": {"command": "make"}}],
            }
        },
        {"tool": {"name": "bash", "duration": seconds, "result": "built"}},
    ]


def test_status_shows_the_tokens_and_the_steers_so_far(tmp_path: Path) -> None:
    # Attempt 1 stops and a Stop hook sends it back once (attempt 2, in a
    # long tool); a steer from outside then resumes it (attempt 3, in a long tool).
    hook = _hook(
        tmp_path,
        "import json, pathlib\n"
        "marker = pathlib.Path(sys.argv[0]).with_suffix('.blocked')\n"
        "if not marker.exists():\n"
        "    marker.write_text('')\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'Run the build too.'}))\n",
    )
    run = Running(
        tmp_path,
        [{"assistant": {"text": "Done.", "stopReason": "stop"}}, *END],
        [working(), working()],
        options=["--settings", str(_settings(tmp_path, hook)), "--steer-timeout", "0.5"],
    )

    def mid_tool(attempt: int) -> dict[str, Any]:
        assert wait_until(
            lambda: (
                (run.status().get("attempt"), run.status().get("currentTool")) == (attempt, "bash")
            ),
            timeout=SEEN_WITHIN,
        ), run.status()
        # The usage of the message before the tool is written within the
        # status interval of the tool's start.
        time.sleep(1.0)
        status = run.status()
        validate("status", status)
        assert run.proc.poll() is None, "the run is still going on"
        return status

    status = mid_tool(2)
    assert status["steers"] == {"hook": 1, "outside": 0}
    assert status["usage"]["totalTokens"] == 2 * 120, "each fake message uses 120 tokens"
    assert status["usage"]["costUsd"] > 0
    steered = cli("steer", str(run.run_dir), "--text", "Build the docs instead")
    assert steered.returncode == 0, steered.stderr
    status = mid_tool(3)
    assert status["steers"] == {"hook": 1, "outside": 1}
    assert status["usage"]["totalTokens"] == 3 * 120
    assert cli("abort", str(run.run_dir)).returncode == 0
    code, result, _, _ = run.finish()
    assert (code, result["outcome"]) == (128 + signal.SIGTERM, "aborted")
    final = run.status()
    assert final["usage"] == result["usage"]
    assert final["steers"] == {
        "hook": result["steerCount"],
        "outside": result["externalSteerCount"],
    }
