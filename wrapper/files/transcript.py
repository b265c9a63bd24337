"""Reading the last assistant message of a JSONL transcript from its tail.

Transcripts grow to many megabytes; the answer is near the end. The file is
read backwards in blocks, lines are decoded from the last one up, and lines
that are not JSON (a torn final write, noise) are skipped. Understood shapes:
pi session files (``{"type": "message", "message": {...}}``), Claude Code
transcripts (``{"type": "assistant", "message": {...}}``), the wrapper's own
``events.jsonl`` (``assistant_message`` events) and bare
``{"role": "assistant", "content": ...}`` lines.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

#: Bytes read per step backwards.
TAIL_BLOCK_BYTES = 64 * 1024
#: How far back the search goes before giving up.
DEFAULT_TAIL_LIMIT = 16 * 1024 * 1024


def last_assistant_message(path: Path | str, limit: int = DEFAULT_TAIL_LIMIT) -> str | None:
    """The text of the last assistant message in the file, or None."""
    try:
        # Without blocking, and only a regular file: a FIFO planted at the
        # transcript's path must not hang the wrapper.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        for line in _lines_backwards(fd, limit):
            text = _assistant_text(line)
            if text is not None:
                return text
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def _lines_backwards(fd: int, limit: int) -> Iterator[bytes]:
    end = os.fstat(fd).st_size
    floor = max(0, end - limit)
    carry = b""
    while end > floor:
        start = max(floor, end - TAIL_BLOCK_BYTES)
        block = os.pread(fd, end - start, start) + carry
        end = start
        lines = block.split(b"\n")
        # The first piece may be the end of a line that starts further back.
        carry = lines[0] if start > floor else b""
        for line in reversed(lines if start == floor else lines[1:]):
            if line.strip():
                yield line


def _assistant_text(line: bytes) -> str | None:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    if obj.get("type") == "assistant_message" and isinstance(obj.get("text"), str):
        return str(obj["text"])
    message = obj.get("message")
    if not isinstance(message, dict):
        message = obj
    if message.get("role") != "assistant":
        return None
    return _content_text(message.get("content"))


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(texts) if texts else None
