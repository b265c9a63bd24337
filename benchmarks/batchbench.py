"""The batch section: what one more idle run costs a batch.

Two batches are started side by side: one of a single run, one of
``BATCH_RUNS`` runs all at once (``--jobs`` as many), every run's agent a
silent ``sleep``. Once every run's status.json says ``running`` and start-up
work has settled, the PSS (``/proc/PID/smaps_rollup``) of each batch's
wrapper-side processes (the guardian and the worker, not the agents' trees)
is summed; the cost of one more concurrent run is the difference divided by
the runs added. Both batches must then end on SIGTERM with exit 143 and
every run ``aborted``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.idle import MB, START_LIMIT, _children_map, sample, stopped, wrapper_side
from benchmarks.report import Row, Verdict

if TYPE_CHECKING:
    from benchmarks.suite import Bench

#: Concurrent idle runs in the larger batch.
BATCH_RUNS = 20
#: Time for start-up work to end once every run is up (shorter with --quick).
BATCH_SETTLE = 3.0
BATCH_SETTLE_QUICK = 1.0
#: The target: PSS per additional concurrent idle run.
BATCH_PSS_PER_RUN_TARGET = 3 * MB


def _start(bench: Bench, runs: int, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    spec = bench.tmp / f"{name}.jsonl"
    line = {"command": ["sleep", "3600"], "dialect": "pi"}
    spec.write_text("".join(json.dumps(line) + "\n" for _ in range(runs)))
    runs_dir = bench.tmp / name
    argv: list[str | Path] = [
        bench.wrapper,
        "batch",
        spec,
        "--jobs",
        str(runs),
        "--output",
        "quiet",
        "--runs-dir",
        runs_dir,
    ]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=bench.env,
    )
    return proc, runs_dir


def _states(runs_dir: Path, runs: int) -> list[Any]:
    states = []
    for n in range(1, runs + 1):
        try:
            states.append(json.loads((runs_dir / str(n) / "status.json").read_text())["state"])
        except (OSError, ValueError, KeyError):
            states.append(None)
    return states


def batch(bench: Bench) -> list[Row]:
    settle = BATCH_SETTLE_QUICK if bench.quick else BATCH_SETTLE
    bench.progress(f"batch: 1 idle run vs {BATCH_RUNS} idle runs at once, side by side")
    before = len(bench.problems)
    batches = [
        (1, *_start(bench, 1, "batch-1")),
        (BATCH_RUNS, *_start(bench, BATCH_RUNS, "batch-n")),
    ]
    pss: list[float] = []
    try:
        deadline = time.monotonic() + START_LIMIT
        while not all(
            all(state == "running" for state in _states(runs_dir, runs))
            for runs, _, runs_dir in batches
        ):
            if time.monotonic() > deadline or any(p.poll() is not None for _, p, _ in batches):
                bench.check(False, "batch: the runs did not all start")
                return []
            time.sleep(0.1)
        time.sleep(settle)
        children = _children_map()
        pss = [sample(wrapper_side(proc.pid, children)).pss for _, proc, _ in batches]
    finally:
        for _, proc, _ in batches:
            proc.send_signal(signal.SIGTERM)
        for runs, proc, runs_dir in batches:
            status, outcomes = stopped(proc, runs_dir / "batch.json", "outcomes")
            bench.check(
                (status, outcomes) == (128 + signal.SIGTERM, {"aborted": runs}),
                f"batch ({runs_dir}): SIGTERM ended it with {status}, outcomes {outcomes!r}",
            )
    failed = len(bench.problems) > before
    one, many = pss
    per_run = (many - one) / (BATCH_RUNS - 1)
    verdict = Verdict.FAIL if failed or per_run > BATCH_PSS_PER_RUN_TARGET else Verdict.PASS
    return [
        Row(
            "batch",
            f"PSS of the batch's processes, {BATCH_RUNS} idle runs at once",
            f"{many / MB:.1f} MB",
            f"{one / MB:.1f} MB (1 idle run)",
            f"{per_run / MB:+.2f} MB per additional run",
            f"≤ +{BATCH_PSS_PER_RUN_TARGET / MB:g} MB per run",
            verdict,
        )
    ]
