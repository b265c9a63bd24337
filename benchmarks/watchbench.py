"""The watch section: what following 200 runs from another terminal costs.

200 run directories of a batch folder, each as a running run leaves it
(status.json naming its label, its tool, its tokens), every one of them
rewritten as often as a busy run rewrites its own (``STATUS_INTERVAL``), the
tool changing each time: the worst case, every run moving. ``agent-wrapper
watch RUNS_DIR --follow`` follows them, once on a terminal (a pty: the table
redrawn every second) and once without (a line per change, to a file). The
CPU time of the watch process (``/proc/PID/task/*/schedstat``, nanoseconds)
over a window after its start-up, as a share of one core.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.report import Row, Verdict
from wrapper.core.config import STATUS_INTERVAL

if TYPE_CHECKING:
    from benchmarks.suite import Bench

#: How many runs are watched, and the target: a share of one core.
WATCH_RUNS = 200
WATCH_CPU_TARGET = 0.02
#: The window, after the watch's start-up (imports, the first look).
WINDOW = 30.0
WINDOW_QUICK = 8.0
SETTLE = 2.0
TOOLS = ("bash", "read", "edit", "grep")


def _status(n: int, tick: int) -> bytes:
    return json.dumps(
        {
            "schemaVersion": 1,
            "runId": f"bench-{n:03d}",
            "state": "running",
            "attempt": 1,
            "pid": os.getpid(),
            "wrapperPid": os.getpid(),
            "startedAt": "2026-01-01T00:00:00.000Z",
            "updatedAt": "2026-01-01T00:00:00.000Z",
            "lastEventAt": None,
            "currentTool": TOOLS[(n + tick) % len(TOOLS)],
            "label": f"line-{n:03d}",
            "usage": {"input": 1000 * tick, "output": 100 * tick, "totalTokens": 1100 * tick},
            "steers": {"hook": 0, "outside": 0},
            "pendingSteers": [],
        }
    ).encode()


def _write(run_dir: Path, data: bytes) -> None:
    # As the run writes it: a whole new file, renamed over the old one.
    temp = run_dir / ".status.json.tmp"
    temp.write_bytes(data)
    os.replace(temp, run_dir / "status.json")


def _runs(folder: Path) -> list[Path]:
    dirs = []
    for n in range(WATCH_RUNS):
        run_dir = folder / f"line-{n:03d}"
        run_dir.mkdir(parents=True)
        _write(run_dir, _status(n, 0))
        dirs.append(run_dir)
    return dirs


def _moving(dirs: list[Path], stop: threading.Event) -> None:
    tick = 0
    while not stop.wait(STATUS_INTERVAL):
        tick += 1
        for n, run_dir in enumerate(dirs):
            _write(run_dir, _status(n, tick))


def _cpu_ns(pid: int) -> int:
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as file:
                total += int(file.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def _drain(fd: int, seen: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        seen[:] = (seen + chunk)[-65536:]


def _once(bench: Bench, folder: Path, terminal: bool) -> float | None:
    """The watch's share of a core over the window, or None when a check failed."""
    window = WINDOW_QUICK if bench.quick else WINDOW
    argv = [str(bench.wrapper), "watch", str(folder), "--follow"]
    seen = bytearray()
    out_path = folder.parent / f"watch-{'tty' if terminal else 'lines'}.out"
    if terminal:
        leader, follower = pty.openpty()
        os.set_blocking(leader, True)
        env = {**bench.env, "COLUMNS": "160", "LINES": "60", "TERM": "xterm"}
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env
        )
        os.close(follower)
        reader = threading.Thread(target=_drain, args=(leader, seen), daemon=True)
        reader.start()
    else:
        with out_path.open("wb") as out:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=bench.env
            )
    try:
        time.sleep(SETTLE)
        first, started = _cpu_ns(proc.pid), time.monotonic()
        time.sleep(window)
        used, elapsed = _cpu_ns(proc.pid) - first, time.monotonic() - started
        alive = proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
        if terminal:
            os.close(leader)
    what = f"watch of {WATCH_RUNS} runs ({'terminal' if terminal else 'no terminal'})"
    ok = bench.check(alive, f"{what}: ended before the window did (it follows)")
    if terminal:
        ok = (
            bench.check(
                f"{WATCH_RUNS} running".encode() in bytes(seen), f"{what}: the table never said so"
            )
            and ok
        )
    else:
        text = out_path.read_bytes()
        ok = bench.check(b"line-199: running" in text, f"{what}: no line for the last run") and ok
    return used / 1e9 / elapsed if ok else None


def watch_section(bench: Bench) -> list[Row]:
    folder = bench.tmp / "watched" / "batch"
    dirs = _runs(folder)
    stop = threading.Event()
    writer = threading.Thread(target=_moving, args=(dirs, stop), daemon=True)
    writer.start()
    rows = []
    try:
        for terminal in (True, False):
            bench.progress(
                f"watch: {WATCH_RUNS} runs, {'a terminal' if terminal else 'no terminal'}"
            )
            before = len(bench.problems)
            share = _once(bench, folder, terminal)
            verdict = (
                Verdict.PASS
                if share is not None and share <= WATCH_CPU_TARGET and len(bench.problems) == before
                else Verdict.FAIL
            )
            case = (
                f"`watch RUNS_DIR --follow` of {WATCH_RUNS} runs, each status.json rewritten every "
                f"{STATUS_INTERVAL:g} s, "
                + ("on a terminal (the table redrawn each second)" if terminal else "no terminal")
            )
            rows.append(
                Row(
                    "watch",
                    case,
                    f"{share * 100:.2f} % of a core" if share is not None else "failed",
                    "-",
                    "-",
                    f"≤ {WATCH_CPU_TARGET * 100:g} % of a core",
                    verdict,
                )
            )
    finally:
        stop.set()
        writer.join(timeout=10)
    return rows
