"""ISO 8601 UTC timestamps, the one format every artifact uses."""

from __future__ import annotations

from datetime import UTC, datetime

# Events come in bursts that share a millisecond; formatting is the costly part.
_last_ms = -1
_last_text = ""


def iso(epoch: float) -> str:
    global _last_ms, _last_text
    ms = int(epoch * 1000)
    if ms != _last_ms:
        stamp = datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
        _last_ms, _last_text = ms, stamp.replace("+00:00", "Z")
    return _last_text
