"""The trio shell around one attempt: spawn, read, time, signal, clean up.

Every decision is the completion tracker's; this module only carries them
out. Whatever happens, including cancellation of the wrapper itself, the
child and what is left of its process group are ended and reaped under a
shielded scope with a deadline on every wait.

One module, though long: one attempt's tasks (readers, timers, the live
session, cleanup) share its cancel scopes and its state, and read together
as the lifecycle they carry out; the pure parts are in ``wrapper.core`` and
``wrapper.dialects.reading``, the cleanup of leftovers in ``leftovers``, a
live session's turns in ``live_turns``.
"""

from __future__ import annotations

import math
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace

import trio

from wrapper.core.completion import (
    STATUS_OF_PHASE,
    CancelTurn,
    CheckActivity,
    CompletionTracker,
    Effect,
    Limits,
    Phase,
    SendSignal,
    late_final_message,
)
from wrapper.core.config import READ_CHUNK_BYTES, STDERR_LINE_BYTES, RunConfig
from wrapper.core.events import (
    AssistantMessage,
    Event,
    Exited,
    SessionStarted,
    SignalSent,
    Spawned,
    StderrLine,
    TextDelta,
    ToolEnded,
    ToolStarted,
    WarningEvent,
    is_terminal,
)
from wrapper.core.framing import Frame, LineFramer, Oversized
from wrapper.core.limits import (
    CANCEL_BEFORE_TERM,
    REAP_TIMEOUT,
    SILENT_AGENT_HINT_AFTER,
)
from wrapper.core.outcome import ProcessExit
from wrapper.core.result import AttemptRecord
from wrapper.core.summary import RunSummary
from wrapper.core.timefmt import iso
from wrapper.dialects import Dialect, SniffingDialect, chosen_name, graces_for, silent_agent
from wrapper.dialects.base import strip_escapes
from wrapper.dialects.reading import StreamReader
from wrapper.dialects.two_way import Answer
from wrapper.files.artifacts import StreamFile
from wrapper.hooks.permission import PermissionGate
from wrapper.process import proctree
from wrapper.process import spawn as child
from wrapper.process.spawn import Child, unread_bytes, widen_pipe
from wrapper.sinks.stream import EventStream, LiveLogs, OutputPump, StatusWriter
from wrapper.supervision.leftovers import end_leftovers
from wrapper.supervision.live_session import (
    LiveDriver,
    MessageDriver,
    after_cancel,
    open_session,
)
from wrapper.supervision.live_turns import LiveTurns


class AttemptSupervisor(LiveTurns):
    """Runs the agent once and reports what happened."""

    def __init__(
        self,
        *,
        config: RunConfig,
        dialect: Dialect,
        stream: EventStream,
        summary: RunSummary,
        status: StatusWriter,
        stdout_log: StreamFile,
        stderr_log: StreamFile,
        output: OutputPump | None,
        protocol_log: StreamFile | None = None,
        on_event: Callable[[Event], None] | None = None,
        coalesce_deltas: bool = True,
        claim: proctree.RunClaim | None = None,
        logs: LiveLogs | None = None,
    ) -> None:
        self.config = config
        self.dialect = dialect
        self.stream = stream
        self.summary = summary
        self.status = status
        self.stdout_log = stdout_log
        self.stderr_log = stderr_log
        #: Both directions of a live ACP session.
        self.protocol_log = protocol_log
        #: Keeps the logs current for their readers: told when the agent's output pauses.
        self.logs = logs
        #: The live session of an agent driven over its stdin, during an attempt.
        self._session: LiveDriver | None = None
        #: The reader of the agent's stdout, once it is being read.
        self._reader: StreamReader | None = None
        #: The permission requests being decided, to stop deciding when withdrawn.
        #: What decides, at the end of a live session's turn, what comes next.
        self._at_turn_end: Callable[[AttemptRecord], Awaitable[str | None]] | None = None
        self._limits: Limits | None = None
        #: The dialect is being recognised from the stream and its graces are
        #: not yet in use.
        self._graces_pending = isinstance(dialect, SniffingDialect)
        #: The attempt's own tasks (timers, the session), while it runs.
        self._background: trio.Nursery | None = None
        #: Set once the stop gate decided what follows the live turn that ended.
        self._deciding: trio.Event | None = None
        #: The next prompt the stop gate gave a live session whose agent had
        #: exited meanwhile (the attempt's own; None when there was none).
        self.prompt_not_taken: str | None = None
        #: Decides a live session's permission requests: (allow, reason).
        self.permission_gate: PermissionGate | None = None
        self.output = output
        #: Told of every event but text deltas (hooks that observe the stream).
        self.on_event = on_event
        #: Told of every message that reports usage, final or progress (the
        #: run's spend and caps).
        self.on_usage: Callable[[AssistantMessage], None] | None = None
        #: Merge a chunk's text deltas into one (no live reader wants each).
        self.coalesce_deltas = coalesce_deltas
        #: Which leftovers are this run's when the wrapper holds other runs
        #: too (None: everything below the wrapper is).
        self.claim = claim
        self.tracker: CompletionTracker | None = None
        self.record: AttemptRecord | None = None
        self._timer: trio.CancelScope | None = None
        self._backpressure: trio.CancelScope | None = None
        self._pending_interrupts: list[tuple[signal.Signals, str | None]] = []
        self._signals_received = 0
        #: How many bytes of stdout were written before the agent's exit was
        #: seen (read, or waiting in the pipe); what comes after is a leftover's.
        self._exit_boundary: int | None = None
        #: Whether the output being read now arrived after the exit.
        self._late = False
        self._late_warned = False
        #: The last look at the agent's tree, and when it was taken.
        self._activity = proctree.ActivityWatch(config.idle_timeout)
        #: Set by a second wrapper signal: no more waiting for SIGTERM to work.
        self._hurry = trio.Event()
        #: Set when the live session's turn (or its output) ends: see ``after_cancel``.
        self._turn_over = trio.Event()
        #: Told the attempt's number once its agent has started.
        self.on_spawned: Callable[[int], None] | None = None
        #: Told when the agent reports its session or an answer.
        self.on_progress: Callable[[], None] | None = None
        #: Told when the live session's turn starts to take steers.
        self.on_steerable: Callable[[], None] | None = None
        #: Told the live agent's answers to steers written on its input.
        self.on_steer_answer: Callable[[Answer], None] | None = None
        #: Told the next prompt of a live session was written: the turn it
        #: starts and the ticket the agent's answer to it carries (or None).
        self.on_prompt_written: Callable[[int, str | None], None] | None = None

    # -- entry points ----------------------------------------------------------

    async def run(
        self,
        number: int,
        argv: list[str],
        env: Mapping[str, str],
        deadline: float = math.inf,
        started: subprocess.Popen[bytes] | OSError | None = None,
        *,
        prompt: str | None = None,
        at_turn_end: Callable[[AttemptRecord], Awaitable[str | None]] | None = None,
    ) -> AttemptRecord:
        """Run attempt ``number``; ``deadline`` is when the whole run must end.

        ``started`` is the agent already started by the command line (or why
        it could not be), for the first attempt. ``prompt``: the agent is
        driven over its stdin (ACP) and this is its prompt. Its session then
        lives across steers: at the end of each prompt turn ``at_turn_end``
        is given the turn's record (an attempt) and returns the next prompt
        on the live session, or None to end it; the record returned is the
        last turn's."""
        record = self.record = AttemptRecord(number=number, argv=argv)
        self._exit_boundary, self._late, self._late_warned = None, False, False
        self._deciding, self.prompt_not_taken = None, None
        self.stream.attempt = number
        now = trio.current_time()
        grace, settle_grace = graces_for(self.dialect, self.config)
        tracker = self.tracker = CompletionTracker(
            Limits(
                grace=grace,
                settle_grace=settle_grace,
                kill_after=self.config.kill_after,
                run_deadline=deadline,
                attempt_timeout=self.config.attempt_timeout,
                idle_timeout=self.config.idle_timeout,
                idle_looks_at_tree=True,
                attempt_limit_cancels=prompt is not None,
                drain_timeout=self.config.drain_timeout,
            ),
            now,
        )
        record.tracker = tracker
        self._limits, self._at_turn_end = tracker.limits, at_turn_end
        if started is None:
            try:
                started = child.spawn(argv, env, self.config.cwd, stdin_pipe=prompt is not None)
            except OSError as exc:
                started = exc
        if isinstance(started, OSError):
            record.spawn_error = child.spawn_error(argv, started)
            record.ended_at = time.time()
            return record
        proc = Child(started)
        record.pid = proc.pid
        if self.claim is not None:
            self.claim.agents.add(proc.pid)
        widen_pipe(proc.stdout)
        self.emit(Spawned(pid=proc.pid, argv=tuple(argv), dialect=chosen_name(self.dialect)))
        if self.on_spawned is not None:
            self.on_spawned(number)
        self._session = open_session(self, proc, prompt) if prompt is not None else None
        if self._session is not None and self._session.final_before_turn_end:
            tracker.limits = replace(tracker.limits, final_waits_for_turn_end=True)
            self._limits = tracker.limits
        self.status.update(now, force=True, state="running", pid=proc.pid, attempt=number)
        if self.config.idle_timeout is not None:
            self._activity.look(self._pid_if_running, now)
        for signum, cause in self._pending_interrupts:
            self._apply(tracker.interrupt(signum, trio.current_time(), cause))
        try:
            await self._supervise(proc)
        finally:
            self._session = None
            with trio.CancelScope(shield=True):
                await self._reap(proc)
                await self._end_leftovers(proc.pid)
                for stream in (proc.stdin, proc.stdout, proc.stderr):
                    if stream is not None:
                        await stream.aclose()
                if self.protocol_log is not None:
                    self.protocol_log.flush()
        record = self.record if self.record is not None else record
        record.ended_at = time.time()
        return record

    def interrupt(self, signum: signal.Signals, cause: str | None = None) -> None:
        """The wrapper received ``signum`` (or stops as if, for ``cause``): end
        the attempt as the tracker says. From the second signal on, the
        cleanup of leftovers kills at once."""
        self._signals_received += 1
        if self._signals_received >= 2:
            self._hurry.set()
        if self.tracker is None or self.record is None or self.record.pid is None:
            self._pending_interrupts.append((signum, cause))
            return
        self._apply(self.tracker.interrupt(signum, trio.current_time(), cause))

    @property
    def running(self) -> bool:
        """Whether an agent is running (an attempt started and not exited)."""
        return self._pid_if_running is not None

    @property
    def _pid_if_running(self) -> int | None:
        record = self.record
        return record.pid if record is not None and record.exit is None else None

    def steer(self, timeout: float) -> None:
        """End the running attempt (or its live turn) to take a steer from
        outside, once its running tool ended (at most ``timeout`` seconds)."""
        if self.running and self.tracker is not None:
            self._apply(self.tracker.steer(trio.current_time(), timeout))

    @property
    def session(self) -> LiveDriver | None:
        """The live session of the agent, while one driven over its stdin runs."""
        return self._session

    @property
    def background(self) -> trio.Nursery | None:
        return self._background

    def event_now(self, event: Event) -> None:
        """An event that came of something else than a line (a deadline)."""
        self._event(event, trio.current_time(), time.time())

    # -- the attempt -------------------------------------------------------------

    async def _supervise(self, proc: Child) -> None:
        assert proc.stdout is not None
        assert proc.stderr is not None
        async with trio.open_nursery() as background:
            self._background = background
            if self._session is not None:
                await background.start(self._session.run)
            background.start_soon(self._run_timer)
            if isinstance(self.dialect, SniffingDialect) and self._session is None:
                background.start_soon(self._hint_if_silent)
            background.start_soon(self.status.flush_held)
            async with trio.open_nursery() as pipes:
                pipes.start_soon(self._read_stdout, proc.stdout)
                pipes.start_soon(self._read_stderr, proc.stderr)
                await proc.wait()
                exit_ = self._exited(proc)
                pipes.cancel_scope.deadline = trio.current_time() + self.config.drain_timeout
            # What the exit itself means to this agent, after its last line.
            self._late = False
            now, wall = trio.current_time(), time.time()
            signum = int(exit_.signal) if exit_.signal is not None else None
            for event in self.dialect.on_exit(exit_.code, signum):
                self._event(event, now, wall)
            # Reported after the drain, so that it follows everything the agent wrote.
            self.emit(Exited(exit_code=exit_.code, exit_signal=exit_.signal_name))
            if pipes.cancel_scope.cancelled_caught:
                self.emit(
                    WarningEvent(
                        code="pipe_held_open",
                        message="the agent exited but its output stayed open (a process it "
                        "started may hold it); stopped reading after "
                        f"{self.config.drain_timeout:g}s",
                    )
                )
            if self._deciding is not None:
                # The stop gate of the turn that ended is let finish (its hooks
                # have their timeouts, the run its deadline): the next prompt it
                # gives is not lost because the agent exited meanwhile.
                await self._deciding.wait()
            self._background = None
            background.cancel_scope.cancel()

    async def _hint_if_silent(self) -> None:
        record = self.record
        await trio.sleep(SILENT_AGENT_HINT_AFTER)
        if record is not None and record is self.record and record.stdout_bytes == 0:
            self.emit(silent_agent(SILENT_AGENT_HINT_AFTER))

    def _exited(self, proc: Child) -> ProcessExit:
        assert self.record is not None
        tracker = self.tracker
        assert tracker is not None
        assert proc.returncode is not None
        exit_ = ProcessExit.from_returncode(proc.returncode)
        self.record.exit = exit_
        # The agent's own output is what it wrote before it exited: what has
        # been read and what is in the pipe now. A process it left behind may
        # hold the pipe and write more; that is recorded but decides nothing.
        self._exit_boundary = self.record.stdout_bytes + unread_bytes(proc.stdout)
        tracker.process_exited()
        self._set_timer()
        if self._backpressure is not None:
            self._backpressure.cancel()
        return exit_

    async def _run_timer(self) -> None:
        # The tracker is the current attempt's (a live session's turns each have one).
        while True:
            assert self.tracker is not None
            with trio.CancelScope(deadline=self.tracker.next_deadline) as scope:
                self._timer = scope
                await trio.sleep_forever()
            self._timer = None
            self._apply(self.tracker.tick(trio.current_time()))

    def _set_timer(self) -> None:
        if self._timer is not None and self.tracker is not None:
            self._timer.deadline = self.tracker.next_deadline

    async def _read_stdout(self, stream: trio.abc.ReceiveStream) -> None:
        reader = self._reader = StreamReader(
            self.dialect, self.config.max_line_bytes, coalesce=self.coalesce_deltas
        )
        record = self.record
        assert record is not None
        ended = False
        try:
            while data := await stream.receive_some(READ_CHUNK_BYTES):
                # A short read emptied the pipe: the agent paused.
                paused = len(data) < READ_CHUNK_BYTES
                boundary = self._exit_boundary
                if boundary is not None and not self._late:
                    # The chunk that crosses the boundary is split there.
                    cut = max(0, boundary - record.stdout_bytes)
                    if cut < len(data):
                        if cut:
                            self._stdout_chunk(reader, data[:cut])
                        self._late = True
                        data = data[cut:]
                self._stdout_chunk(reader, data)
                if paused and self.logs is not None:
                    self.logs.idle()
                # A slow reader of the wrapper's own output may hold the agent
                # back, but once the agent has exited its remaining output is
                # drained at once.
                if self.output is not None and self.record and self.record.exit is None:
                    with trio.CancelScope() as self._backpressure:
                        await self.output.wait_for_room()
                    self._backpressure = None
            ended = True
        finally:
            now, wall = trio.current_time(), time.time()
            tail, held = reader.close()
            self._take_counts(reader)
            self._events(tail, now, wall)
            for event in held:
                self._event(event, now, wall)
            self.stdout_log.flush()
        self._turn_over.set()  # no answer to a cancel can come any more
        if ended and self._session is not None and record.exit is None:
            # An agent that closed its output can answer nothing more.
            self._session.output_ended()

    def _stdout_chunk(self, reader: StreamReader, data: bytes | bytearray) -> None:
        record = self.record
        assert record is not None
        self.stdout_log.write(data)
        record.stdout_bytes += len(data)
        # One clock reading per chunk: its lines arrived together.
        now, wall = trio.current_time(), time.time()
        if self.tracker is not None:
            self.tracker.output_seen(now)
            self._activity.refresh(self._pid_if_running, now)
        events, texts = reader.feed(data)
        self._take_counts(reader)
        if texts is None:
            self._events(events, now, wall)
        elif texts:  # deltas of thinking alone are no events
            self.stream.emit_texts(texts, wall)
            self.status.touch(now, wall)
        if isinstance(self._session, MessageDriver):
            # Answers to steers come on lines that make no event.
            self._session.output_read()

    def _take_counts(self, reader: StreamReader) -> None:
        """The attempt's record tells what the stream's reader counted."""
        record = self.record
        assert record is not None
        record.recognised = reader.recognised
        record.stdout_lines = reader.lines

    async def _read_stderr(self, stream: trio.abc.ReceiveStream) -> None:
        framer = LineFramer(STDERR_LINE_BYTES)
        try:
            while data := await stream.receive_some(READ_CHUNK_BYTES):
                self.stderr_log.write(data)
                if self.tracker is not None:
                    now = trio.current_time()
                    self.tracker.output_seen(now)
                    self._activity.refresh(self._pid_if_running, now)
                for frame in framer.feed(data):
                    self._stderr_frame(frame)
                if len(data) < READ_CHUNK_BYTES and self.logs is not None:
                    self.logs.idle()
        finally:
            for frame in framer.close():
                self._stderr_frame(frame)
            self.stderr_log.flush()

    def _stderr_frame(self, frame: Frame) -> None:
        if isinstance(frame, Oversized):
            raw, more = frame.head, f"… ({frame.size} bytes)"
        else:
            raw, more = frame.rstrip(b"\r"), ""
        self.emit(StderrLine(text=raw.decode("utf-8", "replace") + more))
        plain = strip_escapes(raw).decode("utf-8", "replace").strip()
        if plain and self.record is not None:
            self.record.stderr_tail.append(plain + more)
        self.status.touch(trio.current_time(), time.time())

    def _events(self, events: list[Event], now: float, wall: float) -> None:
        run: list[TextDelta] = []
        for event in events:
            if type(event) is TextDelta:
                run.append(event)
                continue
            if run:
                self._deltas(run, now, wall)
                run = []
            self._event(event, now, wall)
        if run:
            self._deltas(run, now, wall)

    def _deltas(self, deltas: list[TextDelta], now: float, wall: float) -> None:
        # A run of the agent's deltas (each delta of a chunk, when every one
        # is written out) goes to the sinks at once; a delta changes neither
        # the summary nor completion.
        if len(deltas) > 1 and all(delta.coalesced == 1 for delta in deltas):
            self.stream.emit_texts([delta.text for delta in deltas], wall)
        else:
            for delta in deltas:
                self.stream.emit(delta, wall)
        self.status.touch(now, wall)

    def _event(self, event: Event, now: float, wall: float) -> None:
        if type(event) is TextDelta:
            # The bulk of a stream; a delta changes neither the summary nor completion.
            self.stream.emit(event, wall)
            self.status.touch(now, wall)
            return
        warnings = self.summary.observe(event)
        self.stream.emit(event, wall)
        for warning in warnings:
            self.stream.emit(warning, wall)
        if (
            self.on_usage is not None
            and isinstance(event, AssistantMessage)
            and (event.usage is not None or event.progress_usage)
        ):
            self.on_usage(event)
        if self.on_event is not None:
            self.on_event(event)
        if self._late:
            self._late_event(event)
            return
        assert self.tracker is not None
        if self._graces_pending:
            self._take_recognised_graces()
        if self._session is not None:
            self._session.observe(event)
        effects = self.tracker.observe(event, now)
        if effects:
            self._apply(effects)
        if isinstance(event, ToolStarted | ToolEnded):
            self.status.update(now, currentTool=self.summary.current_tool)
        # A live session's turn answers at its end: a tool started shows the task was taken.
        live = isinstance(event, ToolStarted) and self._session is not None
        if self.on_progress is not None and (
            live or isinstance(event, SessionStarted | AssistantMessage)
        ):
            self.on_progress()
        self.status.touch(now, wall)

    def _late_event(self, event: Event) -> None:
        """An event written after the agent exited, by a process it left
        behind: recorded, but it neither ends the run nor changes its end."""
        if (
            isinstance(event, AssistantMessage)
            and is_terminal(event.stop_reason)
            and not self._late_warned
        ):
            self._late_warned = True
            self.emit(late_final_message(event))

    # -- effects -------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        self.stream.emit(event)

    def _apply(self, effects: list[Effect]) -> None:
        assert self.tracker is not None
        for effect in effects:
            if isinstance(effect, SendSignal):
                self._send(effect)
            elif isinstance(effect, CancelTurn):
                if self._session is not None:
                    self._session.cancel()
                if not effect.for_steer:
                    self.emit(
                        WarningEvent(
                            code="turn_cancelled",
                            message=f"{effect.reason}: the turn was cancelled over its protocol",
                        )
                    )
            elif isinstance(effect, CheckActivity):
                now = trio.current_time()
                worked = self._activity.worked(self._pid_if_running, now)
                self._apply(self.tracker.activity(worked, now))
            else:
                self.emit(effect)
        self._set_timer()
        phase = self.tracker.phase
        if phase is Phase.GRACE:
            # The end may be near: the tools to end a lingering tree are
            # loaded now, in the grace, not when it has run out.
            proctree.prepare_to_signal()
        state = STATUS_OF_PHASE[phase]
        self.status.update(trio.current_time(), force=True, state=state)

    def _send(self, effect: SendSignal) -> None:
        session, tracker, nursery = self._session, self.tracker, self._background
        # A live session's agent is stopped over its protocol first (``after_cancel``).
        cancelled = session is not None and effect.signal is signal.SIGTERM and session.abort()
        if cancelled and nursery is not None and tracker is not None:
            self._turn_over = trio.Event()
            tracker.term_sent_at(trio.current_time() + CANCEL_BEFORE_TERM)
            nursery.start_soon(after_cancel, self._turn_over, lambda: self._term(effect, tracker))
            return
        self._signal(effect)

    def _term(self, effect: SendSignal, tracker: CompletionTracker) -> None:
        # Not once the agent exited, nor once a SIGKILL went (a second signal).
        if tracker is self.tracker and tracker.phase is Phase.TERMINATING and self.running:
            tracker.term_sent_at(trio.current_time())
            self._signal(effect)
            self._set_timer()

    def _signal(self, effect: SendSignal) -> None:
        assert self.record is not None
        assert self.record.pid is not None
        pids = [self.record.pid]
        if effect.signal is not signal.SIGINT:
            pids = proctree.signal_tree(self.record.pid, effect.signal)
        elif not proctree.signal_group(self.record.pid, effect.signal):
            # An interrupt goes where Ctrl-C goes, the agent's group, not its
            # tools' own groups: killed under it, a tool may go unrecorded in
            # the session it resumes. What it leaves running ends as leftovers.
            pids = []
        self._record_signal(effect.signal, effect.reason, pids)

    def _record_signal(self, sig: signal.Signals, reason: str, pids: Sequence[int]) -> None:
        if self.record is not None:
            self.record.signals_sent.append(
                {"signal": sig.name, "at": iso(time.time()), "reason": reason}
            )
        self.emit(SignalSent(signal=sig.name, reason=reason, pids=tuple(pids)))

    # -- cleanup -------------------------------------------------------------------

    async def _reap(self, proc: Child) -> None:
        """Make sure the child is dead and reaped (shielded by the caller)."""
        if proc.returncode is not None:
            return
        self._send(SendSignal(signal.SIGKILL, "the wrapper is stopping"))
        with trio.move_on_after(REAP_TIMEOUT):
            await proc.wait()
        if proc.returncode is not None and self.record is not None and self.record.exit is None:
            self.record.exit = ProcessExit.from_returncode(proc.returncode)

    async def _end_leftovers(
        self, pgid: int | None, who: str = "the agent exited but left"
    ) -> None:
        await end_leftovers(
            pgid,
            who,
            claim=self.claim,
            hurry=self._hurry,
            kill_after=self.config.kill_after,
            emit=self.emit,
            record_signal=self._record_signal,
        )

    async def end_leftovers(self) -> None:
        """End whatever is still below the wrapper at the end of the run
        (what a hook or an observer left behind), like the agent's leftovers."""
        with trio.CancelScope(shield=True):
            await self._end_leftovers(None, "hook handlers or the agent left")

    def _take_recognised_graces(self) -> None:
        """Once the stream's dialect is known, the tracker uses its graces
        (before the first event it made of the stream is observed)."""
        if not isinstance(self.dialect, SniffingDialect) or self.dialect.chosen is None:
            return
        self._graces_pending = False
        if self.tracker is not None:
            self.tracker.use_graces(*graces_for(self.dialect, self.config))
            self._limits = self.tracker.limits
