"""The batch section: what one more idle run costs a batch, and how the
checks of a spec grow with its lines.

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
#: Spec checks: a large spec of one label against a tenth of it. Linear
#: checks cost the same per line at both sizes; the target allows twice that
#: for noise (a quadratic step costs ten times as much per line).
SPEC_LINES = 20_000
SPEC_LINES_REFERENCE = 2_000
SPEC_PER_LINE_RATIO = 2.0


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


def _spec_check_seconds(bench: Bench, lines: int) -> float:
    """Wall time of ``batch`` over a spec of ``lines`` lines of one label whose
    last line is found wrong only when its run is prepared: every line is
    parsed, named, prepared and checked for a shared directory, and nothing runs."""
    spec = bench.tmp / f"spec-{lines}.jsonl"
    line = {"command": ["sleep", "3600"], "dialect": "pi", "label": "same"}
    wrong = {**line, "task": " "}
    spec.write_text("".join(json.dumps(line) + "\n" for _ in range(lines - 1)) + json.dumps(wrong))
    argv: list[str | Path] = [bench.wrapper, "batch", spec, "--runs-dir", bench.tmp / "unused"]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=bench.env, timeout=600, check=False)
    seconds = time.perf_counter() - started
    bench.check(
        proc.returncode == 2 and f"line {lines}: " in proc.stderr.decode(),
        f"batch spec of {lines} lines: exit {proc.returncode}, not its last line's usage error",
    )
    return seconds


def spec_checks(bench: Bench) -> list[Row]:
    bench.progress(f"batch: checking a spec of {SPEC_LINES} lines with one label")
    before = len(bench.problems)
    reference = sorted(_spec_check_seconds(bench, SPEC_LINES_REFERENCE) for _ in range(3))[1]
    large = sorted(_spec_check_seconds(bench, SPEC_LINES) for _ in range(3))[1]
    per_line = (large / SPEC_LINES) / (reference / SPEC_LINES_REFERENCE)
    failed = len(bench.problems) > before
    verdict = Verdict.FAIL if failed or per_line > SPEC_PER_LINE_RATIO else Verdict.PASS
    return [
        Row(
            "batch",
            f"checking a spec of {SPEC_LINES} lines with one label (to a usage error)",
            f"{large:.2f} s",
            f"{reference:.2f} s ({SPEC_LINES_REFERENCE} lines)",
            f"x{per_line:.2f} per line",
            f"≤ x{SPEC_PER_LINE_RATIO:g} per line",
            verdict,
        )
    ]


def batch_section(bench: Bench) -> list[Row]:
    return [*batch(bench), *spec_checks(bench)]
