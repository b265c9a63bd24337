"""Agents speaking the Agent Client Protocol (``gemini --acp``, ``opencode acp``,
the Claude and Codex adapters, ...): JSON-RPC 2.0 over the agent's stdio.

The wrapper is the ACP client: the live session is held by the client core
(``wrapper.dialects.acp.client``) the supervisor drives; the task is the first
``session/prompt`` and a steer the next one on the same session, never an
argument. This class is what the rest of the wrapper sees of the dialect:
the argv (the user's command as it is, the prompt beside it), the stop
reasons, the close grace, and the reading of a saved stdout.log (the agent's
side alone, see ``AcpClient``'s passive mode). Every normalization rule is
the core's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

from wrapper.core.events import SESSION_FAILED, AssistantMessage, Event, StopReason, ToolEnded
from wrapper.core.registry import program
from wrapper.dialects.acp.actions import (
    AcpOptions,
    Failed,
    Output,
    PermissionRequested,
    PermissionWithdrawn,
    PromptAnswered,
    StoppedAnswering,
    TurnEnded,
)
from wrapper.dialects.acp.client import STOP_REASONS, AcpClient
from wrapper.dialects.base import Dialect, Launch


class LiveSession(Protocol):
    """What the dialect asks of the live session the supervisor holds: the
    transport is the supervisor's, the dialect only feeds it lines and
    answers."""

    def feed(self, line: bytes) -> None: ...

    def decide(self, request_id: Any, allow: bool, reason: str | None = None) -> None: ...

    def close(self) -> None: ...


#: Seconds an ACP agent gets to exit by itself once its stdin is closed, before
#: the usual SIGTERM / SIGKILL of its tree: Gemini CLI takes up to 4.2 s after
#: a tool turn on a loaded machine, opencode under 0.5 s; the Claude and Codex
#: adapters never exit on EOF.
CLOSE_GRACE = 5.0

#: Agents that forget a turn cancelled with ``session/cancel``: Gemini CLI
#: 0.61.0's next prompt went to the model without the task, the call or its
#: result (the session context and the new prompt alone, 3 of 3 timings: mid
#: tool, just after it, while the model answered). A steer waits for their
#: turn's end instead; an abort still cancels.
CANCEL_FORGETS_TURN = frozenset({"gemini", "gemini-cli"})


class AcpDialect(Dialect):
    name: ClassVar[str] = "acp"
    #: What each tool does, for matchers that name a kind (``@execute``): an ACP tool's name is its
    #: kind; ``delete`` and ``move`` change files; a tool not listed (an MCP server's) is
    #: ``other``.
    tool_kinds: ClassVar[Mapping[str, str]] = {
        "execute": "execute",
        "read": "read",
        "edit": "edit",
        "delete": "edit",
        "move": "edit",
        "search": "search",
        "fetch": "fetch",
        "think": "other",
        "switch_mode": "other",
        "other": "other",
    }
    stop_reasons: ClassVar[Mapping[str, StopReason]] = STOP_REASONS
    streaming_command: ClassVar[str] = "AGENT --acp (or its acp subcommand)"
    default_grace: ClassVar[float] = CLOSE_GRACE
    needs_task: ClassVar[bool] = True
    two_way: ClassVar[bool] = True

    def __init__(self) -> None:
        #: Tool calls the agent asked permission for, and the names of the ones
        #: that ran without asking (an agent in its own auto-approve mode); kept
        #: past the agent's exit, for the run's end.
        self.asked: set[str] = set()
        self.unasked: list[str] = []
        super().__init__()

    def _reset(self) -> None:
        self._reader = AcpClient(AcpOptions(task="", cwd=""), passive=True)
        #: The live session, while the supervisor holds one (see ``hold_session``).
        self.driver: LiveSession | None = None
        self._parsed: list[Event] | None = None
        self._emit: Callable[[Event], None] | None = None
        self._on_turn_end: Callable[[], None] | None = None
        self._on_permission: Callable[[PermissionRequested], None] | None = None
        self._on_withdrawn: Callable[[PermissionWithdrawn], None] | None = None
        self._on_stopped_answering: Callable[[StoppedAnswering], None] | None = None
        self._on_prompt_answered: Callable[[PromptAnswered], None] | None = None

    @staticmethod
    def cancel_keeps_turn(command: Sequence[str]) -> bool:
        """Whether the agent ``command`` runs keeps a cancelled turn in its history."""
        found = program(command)
        return found is None or found[0] not in CANCEL_FORGETS_TURN

    def parse(self, line: bytes) -> list[Event]:
        driver = self.driver
        if driver is None:
            return [item for item in self._reader.feed(line, 0.0) if isinstance(item, Event)]
        self._parsed = []
        try:
            driver.feed(line)
            return self._parsed
        finally:
            self._parsed = None

    def hold_session(
        self,
        session: LiveSession,
        emit: Callable[[Event], None],
        *,
        on_turn_end: Callable[[], None] | None = None,
        on_permission: Callable[[PermissionRequested], None] | None = None,
        on_withdrawn: Callable[[PermissionWithdrawn], None] | None = None,
        on_stopped_answering: Callable[[StoppedAnswering], None] | None = None,
        on_prompt_answered: Callable[[PromptAnswered], None] | None = None,
    ) -> None:
        """Hold the live session of a started agent, which the supervisor
        opened with ``session_output`` as the receiver of its outputs: its
        stdout lines (through ``parse``) drive the core; events that come of
        something else (a deadline) go to ``emit``.

        At the end of each prompt turn ``on_turn_end`` is called (before the
        turn's final message is handed on) and the caller then sends the next
        prompt or closes the session; without it the session is closed after
        its first turn. A permission request goes to ``on_permission``, whose
        owner answers it through ``session.decide``; without it every request
        is allowed; one the session answered by itself meanwhile (its turn
        ended) goes to ``on_withdrawn``. When the agent's output ends while
        it owes an answer, ``on_stopped_answering`` is told; when it takes or
        refuses a prompt, ``on_prompt_answered``."""
        self._emit = emit
        self._on_turn_end = on_turn_end
        self._on_permission = on_permission
        self._on_withdrawn = on_withdrawn
        self._on_stopped_answering = on_stopped_answering
        self._on_prompt_answered = on_prompt_answered
        self.driver = session

    def tools_run_unasked(self) -> Sequence[str]:
        return self.unasked

    def session_output(self, output: Output) -> None:
        """Receives what the live session's core returns (see ``hold_session``)."""
        driver = self.driver
        assert driver is not None
        if isinstance(output, Event):
            if (
                isinstance(output, ToolEnded)
                and not output.is_error
                and output.tool_call_id is not None
                and output.tool_call_id not in self.asked
            ):
                self.unasked.append(output.tool)
            self._deliver(output)
        elif isinstance(output, PermissionRequested):
            self.asked.add(output.tool.tool_call_id)
            if self._on_permission is not None:
                self._on_permission(output)
            else:
                driver.decide(output.request_id, True)
        elif isinstance(output, PermissionWithdrawn):
            if self._on_withdrawn is not None:
                self._on_withdrawn(output)
        elif isinstance(output, StoppedAnswering):
            if self._on_stopped_answering is not None:
                self._on_stopped_answering(output)
        elif isinstance(output, PromptAnswered):
            if self._on_prompt_answered is not None:
                self._on_prompt_answered(output)
        elif isinstance(output, TurnEnded):
            if self._on_turn_end is not None:
                self._on_turn_end()
            else:
                driver.close()
        elif isinstance(output, Failed):
            # The session cannot go on: the run ends on this error.
            self._deliver(
                AssistantMessage(
                    stop_reason=str(StopReason.ERROR),
                    raw_stop_reason=SESSION_FAILED,
                    error_message=output.message,
                )
            )

    def _deliver(self, event: Event) -> None:
        if self._parsed is not None:
            self._parsed.append(event)
        elif self._emit is not None:
            self._emit(event)

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        return obj.get("jsonrpc") == "2.0" and any(k in obj for k in ("method", "result", "error"))

    def launch(
        self, command: Sequence[str], task: str | None, run_dir: Path, *, resumable: bool = False
    ) -> Launch:
        # Without a task (refused before the run: ``needs_task``) the command
        # is all there is.
        return Launch(list(command), prompt=task)

    def resume(
        self, command: Sequence[str], prompt: str, run_dir: Path, session_id: str | None
    ) -> Launch:
        """The next prompt on the live session: the same process, no argv of
        its own (the supervisor sends ``prompt`` as the next ``session/prompt``)."""
        return Launch(list(command), prompt=prompt)
