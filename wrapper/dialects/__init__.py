"""Agent dialects: one module per agent CLI, listed in ``wrapper.core.registry``."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from wrapper.core.config import RunConfig
from wrapper.core.events import Event, UnparsedLine, WarningEvent
from wrapper.core.framing import Frame, Oversized
from wrapper.core.matchers import OTHER_KIND
from wrapper.core.registry import AGENTS, BY_NAME, detect, program
from wrapper.dialects.base import (
    CannotResume,
    Dialect,
    Launch,
    UsageError,
    decode_object,
    unparsed,
)

#: Executable basename -> dialect name, for the entries that need nothing more.
EXECUTABLES = {
    **{exe: agent.name for agent in AGENTS if not agent.needs for exe in agent.executables},
    **{exe: agent.name for agent in AGENTS for exe in agent.adapters},
}


class _Registry(Mapping[str, type[Dialect]]):
    """Dialect classes by name, each module imported when first asked for."""

    def __getitem__(self, name: str) -> type[Dialect]:
        module, _, attr = BY_NAME[name].dialect.partition(":")
        cls: type[Dialect] = getattr(importlib.import_module(module), attr)
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(BY_NAME)

    def __len__(self) -> int:
        return len(BY_NAME)


DIALECTS: Mapping[str, type[Dialect]] = _Registry()

#: Lines a stream may open with before its dialect must be recognised.
SNIFF_LINES = 200
#: Bytes of unrecognised lines held meanwhile, in all: agents announce
#: themselves in their first small lines (a session header, an init event),
#: so a stream that has not after 1 MiB is not going to, and holding more
#: would let a stream of big unknown lines take the wrapper's memory.
SNIFF_BYTES = 1024 * 1024

__all__ = [
    "DIALECTS",
    "CannotResume",
    "Dialect",
    "Launch",
    "SniffingDialect",
    "UsageError",
    "agreed_kind",
    "chosen_name",
    "dialect_for_command",
    "graces_for",
    "resolve_dialect",
    "tool_kind",
]


def agreed_kind(tool: str) -> str:
    """The kind every dialect that names a tool ``tool`` gives it, when they
    agree (``other`` when none does, or they do not): for a tool whose agent
    is not known."""
    kinds = {cls.tool_kinds[tool] for cls in DIALECTS.values() if tool in cls.tool_kinds}
    return kinds.pop() if len(kinds) == 1 else OTHER_KIND


def tool_kind(agent: str | None, tool: str) -> str:
    """What ``tool`` does, as the dialect named ``agent`` says (as the
    dialects agree, when the agent is not known)."""
    if agent is not None and agent in DIALECTS:
        return DIALECTS[agent]().tool_kind(tool)
    return agreed_kind(tool)


def dialect_for_command(command: Sequence[str]) -> type[Dialect] | None:
    """The dialect the command line names (its program, and for some agents
    an option or subcommand: ``wrapper.core.registry``), if it is conclusive."""
    agent = detect(command)
    return DIALECTS[agent.name] if agent is not None else None


def resolve_dialect(name: str, command: Sequence[str], has_task: bool) -> Dialect:
    """Pick the dialect for a run before it starts.

    ``auto`` decides from the command line (``dialect_for_command``). When that is not conclusive,
    a run that needs something inserted (a task) cannot go on without
    ``--dialect``; a run without a task recognises the agent from its stream.
    """
    cls = DIALECTS[name] if name != "auto" else dialect_for_command(command)
    if cls is not None and cls.needs_task and not has_task:
        raise UsageError(
            f"the {cls.name} dialect needs a task (--task or --task-file): the agent takes "
            "its prompt over its protocol and waits silently without one"
        )
    if cls is not None:
        return cls()
    if has_task:
        known = ", ".join(sorted(DIALECTS))
        found = program(command)
        exe = found[0] if found is not None else "(none)"
        raise UsageError(
            f"cannot tell which agent {exe!r} is, so the task cannot be placed: "
            f"pass --dialect ({known})"
        )
    return SniffingDialect()


class SniffingDialect(Dialect):
    """Recognises the agent from its first events, then hands over to it.

    Lines seen before recognition are held (at most ``SNIFF_LINES`` lines and
    ``SNIFF_BYTES`` bytes) and replayed through the recognised dialect so no
    event is lost; beyond either bound it gives up.
    """

    name = "auto"

    def __init__(self) -> None:
        self.chosen: Dialect | None = None
        self._held: list[bytes] = []
        self._held_bytes = 0
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
        self._held_bytes += len(line)
        if len(self._held) < SNIFF_LINES and self._held_bytes <= SNIFF_BYTES:
            return []
        self._gave_up = True
        backlog, self._held, self._held_bytes = self._held, [], 0
        known = ", ".join(sorted(DIALECTS))
        events = [
            WarningEvent(
                code="dialect_unknown",
                message=f"could not recognise the agent's stream in {len(backlog)} lines "
                f"({sum(map(len, backlog))} bytes; at most {SNIFF_LINES} lines and "
                f"{SNIFF_BYTES} bytes are held to find out); its events are not "
                f"interpreted: pass --dialect ({known})",
            )
        ]
        events.extend(decode_or_unparsed(h) for h in backlog)
        return events

    def flush(self) -> list[Event]:
        """End of stream: lines still held are reported as not understood."""
        held, self._held, self._held_bytes = self._held, [], 0
        return [decode_or_unparsed(h) for h in held]

    def launch(
        self, command: Sequence[str], task: str | None, run_dir: Path, *, resumable: bool = False
    ) -> Launch:
        if task is not None:  # resolve_dialect never lets this happen
            raise UsageError("a task needs a known dialect: pass --dialect")
        return Launch(list(command))

    def parse_frames(self, frames: Sequence[Frame], *, coalesce: bool) -> list[Event]:
        if self.chosen is not None:
            return self.chosen.parse_frames(frames, coalesce=coalesce)
        return super().parse_frames(frames, coalesce=coalesce)

    def parse_region(self, region: bytes, *, coalesce: bool) -> list[Event]:
        if self.chosen is not None:
            return self.chosen.parse_region(region, coalesce=coalesce)
        return super().parse_region(region, coalesce=coalesce)

    def delta_texts(self, region: bytes) -> list[str] | None:
        return self.chosen.delta_texts(region) if self.chosen is not None else None

    def oversized(self, frame: Oversized) -> list[Event]:
        return self.chosen.oversized(frame) if self.chosen is not None else super().oversized(frame)

    def tool_kind(self, tool: str) -> str:
        return self.chosen.tool_kind(tool) if self.chosen is not None else agreed_kind(tool)

    def on_exit(self, exit_code: int | None, exit_signal: int | None) -> list[Event]:
        return self.chosen.on_exit(exit_code, exit_signal) if self.chosen is not None else []

    def transcript_search(
        self, session_id: str | None, env: Mapping[str, str]
    ) -> tuple[Path, str] | None:
        if self.chosen is None:
            return None
        return self.chosen.transcript_search(session_id, env)

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        return False


def decode_or_unparsed(line: bytes) -> UnparsedLine:
    obj = decode_object(line)
    if isinstance(obj, UnparsedLine):
        return obj
    return unparsed(line, "not recognised as any agent's event")


def silent_agent(seconds: float) -> WarningEvent:
    """The warning for an agent whose dialect is being guessed and that wrote
    nothing for ``seconds``: an ACP agent waits for its client in silence."""
    return WarningEvent(
        code="silent_agent",
        message=f"the agent has written nothing for {seconds:g}s; if it speaks the Agent "
        "Client Protocol it is waiting for a client on its stdin: run it with --dialect acp "
        "and a --task",
    )


def chosen_name(dialect: Dialect) -> str | None:
    """The name of the dialect a run reads its agent with: the one a guess
    settled on, None while it has not."""
    if isinstance(dialect, SniffingDialect):
        return dialect.chosen.name if dialect.chosen is not None else None
    return dialect.name


def graces_for(dialect: Dialect, config: RunConfig) -> tuple[float, float]:
    """(grace, settle grace): the configured ones, except that a default
    (the user gave none) gives way to that of the dialect recognised from
    the stream, so that an agent known only by its output is not signalled
    while it exits by itself as it normally does."""
    chosen = dialect.chosen if isinstance(dialect, SniffingDialect) else None
    if chosen is None:
        return config.grace, config.settle_grace
    grace, settle_grace = chosen.graces(config.command)
    return (
        grace if config.grace_is_default else config.grace,
        settle_grace if config.settle_grace_is_default else config.settle_grace,
    )
