"""What supervision did in a run, as the HTML report marks it: read from
the run's result.json (steers by Stop hooks and the error retry, steers
from outside, escalations, the signals the wrapper sent, an abort) and its
events.jsonl (the agent's own retries, and its tool calls counted on the
way), never through a symlink.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from wrapper.core.steering import RETRY_HANDLER
from wrapper.fleet.report_model import SIGNAL_RANK, Mark

#: How much of a run's events.jsonl is read to count its tool calls and
#: find the agent's own retries.
EVENTS_MAX_BYTES = 64 * 1024 * 1024
#: How every tool_start and retry line of events.jsonl begins (the wrapper
#: writes compact JSON, type first): only those lines are decoded.
TOOL_START = b'{"type":"tool_start",'
AGENT_RETRY = b'{"type":"retry",'
#: How many of the agent's own retries a run's timeline marks (the first
#: ones): a provider that fails for an hour must not make the page heavy.
AGENT_RETRY_MARKS = 50
#: How a run's own files are opened: never blocking on a FIFO, and never
#: through a symlink, which an agent could plant to put another file (a key,
#: a secret) into a page meant to be shared.
RUN_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW


def marks_of(result: Mapping[str, Any]) -> list[Mark]:
    """What supervision did in a run, from its result.json: each Stop-hook
    steer and error retry, each steer from outside that reached the agent,
    each escalation, each SIGTERM or SIGKILL the wrapper sent, an abort."""
    marks: list[Mark] = []
    for steer in objects(result.get("steers")):
        at = epoch(steer.get("at"))
        if at is None:
            continue
        retry = steer.get("handler") == RETRY_HANDLER
        attempt = as_int(steer.get("attempt"))
        text = str(steer.get("reason") or "")
        if attempt is not None:
            who = "" if retry else f" by {steer.get('handler')}"
            text = f"attempt {attempt}{who}: {text}"
        marks.append(Mark(at=at, kind="retry" if retry else "steer", text=text))
    for steer in objects(result.get("externalSteers")):
        at = epoch(steer.get("requestedAt"))
        # A refused steer never reached the agent: the run's section lists it.
        if at is None or steer.get("outcome") not in ("delivered", "sent"):
            continue
        how = {"resume": "by resuming", "live": "into the live session"}.get(
            str(steer.get("how")), ""
        )
        attempt = as_int(steer.get("attempt"))
        text = f"{steer.get('id')} {steer.get('outcome')} {how}".rstrip()
        if attempt is not None:
            text += f" (attempt {attempt})"
        length = as_int(steer.get("textLength"))
        if length is not None:
            text += f", {length:,} characters"
        marks.append(Mark(at=at, kind="outside", text=text))
    marks += [
        Mark(at=at, kind="escalation", text=str(esc.get("question") or ""))
        for esc in objects(result.get("escalations"))
        if (at := epoch(esc.get("at"))) is not None
    ]
    records = attempts(result)
    for record in records:
        for sent in objects(record.get("signalsSent")):
            name, at = sent.get("signal"), epoch(sent.get("at"))
            if name in SIGNAL_RANK and at is not None:
                marks.append(Mark(at=at, kind="signal", text=f"{name}: {sent.get('reason')}"))
    if result.get("outcome") == "aborted":
        # The abort took effect with the first signal of the last attempt.
        last = objects(records[-1].get("signalsSent")) if records else []
        stamps = [at for sent in last if (at := epoch(sent.get("at"))) is not None]
        at = stamps[0] if stamps else epoch(result.get("endedAt"))
        error = result.get("error")
        why = error.get("message") if isinstance(error, Mapping) else None
        if at is not None:
            marks.append(Mark(at=at, kind="abort", text=str(why or "the run was aborted")))
    return marks


def refused_steers(result: Mapping[str, Any]) -> list[Mark]:
    """The steers from outside the run refused, with why, as the run's
    section lists them."""
    return [
        Mark(
            at=at,
            kind="steer from outside, refused",
            text=f"{steer.get('id')}: {steer.get('why') or 'no reason given'}",
        )
        for steer in objects(result.get("externalSteers"))
        if steer.get("outcome") == "refused" and (at := epoch(steer.get("requestedAt"))) is not None
    ]


def signals_sent(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each SIGTERM or SIGKILL the wrapper sent the agent, over every
    attempt, and why."""
    return [
        (str(sent.get("signal")), str(sent.get("reason") or ""))
        for record in attempts(result)
        for sent in objects(record.get("signalsSent"))
        if sent.get("signal") in SIGNAL_RANK
    ]


def attempts(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Each attempt's record; the top-level fields (the last attempt's) when
    result.json lists none."""
    listed = objects(result.get("attempts"))
    return listed or ([result] if result else [])


def read_events(path: Path) -> tuple[tuple[tuple[str, int], ...] | None, list[Mark]]:
    """How many times each tool was started, in first-use order, and the
    agent's own retries, from a run's events.jsonl; None and none when
    there is none to read."""
    try:
        fd = os.open(path, RUN_FILE_FLAGS)
    except OSError:
        return None, []
    counts: dict[str, int] = {}
    retries: list[Mark] = []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, []
        with os.fdopen(fd, "rb", closefd=False) as events:
            read = 0
            for line in events:
                read += len(line)
                if read > EVENTS_MAX_BYTES:
                    break
                if line.startswith(AGENT_RETRY):
                    retry = _agent_retry(line)
                    if retry is not None and len(retries) < AGENT_RETRY_MARKS:
                        retries.append(retry)
                    continue
                if not line.startswith(TOOL_START):
                    continue
                try:
                    tool = orjson.loads(line).get("tool")
                except orjson.JSONDecodeError:
                    continue
                name = tool if isinstance(tool, str) else "?"
                counts[name] = counts.get(name, 0) + 1
    except OSError:
        return None, []
    finally:
        os.close(fd)
    return tuple(counts.items()), retries


def _agent_retry(line: bytes) -> Mark | None:
    """The start of one of the agent's own retries (a failed request it
    tries again in the same attempt), as a mark."""
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    at = epoch(event.get("ts")) if isinstance(event, dict) else None
    if at is None or event.get("phase") != "start":
        return None
    number, most = as_int(event.get("retryAttempt")), as_int(event.get("maxAttempts"))
    text = "retry" if number is None else f"retry {number}"
    text += "" if most is None else f" of {most}"
    message = event.get("message")
    return Mark(at=at, kind="agent_retry", text=f"{text}: {message}" if message else text)


def objects(value: Any) -> list[Mapping[str, Any]]:
    """The JSON objects of a list; none of anything else."""
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    """An integer (not a boolean), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def epoch(value: Any) -> float | None:
    """An ISO 8601 time as seconds since the epoch, else None."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None
