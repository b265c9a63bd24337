"""Running a measured process: wall time from spawn to reap, and its peak RSS.

Peak RSS is ``ru_maxrss`` from ``os.wait4`` on the process, taken by a fresh,
bare Python process that spawns it (``RSS_PROBE``). Not by this one: Linux
counts the spawning process's own peak RSS into the child's ``ru_maxrss``
(at exec, the peak of the memory image being replaced is kept), so a child of
this suite, which holds generated streams, would report the suite's size. The
probe's own peak (about 8 MB) is thus a floor under every RSS figure.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

#: The floor's line counter: reads the pipe in the wrapper's chunk size and counts.
COUNT_LINES = (
    "import sys\n"
    "n = 0\n"
    "read = sys.stdin.buffer.raw.read\n"
    "while chunk := read(262144):\n"
    "    n += chunk.count(b'\\n')\n"
    "print(n)\n"
)

#: Spawns ``argv[2:]``, waits for it, and writes "MAXRSS_KB STATUS" to the file ``argv[1]``.
RSS_PROBE = (
    "import os, sys\n"
    "pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "code = os.waitstatus_to_exitcode(status)\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    out.write(f'{usage.ru_maxrss} {code}')\n"
)

Target = int | IO[bytes] | None


@dataclass(frozen=True, slots=True)
class Measured:
    """One finished process."""

    #: Seconds from just before the spawn to just after the reap (the probe's
    #: start-up included when RSS was measured).
    wall: float
    #: Exit status, or minus the signal number that ended it.
    status: int
    #: ``time.time()`` just after the reap, to compare with the wrapper's timestamps.
    ended_at: float
    #: Peak resident set size in bytes, when asked for.
    max_rss: int | None = None


def child_env(pycache: Path) -> dict[str, str]:
    """The environment of every measured process.

    Without a surrounding wrapper's identity (no nesting limits), and with a
    bytecode cache in ``pycache``, whatever ``PYTHONDONTWRITEBYTECODE`` says
    here: an installed wrapper starts from compiled bytecode, and the cache
    lives outside the source tree.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_WRAPPER_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


class _Probe:
    """Wraps a command in ``RSS_PROBE`` and reads what it reported."""

    def __init__(self) -> None:
        fd, name = tempfile.mkstemp(prefix="rss-", suffix=".txt")
        os.close(fd)
        self.path = Path(name)

    def argv(self, argv: Sequence[str | Path]) -> list[str | Path]:
        return [sys.executable, "-I", "-S", "-c", RSS_PROBE, self.path, *argv]

    def read(self) -> tuple[int, int]:
        """(peak RSS in bytes, exit status of the measured process)."""
        try:
            kilobytes, status = self.path.read_text().split()
        finally:
            self.path.unlink()
        return int(kilobytes) * 1024, int(status)


def run(
    argv: Sequence[str | Path],
    env: Mapping[str, str],
    *,
    stdout: Target = subprocess.DEVNULL,
    stderr: Target = subprocess.DEVNULL,
    peak_rss: bool = False,
) -> Measured:
    """Run ``argv`` with stdin from /dev/null and measure it."""
    probe = _Probe() if peak_rss else None
    start = time.perf_counter()
    proc = subprocess.Popen(
        probe.argv(argv) if probe else argv,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=env,
    )
    status = proc.wait()
    wall, ended_at = time.perf_counter() - start, time.time()
    if probe is None:
        return Measured(wall, status, ended_at)
    rss, status = probe.read()
    return Measured(wall, status, ended_at, rss)


def run_floor(
    path: Path, env: Mapping[str, str], *, peak_rss: bool = False
) -> tuple[Measured, int]:
    """``cat PATH | python -c COUNT_LINES``: the measurement and the line count it printed.

    The peak RSS, when asked for, is the line counter's.
    """
    probe = _Probe() if peak_rss else None
    counter_argv = [sys.executable, "-c", COUNT_LINES]
    start = time.perf_counter()
    cat = subprocess.Popen(
        ["cat", str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env
    )
    counter = subprocess.Popen(
        probe.argv(counter_argv) if probe else counter_argv,
        stdin=cat.stdout,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert cat.stdout is not None
    assert counter.stdout is not None
    cat.stdout.close()
    output = counter.stdout.read()  # a number: read at exit, it cannot fill the pipe first
    status = counter.wait()
    cat_status = cat.wait()
    wall, ended_at = time.perf_counter() - start, time.time()
    counter.stdout.close()
    rss = None
    if probe is not None:
        rss, status = probe.read()
    text = output.decode().strip()
    count = int(text) if text.isdigit() else -1
    return Measured(wall, status or cat_status, ended_at, rss), count


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
