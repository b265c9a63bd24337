"""One HTML page a person looks at: what a batch (or several shards of one) came to.

Pure: ``build_html`` takes the runs as ``report_input`` loaded them and
returns the page as a string. The page is one self-contained file: its
style and its small script are inline and allowed by their hashes in a
Content-Security-Policy that forbids loading anything else, so it works
from a ``file://`` URL and as a CI artifact, and nothing an agent wrote
can run in it. Every text from a spec or an agent goes through ``_text``:
escaped, with control characters shown as visible symbols.

The script only sorts and filters the table; without it the page shows
everything in spec order.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from wrapper.fleet.report_assets import SCRIPT, STYLE

#: Runs up to this many get a timeline row each, with their label; more are
#: packed into lanes (one per run going on at once), labelled on hover.
TIMELINE_ROWS_MAX = 60
#: Per-run sections open by themselves for a failed run when the batch is
#: no larger than this; a person scrolling 1,000 runs wants them closed.
OPEN_FAILED_MAX = 50
#: The timeline's drawing width (SVG user units; the page scales it).
TIMELINE_WIDTH = 1200
#: The height of a timeline row and the room between rows, in CSS pixels:
#: a bar as tall as a line of the table's text, its marks legible on it.
TIMELINE_ROW = 18
TIMELINE_GAP = 4
#: The timeline's axis row above the bars, and the room for the label of
#: the re-run's start below them.
TIMELINE_TOP = 22
TIMELINE_FOOT = 16
#: In lanes, the height the lanes may take together, and each one's bounds.
TIMELINE_LANES_HEIGHT = 600
LANE_MAX, LANE_MIN = 14.0, 2.0
#: How much of a mark's text its hover holds (the whole text is in the run's section).
MARK_TEXT_CHARS = 200

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
    cost_usd: float | None = None
    #: Stop-hook steers (error retries included: they are steers too).
    steers: int | None = None
    max_steers: int | None = None
    hit_steer_cap: bool = False
    #: Steers from outside that reached the agent (delivered or sent).
    outside_steers: int | None = None
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
        timed = [run for run in self.runs if _timed(run)]
        starts = [run.started for run in timed if run.started is not None]
        ends = [run.ended for run in timed if run.ended is not None]
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


def _timed(run: ReportRun) -> bool:
    return run.started is not None and run.ended is not None and run.ended >= run.started


def _source_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


#: Nothing may be loaded; only the page's own style and script, by their hashes.
CSP = (
    f"default-src 'none'; style-src {_source_hash(STYLE)}; script-src {_source_hash(SCRIPT)}; "
    "base-uri 'none'; form-action 'none'"
)

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


def _text(text: object) -> str:
    """Any value as HTML text or attribute value: visible, then escaped."""
    return html.escape(visible(str(text)), quote=True)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def outcome_class(outcome: str) -> str:
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


def _count(n: int | None) -> str:
    return "\u2014" if n is None else f"{n:,}"


def cost_text(usd: float | None) -> str:
    """A cost for a person: ``$1.20``, ``< $0.01`` for less than a cent (a
    run that cost something never reads as nothing), ``$0`` for nothing
    at all, ``unknown`` where the agent reported none (never ``$0.00``)."""
    if usd is None or not math.isfinite(usd):
        return "unknown"
    if usd <= 0:
        return "$0"
    if usd < 0.005:
        return "< $0.01"
    return f"${usd:,.2f}"


def cost_sum_text(costs: Sequence[float | None]) -> str:
    """The sum of the known costs, the unknown ones counted apart:
    ``$1.20 + 2 unknown``; ``unknown`` when none is known."""
    known = [c for c in costs if c is not None and math.isfinite(c)]
    unknown = len(costs) - len(known)
    if not known:
        return "unknown"
    text = cost_text(sum(known))
    return f"{text} + {unknown:,} unknown" if unknown else text


def _stamp(epoch: float | None) -> str:
    if epoch is None:
        return "\u2014"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def lanes(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """A lane for each interval, so that no two in a lane overlap; as few lanes
    as runs went on at once (first fit, in order of start)."""
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], intervals[i][1], i))
    ends: list[float] = []
    chosen = [0] * len(intervals)
    for i in order:
        start, end = intervals[i]
        for lane, free_at in enumerate(ends):
            if free_at <= start:
                ends[lane] = end
                chosen[i] = lane
                break
        else:
            chosen[i] = len(ends)
            ends.append(end)
    return chosen


def _outcome_order(outcome: str) -> tuple[int, str]:
    return (OUTCOMES.index(outcome) if outcome in OUTCOMES else len(OUTCOMES), outcome)


def build_html(data: ReportData) -> str:
    """The whole page."""
    runs = data.runs
    failed = sum(not run.passed for run in runs)
    title = (
        f"agent-wrapper report: {len(runs):,} run{'s' if len(runs) != 1 else ''}, "
        f"{failed:,} not passed"
    )
    parts = [
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{_text(title)}</title><style>{STYLE}</style></head><body>",
        _header(data, title),
        _timeline(data),
        _table(runs),
        _sections(runs),
        f"<script>{SCRIPT}</script></body></html>\n",
    ]
    return "\n".join(part for part in parts if part)


def _header(data: ReportData, title: str) -> str:
    runs = data.runs
    out = [f'<header><h1>{_text(title)}</h1><ul class="meta">']
    if data.spec is not None:
        spec = data.spec
        bits = [_text(spec.path or "(unnamed)")]
        if spec.sha256:
            bits.append(
                f'sha256 <code title="{_text(spec.sha256)}">{_text(spec.sha256[:12])}</code>'
            )
        if spec.lines is not None:
            bits.append(f"{_count(spec.lines)} lines")
        out.append(f"<li><b>spec</b> {', '.join(bits)}</li>")
    if data.shards:
        shards = ", ".join(_text(s) for s in data.shards)
        text = f"<li><b>shards</b> {shards}"
        if data.shard_count is not None:
            seen = {s.split("/", 1)[0] for s in data.shards}
            every = {str(i) for i in range(1, data.shard_count + 1)}
            absent = [f"{i}/{data.shard_count}" for i in sorted(every - seen, key=int)]
            # Shards count from 1 (``--shard I/N``); anything else is shown as given.
            if absent and seen <= every:
                text += f' <span class="no">missing: {_text(", ".join(absent))}</span>'
        out.append(text + "</li>")
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.outcome] = counts.get(run.outcome, 0) + 1
    chips = " ".join(
        f'<span class="chip {outcome_class(o)}">{_text(o)} {n:,}</span>'
        for o, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )
    out.append(f"<li><b>runs</b> {len(runs):,} {chips}</li>")
    passed = sum(run.passed for run in runs)
    mark = "" if passed == len(runs) else ' class="no"'
    out.append(f"<li><b>passed</b> <span{mark}>{passed:,} of {len(runs):,}</span></li>")
    mismatched = sum(run.mismatch is not None for run in runs)
    if mismatched:
        out.append(
            f'<li><b>not the same run</b> <span class="no">{mismatched:,}</span> '
            '<span class="muted">(the run directory holds another run than batch.json '
            "names)</span></li>"
        )
    span = data.span
    if span is not None:
        wall = duration_text((span[1] - span[0]) * 1000)
        out.append(f"<li><b>wall time</b> {wall} ({_stamp(span[0])} to {_stamp(span[1])})</li>")
    reused = sum(run.reused for run in runs)
    if reused:
        text = f"{reused:,} run{'s' if reused != 1 else ''} reused from an earlier batch"
        if data.rerun_at is not None and data.ended is not None:
            took = duration_text((data.ended - data.rerun_at) * 1000)
            text += (
                f"; this batch ran the others in {took} from {_stamp(data.rerun_at)} "
                "(the dashed line on the timeline)"
            )
        out.append(f"<li><b>reused</b> {text}</li>")
    known = [run.tokens for run in runs if run.tokens is not None]
    tokens = f"{sum(known):,}" if known else "\u2014"
    if known and len(known) < len(runs):
        tokens += f" ({len(runs) - len(known):,} runs unknown)"
    out.append(f"<li><b>tokens</b> {tokens}</li>")
    if runs:
        out.append(f"<li><b>cost</b> {cost_sum_text([run.cost_usd for run in runs])}</li>")
    outside = sum(run.outside_steers or 0 for run in runs)
    if outside:
        out.append(f"<li><b>steers from outside</b> {outside:,}</li>")
    capped = sum(run.hit_steer_cap for run in runs)
    if capped:
        out.append(f'<li><b>steer cap</b> <span class="cap">{capped:,} hit it</span></li>')
    out.append("</ul>")
    if data.sources:
        read = ", ".join(f"<code>{_text(s)}</code>" for s in data.sources)
        out.append(f'<p class="muted">read from {read}</p>')
    if data.problems:
        items = "".join(f"<li>{_text(p)}</li>" for p in data.problems)
        out.append(
            f'<div class="problems" id="problems"><b>What could not be read</b>'
            f"<ul>{items}</ul></div>"
        )
    if data.warnings:
        items = "".join(f"<li>{_text(w)}</li>" for w in data.warnings)
        out.append(f'<div class="warn"><b>The batch\'s warnings</b><ul>{items}</ul></div>')
    out.append("</header>")
    return "".join(out)


def _timeline(data: ReportData) -> str:
    """Each run's bar from start to end, coloured by outcome, its marks on
    it; the labels in HTML beside the drawing (cut with an ellipsis, whole
    on hover), the drawing in percentages of its width, so that the page
    reads at any width and nothing in it is scaled down."""
    runs = data.runs
    timed = [(i, run) for i, run in enumerate(runs) if _timed(run)]
    out = ['<section id="timeline"><h2>Timeline</h2>']
    untimed = len(runs) - len(timed)
    span = data.span
    if not timed or span is None:
        out.append('<p class="muted">No run has a start and an end to show.</p></section>')
        return "".join(out)
    origin = span[0]
    length = max(span[1] - origin, 1e-3)

    def x(at: float) -> float:
        return min(max((at - origin) / length * 100, 0.0), 100.0)

    by_rows = len(timed) <= TIMELINE_ROWS_MAX
    if by_rows:
        slot = list(range(len(timed)))
        count, height, gap = len(timed), float(TIMELINE_ROW), float(TIMELINE_GAP)
    else:
        slot = lanes([(run.started or 0, run.ended or 0) for _, run in timed])
        count = max(slot) + 1
        height = max(LANE_MIN, min(LANE_MAX, TIMELINE_LANES_HEIGHT / count))
        gap = 1.0 if height >= 4 else 0.0
    rerun = data.rerun_at
    top = float(TIMELINE_TOP)
    total = top + count * (height + gap) + (TIMELINE_FOOT if rerun is not None else 4)
    if not by_rows:
        out.append(f'<p class="muted">{count:,} lanes: runs going on at once</p>')
    out.append(f'<div class="tl{"" if by_rows else " lanes"}">')
    if by_rows:
        out.append('<div class="tl-labels"><div class="tl-head"></div>')
        out.extend(
            f'<div class="tl-label" title="{_text(run.label)}">{_text(run.label)}</div>'
            for _, run in timed
        )
        out.append("</div>")
    out.append(
        f'<svg class="tl-bars" height="{total:.0f}" role="img" '
        'aria-label="when each run started and ended, coloured by outcome, and what '
        'supervision did on the way">'
    )
    for k in range(5):
        at = origin + length * k / 4
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        out.append(
            f'<line class="axis" x1="{x(at):.3f}%" x2="{x(at):.3f}%" y1="16" y2="{total:.0f}"/>'
            f'<text x="{x(at):.3f}%" y="12" text-anchor="{anchor}">'
            f"{duration_text((at - origin) * 1000)}</text>"
        )
    if rerun is not None:
        px = x(rerun)
        anchor = "end" if px > 50 else "start"
        out.append(
            f'<line class="rerun" x1="{px:.3f}%" x2="{px:.3f}%" y1="16" y2="{total:.0f}"/>'
            f'<text class="rerun" x="{px:.3f}%" y="{total - 3:.0f}" text-anchor="{anchor}">'
            f" re-run began {_stamp(rerun)} </text>"
        )
    for (i, run), s in zip(timed, slot, strict=True):
        y = top + s * (height + gap)
        start, end = run.started or 0, run.ended or 0
        tip = f"{run.label}: {run.outcome}, {duration_text((end - start) * 1000)}"
        if run.reused:
            tip += " (reused from an earlier batch)"
        bar = outcome_class(run.outcome) + (" reused" if run.reused else "")
        out.append(
            f'<a href="#run-{i}"><rect class="{bar}" x="{x(start):.3f}%" y="{y:.1f}" '
            f'width="{max(x(end) - x(start), 0.15):.3f}%" height="{height:.1f}">'
            f"<title>{_text(tip)}</title></rect></a>"
        )
        for mark in run.marks:
            kind = mark.kind if mark.kind in MARK_NAMES else "steer"
            title = f"{MARK_NAMES[kind]}: {_short(mark.text, MARK_TEXT_CHARS)}"
            out.append(
                f'<svg class="m m-{kind}" data-i="{i}" x="{x(mark.at):.3f}%" '
                f'y="{y:.1f}" width="1" height="1" overflow="visible"><title>{_text(title)}</title>'
                f"{_mark_shape(mark.kind, height)}</svg>"
            )
    out.append("</svg></div>")
    present = sorted({run.outcome for _, run in timed}, key=_outcome_order)
    legend = " ".join(f'<span class="chip {outcome_class(o)}">{_text(o)}</span>' for o in present)
    kinds = {mark.kind for _, run in timed for mark in run.marks}
    for kind, name in MARK_NAMES.items():
        if kind in kinds:
            legend += (
                f' <span class="key"><svg class="m m-{kind} sample" width="14" height="14">'
                f'<svg x="7" y="1" width="1" height="1" overflow="visible">'
                f"{_mark_shape(kind, 12)}</svg></svg> {_text(name)}</span>"
            )
    if any(run.reused for _, run in timed):
        legend += " <span>faded: reused from an earlier batch</span>"
    out.append(f'<p class="legend muted">{legend}</p>')
    if untimed:
        out.append(
            f'<p class="muted">{untimed:,} run{"s" if untimed != 1 else ""} without a start and '
            "an end (no readable result.json) not on the timeline.</p>"
        )
    out.append("</section>")
    return "".join(out)


def _mark_shape(kind: str, height: float) -> str:
    """A mark's shape, drawn about its moment (x 0) on a bar ``height`` tall
    whose top is y 0: a tick for a steer or an escalation, a diamond for a
    steer from outside, a disc for a retry, a square for an abort, a
    triangle for a signal. Each has a white edge: it shows on any bar."""
    h = height
    r = max(min(h / 2, 5.0), 1.5)
    mid = h / 2
    kind = kind if kind in MARK_NAMES else "steer"
    if kind in ("steer", "escalation"):
        return f'<rect x="-1.5" y="0" width="3" height="{h:.1f}"/>'
    if kind == "outside":
        return (
            f'<polygon points="0,{mid - r - 1:.1f} {r + 1:.1f},{mid:.1f} '
            f'0,{mid + r + 1:.1f} {-r - 1:.1f},{mid:.1f}"/>'
        )
    if kind in ("retry", "agent_retry"):
        return f'<circle cx="0" cy="{mid:.1f}" r="{r:.1f}"/>'
    if kind == "abort":
        return f'<rect x="{-r:.1f}" y="{mid - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}"/>'
    return f'<polygon points="{-r - 1:.1f},0 {r + 1:.1f},0 0,{h:.1f}"/>'


#: The table's columns, and what a heading's hover says of it.
COLUMNS = (
    ("label", ""),
    ("outcome", ""),
    ("passed", ""),
    ("error", "the error's kind (its message on hover)"),
    ("stop reason", "the agent's last stop reason"),
    ("duration", ""),
    ("tokens", ""),
    ("cost", "usage.costUsd as the agent reported it; unknown where it reported none"),
    ("steers", "by Stop hooks (error retries included) + from outside"),
    ("cleanup", "the strongest signal the wrapper sent to end the agent (why on hover)"),
    ("tools", "tool calls (each tool's count on hover)"),
    ("warnings", ""),
)
#: How signals rank in the cleanup column (and sort there).
SIGNAL_RANK = {"SIGTERM": 1, "SIGKILL": 2}


def _table(runs: Sequence[ReportRun]) -> str:
    out = ['<section><h2>Runs</h2><div class="wide"><table id="runs"><thead><tr>']
    out.extend(
        f'<th title="{_text(tip)}">{name}</th>' if tip else f"<th>{name}</th>"
        for name, tip in COLUMNS
    )
    out.append("</tr></thead><tbody>")
    for i, run in enumerate(runs):
        row = ' class="failed"' if not run.passed else ""
        badges = ""
        if run.reused:
            badges += ' <span class="muted">(reused)</span>'
        if run.shard:
            badges += f' <span class="muted">shard {_text(run.shard)}</span>'
        passed = "yes" if run.passed else '<span class="no">no</span>'
        if run.mismatch is not None:
            passed = f'<span class="no" title="{_text(run.mismatch)}">not the same run</span>'
        error = ""
        if run.error_kind is not None or run.error is not None:
            error = (
                f'<span class="no" title="{_text(run.error or "")}">'
                f"{_breakable(run.error_kind or 'error')}</span>"
            )
        cells = [
            f'<td class="label"><div class="cut" title="{_text(run.label)}">'
            f'<a href="#run-{i}">{_text(run.label)}</a>{badges}</div></td>',
            f'<td><span class="chip {outcome_class(run.outcome)}">{_text(run.outcome)}</span></td>',
            f"<td>{passed}</td>",
            f"<td>{error}</td>",
            f"<td>{_text(run.stop_reason or '')}</td>",
            _number(run.duration_ms, duration_text(run.duration_ms)),
            _number(run.tokens, _count(run.tokens)),
            _number(run.cost_usd, cost_text(run.cost_usd)),
            _steers_cell(run),
            _number(
                SIGNAL_RANK.get(run.cleanup or "", 0) if run.cleanup else None,
                _text(run.cleanup or ""),
                title="; ".join(run.cleanup_reasons),
            ),
            _tools_cell(run),
            _number(len(run.warnings), str(len(run.warnings))),
        ]
        out.append(f'<tr data-i="{i}"{row}>{"".join(cells)}</tr>')
    out.append("</tbody></table></div>")
    if not runs:
        out.append('<p class="muted">No runs.</p>')
    out.append("</section>")
    return "".join(out)


def _breakable(name: str) -> str:
    """A name of joined words (``abort_requested``) that may wrap after each
    ``_``, where it still reads, and nowhere else."""
    return "_<wbr>".join(_text(part) for part in name.split("_"))


def _steers_cell(run: ReportRun) -> str:
    """Stop-hook steers, ``+`` those from outside when there were any."""
    shown = _count(run.steers)
    if run.hit_steer_cap:
        shown = (
            f'<span class="cap" title="hit the steer cap">'
            f"{shown}/{_count(run.max_steers)} cap</span>"
        )
    outside = run.outside_steers or 0
    if outside:
        shown += f" + {outside:,}"
    retries = sum(mark.kind == "retry" for mark in run.marks)
    tip = f"{_count(run.steers)} by Stop hooks"
    if retries:
        tip += f" ({retries:,} of them error retries)"
    tip += f", {outside:,} from outside"
    total = None if run.steers is None and not outside else (run.steers or 0) + outside
    return _number(total, shown, title=tip)


def _tools_text(run: ReportRun) -> str | None:
    """Each tool and its calls (from the events), else the tools used."""
    if run.tool_calls:
        return ", ".join(f"{name} \u00d7{count:,}" for name, count in run.tool_calls)
    return ", ".join(run.tools) or None


def _tools_cell(run: ReportRun) -> str:
    calls = None if run.tool_calls is None else sum(count for _, count in run.tool_calls)
    return _number(calls, _count(calls), title=_tools_text(run) or "")


def _number(value: float | None, shown: str, *, title: str = "") -> str:
    key = "-1" if value is None else f"{value}"
    tip = f' title="{_text(title)}"' if title else ""
    return f'<td class="n" data-v="{key}"{tip}>{shown}</td>'


def _sections(runs: Sequence[ReportRun]) -> str:
    if not runs:
        return ""
    out = ["<section><h2>Each run</h2>"]
    open_failed = len(runs) <= OPEN_FAILED_MAX
    for i, run in enumerate(runs):
        is_open = " open" if open_failed and not run.passed else ""
        out.append(
            f'<details id="run-{i}"{is_open}><summary>'
            f'<span class="chip {outcome_class(run.outcome)}">'
            f'{_text(run.outcome)}</span> <b class="cut" title="{_text(run.label)}">'
            f"{_text(run.label)}</b>"
            f' <span class="muted">{duration_text(run.duration_ms)}</span></summary><dl>'
        )
        fields: list[tuple[str, str | None]] = [
            ("line", None if run.line is None else str(run.line)),
            ("run directory", run.run_dir),
            ("shard", run.shard),
            ("stop reason", run.stop_reason),
            ("error", run.error),
            ("started", _stamp(run.started) if run.started is not None else None),
            ("ended", _stamp(run.ended) if run.ended is not None else None),
            ("tokens", None if run.tokens is None else f"{run.tokens:,}"),
            ("cost", cost_text(run.cost_usd) if run.cost_usd is None else f"${run.cost_usd:,.4f}"),
            (
                "steers",
                None if run.steers is None else f"{run.steers} of at most {_count(run.max_steers)}",
            ),
            ("steers from outside", None if not run.outside_steers else str(run.outside_steers)),
            ("tools", _tools_text(run)),
            ("expected", run.expect),
        ]
        for name, value in fields:
            if value is not None:
                out.append(f"<dt>{name}</dt><dd>{_text(value)}</dd>")
        for mark in run.marks:
            name = MARK_NAMES.get(mark.kind, mark.kind)
            out.append(f"<dt>{_text(name)}</dt><dd>{_stamp(mark.at)}: {_text(mark.text)}</dd>")
        out.append("</dl>")
        if run.mismatch is not None:
            out.append(
                f'<div class="problems"><b>Not the same run</b><p>{_text(run.mismatch)}</p></div>'
            )
        if run.missing:
            items = "".join(f"<li>{_text(m)}</li>" for m in run.missing)
            out.append(f'<div class="problems"><b>Not readable</b><ul>{items}</ul></div>')
        if run.warnings:
            items = "".join(f"<li>{_text(w)}</li>" for w in run.warnings)
            out.append(f'<div class="warn"><b>Warnings</b><ul>{items}</ul></div>')
        if run.final_text:
            out.append(f"<b>Final text</b><pre>{_text(run.final_text)}</pre>")
        if run.stderr_tail:
            out.append(f"<b>End of stderr</b><pre>{_text(run.stderr_tail)}</pre>")
        out.append("</details>")
    out.append("</section>")
    return "".join(out)
