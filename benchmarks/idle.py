"""The idle section: what standing guard over a silent agent costs.

Many runs are started at once, each supervising an agent that sleeps and
writes nothing (``--output quiet``); a window after their start-up has
settled, the CPU time of every wrapper-side process (the one the runner
started and every process below it that does not carry the run's
``AGENT_WRAPPER_RUN_ID``: the agent's tree does) is read from
``/proc/PID/task/*/schedstat`` (nanoseconds, not 10 ms ticks) at the start and
the end of the window, and their PSS from ``/proc/PID/smaps_rollup`` (shared
pages count once across all of them). The same figures are taken, side by
side in the same window, for as many bare Python processes sleeping: the
cost of merely being a Python process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.report import Row, Verdict
from benchmarks.streams import write_pi_stream
from wrapper.process.guardian import WAITER_PROGRAM

if TYPE_CHECKING:
    from benchmarks.suite import Bench

MB = 1e6
#: How many runs stand guard at once, and for how long they are watched.
IDLE_RUNS = 20
IDLE_WINDOW = 60.0
IDLE_WINDOW_QUICK = 10.0
#: After the last run reports ``running``, time for start-up work to end
#: (imports, the first status writes) before the window opens.
IDLE_SETTLE = 3.0
#: The targets: a share of one core per run, and PSS per run (17 MB: the
#: worker about 15.9 MB and the guardian's compiled waiter about 0.2 MB, with
#: room for what is coming to a run; a guardian waiting in Python instead
#: costs about 2.6 MB more and misses it).
IDLE_CPU_TARGET = 0.0005
IDLE_PSS_TARGET = 17 * MB
#: Runs whose agent streams this many text deltas (about 3 MB of pi's
#: lines) and then waits, as in a long tool; what they keep beyond a silent
#: run's PSS is held to the target (what the stream went through is not kept
#: for the rest of the run).
STREAMED_DELTAS = 10_000
STREAMED_GROWTH_TARGET = 1.5 * MB
#: The lines that would end the run: left out, the run goes on.
RUN_ENDS = (b'"message_end"', b'"turn_end"', b'"agent_end"', b'"agent_settled"')
#: What of a log may still sit in the run's write buffer.
LOG_BUFFER_SLACK = 64 * 1024
#: How long the runs may take to start, and to end once told to.
START_LIMIT = 120.0
STOP_LIMIT = 60.0
RUN_ID_MARK = b"AGENT_WRAPPER_RUN_ID="
SLEEPER = "import time; time.sleep(3600)"


@dataclass(frozen=True, slots=True)
class Sample:
    #: CPU nanoseconds and timeslices (schedstat) of each task (thread), by
    #: ``PID/TID``: a thread that ends within the window takes its figures
    #: with it, so the window's cost is counted task by task.
    tasks: dict[str, tuple[int, int]]
    #: PSS in bytes, summed.
    pss: int

    def since(self, first: Sample) -> tuple[int, int]:
        """CPU nanoseconds and timeslices of these tasks since ``first`` (a task
        born in between counts whole; one that ended in between is not seen)."""
        cpu = slices = 0
        for key, (task_cpu, task_slices) in self.tasks.items():
            was_cpu, was_slices = first.tasks.get(key, (0, 0))
            cpu += task_cpu - was_cpu
            slices += task_slices - was_slices
        return cpu, slices


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                ppid = int(file.read().rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    return children


def _marked(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return any(item.startswith(RUN_ID_MARK) for item in file.read().split(b"\0"))
    except OSError:
        return False


def _waiter_of(guardian: int) -> str:
    """What the guardian ``guardian`` waits in: its compiled waiter, or Python."""
    try:
        program = os.path.basename(os.readlink(f"/proc/{guardian}/exe"))
    except OSError:
        return "an unknown waiter"
    return "its compiled waiter" if program == WAITER_PROGRAM else "Python"


def wrapper_side(root: int, children: dict[int, list[int]]) -> list[int]:
    """``root`` and its descendants outside the agent's tree (no run id in their environment)."""
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        if _marked(pid):
            continue  # the agent, and everything below it, is the agent's
        found.append(pid)
        pending += children.get(pid, [])
    return found


def sample(pids: list[int]) -> Sample:
    tasks: dict[str, tuple[int, int]] = {}
    pss = 0
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in names:
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as file:
                    fields = file.read().split()
                tasks[f"{pid}/{task}"] = (int(fields[0]), int(fields[2]))
            except (OSError, ValueError, IndexError):
                continue
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as file:
                for line in file:
                    if line.startswith(b"Pss:"):
                        pss += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            continue
    return Sample(tasks, pss)


def _state(run_dir: Path) -> Any:
    try:
        return json.loads((run_dir / "status.json").read_text()).get("state")
    except (OSError, ValueError):
        return None


def idle(bench: Bench) -> list[Row]:
    runs = IDLE_RUNS
    window = IDLE_WINDOW_QUICK if bench.quick else IDLE_WINDOW
    bench.progress(f"idle: {runs} silent runs at once, {window:g} s window")
    before = len(bench.problems)
    wrappers: list[tuple[subprocess.Popen[bytes], Path]] = []
    sleepers: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(runs):
            run_dir = bench.run_dir()
            argv: list[str | Path] = [
                bench.wrapper,
                "run",
                "--output",
                "quiet",
                "--dialect",
                "pi",
                "--run-dir",
                run_dir,
                "--",
                "sleep",
                "3600",
            ]
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=bench.env,
            )
            wrappers.append((proc, run_dir))
            sleepers.append(
                subprocess.Popen(
                    [sys.executable, "-c", SLEEPER], stdin=subprocess.DEVNULL, env=bench.env
                )
            )
        deadline = time.monotonic() + START_LIMIT
        while not all(_state(run_dir) == "running" for _, run_dir in wrappers):
            if time.monotonic() > deadline or any(p.poll() is not None for p, _ in wrappers):
                bench.check(False, "idle: the runs did not all start")
                return []
            time.sleep(0.1)
        time.sleep(IDLE_SETTLE)
        children = _children_map()
        ours = [pid for proc, _ in wrappers for pid in wrapper_side(proc.pid, children)]
        agents = [
            pid
            for proc, _ in wrappers
            for pid in _descendants(proc.pid, children)
            if pid not in ours
        ]
        bare = [proc.pid for proc in sleepers]
        waiters = sorted({_waiter_of(proc.pid) for proc, _ in wrappers})
        first = [sample(ours), sample(bare), sample(agents)]
        started = time.monotonic_ns()
        time.sleep(window)
        last = [sample(ours), sample(bare), sample(agents)]
        elapsed = time.monotonic_ns() - started
        for _, run_dir in wrappers:
            bench.check(
                _state(run_dir) == "running", f"idle ({run_dir}): state {_state(run_dir)!r}"
            )
        processes = len(ours) / runs
    finally:
        for proc, _ in wrappers:
            proc.send_signal(signal.SIGTERM)
        for sleeper in sleepers:
            sleeper.kill()
        for proc, run_dir in wrappers:
            status, outcome = stopped(proc, run_dir / "result.json", "outcome")
            bench.check(
                (status, outcome) == (128 + signal.SIGTERM, "aborted"),
                f"idle ({run_dir}): SIGTERM ended it with {status}, outcome {outcome!r}",
            )
        for sleeper in sleepers:
            sleeper.wait()
    failed = len(bench.problems) > before

    def share(index: int) -> float:
        return last[index].since(first[index])[0] / elapsed / runs

    def wakeups(index: int) -> float:
        return last[index].since(first[index])[1] / (elapsed / 1e9) / runs

    def cpu_text(index: int) -> str:
        return f"{share(index) * 100:.4f} % · {wakeups(index):.2f} wakeups/s"

    ours_cpu, bare_cpu = share(0), share(1)
    pss, bare_pss, agent_pss = (last[i].pss / runs for i in range(3))
    verdict = Verdict.FAIL if failed else Verdict.PASS
    return [
        Row(
            "idle",
            f"CPU per run, {runs} silent runs at once, {window:g} s "
            f"({processes:g} wrapper processes a run)",
            cpu_text(0),
            f"{cpu_text(1)} (a bare python sleeping); the agent {cpu_text(2)}",
            f"+{(ours_cpu - bare_cpu) * 100:.4f} points",
            f"≤ {IDLE_CPU_TARGET * 100:g} % of a core",
            verdict if ours_cpu <= IDLE_CPU_TARGET else Verdict.FAIL,
        ),
        Row(
            "idle",
            f"PSS per run, {runs} runs at once (the guardian waiting in {' and '.join(waiters)})",
            f"{pss / MB:.1f} MB",
            f"{bare_pss / MB:.1f} MB (a bare python sleeping); the agent {agent_pss / MB:.1f} MB",
            f"{pss / bare_pss:.1f}×",
            f"≤ {IDLE_PSS_TARGET / MB:g} MB",
            verdict if pss <= IDLE_PSS_TARGET else Verdict.FAIL,
        ),
        *streamed_idle(bench, runs, pss),
    ]


def _open_stream(bench: Bench) -> tuple[Path, int]:
    """A pi stream of ``STREAMED_DELTAS`` deltas without the lines that end
    the run, and its size."""
    whole = write_pi_stream(bench.tmp / "idle-stream-whole.jsonl", STREAMED_DELTAS).path
    kept = [
        line
        for line in whole.read_bytes().splitlines(keepends=True)
        if not any(end in line for end in RUN_ENDS)
    ]
    path = bench.tmp / "idle-stream.jsonl"
    path.write_bytes(b"".join(kept))
    return path, path.stat().st_size


def streamed_idle(bench: Bench, runs: int, silent_pss: float) -> list[Row]:
    """``runs`` runs at once whose agent streamed about 3 MB and then waits:
    their PSS per run once they are idle, against the silent runs'."""
    bench.progress(f"idle: {runs} runs at once, each after a streamed answer")
    stream, size = _open_stream(bench)
    before = len(bench.problems)
    wrappers: list[tuple[subprocess.Popen[bytes], Path]] = []
    pss = 0.0
    try:
        for _ in range(runs):
            run_dir = bench.run_dir()
            argv: list[str | Path] = [bench.wrapper, "run", "--output", "quiet", "--dialect", "pi"]
            argv += ["--run-dir", run_dir, "--", "sh", "-c", f"cat {stream}; exec sleep 3600"]
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=bench.env,
            )
            wrappers.append((proc, run_dir))

        def taken_in(run_dir: Path) -> bool:
            try:
                logged = (run_dir / "stdout.log").stat().st_size
            except OSError:
                return False
            return _state(run_dir) == "running" and logged >= size - LOG_BUFFER_SLACK

        deadline = time.monotonic() + START_LIMIT
        while not all(taken_in(run_dir) for _, run_dir in wrappers):
            if time.monotonic() > deadline or any(p.poll() is not None for p, _ in wrappers):
                bench.check(False, "idle: the streaming runs did not all take in their stream")
                return []
            time.sleep(0.1)
        time.sleep(IDLE_SETTLE)
        children = _children_map()
        ours = [pid for proc, _ in wrappers for pid in wrapper_side(proc.pid, children)]
        pss = sample(ours).pss / runs
    finally:
        for proc, _ in wrappers:
            proc.send_signal(signal.SIGTERM)
        for proc, run_dir in wrappers:
            status, outcome = stopped(proc, run_dir / "result.json", "outcome")
            bench.check(
                (status, outcome) == (128 + signal.SIGTERM, "aborted"),
                f"idle ({run_dir}): SIGTERM ended it with {status}, outcome {outcome!r}",
            )
    failed = len(bench.problems) > before
    grown = pss - silent_pss
    verdict = Verdict.FAIL if failed or grown > STREAMED_GROWTH_TARGET else Verdict.PASS
    return [
        Row(
            "idle",
            f"PSS per run, {runs} runs at once, each idle after streaming {size / MB:.1f} MB",
            f"{pss / MB:.1f} MB",
            f"{silent_pss / MB:.1f} MB (the silent runs above)",
            f"{grown / MB:+.1f} MB",
            f"≤ +{STREAMED_GROWTH_TARGET / MB:g} MB",
            verdict,
        )
    ]


def _descendants(root: int, children: dict[int, list[int]]) -> list[int]:
    found, pending = [], list(children.get(root, []))
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending += children.get(pid, [])
    return found


def stopped(proc: subprocess.Popen[bytes], report: Path, key: str) -> tuple[int, Any]:
    """The exit status of a wrapper sent SIGTERM (killed past ``STOP_LIMIT``)
    and what its JSON report then says under ``key`` (None if unreadable)."""
    try:
        status = proc.wait(timeout=STOP_LIMIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        status = proc.wait()
    try:
        value = json.loads(report.read_text()).get(key)
    except (OSError, ValueError):
        value = None
    return status, value
