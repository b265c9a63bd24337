"""ISO 8601 UTC timestamps, the one format every artifact uses."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def iso(epoch: float) -> str:
    return (
        datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def iso_now() -> str:
    return iso(time.time())
