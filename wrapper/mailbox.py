"""Messages that reach a running wrapper through files in its run directory:
completion signals from the agent (``agent-wrapper signal``) and a person's
replies to an escalation (``agent-wrapper reply``).

Every file is written whole, atomically. A reply is created with a hard
link, which fails when the answer already exists: the first reply wins,
whoever it comes from (the wrapper answers a timed-out escalation the same
way). This is coordination between cooperating processes, not a security
boundary: anything running as the same user can write these files.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path
from typing import Any

import orjson

SIGNAL_KINDS = ("complete", "escalate", "continue")
#: Answers to an escalation: a person's text, ``continue``, ``stop``, or the
#: wrapper's own ``timeout`` and ``closed`` (it stopped waiting: a signal or
#: the run's deadline ended the run).
ANSWER_KINDS = ("text", "continue", "stop", "timeout", "closed")


class MailboxError(Exception):
    """The message could not be delivered; the text says why."""


def _write_new(path: Path, data: dict[str, Any]) -> bool:
    """Create ``path`` with ``data`` unless it exists; True when this call created it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    temp.write_bytes(orjson.dumps(data))
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    finally:
        temp.unlink(missing_ok=True)
    return True


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or None when it is missing or not one."""
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


# -- completion signals -------------------------------------------------------------


def send_signal(run_dir: Path, kind: str, message: str | None, attempt: int) -> Path:
    if kind not in SIGNAL_KINDS:
        raise MailboxError(f"unknown signal {kind!r} (one of {', '.join(SIGNAL_KINDS)})")
    if not run_dir.is_dir():
        raise MailboxError(f"{run_dir} does not exist: not the directory of a wrapped run")
    name = f"{time.time_ns():020d}-{os.getpid()}.json"
    record = {"kind": kind, "message": message, "attempt": attempt, "at": time.time()}
    path = run_dir / "signals" / name
    if not _write_new(path, record):  # pragma: no cover - the name is unique
        raise MailboxError(f"{path} exists")
    return path


def signals_of(run_dir: Path, attempt: int) -> list[dict[str, Any]]:
    """The signals sent during ``attempt``, oldest first (others are stale)."""
    folder = run_dir / "signals"
    try:
        names = sorted(p for p in os.listdir(folder) if p.endswith(".json"))
    except OSError:
        return []
    found = []
    for name in names:
        record = read_json(folder / name)
        if (
            record is not None
            and record.get("kind") in SIGNAL_KINDS
            and record.get("attempt") == attempt
        ):
            found.append(record)
    return found


# -- escalations ---------------------------------------------------------------------


def _folder(run_dir: Path, escalation: str) -> Path:
    return run_dir / "escalations" / escalation


def open_escalation(run_dir: Path, escalation: str, question: str | None) -> None:
    _write_new(_folder(run_dir, escalation) / "question.json", {"question": question})
    current = run_dir / "escalations" / "current.json"
    current.write_bytes(orjson.dumps({"id": escalation, "question": question}))


def close_escalation(run_dir: Path, escalation: str) -> None:
    """Stop waiting: an escalation nobody answered is answered ``closed``, so
    a reply arriving later is told so instead of being left unread."""
    with contextlib.suppress(OSError):
        answer(run_dir, escalation, "closed")


def latest_escalation(run_dir: Path) -> str | None:
    """The id of the run's latest escalation (answered or not), if any."""
    current = read_json(run_dir / "escalations" / "current.json")
    escalation = current.get("id") if current else None
    return escalation if isinstance(escalation, str) else None


def answer(run_dir: Path, escalation: str, kind: str, text: str | None = None) -> bool:
    """Answer ``escalation``; False when it was already answered."""
    if kind not in ANSWER_KINDS:
        raise MailboxError(f"unknown answer {kind!r}")
    record = {"kind": kind, "text": text, "at": time.time()}
    return _write_new(_folder(run_dir, escalation) / "answer.json", record)


def answer_of(run_dir: Path, escalation: str) -> dict[str, Any] | None:
    return read_json(_folder(run_dir, escalation) / "answer.json")
