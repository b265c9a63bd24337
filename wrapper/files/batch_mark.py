"""A running batch's mark in its runs folder, and finding it from outside.

While a batch runs, ``RUNS_DIR/.agent-wrapper-batch`` says so: the pid a
person stops it by (the process the runner started) and the run directory
of every line it will run. ``steer`` and ``abort`` of a line's directory
that does not exist yet read it to say that the line has not started yet,
and how to stop the batch, instead of calling the path no directory. The
batch removes it at its end; a mark whose pid is gone is a killed batch's
and says nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from wrapper.files.artifacts import atomic_write, dump_json

#: The mark's file name in the runs folder.
MARK_NAME = ".agent-wrapper-batch"
#: A mark larger than this is not a batch's (a line is a few hundred bytes;
#: this holds a spec of tens of thousands of lines).
MARK_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Line:
    """A line of the batch: its place in the spec, its label, its run directory."""

    line: int
    label: str | None
    run_dir: Path


@dataclass(frozen=True, slots=True)
class QueuedLine:
    """A line of a running batch whose run has not started."""

    line: int
    label: str | None
    runs_dir: Path
    pid: int


def write(runs_dir: Path, pid: int, lines: Sequence[Line]) -> None:
    """Mark ``runs_dir`` as a running batch's; a failure only means that
    ``steer`` and ``abort`` cannot say a line is queued."""
    mark = {
        "pid": pid,
        "runs": [
            {"line": item.line, "label": item.label, "runDir": os.path.normpath(item.run_dir)}
            for item in lines
        ],
    }
    with contextlib.suppress(OSError):
        runs_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(runs_dir / MARK_NAME, dump_json(mark), durable=False)


def remove(runs_dir: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(runs_dir / MARK_NAME)


def queued_line(path: Path) -> QueuedLine | None:
    """The line of a running batch whose run directory ``path`` is, when
    that directory does not exist yet, else None."""
    path = Path(os.path.normpath(path.absolute()))
    if path.exists():
        return None
    for folder in path.parents:
        mark = _read(folder / MARK_NAME)
        if mark is None:
            continue
        pid = mark.get("pid")
        runs = mark.get("runs")
        if not isinstance(pid, int) or not isinstance(runs, list) or not _alive(pid):
            return None
        for run in runs:
            if not isinstance(run, dict) or run.get("runDir") != str(path):
                continue
            line, label = run.get("line"), run.get("label")
            return QueuedLine(
                line=line if isinstance(line, int) else 0,
                label=label if isinstance(label, str) else None,
                runs_dir=folder,
                pid=pid,
            )
        return None
    return None


def running_lines(runs_dir: Path) -> tuple[int, list[str]] | None:
    """The pid of the batch running in ``runs_dir`` and the run directory of
    each of its lines (as the mark names them: absolute, normalized), or
    None when no batch marks it."""
    mark = _read(runs_dir / MARK_NAME)
    if mark is None:
        return None
    pid, runs = mark.get("pid"), mark.get("runs")
    if not isinstance(pid, int) or not isinstance(runs, list):
        return None
    dirs = [run.get("runDir") for run in runs if isinstance(run, dict)]
    return pid, [run_dir for run_dir in dirs if isinstance(run_dir, str)]


def alive(pid: int) -> bool:
    """Whether the batch with this pid still runs."""
    return _alive(pid)


def _read(path: Path) -> dict[str, object] | None:
    try:
        with open(path, "rb") as file:
            data = file.read(MARK_MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > MARK_MAX_BYTES:
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
