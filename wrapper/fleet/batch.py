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
import socket
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
from wrapper.files import batch_mark
from wrapper.files.artifacts import atomic_write, dump_json, ensure_dir
from wrapper.fleet.budget import NOT_STARTED_CAP, FleetBudget, not_started_result
from wrapper.fleet.owner import reap_orphans_on_sigchld, relay_signals
from wrapper.fleet.passing import Expectation, passed
from wrapper.fleet.report import RunEntry, SpecInfo, SuiteInfo, batch_json, junit_xml, suite_name
from wrapper.fleet.report_input import ReportInputError, write_html
from wrapper.process import guardian, proctree
from wrapper.sinks.stream import OutputPump
from wrapper.supervision.prepare import PreparedRun
from wrapper.supervision.result_file import WARNINGS_AT_END
from wrapper.supervision.run import Run
from wrapper.supervision.run_output import LiveOutput


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
    #: Its place among the spec's runs, from 0.
    index: int = 0
    line_digest: str | None = None
    expect: Expectation | None = None
    #: An earlier run of the same line kept by --skip-passed or --skip-finished.
    reused: bool = False
    #: Why a line that had run before runs again.
    rerun: str | None = None
    #: Why the line was never started (``NOT_STARTED_CAP``), else None.
    not_started: str | None = None

    @property
    def outcome(self) -> str | None:
        outcome = (self.result or {}).get("outcome")
        return outcome if isinstance(outcome, str) else None

    @property
    def passed(self) -> bool:
        return passed(self.result, self.expect)

    def entry(self) -> RunEntry:
        duration = (
            self.ended - self.started if self.started is not None and self.ended is not None else 0
        )
        if self.reused:
            took = (self.result or {}).get("durationMs")
            duration = took / 1000 if isinstance(took, int) and took >= 0 else 0
        return RunEntry(
            name=self.name,
            label=self.label,
            line=self.line,
            run_dir=str(self.prepared.config.run_dir),
            result=self.result,
            duration=duration,
            index=self.index,
            line_digest=self.line_digest,
            expect=self.expect,
            reused=self.reused,
            rerun=self.rerun,
        )


@dataclass(slots=True)
class Batch:
    """The runs of one batch and where they go."""

    runs: list[BatchRun]
    runs_dir: Path
    jobs: int
    output: OutputMode
    junit: Path | None = None
    html: Path | None = None
    color: ColorMode = ColorMode.AUTO
    #: Which shard of the spec this is, ``(I, N)``.
    shard: tuple[int, int] = (1, 1)
    spec: SpecInfo | None = None
    #: Exit 0 whenever every line ran to its end, whatever the outcomes.
    exit_zero: bool = False
    #: The first stop signal received (before the loop started included).
    stopped_by: signal.Signals | None = None
    warnings: list[dict[str, str]] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    #: The caps on what this invocation's runs spend (``--batch-max-cost``,
    #: ``--batch-max-tokens``), None for no caps.
    caps: tuple[float | None, int | None] = (None, None)
    budget: FleetBudget | None = None

    def going(self) -> list[Run]:
        return [item.run for item in self.runs if item.run is not None and item.state == "running"]


def batch_output(mode: OutputMode) -> OutputMode:
    """What a batch shows on stdout: ``auto`` is the pretty view, redrawn on a
    terminal and a line per run's start and end elsewhere (every event of
    every run, ``jsonl``, is for programs, and asked for by name)."""
    return OutputMode.PRETTY if mode is OutputMode.AUTO else mode


async def run_batch(batch: Batch, early_signals: list[signal.Signals]) -> int:
    """Run every run of ``batch``, at most ``jobs`` at once, then write
    batch.json (and the JUnit report); returns the batch's exit status."""
    mode = batch_output(batch.output)
    pump = OutputPump(1) if mode in (OutputMode.JSONL, OutputMode.PRETTY) else None
    terminal = os.isatty(1)
    color = use_color(batch.color, os.environ, terminal)
    progress = (
        Progress(batch, pump, color=color, redraw=terminal) if mode is OutputMode.PRETTY else None
    )
    clock_start = trio.current_time()
    budget = batch.budget = FleetBudget(*batch.caps, on_reached=lambda why: _over_cap(batch, why))
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
            _mark_running(batch)
            try:
                async with trio.open_nursery() as runs:
                    # In spec order: each run takes its place before the next starts.
                    for item in batch.runs:
                        if item.reused:
                            continue
                        await limiter.acquire_on_behalf_of(item)
                        if budget.reached is not None:
                            limiter.release_on_behalf_of(item)
                            _not_started(item, budget.reached, progress)
                            continue
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
            _say_not_started(batch)
            batch_mark.remove(batch.runs_dir)
            await _end_unclaimed(batch)
            exit_status = _exit_status(batch)
            if not _write_reports(batch, exit_status) and exit_status < 128:
                exit_status = BATCH_FAILED
            if progress is not None:
                progress.finish(trio.current_time() - clock_start)
            if pump is not None:
                with trio.move_on_after(OUTPUT_FLUSH_TIMEOUT):
                    await pump.drain()
            nursery.cancel_scope.cancel()
    return exit_status


def _mark_running(batch: Batch) -> None:
    """Say in the runs folder, while the batch runs, which lines it will run
    and how it is stopped: a line not started yet has no directory to say so."""
    lines = [
        batch_mark.Line(item.line, item.label, item.prepared.config.run_dir)
        for item in batch.runs
        if not item.reused
    ]
    batch_mark.write(batch.runs_dir, guardian.wrapper_pid(), lines)


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
    if not _write_reports(batch, exit_status) and exit_status < 128:
        exit_status = BATCH_FAILED
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
        if batch.budget is not None and batch.budget.reached is not None:
            # Reached since it took its place.
            _not_started(item, batch.budget.reached, progress)
            return
        config = item.prepared.config
        keep_earlier_result(config.result_path, config.run_dir)
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
            # The batch says how each run ended, with its label (``_said_at_end``).
            say_at_end=False,
            # One trace a run, whatever TRACEPARENT the batch was given.
            trace_of_its_own=True,
        )
        if batch.budget is not None:
            batch.budget.watch(run.spending)
        item.state, item.started = "running", time.monotonic()
        if batch.stopped_by is not None:
            run.interrupt(batch.stopped_by)
        if progress is not None:
            progress.started(item)
        try:
            await run.execute()
        finally:
            if batch.budget is not None:
                batch.budget.ended(run.spending)
            item.ended = time.monotonic()
            item.result = run.result
            item.state = "done"
            if progress is not None:
                progress.finished(item)
            else:
                _said_at_end(item)
    finally:
        limiter.release_on_behalf_of(item)


def _over_cap(batch: Batch, why: str) -> None:
    """The batch reached a cap: the runs going on are stopped (``budget_exceeded``);
    no line starts from now on."""
    for run in batch.going():
        run.stop_for_cap(why)


def _not_started(item: BatchRun, why: str, progress: Progress | None) -> None:
    """A line the batch's cap kept from starting: its entry says so (it has
    no run directory, no result.json; ``--skip-passed`` runs it next time)."""
    item.not_started = NOT_STARTED_CAP
    item.state = "done"
    item.result = not_started_result(why)
    if progress is not None:
        progress.not_started(item)


def _say_not_started(batch: Batch) -> None:
    left = [item.name for item in batch.runs if item.not_started is not None]
    if left and batch.budget is not None:
        batch.warnings.append(batch.budget.not_started_warning(left))


def _said_at_end(item: BatchRun) -> None:
    """On stderr, where no pretty view says it: the run's gravest warnings
    and, when it did not pass, how it ended; each line names the run. A run
    that ended as its line's ``expect`` says passed: nothing to say."""
    result = item.result or {}
    for warning in result.get("warnings") or ():
        if isinstance(warning, Mapping) and warning.get("code") in WARNINGS_AT_END:
            text = " ".join(str(warning.get("message")).split())
            _say(f"{item.name}: warning: {text}")
    if item.passed:
        return
    where = (result.get("artifacts") or {}).get("result") or str(item.prepared.config.result_path)
    if item.result is None:
        _say(f"{item.name}: the run wrote no result.json (expected at {where})")
        return
    error = result.get("error")
    why = str(error.get("message")) if isinstance(error, Mapping) else "it ended ok"
    if item.expect is not None:
        why = f"expected {item.expect.describe()}: {why}"
    _say(f"{item.name}: {item.outcome or 'error'}: {why} (result: {where})")


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


#: The batch's exit status when the batch itself failed (a report or a
#: result.json that could not be written, an internal error): not the
#: agents' doing, so an engine may retry it.
BATCH_FAILED = 3


def _exit_status(batch: Batch) -> int:
    """0 every run passed, 1 some run did not, 3 the batch itself failed,
    128+N stopped by signal N; with ``exit_zero``, 0 for 1."""
    if batch.stopped_by is not None:
        return 128 + int(batch.stopped_by)
    broken = any(w["code"] == "internal" for w in batch.warnings) or any(
        item.result is None or item.result.get("exitStatus") == BATCH_FAILED for item in batch.runs
    )
    if broken:
        return BATCH_FAILED
    if batch.budget is not None and batch.budget.reached is not None:
        return 1  # lines did not run to their end: not even --exit-zero's 0
    if batch.exit_zero:
        return 0
    return 0 if all(item.passed for item in batch.runs) else 1


def _write_reports(batch: Batch, exit_status: int) -> bool:
    """Write batch.json (and the JUnit report); False when one could not be."""
    entries = [item.entry() for item in batch.runs]
    ended = time.time()
    report = batch_json(
        entries,
        started_at=iso(batch.started_at),
        ended_at=iso(ended),
        exit_status=exit_status,
        warnings=batch.warnings,
        shard=batch.shard,
        spec=batch.spec,
    )
    for item, said in zip(batch.runs, report["results"], strict=True):
        said["notStarted"] = item.not_started
    report["spend"] = batch.budget.to_json() if batch.budget is not None else None
    path = batch.runs_dir / "batch.json"
    written = report_written = False
    try:
        ensure_dir(path.parent)
        atomic_write(path, dump_json(report))
        written = report_written = True
    except OSError as exc:
        _say(f"could not write {path}: {exc.strerror or exc}; check that its folder is writable")
    if batch.junit is not None:
        suite = SuiteInfo(
            name=suite_name(batch.spec, batch.shard),
            timestamp=iso(batch.started_at),
            hostname=socket.gethostname(),
            wall=ended - batch.started_at,
        )
        try:
            ensure_dir(batch.junit.parent)
            atomic_write(batch.junit, junit_xml(entries, suite))
        except OSError as exc:
            _say(
                f"could not write {batch.junit}: {exc.strerror or exc}; "
                "check that its folder is writable"
            )
            written = False
    if batch.html is not None:
        _write_html(batch.html, path, report_written)
    for warning in batch.warnings:
        _say(f"warning: {warning['message']}")
    return written


def keep_earlier_result(result_path: Path, run_dir: Path) -> None:
    """Move the result.json of an earlier run of the line into the run
    directory's ``history/`` before the run clears it: a retry that runs a
    line again does not lose what the line came to before."""
    try:
        data = result_path.read_bytes()
    except OSError:
        return
    try:
        earlier = orjson.loads(data)
        run_id = earlier.get("runId") if isinstance(earlier, dict) else None
    except orjson.JSONDecodeError:
        run_id = None
    name = run_id if isinstance(run_id, str) and run_id.isprintable() and "/" not in run_id else ""
    history = run_dir / "history"
    try:
        ensure_dir(history)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(result_path.stat().st_mtime))
        target = history / f"{stamp}-{name or 'run'}.result.json"
        n = 2
        while target.exists():
            target = history / f"{stamp}-{name or 'run'}-{n}.result.json"
            n += 1
        os.replace(result_path, target)
    except OSError as exc:
        _say(f"could not keep the earlier {result_path} in {history}: {exc.strerror or exc}")


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
    (done / running / failed / waiting, elapsed), redrawn on a terminal;
    elsewhere a line per run's start and end, and the progress line once,
    at the end. The counts are kept as runs start and end, never recounted:
    a finish costs the same at 20,000 runs as at 2."""

    def __init__(self, batch: Batch, pump: OutputPump | None, *, color: bool, redraw: bool) -> None:
        self.batch = batch
        self.pump = pump
        self.color = color
        #: On a terminal the progress line is redrawn in place (colour or not);
        #: elsewhere each run's start and end get a line of their own.
        self.redraw = redraw
        self.started_at = trio.current_time()
        self._drawn = False
        self.total = len(batch.runs)
        #: Runs kept from an earlier batch are done before anything starts.
        self.done = sum(item.state == "done" for item in batch.runs)
        self.failed = sum(item.state == "done" and not item.passed for item in batch.runs)
        self.running = 0

    def _write(self, text: str) -> None:
        if self.pump is not None:
            self.pump.write(text.encode())

    def line(self, elapsed: float) -> str:
        waiting = self.total - self.done - self.running
        minutes, seconds = divmod(int(elapsed), 60)
        return (
            f"[batch] {self.done}/{self.total} done, {self.running} running, "
            f"{self.failed} failed, {waiting} waiting, {minutes}:{seconds:02d}"
        )

    def _redraw(self) -> None:
        self._write(f"\r\x1b[K{self.line(trio.current_time() - self.started_at)}")
        self._drawn = True

    def _clear(self) -> None:
        if self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False

    def started(self, item: BatchRun) -> None:
        self.running += 1
        if self.redraw:
            self._redraw()
        else:
            self._write(f"started {item.name} [{item.prepared.config.run_dir}]\n")

    def finished(self, item: BatchRun) -> None:
        self.running -= 1
        self.done += 1
        good = item.passed
        self.failed += not good
        self._clear()
        result = item.result or {}
        outcome = item.outcome or "no result"
        seconds = (item.ended or 0) - (item.started or 0)
        mark = ("ok" if outcome == "ok" else "expected") if good else "FAILED"
        if self.color:
            mark = f"\x1b[32m{mark}\x1b[0m" if good else f"\x1b[31m{mark}\x1b[0m"
        error = result.get("error")
        why = f": {error.get('message')}" if isinstance(error, dict) else ""
        if not good and not why and item.expect is not None:
            why = f": expected {item.expect.describe()}"
        where = (result.get("artifacts") or {}).get("result") or str(item.prepared.config.run_dir)
        self._write(f"{mark} {item.name} ({outcome}, {seconds:.1f}s){why} [{where}]\n")
        if self.redraw and self.done < self.total:
            self._redraw()

    def not_started(self, item: BatchRun) -> None:
        """A line the batch's cap kept from starting."""
        self.done += 1
        self.failed += 1
        self._clear()
        self._write(f"not started {item.name} (the batch reached its cap)\n")
        if self.redraw and self.done < self.total:
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
