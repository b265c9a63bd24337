"""``protocol.jsonl``: both directions of an ACP session, and its replay.

One record a line: ``{"t": seconds since the session started (monotonic),
"dir": "out" | "in", "msg": message}``; ``out`` is the wrapper to the
agent, ``in`` the agent to the wrapper, and a line from the agent that was
not JSON is kept as ``{"unparsed": text}``. The first record is
``{"t": 0, "dir": "wrapper", "msg": {"event": "start", "at": ISO time}}``.
This is also the shape of the recorded sessions of real agents the tests
replay, so one replay reads both.

Replaying feeds the agent's side to a fresh client core and re-enacts, at
the same points, the decisions the recorded client took (a prompt, a
permission answer, a cancel): the events come out as they did live.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from wrapper.dialects.acp.actions import AcpOptions, Output, PermissionRequested, Send
from wrapper.dialects.acp.client import AcpClient, Phase


def record(t: float, way: str, message: Mapping[str, Any]) -> bytes:
    """One line of ``protocol.jsonl``."""
    return orjson.dumps({"t": round(t, 4), "dir": way, "msg": message}) + b"\n"


def unparsed_line(line: bytes) -> dict[str, str]:
    """What stands for a line from the agent that is not JSON."""
    return {"unparsed": line.decode("utf-8", "replace")}


def prompt_text(message: Mapping[str, Any]) -> str:
    """The text of a ``session/prompt`` request."""
    params = message.get("params")
    blocks = params.get("prompt") if isinstance(params, Mapping) else None
    if not isinstance(blocks, list):
        return ""
    return "".join(str(block.get("text", "")) for block in blocks if isinstance(block, Mapping))


def replay(records: Iterable[Mapping[str, Any]]) -> tuple[AcpClient, list[Output]]:
    """The client core fed a recorded session; its outputs in order (the
    messages it would send included: a test compares them with the record)."""
    rows = list(records)
    outgoing = [
        r["msg"] for r in rows if r.get("dir") == "out" and isinstance(r.get("msg"), Mapping)
    ]
    empty: Mapping[str, Any] = {}
    first = next((m for m in outgoing if m.get("method") == "session/prompt"), empty)
    new = next((m for m in outgoing if m.get("method") == "session/new"), empty)
    params = new.get("params")
    cwd = params.get("cwd") if isinstance(params, Mapping) else None
    client = AcpClient(AcpOptions(task=prompt_text(first), cwd=cwd if isinstance(cwd, str) else ""))
    outputs: list[Output] = []
    asked: dict[str, PermissionRequested] = {}
    for row in rows:
        now = float(row.get("t") or 0.0)
        msg = row.get("msg")
        if not isinstance(msg, Mapping):
            continue
        way = row.get("dir")
        if way == "in":
            text = msg.get("unparsed")
            line = text.encode("utf-8") if isinstance(text, str) else orjson.dumps(msg)
            out = client.feed(line, now)
        elif way == "out" and "raw" not in msg:
            out = _reenact(client, msg, asked, now)
        else:
            continue
        for item in out:
            if isinstance(item, Send):
                client.written()  # the record holds what was written
            elif isinstance(item, PermissionRequested):
                asked[orjson.dumps(item.request_id).decode()] = item
        outputs += out
    return client, outputs


def _reenact(
    client: AcpClient,
    msg: Mapping[str, Any],
    asked: dict[str, PermissionRequested],
    now: float,
) -> list[Output]:
    method = msg.get("method")
    if method == "initialize":
        return client.start(now)
    if method == "session/cancel":
        return client.cancel()
    if method == "session/prompt" and client.phase is Phase.IDLE:
        return client.prompt(prompt_text(msg))
    key = orjson.dumps(msg.get("id")).decode()
    if method is None and key in asked:
        request = asked.pop(key)
        result = msg.get("result")
        outcome = result.get("outcome") if isinstance(result, Mapping) else None
        if not isinstance(outcome, Mapping) or outcome.get("outcome") != "selected":
            # Cancelled: the core's cancel answered it already, or it is refused now.
            return client.decide_permission(request.request_id, False, "cancelled")
        kinds = dict(request.options)
        allowed = str(kinds.get(str(outcome.get("optionId")), "")).startswith("allow")
        return client.decide_permission(request.request_id, allowed, "refused")
    # The core sends the rest by itself (session/new, the first prompt).
    return []
