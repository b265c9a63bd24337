"""One whole run: prepare the run directory, supervise the agent, write the result."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson
import trio

from wrapper.artifacts import ArtifactErrors, StreamFile, atomic_write, dump_json, prepare_run_dir
from wrapper.config import OUTPUT_FLUSH_TIMEOUT, STATUS_INTERVAL, OutputMode, RunConfig
from wrapper.dialects import Dialect, SniffingDialect, UsageError
from wrapper.events import Event, ResultWritten
from wrapper.outcome import EXIT_NO_RESULT, ErrorKind, RunError, RunFacts, decide
from wrapper.pretty import PrettyView
from wrapper.result import build_result
from wrapper.sinks import EventStream, OutputPump, StatusWriter
from wrapper.summary import RunSummary
from wrapper.supervisor import AttemptRecord, AttemptSupervisor, child_depth, child_env
from wrapper.timefmt import iso

#: The wrapper's own signals that end a run (SIGHUP: tmux kill-pane, a closed terminal).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def resolve_output(mode: OutputMode) -> OutputMode:
    if mode is OutputMode.AUTO:
        return OutputMode.PRETTY if os.isatty(1) else OutputMode.JSONL
    return mode


async def execute(config: RunConfig, dialect: Dialect, environ: Mapping[str, str]) -> int:
    """Run the agent as configured and write result.json; return the exit status."""
    started_at = time.time()
    errors = ArtifactErrors()
    run_dir = config.run_dir
    dir_ok = prepare_run_dir(run_dir, config.runs_root, errors)
    stdout_log = StreamFile("stdout", run_dir / "stdout.log", errors, enabled=dir_ok)
    stderr_log = StreamFile("stderr", run_dir / "stderr.log", errors, enabled=dir_ok)
    events_log = StreamFile("events", run_dir / "events.jsonl", errors, enabled=dir_ok)
    if dir_ok:
        try:
            atomic_write(run_dir / "config.json", dump_json(config.to_json()), durable=False)
        except OSError as exc:
            errors.record("config", run_dir / "config.json", exc)

    mode = resolve_output(config.output)
    pump = OutputPump(1) if mode in (OutputMode.JSONL, OutputMode.PRETTY) else None
    clock_start = trio.current_time()
    view = PrettyView(color=os.isatty(1), label=config.label) if mode is OutputMode.PRETTY else None
    live: Callable[[Event, bytes], None] | None = None
    if pump is not None and view is not None:

        def live(event: Event, line: bytes) -> None:
            pump.write(view.render(event, trio.current_time() - clock_start).encode())

    elif pump is not None:

        def live(event: Event, line: bytes) -> None:
            pump.write(line)

    stream = EventStream(events_log, live)
    warnings = stream.warnings
    status = StatusWriter(run_dir / "status.json", errors, STATUS_INTERVAL, enabled=dir_ok)
    status.update(
        clock_start,
        force=True,
        schemaVersion=1,
        runId=config.run_id,
        state="starting",
        attempt=1,
        pid=None,
        startedAt=iso(started_at),
        lastEventAt=None,
        currentTool=None,
        label=config.label,
        question=None,
        outcome=None,
    )
    summary = RunSummary()
    supervisor = AttemptSupervisor(
        config=config,
        dialect=dialect,
        stream=stream,
        summary=summary,
        status=status,
        stdout_log=stdout_log,
        stderr_log=stderr_log,
        output=pump,
    )
    attempts: list[AttemptRecord] = []
    facts = RunFacts(timeout=config.timeout)

    async with trio.open_nursery() as nursery:
        if pump is not None:
            nursery.start_soon(pump.run)
        with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
            nursery.start_soon(_forward_signals, signals, supervisor)
            depth = child_depth(environ)
            if depth > config.max_depth:
                facts = RunFacts(
                    refusal=RunError(
                        ErrorKind.MAX_DEPTH,
                        f"nesting depth {depth} would exceed --max-depth {config.max_depth}; "
                        "this run is already inside wrapped agents",
                    )
                )
            else:
                facts = await _attempt(
                    config=config,
                    dialect=dialect,
                    supervisor=supervisor,
                    environ=environ,
                    attempts=attempts,
                )
        ended_at = time.time()
        dialect_name = _dialect_name(dialect)
        verdict = decide(facts)
        if pump is not None and pump.broken is not None:
            warnings.append(
                {
                    "code": "output_broken",
                    "message": f"stdout stopped accepting output: {pump.broken}",
                }
            )
        stream.flush()
        artifacts: dict[str, str | None] = {
            "runDir": str(run_dir) if dir_ok else None,
            "result": str(config.result_path),
            "status": str(status.path) if dir_ok else None,
            "events": str(events_log.path) if events_log.ok else None,
            "stdout": str(stdout_log.path) if stdout_log.ok else None,
            "stderr": str(stderr_log.path) if stderr_log.ok else None,
            "config": str(run_dir / "config.json") if dir_ok else None,
        }

        def render() -> dict[str, Any]:
            return build_result(
                config=config,
                verdict=verdict,
                attempts=attempts,
                summary=summary,
                dialect=dialect_name,
                started_at=started_at,
                ended_at=ended_at,
                warnings=warnings,
                artifacts=artifacts,
                artifact_errors=errors.entries,
            )

        written = _write_result(config, render, errors, artifacts)
        exit_status = verdict.exit_status if written is not None else EXIT_NO_RESULT
        stream.emit(
            ResultWritten(path=written, outcome=str(verdict.outcome), exit_status=exit_status)
        )
        stream.flush()
        for log in (stdout_log, stderr_log, events_log):
            log.close()
        status.update(
            trio.current_time(), force=True, state="finished", outcome=str(verdict.outcome)
        )
        if pump is not None:
            with trio.move_on_after(OUTPUT_FLUSH_TIMEOUT):
                await pump.drain()
        nursery.cancel_scope.cancel()
    return exit_status


async def _attempt(
    *,
    config: RunConfig,
    dialect: Dialect,
    supervisor: AttemptSupervisor,
    environ: Mapping[str, str],
    attempts: list[AttemptRecord],
) -> RunFacts:
    try:
        launch = dialect.launch(config.command, config.task, config.run_dir)
        for path, text in launch.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text.encode(), durable=False)
    except (OSError, UsageError) as exc:
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return RunFacts(spawn_error=f"could not prepare the task for the agent: {message}")
    record = await supervisor.run(1, launch.argv, child_env(config, 1, environ))
    attempts.append(record)
    if record.spawn_error is not None:
        return RunFacts(spawn_error=record.spawn_error)
    tracker = record.tracker
    assert tracker is not None
    return RunFacts(
        final=tracker.final,
        exit=record.exit,
        signalled=tracker.signalled or bool(record.signals_sent),
        timed_out=tracker.timed_out,
        interrupted_by=tracker.interrupted_by,
        timeout=config.timeout,
    )


async def _forward_signals(signals: Any, supervisor: AttemptSupervisor) -> None:
    async for signum in signals:
        supervisor.interrupt(signal.Signals(signum))


def _dialect_name(dialect: Dialect) -> str | None:
    if isinstance(dialect, SniffingDialect):
        return dialect.chosen.name if dialect.chosen is not None else None
    return dialect.name


def _write_result(
    config: RunConfig,
    render: Any,
    errors: ArtifactErrors,
    artifacts: dict[str, str | None],
) -> str | None:
    """Write result.json at --result, else in the run directory, else to stderr."""
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
