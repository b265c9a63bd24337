"""Steers and aborts from outside a run: what stands behind its control
socket (``control_server``), and how a steer reaches the agent.

Each steer is recorded as it comes (``steer_requested``, status.json's
``pendingSteers``) and settles once (``steer_delivered`` or
``steer_refused``), which is when its sender's receipt goes out.

Delivery, for every agent: a ``now`` steer ends the running attempt (once its tool
ended, within ``--steer-timeout``; SIGINT to the agent's process group as a terminal's
Ctrl-C, then the ladder to its whole tree) and the agent's session is resumed with it,
as a Stop handler's block resumes it; a live session (ACP) has its turn cancelled and
takes the steer as its next prompt (one that forgets a cancelled turn, at the end of
its turn). A steer is checked before the agent is interrupted: one whose session could
not be resumed, or too long for the agent's command line (alone or joined with the
steers that wait), is refused and the agent left alone. At a stop, the steers that
wait go first and that stop runs no Stop handlers; a steer that comes while the
handlers run joins their block (each part marked), or is delivered alone when they
allow the stop.

A steer written into a live session's running turn is ``sent`` until the agent
acknowledges it (pi's response, Codex's answer to ``turn/steer``, Claude Code's echo),
and only then ``delivered``. One the agent refuses waits again and goes as the next
prompt the wrapper gives the agent; when the run would end first, as a prompt of its
own before the session is closed (a steer the wrapper took is never dropped because
the run was about to end); only a refusal of that too settles it ``refused``. At a
turn's end the answers to the steers just written are waited for (bounded), and an
agent that keeps messages for its next prompt (pi) is given one.

One module, though long: a steer's every path (refused at once, resumed
with, joined into a live turn, acknowledged or refused there, carried by a
stop) moves the same ledger and the same receipts, and reads as one story.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import trio

from wrapper.core.config import RunConfig, child_env
from wrapper.core.control import (
    AbortRequest,
    ExternalSteer,
    ExternalSteers,
    SteerRequest,
    message,
    steer_max_bytes,
)
from wrapper.core.events import (
    SteerDelivered,
    SteerRefused,
    SteerRequested,
    SteerSent,
    WarningEvent,
)
from wrapper.core.limits import (
    ARG_MAX_FALLBACK,
    ARGUMENT_MAX_BYTES,
    LIVE_STEER_ANSWER_TIMEOUT,
    STEER_MAX_BYTES,
    STEER_PROMPT_RESERVE_BYTES,
)
from wrapper.core.outcome import RunFacts
from wrapper.core.steering import Block
from wrapper.dialects import CannotResume, Launch, UsageError
from wrapper.dialects.two_way import Answer
from wrapper.files import control_socket
from wrapper.hooks.stop_gate import StopGate
from wrapper.sinks.stream import EventStream, StatusWriter
from wrapper.supervision.attempt import AttemptSupervisor
from wrapper.supervision.control_server import ControlServer
from wrapper.supervision.live_session import OWN_TURN, MessageDriver

#: The prompt and session id a resume's command line is measured with.
_PROBE = "\x01steer\x01"
_PROBE_SESSION = "0" * 64


class ExternalControl:
    def __init__(
        self,
        config: RunConfig,
        stream: EventStream,
        status: StatusWriter,
        environ: Mapping[str, str],
        *,
        gate: StopGate,
        live: bool,
        supervisor: Callable[[], AttemptSupervisor | None],
        between: Callable[[], AbstractContextManager[None]],
        ended: Callable[[], bool],
        on_abort: Callable[[str | None], None],
        say_on_stderr: bool = True,
    ) -> None:
        """``gate``: the run's stop gate; ``live``: the agent takes its
        prompts on a live session; ``supervisor``: the run's, once it has
        one; ``between``: the scope hooks run in between attempts;
        ``ended``: whether the run is ending (a signal, its deadline);
        ``on_abort``: ends the run for an abort; ``say_on_stderr``: a run
        that can take no steer or abort says so on stderr (no live view of
        its own shows it)."""
        self.config = config
        self.stream = stream
        self.status = status
        self.environ = environ
        self.gate = gate
        self.live = live
        self.supervisor = supervisor
        self.between = between
        self.ended = ended
        self.on_abort = on_abort
        self.say_on_stderr = say_on_stderr
        gate.with_steers = self.with_steers
        self.ledger = ExternalSteers(config.max_external_steers)
        #: Set (and replaced) whenever a steer's state changes, by id.
        self._changes: dict[str, trio.Event] = {}
        #: The receipt each steer's sender was last told of, by id.
        self._said: dict[str, dict[str, Any]] = {}
        #: The steers on a live agent's input waiting for its answer, by ticket.
        self._sent: dict[str, list[ExternalSteer]] = {}
        #: The tickets of prompts that carry steers: refused, they are final.
        self._as_prompt: set[str] = set()
        #: Set (and replaced) whenever the agent answers a steer.
        self._answered = trio.Event()
        #: The steers the launch being started carries, until it has started.
        self.in_flight: list[ExternalSteer] = []
        #: Why requests are refused from now on (the run is ending), else None.
        self.closing: str | None = None
        self.server: ControlServer | None = None
        self._finished = trio.Event()
        self._outcome: str | None = None
        #: Where steers into a live session's running turn are delivered.
        self._nursery: trio.Nursery | None = None
        self._delivering = False
        #: The steers on their way into the running turn (their prompt hooks run).
        self.joining: list[ExternalSteer] = []
        #: The steers whose prompt handlers run, by id (not queued yet), and
        #: an event set (and replaced) whenever a check ends.
        self._checking: set[str] = set()
        self._checked = trio.Event()
        #: The context the prompt handlers added to each steer, by id.
        self._contexts: dict[str, list[str]] = {}

    async def start(self, nursery: trio.Nursery, enabled: bool) -> None:
        """Listen on the run's socket (``enabled``: the run directory is usable)."""
        self._nursery = nursery
        if not enabled:
            return
        try:
            place = control_socket.prepare(self.config.run_dir, self.environ)
        except control_socket.NoSocket as exc:
            self._unavailable(f"the run takes no steer or abort from outside: {exc}")
            return
        server = ControlServer(place, self, self._unavailable)
        if await nursery.start(server.serve) is not None:
            self.server = server
            self.status.update(trio.current_time(), force=True, control=place.path)

    async def close(self, outcome: str | None) -> None:
        """The run ended with ``outcome``: stop listening, once the last
        receipts went out (bounded)."""
        self._outcome = outcome
        self._finished.set()
        if self.server is not None:
            await self.server.close()
            self.server = None

    # -- the socket's requests -------------------------------------------------

    def steer(self, request: SteerRequest) -> ExternalSteer:
        if self.closing is not None:
            # After the result: said to its sender alone.
            steer = ExternalSteer("-", request.text, request.when, time.time())
            steer.state, steer.why = "refused", self.closing
            return steer
        steer = self.ledger.request(request, time.time(), self.steer_max_bytes())
        if steer.state != "refused":
            # One refused at once has its receipt already, and nobody waits on it.
            self._changes[steer.id] = trio.Event()
            self._said[steer.id] = steer.receipt()
        self.stream.emit(SteerRequested(id=steer.id, when=steer.when, text_length=steer.length))
        if steer.state == "refused":
            self._said_refused(steer)
        elif self.config.task is None:
            self.refuse(
                [steer],
                "the run has no --task: the wrapper does not own the agent's prompt, "
                "so it cannot give it a steer",
            )
        elif self.config.settings.handlers("UserPromptSubmit") and self._nursery is not None:
            # Checked before anything is interrupted for it: one the prompt
            # handlers refuse leaves the agent alone.
            self._checking.add(steer.id)
            self._pending_changed()
            self._nursery.start_soon(self._check, steer)
        else:
            self._admit(steer)
        return steer

    def _admit(self, steer: ExternalSteer) -> None:
        """``steer`` goes into the live turn, ends the attempt (``now``) or waits."""
        self._pending_changed()
        if self._joins_turn():
            self._deliver_live_soon()
        elif steer.when == "now":
            self._interrupt_for(steer)

    @trio.lowlevel.enable_ki_protection  # a Ctrl-C goes to the main task (``facts.ki_protected``)
    async def _check(self, steer: ExternalSteer) -> None:
        """The prompt handlers on a steer that just came (``source``: a
        steer, or a follow-up for ``next-stop``): refused, or admitted with
        the context they add."""
        try:
            contexts, refused = await self.gate.check_prompt(steer.text, _source([steer]))
        finally:
            self._checking.discard(steer.id)
            self._checked.set()
            self._checked = trio.Event()
        if steer.state != "queued":  # the run ended meanwhile: ``end`` refused it
            return
        if refused is not None:
            self.refuse([steer], f"the steer prompt {refused}")
            return
        self._contexts[steer.id] = contexts
        self._admit(steer)

    async def _checks_done(self) -> None:
        while self._checking:  # the stop carries the steers that came
            await self._checked.wait()

    def _contexts_of(self, steers: Sequence[ExternalSteer]) -> list[str]:
        return [text for steer in steers for text in self._contexts.get(steer.id, ())]

    async def changed(self, steer: ExternalSteer, state: str) -> dict[str, Any] | None:
        while (said := self._said.get(steer.id, steer.receipt()))["state"] == state:
            if self.closing is not None and state == "sent":
                return None  # the run ends with it on the agent's input, unanswered
            await self._changes[steer.id].wait()
        return said

    def _touch(self, steers: Sequence[ExternalSteer]) -> None:
        """``steers`` changed state: their senders hear of it. (What a steer
        is while the wrapper moves it, between two of these, is not said.)"""
        for steer in steers:
            changes = self._changes.get(steer.id)
            if changes is not None:
                self._said[steer.id] = steer.receipt()
                changes.set()
                self._changes[steer.id] = trio.Event()

    async def finished(self) -> str | None:
        await self._finished.wait()
        return self._outcome

    def abort(self, request: AbortRequest) -> str | None:
        if self.closing is not None:
            return self.closing
        self.on_abort(request.reason)
        return None

    # -- the run's side ----------------------------------------------------------

    @property
    def queued(self) -> list[ExternalSteer]:
        """The steers that wait for delivery (those still being checked do not)."""
        return [steer for steer in self.ledger.queued if steer.id not in self._checking]

    def take(self) -> list[ExternalSteer]:
        """The steers that wait, now carried by the launch being made."""
        taken = self.queued
        self.in_flight = [*self.in_flight, *taken]
        for steer in taken:
            steer.state = "delivered"  # not queued any more; settled by ``delivered``
        return taken

    def delivered(self, how: str, attempt: int) -> None:
        """The launch carrying the steers in flight started (or the live
        session took them)."""
        steers, self.in_flight = self.in_flight, []
        self._settle(steers, how, attempt)

    def _settle(self, steers: Sequence[ExternalSteer], how: str, attempt: int) -> None:
        self.ledger.deliver(steers, how, attempt, time.time())
        for steer in steers:
            self.stream.emit(SteerDelivered(id=steer.id, how=how, next_attempt=attempt))
        self._touch(steers)
        self._pending_changed()

    def refuse(self, steers: Sequence[ExternalSteer], why: str) -> None:
        now = time.time()
        for steer in steers:
            self.ledger.refuse(steer, why, now)
            self._said_refused(steer)
        self.in_flight = [steer for steer in self.in_flight if steer not in steers]
        self._pending_changed()

    def refuse_in_flight(self, why: str) -> None:
        self.refuse(list(self.in_flight), why)

    def end(self, why: str) -> None:
        """The run is ending: every steer still waiting is refused, and so is
        every request from now on; one on the agent's input and not answered
        stays ``sent``, the last state it reached."""
        self.closing = why
        self._sent = {}
        waiting = [*self.in_flight, *self.joining, *self.ledger.queued]
        for steer in waiting:
            if steer.refused_live is not None:
                self.refuse([steer], f"{why} (the agent had refused it live: {steer.refused_live})")
        self.refuse([steer for steer in waiting if steer.state != "refused"], why)
        self._touch(self.ledger.sent)

    # -- delivery ----------------------------------------------------------------

    def _interrupt_for(self, steer: ExternalSteer) -> None:
        """End the running attempt for a ``now`` steer, unless the agent's
        session could not be resumed (then the steer is refused and the agent
        left alone). Between attempts the stop being decided carries it."""
        supervisor = self.supervisor()
        if supervisor is None:
            return
        if self._joins_turn():
            self._deliver_live_soon()
            return
        session = supervisor.session if supervisor.running else None
        if session is not None and not session.cancel_keeps_turn:
            return  # the end of its turn takes the steer: cancelled, it would forget it
        summary = self.gate.summary
        if summary.last_assistant is None and not summary.tool_runs:
            # Its session may not hold the task yet: a resume now could lose
            # it (a live session may not even have had its first prompt, and
            # has no turn to cancel). Tried again at the agent's first answer.
            return
        problem = None if self.live else self.resume_problem()
        if problem is not None and supervisor.running:
            if summary.session_id is None:
                return  # not said yet: tried again once the agent reports it
            self.refuse([steer], problem)
            return
        supervisor.steer(self.config.steer_timeout)

    def _joins_turn(self) -> bool:
        """Whether steers join the running turn of a live session (pi's RPC mode)."""
        supervisor = self.supervisor()
        session = supervisor.session if supervisor is not None and supervisor.running else None
        return self.live and session is not None and session.steers_in_turn

    def _deliver_live_soon(self) -> None:
        if self._nursery is not None and not self._delivering:
            self._delivering = True
            self._nursery.start_soon(self._deliver_live)

    @trio.lowlevel.enable_ki_protection  # as ``_check``
    async def _deliver_live(self) -> None:
        """The steers that wait, into the live session's running turn: those
        for ``now`` as a steer, those for ``next-stop`` as a follow-up, when
        the turn takes them now. One that cannot join it waits for the
        turn's end, which makes it the next prompt, or (Claude Code) for
        the next tool."""
        try:
            while (supervisor := self.supervisor()) is not None and not self.ended():
                for when in ("now", "next-stop"):
                    # One the agent refused live goes as the next prompt instead.
                    steers = [
                        steer
                        for steer in self.queued
                        if steer.when == when and steer.refused_live is None
                    ]
                    session = supervisor.session
                    if steers and session is not None and session.takes(when):
                        break
                else:
                    return
                for steer in steers:
                    steer.state = "delivered"  # not queued any more; settled below
                self.joining = steers
                prompt, refused = await self.gate.before_prompt(
                    message(steers),
                    first=False,
                    source=_source(steers),
                    session=None,
                    checked=self._contexts_of(steers),
                )
                self.joining = []
                if self.closing is not None:
                    return  # ``end`` refused them
                if refused is not None or self.ended():
                    why = refused or "was not sent: the run is ending"
                    self.refuse(steers, f"the steer prompt {why}")
                    continue
                joined = supervisor.deliver_live(when, prompt)
                if joined is None:
                    for steer in steers:
                        steer.state = "queued"
                    self._pending_changed()
                    return
                self.gate.steering.resume_from_outside()
                number, ticket = joined
                if ticket is None:
                    self._settle(steers, "live", number)
                else:
                    self._send(steers, ticket, number)
        finally:
            self.joining = []
            self._delivering = False

    def _send(self, steers: list[ExternalSteer], ticket: str, attempt: int) -> None:
        """``steers`` are on the live agent's input as ``ticket``: sent, and
        delivered once the agent acknowledges them."""
        self._sent[ticket] = steers
        for steer in steers:
            self.ledger.send(steer, ticket, attempt)
            self.stream.emit(SteerSent(id=steer.id, next_attempt=attempt))
        self._touch(steers)
        self._pending_changed()

    def answered(self, answer: Answer) -> None:
        """The live agent answered the steers it was sent as ``answer.ticket``."""
        steers = self._sent.pop(answer.ticket, [])
        self._answered.set()
        self._answered = trio.Event()
        as_prompt = answer.ticket in self._as_prompt
        self._as_prompt.discard(answer.ticket)
        if not steers or self.closing is not None:
            return
        if answer.refused is None:
            attempt = steers[0].attempt
            self._settle(steers, "live", attempt if attempt is not None else 0)
            return
        if as_prompt:
            # Given as a prompt and refused as one too: it cannot reach the agent.
            for steer in steers:
                before = f" (and live before: {steer.refused_live})" if steer.refused_live else ""
                self.refuse([steer], f"the agent refused it: {answer.refused}{before}")
            return
        for steer in steers:
            self.ledger.refused_live(steer, answer.refused)
        self.stream.emit(
            WarningEvent(
                code="steer_refused_live",
                message=f"the agent refused steer {', '.join(s.id for s in steers)} "
                f"({answer.refused}): it goes again as the next prompt",
            )
        )
        self._touch(steers)
        self._pending_changed()

    async def _answers_in(self) -> None:
        """Wait for the agent's answers to the steers just written (at most
        ``LIVE_STEER_ANSWER_TIMEOUT``): a refused one is the next prompt."""
        with trio.move_on_after(LIVE_STEER_ANSWER_TIMEOUT):
            while self._sent_unanswered():
                await self._answered.wait()

    def _sent_unanswered(self) -> bool:
        # Claude Code's echo comes only when the model is next asked: at a
        # turn's end none is waited for (its answer is the next turn's).
        supervisor = self.supervisor()
        session = supervisor.session if supervisor is not None else None
        if isinstance(session, MessageDriver) and not session.answers_at_turn_end:
            return False
        return bool(self._sent)

    def _turn_coming(self) -> bool:
        supervisor = self.supervisor()
        session = supervisor.session if supervisor is not None else None
        return isinstance(session, MessageDriver) and session.client.turn_coming()

    def _held_prompt(self) -> str | None:
        """The prompt that makes the live agent act on messages it keeps for
        its next prompt (pi), when the run would end without one."""
        supervisor = self.supervisor()
        session = supervisor.session if supervisor is not None else None
        return session.client.held_prompt() if isinstance(session, MessageDriver) else None

    def steerable(self) -> None:
        """The live session's turn takes steers from now on: those that wait go."""
        if self.queued and self._joins_turn():
            self._deliver_live_soon()

    def progress(self) -> None:
        """The agent reported its session or an answer: a steer that waited
        for it may go."""
        for steer in self.queued:
            if steer.when == "now":
                self._interrupt_for(steer)
                return

    def steer_max_bytes(self) -> int:
        """The most a steer's text may hold in this run: what a live session
        takes, or what the agent's command line leaves for it when a steer
        resumes the agent with its prompt there."""
        if self.live:
            return STEER_MAX_BYTES
        config, dialect = self.config, self.gate.dialect
        command, run_dir = config.command, config.run_dir
        session = self.gate.summary.session_id or _PROBE_SESSION
        argv: list[str] | None
        try:
            argv = dialect.resume(command, _PROBE, run_dir, session).argv
            if not any(_PROBE in word for word in argv):
                argv = None  # the prompt goes on stdin
            else:
                # An agent that takes a long prompt from a file (pi) has no limit there.
                long = "x" * ARGUMENT_MAX_BYTES
                spilled = dialect.resume(command, long, run_dir, session).argv
                if all(long not in word for word in spilled):
                    argv = None
        except UsageError:
            pass  # too long for one argument: ``argv`` is the bound
        except CannotResume:
            argv = [*command, _PROBE]  # not known yet: the prompt after the command
        try:
            arg_max = os.sysconf("SC_ARG_MAX")
        except (OSError, ValueError):
            arg_max = -1
        arg_max = arg_max if arg_max > 0 else ARG_MAX_FALLBACK
        return steer_max_bytes(argv, _PROBE, child_env(config, 1, self.environ), arg_max)

    def resume_problem(self) -> str | None:
        """Why the agent's session could not be resumed now, or None."""
        config, gate = self.config, self.gate
        session = gate.summary.session_id
        try:
            gate.dialect.resume(config.command, "-", config.run_dir, session)
        except CannotResume as exc:
            return f"the agent could not be resumed with it: {exc}"
        search = gate.dialect.transcript_search(session, gate.hook_ctx.env)
        if search is not None and search[0].is_dir() and not any(search[0].glob(search[1])):
            return f"the agent's session {session} has no file under {search[0]} to resume"
        return None

    async def after_stop(self, facts: RunFacts, number: int) -> Launch | None:
        """The agent stopped (or was ended for a steer): what it resumes
        with, or None to end the run."""
        with self.between():
            await self._checks_done()
        if self.queued:
            launch = await self._launch()
            if launch is not None or self.ended():
                return launch
        resumed = None  # the run's end may cancel the gate before it decides
        with self.between():
            resumed = await self.gate.at_stop(facts, number)
        if resumed is None and self.queued and not self.ended():
            resumed = await self._launch()
        if resumed is None:
            self.refuse_in_flight(self._why_not())
        return resumed

    async def at_turn_end(self, facts: RunFacts, number: int) -> str | None:
        """A live session's turn ``number`` ended: the next prompt, or None."""
        if self._sent:
            await self._answers_in()
        with self.between():
            await self._checks_done()
        if self._turn_coming() and not self.ended():
            # A steer the agent took too late for this turn is a turn of its
            # own: waited for; the stop gate runs at its end.
            for steers in self._sent.values():
                for steer in steers:
                    steer.attempt = number + 1
            return OWN_TURN
        prompt = await self._prompt() if self.queued else None
        if prompt is None and not self.ended():
            resumed = None
            with self.between():
                resumed = await self.gate.at_stop(facts, number)
            if resumed is None and self.queued and not self.ended():
                prompt = await self._prompt()
            elif resumed is not None:
                prompt = resumed.prompt
        if prompt is None and not self.ended():
            prompt = self._held_prompt()
        if prompt is None or self.ended():
            self.refuse_in_flight(self._why_not())
            return None
        # The steers it carries are the session's once it is written.
        return prompt

    def prompt_written(self, attempt: int, ticket: str | None) -> None:
        """The live session's next prompt, carrying the steers in flight,
        was written for turn ``attempt``: delivered, or sent until the agent
        answers it (``ticket``)."""
        steers, self.in_flight = self.in_flight, []
        if not steers:
            return
        if ticket is None:
            self._settle(steers, "live", attempt)
            return
        self._as_prompt.add(ticket)
        self._send(steers, ticket, attempt)

    async def _prompt(self) -> str | None:
        """The steers that wait, as the next prompt (None: refused)."""
        steers = self.take()
        prompt, refused = None, None
        with self.between():
            # Resumed, the agent starts its saved session again (SessionStart).
            session = None if self.live else "resume"
            text = message(steers, cut=self._cut_call())
            # On the agent's command line, what hooks add must fit what was
            # kept free for it when the steers were taken.
            added = len(text.encode()) - len(message(steers).encode())
            room = None if self.live else max(0, STEER_PROMPT_RESERVE_BYTES - added)
            prompt, refused = await self.gate.before_prompt(
                text,
                first=False,
                source=_source(steers),
                session=session,
                room=room,
                checked=self._contexts_of(steers),
            )
        if refused is not None or prompt is None or self.ended():
            self.refuse(steers, f"the steer prompt {refused or 'was not sent: the run is ending'}")
            return None
        self.gate.steering.resume_from_outside()
        return prompt

    def _cut_call(self) -> str | None:
        """The tool call the attempt that just ended was interrupted in for
        a steer, if it was."""
        supervisor = self.supervisor()
        tracker = supervisor.tracker if supervisor is not None else None
        tools = self.gate.summary.recent_tools
        return tools[-1] if tracker is not None and tracker.steer_cut_tool and tools else None

    async def _launch(self) -> Launch | None:
        """The launch that resumes the agent's session with the steers that wait."""
        problem = self.resume_problem()
        if problem is not None:
            self.refuse(self.take(), problem)
            return None
        prompt = await self._prompt()
        if prompt is None:
            return None
        config, gate = self.config, self.gate
        try:
            return gate.dialect.resume(
                config.command, prompt, config.run_dir, gate.summary.session_id
            )
        except (UsageError, CannotResume) as exc:
            # Checked when the steers came; a safety net, never a crash.
            self.refuse(list(self.in_flight), f"the agent could not be resumed with it: {exc}")
            return None

    def with_steers(self, block: Block) -> str:
        """A Stop handler's block as the next prompt, with the steers that wait."""
        steers = self.take()
        if not steers:
            return block.reason
        joined = message(steers, (block.handler, block.reason))
        return "\n\n".join([joined, *self._contexts_of(steers)])

    def spawned(self, number: int) -> None:
        """Attempt ``number`` started: the steers it carries are delivered;
        a ``now`` steer that came while no agent ran ends it at once."""
        if self.in_flight and number > 1:
            self.delivered("resume", number)
        waiting = [steer for steer in self.queued if steer.when == "now"]
        if waiting:
            self._interrupt_for(waiting[0])

    def _why_not(self) -> str:
        if self.ended():
            return "the run ended before it could be delivered"
        failure = self.gate.steering.failure
        return "the agent could not be sent back to work" + (f": {failure}" if failure else "")

    def _said_refused(self, steer: ExternalSteer) -> None:
        self.stream.emit(SteerRefused(id=steer.id, why=steer.why or "refused"))
        self._touch([steer])

    def _pending_changed(self) -> None:
        self.status.update(
            trio.current_time(), force=True, pendingSteers=self.ledger.pending_json()
        )

    def _unavailable(self, message: str) -> None:
        """No socket: said at once, in the events, status.json (for ``steer``
        and ``abort`` to tell their sender) and on stderr where no live view
        of the run's own shows its warnings: a runner must not learn only at
        the end that it could not have steered or aborted the run."""
        self.stream.emit(WarningEvent(code="control_unavailable", message=message))
        self.status.update(trio.current_time(), force=True, controlUnavailable=message)
        if self.say_on_stderr:
            label = f"{self.config.label}: " if self.config.label else ""
            with contextlib.suppress(OSError, ValueError):
                print(f"agent-wrapper: warning: {label}{message}", file=sys.stderr, flush=True)


def _source(steers: Sequence[ExternalSteer]) -> str:
    """What a prompt carrying ``steers`` is to the prompt handlers."""
    return "steer" if any(steer.when == "now" for steer in steers) else "follow_up"
