"""The report's timeline: each run's bar from start to end, coloured by
outcome, with a mark for each thing supervision did on the way (``Mark``).

The labels are HTML beside the drawing (cut with an ellipsis, whole on
hover); the drawing places everything in percentages of its width and
pixels of its height, so that it reads at any width and nothing in it is
scaled down. Pure: ``timeline`` returns the section as a string.
"""

from __future__ import annotations

from collections.abc import Sequence

from wrapper.fleet.report_model import (
    MARK_NAMES,
    ReportData,
    duration_text,
    html_text,
    outcome_class,
    outcome_order,
    shorten,
    stamp,
    timed,
)

#: Runs up to this many get a timeline row each, with their label; more are
#: packed into lanes (one per run going on at once), labelled on hover.
TIMELINE_ROWS_MAX = 60
#: The height of a timeline row and the room between rows, in CSS pixels:
#: a bar as tall as a line of the table's text, its marks legible on it
#: (the style's ``.tl-label`` is as tall as the two, ``.tl-head`` as ``TIMELINE_TOP``).
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


def timeline(data: ReportData) -> str:
    """The timeline section of the page."""
    runs = data.runs
    drawn = [(i, run) for i, run in enumerate(runs) if timed(run)]
    out = ['<section id="timeline"><h2>Timeline</h2>']
    untimed = len(runs) - len(drawn)
    span = data.span
    if not drawn or span is None:
        out.append('<p class="muted">No run has a start and an end to show.</p></section>')
        return "".join(out)
    origin = span[0]
    length = max(span[1] - origin, 1e-3)

    def x(at: float) -> float:
        return min(max((at - origin) / length * 100, 0.0), 100.0)

    by_rows = len(drawn) <= TIMELINE_ROWS_MAX
    if by_rows:
        slot = list(range(len(drawn)))
        count, height, gap = len(drawn), float(TIMELINE_ROW), float(TIMELINE_GAP)
    else:
        slot = lanes([(run.started or 0, run.ended or 0) for _, run in drawn])
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
            f'<div class="tl-label" title="{html_text(run.label)}">{html_text(run.label)}</div>'
            for _, run in drawn
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
            f" re-run began {stamp(rerun)} </text>"
        )
    for (i, run), s in zip(drawn, slot, strict=True):
        y = top + s * (height + gap)
        start, end = run.started or 0, run.ended or 0
        tip = f"{run.label}: {run.outcome}, {duration_text((end - start) * 1000)}"
        if run.reused:
            tip += " (reused from an earlier batch)"
        bar = outcome_class(run.outcome) + (" reused" if run.reused else "")
        out.append(
            f'<a href="#run-{i}"><rect class="{bar}" x="{x(start):.3f}%" y="{y:.1f}" '
            f'width="{max(x(end) - x(start), 0.15):.3f}%" height="{height:.1f}">'
            f"<title>{html_text(tip)}</title></rect></a>"
        )
        for mark in run.marks:
            kind = mark.kind if mark.kind in MARK_NAMES else "steer"
            title = f"{MARK_NAMES[kind]}: {shorten(mark.text, MARK_TEXT_CHARS)}"
            out.append(
                f'<svg class="m m-{kind}" data-i="{i}" x="{x(mark.at):.3f}%" '
                f'y="{y:.1f}" width="1" height="1" overflow="visible">'
                f"<title>{html_text(title)}</title>{_mark_shape(mark.kind, height)}</svg>"
            )
    out.append("</svg></div>")
    present = sorted({run.outcome for _, run in drawn}, key=outcome_order)
    legend = " ".join(
        f'<span class="chip {outcome_class(o)}">{html_text(o)}</span>' for o in present
    )
    kinds = {mark.kind for _, run in drawn for mark in run.marks}
    for kind, name in MARK_NAMES.items():
        if kind in kinds:
            legend += (
                f' <span class="key"><svg class="m m-{kind} sample" width="14" height="14">'
                f'<svg x="7" y="1" width="1" height="1" overflow="visible">'
                f"{_mark_shape(kind, 12)}</svg></svg> {html_text(name)}</span>"
            )
    if any(run.reused for _, run in drawn):
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
