"""Agent dialects: one module per agent CLI, registered here by name."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wrapper.dialects.amp import AmpDialect
from wrapper.dialects.base import (
    CannotResume,
    Dialect,
    Launch,
    UsageError,
    decode_object,
    unparsed,
)
from wrapper.dialects.claude import ClaudeDialect
from wrapper.dialects.codex import CodexDialect
from wrapper.dialects.cursor import CursorDialect
from wrapper.dialects.gemini import GeminiDialect
from wrapper.dialects.opencode import OpencodeDialect
from wrapper.dialects.pi import PiDialect
from wrapper.events import Event, UnparsedLine, WarningEvent
from wrapper.framing import Oversized

DIALECTS: dict[str, type[Dialect]] = {
    cls.name: cls
    for cls in (
        PiDialect,
        ClaudeDialect,
        CodexDialect,
        GeminiDialect,
        OpencodeDialect,
        AmpDialect,
        CursorDialect,
    )
}

#: Lines a stream may open with before its dialect must be recognised.
SNIFF_LINES = 200

__all__ = [
    "DIALECTS",
    "CannotResume",
    "Dialect",
    "Launch",
    "SniffingDialect",
    "UsageError",
    "dialect_for_command",
    "resolve_dialect",
]


def dialect_for_command(command: Sequence[str]) -> type[Dialect] | None:
    """The dialect named by the executable's basename, if it is conclusive."""
    if not command:
        return None
    base = os.path.basename(command[0])
    for cls in DIALECTS.values():
        if base in cls.executables:
            return cls
    return None


def resolve_dialect(name: str, command: Sequence[str], has_task: bool) -> Dialect:
    """Pick the dialect for a run before it starts.

    ``auto`` decides from the executable's name. When that is not conclusive,
    a run that needs something inserted (a task) cannot go on without
    ``--dialect``; a run without a task recognises the agent from its stream.
    """
    if name != "auto":
        return DIALECTS[name]()
    cls = dialect_for_command(command)
    if cls is not None:
        return cls()
    if has_task:
        known = ", ".join(sorted(DIALECTS))
        exe = os.path.basename(command[0]) if command else "(none)"
        raise UsageError(
            f"cannot tell which agent {exe!r} is, so the task cannot be placed: "
            f"pass --dialect ({known})"
        )
    return SniffingDialect()


class SniffingDialect(Dialect):
    """Recognises the agent from its first events, then hands over to it.

    Lines seen before recognition are held (at most ``SNIFF_LINES``) and
    replayed through the recognised dialect so no event is lost.
    """

    name = "auto"

    def __init__(self) -> None:
        self.chosen: Dialect | None = None
        self._held: list[bytes] = []
        self._gave_up = False

    def parse(self, line: bytes) -> list[Event]:
        if self.chosen is not None:
            return self.chosen.parse(line)
        if self._gave_up:
            return [decode_or_unparsed(line)]
        obj = decode_object(line)
        if isinstance(obj, dict):
            for cls in DIALECTS.values():
                if cls.recognises(obj):
                    self.chosen = cls()
                    events: list[Event] = []
                    for waiting in self._held:
                        events.extend(self.chosen.parse(waiting))
                    self._held.clear()
                    events.extend(self.chosen.parse(line))
                    return events
        self._held.append(line)
        if len(self._held) < SNIFF_LINES:
            return []
        self._gave_up = True
        backlog, self._held = self._held, []
        known = ", ".join(sorted(DIALECTS))
        events = [
            WarningEvent(
                code="dialect_unknown",
                message=f"could not recognise the agent's stream in {SNIFF_LINES} lines; "
                f"its events are not interpreted: pass --dialect ({known})",
            )
        ]
        events.extend(decode_or_unparsed(h) for h in backlog)
        return events

    def flush(self) -> list[Event]:
        """End of stream: lines still held are reported as not understood."""
        held, self._held = self._held, []
        return [decode_or_unparsed(h) for h in held]

    def launch(
        self, command: Sequence[str], task: str | None, run_dir: Path, *, resumable: bool = False
    ) -> Launch:
        if task is not None:  # resolve_dialect never lets this happen
            raise UsageError("a task needs a known dialect: pass --dialect")
        return Launch(list(command))

    def oversized(self, frame: Oversized) -> list[Event]:
        return self.chosen.oversized(frame) if self.chosen is not None else super().oversized(frame)

    def on_exit(self, exit_code: int | None, exit_signal: int | None) -> list[Event]:
        return self.chosen.on_exit(exit_code, exit_signal) if self.chosen is not None else []

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        return False


def decode_or_unparsed(line: bytes) -> UnparsedLine:
    obj = decode_object(line)
    if isinstance(obj, UnparsedLine):
        return obj
    return unparsed(line, "not recognised as any agent's event")
