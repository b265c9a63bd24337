"""Live sessions: an agent driven over its stdin, one process for every prompt.

``LiveDriver`` is what the attempt asks of a live session, whatever the
protocol: ACP (``AcpDriver``, the turn cancelled and a steer the next
prompt), and agents that take JSON messages on stdin (``MessageDriver``:
pi's RPC mode, Claude Code's stream-json input and Codex's app-server, a
steer handed to the running turn). ``open_session`` starts the one the dialect speaks.
Each driver writes on the agent's stdin from one writer task, in order, so
that a slow agent never blocks the reader of its stdout, and closes stdin
once everything before ``close`` is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import trio

from wrapper.core.events import Event
from wrapper.core.limits import CANCEL_BEFORE_TERM
from wrapper.dialects.two_way import Answer, InputClient
from wrapper.supervision.stdin_writer import LineWriter

if TYPE_CHECKING:
    from wrapper.process.spawn import Child
    from wrapper.supervision.attempt import AttemptSupervisor


#: What the end of a live turn gives as the next prompt when the agent starts
#: a turn of its own (a message it took too late for the turn that ended):
#: nothing is written, and that turn is waited for.
OWN_TURN = "\0own turn"


class LiveDriver(Protocol):
    """The live session of one agent process, as the attempt drives it."""

    #: Whether a steer joins the running turn (``steer`` / ``follow_up``);
    #: else the turn is cancelled and the steer is the next ``prompt``.
    steers_in_turn: bool
    #: The turn's final message comes before the session says the turn
    #: ended: it starts no grace until the stop gate let the session end.
    final_before_turn_end: bool
    #: The agent keeps a cancelled turn in its history; when it does not, a
    #: steer waits for the running turn's end instead of cancelling it.
    cancel_keeps_turn: bool

    @property
    def prompt_ticket(self) -> str | None:
        """What the agent's answer to the last ``prompt`` will name it by (an
        ``Answer``'s ticket; None: no answer says it took it)."""

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Write what is asked until stdin is closed (started by the attempt)."""

    def observe(self, event: Event) -> None:
        """An event of the agent's stream, before the tracker sees it."""

    def output_ended(self) -> None:
        """The agent's stdout reached its end."""

    def prompt(self, text: str) -> None:
        """The next prompt turn."""

    def takes(self, when: str) -> bool:
        """Whether a steer (``now``) or a follow-up (``next-stop``) would
        join the running turn now."""

    def steer(self, text: str) -> bool:
        """``text`` into the running turn now; False when it cannot be."""

    def follow_up(self, text: str) -> bool:
        """``text`` as more work once the running turn would stop; False when it cannot be."""

    def cancel(self) -> None:
        """End the running turn (the session goes on)."""

    def abort(self) -> bool:
        """The run is being ended: stop what the agent does, by its own means
        first. Whether a cancel went out (a turn was running): the agent may
        then end its turn by itself, which ends with ``turn_ended``."""

    def close(self) -> None:
        """No more prompts: close stdin once everything before is written."""


async def after_cancel(turn_over: trio.Event, then: Callable[[], None]) -> None:
    """``then`` (the SIGTERM of an agent being ended) once the turn its own
    cancel was sent to end is over (``turn_over``: its answer came, or its
    output ended), at most ``CANCEL_BEFORE_TERM`` later: a signal in the same
    instant as the cancel would cut the agent's answer short."""
    with trio.move_on_after(CANCEL_BEFORE_TERM):
        await turn_over.wait()
    then()


class MessageDriver:
    """An agent that takes JSON messages on its stdin and writes its usual
    stream (pi's RPC mode, Claude Code's stream-json input): the client
    says what to write and when a turn ended."""

    steers_in_turn = True
    final_before_turn_end = True
    cancel_keeps_turn = True

    def __init__(
        self,
        client: InputClient,
        task: str,
        writer: LineWriter,
        on_turn_end: Callable[[], None],
        on_steerable: Callable[[], None],
        *,
        on_answer: Callable[[Answer], None] | None = None,
    ) -> None:
        self.client = client
        self.writer = writer
        self.on_turn_end = on_turn_end
        self.on_steerable = on_steerable
        self.on_answer = on_answer
        self._task: str | None = task
        #: The ticket of the last steer or follow-up written, which the
        #: agent's answer to it carries.
        self.last_ticket: str | None = None
        #: The ticket of the last prompt written, when the agent answers it.
        self.prompt_ticket: str | None = None
        #: Whether the agent answers a steer by the end of the turn it was
        #: written in (pi, Codex); Claude Code's echo comes when the model
        #: is next asked, which may be a turn of its own.
        self.answers_at_turn_end = client.answers_at_turn_end

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        if self._task is not None:
            self.prompt(self._task)
            self._task = None
        task_status.started()
        await self.writer.write_all()

    def observe(self, event: Event) -> None:
        said = self.client.observe(event)
        self._flush()
        if said == "ended":
            self.on_turn_end()
        elif said == "steerable":
            self.on_steerable()

    def output_ended(self) -> None:
        pass  # the agent owes no answer the run waits for: its exit tells the rest

    def output_read(self) -> None:
        """The agent's output read so far is parsed: its answers to steers go on."""
        for answer in self.client.answers():
            if self.on_answer is not None:
                self.on_answer(answer)

    def _send(self, message: dict[str, Any] | None) -> bool:
        if message is None:
            return False
        self.writer.send(message)
        return True

    def _send_asked(self, message: dict[str, Any] | None) -> bool:
        """A steer or follow-up, whose answer is told by its ticket."""
        self.last_ticket = self.client.ticket(message) if message is not None else None
        return self._send(message)

    def _flush(self) -> None:
        for message in self.client.outbox():
            self.writer.send(message)

    def prompt(self, text: str) -> None:
        if text == OWN_TURN:
            self.client.own_turn()
            return
        sent = self.client.prompt(text)
        self._flush()  # what opens the session goes first
        self.prompt_ticket = self.client.prompt_ticket(sent) if sent is not None else None
        self._send(sent)

    def takes(self, when: str) -> bool:
        return self.client.takes(when)

    def steer(self, text: str) -> bool:
        return self._send_asked(self.client.steer(text))

    def follow_up(self, text: str) -> bool:
        return self._send_asked(self.client.follow_up(text))

    def cancel(self) -> None:
        self._send(self.client.abort())

    def abort(self) -> bool:
        return self._send(self.client.abort())

    def close(self) -> None:
        self.client.close()
        self.writer.close()


def open_session(attempt: AttemptSupervisor, proc: Child, prompt: str) -> LiveDriver | None:
    """The live session of an agent started to be driven over its stdin
    with ``prompt`` as its first prompt, for the attempt's dialect."""
    if proc.stdin is None:
        return None
    log = attempt.protocol_log
    client = attempt.dialect.input_client(attempt.config.command, str(attempt.config.cwd))
    if client is not None:
        writer = LineWriter(proc.stdin, log.write if log is not None else None)
        return MessageDriver(
            client,
            prompt,
            writer,
            attempt.turn_ended,
            attempt.steerable,
            on_answer=attempt.steer_answered,
        )
    if not attempt.dialect.two_way:
        return None
    return _open_acp(attempt, proc.stdin, prompt)


def _open_acp(attempt: AttemptSupervisor, stdin: trio.abc.SendStream, prompt: str) -> LiveDriver:
    # Loaded for an ACP session only: a run that reads the agent needs none of it.
    from wrapper.dialects.acp.actions import AcpOptions  # noqa: PLC0415
    from wrapper.dialects.acp.client import AcpClient  # noqa: PLC0415
    from wrapper.dialects.acp.dialect import AcpDialect  # noqa: PLC0415
    from wrapper.supervision.acp_session import AcpDriver, PermissionRequests  # noqa: PLC0415

    dialect, config, log = attempt.dialect, attempt.config, attempt.protocol_log
    assert isinstance(dialect, AcpDialect)
    driver: AcpDriver | None = None
    requests = PermissionRequests(
        lambda: driver if attempt.session is driver else None,
        lambda: attempt.background,
        lambda: attempt.permission_gate,
    )
    options = AcpOptions(
        task=prompt,
        cwd=str(config.cwd),
        auth_method=config.auth_method,
        mcp_servers=config.settings.acp_mcp_servers,
    )
    driver = AcpDriver(
        AcpClient(options),
        stdin,
        dialect.session_output,
        log.write if log is not None else None,
        cancel_keeps_turn=dialect.cancel_keeps_turn(config.command),
    )
    dialect.hold_session(
        driver,
        attempt.event_now,
        on_turn_end=attempt.turn_ended,
        on_permission=requests.requested,
        on_withdrawn=requests.withdrawn,
        on_stopped_answering=attempt.stopped_answering,
        on_prompt_answered=lambda taken: attempt.steer_answered(
            Answer(taken.ticket, taken.refused)
        ),
    )
    return driver
