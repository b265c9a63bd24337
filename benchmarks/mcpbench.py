"""The mcp section: what a parent agent waits for, and what many subagents cost.

``agent-wrapper mcp`` is started as a client starts it and spoken to in
JSON-RPC lines on its stdin and stdout (a client's own overhead is not the
server's). Measured: ``start`` from the request to its answer, which comes
once the agent is spawned (its state ``running``); a ``status`` round trip
with a run going on; and, with ``IDLE_SUBAGENTS`` silent subagents (each the fake
agent in a quiet tool), the server's CPU share over a window and the PSS its processes
(the guardian and the server, not the agents' trees) hold beyond the same
server with no run, per subagent. Skipped, and said so, where the ``mcp``
extra is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from benchmarks.idle import IDLE_SETTLE, MB, _children_map, sample, wrapper_side
from benchmarks.procs import median
from benchmarks.report import Row, Verdict
from benchmarks.streams import write_scenario

if TYPE_CHECKING:
    from benchmarks.suite import Bench

#: The targets: ``start`` to the subagent running, a ``status`` round trip,
#: and what each idle subagent costs the server beyond itself.
START_TARGET = 0.3
STATUS_TARGET = 0.010
IDLE_CPU_TARGET = 0.0005
IDLE_PSS_TARGET = 3 * MB
IDLE_SUBAGENTS = 20
IDLE_WINDOW = 30.0
IDLE_WINDOW_QUICK = 10.0
STATUS_CALLS = 50
#: Waits of the section itself, only there to catch a hang.
HANG = 60.0
#: Each subagent: the fake agent as pi in a quiet tool that outlasts the section.
QUIET_TOOL: list[dict[str, Any]] = [{"tool": {"name": "bash", "duration": 3600, "result": "done"}}]


class LineClient:
    """``agent-wrapper mcp`` (``argv``) on pipes, spoken to in JSON-RPC
    lines, initialized."""

    def __init__(
        self, argv: list[str], env: dict[str, str], cwd: Path, stderr: IO[Any] | int
    ) -> None:
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=cwd
        )
        self.next_id = 0
        self.request("initialize", protocolVersion="2025-06-18", capabilities={},
                     clientInfo={"name": "bench", "version": "1"})  # fmt: skip
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.process.stdout is not None
        while line := self.process.stdout.readline():
            message = json.loads(line)
            if message.get("id") == self.next_id:
                result: dict[str, Any] = message.get("result") or {"error": message}
                return result
        raise RuntimeError("the server closed its stdout")

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        """A tool's structured answer (its error's, when it failed)."""
        answer = self.request("tools/call", name=name, arguments=arguments)
        structured: dict[str, Any] = answer.get("structuredContent") or {"error": answer}
        return structured

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=HANG)


def mcp_section(bench: Bench) -> list[Row]:
    if importlib.util.find_spec("mcp") is None:
        bench.progress("mcp: skipped, the mcp extra is not installed")
        return [Row("mcp", "the MCP server (the mcp extra is not installed)", "—", "—", "—",
                    "—", Verdict.INFO)]  # fmt: skip
    bench.progress(f"mcp: start and status round trips, then {IDLE_SUBAGENTS} idle subagents")
    before = len(bench.problems)
    argv = [str(bench.wrapper), "mcp", "--runs-dir", str(bench.tmp / "mcp-runs")]
    argv += ["--allow-any-command", "--max-runs", str(IDLE_SUBAGENTS)]
    server = LineClient(argv, bench.env, bench.tmp, subprocess.DEVNULL)
    scenario = write_scenario(bench.tmp / "mcp-quiet.json", QUIET_TOOL)
    agent = [str(bench.fake_agent), "--mode", "json", "-p", "--scenario", str(scenario)]
    try:
        starts, statuses = _round_trips(bench, server, agent)
        idle = _idle(bench, server, agent)
    finally:
        status = server.close()
    bench.check(status == 0, f"mcp: the server exited {status} when its stdin closed")
    failed = len(bench.problems) > before
    rows = []
    if starts:
        took = median(starts)
        rows.append(
            Row(
                "mcp",
                "`start` to the subagent running (the answer comes once it is spawned)",
                f"{took * 1000:.0f} ms",
                f"fastest {min(starts) * 1000:.0f} ms of {len(starts)}",
                "—",
                f"< {START_TARGET * 1000:g} ms",
                Verdict.PASS if took < START_TARGET and not failed else Verdict.FAIL,
            )
        )
    if statuses:
        took = median(statuses)
        rows.append(
            Row(
                "mcp",
                f"`status` round trip, a run going on ({len(statuses)} calls)",
                f"{took * 1000:.1f} ms",
                f"slowest {max(statuses) * 1000:.1f} ms",
                "—",
                f"< {STATUS_TARGET * 1000:g} ms",
                Verdict.PASS if took < STATUS_TARGET and not failed else Verdict.FAIL,
            )
        )
    return rows + idle


def _round_trips(
    bench: Bench, server: LineClient, agent: list[str]
) -> tuple[list[float], list[float]]:
    starts: list[float] = []
    statuses: list[float] = []
    for _ in range(max(bench.repeat, 3)):
        sent = time.perf_counter()
        run = server.tool("start", command=agent, task="Wait")
        starts.append(time.perf_counter() - sent)
        bench.check(run.get("state") == "running", f"mcp: start answered {run}")
        if "run_id" not in run:
            return starts, statuses
        for _ in range(STATUS_CALLS if not statuses else 0):
            sent = time.perf_counter()
            state = server.tool("status", run_id=run["run_id"])
            statuses.append(time.perf_counter() - sent)
            bench.check(state.get("state") == "running", f"mcp: status answered {state}")
        ended = server.tool("abort", run_id=run["run_id"])
        bench.check(ended.get("outcome") == "aborted", f"mcp: abort answered {ended}")
    return starts, statuses


def _idle(bench: Bench, server: LineClient, agent: list[str]) -> list[Row]:
    window = IDLE_WINDOW_QUICK if bench.quick else IDLE_WINDOW
    children = _children_map()
    empty = sample(wrapper_side(server.process.pid, children)).pss
    runs = [server.tool("start", command=agent, task="Wait") for _ in range(IDLE_SUBAGENTS)]
    if not bench.check(all(r.get("state") == "running" for r in runs), f"mcp: starts {runs}"):
        return []
    time.sleep(IDLE_SETTLE)
    ours = wrapper_side(server.process.pid, _children_map())
    first = sample(ours)
    started = time.monotonic_ns()
    time.sleep(window)
    last = sample(ours)
    elapsed = time.monotonic_ns() - started
    waited = server.tool("wait", timeout=0.01)
    bench.check(len(waited.get("running", ())) == IDLE_SUBAGENTS, f"mcp: runs ended: {waited}")
    # Closing stdin (in ``mcp_section``) aborts them all.
    cpu = last.since(first)[0] / elapsed / IDLE_SUBAGENTS
    per_run = (last.pss - empty) / IDLE_SUBAGENTS
    return [
        Row(
            "mcp",
            f"CPU per idle subagent, {IDLE_SUBAGENTS} in one server, {window:g} s",
            f"{cpu * 100:.4f} %",
            f"{len(ours)} server processes",
            "—",
            f"≤ {IDLE_CPU_TARGET * 100:g} % of a core",
            Verdict.PASS if cpu <= IDLE_CPU_TARGET else Verdict.FAIL,
        ),
        Row(
            "mcp",
            f"PSS per idle subagent beyond the server, {IDLE_SUBAGENTS} in one server",
            f"{per_run / MB:.2f} MB",
            f"the server alone {empty / MB:.1f} MB, with them {last.pss / MB:.1f} MB",
            "—",
            f"≤ {IDLE_PSS_TARGET / MB:g} MB",
            Verdict.PASS if per_run <= IDLE_PSS_TARGET else Verdict.FAIL,
        ),
    ]
