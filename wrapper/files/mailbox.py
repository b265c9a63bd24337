"""Messages that reach a running wrapper through files in its run directory:
completion signals from the agent (``agent-wrapper signal``) and a person's
replies to an escalation (``agent-wrapper reply``).

Every file is written whole, atomically. A reply is created with a hard
link, which fails when the answer already exists: the first reply wins,
whoever it comes from (the wrapper answers a timed-out escalation the same
way). This is coordination between cooperating processes, not a security
boundary: anything running as the same user can write these files.

Every signal and answer carries the run id, and the wrapper heeds only its
own run's: a file an earlier run left in the same directory never steers a
new one. Files are read without following symlinks, without blocking, and
only when they are regular files of a bounded size (``artifacts.read_run_file``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from wrapper.core.jsonout import dumps
from wrapper.core.limits import REPLY_NONCE_MAX_CHARS
from wrapper.files import artifacts
from wrapper.files.artifacts import (
    RUN_FILE_MAX_BYTES,
    UnreadableFile,
    atomic_write,
    list_run_folder,
    read_run_file,
    write_new,
)

SIGNAL_KINDS = ("complete", "escalate", "continue")
#: Answers to an escalation: a person's text, ``continue``, ``stop``, or the
#: wrapper's own ``timeout`` and ``closed`` (it stopped waiting: a signal or
#: the run's deadline ended the run).
ANSWER_KINDS = ("text", "continue", "stop", "timeout", "closed")


#: Reports a file in the run directory that was ignored (a symlink, a FIFO,
#: a huge file, not JSON), as a sentence for a person.
Warn = Callable[[str], None]


class MailboxError(Exception):
    """The message could not be delivered; the text says why."""


def _write_new(path: Path, data: dict[str, Any]) -> bool:
    """Create ``path`` with ``data`` unless it exists; True when this call created it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_new(path, dumps(data))


def read_json(
    path: Path, warn: Warn | None = None, max_bytes: int = RUN_FILE_MAX_BYTES
) -> dict[str, Any] | None:
    """A JSON object from ``path`` in a run directory, or None when it is
    missing or not one. A file that cannot be one of ours (a symlink, a FIFO,
    a device, too large) or is not a JSON object is ignored, and ``warn``
    told why."""
    try:
        raw = read_run_file(path, max_bytes)
    except UnreadableFile as exc:
        if warn is not None:
            warn(f"ignored {exc}")
        return None
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        if warn is not None:
            warn(f"ignored {path}: not valid JSON")
        return None
    if not isinstance(value, dict):
        if warn is not None:
            warn(f"ignored {path}: not a JSON object")
        return None
    return value


def run_id_in(run_dir: Path) -> str | None:
    """The id of the run in ``run_dir``: from status.json, else its marker."""
    status = read_json(run_dir / "status.json")
    run_id = status.get("runId") if status else None
    return run_id if isinstance(run_id, str) and run_id else artifacts.marked_run_id(run_dir)


# -- completion signals -------------------------------------------------------------


def send_signal(run_dir: Path, kind: str, message: str | None, attempt: int, run_id: str) -> Path:
    if kind not in SIGNAL_KINDS:
        raise MailboxError(f"unknown signal {kind!r} (one of {', '.join(SIGNAL_KINDS)})")
    if not run_dir.is_dir():
        raise MailboxError(f"{run_dir} does not exist: not the directory of a wrapped run")
    name = f"{time.time_ns():020d}-{os.getpid()}.json"
    record = {
        "kind": kind,
        "message": message,
        "attempt": attempt,
        "runId": run_id,
        "at": time.time(),
    }
    path = run_dir / "signals" / name
    if not _write_new(path, record):  # pragma: no cover - the name is unique
        raise MailboxError(f"{path} exists")
    return path


def signals_of(
    run_dir: Path, attempt: int, run_id: str, warn: Warn | None = None
) -> list[dict[str, Any]]:
    """The signals run ``run_id`` got during ``attempt``, oldest first (others
    are stale: an earlier attempt's, or an earlier run's in the same directory)."""
    folder = run_dir / "signals"
    names = sorted(name for name in list_run_folder(folder) if name.endswith(".json"))
    found = []
    for name in names:
        record = read_json(folder / name, warn)
        if (
            record is not None
            and record.get("kind") in SIGNAL_KINDS
            and record.get("attempt") == attempt
            and record.get("runId") == run_id
        ):
            found.append(record)
    return found


# -- escalations ---------------------------------------------------------------------


def _folder(run_dir: Path, escalation: str) -> Path:
    return run_dir / "escalations" / escalation


def open_escalation(run_dir: Path, escalation: str, question: str | None) -> None:
    _write_new(_folder(run_dir, escalation) / "question.json", {"question": question})
    current = run_dir / "escalations" / "current.json"
    atomic_write(current, dumps({"id": escalation, "question": question}), durable=False)


def close_escalation(run_dir: Path, escalation: str, run_id: str) -> None:
    """Stop waiting: an escalation nobody answered is answered ``closed``, so
    a reply arriving later is told so instead of being left unread; a reply
    that came and was not taken in time is told it was not."""
    with contextlib.suppress(OSError):
        answer(run_dir, escalation, "closed", run_id)
    pending = answer_of(run_dir, escalation, run_id)
    nonce = pending.get("nonce") if pending is not None else None
    if isinstance(nonce, str) and _safe(nonce):
        with contextlib.suppress(OSError):
            _write_new(
                _folder(run_dir, escalation) / f"verdict-{nonce}.json",
                {"refused": "the run stopped waiting for an answer before it took this one"},
            )


def latest_escalation(run_dir: Path, warn: Warn | None = None) -> str | None:
    """The id of the run's latest escalation (answered or not), if any."""
    current = read_json(run_dir / "escalations" / "current.json", warn)
    escalation = current.get("id") if current else None
    return escalation if isinstance(escalation, str) else None


def answer(
    run_dir: Path,
    escalation: str,
    kind: str,
    run_id: str,
    text: str | None = None,
    *,
    nonce: str | None = None,
) -> bool:
    """Answer ``escalation`` of run ``run_id``; False when it was already
    answered. ``nonce``: the sender waits for the run's verdict on it
    (``verdict_of``)."""
    if kind not in ANSWER_KINDS:
        raise MailboxError(f"unknown answer {kind!r}")
    record = {"kind": kind, "text": text, "runId": run_id, "at": time.time()}
    if nonce is not None:
        record["nonce"] = nonce
    return _write_new(_folder(run_dir, escalation) / "answer.json", record)


def settle_answer(
    run_dir: Path, escalation: str, record: dict[str, Any], refused: str | None
) -> None:
    """The run took ``record``, the answer to ``escalation`` (``refused``
    None), or refused it: the answer is taken back first, so that the
    question is open again when its sender hears of it."""
    folder = _folder(run_dir, escalation)
    if refused is not None:
        with contextlib.suppress(OSError):
            (folder / "answer.json").unlink()
    nonce = record.get("nonce")
    if isinstance(nonce, str) and _safe(nonce):
        with contextlib.suppress(OSError):
            _write_new(folder / f"verdict-{nonce}.json", {"refused": refused})


def verdict_of(run_dir: Path, escalation: str, nonce: str) -> dict[str, Any] | None:
    """Whether the run took the answer sent with ``nonce``: ``{"refused":
    None}`` when it did, ``{"refused": WHY}`` when not, None while undecided."""
    return read_json(_folder(run_dir, escalation) / f"verdict-{nonce}.json")


def _safe(nonce: str) -> bool:
    return nonce.isalnum() and len(nonce) <= REPLY_NONCE_MAX_CHARS


def answer_of(
    run_dir: Path, escalation: str, run_id: str | None, warn: Warn | None = None
) -> dict[str, Any] | None:
    """The answer to ``escalation``; one written for another run is not (None)."""
    record = read_json(_folder(run_dir, escalation) / "answer.json", warn)
    if record is None or (run_id is not None and record.get("runId") != run_id):
        return None
    return record
