"""Finding runs: the folders ``ps`` and ``watch`` list by default, and what
``status``, ``steer``, ``abort``, ``reply`` and ``watch`` take where a run
directory is asked (the directory, ``--latest``, or a run's label or id).

Only reads run directories (``files.rundir``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from wrapper.core.config import DEFAULT_BATCHES_ROOT, DEFAULT_RUNS_ROOT
from wrapper.files import batch_mark, rundir

PROG = "agent-wrapper"

#: How many matching runs an ambiguous label's error names.
LISTED_MATCHES = 10


class RunNotFound(Exception):
    """No run, or more than one, answers to what was given; the text says
    what to give instead (a usage error: exit 2)."""


def default_folders(cwd: Path | None = None) -> list[Path]:
    """The runs folder ``run`` writes to by default, and the batches folder
    (each batch's runs one level below), of ``cwd``."""
    base = cwd if cwd is not None else Path.cwd()
    return [base / DEFAULT_RUNS_ROOT, base / DEFAULT_BATCHES_ROOT]


def runs_of(folders: Sequence[Path]) -> list[Path]:
    """Every run directory the folders stand for, each once."""
    seen: set[Path] = set()
    found: list[Path] = []
    for folder in folders:
        for path in rundir.runs_in(folder):
            key = path.resolve()
            if key not in seen:
                seen.add(key)
                found.append(path)
    return found


def _started(path: Path) -> float:
    # status.json alone: a result.json can be megabytes, and says the same.
    started = rundir.epoch((rundir.read_status(path) or {}).get("startedAt"))
    if started is not None:
        return started
    mark = rundir.change_mark(path / rundir.STATUS) or rundir.change_mark(path / rundir.RESULT)
    return mark[2] / 1e9 if mark is not None else 0.0


def latest(cwd: Path | None = None) -> Path:
    """The run started last among the default folders of ``cwd``."""
    runs = runs_of(default_folders(cwd))
    if not runs:
        raise RunNotFound(
            f"--latest: no run under {DEFAULT_RUNS_ROOT} or {DEFAULT_BATCHES_ROOT} of "
            f"{cwd if cwd is not None else Path.cwd()}: run it from the folder the runs were "
            "started in, or give the run directory"
        )
    return max(runs, key=_started)


def by_name(name: str, cwd: Path | None = None) -> Path:
    """The one run of the default folders whose label (or run id) is ``name``."""
    matches = [path for path in runs_of(default_folders(cwd)) if name in _names(path)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFound(
            f"{name!r} is neither a run directory nor the label of a run under "
            f"{DEFAULT_RUNS_ROOT} or {DEFAULT_BATCHES_ROOT}; `{PROG} ps` lists the runs "
            "(give a run directory as ps shows it)"
        )
    shown = "\n  ".join(str(path) for path in matches[:LISTED_MATCHES])
    more = (
        f"\n  ... and {len(matches) - LISTED_MATCHES} more" if len(matches) > LISTED_MATCHES else ""
    )
    raise RunNotFound(
        f"{len(matches)} runs are labelled {name!r}; give the run directory of one:\n  "
        f"{shown}{more}"
    )


def _names(path: Path) -> tuple[object, ...]:
    """The label and run id a run answers to (status.json's; result.json's
    only when there is no status.json, since it can be megabytes)."""
    found = rundir.read_status(path) or rundir.read_result(path) or {}
    return found.get("label"), found.get("runId")


def resolve(given: str | None, use_latest: bool, cwd: Path | None = None) -> Path:
    """The run directory a command acts on: ``given`` when it is a directory
    (or a path a command explains itself), the newest run with
    ``use_latest``, else the run labelled ``given``. Raises ``RunNotFound``."""
    if use_latest:
        if given is not None:
            raise RunNotFound(f"give a run directory ({given}) or --latest, not both")
        return latest(cwd)
    if given is None:
        raise RunNotFound(
            f"give a run directory, a run's label, or --latest (`{PROG} ps` lists runs)"
        )
    path = Path(given)
    if path.exists() or "/" in given or given in (".", ".."):
        return path
    try:
        return by_name(given, cwd)
    except RunNotFound:
        # A line of a running batch that has not started has no directory
        # yet: the command says it is queued.
        if batch_mark.queued_line(path) is not None:
            return path
        raise
