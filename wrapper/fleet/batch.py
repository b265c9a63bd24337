"""A batch: the runs of a spec, several at once, in one process and one trio loop.

The batch owns the process: the stop signals (each reaches every run going
on; a run not started yet ends ``aborted`` at once, with its result.json),
reaping the orphans a subreaper adopts, the guardian (told of each run as
it starts) and stdout. Each run is a ``Run`` like ``agent-wrapper run``'s,
writing its own directory and result.json; its cleanup touches only what
is its own (``RunClaim``). What is left below the wrapper at the end that
no run could claim (a process that cleared its environment and left the
agent's session) is ended then and reported in batch.json.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import trio

from wrapper.core.config import OUTPUT_FLUSH_TIMEOUT, ColorMode, OutputMode, use_color
from wrapper.core.events import Event
from wrapper.core.limits import ORPHAN_KILL_AFTER, PROGRESS_TICK
from wrapper.core.signals import STOP_SIGNALS
from wrapper.core.timefmt import iso
from wrapper.files.artifacts import atomic_write, dump_json, ensure_dir
from wrapper.fleet.owner import reap_orphans_on_sigchld, relay_signals
from wrapper.fleet.report import RunEntry, batch_json, junit_xml
from wrapper.fleet.report_input import ReportInputError, write_html
from wrapper.process import guardian, proctree
from wrapper.sinks.stream import OutputPump
from wrapper.supervision.prepare import PreparedRun
from wrapper.supervision.run import (
    LiveOutput,
    Run,
    resolve_output,
)


@dataclass(slots=True, eq=False)
class BatchRun:
    """One run of the batch: where it is in the spec, and how it is going."""

    name: str
    label: str | None
    line: int
    prepared: PreparedRun
    environ: Mapping[str, str]
    state: str = "waiting"
    run: Run | None = None
    result: Mapping[str, Any] | None = None
    started: float | None = None
    ended: float | None = None

    @property
    def outcome(self) -> str | None:
        outcome = (self.result or {}).get("outcome")
        return outcome if isinstance(outcome, str) else None

    def entry(self) -> RunEntry:
        duration = (
            self.ended - self.started if self.started is not None and self.ended is not None else 0
        )
        return RunEntry(
            name=self.name,
            label=self.label,
            line=self.line,
            run_dir=str(self.prepared.config.run_dir),
            result=self.result,
            duration=duration,
        )


@dataclass(slots=True)
class Batch:
    runs: list[BatchRun]
    runs_dir: Path
    jobs: int
    output: OutputMode
    junit: Path | None = None
    html: Path | None = None
    color: ColorMode = ColorMode.AUTO
    #: The first stop signal received (before the loop started included).
    stopped_by: signal.Signals | None = None
    warnings: list[dict[str, str]] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)

    def going(self) -> list[Run]:
        return [item.run for item in self.runs if item.run is not None and item.state == "running"]


async def run_batch(batch: Batch, early_signals: list[signal.Signals]) -> int:
    """Run every run of ``batch``, at most ``jobs`` at once, then write
    batch.json (and the JUnit report); returns the batch's exit status."""
    mode = resolve_output(batch.output)
    pump = OutputPump(1) if mode in (OutputMode.JSONL, OutputMode.PRETTY) else None
    terminal = os.isatty(1)
    color = use_color(batch.color, os.environ, terminal)
    progress = (
        Progress(batch, pump, color=color, redraw=terminal) if mode is OutputMode.PRETTY else None
    )
    clock_start = trio.current_time()
    if early_signals:
        batch.stopped_by = early_signals[0]

    def stop(sig: signal.Signals) -> list[Run]:
        if batch.stopped_by is None:
            batch.stopped_by = sig
        return batch.going()

    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay_signals, signals, stop)
            if proctree.owns_process():
                nursery.start_soon(reap_orphans_on_sigchld)
            if pump is not None:
                nursery.start_soon(pump.run)
            if progress is not None:
                nursery.start_soon(progress.tick, clock_start)
            limiter = trio.CapacityLimiter(batch.jobs)
            try:
                async with trio.open_nursery() as runs:
                    # In spec order: each run takes its place before the next starts.
                    for item in batch.runs:
                        await limiter.acquire_on_behalf_of(item)
                        runs.start_soon(_one, batch, item, limiter, _Shown(pump, mode, progress))
            except Exception as exc:  # a bug must still end in batch.json
                traceback.print_exception(exc, file=sys.stderr)
                batch.warnings.append(
                    {
                        "code": "internal",
                        "message": f"the batch failed (please report it): {type(exc).__name__}",
                    }
                )
            guardian.close_announcements()
            await _end_unclaimed(batch)
            exit_status = _exit_status(batch)
            _write_reports(batch, exit_status)
            if progress is not None:
                progress.finish(trio.current_time() - clock_start)
            if pump is not None:
                with trio.move_on_after(OUTPUT_FLUSH_TIMEOUT):
                    await pump.drain()
            nursery.cancel_scope.cancel()
    return exit_status


def report_stopped_before_start(
    runs_dir: Path, junit: Path | None, sig: signal.Signals, *, html: Path | None = None
) -> int:
    """Write the reports of a batch that a stop signal ended while its spec
    was being checked (no run started), and return its exit status."""
    batch = Batch(
        runs=[], runs_dir=runs_dir, jobs=1, output=OutputMode.QUIET, junit=junit, html=html
    )
    batch.stopped_by = sig
    batch.warnings.append(
        {
            "code": "stopped_before_start",
            "message": f"stopped by {sig.name} while the spec was being checked: no run started",
        }
    )
    exit_status = _exit_status(batch)
    _write_reports(batch, exit_status)
    return exit_status


@dataclass(frozen=True, slots=True)
class _Shown:
    """How the batch shows its runs on stdout."""

    pump: OutputPump | None
    mode: OutputMode
    progress: Progress | None


async def _one(batch: Batch, item: BatchRun, limiter: trio.CapacityLimiter, shown: _Shown) -> None:
    """Run ``item``, whose place among the runs going on it already has."""
    pump, mode, progress = shown.pump, shown.mode, shown.progress
    try:
        config = item.prepared.config
        # The guardian knows of the run before anything of it exists.
        guardian.announce(config.run_id, config.run_dir, config.result_path, more=True)
        live = None
        if pump is not None and mode is OutputMode.JSONL:
            live = LiveOutput(pump, _tagged(pump, config.run_id))
        elif pump is not None:
            live = LiveOutput(pump, _ignore)
        run = item.run = Run(
            config,
            item.prepared.dialect,
            item.prepared.launch,
            item.environ,
            live=live,
            claim=proctree.RunClaim(config.run_id),
            # The pretty output says how each run ended; elsewhere stderr does.
            say_at_end=mode is not OutputMode.PRETTY,
            # One trace a run, whatever TRACEPARENT the batch was given.
            trace_of_its_own=True,
        )
        item.state, item.started = "running", time.monotonic()
        if batch.stopped_by is not None:
            run.interrupt(batch.stopped_by)
        if progress is not None:
            progress.changed()
        try:
            await run.execute()
        finally:
            item.ended = time.monotonic()
            item.result = run.result
            item.state = "done"
            if progress is not None:
                progress.finished(item)
    finally:
        limiter.release_on_behalf_of(item)


def _tagged(pump: OutputPump, run_id: str) -> Any:
    tag = b',"runId":' + orjson.dumps(run_id) + b"}\n"

    def show(_event: Event, line: bytes) -> None:
        # Every event line is one JSON object ending "}\n": the run's id goes last.
        pump.write(line[:-2] + tag)

    return show


def _ignore(_event: Event, _line: bytes) -> None:
    return None


async def _end_unclaimed(batch: Batch) -> None:
    """End what is still below the wrapper that no run claimed, and say so."""
    left = proctree.leftovers()
    if not left:
        return
    what = proctree.describe(left)
    proctree.signal_each(left, signal.SIGTERM)
    deadline = trio.current_time() + ORPHAN_KILL_AFTER
    while trio.current_time() < deadline:
        left = proctree.still_alive(left)
        if not left:
            break
        await trio.sleep(0.05)
    if left:
        proctree.signal_each(left, signal.SIGKILL)
    batch.warnings.append(
        {
            "code": "leftover_processes",
            "message": f"{what} outlived the runs and could not be told apart as one run's "
            "(no run id in its environment, a session of its own); ended at the batch's end",
        }
    )


def _exit_status(batch: Batch) -> int:
    if batch.stopped_by is not None:
        return 128 + int(batch.stopped_by)
    failed = any(w["code"] == "internal" for w in batch.warnings)
    return 0 if not failed and all(item.outcome == "ok" for item in batch.runs) else 1


def _write_reports(batch: Batch, exit_status: int) -> None:
    entries = [item.entry() for item in batch.runs]
    report = batch_json(
        entries,
        started_at=iso(batch.started_at),
        ended_at=iso(time.time()),
        exit_status=exit_status,
        warnings=batch.warnings,
    )
    path = batch.runs_dir / "batch.json"
    written = False
    try:
        ensure_dir(path.parent)
        atomic_write(path, dump_json(report))
        written = True
    except OSError as exc:
        _say(f"could not write {path}: {exc.strerror or exc}")
    if batch.junit is not None:
        try:
            ensure_dir(batch.junit.parent)
            atomic_write(batch.junit, junit_xml(entries))
        except OSError as exc:
            _say(f"could not write {batch.junit}: {exc.strerror or exc}")
    if batch.html is not None:
        _write_html(batch.html, path, written)
    for warning in batch.warnings:
        _say(f"warning: {warning['message']}")


def _write_html(html: Path, batch_file: Path, written: bool) -> None:
    """The HTML report, read back from batch.json and the runs' directories as
    ``agent-wrapper report`` would."""
    if not written:
        _say(f"could not write {html}: the page is made from {batch_file}, which is missing")
        return
    try:
        write_html([batch_file], html)
    except (OSError, ReportInputError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _say(f"could not write {html}: {reason}")


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"agent-wrapper: {line}", file=sys.stderr, flush=True)


class Progress:
    """The pretty output: a line per finished run and one progress line
    (done / running / failed / waiting, elapsed), redrawn on a terminal."""

    def __init__(self, batch: Batch, pump: OutputPump | None, *, color: bool, redraw: bool) -> None:
        self.batch = batch
        self.pump = pump
        self.color = color
        #: On a terminal the progress line is redrawn in place (colour or not);
        #: elsewhere it is written out when something changes.
        self.redraw = redraw
        self.started = trio.current_time()
        self._drawn = False

    def _write(self, text: str) -> None:
        if self.pump is not None:
            self.pump.write(text.encode())

    def line(self, elapsed: float) -> str:
        runs = self.batch.runs
        done = sum(item.state == "done" for item in runs)
        failed = sum(item.state == "done" and item.outcome != "ok" for item in runs)
        running = sum(item.state == "running" for item in runs)
        waiting = sum(item.state == "waiting" for item in runs)
        minutes, seconds = divmod(int(elapsed), 60)
        return (
            f"[batch] {done}/{len(runs)} done, {running} running, {failed} failed, "
            f"{waiting} waiting, {minutes}:{seconds:02d}"
        )

    def _redraw(self) -> None:
        text = self.line(trio.current_time() - self.started)
        if self.redraw:
            self._write(f"\r\x1b[K{text}")
            self._drawn = True
        else:
            self._write(text + "\n")

    def _clear(self) -> None:
        if self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False

    def changed(self) -> None:
        if self.redraw:
            self._redraw()

    def finished(self, item: BatchRun) -> None:
        self._clear()
        result = item.result or {}
        outcome = item.outcome or "no result"
        seconds = (item.ended or 0) - (item.started or 0)
        mark = "ok" if outcome == "ok" else "FAILED"
        if self.color:
            mark = f"\x1b[32m{mark}\x1b[0m" if outcome == "ok" else f"\x1b[31m{mark}\x1b[0m"
        error = result.get("error")
        why = f": {error.get('message')}" if isinstance(error, dict) else ""
        where = (result.get("artifacts") or {}).get("result") or str(item.prepared.config.run_dir)
        self._write(f"{mark} {item.name} ({outcome}, {seconds:.1f}s){why} [{where}]\n")
        if any(other.state != "done" for other in self.batch.runs):
            self._redraw()

    async def tick(self, _start: float) -> None:
        if not self.redraw:
            return
        while True:
            await trio.sleep(PROGRESS_TICK)
            self._redraw()

    def finish(self, elapsed: float) -> None:
        self._clear()
        outcome = "stopped" if self.batch.stopped_by is not None else "finished"
        self._write(f"{self.line(elapsed)} ({outcome}; {self.batch.runs_dir / 'batch.json'})\n")
