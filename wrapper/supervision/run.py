"""Runs: prepare the run directory, supervise the agent, write the result.

A ``Run`` is one run and nothing else: its own cancel scopes, agent, sinks
and result. What belongs to the whole process (the stop signals, reaping
the orphans a subreaper adopts, the guardian) is set up once by whoever owns
the process (``wrapper.fleet.owner.execute`` for the command line's one run,
the batch for its many) and handed to each run: a signal reaches a run as
``Run.interrupt``.

The wrapper's stop signals are caught from the first moment of the run to
the last, result writing included, so that a signal can shorten the run but
never cost its result.json.

One module, though long: ``Run`` is the one object that sees a run from its
start to its result (attempts, stops, steering, the live session's turns);
what it hands off (the attempt, the stop gate, the permission gate, the
result file, the leftovers) lives in modules of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import trio

from wrapper.core import environment
from wrapper.core.config import (
    OUTPUT_FLUSH_TIMEOUT,
    STATUS_INTERVAL,
    OutputMode,
    RunConfig,
    child_depth,
    child_env,
    handler_env,
)
from wrapper.core.cost import run_cost
from wrapper.core.events import (
    ResultWritten,
    RunStarted,
    WarningEvent,
)
from wrapper.core.limits import LOG_FLUSH_INTERVAL
from wrapper.core.outcome import (
    CANCELLED_BY_CALLER,
    EXIT_NO_RESULT,
    ErrorKind,
    RunError,
    RunFacts,
    Verdict,
    decide,
)
from wrapper.core.result import AttemptRecord, build_result, progress_json
from wrapper.core.steering import AllowedBy, prompt_not_taken
from wrapper.core.summary import RunSummary
from wrapper.dialects import Dialect, Launch, UsageError, chosen_name
from wrapper.files.artifacts import (
    ArtifactErrors,
    StreamFile,
    atomic_write,
)
from wrapper.hooks.observers import Observers
from wrapper.hooks.permission import PermissionGate
from wrapper.hooks.runner import HookContext
from wrapper.hooks.stop_gate import StopGate
from wrapper.process import proctree
from wrapper.process.guardian import wrapper_pid
from wrapper.process.proctree import RunClaim
from wrapper.sinks import run_telemetry
from wrapper.sinks.stream import LiveLogs, StatusWriter
from wrapper.supervision.attempt import AttemptSupervisor
from wrapper.supervision.budget_pause import BUDGET_HANDLER, BudgetPause
from wrapper.supervision.early import EarlyStart, begin_run
from wrapper.supervision.external import ExternalControl
from wrapper.supervision.facts import (
    facts_so_far,
    innermost,
    ki_protected,
    only_keyboard_interrupts,
    refused_resume,
)
from wrapper.supervision.own_stop import OwnStop, died_of_foreign_stop
from wrapper.supervision.result_file import say_at_end, write_result
from wrapper.supervision.run_output import LiveOutput, RunOutput
from wrapper.supervision.spending import Spending

if TYPE_CHECKING:
    from wrapper.sinks.trace_ids import PlannedIds


class Run:
    def __init__(
        self,
        config: RunConfig,
        dialect: Dialect,
        launch: Launch,
        environ: Mapping[str, str],
        early: EarlyStart | None = None,
        *,
        live: LiveOutput | None = None,
        claim: RunClaim | None = None,
        say_at_end: bool = True,
        trace_of_its_own: bool = False,
        planned_ids: PlannedIds | None = None,
    ) -> None:
        """``live``: a shared output (a batch's), instead of the run's own
        by its ``--output``. ``claim``: which processes below the wrapper are
        this run's, when other runs share the process (None: all of them).
        ``say_at_end``: repeat the run's error and its gravest warnings on
        stderr at its end (unless its live view showed them).
        ``trace_of_its_own``: when exported as a trace, the run starts a new
        one (linked to the caller's ``TRACEPARENT``, not a child of it).
        ``planned_ids``: the ids its first spans must have (see ``execute``)."""
        self.config = config
        self.say_at_end = say_at_end
        self.claim = claim
        #: result.json as the run wrote it (or printed it), once it has.
        self.result: dict[str, Any] | None = None
        self.dialect = dialect
        self.launch = launch
        self.environ = environ
        self.started_at = early.started_at if early is not None else time.time()
        self.clock_start = trio.current_time()
        self.errors = early.errors if early is not None else ArtifactErrors()
        self.attempts: list[AttemptRecord] = []
        self.summary = RunSummary()
        #: The agent the command line started, for the first attempt.
        self.early = early
        self.interrupts: list[signal.Signals] = list(early.signals) if early else []
        #: The first interruption was the caller cancelling the run, not a signal.
        self.cancelled = False
        #: The first interruption was an abort asked from outside: its reason.
        self.abort_reason: str | None = None
        #: The first interruption was the run reaching a cap: its spend and cap.
        self.budget_exceeded: str | None = None
        self.supervisor: AttemptSupervisor | None = None
        #: When the whole run must end, on trio's clock.
        self.deadline = self.clock_start + config.timeout if config.timeout else math.inf
        #: Set when the run's deadline passed while no attempt was running.
        self.timed_out = False
        #: Hooks running between attempts, cancelled by the wrapper's signals.
        self.between_attempts: trio.CancelScope | None = None
        self.own_stop = OwnStop()

        run_dir = config.run_dir
        self.dir_ok = (
            early.dir_ok if early is not None else begin_run(config, self.errors, self.started_at)
        )
        self.stdout_log = StreamFile(
            "stdout", run_dir / "stdout.log", self.errors, enabled=self.dir_ok
        )
        self.stderr_log = StreamFile(
            "stderr", run_dir / "stderr.log", self.errors, enabled=self.dir_ok
        )
        self.events_log = StreamFile(
            "events", run_dir / "events.jsonl", self.errors, enabled=self.dir_ok
        )
        #: Both directions of an agent driven over its stdin (ACP), else None.
        self.protocol_log = (
            StreamFile("protocol", run_dir / "protocol.jsonl", self.errors, enabled=self.dir_ok)
            if launch.prompt is not None
            else None
        )

        output = self.output = RunOutput(config, environ, self.events_log, live, self.clock_start)
        self.output_mode, self.own_pump = output.mode, output.own_pump
        self.pump, self.view, self.stream = output.pump, output.view, output.stream
        self.logs = LiveLogs(
            self.stream,
            (self.stdout_log, self.stderr_log, self.protocol_log),
            LOG_FLUSH_INTERVAL,
        )
        # First of all: where the run is, before the agent says anything.
        self.stream.emit(RunStarted(run_dir=str(run_dir) if self.dir_ok else None))
        self.hook_ctx = HookContext(
            cwd=config.cwd,
            env={
                **handler_env(config, 1, environ),
                "CLAUDE_PROJECT_DIR": str(config.cwd),
            },
            run_dir=config.run_dir,
            agent_command=config.command,
            evaluator=config.settings.evaluator,
            emit=self.stream.emit,
        )
        for note in config.settings.notes:
            self.stream.emit(WarningEvent(code="settings_note", message=note))
        self.telemetry = run_telemetry(
            environ,
            run_id=config.run_id,
            agent=chosen_name(dialect) or os.path.basename(config.command[0]),
            started_at=self.started_at,
            warn=lambda text: self.stream.emit(WarningEvent(code="telemetry", message=text)),
            trace_of_its_own=trace_of_its_own,
            planned=planned_ids,
        )
        if self.telemetry is not None:
            self.stream.observer = self.telemetry.observe
            # Hooks that trace join the run's trace (the current attempt's, once there is one).
            self.hook_ctx.env.update(self.telemetry.context_env())
        self.status = StatusWriter(
            run_dir / "status.json", self.errors, STATUS_INTERVAL, enabled=self.dir_ok
        )
        # The run's start wrote the starting status; the writer goes on from it.
        self.status.adopt(self.clock_start, config.starting_status(self.started_at, wrapper_pid()))
        self.gate = StopGate(
            config=config,
            dialect=dialect,
            summary=self.summary,
            stream=self.stream,
            status=self.status,
            hook_ctx=self.hook_ctx,
            events_path=self.events_log.path,
            started_at=self.started_at,
            transcript=launch.transcript,
        )
        self.steering = self.gate.steering
        self.external = ExternalControl(
            config,
            self.stream,
            self.status,
            environ,
            gate=self.gate,
            live=launch.prompt is not None,
            supervisor=lambda: self.supervisor,
            between=self._between_attempts,
            ended=lambda: bool(self.interrupts or self.timed_out),
            on_abort=self.abort,
            say_on_stderr=self.view is None,
        )
        self.status.progress = lambda: progress_json(
            self.summary, self.steering, self.external.ledger
        )
        self.observers = Observers(config.settings, self.hook_ctx, self.gate)
        self.spending = Spending(
            config, dialect, environ, self.stream, self.over_budget, say_on_stderr=self.view is None
        )
        self.pause = BudgetPause(config, self.spending, self.gate)
        self.permissions = PermissionGate(config, self.gate, self.stream.emit, self.hook_ctx)
        if self.observers.wanted:  # what the run does, beside what the stream shows
            self.observers.watch(self.stream)
            self.observers.approvals = self.permissions.approvals
            self.permissions.on_denied = self.observers.tool_denied
            self.spending.on_near_cap = self.observers.near_cap

    def status_written(self) -> bool:
        """Whether status.json is there: the run directory is usable and no
        write of it failed."""
        return self.dir_ok and not self.errors.failed("status")

    def interrupt(self, sig: signal.Signals, *, cancelled: bool = False) -> None:
        """The wrapper received the stop signal ``sig`` (or the run's owner
        stops it as if; ``cancelled``: its caller cancelled it): the run ends
        ``aborted``, its result written."""
        if cancelled and not self.interrupts:
            self.cancelled = True
        self.interrupts.append(sig)
        if self.supervisor is not None:
            self.supervisor.interrupt(sig, self._cause())
        if self.between_attempts is not None:
            self.between_attempts.cancel()
        self.gate.signal_came()
        self.own_stop.arrived()

    def abort(self, reason: str | None) -> None:
        """An abort asked from outside (``agent-wrapper abort``): the run ends
        ``aborted`` (``abort_requested``), as a SIGTERM to the wrapper would end it."""
        if not self.interrupts:
            self.abort_reason = reason or ""
        self.interrupt(signal.SIGTERM)

    def over_budget(self, why: str) -> None:
        """The run reached a cap (``why``: its spend and the cap): stopped as
        an abort stops it, it ends ``error`` (``budget_exceeded``); under
        ``--on-budget escalate`` it pauses and asks first (``BudgetPause``)."""
        if self.pause.wanted and not self.interrupts:
            self.pause.reached(why, self.supervisor)
            return
        self.stop_for_cap(why)

    def stop_for_cap(self, why: str) -> None:
        """Stop the run for a cap, its own or its batch's (``why``: the spend
        and the cap): as an abort stops it, it ends ``budget_exceeded``."""
        self.budget_exceeded = why if not self.interrupts else None
        self.interrupt(signal.SIGTERM)

    async def _past_cap(self) -> str | None:
        """The run paused at its cap: a person is asked; the steer to go on
        with, or None (the run is stopped for its cap)."""
        text = None
        with self._between_attempts():
            text = await self.pause.ask()
        if text is None and not self.interrupts and not self.timed_out:
            self.stop_for_cap(self.pause.stopped)
        return None if self.interrupts or self.timed_out else text

    def _cause(self) -> str | None:
        """What the agent's signals say of why, when no signal to the wrapper was it."""
        if self.budget_exceeded is not None:
            return "the run reached its cap"
        if self.abort_reason is not None:
            return "the run was aborted on request"
        return CANCELLED_BY_CALLER if self.cancelled else None

    async def execute(self) -> int:
        """Do the run and write its result; returns its exit status.

        Cancelled by its owner, the run ends as a stop signal would end it
        (``aborted``, the agent's tree ended, result.json written) before
        the cancellation goes on: the other runs of the process are not
        touched."""
        finished = trio.Event()

        async def stop_when_cancelled() -> None:
            try:
                await finished.wait()
            except trio.Cancelled:
                self.interrupt(signal.SIGTERM, cancelled=True)
                raise

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_when_cancelled)
            try:
                with trio.CancelScope(shield=True):
                    exit_status = await self._execute_with_output()
            finally:
                # An exception out of the run (a KeyboardInterrupt) is no
                # cancellation: the run, ended, must not be signalled again.
                finished.set()
        return exit_status

    async def _execute_with_output(self) -> int:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ki_protected, self.logs.run)
            if self.own_pump and self.pump is not None:
                nursery.start_soon(ki_protected, self.pump.run)
                if self.view is not None and os.isatty(1):
                    nursery.start_soon(ki_protected, self.output.tick_view)
            await self.external.start(nursery, self.dir_ok)
            exit_status = await self._execute()
            await self.external.close(self.result.get("outcome") if self.result else None)
            nursery.cancel_scope.cancel()
        return exit_status

    async def _execute(self) -> int:
        keyboard_interrupt = False
        try:
            async with trio.open_nursery() as background:
                self.spending.start(background)
                if self.observers.wanted:
                    background.start_soon(self.observers.run)
                try:
                    facts = await self._supervise()
                finally:
                    self.spending.ended = True
                    with trio.CancelScope(shield=True):
                        await self.observers.close()
                        # What hooks and observers left running (a setsid'ed
                        # child escapes their process group) goes with the run.
                        if self.supervisor is not None and proctree.helpers_started:
                            await self.supervisor.end_leftovers()
        except Exception as exc:  # a bug must still end in an honest result.json
            record = self.supervisor.record if self.supervisor is not None else None
            if record is not None and record not in self.attempts:
                self.attempts.append(record)
            traceback.print_exception(exc, file=sys.stderr)
            facts = RunFacts(
                internal_error=f"the wrapper failed (please report it): {innermost(exc)}",
                **self._facts_so_far(),
            )
        except BaseException as exc:
            if not only_keyboard_interrupts(exc):
                raise
            # Under a trio loop of the caller's, a Ctrl-C may be raised right
            # in the run's code (trio raises it wherever code is unprotected),
            # tearing the attempt down (the agent killed on the way out): the
            # run ends as SIGINT would end it, its result written, and the
            # interrupt goes on.
            keyboard_interrupt = True
            record = self.supervisor.record if self.supervisor is not None else None
            if record is not None and record not in self.attempts:
                self.attempts.append(record)
            facts = RunFacts(**{**self._facts_so_far(), "interrupted_by": signal.SIGINT})
        if self.cancelled and facts.interrupted_by is not None:
            facts = dataclasses.replace(facts, cancelled=True)
        if self.abort_reason is not None and facts.interrupted_by is not None:
            facts = dataclasses.replace(facts, abort_reason=self.abort_reason)
        if self.budget_exceeded is not None and facts.interrupted_by is not None:
            facts = dataclasses.replace(facts, budget_exceeded=self.budget_exceeded)
        exit_status = await self._finish(decide(facts))
        if keyboard_interrupt:
            raise KeyboardInterrupt
        return exit_status

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
        started = self.early.started if self.early is not None else None
        if self.interrupts and started is None:
            return RunFacts(interrupted_by=self.interrupts[0])
        launch = self.launch
        # An agent started early had no prompt handlers to wait for; a signal
        # that came meanwhile ends it through the supervisor like any other.
        if config.task is not None and started is None:
            with self._between_attempts():
                task, blocked = await self.gate.before_prompt(config.task, first=True)
            if self.interrupts or self.timed_out:
                return self._stopped_between_attempts()
            if blocked is not None:
                return RunFacts(refusal=RunError(ErrorKind.PROMPT_BLOCKED, blocked))
            if task != config.task:
                try:
                    launch = self.dialect.launch(
                        config.command, task, config.run_dir, resumable=self.config.resumable
                    )
                except UsageError as exc:
                    return RunFacts(spawn_error=str(exc))
        elif started is None and config.settings.handlers("SessionStart"):
            with self._between_attempts():
                await self.gate.session_start_without_task()
            if self.interrupts or self.timed_out:
                return self._stopped_between_attempts()
        supervisor = self.supervisor = AttemptSupervisor(
            config=config,
            dialect=self.dialect,
            stream=self.stream,
            summary=self.summary,
            status=self.status,
            stdout_log=self.stdout_log,
            stderr_log=self.stderr_log,
            protocol_log=self.protocol_log,
            output=self.pump,
            on_event=self.observers.observe if self.observers.wanted else None,
            coalesce_deltas=self.output_mode is not OutputMode.JSONL,
            claim=self.claim,
            logs=self.logs,
        )
        supervisor.permission_gate = self.permissions
        supervisor.on_usage = self.spending.observe
        supervisor.on_spawned = self.external.spawned
        supervisor.on_progress = self.external.progress
        supervisor.on_steerable = self.external.steerable
        supervisor.on_steer_answer = self.external.answered
        supervisor.on_prompt_written = self.external.prompt_written
        for sig in self.interrupts:
            supervisor.interrupt(sig, self._cause())
        number = 1
        while True:
            self.hook_ctx.env[environment.ATTEMPT] = str(number)
            record = await self._attempt(supervisor, number, launch, started)
            started = None
            if died_of_foreign_stop(record) and not self.interrupts:
                await self.own_stop.wait()
            if record.spawn_error is not None:
                if number == 1:
                    return RunFacts(spawn_error=record.spawn_error)
                self.external.refuse_in_flight(
                    f"the agent could not be restarted with it: {record.spawn_error}"
                )
                self.steering.allow(
                    AllowedBy.CANNOT_STEER,
                    f"the agent could not be restarted to take the steer: {record.spawn_error}",
                )
                return RunFacts(**self._facts_so_far())
            if launch.prompt is not None:
                # A live session's stop gate ran at the end of each turn.
                self._warn_unasked()
                lost = supervisor.prompt_not_taken
                if lost is not None and not self.interrupts:
                    self.steering.allow(AllowedBy.CANNOT_STEER, prompt_not_taken(lost))
                return RunFacts(**self._facts_so_far())
            refused = refused_resume(record) if number > 1 else None
            if refused is not None:
                self.steering.allow(AllowedBy.CANNOT_STEER, refused)
                return RunFacts(**self._facts_so_far())
            facts = RunFacts(**self._facts_so_far())
            if facts.interrupted_by is not None or facts.timed_out or facts.idle_timed_out:
                return facts
            if self.pause.why is not None:
                text = await self._past_cap()
                resumed = None
                if text is not None:
                    resumed = await self.gate.steer_back(
                        BUDGET_HANDLER, text, number + 1, checked=self.pause.contexts
                    )
            else:
                resumed = await self.external.after_stop(facts, number)
            if self.interrupts or self.timed_out:
                return self._stopped_between_attempts()
            if resumed is None:
                return RunFacts(**self._facts_so_far())
            launch = resumed
            number += 1

    async def _attempt(
        self,
        supervisor: AttemptSupervisor,
        number: int,
        launch: Launch,
        started: subprocess.Popen[bytes] | OSError | None = None,
    ) -> AttemptRecord:
        try:
            for path, text in launch.files.items() if started is None else ():
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, text.encode(), durable=False)
        except OSError as exc:
            record = AttemptRecord(number=number, argv=launch.argv)
            record.spawn_error = f"could not write the prompt file {exc.filename}: " + (
                exc.strerror or str(exc)
            )
        else:
            env = child_env(self.config, number, self.environ)
            if launch.prompt is not None:
                # One process takes every steer of a live session: the attempt
                # a signal belongs to is the one the run is in (status.json).
                env[environment.ATTEMPT] = "0"
            if self.telemetry is not None:
                trace_env = self.telemetry.attempt_env(number, time.time())
                env.update(trace_env)
                self.hook_ctx.env.update(trace_env)
            record = await supervisor.run(
                number,
                launch.argv,
                env,
                self.deadline,
                started,
                prompt=launch.prompt,
                at_turn_end=self._at_turn_end,
            )
        if not any(done is record for done in self.attempts):  # a live session's turn is in
            self.attempts.append(record)
        self.gate.report_native_decisions()
        if launch.transcript is not None:
            self.gate.transcript = launch.transcript
        return record

    async def _at_turn_end(self, record: AttemptRecord) -> str | None:
        """A live session's turn ended: the stop gate, as between attempts;
        returns the next prompt on the session, or None to end the run."""
        self.attempts.append(record)
        facts = RunFacts(**self._facts_so_far())
        if facts.interrupted_by is not None or facts.timed_out or facts.idle_timed_out:
            return None
        if self.pause.why is not None:
            prompt = await self._past_cap()
            if prompt is not None:  # it passed the prompt handlers when the reply came
                prompt = "\n\n".join([prompt, *self.pause.contexts])
        else:
            prompt = await self.external.at_turn_end(facts, record.number)
        if self.interrupts or self.timed_out or prompt is None:
            return None
        number = record.number + 1
        self.hook_ctx.env[environment.ATTEMPT] = str(number)
        if self.telemetry is not None:
            self.hook_ctx.env.update(self.telemetry.attempt_env(number, time.time()))
        return prompt

    def _warn_unasked(self) -> None:
        unasked = self.dialect.tools_run_unasked()
        if not unasked or not self.config.settings.pre_tool_use:
            return
        names = ", ".join(dict.fromkeys(unasked))
        self.stream.emit(
            WarningEvent(
                code="pre_tool_use_not_asked",
                message=f"the agent ran {len(unasked)} tool call(s) ({names}) without asking "
                "permission (its own auto-approve mode?): the PreToolUse handlers could not "
                "decide on them",
            )
        )

    # -- stops, hooks and steering ---------------------------------------------------

    @contextlib.contextmanager
    def _between_attempts(self) -> Iterator[None]:
        """Hooks between attempts end at the run's deadline or the wrapper's signal."""
        with trio.CancelScope(deadline=self.deadline) as scope:
            self.between_attempts = scope
            if self.interrupts:
                scope.cancel()
            try:
                yield
            finally:
                self.between_attempts = None
        if scope.cancelled_caught and not self.interrupts:
            self.timed_out = True

    def _stopped_between_attempts(self) -> RunFacts:
        facts = self._facts_so_far()
        if self.interrupts:
            facts["interrupted_by"] = self.interrupts[0]
        else:
            facts["timed_out"] = True
        return RunFacts(**facts)

    def _facts_so_far(self) -> dict[str, Any]:
        return facts_so_far(
            self.attempts, self.interrupts, self.steering, self.config, self.dialect
        )

    async def _finish(self, verdict: Verdict) -> int:
        self.external.end("the run ended before it could be delivered")
        ended_at = time.time()
        pump = self.pump
        if pump is not None and pump.broken is not None:
            self.stream.warnings.append(
                {
                    "code": "output_broken",
                    "message": f"stdout stopped accepting output: {pump.broken}",
                }
            )
        if self.telemetry is not None:
            self.telemetry.warn_undelivered()
        await self.spending.settle(
            stopped=verdict.error is not None and verdict.error.kind is ErrorKind.BUDGET_EXCEEDED
        )
        self.stream.report_dropped_warnings()
        self.stream.flush()
        run_dir, dir_ok = self.config.run_dir, self.dir_ok
        artifacts: dict[str, str | None] = {
            "runDir": str(run_dir) if dir_ok else None,
            "result": str(self.config.result_path),
            "status": str(self.status.path) if self.status_written() else None,
            "events": str(self.events_log.path) if self.events_log.ok else None,
            "stdout": str(self.stdout_log.path) if self.stdout_log.ok else None,
            "stderr": str(self.stderr_log.path) if self.stderr_log.ok else None,
            "config": str(run_dir / "config.json")
            if dir_ok and not self.errors.failed("config")
            else None,
        }

        def render() -> dict[str, Any]:
            return build_result(
                config=self.config,
                verdict=verdict,
                attempts=self.attempts,
                summary=self.summary,
                dialect=chosen_name(self.dialect),
                started_at=self.started_at,
                ended_at=ended_at,
                warnings=self.stream.warnings,
                artifacts=artifacts,
                artifact_errors=self.errors.entries,
                steering=self.steering,
                policy=self.gate.policy,
                external=self.external.ledger,
                cost=self.spending.to_json(),
            )

        def render_kept() -> dict[str, Any]:
            self.result = render()
            return self.result

        await self.gate.session_end(render(), skip=len(self.interrupts) > 1)

        written = write_result(self.config, render_kept, self.errors, artifacts)
        exit_status = verdict.exit_status if written is not None else EXIT_NO_RESULT
        outcome = str(verdict.outcome)
        error = verdict.error.to_json() if verdict.error is not None else None
        cost = run_cost(self.result or {"cost": self.spending.to_json()})
        done = ResultWritten(path=written, outcome=outcome, exit_status=exit_status, error=error)
        self.stream.emit(dataclasses.replace(done, cost_usd=cost.usd, cost_source=cost.source))
        if self.telemetry is not None:
            self.telemetry.finish(self.result, outcome, time.time())
        self.stream.flush()
        for log in (self.stdout_log, self.stderr_log, self.events_log, self.protocol_log):
            if log is not None:
                log.close()
        self.status.update(
            trio.current_time(), force=True, state="finished", outcome=outcome, control=None
        )
        if pump is not None:
            with trio.move_on_after(OUTPUT_FLUSH_TIMEOUT):
                await pump.drain()
        if self.output_mode is not OutputMode.PRETTY and self.say_at_end:
            # The live view showed them as they came.
            say_at_end(self.stream.warnings, outcome, error, written)
        return exit_status
