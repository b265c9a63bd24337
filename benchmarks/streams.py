"""Deterministic agent streams (pi's ``--mode json``, Claude Code's
``stream-json`` with partial messages) and fake-agent scenarios.

A generated pi stream is one long streamed answer: the session header, the user
prompt, ``deltas`` ``message_update`` lines, then ``message_end`` with the
final assistant message (``stopReason: "stop"``), ``turn_end``, ``agent_end``
and ``agent_settled``. Like pi's, every update carries the message so far and
ends with its ``assistantMessageEvent``; unlike pi's, the text carried is the
last ``WINDOW_CHARS`` characters of the answer, so that lines stay bounded and
the size grows linearly with the number of deltas (200,000 deltas are about
56 MB).

A generated Claude stream is the same answer as Claude Code writes it with
``--include-partial-messages``: ``system``/``init``, the ``stream_event``
lines of one message (``message_start``, ``content_block_start``, ``deltas``
``content_block_delta`` text deltas, ``content_block_stop``,
``message_delta``, ``message_stop``, each with the session id, a null
``parent_tool_use_id`` and its own ``uuid``), the ``assistant`` line with the
whole text, and the ``result`` line with it again (1,000,000 deltas are
about 270 MB).
"""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Characters of the answer so far carried by each update. With the envelope
#: (about 250 bytes, the fake agent's) and an average delta of 12 bytes this
#: makes lines of 280 bytes: 200,000 deltas are the issue's 56 MB.
WINDOW_CHARS = 20
#: Fixed, so the stream (and its hash) is the same in every run.
TIMESTAMP_MS = 1_763_780_000_000
SESSION_ID = "0b7c2f4e-8d1a-4c55-9a43-5f1e6b2d7c90"
MODEL = {"api": "fake", "provider": "fake", "model": "fake-model"}
TASK = "Fix the off-by-one in parse_range"

# Prose and code with the characters JSON must escape, and some non-ASCII.
_WORDS = (
    *("the", "parser", "drops", "upper", "bound", "of", "a", "range", "when", "it", "is"),
    *("inclusive", "so", "we", "read", "src/ranges.py", "and", "fix", "parse_range()"),
    *("then", "run", "pytest", "-q"),
    "`end + 1`",
    '"quoted"',
    "naïve",
    "→",
    "\n\n",
    "\tindent",
    "C:\\path",
    "tests:",
    "42",
)

_UPDATE_HEAD = (
    '{"type":"message_update","message":{"role":"assistant","content":[{"type":"text","text":'
)
_UPDATE_MID = (
    "}],"
    + json.dumps(MODEL, separators=(",", ":"))[1:-1]
    + f',"timestamp":{TIMESTAMP_MS}}},'
    + '"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":'
)
_UPDATE_TAIL = "}}\n"


@dataclass(frozen=True, slots=True)
class Stream:
    """A generated stream file and what a faithful copy of it must match."""

    path: Path
    lines: int
    size: int
    sha256: str

    @property
    def megabytes(self) -> float:
        return self.size / 1e6


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _update(window: str, delta: str) -> str:
    return _UPDATE_HEAD + _dumps(window) + _UPDATE_MID + _dumps(delta) + _UPDATE_TAIL


def _assistant(text: str) -> dict[str, Any]:
    usage = {"input": 1200, "output": 800, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2000}
    cost = {"input": 0.0036, "output": 0.012, "cacheRead": 0, "cacheWrite": 0, "total": 0.0156}
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        **MODEL,
        "usage": {**usage, "cost": cost},
        "stopReason": "stop",
        "timestamp": TIMESTAMP_MS,
    }


class _Writer:
    """Writes text lines to a file in batches, keeping their count, size and SHA-256."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._out = path.open("wb")
        self._digest = hashlib.sha256()
        self._batch: list[str] = []
        self._size = self._lines = 0

    def put(self, text: str) -> None:
        self._batch.append(text)
        if len(self._batch) >= 4096:
            self._flush()

    def _flush(self) -> None:
        data = "".join(self._batch).encode()
        self._out.write(data)
        self._digest.update(data)
        self._size += len(data)
        self._lines += len(self._batch)
        self._batch.clear()

    def close(self) -> Stream:
        self._flush()
        self._out.close()
        return Stream(self.path, self._lines, self._size, self._digest.hexdigest())


def _delta_text(rng: random.Random) -> str:
    return "".join(" " + rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))


def write_pi_stream(
    path: Path, deltas: int, *, oversized_bytes: int = 0, seed: int = 20251122
) -> Stream:
    """Write a stream of ``deltas`` text deltas and a final answer to ``path``.

    With ``oversized_bytes``, one extra ``message_update`` of about that size
    sits in the middle of the stream (a runaway line, for the line-size cap).
    """
    rng = random.Random(seed)
    user = {"role": "user", "content": [{"type": "text", "text": TASK}], "timestamp": TIMESTAMP_MS}
    start = {**_assistant(""), "content": []}
    del start["stopReason"]
    head = [
        {
            "type": "session",
            "version": 3,
            "id": SESSION_ID,
            "timestamp": "2025-11-22T03:00:00.000Z",
            "cwd": "/work/project",
        },
        {"type": "agent_start"},
        {"type": "message_start", "message": user},
        {"type": "message_end", "message": user},
        {"type": "turn_start"},
        {"type": "message_start", "message": start},
    ]
    out = _Writer(path)
    for obj in head:
        out.put(_dumps(obj) + "\n")
    window = ""
    for index in range(deltas):
        if oversized_bytes and index == deltas // 2:
            filler = (" ".join(_WORDS) + " ") * (oversized_bytes // 150 + 1)
            out.put(_update(filler[:oversized_bytes], " and"))
        delta = _delta_text(rng)
        window = (window + delta)[-WINDOW_CHARS:]
        out.put(_update(window, delta))
    final = _assistant(window)
    for obj in (
        {"type": "message_end", "message": final},
        {"type": "turn_end", "message": final, "toolResults": []},
        {"type": "agent_end", "messages": [user, final], "willRetry": False},
        {"type": "agent_settled"},
    ):
        out.put(_dumps(obj) + "\n")
    return out.close()


CLAUDE_SESSION_ID = "5d0c6f1e-2b7a-4f3e-9c21-7e4a8b9d0f12"
CLAUDE_MODEL = "claude-fake-1"
_CLAUDE_DELTA_HEAD = (
    '{"type":"stream_event","event":{"type":"content_block_delta","index":0,'
    '"delta":{"type":"text_delta","text":'
)
_CLAUDE_DELTA_TAIL = f'}}}},"session_id":"{CLAUDE_SESSION_ID}","parent_tool_use_id":null,"uuid":"'


def write_claude_stream(path: Path, deltas: int, *, seed: int = 20261123) -> Stream:
    """Write Claude Code's partial-message stream of one answer in ``deltas`` text deltas."""
    rng = random.Random(seed)
    session = {"session_id": CLAUDE_SESSION_ID}
    usage = {
        "input_tokens": 1200,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 800,
    }
    message: dict[str, Any] = {
        "model": CLAUDE_MODEL,
        "id": "msg_01FakeFakeFakeFakeFakeFake",
        "type": "message",
        "role": "assistant",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }

    def event(body: dict[str, Any]) -> str:
        line = {"type": "stream_event", "event": body, **session, "parent_tool_use_id": None}
        return _dumps({**line, "uuid": str(uuid.UUID(int=rng.getrandbits(128)))}) + "\n"

    out = _Writer(path)
    init = {
        "type": "system",
        "subtype": "init",
        "cwd": "/work/project",
        **session,
        "tools": ["Bash", "Read", "Edit"],
        "model": CLAUDE_MODEL,
        "permissionMode": "default",
        "claude_code_version": "2.1.197",
    }
    out.put(_dumps(init) + "\n")
    out.put(event({"type": "message_start", "message": message}))
    out.put(
        event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        )
    )
    parts = []
    for _ in range(deltas):
        delta = _delta_text(rng)
        parts.append(delta)
        ident = uuid.UUID(int=rng.getrandbits(128))
        out.put(_CLAUDE_DELTA_HEAD + _dumps(delta) + _CLAUDE_DELTA_TAIL + f'{ident}"}}\n')
    text = "".join(parts)
    out.put(event({"type": "content_block_stop", "index": 0}))
    whole = {**message, "content": [{"type": "text", "text": text}]}
    out.put(
        _dumps({"type": "assistant", "message": whole, "parent_tool_use_id": None, **session})
        + "\n"
    )
    stop = {"stop_reason": "end_turn", "stop_sequence": None}
    out.put(event({"type": "message_delta", "delta": stop, "usage": usage}))
    out.put(event({"type": "message_stop"}))
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 60000,
        "num_turns": 1,
        "result": text,
        "stop_reason": "end_turn",
        **session,
        "total_cost_usd": 0.0156,
        "usage": usage,
        "terminal_reason": "completed",
    }
    out.put(_dumps(result) + "\n")
    return out.close()


def write_scenario(path: Path, steps: list[dict[str, Any]]) -> Path:
    """A fake-agent scenario (fixtures/fake_agent/README.md) with the default preamble."""
    path.write_text(json.dumps({"version": 1, "steps": steps}, indent=2))
    return path


def file_digest(path: Path) -> tuple[int, str]:
    """Size and SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()
