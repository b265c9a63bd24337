"""The ``batch`` subcommand: the whole spec checked (every line made into a
run, as ``run`` would) before anything starts, a stop signal during the
checks heeded at once, then the batch itself (``wrapper.fleet.batch``); and
what every run of the command line does at its end with its traces."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from wrapper import options

if TYPE_CHECKING:
    import signal

    from wrapper.fleet.batch import Batch

PROG = "agent-wrapper"


class BatchUsageError(Exception):
    """The spec or the batch's options cannot be run; the text says why."""


def batch_main(args: argparse.Namespace) -> int:
    """Check the whole spec (every line made into a run, as ``run`` would)
    before anything starts; then run the batch."""
    # A stop signal while the spec is checked (a long spec takes seconds; a
    # task file may be a pipe nobody writes yet) ends the checks at once.
    stop = _StopHandler.install()
    try:
        runs_dir, junit = _report_places(args)
        batch = _checked_batch(args, runs_dir, junit)
        # From here on a stop signal is recorded, to be acted on once the batch is up.
        stop.checking = False
    except _StopWhileChecking as stopped:
        # Nothing was written yet: a new batch id, if it comes to that, is no loss.
        runs_dir, junit = _report_places(args)
        return _stopped_before_start(args, runs_dir, junit, stopped.sig)
    if not args.runs_dir:
        _ignored_by_git(runs_dir)
    from wrapper.process import guardian
    from wrapper.process.proctree import become_subreaper

    # The runs' guardian alone in the runner's process group (see wrapper/process/guardian.py).
    guardian.leave_guardians_group()
    # Orphans of the agents' trees come back to the wrapper and stay findable.
    become_subreaper()
    from functools import partial

    import trio

    from wrapper.fleet.batch import run_batch
    from wrapper.sinks import flush_spans

    status: int = trio.run(partial(run_batch, batch, stop.received))
    flush_spans()
    return status


def _report_places(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """Where the batch's runs and batch.json go, and its JUnit report."""
    from wrapper.fleet.defaults import DEFAULT_BATCHES_ROOT
    from wrapper.supervision.prepare import new_run_id

    cwd = Path.cwd()
    runs_dir = (cwd / (args.runs_dir or DEFAULT_BATCHES_ROOT / new_run_id())).absolute()
    return runs_dir, (cwd / args.junit).absolute() if args.junit else None


class _StopWhileChecking(BaseException):
    """A stop signal came while the batch's spec was being checked.

    A BaseException, so that no ``except Exception`` of the checks catches
    it. The checks only read (nothing of a run exists yet), so they may be
    cut short anywhere, a read blocked on a pipe included."""

    def __init__(self, sig: signal.Signals) -> None:
        super().__init__(sig)
        self.sig = sig


class _StopHandler:
    """The stop signals' handler until the batch's loop takes them over: it
    records every one, and the first that comes while ``checking`` ends the
    checks. One handler throughout, so that no signal finds the handlers
    being swapped."""

    def __init__(self) -> None:
        import signal

        self._signals = signal.Signals
        self.checking = True
        self.received: list[signal.Signals] = []

    @classmethod
    def install(cls) -> _StopHandler:
        import signal

        from wrapper.core.signals import STOP_SIGNALS

        handler = cls()
        for sig in STOP_SIGNALS:
            signal.signal(sig, handler)
        return handler

    def __call__(self, signum: int, _frame: object) -> None:
        sig = self._signals(signum)
        self.received.append(sig)
        if self.checking:
            self.checking = False
            raise _StopWhileChecking(sig)


def _checked_batch(args: argparse.Namespace, runs_dir: Path, junit: Path | None) -> Batch:
    """The batch the spec asks for, every line checked and prepared, or a
    usage error (exit 2) naming the first line that is wrong."""
    import copy
    import hashlib
    from functools import partial

    from wrapper.core.config import ColorMode, OutputMode
    from wrapper.fleet.batch import Batch, BatchRun, batch_output
    from wrapper.fleet.report import SpecInfo
    from wrapper.fleet.retry import Earlier
    from wrapper.fleet.spec import (
        LineDigests,
        Places,
        SpecError,
        folder_names,
        parse_shard,
        parse_spec,
        planned_places,
        shard,
    )
    from wrapper.fleet.spec import run_options as line_options
    from wrapper.supervision.prepare import RunUsageError, prepare_run

    for flag, dest in (("--run-dir", "run_dir"), ("--result", "result"), ("--label", "label")):
        if getattr(args, dest) is not None:
            raise BatchUsageError(
                f"batch: {flag} is one run's: give it on a line of the spec "
                "(runDir, result, label); --runs-dir says where the runs go"
            )
    if args.task_file == "-":
        raise BatchUsageError(
            "batch: --task-file cannot be -: the runs of a batch share no standard input"
        )
    spec_path = Path(args.spec)
    try:
        raw = spec_path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise BatchUsageError(f"batch: {args.spec}: cannot read it: {reason}") from None
    try:
        shard_of = parse_shard(args.shard) if args.shard else (1, 1)
    except SpecError as exc:
        raise BatchUsageError(f"batch: {exc}") from None
    try:
        every = parse_spec(text, spec_path.parent.absolute(), options.run_parser(), args)
    except SpecError as exc:
        raise BatchUsageError(f"batch: {args.spec}: {exc}") from None
    selected = shard(every, *shard_of)
    retry = (
        "--skip-passed" if args.skip_passed else "--skip-finished" if args.skip_finished else None
    )
    # Without a runs folder of its own each batch gets a new one: the earlier
    # runs would never be found, and every line would run again.
    if retry is not None and not args.runs_dir and any(not run.options.run_dir for run in selected):
        raise BatchUsageError(_retry_needs_runs_dir(retry, spec_path, shard_of))
    spec_info = SpecInfo(str(spec_path.absolute()), hashlib.sha256(raw).hexdigest(), len(every))
    digests = LineDigests(
        [action.dest for action in line_options(options.run_parser()).values()], args
    )
    base_environ = dict(os.environ)
    names = dict(zip((run.index for run in every), folder_names(every), strict=True))
    output = OutputMode(args.output)
    quiet_runs = "jsonl" if batch_output(output) is OutputMode.JSONL else "quiet"
    reports = {runs_dir / "batch.json": "where the batch's report (batch.json) goes"}
    if junit is not None:
        reports[junit] = "where the JUnit report (--junit) goes"
    html = _html_place(args)
    if html is not None:
        reports[html] = "where the HTML report (--html) goes"
    places = Places(reports)
    chosen = {run.index for run in selected}
    items: list[BatchRun] = []
    ran_before = False
    for run in every:
        if run.index not in chosen:
            # Another shard's run: the spec is the same whichever shard runs it.
            try:
                places.claim(run.line, *planned_places(run, runs_dir / names[run.index]))
            except SpecError as exc:
                raise BatchUsageError(f"batch: {args.spec}: line {run.line}: {exc}") from None
            continue
        run_options = copy.copy(run.options)
        run_options.output = quiet_runs
        # One copy of the environment for the lines that add nothing to it:
        # reading os.environ whole costs more than preparing a run.
        environ = {**base_environ, **run.env} if run.env else base_environ
        try:
            prepared = prepare_run(
                run_options,
                run.command,
                cwd=run.cwd,
                environ=environ,
                run_dir=runs_dir / names[run.index],
                batch=partial(digests.recorded, run),
            )
        except RunUsageError as exc:
            raise BatchUsageError(f"batch: {args.spec}: line {run.line}: {exc}") from None
        config = prepared.config
        try:
            places.claim(run.line, config.run_dir, config.result_path)
        except SpecError as exc:
            raise BatchUsageError(f"batch: {args.spec}: line {run.line}: {exc}") from None
        digest = str((config.batch or {}).get("lineDigest"))
        item = BatchRun(
            run.name,
            run.label,
            run.line,
            prepared,
            environ,
            index=run.index,
            line_digest=digest,
            expect=run.expect,
        )
        if args.skip_passed or args.skip_finished:
            earlier = Earlier.read(config.result_path, config.run_dir)
            item.rerun = earlier.why_again(digest, run.expect, every_outcome=args.skip_finished)
            if item.rerun is None:
                item.result, item.reused, item.state = earlier.result, True, "done"
            elif earlier.there:
                _say_once(f"batch: {run.name}: running it again: {item.rerun}")
            ran_before = ran_before or earlier.there
        items.append(item)
    if retry is not None and items and not ran_before:
        _say_once(
            f"batch: {retry}: no line of this batch has run before where its runs go "
            f"({runs_dir}): every line runs; is it the earlier batch's --runs-dir?"
        )
    return Batch(
        runs=items,
        runs_dir=runs_dir,
        jobs=args.jobs,
        output=output,
        junit=junit,
        html=html,
        color=ColorMode(args.color),
        shard=shard_of,
        spec=spec_info,
        exit_zero=args.exit_zero,
        caps=(args.batch_max_cost, args.batch_max_tokens),
    )


def _retry_needs_runs_dir(option: str, spec_path: Path, shard_of: tuple[int, int]) -> str:
    """Why ``option`` needs ``--runs-dir``, naming the folder of the spec's
    latest batch under the default root when there is one."""
    text = (
        f"batch: {option} needs --runs-dir: it keeps the runs of an earlier batch found "
        "in its runs folder, and without --runs-dir every batch gets a new folder, so "
        "every line would run again"
    )
    latest = _latest_batch_of(spec_path.absolute(), shard_of)
    if latest is None:
        return text + "; give the same --runs-dir to the first batch and to its retries"
    return text + f"; the latest batch of this spec went to --runs-dir {latest}"


def _latest_batch_of(spec_path: Path, shard_of: tuple[int, int]) -> str | None:
    """The newest folder under the default batches root whose batch.json ran
    this spec (and shard), as a path relative to the working directory."""
    import orjson

    from wrapper.core.limits import EARLIER_BATCHES_READ
    from wrapper.fleet.defaults import DEFAULT_BATCHES_ROOT

    try:
        folders = sorted(
            (entry for entry in os.scandir(DEFAULT_BATCHES_ROOT) if entry.is_dir()),
            key=lambda entry: entry.stat().st_mtime,
            reverse=True,
        )
    except OSError:
        return None
    shard_json = {"index": shard_of[0], "count": shard_of[1]}
    for folder in folders[:EARLIER_BATCHES_READ]:
        try:
            report = orjson.loads(Path(folder.path, "batch.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        spec = report.get("spec") if isinstance(report, dict) else None
        if not isinstance(spec, dict) or spec.get("path") != str(spec_path):
            continue
        if report.get("shard") == shard_json:
            return str(DEFAULT_BATCHES_ROOT / folder.name)
    return None


def _html_place(args: argparse.Namespace) -> Path | None:
    """Where the batch's HTML report goes, if anywhere."""
    return (Path.cwd() / args.html).absolute() if args.html else None


def _say_once(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def _ignored_by_git(runs_dir: Path) -> None:
    """The default root sits in the agent's working tree: keep it out of git."""
    from wrapper.files.artifacts import ensure_dir, write_new

    try:
        ensure_dir(runs_dir.parent)
        write_new(runs_dir.parent.parent / ".gitignore", b"*\n")
    except OSError:
        pass  # the batch reports what it cannot write where it writes it


def _stopped_before_start(
    args: argparse.Namespace, runs_dir: Path, junit: Path | None, sig: signal.Signals
) -> int:
    """A stop signal came while the spec was checked: no run starts, and the
    reports say so; the exit status is the signal's, as for a batch stopped later."""
    from wrapper.fleet.batch import report_stopped_before_start

    if not args.runs_dir:
        _ignored_by_git(runs_dir)
    return report_stopped_before_start(runs_dir, junit, sig, html=_html_place(args))
