"""The HTML report in a real headless browser (Debian's chromium): it renders,
holds every label, loads nothing, runs nothing an agent wrote, and its own
script only sorts and filters a page that is complete without it.

Skipped, saying so, where no browser is installed (see tests/browser.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import Browser, Rendered
from tests.report_data import FakeRun, thousand_runs, write_batch
from tests.test_browser_helper import png_size
from wrapper.fleet.html_report import visible
from wrapper.fleet.report_input import write_html

LABELS_IN_TABLE = (
    "Array.from(document.querySelectorAll('#runs tbody tr')).filter(r => !r.hidden)"
    ".map(r => r.cells[0].querySelector('a').textContent)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser() as started:
        yield started
    assert started.leftovers() == []


def show(
    browser: Browser,
    tmp_path: Path,
    runs: list[FakeRun],
    *,
    evaluate: list[str] | None = None,
    javascript: bool = True,
) -> Rendered:
    folder = write_batch(tmp_path / "runs", runs)
    page = tmp_path / "report.html"
    write_html([folder], page)
    rendered = browser.render(
        page,
        out_png=tmp_path / "report.png",
        evaluate=[LABELS_IN_TABLE, *(evaluate or [])],
        javascript=javascript,
    )
    # Nothing was asked of the network, nothing was refused, nothing failed.
    assert rendered.requests == []
    assert rendered.csp_violations == []
    assert rendered.console_errors == []
    assert png_size(rendered.png.read_bytes()) == (1280, 800)
    return rendered


THREE = [
    FakeRun("alpha", tokens=100),
    FakeRun(
        "beta",
        outcome="error",
        start=1,
        tokens=900,
        error={"kind": "agent_error", "message": "rate limited"},
    ),
    FakeRun("gamma", start=2, seconds=30, tokens=50, steers=[(5, "tests fail")]),
]


@pytest.mark.parametrize(
    "runs",
    [[], [FakeRun("the only run")], THREE, thousand_runs()],
    ids=["0 runs", "1 run", "3 runs", "1000 runs"],
)
def test_the_page_renders_every_label_and_loads_nothing(
    browser: Browser, tmp_path: Path, runs: list[FakeRun]
) -> None:
    bars = "document.querySelectorAll('#timeline svg a rect').length"
    rendered = show(browser, tmp_path, runs, evaluate=[bars])
    labels, drawn = rendered.values
    assert labels == [run.label for run in runs]
    assert drawn == len(runs)
    assert f"agent-wrapper report: {len(runs):,} run" in rendered.text
    if len(runs) <= 3:
        for run in runs:
            assert run.label is not None
            assert run.label in rendered.text


HOSTILE = [
    "<script>window.pwned = 1</script>",
    '"><img src=x onerror="window.pwned=2">',
    '</td></tr></table><iframe src="https://example.com"></iframe>',
    '<svg onload="window.pwned=4"></svg>',
    "ctl\x07\x1b[31m\x00\u202eevil",
    "x" * 3000,
]


def test_hostile_labels_and_texts_are_text_in_the_browser(browser: Browser, tmp_path: Path) -> None:
    runs = [
        FakeRun(
            label,
            outcome="error",
            start=n,
            final_text=HOSTILE[(n + 1) % len(HOSTILE)],
            stderr="<script>window.pwned = 5</script>",
            warnings=[label],
            error={"kind": "agent_error", "message": label},
        )
        for n, label in enumerate(HOSTILE)
    ]
    rendered = show(
        browser,
        tmp_path,
        runs,
        evaluate=[
            "typeof window.pwned",
            "document.scripts.length",
            "document.querySelectorAll('img, iframe, object, embed').length",
            "Array.from(document.querySelectorAll('pre')).map(p => p.textContent)",
        ],
    )
    labels, pwned, scripts, embedded, pres = rendered.values
    assert labels == [visible(label) for label in HOSTILE]
    assert (pwned, scripts, embedded) == ("undefined", 1, 0)
    assert visible(HOSTILE[1]) in pres
    assert "<script>window.pwned = 5</script>" in pres
    # A long label wraps within the page instead of widening it.
    wide = "document.documentElement.scrollWidth <= window.innerWidth"
    again = show(browser, tmp_path / "again", runs[-1:], evaluate=[wide])
    assert again.values[1] is True


def test_clicking_a_heading_sorts_and_the_filters_hide_rows(
    browser: Browser, tmp_path: Path
) -> None:
    click = "document.querySelectorAll('#runs th')[{}].click()"
    search = (
        "(() => { const s = document.querySelector('input[type=search]'); s.value = {};"
        " s.dispatchEvent(new Event('input')); })()"
    )
    failed_only = (
        "(() => { const b = document.querySelector('input[type=checkbox]'); b.click(); })()"
    )
    rendered = show(
        browser,
        tmp_path,
        THREE,
        evaluate=[
            click.format(6),  # tokens, ascending
            LABELS_IN_TABLE,
            click.format(6),  # tokens, descending
            LABELS_IN_TABLE,
            click.format(0),  # label
            LABELS_IN_TABLE,
            search.replace("{}", json.dumps("ga")),
            LABELS_IN_TABLE,
            search.replace("{}", json.dumps("")),
            failed_only,
            LABELS_IN_TABLE,
            "document.querySelector('.filters span').textContent",
        ],
    )
    values = rendered.values
    assert values[2] == ["gamma", "alpha", "beta"]
    assert values[4] == ["beta", "alpha", "gamma"]
    assert values[6] == ["alpha", "beta", "gamma"]
    assert values[8] == ["gamma"]
    assert values[11] == ["beta"]
    assert values[12] == "1 of 3 runs shown"


def test_the_page_is_complete_without_its_script(browser: Browser, tmp_path: Path) -> None:
    rendered = show(
        browser,
        tmp_path,
        THREE,
        javascript=False,
        evaluate=["document.querySelectorAll('.filters').length"],
    )
    labels, filters = rendered.values
    assert labels == ["alpha", "beta", "gamma"]
    assert filters == 0
    # The table, the failed run's open section and its error are all there.
    for text in ("tokens", "900", "rate limited", "Each run", "Timeline"):
        assert text in rendered.text


def test_the_docs_picture_of_the_report_shows_the_page_of_today(tmp_path: Path) -> None:
    # docs/batch.md shows the report of the demo batch; made again now, the
    # page must read as the picture does (scripts/report-screenshot or
    # scripts/docs-samples remakes the picture when the report changes).
    from tests import report_picture

    shown = report_picture.text_of(report_picture.PICTURE.read_bytes())
    assert shown is not None, "docs/report.png carries no page text: run scripts/report-screenshot"
    now = report_picture.render(report_picture.page(tmp_path), tmp_path, tmp_path / "now.png")
    assert now == shown, "docs/report.png is out of date: run scripts/report-screenshot"


def test_a_picture_carries_its_page_text_and_stays_a_png(tmp_path: Path) -> None:
    from tests import report_picture

    png = report_picture.PICTURE.read_bytes()
    text = "runs 8 ok 6\n<script> é ✓"
    marked = report_picture.with_text(report_picture.with_text(png, "before"), text)
    assert report_picture.text_of(marked) == text
    assert marked.count(report_picture.KEYWORD) == 1
    assert marked.startswith(b"\x89PNG\r\n\x1a\n")
    assert marked.endswith(png[-12:])
    assert png_size(marked) == png_size(png)


# -- what supervision did, on a real batch ------------------------------------------

MARKS = """Array.from(document.querySelectorAll('.tl-bars svg.m')).map(m => {
  const row = document.querySelector('#runs tr[data-i="' + m.dataset.i + '"]');
  const box = m.getBoundingClientRect();
  const bars = m.ownerSVGElement.getBoundingClientRect();
  return [row.cells[0].querySelector('a').textContent, m.getAttribute('class'),
          m.querySelector('title').textContent,
          box.width > 0 && box.left >= bars.left - 8 && box.right <= bars.right + 8];
})"""
CELLS = """Array.from(document.querySelectorAll('#runs tbody tr')).map(r =>
  Array.from(r.cells).map(c => [c.textContent, c.getAttribute('title') ||
    (c.querySelector('[title]') || {getAttribute: () => null}).getAttribute('title')]))"""
HEADINGS = "Array.from(document.querySelectorAll('#runs th')).map(th => th.textContent)"


@pytest.fixture(scope="module")
def intervened(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report page of a real batch in which supervision did everything it marks."""
    from tests.report_runs import run_batch

    work = tmp_path_factory.mktemp("intervened")
    page = work / "report.html"
    write_html([run_batch(work / "batch")], page)
    return page


def test_every_intervention_is_marked_on_the_timeline_and_counted_in_the_table(
    browser: Browser, intervened: Path, tmp_path: Path
) -> None:
    from tests.report_runs import LONG_LABEL

    rendered = browser.render(
        intervened, out_png=tmp_path / "page.png", evaluate=[MARKS, CELLS, HEADINGS]
    )
    assert (rendered.requests, rendered.csp_violations, rendered.console_errors) == ([], [], [])
    marks, cells, headings = rendered.values
    assert all(shown for *_, shown in marks), marks
    by_run: dict[str, list[str]] = {}
    for label, kind, _, _ in marks:
        by_run.setdefault(label, []).append(kind.split()[-1])
    assert by_run == {
        "steered-from-outside": ["m-outside"],
        "aborted": ["m-signal", "m-abort"],
        "lingering": ["m-signal", "m-signal"],
        "retried": ["m-retry"],
    }
    titles = {(label, title) for label, _, title, _ in marks}
    assert ("lingering", "SIGTERM / SIGKILL sent: SIGKILL: still running 0.5s after SIGTERM") in (
        titles
    )
    assert (
        "lingering",
        "SIGTERM / SIGKILL sent: SIGTERM: the agent was still running after its final message",
    ) in titles
    assert (
        "aborted",
        "abort: the run was aborted on request: wrong direction",
    ) in titles
    outside = [title for label, _, title, _ in marks if label == "steered-from-outside"]
    assert outside == ["steer from outside: s1 delivered by resuming (attempt 2), 29 characters"]
    assert headings == [
        "label", "outcome", "passed", "error", "stop reason", "duration", "tokens", "cost",
        "steers", "cleanup", "tools", "warnings",
    ]  # fmt: skip
    rows = {row[0][0]: row for row in cells}
    assert set(rows) == {
        "steered-from-outside", "aborted", "lingering", "retried", "crashed", LONG_LABEL,
    }  # fmt: skip
    column = {name: n for n, name in enumerate(headings)}

    def cell(label: str, name: str) -> str:
        return str(rows[label][column[name]][0])

    def hover(label: str, name: str) -> str:
        return str(rows[label][column[name]][1])

    assert cell("steered-from-outside", "steers") == "0 + 1"
    assert hover("steered-from-outside", "steers") == "0 by Stop hooks, 1 from outside"
    assert (cell("aborted", "outcome"), cell("aborted", "error")) == ("aborted", "abort_requested")
    assert cell("aborted", "cleanup") == "SIGTERM"
    assert cell("lingering", "outcome") == "ok"
    assert cell("lingering", "cleanup") == "SIGKILL"
    assert hover("lingering", "cleanup") == (
        "SIGTERM: the agent was still running after its final message; "
        "SIGKILL: still running 0.5s after SIGTERM"
    )
    assert cell("retried", "steers") == "1"
    assert hover("retried", "steers") == "1 by Stop hooks (1 of them error retries), 0 from outside"
    # A crash mid-tool reads with its error beside its last stop reason.
    assert (cell("crashed", "error"), cell("crashed", "stop reason")) == ("exited_early", "toolUse")
    assert hover("crashed", "error").startswith("exited_early: the agent exited with status 1")
    # The fake agent reports a cost of a fraction of a cent per turn; the
    # abort came before any usage was reported.
    assert cell("crashed", "cost") == "< $0.01"
    assert cell("aborted", "cost") == "unknown"
    assert "cost < $0.01 + 1 unknown" in rendered.text


NARROW = """(() => {
  const cut = (el) => { const s = getComputedStyle(el);
    return [s.textOverflow, s.whiteSpace, el.scrollWidth > el.clientWidth,
            el.getAttribute('title'), Math.round(el.getBoundingClientRect().height)]; };
  const long = Array.from(document.querySelectorAll('#runs td.label .cut, .tl-label'))
    .filter(el => el.getAttribute('title').startsWith('a-label-far'));
  const tick = document.querySelector('#timeline svg text').getBoundingClientRect().height;
  return [document.documentElement.scrollWidth, window.innerWidth,
          document.getElementById('runs').getBoundingClientRect().right <= window.innerWidth,
          long.map(cut), Math.round(tick)];
})()"""


def test_the_page_reads_at_760_pixels_and_labels_are_cut_not_broken(
    browser: Browser, intervened: Path, tmp_path: Path
) -> None:
    from tests.report_runs import LONG_LABEL

    rendered = browser.render(
        intervened, out_png=tmp_path / "narrow.png", width=760, height=900, evaluate=[NARROW]
    )
    [(page_width, window, table_fits, labels, tick_height)] = rendered.values
    # Nothing of the page lies past the right edge of the window: no
    # horizontal scrolling, the table included.
    assert page_width <= window == 760
    assert table_fits is True
    # The timeline's text is not scaled down with the drawing.
    assert tick_height >= 12
    # The long label, in the table and on the timeline, is on one line, cut
    # with an ellipsis, whole on hover.
    assert len(labels) == 2
    for overflow, white_space, cut, title, height in labels:
        assert (overflow, white_space, cut, title) == ("ellipsis", "nowrap", True, LONG_LABEL)
        assert height <= 24, "the label wrapped onto a second line"
