"""``agent-wrapper ps [DIR...]``: the runs under the default runs and batches
folders (or the folders given), running ones first, as a table that fits
the terminal or as JSON; and that table, which ``watch`` redraws.

Only reads run directories (``files.rundir``).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from wrapper.commands.find import default_folders, runs_of
from wrapper.core.config import ColorMode, use_color
from wrapper.core.cost import CostSum, cost_text
from wrapper.core.jsonout import dumps
from wrapper.files import rundir
from wrapper.files.rundir import RunSnapshot
from wrapper.sinks.pretty import plain

PROG = "agent-wrapper"

_GREEN, _RED, _CYAN, _YELLOW, _DIM, _RESET = (
    "\x1b[32m",
    "\x1b[31m",
    "\x1b[36m",
    "\x1b[33m",
    "\x1b[2m",
    "\x1b[0m",
)

#: The widest a label and a tool name are shown in the table (the run
#: directory gets what the terminal has left; ``--json`` cuts nothing).
LABEL_CHARS = 28
TOOL_CHARS = 16
#: The run directory keeps at least this much of its end on a narrow
#: terminal (its last folders: a label, a run id's end).
RUN_DIR_MIN_CHARS = 16
#: Shown for a figure the run does not report: unknown is not zero.
UNKNOWN = "-"

HEADER = ("LABEL", "STATE", "TOOL", "ELAPSED", "TOKENS", "COST", "STEERS", "OUTCOME", "RUN DIR")


def ordered(snaps: Sequence[RunSnapshot]) -> list[RunSnapshot]:
    """Running runs first, then those that ended; the newest first in each."""
    return sorted(snaps, key=lambda snap: (snap.ended, -(snap.started_at or 0.0)))


def elapsed_text(seconds: float | None) -> str:
    if seconds is None:
        return UNKNOWN
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def tokens_text(tokens: int | None) -> str:
    if tokens is None:
        return UNKNOWN
    if tokens < 10_000:
        return f"{tokens:,}"
    if tokens < 1_000_000:
        return f"{tokens / 1000:.1f}k"
    return f"{tokens / 1_000_000:.1f}M"


def steers_text(steers: tuple[int, int] | None) -> str:
    """Stop-hook steers + steers from outside."""
    return UNKNOWN if steers is None else f"{steers[0]}+{steers[1]}"


def _shown_path(path: Path, cwd: str) -> str:
    """``path`` relative to the working directory when it is below it."""
    whole = os.path.abspath(path)
    return whole[len(cwd) :] if whole.startswith(cwd) else whole


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _clip_left(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1 :]


def cells(snap: RunSnapshot, now: float, cwd: str) -> list[str]:
    label = snap.label or snap.run_id or snap.path.name
    return [
        plain(label),
        snap.state,
        plain(snap.current_tool or ""),
        elapsed_text(snap.elapsed(now)),
        tokens_text(snap.tokens),
        cost_text(snap.cost_usd, UNKNOWN),
        steers_text(snap.steers),
        plain(snap.outcome or "") if snap.ended else "",
        _shown_path(snap.path, cwd),
    ]


def table(
    snaps: Sequence[RunSnapshot],
    now: float,
    *,
    width: int | None,
    color: bool,
    cwd: Path | None = None,
) -> list[str]:
    """The table's lines, header first; with a ``width``, each line fits it
    (labels and tools cut, the run directory cut from its start)."""
    here = os.path.join(os.path.abspath(cwd or Path.cwd()), "")
    rows = [cells(snap, now, here) for snap in snaps]
    widths = _widths(rows)
    gap = 2
    if width is not None:
        # Labels and tools give way first, down to a readable few
        # characters, then the space between columns, then the start of
        # the run directory's path; a line still too long is cut.
        for column, widest, narrowest in ((0, LABEL_CHARS, 10), (2, TOOL_CHARS, 6)):
            over = sum(widths[:-1]) + gap * (len(HEADER) - 1) + RUN_DIR_MIN_CHARS - width
            limit = max(narrowest, min(widest, widths[column] - max(0, over)))
            for row in rows:
                row[column] = _clip(row[column], limit)
            widths = _widths(rows)
        if sum(widths[:-1]) + gap * (len(HEADER) - 1) + RUN_DIR_MIN_CHARS > width:
            gap = 1
        room = max(RUN_DIR_MIN_CHARS, width - sum(widths[:-1]) - gap * (len(HEADER) - 1))
        for row in rows:
            row[-1] = _clip_left(row[-1], room)
    lines = [_clip(_line(list(HEADER), widths, gap), width or 1 << 30)]
    for snap, row in zip(snaps, rows, strict=True):
        line = _clip(_line(row, widths, gap), width or 1 << 30)
        if color:
            line = _colored(line, snap)
        lines.append(line)
    return lines


def _widths(rows: list[list[str]]) -> list[int]:
    return [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(HEADER)]


def _line(row: list[str], widths: list[int], gap: int) -> str:
    padded = [cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=False)]
    return (" " * gap).join([*padded, row[-1]]).rstrip()


def _colored(line: str, snap: RunSnapshot) -> str:
    if not snap.ended:
        style = _YELLOW if snap.state == "waiting" else _CYAN
    else:
        style = _GREEN if snap.success else _RED
    return f"{style}{line}{_RESET}"


def summary(snaps: Sequence[RunSnapshot]) -> str:
    """One line: how many run, ended ok and not, and the cost so far (the
    known part, and how many runs' cost is unknown)."""
    running = sum(1 for snap in snaps if not snap.ended)
    ok = sum(1 for snap in snaps if snap.ended and snap.success)
    failed = sum(1 for snap in snaps if snap.ended and not snap.success)
    cost = CostSum.of(snap.cost_usd for snap in snaps).text
    return f"{running} running · {ok} ok · {failed} not ok · cost so far {cost}"


def folders_of(dirs: Sequence[str]) -> list[Path]:
    return [Path(folder) for folder in dirs] if dirs else default_folders()


def ps_main(dirs: Sequence[str], as_json: bool, color_mode: str = "auto") -> int:
    """``agent-wrapper ps [DIR...] [--json]``: 0 listed (none included), 2 a
    DIR that does not exist."""
    missing = [folder for folder in dirs if not Path(folder).exists()]
    if missing:
        print(
            f"{PROG} ps: {', '.join(missing)}: no such folder; give run directories, a batch's "
            "--runs-dir, or folders of them (default: the runs of this folder)",
            file=sys.stderr,
        )
        return 2
    folders = folders_of(dirs)
    snaps = ordered([rundir.snapshot(path) for path in runs_of(folders)])
    now = time.time()
    if as_json:
        sys.stdout.buffer.write(dumps([snap.to_json(now) for snap in snaps]) + b"\n")
        return 0
    if not snaps:
        where = " or ".join(str(folder) for folder in folders)
        print(f"{PROG} ps: no runs under {where}", file=sys.stderr)
        return 0
    terminal = os.isatty(1)
    width = shutil.get_terminal_size().columns if terminal else None
    color = use_color(ColorMode(color_mode), os.environ, terminal)
    print("\n".join(table(snaps, now, width=width, color=color)))
    return 0
