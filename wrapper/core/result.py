"""result.json: the one file that tells a runner how the run went.

camelCase, ``schemaVersion`` 1; fields are only ever added, and a field
whose value is unknown is ``null``, never missing. The JSON Schema is
``wrapper/schemas/result.schema.json``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from wrapper.core.completion import CompletionTracker
from wrapper.core.config import SCHEMA_VERSION, RunConfig
from wrapper.core.control import ExternalSteers
from wrapper.core.events import AssistantMessage
from wrapper.core.outcome import ProcessExit, Verdict
from wrapper.core.policy import StopPolicy
from wrapper.core.registry import program_name
from wrapper.core.signals import WRAPPER_KILLED_EXIT
from wrapper.core.steering import Steering
from wrapper.core.summary import RunSummary
from wrapper.core.timefmt import iso

#: How many of the agent's last stderr lines a failure's message may quote.
STDERR_TAIL_LINES = 3
#: The run directory's files that result.json's ``artifacts`` names when they exist.
RUN_FILES = ("events.jsonl", "stdout.log", "stderr.log", "config.json")


@dataclass(slots=True, kw_only=True)
class AttemptRecord:
    """What happened in one attempt, for result.json."""

    number: int
    argv: list[str]
    pid: int | None = None
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    exit: ProcessExit | None = None
    spawn_error: str | None = None
    signals_sent: list[dict[str, Any]] = field(default_factory=list)
    tracker: CompletionTracker | None = None
    #: How much the agent wrote on stdout (a resume that wrote nothing was refused).
    stdout_bytes: int = 0
    #: Whether the dialect recognised any line of the agent's stdout, and how
    #: many lines it wrote until it did (all of them, when it never did).
    recognised: bool = False
    stdout_lines: int = 0
    #: The agent's last few non-blank stderr lines, for a failure's message.
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_TAIL_LINES))

    def stderr_excerpt(self, limit: int = 300) -> str | None:
        """The end of what the agent last said on stderr, on one line."""
        text = " / ".join(self.stderr_tail)
        return ("…" + text[-limit:] if len(text) > limit else text) or None

    @property
    def last_word(self) -> AssistantMessage | None:
        """The message whose stop reason the attempt reports: its final one,
        else the last one the agent sent (an unknown or non-terminal reason)."""
        tracker = self.tracker
        if tracker is None:
            return None
        return tracker.final or tracker.last_message

    def to_json(self) -> dict[str, Any]:
        tracker = self.tracker
        final = self.last_word
        return {
            "attempt": self.number,
            "pid": self.pid,
            "startedAt": iso(self.started_at),
            "endedAt": iso(self.ended_at) if self.ended_at is not None else None,
            "exitCode": self.exit.code if self.exit is not None else None,
            "exitSignal": self.exit.signal_name if self.exit is not None else None,
            "signalsSent": self.signals_sent,
            "forcedCleanup": bool(tracker and tracker.forced_cleanup),
            "stopReason": final.stop_reason if final is not None else None,
            "rawStopReason": final.raw_stop_reason if final is not None else None,
        }


def build_result(
    *,
    config: RunConfig,
    verdict: Verdict,
    attempts: Sequence[AttemptRecord],
    summary: RunSummary,
    dialect: str | None,
    started_at: float,
    ended_at: float,
    warnings: list[dict[str, Any]],
    artifacts: dict[str, str | None],
    artifact_errors: list[dict[str, Any]],
    steering: Steering,
    policy: StopPolicy,
    external: ExternalSteers | None = None,
    cost: dict[str, Any] | None = None,
) -> dict[str, Any]:
    # The last attempt that ran: a resume that could not even start has no answer.
    ran = [attempt for attempt in attempts if attempt.pid is not None]
    last = ran[-1] if ran else (attempts[-1] if attempts else None)
    final = last.tracker.final if last is not None and last.tracker is not None else None
    last_word = last.last_word if last is not None else None
    last_json = last.to_json() if last is not None else {}
    return {
        "schemaVersion": SCHEMA_VERSION,
        "runId": config.run_id,
        "label": config.label,
        "success": verdict.success,
        "outcome": str(verdict.outcome),
        "exitStatus": verdict.exit_status,
        "stopReason": last_word.stop_reason if last_word is not None else None,
        "rawStopReason": last_word.raw_stop_reason if last_word is not None else None,
        # only a terminal message has a final text, and an empty one is none
        "finalText": final.text or None if final is not None else None,
        "error": verdict.error.to_json() if verdict.error is not None else None,
        "exitCode": last_json.get("exitCode"),
        "exitSignal": last_json.get("exitSignal"),
        "forcedCleanup": last_json.get("forcedCleanup", False),
        "signalsSent": last_json.get("signalsSent", []),
        "pid": last_json.get("pid"),
        "startedAt": iso(started_at),
        "endedAt": iso(ended_at),
        "durationMs": round((ended_at - started_at) * 1000),
        "usage": usage_json(summary),
        "cost": cost,
        "model": summary.model,
        "sessionId": summary.session_id,
        "toolsUsed": summary.tools_used,
        "task": config.task,
        "command": list(config.command),
        "cwd": str(config.cwd),
        "dialect": dialect,
        "agent": program_name(config.command),
        "attempts": [attempt.to_json() for attempt in attempts],
        **steering.to_json(),
        **(external or ExternalSteers(0)).to_json(),
        **policy.to_json(),
        "warnings": warnings,
        "artifacts": artifacts,
        "artifactErrors": artifact_errors,
        "batch": dict(config.batch) if config.batch is not None else None,
    }


def usage_json(summary: RunSummary) -> dict[str, Any] | None:
    """The run's usage summed so far, as result.json (and status.json) give it."""
    usage = summary.usage
    return usage.to_json() if usage is not None else None


def progress_json(
    summary: RunSummary, steering: Steering, external: ExternalSteers
) -> dict[str, Any]:
    """What status.json shows of a run's progress: its usage so far and its
    steers so far, counted as result.json counts them (``steerCount``,
    ``externalSteerCount``)."""
    return {
        "usage": usage_json(summary),
        "steers": {"hook": steering.steer_count, "outside": external.delivered_count},
    }


def wrapper_killed_result(
    *,
    run_id: str,
    wrapper_pid: int,
    run_dir: Path,
    status: dict[str, Any],
    config: dict[str, Any] | None,
    signals_sent: list[dict[str, Any]],
    survivors: list[str],
    ended_at: float,
    result_path: Path,
    present: frozenset[str],
    cwd: str,
    exit_status: int = WRAPPER_KILLED_EXIT,
    who: str | None = None,
) -> dict[str, Any]:
    """result.json for a run whose wrapper died (``error.kind:
    wrapper_killed``), written by the guardian: what status.json and
    config.json knew, ``null`` for what only the wrapper knew. ``present``:
    which of ``RUN_FILES`` the run directory holds; ``signals_sent`` and
    ``survivors``: what the guardian's sweeps sent and could not end."""
    conf = config or {}
    started = _epoch(status.get("startedAt")) or ended_at
    known_attempt, known_pid = status.get("attempt"), status.get("pid")
    attempt = known_attempt if isinstance(known_attempt, int) else 1
    pid = known_pid if isinstance(known_pid, int) else None
    forced = bool(signals_sent)
    who = who or f"the wrapper (pid {wrapper_pid}) was killed"
    message = (
        f"{who} before it finished the run ({status.get('state')}, attempt {attempt}); "
        "what remained of the wrapper ended the run's processes and wrote this result"
    )
    warnings = [{"code": "wrapper_killed", "message": message}]
    if survivors:
        warnings.append(
            {
                "code": "leftover_processes",
                "message": "still running after the guardian's last SIGKILL: "
                + ", ".join(survivors),
            }
        )

    def artifact(name: str) -> str | None:
        return str(run_dir / name) if name in present else None

    dialect = conf.get("dialect")
    command = conf.get("command") or []
    attempts = []
    if attempt == 1:  # a later attempt's start is known only to the wrapper
        attempts.append(
            {
                "attempt": 1,
                "pid": pid,
                "startedAt": iso(started),
                "endedAt": None if survivors else iso(ended_at),
                "exitCode": None,
                "exitSignal": None,
                "signalsSent": signals_sent,
                "forcedCleanup": forced,
                "stopReason": None,
                "rawStopReason": None,
            }
        )
    return {
        "schemaVersion": SCHEMA_VERSION,
        "runId": run_id,
        "label": conf.get("label", status.get("label")),
        "success": False,
        "outcome": "aborted",
        "exitStatus": exit_status,
        "stopReason": None,
        "rawStopReason": None,
        "finalText": None,
        # apiStatus: no failed API call of the agent's is known here.
        "error": {"kind": "wrapper_killed", "message": message, "apiStatus": None},
        "exitCode": None,
        "exitSignal": None,
        "forcedCleanup": forced,
        "signalsSent": signals_sent,
        "pid": pid,
        "startedAt": iso(started),
        "endedAt": iso(ended_at),
        "durationMs": max(round((ended_at - started) * 1000), 0),
        "usage": None,
        "cost": None,
        "model": None,
        "sessionId": None,
        "toolsUsed": [],
        "task": conf.get("task"),
        "command": command,
        "cwd": conf.get("cwd") or cwd,
        "dialect": dialect if isinstance(dialect, str) and dialect != "auto" else None,
        "agent": program_name([str(arg) for arg in command]) if isinstance(command, list) else None,
        "attempts": attempts,
        "stopAllowedBy": None,
        "hookStopMessage": None,
        "steerCount": max(attempt - 1, 0),
        "maxSteers": conf.get("maxSteers", 0),
        "steers": [],
        "externalSteerCount": 0,
        "externalSteers": [],
        "externalSteersOmitted": 0,
        "onStop": conf.get("onStop", "allow"),
        "completionSignal": None,
        "escalations": [],
        "warnings": warnings,
        "artifacts": {
            "runDir": str(run_dir),
            "result": str(result_path),
            "status": str(run_dir / "status.json"),
            "events": artifact("events.jsonl"),
            "stdout": artifact("stdout.log"),
            "stderr": artifact("stderr.log"),
            "config": artifact("config.json"),
        },
        "artifactErrors": [],
        "batch": conf.get("batch") if isinstance(conf.get("batch"), dict) else None,
    }


def _epoch(stamp: object) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None
