"""Replaying a recorded ACP session (tests/data/real/acp) through the client core.

The capture's outgoing messages say what the recording client decided (send
a prompt, answer a permission request, cancel); the core is asked to do the
same at the same point, and every message it sends is kept so that tests can
compare them with the recording.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wrapper.acp.client import (
    AcpClient,
    AcpOptions,
    Output,
    PermissionRequested,
    Phase,
    Send,
    TurnEnded,
)
from wrapper.events import Event

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


def _prompt_text(message: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in message["params"]["prompt"])


def replay(path: Path) -> Replay:
    """The core fed the agent's side of the capture at ``path``."""
    rows = list(records(path))
    outgoing = [r["msg"] for r in rows if r["dir"] == "out"]
    first = next(m for m in outgoing if m.get("method") == "session/prompt")
    start = next(r["msg"] for r in rows if r["dir"] == "probe" and r["msg"].get("event") == "start")
    client = AcpClient(AcpOptions(task=_prompt_text(first), cwd=start["cwd"]))
    result = Replay(client)
    asked: dict[Any, PermissionRequested] = {}
    for row in rows:
        now = float(row["t"])
        msg = row["msg"]
        if row["dir"] == "in":
            line = msg["unparsed"].encode() if "unparsed" in msg else orjson.dumps(msg)
            out = client.feed(line, now)
        elif row["dir"] == "out":
            if "raw" in msg:
                continue
            result.recorded.append(msg)
            method = msg.get("method")
            if method == "initialize":
                out = client.start(now)
            elif method == "session/cancel":
                out = client.cancel()
            elif method == "session/prompt" and client.phase is Phase.IDLE:
                out = client.prompt(_prompt_text(msg))
            elif method is None and msg.get("id") in asked:
                request = asked.pop(msg["id"])
                outcome = msg["result"]["outcome"]
                if outcome.get("outcome") != "selected":
                    continue  # answered by the core's cancel already
                kinds = dict(request.options)
                out = client.decide_permission(
                    msg["id"], kinds[outcome["optionId"]].startswith("allow"), "refused in replay"
                )
            else:
                continue  # the core sends it by itself (session/new, the first prompt)
        else:
            continue
        for item in out:
            if isinstance(item, PermissionRequested):
                asked[item.request_id] = item
        result.outputs += out
    return result


def shape(message: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a sent message: its method (or the outcome it
    answers with) and its id."""
    if "method" in message:
        return (message["method"], message.get("id"))
    return ("response", message.get("id"), orjson.dumps(message.get("result")))
