"""The turns of a live session, as one attempt drives them: a steer or a
follow-up into the running turn, the agent's answers to them, the end of a
turn and the next prompt on the same process (the next attempt).

A part of ``AttemptSupervisor`` (``attempt``), apart so that each reads
whole: the attempt's state is declared here as the attempt keeps it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from wrapper.core.completion import CompletionTracker, Effect, Limits, Phase
from wrapper.core.config import RunConfig
from wrapper.core.events import Event, WarningEvent
from wrapper.core.result import AttemptRecord
from wrapper.core.summary import RunSummary
from wrapper.dialects.reading import StreamReader
from wrapper.dialects.two_way import Answer
from wrapper.sinks.stream import EventStream, StatusWriter
from wrapper.supervision.live_session import OWN_TURN, LiveDriver, MessageDriver

if TYPE_CHECKING:  # the ACP client's modules load only for a run that speaks ACP
    from wrapper.dialects.acp.actions import StoppedAnswering


class LiveTurns:
    """The live-session part of an attempt."""

    config: RunConfig
    stream: EventStream
    status: StatusWriter
    summary: RunSummary
    tracker: CompletionTracker | None
    record: AttemptRecord | None
    prompt_not_taken: str | None
    on_steerable: Callable[[], None] | None
    on_steer_answer: Callable[[Answer], None] | None
    on_prompt_written: Callable[[int, str | None], None] | None
    _session: LiveDriver | None
    _reader: StreamReader | None
    _at_turn_end: Callable[[AttemptRecord], Awaitable[str | None]] | None
    _limits: Limits | None
    _background: trio.Nursery | None
    _deciding: trio.Event | None
    _turn_over: trio.Event

    @property
    def running(self) -> bool:
        raise NotImplementedError

    def emit(self, event: Event) -> None:
        raise NotImplementedError

    def _apply(self, effects: list[Effect]) -> None:
        raise NotImplementedError

    def _set_timer(self) -> None:
        raise NotImplementedError

    def steerable(self) -> None:
        """The live session's turn takes steers from now on (a tool started)."""
        if self.on_steerable is not None:
            self.on_steerable()

    def deliver_live(self, when: str, text: str) -> tuple[int, str | None] | None:
        """``text`` into the live session's running turn: a steer (``now``)
        or a follow-up (``next-stop``); the attempt it joined and the ticket
        the agent's answer to it will carry (None: no answer comes), or None
        when it cannot be (no turn runs, or it is being ended)."""
        session, tracker, record = self._session, self.tracker, self.record
        if session is None or tracker is None or record is None or not self.running:
            return None
        if tracker.phase is not Phase.WORKING:
            return None
        joined = session.steer(text) if when == "now" else session.follow_up(text)
        if not joined:
            return None
        ticket = session.last_ticket if isinstance(session, MessageDriver) else None
        return record.number, ticket

    def steer_answered(self, answer: Answer) -> None:
        """The live agent answered a steer or follow-up written on its input."""
        if self.on_steer_answer is not None:
            self.on_steer_answer(answer)

    def stopped_answering(self, stopped: StoppedAnswering) -> None:
        """The agent's output closed while it owed an answer: it has the drain
        timeout to exit (as an agent that exited has to finish its output)."""
        if self.tracker is None:
            return
        self.emit(
            WarningEvent(
                code="agent_output_closed",
                message=f"{stopped.message}; it is ended unless it exits within "
                f"{self.config.drain_timeout:g}s (--drain-timeout)",
            )
        )
        self.tracker.output_closed(trio.current_time())
        self._set_timer()

    def turn_ended(self) -> None:
        """A prompt turn of the live session is over (its final message is
        about to be observed): hold the tracker, and decide what comes next
        once that message is in."""
        self._turn_over.set()
        if self.tracker is None or self._background is None:
            return
        self.tracker.hold()
        deciding = self._deciding = trio.Event()
        self._background.start_soon(self._between_turns, deciding)

    async def _between_turns(self, deciding: trio.Event) -> None:
        try:
            await self._decide_next_turn()
        finally:
            deciding.set()

    async def _decide_next_turn(self) -> None:
        record, tracker = self.record, self.tracker
        assert record is not None
        assert tracker is not None
        next_prompt = None
        if self._at_turn_end is not None and tracker.phase is Phase.WORKING:
            next_prompt = await self._at_turn_end(record)
        session = self._session
        if next_prompt not in (None, OWN_TURN) and record.exit is not None:
            # The agent exited while the stop gate decided: the run is told.
            self.prompt_not_taken = next_prompt
        if session is None or next_prompt is None or tracker.phase is not Phase.WORKING:
            self._apply(tracker.release(trio.current_time()))
            if session is not None:
                session.close()
            return
        self._next_turn(record)
        session.prompt(next_prompt)
        if self.on_prompt_written is not None and next_prompt != OWN_TURN:
            self.on_prompt_written(record.number + 1, session.prompt_ticket)

    def _next_turn(self, previous: AttemptRecord) -> None:
        """The next prompt turn on the same process is the next attempt."""
        assert self._limits is not None
        now = trio.current_time()
        previous.ended_at = time.time()
        number = previous.number + 1
        record = self.record = AttemptRecord(number=number, argv=previous.argv)
        record.pid, record.recognised = previous.pid, previous.recognised
        if self._reader is not None:
            # Lines are counted per attempt, and only until one is recognised.
            self._reader.lines = 0
        tracker = self.tracker = CompletionTracker(self._limits, now)
        record.tracker = tracker
        self.stream.attempt = number
        self.status.update(now, force=True, state="running", attempt=number)
        self._set_timer()
