"""What the HTML report shows, as values: the runs, the marks on their
bars, the batches; and how a value reads on the page (durations, costs,
times, and any text from a spec or an agent made visible and escaped).
Pure, and shared by the page (``html_report``) and its timeline
(``report_timeline``).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from datetime import UTC, datetime

#: Outcomes with a colour of their own; any other is drawn as ``other``.
OUTCOMES = ("ok", "error", "timeout", "aborted", "spawn_failed", "refused")


#: What a mark on a run's bar is, by kind, as the legend and the run's
#: section name it. ``steer`` is a Stop hook's, ``retry`` the wrapper's error
#: retry (a new attempt), ``agent_retry`` the agent's own retry of a failed
#: request (same attempt), ``outside`` a steer from outside the run
#: (``agent-wrapper steer``), ``signal`` a SIGTERM or SIGKILL the wrapper
#: sent (a forced cleanup, a timeout, an abort).
MARK_NAMES = {
    "steer": "Stop-hook steer",
    "retry": "error retry (new attempt)",
    "agent_retry": "the agent's own retry",
    "outside": "steer from outside",
    "abort": "abort",
    "signal": "SIGTERM / SIGKILL sent",
    "escalation": "escalation",
}


@dataclass(frozen=True, slots=True)
class Mark:
    """A moment of a run shown on its timeline bar: one of ``MARK_NAMES``;
    ``text`` is what its hover says."""

    at: float
    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class ReportRun:
    """One run as the page shows it; None where nothing says."""

    label: str
    line: int | None
    run_dir: str
    outcome: str
    passed: bool
    stop_reason: str | None = None
    duration_ms: int | None = None
    started: float | None = None
    ended: float | None = None
    tokens: int | None = None
    #: What it cost (None: unknown, never 0) and where that figure comes
    #: from (result.json's ``cost.source``).
    cost_usd: float | None = None
    cost_source: str | None = None
    #: Stop-hook steers (error retries included: they are steers too).
    steers: int | None = None
    max_steers: int | None = None
    hit_steer_cap: bool = False
    #: Steers from outside that reached the agent (delivered or sent).
    outside_steers: int | None = None
    #: Steers from outside that were refused (never reached the agent): not
    #: on the timeline, listed in the run's section, with why.
    refused_steers: tuple[Mark, ...] = ()
    #: The strongest signal the wrapper had to send to end the agent
    #: (``SIGKILL`` over ``SIGTERM``), and why each was sent.
    cleanup: str | None = None
    cleanup_reasons: tuple[str, ...] = ()
    error_kind: str | None = None
    #: The tools it used, in first-use order.
    tools: tuple[str, ...] = ()
    #: How many calls of each tool its events.jsonl holds; None when unread.
    tool_calls: tuple[tuple[str, int], ...] | None = None
    warnings: tuple[str, ...] = ()
    error: str | None = None
    final_text: str | None = None
    stderr_tail: str | None = None
    marks: tuple[Mark, ...] = ()
    shard: str | None = None
    reused: bool = False
    expect: str | None = None
    #: What could not be read for this run, one sentence each.
    missing: tuple[str, ...] = ()
    #: When the run directory holds another run than batch.json names: why,
    #: in a sentence (the run is then not counted as passed).
    mismatch: str | None = None


@dataclass(frozen=True, slots=True)
class SpecInfo:
    """The spec a batch was run from, as the report names it."""

    path: str | None
    sha256: str | None
    lines: int | None


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the page shows."""

    runs: tuple[ReportRun, ...]
    started: float | None = None
    ended: float | None = None
    spec: SpecInfo | None = None
    #: The shards read, as ``I/N``.
    shards: tuple[str, ...] = ()
    shard_count: int | None = None
    #: The batches' own warnings.
    warnings: tuple[str, ...] = ()
    #: Inputs that could not be read, one sentence each.
    problems: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    @property
    def span(self) -> tuple[float, float] | None:
        """From the first start to the last end of the batches and their runs:
        the timeline's span and the header's wall time."""
        drawn = [run for run in self.runs if timed(run)]
        starts = [run.started for run in drawn if run.started is not None]
        ends = [run.ended for run in drawn if run.ended is not None]
        starts += [] if self.started is None else [self.started]
        ends += [] if self.ended is None else [self.ended]
        if not starts or not ends:
            return None
        return min(starts), max(starts + ends)

    @property
    def rerun_at(self) -> float | None:
        """When the batch began that reused runs of an earlier one, if any
        run it shows started before that."""
        if self.started is None:
            return None
        earlier = [
            run
            for run in self.runs
            if run.reused and run.started is not None and run.started < self.started
        ]
        return self.started if earlier else None


def timed(run: ReportRun) -> bool:
    """Whether the run has a start and an end to draw."""
    return run.started is not None and run.ended is not None and run.ended >= run.started


#: How signals rank in the cleanup column (and sort there).
SIGNAL_RANK = {"SIGTERM": 1, "SIGKILL": 2}

_VISIBLE = {code: chr(0x2400 + code) for code in range(0x20) if chr(code) not in "\t\n"}
_VISIBLE[0x7F] = "\u2421"
for _code in [*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F]:
    # C1 controls and the bidirectional overrides that could make a text
    # read as something else than it is.
    _VISIBLE[_code] = "\ufffd"
for _code in range(0xD800, 0xE000):
    _VISIBLE[_code] = "\ufffd"


def visible(text: str) -> str:
    """``text`` with every control character (but tab and newline) replaced by
    a symbol that shows it was there, and what cannot be encoded as U+FFFD."""
    return text.translate(_VISIBLE)


def html_text(text: object) -> str:
    """Any value as HTML text or attribute value: visible, then escaped."""
    return html.escape(visible(str(text)), quote=True)


def shorten(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def outcome_class(outcome: str) -> str:
    """The style class that colours an outcome."""
    return f"o-{outcome}" if outcome in OUTCOMES else "o-other"


def duration_text(ms: float | None) -> str:
    """A duration for a person: ``0.4 s``, ``12.3 s``, ``4 min 05 s``, ``1 h 02 min``."""
    if ms is None or not math.isfinite(ms):
        return "\u2014"
    seconds = max(ms, 0) / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def count_text(n: int | None) -> str:
    """A count with thousands separators; a dash when unknown."""
    return "\u2014" if n is None else f"{n:,}"


def stamp(epoch: float | None) -> str:
    """A moment as UTC, to the second; a dash when unknown."""
    if epoch is None:
        return "\u2014"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def outcome_order(outcome: str) -> tuple[int, str]:
    """Outcomes in the order of ``OUTCOMES``, any other after them."""
    return (OUTCOMES.index(outcome) if outcome in OUTCOMES else len(OUTCOMES), outcome)
