"""Replaying a recorded ACP session (tests/data/real/acp) through the client core."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wrapper.core.events import Event
from wrapper.dialects.acp.actions import Output, Send, TurnEnded
from wrapper.dialects.acp.client import AcpClient
from wrapper.dialects.acp.protocol_log import replay as replay_records

CAPTURES = Path(__file__).parent / "data" / "real" / "acp"


def records(path: Path) -> Iterator[dict[str, Any]]:
    for raw in path.read_bytes().splitlines():
        if raw.strip():
            yield orjson.loads(raw)


@dataclass
class Replay:
    client: AcpClient
    outputs: list[Output] = field(default_factory=list)
    #: The capture's outgoing messages the core was asked to reproduce.
    recorded: list[dict[str, Any]] = field(default_factory=list)

    @property
    def events(self) -> list[Event]:
        return [o for o in self.outputs if isinstance(o, Event)]

    @property
    def sent(self) -> list[dict[str, Any]]:
        return [o.message for o in self.outputs if isinstance(o, Send)]

    @property
    def turns(self) -> list[TurnEnded]:
        return [o for o in self.outputs if isinstance(o, TurnEnded)]


def replay(path: Path) -> Replay:
    """The core fed the agent's side of the capture at ``path``."""
    rows = list(records(path))
    client, outputs = replay_records(rows)
    recorded = [r["msg"] for r in rows if r["dir"] == "out" and "raw" not in r["msg"]]
    return Replay(client, outputs, recorded)


def shape(message: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a sent message: its method (or the outcome it
    answers with) and its id."""
    if "method" in message:
        return (message["method"], message.get("id"))
    return ("response", message.get("id"), orjson.dumps(message.get("result")))
