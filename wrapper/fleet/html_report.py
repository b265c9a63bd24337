"""One HTML page a person looks at: what a batch (or several shards of one) came to.

Pure: ``build_html`` takes the runs as ``report_input`` loaded them and
returns the page as a string. The page is one self-contained file: its
style and its small script are inline and allowed by their hashes in a
Content-Security-Policy that forbids loading anything else, so it works
from a ``file://`` URL and as a CI artifact, and nothing an agent wrote
can run in it. Every text from a spec or an agent goes through ``html_text``:
escaped, with control characters shown as visible symbols.

The script only sorts and filters the table; without it the page shows
everything in spec order.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

from wrapper.core.cost import CostSum, cost_text
from wrapper.fleet.report_assets import SCRIPT, STYLE
from wrapper.fleet.report_model import (
    MARK_NAMES,
    SIGNAL_RANK,
    Mark,
    ReportData,
    ReportRun,
    SpecInfo,
    count_text,
    duration_text,
    html_text,
    outcome_class,
    stamp,
    visible,
)
from wrapper.fleet.report_timeline import lanes, timeline

#: What the other modules and the tests take from the page's module.
__all__ = [
    "SIGNAL_RANK",
    "Mark",
    "ReportData",
    "ReportRun",
    "SpecInfo",
    "build_html",
    "cost_text",
    "duration_text",
    "lanes",
    "visible",
]

#: Per-run sections open by themselves for a failed run when the batch is
#: no larger than this; a person scrolling 1,000 runs wants them closed.
OPEN_FAILED_MAX = 50


def _source_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


#: Nothing may be loaded; only the page's own style and script, by their hashes.
CSP = (
    f"default-src 'none'; style-src {_source_hash(STYLE)}; script-src {_source_hash(SCRIPT)}; "
    "base-uri 'none'; form-action 'none'"
)


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
        f"<title>{html_text(title)}</title><style>{STYLE}</style></head><body>",
        _header(data, title),
        timeline(data),
        _table(runs),
        _sections(runs),
        f"<script>{SCRIPT}</script></body></html>\n",
    ]
    return "\n".join(part for part in parts if part)


def _header(data: ReportData, title: str) -> str:
    runs = data.runs
    out = [f'<header><h1>{html_text(title)}</h1><ul class="meta">']
    if data.spec is not None:
        spec = data.spec
        bits = [html_text(spec.path or "(unnamed)")]
        if spec.sha256:
            digest = html_text(spec.sha256)
            bits.append(f'sha256 <code title="{digest}">{digest[:12]}</code>')
        if spec.lines is not None:
            bits.append(f"{count_text(spec.lines)} lines")
        out.append(f"<li><b>spec</b> {', '.join(bits)}</li>")
    if data.shards:
        shards = ", ".join(html_text(s) for s in data.shards)
        text = f"<li><b>shards</b> {shards}"
        if data.shard_count is not None:
            seen = {s.split("/", 1)[0] for s in data.shards}
            every = {str(i) for i in range(1, data.shard_count + 1)}
            absent = [f"{i}/{data.shard_count}" for i in sorted(every - seen, key=int)]
            # Shards count from 1 (``--shard I/N``); anything else is shown as given.
            if absent and seen <= every:
                text += f' <span class="no">missing: {html_text(", ".join(absent))}</span>'
        out.append(text + "</li>")
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.outcome] = counts.get(run.outcome, 0) + 1
    chips = " ".join(
        f'<span class="chip {outcome_class(o)}">{html_text(o)} {n:,}</span>'
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
        out.append(f"<li><b>wall time</b> {wall} ({stamp(span[0])} to {stamp(span[1])})</li>")
    reused = sum(run.reused for run in runs)
    if reused:
        text = f"{reused:,} run{'s' if reused != 1 else ''} reused from an earlier batch"
        if data.rerun_at is not None and data.ended is not None:
            took = duration_text((data.ended - data.rerun_at) * 1000)
            text += (
                f"; this batch ran the others in {took} from {stamp(data.rerun_at)} "
                "(the dashed line on the timeline)"
            )
        out.append(f"<li><b>reused</b> {text}</li>")
    known = [run.tokens for run in runs if run.tokens is not None]
    tokens = f"{sum(known):,}" if known else "\u2014"
    if known and len(known) < len(runs):
        tokens += f" ({len(runs) - len(known):,} runs unknown)"
    out.append(f"<li><b>tokens</b> {tokens}</li>")
    if runs:
        out.append(f"<li><b>cost</b> {CostSum.of(run.cost_usd for run in runs).text}</li>")
    outside = sum(run.outside_steers or 0 for run in runs)
    if outside:
        out.append(f"<li><b>steers from outside</b> {outside:,}</li>")
    capped = sum(run.hit_steer_cap for run in runs)
    if capped:
        out.append(f'<li><b>steer cap</b> <span class="cap">{capped:,} hit it</span></li>')
    out.append("</ul>")
    if data.sources:
        read = ", ".join(f"<code>{html_text(s)}</code>" for s in data.sources)
        out.append(f'<p class="muted">read from {read}</p>')
    if data.problems:
        items = "".join(f"<li>{html_text(p)}</li>" for p in data.problems)
        out.append(
            f'<div class="problems" id="problems"><b>What could not be read</b>'
            f"<ul>{items}</ul></div>"
        )
    if data.warnings:
        items = "".join(f"<li>{html_text(w)}</li>" for w in data.warnings)
        out.append(f'<div class="warn"><b>The batch\'s warnings</b><ul>{items}</ul></div>')
    out.append("</header>")
    return "".join(out)


#: The table's columns, and what a heading's hover says of it.
COLUMNS = (
    ("label", ""),
    ("outcome", ""),
    ("passed", ""),
    ("error", "the error's kind (its message on hover)"),
    ("stop reason", "the agent's last stop reason"),
    ("duration", ""),
    ("tokens", ""),
    (
        "cost",
        "the agent's own cost, else computed from the price table (result.json's cost); "
        "unknown where neither is known, never $0",
    ),
    ("steers", "by Stop hooks (error retries included) + from outside"),
    ("cleanup", "the strongest signal the wrapper sent to end the agent (why on hover)"),
    ("tools", "tool calls (each tool's count on hover)"),
    ("warnings", ""),
)


def _table(runs: Sequence[ReportRun]) -> str:
    out = ['<section><h2>Runs</h2><div class="wide"><table id="runs"><thead><tr>']
    out.extend(
        f'<th title="{html_text(tip)}">{name}</th>' if tip else f"<th>{name}</th>"
        for name, tip in COLUMNS
    )
    out.append("</tr></thead><tbody>")
    for i, run in enumerate(runs):
        row = ' class="failed"' if not run.passed else ""
        badges = ""
        if run.reused:
            badges += ' <span class="muted">(reused)</span>'
        if run.shard:
            badges += f' <span class="muted">shard {html_text(run.shard)}</span>'
        passed = "yes" if run.passed else '<span class="no">no</span>'
        if run.mismatch is not None:
            passed = f'<span class="no" title="{html_text(run.mismatch)}">not the same run</span>'
        error = ""
        if run.error_kind is not None or run.error is not None:
            error = (
                f'<span class="no" title="{html_text(run.error or "")}">'
                f"{_breakable(run.error_kind or 'error')}</span>"
            )
        cells = [
            f'<td class="label"><div class="cut" title="{html_text(run.label)}">'
            f'<a href="#run-{i}">{html_text(run.label)}</a>{badges}</div></td>',
            f'<td><span class="chip {outcome_class(run.outcome)}">'
            f"{html_text(run.outcome)}</span></td>",
            f"<td>{passed}</td>",
            f"<td>{error}</td>",
            f"<td>{html_text(run.stop_reason or '')}</td>",
            _number(run.duration_ms, duration_text(run.duration_ms)),
            _number(run.tokens, count_text(run.tokens)),
            _number(
                run.cost_usd,
                html_text(cost_text(run.cost_usd)),
                title=COST_SOURCES.get(run.cost_source or "", ""),
            ),
            _steers_cell(run),
            _number(
                SIGNAL_RANK.get(run.cleanup or "", 0) if run.cleanup else None,
                html_text(run.cleanup or ""),
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
    return "_<wbr>".join(html_text(part) for part in name.split("_"))


def _steers_cell(run: ReportRun) -> str:
    """Stop-hook steers, ``+`` those from outside when there were any."""
    shown = count_text(run.steers)
    if run.hit_steer_cap:
        shown = (
            f'<span class="cap" title="hit the steer cap">'
            f"{shown}/{count_text(run.max_steers)} cap</span>"
        )
    outside = run.outside_steers or 0
    if outside:
        shown += f" + {outside:,}"
    retries = sum(mark.kind == "retry" for mark in run.marks)
    tip = f"{count_text(run.steers)} by Stop hooks"
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
    return _number(calls, count_text(calls), title=_tools_text(run) or "")


#: What a run's cost figure is, by result.json's ``cost.source``.
COST_SOURCES = {
    "agent": "as the agent reported it",
    "computed": "computed from the price table",
    "mixed": "the agent's own figures and some computed from the price table",
    "unknown": "not known: some usage could not be priced (see the run's warnings)",
}


def _cost_detail(run: ReportRun) -> str:
    """The run's cost to a hundredth of a cent, and where it comes from."""
    if run.cost_usd is None:
        return cost_text(None)
    usd = run.cost_usd
    # Under a hundredth of a cent still reads as something, never $0.0000.
    shown = "$0" if usd <= 0 else "< $0.0001" if usd < 0.0001 else f"${usd:,.4f}"
    why = COST_SOURCES.get(run.cost_source or "")
    return f"{shown} ({why})" if why else shown


def _number(value: float | None, shown: str, *, title: str = "") -> str:
    key = "-1" if value is None else f"{value}"
    tip = f' title="{html_text(title)}"' if title else ""
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
            f'{html_text(run.outcome)}</span> <b class="cut" title="{html_text(run.label)}">'
            f"{html_text(run.label)}</b>"
            f' <span class="muted">{duration_text(run.duration_ms)}</span></summary><dl>'
        )
        fields: list[tuple[str, str | None]] = [
            ("line", None if run.line is None else str(run.line)),
            ("run directory", run.run_dir),
            ("shard", run.shard),
            ("stop reason", run.stop_reason),
            ("error", run.error),
            ("started", stamp(run.started) if run.started is not None else None),
            ("ended", stamp(run.ended) if run.ended is not None else None),
            ("tokens", None if run.tokens is None else f"{run.tokens:,}"),
            ("cost", _cost_detail(run)),
            (
                "steers",
                None
                if run.steers is None
                else f"{run.steers} of at most {count_text(run.max_steers)}",
            ),
            ("steers from outside", None if not run.outside_steers else str(run.outside_steers)),
            ("tools", _tools_text(run)),
            ("expected", run.expect),
        ]
        for name, value in fields:
            if value is not None:
                out.append(f"<dt>{name}</dt><dd>{html_text(value)}</dd>")
        for mark in (*run.marks, *run.refused_steers):
            name = MARK_NAMES.get(mark.kind, mark.kind)
            out.append(
                f"<dt>{html_text(name)}</dt><dd>{stamp(mark.at)}: {html_text(mark.text)}</dd>"
            )
        out.append("</dl>")
        if run.mismatch is not None:
            why = html_text(run.mismatch)
            out.append(f'<div class="problems"><b>Not the same run</b><p>{why}</p></div>')
        if run.missing:
            items = "".join(f"<li>{html_text(m)}</li>" for m in run.missing)
            out.append(f'<div class="problems"><b>Not readable</b><ul>{items}</ul></div>')
        if run.warnings:
            items = "".join(f"<li>{html_text(w)}</li>" for w in run.warnings)
            out.append(f'<div class="warn"><b>Warnings</b><ul>{items}</ul></div>')
        if run.final_text:
            out.append(f"<b>Final text</b><pre>{html_text(run.final_text)}</pre>")
        if run.stderr_tail:
            out.append(f"<b>End of stderr</b><pre>{html_text(run.stderr_tail)}</pre>")
        out.append("</details>")
    out.append("</section>")
    return "".join(out)
