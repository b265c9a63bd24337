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
#: Room at the left of the timeline for the run labels (rows) or the lane count.
TIMELINE_LABELS = 230
TIMELINE_LABEL_CHARS = 32

#: Outcomes with a colour of their own; any other is drawn as ``other``.
OUTCOMES = ("ok", "error", "timeout", "aborted", "spawn_failed", "refused")


@dataclass(frozen=True, slots=True)
class Mark:
    """A moment of a run shown on its timeline bar: a steer or an escalation."""

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
    steers: int | None = None
    max_steers: int | None = None
    hit_steer_cap: bool = False
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
        _timeline(runs),
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
    if data.started is not None and data.ended is not None:
        wall = duration_text((data.ended - data.started) * 1000)
        out.append(
            f"<li><b>wall time</b> {wall} ({_stamp(data.started)} to {_stamp(data.ended)})</li>"
        )
    known = [run.tokens for run in runs if run.tokens is not None]
    tokens = f"{sum(known):,}" if known else "\u2014"
    if known and len(known) < len(runs):
        tokens += f" ({len(runs) - len(known):,} runs unknown)"
    out.append(f"<li><b>tokens</b> {tokens}</li>")
    costs = [run.cost_usd for run in runs if run.cost_usd is not None]
    if costs:
        out.append(f"<li><b>cost</b> ${sum(costs):,.2f}</li>")
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


def _timeline(runs: Sequence[ReportRun]) -> str:
    timed = [
        (i, run)
        for i, run in enumerate(runs)
        if run.started is not None and run.ended is not None and run.ended >= run.started
    ]
    out = ['<section id="timeline"><h2>Timeline</h2>']
    untimed = len(runs) - len(timed)
    if not timed:
        out.append('<p class="muted">No run has a start and an end to show.</p></section>')
        return "".join(out)
    origin = min(run.started or 0 for _, run in timed)
    span = max(max(run.ended or 0 for _, run in timed) - origin, 1e-3)
    left, right = TIMELINE_LABELS, TIMELINE_WIDTH - 10
    scale = (right - left) / span

    def x(at: float) -> float:
        return left + (at - origin) * scale

    by_rows = len(timed) <= TIMELINE_ROWS_MAX
    if by_rows:
        slot = list(range(len(timed)))
        count, height, gap = len(timed), 18.0, 4.0
    else:
        slot = lanes([(run.started or 0, run.ended or 0) for _, run in timed])
        count = max(slot) + 1
        height = max(2.0, min(14.0, 600 / count))
        gap = 1.0 if height >= 4 else 0.0
    top = 22.0
    total = top + count * (height + gap) + 6
    out.append(
        f'<svg viewBox="0 0 {TIMELINE_WIDTH} {total:.0f}" role="img" '
        f'aria-label="when each run started and ended, coloured by outcome">'
    )
    for k in range(5):
        at = origin + span * k / 4
        px = x(at)
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        out.append(
            f'<line class="axis" x1="{px:.1f}" x2="{px:.1f}" y1="16" y2="{total:.0f}"/>'
            f'<text x="{px:.1f}" y="12" text-anchor="{anchor}">'
            f"{duration_text((at - origin) * 1000)}</text>"
        )
    if not by_rows:
        out.append(f'<text x="0" y="12">{count:,} lanes: runs going on at once</text>')
    for (i, run), s in zip(timed, slot, strict=True):
        y = top + s * (height + gap)
        start, end = run.started or 0, run.ended or 0
        width = max((end - start) * scale, 1.5)
        tip = f"{run.label}: {run.outcome}, {duration_text((end - start) * 1000)}"
        if by_rows:
            out.append(
                f'<text x="0" y="{y + height - 4:.1f}">'
                f"{_text(_short(run.label, TIMELINE_LABEL_CHARS))}</text>"
            )
        out.append(
            f'<a href="#run-{i}"><rect class="{outcome_class(run.outcome)}" x="{x(start):.1f}" '
            f'y="{y:.1f}" width="{width:.1f}" height="{height:.1f}">'
            f"<title>{_text(tip)}</title></rect></a>"
        )
        for mark in run.marks:
            out.append(
                f'<rect class="m-{"escalation" if mark.kind == "escalation" else "steer"}" '
                f'x="{x(mark.at) - 1:.1f}" y="{y:.1f}" width="2" height="{height:.1f}">'
                f"<title>{_text(mark.kind + ': ' + _short(mark.text, 200))}</title></rect>"
            )
    out.append("</svg>")
    present = sorted({run.outcome for _, run in timed}, key=_outcome_order)
    legend = " ".join(f'<span class="chip {outcome_class(o)}">{_text(o)}</span>' for o in present)
    kinds = {mark.kind for _, run in timed for mark in run.marks}
    if "steer" in kinds:
        legend += " <span>black tick: a steer</span>"
    if "escalation" in kinds:
        legend += " <span>blue tick: an escalation</span>"
    out.append(f'<p class="legend muted">{legend}</p>')
    if untimed:
        out.append(
            f'<p class="muted">{untimed:,} run{"s" if untimed != 1 else ""} without a start and '
            "an end (no readable result.json) not on the timeline.</p>"
        )
    out.append("</section>")
    return "".join(out)


COLUMNS = (
    "label",
    "outcome",
    "passed",
    "stop reason",
    "duration",
    "tokens",
    "steers",
    "tools",
    "warnings",
)


def _table(runs: Sequence[ReportRun]) -> str:
    out = ['<section><h2>Runs</h2><table id="runs"><thead><tr>']
    out.extend(f"<th>{name}</th>" for name in COLUMNS)
    out.append("</tr></thead><tbody>")
    for i, run in enumerate(runs):
        row = ' class="failed"' if not run.passed else ""
        badges = ""
        if run.reused:
            badges += ' <span class="muted">(reused)</span>'
        if run.shard:
            badges += f' <span class="muted">shard {_text(run.shard)}</span>'
        steers = _count(run.steers)
        if run.hit_steer_cap:
            steers = (
                f'<span class="cap" title="hit the steer cap">'
                f"{steers}/{_count(run.max_steers)} cap</span>"
            )
        passed = "yes" if run.passed else '<span class="no">no</span>'
        if run.mismatch is not None:
            passed = f'<span class="no" title="{_text(run.mismatch)}">not the same run</span>'
        cells = [
            f'<td class="label"><a href="#run-{i}">{_text(run.label)}</a>{badges}</td>',
            f'<td><span class="chip {outcome_class(run.outcome)}">{_text(run.outcome)}</span></td>',
            f"<td>{passed}</td>",
            f"<td>{_text(run.stop_reason or '')}</td>",
            _number(run.duration_ms, duration_text(run.duration_ms)),
            _number(run.tokens, _count(run.tokens)),
            _number(run.steers, steers),
            _tools_cell(run),
            _number(len(run.warnings), str(len(run.warnings))),
        ]
        out.append(f'<tr data-i="{i}"{row}>{"".join(cells)}</tr>')
    out.append("</tbody></table>")
    if not runs:
        out.append('<p class="muted">No runs.</p>')
    out.append("</section>")
    return "".join(out)


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
            f"{_text(run.outcome)}</span> <b>{_text(run.label)}</b>"
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
            ("cost", None if run.cost_usd is None else f"${run.cost_usd:,.4f}"),
            (
                "steers",
                None if run.steers is None else f"{run.steers} of at most {_count(run.max_steers)}",
            ),
            ("tools", _tools_text(run)),
            ("expected", run.expect),
        ]
        for name, value in fields:
            if value is not None:
                out.append(f"<dt>{name}</dt><dd>{_text(value)}</dd>")
        for mark in run.marks:
            out.append(f"<dt>{_text(mark.kind)}</dt><dd>{_stamp(mark.at)}: {_text(mark.text)}</dd>")
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
