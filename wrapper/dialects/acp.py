"""Agents speaking the Agent Client Protocol (``gemini --acp``, ``opencode acp``,
the Claude and Codex adapters, ...): JSON-RPC 2.0 over the agent's stdio.

The wrapper is the ACP client: the live session is held by the client core
(``wrapper.acp.client``) the supervisor drives; the task is the first
``session/prompt`` and a steer the next one on the same session, never an
argument. This class is what the rest of the wrapper sees of the dialect:
the argv (the user's command as it is, the prompt beside it), the stop
reasons, the close grace, and the reading of a saved stdout.log (the agent's
side alone, see ``AcpClient``'s passive mode). Every normalization rule is
the core's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from wrapper.acp.client import STOP_REASONS, AcpClient, AcpOptions
from wrapper.dialects.base import Dialect, Launch
from wrapper.events import Event, StopReason

#: Seconds an ACP agent gets to exit by itself once its stdin is closed, before
#: the usual SIGTERM / SIGKILL of its tree: Gemini CLI takes up to 4.2 s after
#: a tool turn on a loaded machine, opencode under 0.5 s; the Claude and Codex
#: adapters never exit on EOF.
CLOSE_GRACE = 5.0


class AcpDialect(Dialect):
    name: ClassVar[str] = "acp"
    stop_reasons: ClassVar[Mapping[str, StopReason]] = STOP_REASONS
    streaming_command: ClassVar[str] = "AGENT --acp (or its acp subcommand)"
    default_grace: ClassVar[float] = CLOSE_GRACE
    needs_task: ClassVar[bool] = True

    def _reset(self) -> None:
        self._reader = AcpClient(AcpOptions(task="", cwd=""), passive=True)

    def parse(self, line: bytes) -> list[Event]:
        return [item for item in self._reader.feed(line, 0.0) if isinstance(item, Event)]

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
        """The next prompt on the live session: the agent is not restarted."""
        return Launch(list(command), prompt=prompt)
