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

from pathlib import Path
from typing import Any

from wrapper.files.rundir import TAIL_BLOCK_BYTES, json_lines_backwards

__all__ = ["DEFAULT_TAIL_LIMIT", "TAIL_BLOCK_BYTES", "last_assistant_message"]

#: How far back the search goes before giving up.
DEFAULT_TAIL_LIMIT = 16 * 1024 * 1024


def last_assistant_message(path: Path | str, limit: int = DEFAULT_TAIL_LIMIT) -> str | None:
    """The text of the last assistant message in the file, or None."""
    # The run directory's reader opens without blocking, and only a regular
    # file: a FIFO planted at the transcript's path must not hang the wrapper.
    for obj in json_lines_backwards(path, limit):
        text = _assistant_text(obj)
        if text is not None:
            return text
    return None


def _assistant_text(obj: dict[str, Any]) -> str | None:
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
