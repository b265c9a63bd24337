"""The fleet section: what a run costs inside one batch against a process of
its own, and how soon a long spec starts its first run.

- Many short runs (``cat`` of a small pi stream as the agent, ``--dialect
  pi``): one ``agent-wrapper batch --jobs 50`` against the same runs as
  ``agent-wrapper run`` processes, 50 at a time. CPU is the user + system
  time of every process reaped (``os.wait4``: the wrapper's processes and
  the agents, a ``cat`` costing about a millisecond), per run; wall per run
  is the whole wall time over the runs.
- A spec of 20,000 lines whose agent writes the time it started: seconds
  from the batch's start to its first run's agent. The batch is then ended
  by a SIGKILL to its worker (the guardian ends the runs it started),
  rather than by a stop signal, which would write a result.json for each
  of the 20,000 runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import procs
from benchmarks.report import Row, Verdict
from benchmarks.streams import write_pi_stream

if TYPE_CHECKING:
    from benchmarks.suite import Bench

#: Short runs in the batch and in the reference (full run, ``--quick``).
FLEET_RUNS = 1_000
FLEET_RUNS_QUICK = 40
#: Runs at once, in the batch and in the reference.
FLEET_JOBS = 50
#: Text deltas in each short run's stream.
FLEET_DELTAS = 20
#: The target: CPU per run inside one batch.
FLEET_CPU_TARGET = 0.030
#: Lines of the long spec, and the target for its first run's start.
FIRST_START_LINES = 20_000
FIRST_START_TARGET = 2.0
#: Bounds on waiting, only there to catch hangs.
FLEET_LIMIT = 1800.0
FIRST_START_LIMIT = 120.0


def _cpu(rusage: Any) -> float:
    """User and system seconds of an ``os.wait4`` rusage."""
    return float(rusage.ru_utime + rusage.ru_stime)


def _short_runs_batch(bench: Bench, stream: Path, runs: int) -> tuple[float, float]:
    """Wall and CPU seconds of one batch of ``runs`` short runs."""
    spec = bench.tmp / "fleet-spec.jsonl"
    line = {"command": ["cat", str(stream)], "dialect": "pi"}
    spec.write_text("".join(json.dumps(line) + "\n" for _ in range(runs)))
    runs_dir = bench.tmp / "fleet-batch"
    argv = [str(bench.wrapper), "batch", str(spec), "--jobs", str(FLEET_JOBS)]
    argv += ["--output", "quiet", "--runs-dir", str(runs_dir)]
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=bench.env
    )
    _, status, rusage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        report = json.loads((runs_dir / "batch.json").read_text())
        outcomes = report.get("outcomes")
    except (OSError, ValueError):
        outcomes = None
    bench.check(
        (proc.returncode, outcomes) == (0, {"ok": runs}),
        f"fleet: the batch of {runs} short runs exited {proc.returncode}, outcomes {outcomes!r}",
    )
    return wall, _cpu(rusage)


def _short_runs_alone(bench: Bench, stream: Path, runs: int) -> tuple[float, float]:
    """Wall and CPU seconds of ``runs`` ``agent-wrapper run`` processes, FLEET_JOBS at once."""
    base = [str(bench.wrapper), "run", "--output", "quiet", "--dialect", "pi"]
    going: dict[int, subprocess.Popen[bytes]] = {}
    cpu = 0.0
    failed = 0
    started = time.perf_counter()
    for n in range(runs):
        if len(going) >= FLEET_JOBS:
            pid, status, rusage = os.wait4(-1, 0)
            cpu += _cpu(rusage)
            failed += os.waitstatus_to_exitcode(status) != 0
            going.pop(pid).returncode = os.waitstatus_to_exitcode(status)
        run_dir = bench.tmp / "fleet-alone" / str(n)
        proc = subprocess.Popen(
            [*base, "--run-dir", str(run_dir), "--", "cat", str(stream)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=bench.env,
        )
        going[proc.pid] = proc
    while going:
        pid, status, rusage = os.wait4(-1, 0)
        cpu += _cpu(rusage)
        failed += os.waitstatus_to_exitcode(status) != 0
        if pid in going:
            going.pop(pid).returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    bench.check(failed == 0, f"fleet: {failed} of {runs} `agent-wrapper run` did not exit 0")
    return wall, cpu


def short_runs(bench: Bench) -> list[Row]:
    runs = FLEET_RUNS_QUICK if bench.quick else FLEET_RUNS
    bench.progress(f"fleet: {runs} short runs, one batch at --jobs {FLEET_JOBS} vs run processes")
    before = len(bench.problems)
    stream = write_pi_stream(bench.tmp / "fleet-stream.jsonl", FLEET_DELTAS).path
    batch_wall, batch_cpu = _short_runs_batch(bench, stream, runs)
    alone_wall, alone_cpu = _short_runs_alone(bench, stream, runs)
    per_run = batch_cpu / runs
    failed = len(bench.problems) > before
    verdict = Verdict.FAIL if failed or per_run > FLEET_CPU_TARGET else Verdict.PASS
    return [
        Row(
            "fleet",
            f"{runs:,} short runs (`cat` of a {FLEET_DELTAS}-delta pi stream), "
            f"one batch at --jobs {FLEET_JOBS}",
            f"{per_run * 1000:.1f} ms CPU · {batch_wall / runs * 1000:.1f} ms wall a run",
            f"{alone_cpu / runs * 1000:.1f} ms CPU · {alone_wall / runs * 1000:.1f} ms wall a run "
            f"({runs:,} `agent-wrapper run`, {FLEET_JOBS} at a time)",
            f"{per_run / (alone_cpu / runs):.2f}× CPU",
            f"≤ {FLEET_CPU_TARGET * 1000:g} ms CPU a run",
            verdict,
        )
    ]


def _first_start_seconds(
    bench: Bench, spec: Path, started_file: Path, attempt: int
) -> float | None:
    started_file.unlink(missing_ok=True)
    runs_dir = bench.tmp / f"fleet-long-{attempt}"
    argv = [str(bench.wrapper), "batch", str(spec), "--jobs", str(FLEET_JOBS)]
    argv += ["--output", "quiet", "--runs-dir", str(runs_dir)]
    stderr = bench.tmp / "fleet-long.stderr"
    began = time.time()
    with stderr.open("wb") as said:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=said, env=bench.env
        )
    first: float | None = None
    try:
        deadline = time.monotonic() + FIRST_START_LIMIT
        while first is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                first = float(started_file.read_text().split()[1])
            except (OSError, IndexError, ValueError):
                time.sleep(0.02)
    finally:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        try:
            workers = [int(pid) for pid in children.read_text().split()]
        except OSError:
            workers = []
        for worker in workers:
            os.kill(worker, signal.SIGKILL)
        if not workers:
            proc.kill()
        try:
            proc.wait(timeout=FIRST_START_LIMIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    try:
        agents = [int(text.split()[0]) for text in started_file.read_text().splitlines() if text]
    except (OSError, ValueError, IndexError):
        agents = []
    why = stderr.read_text(errors="replace").strip()[-500:]
    bench.check(
        first is not None,
        f"fleet: the long spec's first run never started (exit {proc.returncode}; {why})",
    )
    left = [pid for pid in agents if Path(f"/proc/{pid}").exists()]
    bench.check(not left, f"fleet: agents {left} outlived the killed batch")
    return first - began if first is not None else None


def first_start(bench: Bench) -> list[Row]:
    bench.progress(f"fleet: the first run of a {FIRST_START_LINES:,}-line spec")
    before = len(bench.problems)
    started_file = bench.tmp / "fleet-started"
    script = f'echo "$$ $(date +%s.%N)" >> {started_file}; exec sleep 3600'
    line = {"command": ["sh", "-c", script], "dialect": "pi"}
    spec = bench.tmp / "fleet-long.jsonl"
    spec.write_text("".join(json.dumps(line) + "\n" for _ in range(FIRST_START_LINES)))
    repeat = 1 if bench.quick else min(bench.repeat, 3)
    times = [_first_start_seconds(bench, spec, started_file, n) for n in range(repeat)]
    measured = [t for t in times if t is not None]
    failed = len(bench.problems) > before or not measured
    seconds = procs.median(measured) if measured else float("nan")
    verdict = Verdict.FAIL if failed or seconds > FIRST_START_TARGET else Verdict.PASS
    return [
        Row(
            "fleet",
            f"a {FIRST_START_LINES:,}-line spec: its first run's agent starts",
            f"{seconds:.2f} s",
            "the batch's start",
            f"+{seconds:.2f} s",
            f"≤ {FIRST_START_TARGET:g} s",
            verdict,
        )
    ]


def fleet_section(bench: Bench) -> list[Row]:
    return [*short_runs(bench), *first_start(bench)]
