"""Batches written to disk without running anything: batch.json, and for each
run a directory with its result.json and stderr.log, as a batch leaves them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: 2026-01-05 09:00:00 UTC: every synthetic batch starts there.
ORIGIN = 1767603600.0


def stamp(epoch: float) -> str:
    return (
        datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


@dataclass
class FakeRun:
    """One run of a synthetic batch; seconds are from the batch's start."""

    label: str | None
    outcome: str = "ok"
    start: float = 0.0
    seconds: float = 10.0
    stop_reason: str | None = "stop"
    tokens: int | None = 1000
    #: usage.costUsd (None: the agent reported none).
    cost: float | None = None
    final_text: str | None = "Done."
    error: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    steers: list[tuple[float, str]] = field(default_factory=list)
    max_steers: int = 3
    stop_allowed_by: str | None = "no_handlers"
    escalations: list[tuple[float, str]] = field(default_factory=list)
    #: The wrapper's error retries (Stop-hook steers of ``retryOnError``), at.
    retries: list[float] = field(default_factory=list)
    #: Steers from outside: (at, outcome) with outcome delivered, sent or refused.
    outside: list[tuple[float, str]] = field(default_factory=list)
    #: Signals the wrapper sent to end the agent: (at, signal, reason).
    signals: list[tuple[float, str, str]] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    #: The tool of each tool call, written as events.jsonl's tool_start lines.
    calls: list[str] | None = None
    stderr: str | None = None
    #: Extra keys of the run's batch.json entry (passed, reused, expect, shard).
    entry: dict[str, Any] = field(default_factory=dict)
    #: Leave no result.json, or this text instead of one.
    result_text: str | None = None
    no_result: bool = False
    no_dir: bool = False


RETRY_REASON = (
    "The previous approach hit an error. Try a different approach to accomplish the task."
)


def result_json(run: FakeRun, run_dir: Path) -> dict[str, Any]:
    start = ORIGIN + run.start
    usage = None
    if run.tokens is not None:
        usage = {
            "input": run.tokens // 2,
            "output": run.tokens - run.tokens // 2,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": run.tokens,
            "costUsd": run.cost,
        }
    steers = [
        {"attempt": 0, "handler": "gate", "reason": reason, "at": stamp(start + at)}
        for at, reason in run.steers
    ] + [
        {"attempt": 0, "handler": "retryOnError", "reason": RETRY_REASON, "at": stamp(start + at)}
        for at in run.retries
    ]
    return {
        "schemaVersion": 1,
        # The id batch.json gives the run (the report checks they are one run).
        "runId": f"run-{run_dir.name}-{run_dir.parent.name}",
        "label": run.label,
        "success": run.outcome == "ok",
        "outcome": run.outcome,
        "exitStatus": 0 if run.outcome == "ok" else 1,
        "stopReason": run.stop_reason,
        "finalText": run.final_text,
        "error": run.error,
        "startedAt": stamp(start),
        "endedAt": stamp(start + run.seconds),
        "durationMs": round(run.seconds * 1000),
        "usage": usage,
        "toolsUsed": run.tools,
        "warnings": [{"code": "test", "message": m} for m in run.warnings],
        "steerCount": len(run.steers) + len(run.retries),
        "maxSteers": run.max_steers,
        "stopAllowedBy": run.stop_allowed_by,
        "steers": [
            {**steer, "attempt": n + 2}
            for n, steer in enumerate(sorted(steers, key=lambda steer: str(steer["at"])))
        ],
        "externalSteerCount": sum(outcome != "refused" for _, outcome in run.outside),
        "externalSteers": [
            {
                "id": f"s{n + 1}",
                "textLength": 12,
                "when": "now",
                "outcome": outcome,
                "how": None if outcome == "refused" else "resume",
                "why": "the run ended first" if outcome == "refused" else None,
                "attempt": None,
                "requestedAt": stamp(start + at),
                "endedAt": stamp(start + at),
            }
            for n, (at, outcome) in enumerate(run.outside)
        ],
        "forcedCleanup": bool(run.signals),
        "attempts": [
            {
                "attempt": 1,
                "pid": 4242,
                "startedAt": stamp(start),
                "endedAt": stamp(start + run.seconds),
                "exitCode": None,
                "exitSignal": run.signals[-1][1] if run.signals else None,
                "signalsSent": [
                    {"signal": sig, "at": stamp(start + at), "reason": reason}
                    for at, sig, reason in run.signals
                ],
                "forcedCleanup": bool(run.signals),
                "stopReason": run.stop_reason,
                "rawStopReason": run.stop_reason,
            }
        ],
        "escalations": [
            {
                "id": f"e{n}",
                "at": stamp(start + at),
                "question": question,
                "notified": [],
                "answer": None,
                "text": None,
                "answeredAt": None,
            }
            for n, (at, question) in enumerate(run.escalations)
        ],
    }


def events_jsonl(calls: list[str]) -> str:
    """An events.jsonl with a tool_start and a tool_end line for each call."""
    lines = [{"type": "session", "seq": 1, "ts": stamp(ORIGIN), "attempt": 1, "source": "agent"}]
    for n, tool in enumerate(calls):
        for kind in ("tool_start", "tool_end"):
            lines.append(
                {"type": kind, "seq": len(lines) + 1, "ts": stamp(ORIGIN), "attempt": 1,
                 "source": "agent", "tool": tool, "toolCallId": f"c{n}", "summary": "x"}
            )  # fmt: skip
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)


def write_batch(
    folder: Path, runs: list[FakeRun], *, first_line: int = 1, step: int = 1, **top: Any
) -> Path:
    """A batch's runs directory holding ``runs``; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    results = []
    for n, run in enumerate(runs):
        line = first_line + n * step
        run_dir = folder / f"r{line:05d}"
        if not run.no_dir:
            run_dir.mkdir()
            if run.result_text is not None:
                (run_dir / "result.json").write_text(run.result_text)
            elif not run.no_result:
                (run_dir / "result.json").write_text(json.dumps(result_json(run, run_dir)))
            if run.stderr is not None:
                (run_dir / "stderr.log").write_text(run.stderr)
            if run.calls is not None:
                (run_dir / "events.jsonl").write_text(events_jsonl(run.calls))
        results.append(
            {
                "label": run.label,
                "line": line,
                "runId": f"run-{run_dir.name}-{folder.name}",
                "runDir": str(run_dir),
                "outcome": run.outcome,
                "success": run.outcome == "ok",
                "exitStatus": 0 if run.outcome == "ok" else 1,
                "stopReason": run.stop_reason,
                "durationMs": round(run.seconds * 1000),
                "usage": None,
                "error": run.error,
                **run.entry,
            }
        )
    ended = max((r.start + r.seconds for r in runs), default=0.0)
    outcomes: dict[str, int] = {}
    for run in runs:
        outcomes[run.outcome] = outcomes.get(run.outcome, 0) + 1
    batch = {
        "schemaVersion": 1,
        "startedAt": stamp(ORIGIN),
        "endedAt": stamp(ORIGIN + ended),
        "exitStatus": 0 if all(r.outcome == "ok" for r in runs) else 1,
        "success": bool(runs) and all(r.outcome == "ok" for r in runs),
        "runs": len(runs),
        "outcomes": outcomes,
        "results": results,
        "warnings": [],
        **top,
    }
    (folder / "batch.json").write_text(json.dumps(batch))
    return folder


def thousand_runs(jobs: int = 8) -> list[FakeRun]:
    """1,000 runs as a batch with ``jobs`` at once would run them: each starts
    when one of the ``jobs`` places is free; every 13th fails, every 31st times out."""
    free = [0.0] * jobs
    runs = []
    for n in range(1000):
        place = min(range(jobs), key=lambda k: free[k])
        seconds = 20.0 + (n * 37) % 100
        outcome = "timeout" if n % 31 == 30 else "error" if n % 13 == 12 else "ok"
        runs.append(
            FakeRun(
                label=f"task-{n:04d}",
                outcome=outcome,
                start=free[place],
                seconds=seconds,
                tokens=5000 + n,
                final_text=f"Answer {n}.",
                error=None if outcome == "ok" else {"kind": "agent_error", "message": f"n{n}"},
            )
        )
        free[place] += seconds + 0.5
    return runs
