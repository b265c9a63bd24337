"""``agent-wrapper watch``: follow runs from another terminal or tmux pane.

``watch RUN_DIR`` shows what the run's ``--output pretty`` shows, rendered by
the same view from the events read back from its events.jsonl, from the
start (or ``--since now``), until its result; it exits with the run's exit
status. ``watch RUNS_DIR...`` shows the table ``ps`` prints, redrawn at most
once a second, until every run ended (``--follow``: until interrupted);
without a terminal it prints a line for each change instead.

Only reads files (``files.rundir``): it never talks to a run's socket, and
it looks at a file again only when a stat says it changed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from wrapper.commands import ps
from wrapper.commands.find import RunNotFound, by_name, default_folders, latest
from wrapper.core.config import ColorMode, use_color
from wrapper.core.cost import run_cost
from wrapper.core.events import ResultWritten
from wrapper.core.limits import (
    TICK_SECONDS,
    WATCH_POLL_SECONDS,
    WATCH_RESULT_DRAIN_SECONDS,
    WATCH_TABLE_SECONDS,
)
from wrapper.files import batch_mark, rundir
from wrapper.files.rundir import EventTail, RunSnapshot
from wrapper.process.invocation import wrapper_command
from wrapper.sinks.pretty import PrettyView

PROG = "agent-wrapper"

#: What ``--only`` can keep in the table.
STATES = ("running", "waiting", "finished", "ok", "failed")

_HOME, _CLEAR_LINE, _CLEAR_BELOW, _CLEAR_SCREEN = "\x1b[H", "\x1b[K", "\x1b[J", "\x1b[2J"


class WatchUsageError(Exception):
    """What was given names nothing to watch (exit 2)."""


@dataclass(frozen=True, slots=True)
class WatchOptions:
    color: ColorMode = ColorMode.AUTO
    since_now: bool = False
    follow: bool = False
    once: bool = False
    only: tuple[str, ...] = ()


def watch_main(targets: Sequence[str], use_latest: bool, options: WatchOptions) -> int:
    """``agent-wrapper watch [RUN_DIR | LABEL | --latest | RUNS_DIR...]``."""
    try:
        single, folders = _what(targets, use_latest)
    except (RunNotFound, WatchUsageError) as exc:
        print(f"{PROG} watch: {exc}", file=sys.stderr)
        return 2
    try:
        if single is not None:
            return watch_run(single, options)
        return watch_table(folders, options)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _what(targets: Sequence[str], use_latest: bool) -> tuple[Path | None, list[Path]]:
    """One run to follow, or the folders whose runs the table shows."""
    if use_latest:
        if targets:
            raise WatchUsageError("give run directories or --latest, not both")
        return latest(), []
    if not targets:
        return None, default_folders()
    if len(targets) == 1:
        path = Path(targets[0])
        if path.exists():
            return (path, []) if rundir.is_run_dir(path) else (None, [path])
        if "/" not in targets[0]:
            return by_name(targets[0]), []
    missing = [target for target in targets if not Path(target).exists()]
    if missing:
        raise WatchUsageError(
            f"{', '.join(missing)}: no such folder; give a run directory, a run's label, "
            f"--latest, or folders of runs (`{PROG} ps` lists the runs)"
        )
    return None, [Path(target) for target in targets]


# --- one run ---------------------------------------------------------------------


def watch_run(
    run_dir: Path,
    options: WatchOptions,
    out: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Follow one run until its result; its exit status, or 1 when its
    wrapper died without one."""
    stream = out if out is not None else sys.stdout
    terminal = stream.isatty()
    status: Mapping[str, Any] | None = rundir.read_status(run_dir)
    result: Mapping[str, Any] | None = rundir.read_result(run_dir, status)
    view = PrettyView(
        color=use_color(options.color, os.environ, terminal),
        label=(status or {}).get("label") if isinstance((status or {}).get("label"), str) else None,
        reply=f"{wrapper_command()} reply {shlex.quote(str(run_dir))}",
    )
    tail = EventTail(run_dir / rundir.EVENTS, from_end=options.since_now)
    started = rundir.epoch((status or {}).get("startedAt"))
    # A run over before the watch began has all its events in the log.
    result_since = time.monotonic() - WATCH_RESULT_DRAIN_SECONDS if result is not None else None
    last_tick = last_look = time.monotonic()
    while True:
        for stamped in tail.read():
            at = rundir.epoch(stamped.ts)
            if started is None:
                started = at
            elapsed = (at - started) if at is not None and started is not None else 0.0
            stream.write(view.render(stamped.event, elapsed))
            if isinstance(stamped.event, ResultWritten):
                stream.flush()
                result = rundir.read_result(run_dir, status)
                exit_status = (
                    result.get("exitStatus") if result is not None else stamped.event.exit_status
                )
                return exit_status if isinstance(exit_status, int) else 1
        stream.flush()
        monotonic = time.monotonic()
        if result is None and monotonic - last_look >= WATCH_TABLE_SECONDS:
            last_look = monotonic
            snap = rundir.snapshot(run_dir)
            status, result = snap.status or status, snap.result
            if snap.gone:
                pid = (snap.status or {}).get("wrapperPid")
                stream.write(f"{PROG} watch: the run's wrapper (pid {pid}) is gone; no result\n")
                stream.flush()
                return 1
        if result is not None:
            if result_since is None:
                result_since = monotonic
            elif monotonic - result_since >= WATCH_RESULT_DRAIN_SECONDS:
                return _result_line(view, stream, result, run_dir, started)
        if terminal and monotonic - last_tick >= TICK_SECONDS and started is not None:
            last_tick = monotonic
            stream.write(view.ticker(time.time() - started))
            stream.flush()
        sleep(WATCH_POLL_SECONDS)


def _result_line(
    view: PrettyView,
    stream: TextIO,
    result: Mapping[str, Any],
    run_dir: Path,
    started: float | None,
) -> int:
    """The result line the run's own view ends with, from result.json (a log
    that lost its last event, an older wrapper's)."""
    exit_status = result.get("exitStatus")
    error = result.get("error")
    outcome = result.get("outcome")
    ended = rundir.epoch(result.get("endedAt"))
    cost = run_cost(result)
    event = ResultWritten(
        path=str(run_dir / rundir.RESULT),
        outcome=outcome if isinstance(outcome, str) else "unknown",
        exit_status=exit_status if isinstance(exit_status, int) else 1,
        error=error if isinstance(error, dict) and "message" in error else None,
        cost_usd=cost.usd,
        cost_source=cost.source,
    )
    elapsed = ended - started if ended is not None and started is not None else 0.0
    stream.write(view.render(event, elapsed))
    stream.flush()
    return event.exit_status


# --- many runs -------------------------------------------------------------------


@dataclass(slots=True)
class RunsWatch:
    """The runs of some folders as last seen: a folder is listed again only
    when a stat says it changed, and a run's files read again only when a
    stat says they changed."""

    folders: list[Path]
    _runs: list[Path] = field(default_factory=list)
    _scanned: tuple[object, ...] | None = None
    _watched: list[Path] = field(default_factory=list)
    _seen: dict[Path, tuple[object, RunSnapshot]] = field(default_factory=dict)
    _files: dict[Path, tuple[str, str]] = field(default_factory=dict)
    _marks: dict[Path, tuple[object, tuple[int, list[str]] | None]] = field(default_factory=dict)

    def _run_dirs(self) -> list[Path]:
        key = tuple(rundir.change_mark(folder) for folder in (*self.folders, *self._watched))
        if key != self._scanned:
            runs: list[Path] = []
            watched: list[Path] = []
            listed: set[str] = set()
            for folder in self.folders:
                found, others = rundir.scan(folder)
                for path in found:
                    if os.path.abspath(path) not in listed:
                        listed.add(os.path.abspath(path))
                        runs.append(path)
                watched.extend(others)
            self._runs, self._watched = runs, watched
            # The key of what was just listed: a change from here on is seen.
            self._scanned = tuple(
                rundir.change_mark(folder) for folder in (*self.folders, *watched)
            )
        return self._runs

    def look(self) -> list[RunSnapshot]:
        snaps = []
        files = self._files
        for path in self._run_dirs():
            where = files.get(path)
            if where is None:
                # Joined once: a look stats two files of every run each second.
                where = files[path] = (str(path / rundir.STATUS), str(path / rundir.RESULT))
            marks = (rundir.change_mark(where[0]), rundir.change_mark(where[1]))
            seen = self._seen.get(path)
            if seen is not None and seen[0] == marks:
                snap = seen[1]
                if not snap.finished and snap.status is not None:
                    # Its wrapper may have died without a word in its files.
                    alive = rundir.wrapper_alive(snap.status.get("wrapperPid"))
                    if alive == snap.gone:
                        snap = RunSnapshot(snap.path, snap.status, snap.result, gone=not alive)
            else:
                snap = rundir.snapshot(path, result_there=marks[1] is not None)
            self._seen[path] = (marks, snap)
            snaps.append(snap)
        return snaps

    def queued(self, snaps: Sequence[RunSnapshot]) -> int:
        """Lines of running batches (in these folders) not started yet."""
        count = 0
        started: set[str] | None = None
        for folder in {*self.folders, *(snap.path.parent for snap in snaps)}:
            mark = rundir.change_mark(folder / batch_mark.MARK_NAME)
            if mark is None:
                continue
            seen = self._marks.get(folder)
            if seen is None or seen[0] != mark:
                seen = (mark, batch_mark.running_lines(folder))
                self._marks[folder] = seen
            lines = seen[1]
            if lines is not None and batch_mark.alive(lines[0]):
                if started is None:
                    started = {os.path.abspath(snap.path) for snap in snaps}
                count += sum(1 for run_dir in lines[1] if run_dir not in started)
        return count


def _keep(snap: RunSnapshot, only: tuple[str, ...]) -> bool:
    if not only:
        return True
    states = {snap.state}
    if snap.ended:
        states.add("finished")
        states.add("ok" if snap.success else "failed")
    elif snap.state != "waiting":
        states.add("running")
    return bool(states & set(only))


def watch_table(
    folders: list[Path],
    options: WatchOptions,
    out: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """The table of the runs in ``folders`` until every run ended: 0 when
    every one ended ok, 1 otherwise (``--once`` and ``--follow``: 0)."""
    stream = out if out is not None else sys.stdout
    terminal = stream.isatty()
    color = use_color(options.color, os.environ, terminal)
    runs = RunsWatch(folders)
    last: dict[Path, tuple[str, str | None, str | None]] = {}
    drawn = said_waiting = False
    while True:
        snaps = ps.ordered(runs.look())
        queued = runs.queued(snaps)
        now = time.time()
        over = bool(snaps) and queued == 0 and all(snap.ended for snap in snaps)
        shown = [snap for snap in snaps if _keep(snap, options.only)]
        head = ps.summary(snaps) + (f" · {queued} queued" if queued else "")
        if options.once:
            lines = [*ps.table(shown, now, width=_width(terminal), color=color), head]
            stream.write("\n".join(lines) + "\n")
            stream.flush()
            return 0
        if terminal:
            lines = _fit([*ps.table(shown, now, width=_width(terminal), color=color), head])
            prefix = _HOME if drawn else _CLEAR_SCREEN + _HOME
            stream.write(prefix + "".join(line + _CLEAR_LINE + "\n" for line in lines))
            stream.write(_CLEAR_BELOW)
            drawn = True
        else:
            if not snaps and not said_waiting:
                where = " and ".join(str(folder) for folder in folders)
                stream.write(f"no runs under {where} yet; waiting for them (Ctrl-C to stop)\n")
                said_waiting = True
            _changes(stream, shown, last, now)
        if over and not options.follow:
            if not terminal:
                stream.write(head + "\n")
            stream.flush()
            return 0 if all(snap.success for snap in snaps) else 1
        stream.flush()
        sleep(WATCH_TABLE_SECONDS)


def _width(terminal: bool) -> int | None:
    return shutil.get_terminal_size().columns if terminal else None


def _fit(lines: list[str]) -> list[str]:
    """The table cut to the terminal's height, the summary kept last."""
    height = shutil.get_terminal_size().lines - 1
    if len(lines) <= height or height < 3:
        return lines
    rows = lines[: height - 2]
    return [*rows, f"… {len(lines) - 1 - len(rows)} more runs (ps lists them all)", lines[-1]]


def _changes(
    stream: TextIO,
    snaps: Sequence[RunSnapshot],
    last: dict[Path, tuple[str, str | None, str | None]],
    now: float,
) -> None:
    """A line for each run whose state, tool or outcome changed since the
    last look (CI logs: no redrawing)."""
    for snap in snaps:
        seen = (snap.state, snap.current_tool, snap.outcome if snap.ended else None)
        if last.get(snap.path) == seen:
            continue
        last[snap.path] = seen
        name = snap.label or snap.run_id or snap.path.name
        clock = time.strftime("%H:%M:%S", time.localtime(now))
        if snap.ended:
            what = (
                f"{snap.state} {snap.outcome or ''} in {ps.elapsed_text(snap.elapsed(now))}, "
                f"tokens {ps.tokens_text(snap.tokens)}, cost {snap.cost.text}, "
                f"steers {ps.steers_text(snap.steers)}"
            )
        else:
            tool = f" ({snap.current_tool})" if snap.current_tool else ""
            what = f"{snap.state}{tool}"
        stream.write(f"{clock} {name}: {what}\n")
