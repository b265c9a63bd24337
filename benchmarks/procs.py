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

#: The ``--output jsonl`` floor: parses every line and writes a small JSON
#: object for each (read in the wrapper's chunk size, written per chunk).
PARSE_AND_EMIT = (
    "import sys, orjson\n"
    "read, write = sys.stdin.buffer.raw.read, sys.stdout.buffer.write\n"
    "loads, dumps = orjson.loads, orjson.dumps\n"
    "n, tail = 0, b''\n"
    "while chunk := read(1048576):\n"
    "    lines = (tail + chunk).split(b'\\n')\n"
    "    tail = lines.pop()\n"
    "    out = []\n"
    "    for line in lines:\n"
    "        n += 1\n"
    "        out.append(dumps({'type': loads(line).get('type'), 'seq': n}))\n"
    "    if out:\n"
    "        write(b'\\n'.join(out) + b'\\n')\n"
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


#: The wrapper's variables that say how it is to run, not which run it is
#: part of: passed on to every measured process, so that each waiter of the
#: guardian can be measured (``AGENT_WRAPPER_GUARDIAN_WAITER=python``).
KEPT_VARIABLES = frozenset({"AGENT_WRAPPER_GUARDIAN_WAITER"})


def child_env(pycache: Path) -> dict[str, str]:
    """The environment of every measured process.

    Without a surrounding wrapper's identity (no nesting limits), and with a
    bytecode cache in ``pycache``, whatever ``PYTHONDONTWRITEBYTECODE`` says
    here: an installed wrapper starts from compiled bytecode, and the cache
    lives outside the source tree. The guardian's waiter chosen here
    (``KEPT_VARIABLES``) is the one measured.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENT_WRAPPER_") or k in KEPT_VARIABLES
    }
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
    path: Path,
    env: Mapping[str, str],
    *,
    peak_rss: bool = False,
    emit_to: Path | None = None,
) -> tuple[Measured, int]:
    """``cat PATH | python -c COUNT_LINES``: the measurement and the line count it printed.

    With ``emit_to``, ``PARSE_AND_EMIT`` instead, writing to that file; the
    count is then that of the lines it wrote. The peak RSS, when asked for,
    is the reader's.
    """
    probe = _Probe() if peak_rss else None
    counter_argv = [sys.executable, "-c", PARSE_AND_EMIT if emit_to else COUNT_LINES]
    sink = emit_to.open("wb") if emit_to else subprocess.PIPE
    start = time.perf_counter()
    cat = subprocess.Popen(
        ["cat", str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env
    )
    counter = subprocess.Popen(
        probe.argv(counter_argv) if probe else counter_argv,
        stdin=cat.stdout,
        stdout=sink,
        env=env,
    )
    assert cat.stdout is not None
    cat.stdout.close()
    if emit_to is None:
        assert counter.stdout is not None
        output = counter.stdout.read()  # a number: read at exit, it cannot fill the pipe first
    status = counter.wait()
    cat_status = cat.wait()
    wall, ended_at = time.perf_counter() - start, time.time()
    rss = None
    if probe is not None:
        rss, status = probe.read()
    if emit_to is None:
        assert counter.stdout is not None
        counter.stdout.close()
        text = output.decode().strip()
        count = int(text) if text.isdigit() else -1
    else:
        assert not isinstance(sink, int)
        sink.close()
        count = count_lines(emit_to)
    return Measured(wall, status or cat_status, ended_at, rss), count


def count_lines(path: Path) -> int:
    """Lines in a file, read in blocks."""
    with path.open("rb") as file:
        return sum(block.count(b"\n") for block in iter(lambda: file.read(1 << 20), b""))


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
