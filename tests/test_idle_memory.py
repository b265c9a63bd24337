"""What a run keeps in memory once its agent goes quiet.

A run that has streamed megabytes and then waits (the agent in a long tool)
must cost about what a run whose agent never said a word costs: what the
stream passed through is not held for the rest of the run's life.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks.streams import write_pi_stream
from tests.conftest import HANG_LIMIT, agent_env, state_of, wait_until

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/smaps_rollup").exists(), reason="reads Linux's /proc"
)

#: How much more a run that streamed may keep than a silent one. Measured:
#: 0.6 MB after about 3 MB of stream (3.5-4.4 MB when each read asked for
#: 1 MiB, 2 MB more again when the logs buffered 1 MiB each).
ALLOWED_GROWTH_KB = 1500
#: The stream: 10,000 text deltas of pi's, about 3 MB, the run left going.
DELTAS = 10_000
#: Memory counts as settled when two readings this far apart agree.
SETTLE_SECONDS = 0.5


def _worker(wrapper_pid: int) -> int:
    """The wrapper's process that runs the run: the child of the process the
    runner started (the guardian) that does not carry the run's id, as the
    agent does."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == wrapper_pid and b"AGENT_WRAPPER_RUN_ID=" not in environ:
            return int(entry.name)
    raise AssertionError(f"no worker below {wrapper_pid}")


def _private_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Private_Dirty:"):
            return int(line.split()[1])
    raise AssertionError("no Private_Dirty line")


def _settled_kb(pid: int) -> int:
    last = _private_kb(pid)
    deadline = time.monotonic() + HANG_LIMIT / 2
    while time.monotonic() < deadline:
        time.sleep(SETTLE_SECONDS)
        now = _private_kb(pid)
        if now == last:
            return now
        last = now
    return last


@contextmanager
def _idle_run(tmp_path: Path, name: str, agent: list[str], written: int) -> Iterator[int]:
    """A run left going once its agent wrote ``written`` bytes; yields the
    worker's private memory in kB."""
    run_dir = tmp_path / name
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--dialect", "pi"]
    argv += ["--run-dir", str(run_dir), "--", *agent]
    env = agent_env(tmp_path)
    with subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, cwd=tmp_path) as proc:
        try:
            log = run_dir / "stdout.log"
            assert wait_until(
                lambda: (
                    state_of(run_dir) == "running"
                    and log.exists()
                    and log.stat().st_size >= written - 64 * 1024
                    and (run_dir / "events.jsonl").exists()
                ),
                timeout=HANG_LIMIT,
            ), f"{name}: the run did not take in what its agent wrote"
            yield _settled_kb(_worker(proc.pid))
            assert proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(HANG_LIMIT)


def test_a_run_that_streamed_megabytes_keeps_little_of_them_once_idle(tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl"
    write_pi_stream(whole, DELTAS)
    # Without the end of the answer: the run goes on, as in a long tool.
    lines = whole.read_bytes().splitlines(keepends=True)
    ends = (b'"agent_end"', b'"agent_settled"', b'"message_end"', b'"turn_end"')
    stream = tmp_path / "open.jsonl"
    stream.write_bytes(b"".join(line for line in lines if not any(e in line for e in ends)))
    size = os.path.getsize(stream)
    assert size > 2_000_000
    script = f"cat {stream}; exec sleep 120"
    with _idle_run(tmp_path, "silent", ["sleep", "120"], 0) as silent:
        pass
    with _idle_run(tmp_path, "streamed", ["sh", "-c", script], size) as streamed:
        pass
    grown = streamed - silent
    assert grown <= ALLOWED_GROWTH_KB, (
        f"a run that streamed {size:,} bytes keeps {grown:,} kB more once idle "
        f"({streamed:,} kB against {silent:,} kB)"
    )
