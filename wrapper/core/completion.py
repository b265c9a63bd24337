"""Deciding when the agent has really finished, and what to do about it.

The tracker is fed normalized events, the child's exit and the wrapper's
signals, each with the current time, and answers with effects: wrapper events
to record and signals to send. It owns no clock and no process; the shell asks
it for ``next_deadline`` and calls ``tick`` when that time comes.

Rules:

* A terminal assistant message (``stop``, ``length``, ``aborted``, ``error``)
  becomes the run's final message and arms the grace timer. Nothing else
  does: a ``toolUse`` turn, a missing or an unknown stop reason leave the
  agent working for as long as it likes (only ``--timeout`` bounds it).
* New work disarms the timer and forgets the final message: a new turn, a
  tool starting, a non-terminal assistant message.
* A pause disarms the timer but keeps the final message: the agent retrying
  after an error, compacting, or announcing ``agent_end`` with a retry to
  come. The timer is armed again when the pause ends without new work.
* The agent saying it is completely done (``agent_end`` without a retry,
  ``agent_settled``) after a final message shortens the grace to the settle
  grace.
* Silence (no output on stdout or stderr) longer than the idle limit while
  no tool is running means the agent hangs: it is terminated like a timeout.
  Unless the shell is asked to look first (``idle_looks_at_tree``): then the
  due deadline asks it to look at the agent's process tree once
  (``CheckActivity``), and work there (CPU time spent, a new process) counts
  as output; an agent may report a tool only when it finishes.
* An agent whose output closed while it owed an answer (``output_closed``)
  and that has not exited within the drain timeout stopped answering: it is
  terminated like a timeout.
* When the grace expires the child is lingering: SIGTERM, then SIGKILL after
  ``kill_after``. The whole-run deadline, the attempt's own time limit and
  the wrapper's own signals take the same road; a second wrapper signal goes straight to SIGKILL.
* A steer from outside (``steer``) ends the attempt so that the session can
  be resumed with it: once no tool is running (a running tool gets up to the
  steer timeout to end), SIGINT, then SIGTERM and SIGKILL ``kill_after``
  apart; a live session's turn is cancelled over its protocol instead. An
  agent already finishing (a final message seen) is left to stop by itself:
  its stop carries the steer.
"""

from __future__ import annotations

import enum
import math
import signal
from dataclasses import dataclass, replace

from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    Compaction,
    Event,
    GraceCancelled,
    GraceStarted,
    Retry,
    ToolEnded,
    ToolStarted,
    TurnStarted,
    WarningEvent,
    WrapperEvent,
    is_terminal,
)
from wrapper.core.limits import LATE_TEXT_CHARS


class Phase(enum.Enum):
    #: The agent is working; no final message is pending.
    WORKING = "working"
    #: A final message was seen; the child may still exit on its own.
    GRACE = "grace"
    #: SIGINT was sent to end the attempt for a steer; SIGTERM follows at the deadline.
    INTERRUPTING = "interrupting"
    #: SIGTERM was sent; SIGKILL follows at the deadline.
    TERMINATING = "terminating"
    #: SIGKILL was sent; only the child's exit is left to wait for.
    KILLING = "killing"
    #: The child has exited.
    EXITED = "exited"


@dataclass(frozen=True, slots=True)
class SendSignal:
    """Signal the child's whole process tree."""

    signal: signal.Signals
    reason: str


@dataclass(frozen=True, slots=True)
class CheckActivity:
    """The idle deadline came due: look at the agent's process tree for work
    done since ``since`` and answer with ``CompletionTracker.activity``."""

    since: float


@dataclass(frozen=True, slots=True)
class CancelTurn:
    """Ask the agent to end its turn (a live session's ``session/cancel``);
    the process goes on."""

    reason: str
    #: The turn is cancelled to take a steer from outside: the steer's own
    #: events say so, no warning is due.
    for_steer: bool = False


Effect = WrapperEvent | SendSignal | CheckActivity | CancelTurn


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The timings the tracker keeps to: graces, the kill timeout and the run's limits."""

    grace: float
    settle_grace: float
    kill_after: float
    #: When the whole run must end (on the shell's clock; it spans every attempt).
    run_deadline: float = math.inf
    #: Limit on this attempt alone, in seconds from the tracker's start.
    attempt_timeout: float | None = None
    #: Longest silence (no output at all) allowed while no tool is running.
    idle_timeout: float | None = None
    #: Whether the due idle deadline first asks the shell to look for work in
    #: the process tree (``CheckActivity``) instead of ending the agent at once.
    idle_looks_at_tree: bool = False
    #: Whether the attempt's limit cancels the turn over the agent's protocol
    #: (``CancelTurn``) instead of ending the process: the turn's end is then
    #: gated as any other; an agent that does not end it within ``kill_after``
    #: is terminated.
    attempt_limit_cancels: bool = False
    #: Whether a live session says when its turn ended after the turn's
    #: final message (pi's ``agent_end``): that message starts no grace until
    #: ``release``, the stop gate having had its say.
    final_waits_for_turn_end: bool = False
    #: How long an agent whose output closed while it owed an answer
    #: (``output_closed``) may take to exit before it is terminated: as long as
    #: the output of an agent that exited is drained (the default is
    #: ``--drain-timeout``'s, kept here so that this module needs no settings).
    drain_timeout: float = 2.0


class CompletionTracker:
    def __init__(self, limits: Limits, started_at: float) -> None:
        self.limits = limits
        self.phase = Phase.WORKING
        #: The terminal assistant message the run ended on, if any.
        self.final: AssistantMessage | None = None
        #: The last assistant message of any kind: the agent's last word when
        #: no terminal one came (an unknown stop reason kept as it was).
        self.last_message: AssistantMessage | None = None
        #: The whole run's deadline passed.
        self.timed_out = False
        #: This attempt's own limit passed.
        self.attempt_timed_out = False
        #: The agent was silent for longer than the idle limit.
        self.idle_timed_out = False
        #: The agent closed its output while it owed an answer, and did not exit.
        self.stopped_answering = False
        #: When an agent whose output closed is terminated if it has not exited.
        self._mute_deadline = math.inf
        self.interrupted_by: signal.Signals | None = None
        #: True once the wrapper had to end a child that lingered after its final message.
        self.forced_cleanup = False
        #: True once any signal was sent to the child by the wrapper.
        self.signalled = False
        self._paused = False
        self._deadline = math.inf
        self._run_deadline = limits.run_deadline
        self._attempt_deadline = (
            started_at + limits.attempt_timeout if limits.attempt_timeout is not None else math.inf
        )
        self._idle = limits.idle_timeout if limits.idle_timeout is not None else math.inf
        self._last_output = started_at
        self._tools_running = 0
        #: The shell was asked to look at the process tree and has not answered.
        self._looking = False
        #: Between the turns of a live session (``hold``): the turn's end
        #: starts no grace and only the run's deadline counts.
        self._held = False
        #: The stop gate let a live session's turn end (``release``).
        self._released = False
        #: The turn was cancelled at the attempt's limit; ``_deadline`` is
        #: when the agent is terminated if the turn has not ended.
        self._cancelling = False
        #: A steer from outside waits for the running tools to end, until
        #: this deadline (then the agent is interrupted anyway).
        self._steer_deadline = math.inf
        #: The attempt was ended (or its turn cancelled) to take a steer from outside.
        self.steered = False
        #: ... while a tool of the agent still ran (cut short, unfinished).
        self.steer_cut_tool = False

    @property
    def next_deadline(self) -> float:
        """When ``tick`` must next be called (``math.inf`` when nothing is pending)."""
        if self.phase is Phase.EXITED:
            return math.inf
        if self._limit_hit:
            return self._deadline
        if self._held:
            return min(self._deadline, self._run_deadline, self._mute_deadline)
        return min(
            self._deadline,
            self._steer_deadline,
            self._run_deadline,
            self._attempt_deadline,
            self._idle_deadline,
            self._mute_deadline,
        )

    @property
    def _limit_hit(self) -> bool:
        return (
            self.timed_out
            or self.attempt_timed_out
            or self.idle_timed_out
            or self.stopped_answering
        )

    @property
    def _idle_deadline(self) -> float:
        if self._tools_running or self.phase is not Phase.WORKING or self._looking or self._held:
            return math.inf
        return self._last_output + self._idle

    def output_seen(self, now: float) -> None:
        """The agent wrote something (stdout or stderr): it is not idle."""
        self._last_output = now

    def observe(self, event: Event, now: float) -> list[Effect]:
        if isinstance(event, AssistantMessage):
            self.last_message = event
            if is_terminal(event.stop_reason):
                self.final = event
                self._paused = False
                # The agent is stopping by itself; its stop carries the steer.
                self._steer_deadline = math.inf
                return self._arm(now, settled=False, restart=True)
            return self._work(f"an assistant turn ended with {event.stop_reason!r}", forget=True)
        if isinstance(event, TurnStarted):
            return self._work("a new turn started", forget=True)
        if isinstance(event, ToolStarted):
            self._tools_running += 1
            return self._work(f"tool {event.tool!r} started", forget=True)
        if isinstance(event, ToolEnded):
            self._tools_running = max(0, self._tools_running - 1)
            if self._steer_deadline < math.inf and not self._tools_running:
                return self._interrupt_for_steer(now, "its tool ended")
            return []
        if isinstance(event, Retry):
            if event.phase == "start":
                return self._pause("the agent is retrying")
            return self._unpause(now, settled=False)
        if isinstance(event, Compaction):
            if event.phase == "start":
                return self._pause("the agent is compacting its context")
            return self._unpause(now, settled=False)
        if isinstance(event, AgentEnded):
            if event.will_retry:
                return self._pause("the agent announced a retry")
            return self._unpause(now, settled=event.settled or event.will_retry is False)
        return []

    def tick(self, now: float) -> list[Effect]:
        effects: list[Effect] = []
        if self.phase is not Phase.EXITED and not self._limit_hit:
            if now >= self._run_deadline:
                self.timed_out = True
                effects += self._terminate(now, "the run's --timeout expired")
            elif now >= self._mute_deadline:
                self.stopped_answering = True
                effects += self._terminate(
                    now,
                    "the agent closed its output while it owed an answer and had not exited "
                    f"{self.limits.drain_timeout:g}s later (--drain-timeout)",
                )
            elif now >= self._attempt_deadline and not self._held:
                self.attempt_timed_out = True
                reason = "the attempt's --attempt-timeout expired"
                if self.limits.attempt_limit_cancels and self.phase is Phase.WORKING:
                    self._cancelling = True
                    self._deadline = now + self.limits.kill_after
                    return [CancelTurn(reason)]
                effects += self._terminate(now, reason)
            elif now >= self._steer_deadline:
                effects += self._interrupt_for_steer(
                    now, "its tool was still running at the steer timeout (--steer-timeout)"
                )
            elif now >= self._idle_deadline:
                if self.limits.idle_looks_at_tree:
                    self._looking = True
                    effects.append(CheckActivity(since=self._last_output))
                else:
                    effects += self._idle_expired(now)
        if now < self._deadline:
            return effects
        if self._cancelling and self.phase is Phase.WORKING:
            self._cancelling = False
            effects += self._terminate(
                now, f"the turn did not end {self.limits.kill_after:g}s after it was cancelled"
            )
        elif self.phase is Phase.GRACE:
            self.forced_cleanup = True
            effects += self._terminate(now, "the agent was still running after its final message")
        elif self.phase is Phase.INTERRUPTING:
            effects += self._terminate(
                now, f"still running {self.limits.kill_after:g}s after SIGINT (to take a steer)"
            )
        elif self.phase is Phase.TERMINATING:
            self.phase = Phase.KILLING
            self._deadline = math.inf
            effects.append(
                SendSignal(
                    signal.SIGKILL, f"still running {self.limits.kill_after:g}s after SIGTERM"
                )
            )
        return effects

    def interrupt(
        self, signum: signal.Signals, now: float, cause: str | None = None
    ) -> list[Effect]:
        """The wrapper itself received ``signum`` (or stops as if it had, for
        ``cause``, the reason its signals give)."""
        if self.phase is Phase.EXITED:
            return []
        if self.interrupted_by is None:
            self.interrupted_by = signum
            return self._terminate(now, cause or f"the wrapper received {signum.name}")
        if self.phase is Phase.KILLING:
            return []
        self.phase = Phase.KILLING
        self._deadline = math.inf
        return [SendSignal(signal.SIGKILL, f"the wrapper received a second signal ({signum.name})")]

    def steer(self, now: float, timeout: float) -> list[Effect]:
        """End the attempt to take a steer from outside: at once when no tool
        is running, else when the running tools end or ``timeout`` seconds
        from now, whichever comes first. Nothing while the agent is already
        stopping by itself (its stop carries the steer) or being ended."""
        if self.phase is not Phase.WORKING or self._limit_hit or self._held or self.steered:
            return []
        if self._tools_running and timeout > 0:
            self._steer_deadline = min(self._steer_deadline, now + timeout)
            return []
        return self._interrupt_for_steer(now, "no tool was running")

    def _interrupt_for_steer(self, now: float, when: str) -> list[Effect]:
        self._steer_deadline = math.inf
        if self.phase is not Phase.WORKING or self._held:
            return []
        self.steered = True
        self.steer_cut_tool = self._tools_running > 0
        reason = f"to take a steer from outside ({when})"
        if self.limits.attempt_limit_cancels:
            self._cancelling = True
            self._deadline = now + self.limits.kill_after
            return [CancelTurn(reason, for_steer=True)]
        self.phase = Phase.INTERRUPTING
        self._deadline = now + self.limits.kill_after
        self.signalled = True
        return [SendSignal(signal.SIGINT, reason)]

    def activity(self, active: bool, now: float) -> list[Effect]:
        """The shell's answer to ``CheckActivity``: whether the agent's process
        tree worked since the last output. Work re-arms the idle deadline as
        output would; none ends the agent as idle."""
        if not self._looking:
            return []
        self._looking = False
        if self.phase is not Phase.WORKING or self._limit_hit:
            return []
        if active:
            self._last_output = now
            return []
        return self._idle_expired(now)

    def _idle_expired(self, now: float) -> list[Effect]:
        self.idle_timed_out = True
        return self._terminate(
            now, f"no output for {self._idle:g}s while no tool was running (--idle-timeout)"
        )

    def hold(self) -> None:
        """A live session's turn is ending and the shell decides what comes
        next (stop hooks, a person): its final message starts no grace, and
        neither the attempt's limit nor the idle limit runs meanwhile (the
        run's deadline and signals still end it)."""
        self._held = True
        self._steer_deadline = math.inf
        if self._cancelling:
            self._cancelling = False
            self._deadline = math.inf

    def release(self, now: float) -> list[Effect]:
        """The stop is allowed after ``hold``: the grace starts now (for a
        live session, the close grace once its input is closed)."""
        self._held = False
        self._released = True
        return self._arm(now, settled=False, restart=True)

    def use_graces(self, grace: float, settle_grace: float) -> None:
        """Graces that apply from now on (the agent's dialect became known
        from its stream); a grace already running keeps its deadline."""
        self.limits = replace(self.limits, grace=grace, settle_grace=settle_grace)

    def output_closed(self, now: float) -> None:
        """The agent's output ended while it owed an answer (a live session's
        turn was open): it can say nothing more, so unless it exits within
        the drain timeout, as an agent that exited gets for its output, it
        is terminated (``stopped_answering``)."""
        if self.phase is Phase.WORKING or self.phase is Phase.GRACE:
            self._mute_deadline = min(self._mute_deadline, now + self.limits.drain_timeout)

    def term_sent_at(self, when: float) -> None:
        """The SIGTERM asked for goes out only at ``when`` (a live session's
        cancel, sent first, is given a moment to end the turn): the SIGKILL
        still comes ``kill_after`` after it."""
        if self.phase is Phase.TERMINATING:
            self._deadline = when + self.limits.kill_after

    def process_exited(self) -> None:
        self.phase = Phase.EXITED
        self._deadline = math.inf

    # -- transitions ---------------------------------------------------------

    def _arm(self, now: float, *, settled: bool, restart: bool) -> list[Effect]:
        if self.phase not in (Phase.WORKING, Phase.GRACE) or self.final is None or self._held:
            return []
        if self.limits.final_waits_for_turn_end and not self._released:
            return []
        seconds = self.limits.settle_grace if settled else self.limits.grace
        deadline = now + seconds
        if self.phase is Phase.GRACE and not restart and deadline >= self._deadline:
            return []
        self.phase = Phase.GRACE
        self._deadline = deadline
        return [GraceStarted(seconds=seconds, stop_reason=self.final.stop_reason, settled=settled)]

    def _work(self, reason: str, *, forget: bool) -> list[Effect]:
        if forget:
            self.final = None
            self._paused = False
        if self.phase is not Phase.GRACE:
            return []
        self.phase = Phase.WORKING
        self._deadline = math.inf
        return [GraceCancelled(reason=reason)]

    def _pause(self, reason: str) -> list[Effect]:
        self._paused = True
        return self._work(reason, forget=False)

    def _unpause(self, now: float, *, settled: bool) -> list[Effect]:
        was_paused, self._paused = self._paused, False
        return self._arm(now, settled=settled, restart=was_paused)

    def _terminate(self, now: float, reason: str) -> list[Effect]:
        if self.phase not in (Phase.WORKING, Phase.GRACE, Phase.INTERRUPTING):
            return []
        self.phase = Phase.TERMINATING
        self._deadline = now + self.limits.kill_after
        self.signalled = True
        return [SendSignal(signal.SIGTERM, reason)]


#: status.json's ``state`` while the tracker is in each phase.
STATUS_OF_PHASE = {
    Phase.WORKING: "running",
    Phase.GRACE: "grace",
    Phase.INTERRUPTING: "steering",
    Phase.TERMINATING: "terminating",
    Phase.KILLING: "terminating",
    Phase.EXITED: "terminating",
}


def late_final_message(event: AssistantMessage) -> WarningEvent:
    """The warning for a final message written after the agent exited, by a
    process it left holding its output: recorded, never the agent's answer."""
    text = event.text if len(event.text) <= LATE_TEXT_CHARS else event.text[:LATE_TEXT_CHARS] + "…"
    return WarningEvent(
        code="late_final_message",
        message=f"a final message ({event.stop_reason}) arrived after the agent "
        f"exited, from a process it left holding its output; it is recorded "
        f"but is not the agent's answer: {text!r}",
    )
