"""One whole run: prepare the run directory, supervise the agent, write the result.

The wrapper's stop signals are caught from the first moment of the run to
the last, result writing included, so that a signal can shorten the run but
never cost its result.json.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import orjson
import trio

from wrapper.artifacts import ArtifactErrors, StreamFile, atomic_write, dump_json, prepare_run_dir
from wrapper.config import (
    OUTPUT_FLUSH_TIMEOUT,
    SCHEMA_VERSION,
    STATUS_INTERVAL,
    OutputMode,
    RunConfig,
)
from wrapper.dialects import Dialect, Launch, SniffingDialect
from wrapper.events import Event, ResultWritten
from wrapper.outcome import EXIT_NO_RESULT, ErrorKind, RunError, RunFacts, Verdict, decide
from wrapper.pretty import PrettyView
from wrapper.result import AttemptRecord, build_result
from wrapper.sinks import EventStream, OutputPump, StatusWriter
from wrapper.summary import RunSummary
from wrapper.supervisor import AttemptSupervisor, child_depth, child_env
from wrapper.timefmt import iso

#: The wrapper's own signals that end a run (SIGHUP: tmux kill-pane, a closed terminal).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def resolve_output(mode: OutputMode) -> OutputMode:
    if mode is OutputMode.AUTO:
        return OutputMode.PRETTY if os.isatty(1) else OutputMode.JSONL
    return mode


async def execute(
    config: RunConfig, dialect: Dialect, launch: Launch, environ: Mapping[str, str]
) -> int:
    """Run the agent as configured and write result.json; return the exit status.

    ``launch`` is the dialect's argv for the task (computed before the run, so
    that a task the agent cannot take is a usage error, not a failed run).
    """
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        run = Run(config, dialect, launch, environ)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run.relay_signals, signals)
            if run.pump is not None:
                nursery.start_soon(run.pump.run)
            exit_status = await run.execute()
            nursery.cancel_scope.cancel()
    return exit_status


class Run:
    def __init__(
        self, config: RunConfig, dialect: Dialect, launch: Launch, environ: Mapping[str, str]
    ) -> None:
        self.config = config
        self.dialect = dialect
        self.launch = launch
        self.environ = environ
        self.started_at = time.time()
        self.clock_start = trio.current_time()
        self.errors = ArtifactErrors()
        self.attempts: list[AttemptRecord] = []
        self.summary = RunSummary()
        self.interrupts: list[signal.Signals] = []
        self.supervisor: AttemptSupervisor | None = None

        run_dir = config.run_dir
        self.dir_ok = prepare_run_dir(run_dir, config.runs_root, self.errors)
        self.stdout_log = StreamFile(
            "stdout", run_dir / "stdout.log", self.errors, enabled=self.dir_ok
        )
        self.stderr_log = StreamFile(
            "stderr", run_dir / "stderr.log", self.errors, enabled=self.dir_ok
        )
        self.events_log = StreamFile(
            "events", run_dir / "events.jsonl", self.errors, enabled=self.dir_ok
        )
        if self.dir_ok:
            try:
                atomic_write(run_dir / "config.json", dump_json(config.to_json()), durable=False)
            except OSError as exc:
                self.errors.record("config", run_dir / "config.json", exc)

        mode = resolve_output(config.output)
        self.pump = OutputPump(1) if mode in (OutputMode.JSONL, OutputMode.PRETTY) else None
        self.view = (
            PrettyView(color=os.isatty(1), label=config.label)
            if mode is OutputMode.PRETTY
            else None
        )
        self.stream = EventStream(self.events_log, self._live_output())
        self.status = StatusWriter(
            run_dir / "status.json", self.errors, STATUS_INTERVAL, enabled=self.dir_ok
        )
        self.status.update(
            self.clock_start,
            force=True,
            schemaVersion=SCHEMA_VERSION,
            runId=config.run_id,
            state="starting",
            attempt=1,
            pid=None,
            startedAt=iso(self.started_at),
            lastEventAt=None,
            currentTool=None,
            label=config.label,
            question=None,
            outcome=None,
        )

    def _live_output(self) -> Callable[[Event, bytes], None] | None:
        pump, view, start = self.pump, self.view, self.clock_start
        if pump is None:
            return None
        if view is None:
            return lambda event, line: pump.write(line)
        return lambda event, line: pump.write(
            view.render(event, trio.current_time() - start).encode()
        )

    async def relay_signals(self, signals: Any) -> None:
        async for signum in signals:
            sig = signal.Signals(signum)
            self.interrupts.append(sig)
            if self.supervisor is not None:
                self.supervisor.interrupt(sig)

    async def execute(self) -> int:
        try:
            facts = await self._supervise()
        except Exception as exc:  # a bug must still end in an honest result.json
            record = self.supervisor.record if self.supervisor is not None else None
            if record is not None and record not in self.attempts:
                self.attempts.append(record)
            traceback.print_exception(exc, file=sys.stderr)
            facts = RunFacts(
                internal_error=f"the wrapper failed (please report it): {_innermost(exc)}",
                **self._facts_so_far(),
            )
        return await self._finish(decide(facts))

    async def _supervise(self) -> RunFacts:
        config = self.config
        depth = child_depth(self.environ)
        if depth > config.max_depth:
            return RunFacts(
                refusal=RunError(
                    ErrorKind.MAX_DEPTH,
                    f"nesting depth {depth} would exceed --max-depth {config.max_depth}; "
                    "this run is already inside wrapped agents",
                )
            )
        if self.interrupts:
            return RunFacts(interrupted_by=self.interrupts[0])
        launch = self.launch
        try:
            for path, text in launch.files.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, text.encode(), durable=False)
        except OSError as exc:
            return RunFacts(
                spawn_error=f"could not write the task file {exc.filename}: {exc.strerror or exc}"
            )
        supervisor = self.supervisor = AttemptSupervisor(
            config=config,
            dialect=self.dialect,
            stream=self.stream,
            summary=self.summary,
            status=self.status,
            stdout_log=self.stdout_log,
            stderr_log=self.stderr_log,
            output=self.pump,
        )
        for sig in self.interrupts:
            supervisor.interrupt(sig)
        record = await supervisor.run(1, launch.argv, child_env(config, 1, self.environ))
        self.attempts.append(record)
        if record.spawn_error is not None:
            return RunFacts(spawn_error=record.spawn_error)
        return RunFacts(**self._facts_so_far())

    def _facts_so_far(self) -> dict[str, Any]:
        if not self.attempts:
            return {"interrupted_by": self.interrupts[0] if self.interrupts else None}
        record = self.attempts[-1]
        tracker = record.tracker
        return {
            "final": tracker.final if tracker else None,
            "exit": record.exit,
            "signalled": bool(tracker and tracker.signalled),
            "timed_out": bool(tracker and tracker.timed_out),
            "interrupted_by": tracker.interrupted_by if tracker else None,
            "timeout": self.config.timeout,
        }

    async def _finish(self, verdict: Verdict) -> int:
        ended_at = time.time()
        pump = self.pump
        if pump is not None and pump.broken is not None:
            self.stream.warnings.append(
                {
                    "code": "output_broken",
                    "message": f"stdout stopped accepting output: {pump.broken}",
                }
            )
        self.stream.flush()
        run_dir, dir_ok = self.config.run_dir, self.dir_ok
        artifacts: dict[str, str | None] = {
            "runDir": str(run_dir) if dir_ok else None,
            "result": str(self.config.result_path),
            "status": str(self.status.path) if dir_ok else None,
            "events": str(self.events_log.path) if self.events_log.ok else None,
            "stdout": str(self.stdout_log.path) if self.stdout_log.ok else None,
            "stderr": str(self.stderr_log.path) if self.stderr_log.ok else None,
            "config": str(run_dir / "config.json") if dir_ok else None,
        }

        def render() -> dict[str, Any]:
            return build_result(
                config=self.config,
                verdict=verdict,
                attempts=self.attempts,
                summary=self.summary,
                dialect=_dialect_name(self.dialect),
                started_at=self.started_at,
                ended_at=ended_at,
                warnings=self.stream.warnings,
                artifacts=artifacts,
                artifact_errors=self.errors.entries,
            )

        written = write_result(self.config, render, self.errors, artifacts)
        exit_status = verdict.exit_status if written is not None else EXIT_NO_RESULT
        outcome = str(verdict.outcome)
        self.stream.emit(ResultWritten(path=written, outcome=outcome, exit_status=exit_status))
        self.stream.flush()
        for log in (self.stdout_log, self.stderr_log, self.events_log):
            log.close()
        self.status.update(trio.current_time(), force=True, state="finished", outcome=outcome)
        if pump is not None:
            with trio.move_on_after(OUTPUT_FLUSH_TIMEOUT):
                await pump.drain()
        return exit_status


def _innermost(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _dialect_name(dialect: Dialect) -> str | None:
    if isinstance(dialect, SniffingDialect):
        return dialect.chosen.name if dialect.chosen is not None else None
    return dialect.name


def write_result(
    config: RunConfig,
    render: Callable[[], dict[str, Any]],
    errors: ArtifactErrors,
    artifacts: dict[str, str | None],
) -> str | None:
    """Write result.json at --result, else in the run directory, else to stderr.

    Returns the path written, or None when only stderr was left. ``render``
    is called again after each failure so that the copy that lands records
    the failures before it.
    """
    candidates = [config.result_path]
    fallback = config.run_dir / "result.json"
    if fallback != config.result_path:
        candidates.append(fallback)
    for path in candidates:
        artifacts["result"] = str(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, dump_json(render()))
        except OSError as exc:
            errors.record(f"result:{path}", path, exc)
            continue
        return str(path)
    artifacts["result"] = None
    try:
        sys.stderr.buffer.write(orjson.dumps(render()) + b"\n")
        sys.stderr.buffer.flush()
    except OSError:
        pass
    return None
