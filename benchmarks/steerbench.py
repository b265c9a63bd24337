"""The steer section: how soon a steer from outside reaches an agent driven live.

A run of the fake agent as pi in its RPC mode (``pi --mode rpc``) sits in a
quiet 3 s tool (no output: the wrapper waits on nothing but its pipes and
the control socket); half a second into the silence ``agent-wrapper steer``
is started. Measured: from starting that command to the run's
``steer_delivered`` event (the steer written on the agent's stdin), the
client's own start-up included, and the same from the run's
``steer_requested``. Each run must end ``ok`` with the steer delivered live
into its first attempt, on one agent process, no signal sent.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.procs import median
from benchmarks.report import Row, Verdict
from benchmarks.streams import write_scenario

if TYPE_CHECKING:
    from benchmarks.suite import Bench

#: The target, from ``steer`` to ``steer_delivered`` on a quiet machine.
STEER_TARGET = 0.2
#: The quiet tool the steer lands in, and how long into it the steer comes.
TOOL_SECONDS = 3.0
STEER_AFTER = 0.5
#: Waits of the section itself, only there to catch a hang.
HANG = 60.0
STEPS: list[dict[str, Any]] = [
    {"tool": {"name": "bash", "duration": TOOL_SECONDS, "result": "built"}},
    {"assistant": {"text": "Built it.", "stopReason": "stop"}},
    {"agent_end": {"willRetry": False}},
    {"agent_settled": {}},
]


def _stamp(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def _status(run_dir: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return data


def _once(bench: Bench, scenario: Path) -> tuple[float, float] | None:
    """(from the command to delivered, from requested to delivered), or None
    when a check failed."""
    run_dir, before = bench.run_dir(), len(bench.problems)
    agent = [str(bench.fake_agent), "--mode", "rpc", "--scenario", str(scenario)]
    argv = [str(bench.wrapper), "run", "--output", "quiet", "--run-dir", str(run_dir)]
    run = subprocess.Popen(
        [*argv, "--task", "Build it", "--", *agent],
        env=bench.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + HANG
    while _status(run_dir).get("currentTool") is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(STEER_AFTER)
    sent = time.time()
    steer = subprocess.run(
        [str(bench.wrapper), "steer", str(run_dir), "--text", "Skip the docs", "--json"],
        env=bench.env,
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    _, stderr = run.communicate(timeout=HANG)
    what = f"steer ({run_dir})"
    bench.check(steer.returncode == 0, f"{what}: steer exit {steer.returncode}: {steer.stderr}")
    bench.check(run.returncode == 0, f"{what}: run exit {run.returncode}: {stderr[-500:]!r}")
    try:
        result = json.loads((run_dir / "result.json").read_text())
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    except (OSError, ValueError) as exc:
        bench.check(False, f"{what}: no result.json or events.jsonl ({exc})")
        return None
    steers = result.get("externalSteers") or [{}]
    bench.check(result.get("outcome") == "ok", f"{what}: outcome {result.get('outcome')!r}")
    bench.check(
        (steers[0].get("how"), steers[0].get("attempt")) == ("live", 1),
        f"{what}: the steer was not delivered live into attempt 1: {steers[0]}",
    )
    kinds = [event["type"] for event in events]
    bench.check(kinds.count("spawned") == 1, f"{what}: more than one agent process")
    bench.check("signal_sent" not in kinds, f"{what}: a live steer sent a signal")
    requested = [_stamp(e) for e in events if e["type"] == "steer_requested"]
    delivered = [_stamp(e) for e in events if e["type"] == "steer_delivered"]
    if not bench.check(bool(requested and delivered), f"{what}: no steer events"):
        return None
    failed = len(bench.problems) > before
    bench.discard(run_dir, before)
    return None if failed else (delivered[0] - sent, delivered[0] - requested[0])


def steer_section(bench: Bench) -> list[Row]:
    bench.progress("steer: a live steer into a quiet tool")
    scenario = write_scenario(bench.tmp / "steer.json", STEPS)
    figures = [figure for _ in range(bench.repeat) if (figure := _once(bench, scenario))]
    if not figures:
        return [Row("steer", "steer to delivered", "—", "—", "—", "—", Verdict.FAIL)]
    whole = median([figure[0] for figure in figures])
    inside = median([figure[1] for figure in figures])
    ok = whole <= STEER_TARGET and len(figures) == bench.repeat
    return [
        Row(
            "steer",
            f"`agent-wrapper steer` to `steer_delivered`, pi `--mode rpc` (fake agent) "
            f"in a quiet {TOOL_SECONDS:g} s tool, live",
            f"{whole:.3f} s",
            f"{inside:.3f} s (from the run's `steer_requested`)",
            f"+{whole - inside:.3f} s (the client's start-up and connect)",
            f"≤ {STEER_TARGET} s",
            Verdict.PASS if ok else Verdict.FAIL,
        )
    ]
