"""Deterministic pi JSON streams (``pi --mode json -p`` output) and fake-agent scenarios.

A generated stream is one long streamed answer: the session header, the user
prompt, ``deltas`` ``message_update`` lines, then ``message_end`` with the
final assistant message (``stopReason: "stop"``), ``turn_end``, ``agent_end``
and ``agent_settled``. Like pi's, every update carries the message so far and
ends with its ``assistantMessageEvent``; unlike pi's, the text carried is the
last ``WINDOW_CHARS`` characters of the answer, so that lines stay bounded and
the size grows linearly with the number of deltas (200,000 deltas are about
56 MB).
"""

from __future__ import annotations

import hashlib
import json
import random
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
    digest = hashlib.sha256()
    size = lines = 0
    batch: list[str] = []

    def put(text: str) -> None:
        batch.append(text)
        if len(batch) >= 4096:
            flush()

    def flush() -> None:
        nonlocal size, lines
        data = "".join(batch).encode()
        out.write(data)
        digest.update(data)
        size += len(data)
        lines += len(batch)
        batch.clear()

    with path.open("wb") as out:
        for obj in head:
            put(_dumps(obj) + "\n")
        window = ""
        for index in range(deltas):
            if oversized_bytes and index == deltas // 2:
                filler = (" ".join(_WORDS) + " ") * (oversized_bytes // 150 + 1)
                put(_update(filler[:oversized_bytes], " and"))
            delta = "".join(" " + rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))
            window = (window + delta)[-WINDOW_CHARS:]
            put(_update(window, delta))
        final = _assistant(window)
        for obj in (
            {"type": "message_end", "message": final},
            {"type": "turn_end", "message": final, "toolResults": []},
            {"type": "agent_end", "messages": [user, final], "willRetry": False},
            {"type": "agent_settled"},
        ):
            put(_dumps(obj) + "\n")
        flush()
    return Stream(path=path, lines=lines, size=size, sha256=digest.hexdigest())


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
