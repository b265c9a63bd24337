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
from typing import Any

from wrapper.core.completion import CompletionTracker
from wrapper.core.config import SCHEMA_VERSION, RunConfig
from wrapper.core.events import AssistantMessage
from wrapper.core.outcome import ProcessExit, Verdict
from wrapper.core.policy import StopPolicy
from wrapper.core.registry import program_name
from wrapper.core.steering import Steering
from wrapper.core.summary import RunSummary
from wrapper.core.timefmt import iso

#: How many of the agent's last stderr lines a failure's message may quote.
STDERR_TAIL_LINES = 3


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
) -> dict[str, Any]:
    # The last attempt that ran: a resume that could not even start has no answer.
    ran = [attempt for attempt in attempts if attempt.pid is not None]
    last = ran[-1] if ran else (attempts[-1] if attempts else None)
    final = last.tracker.final if last is not None and last.tracker is not None else None
    last_word = last.last_word if last is not None else None
    last_json = last.to_json() if last is not None else {}
    usage = summary.usage
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
        "usage": usage.to_json() if usage is not None else None,
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
        **policy.to_json(),
        "warnings": warnings,
        "artifacts": artifacts,
        "artifactErrors": artifact_errors,
    }
