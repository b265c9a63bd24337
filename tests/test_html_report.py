"""The HTML report as a file: what it says for 0, 1, 3 and 1,000 runs, what it
does with hostile text and unreadable files, and ``agent-wrapper report``.

The same pages in a real browser: tests/test_html_report_browser.py.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import FAKE_PI, HANG_LIMIT, agent_env, write_scenario
from tests.report_data import ORIGIN, FakeRun, stamp, thousand_runs, write_batch
from wrapper.fleet.html_report import (
    ReportData,
    build_html,
    duration_text,
    lanes,
    visible,
)
from wrapper.fleet.report_input import (
    FINAL_TEXT_CHARS,
    STDERR_TAIL_BYTES,
    ReportInputError,
    load_report,
)

#: Every element the page may hold: nothing that loads, embeds or runs more.
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "ul", "li",
    "b", "code", "span", "p", "div", "section", "svg", "line", "text", "a", "rect", "table",
    "thead", "tbody", "tr", "th", "td", "details", "summary", "dl", "dt", "dd", "pre", "script",
    "wbr", "polygon", "circle",
}  # fmt: skip


@dataclass
class Page:
    """A page as parsed: its elements, the table's rows, the texts of elements."""

    source: str
    tags: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)
    styles: list[str] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    pres: list[str] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        return [row[0] for row in self.rows]

    def attr(self, tag: str, name: str) -> list[str | None]:
        return [attrs.get(name) for t, attrs in self.tags if t == tag]


class _Parser(HTMLParser):
    def __init__(self, page: Page) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self.in_body_table = False
        self.cell: list[str] | None = None
        self.row: list[str] | None = None
        self.text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.page.tags.append((tag, dict(attrs)))
        if tag == "tbody":
            self.in_body_table = True
        elif tag == "tr" and self.in_body_table:
            self.row = []
        elif tag == "td" and self.row is not None:
            self.cell = []
        elif tag in ("script", "style", "summary", "pre"):
            self.text = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.page.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self.in_body_table = False
        elif tag == "td" and self.cell is not None and self.row is not None:
            self.row.append("".join(self.cell))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.page.rows.append(self.row)
            self.row = None
        elif tag in ("script", "style", "summary", "pre") and self.text is not None:
            into = {
                "script": self.page.scripts,
                "style": self.page.styles,
                "summary": self.page.summaries,
                "pre": self.page.pres,
            }[tag]
            into.append("".join(self.text))
            self.text = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)
        if self.text is not None:
            self.text.append(data)


def parse(source: str) -> Page:
    page = Page(source)
    parser = _Parser(page)
    parser.feed(source)
    parser.close()
    return page


def report(*folders: Path) -> Page:
    return parse(build_html(load_report(list(folders))))


def sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def assert_self_contained(page: Page) -> None:
    """Nothing in the page loads anything, and only its own script and style
    may run, by their hashes."""
    assert {tag for tag, _ in page.tags} <= ALLOWED_TAGS
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            assert name not in ("src", "srcset", "style", "action", "data", "xlink:href"), name
            if name == "href":
                assert (value or "").startswith("#"), value
    [csp] = [
        attrs["content"]
        for tag, attrs in page.tags
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp is not None
    assert "default-src 'none'" in csp
    assert "unsafe" not in csp
    [script] = page.scripts
    [style] = page.styles
    assert f"script-src {sha256_source(script)}" in csp
    assert f"style-src {sha256_source(style)}" in csp


# -- the page for 0, 1, 3 and 1,000 runs ---------------------------------------------


def test_no_runs_is_a_page_that_says_so(tmp_path: Path) -> None:
    page = report(write_batch(tmp_path / "runs", []))
    assert_self_contained(page)
    assert page.rows == []
    assert "No runs." in page.source
    assert "No run has a start and an end to show." in page.source
    assert "<title>agent-wrapper report: 0 runs, 0 not passed</title>" in page.source


def test_one_run_shows_its_numbers_its_final_text_and_its_stderr(tmp_path: Path) -> None:
    run = FakeRun(
        "fix-123",
        seconds=42.1,
        tokens=12345,
        final_text="Fixed the off-by-one.",
        stderr="starting\nwarming up\nall good\n",
        tools=["bash", "read"],
        calls=["bash", "read", "bash", "bash"],
    )
    page = report(write_batch(tmp_path / "runs", [run]))
    assert_self_contained(page)
    assert page.rows == [
        ["fix-123", "ok", "yes", "", "stop", "42.1 s", "12,345", "unknown", "0", "", "4", "0"]
    ]
    assert '<td class="n" data-v="4" title="bash \u00d73, read \u00d71">4</td>' in page.source
    assert "<dt>tools</dt><dd>bash \u00d73, read \u00d71</dd>" in page.source
    assert page.pres == ["Fixed the off-by-one.", "starting\nwarming up\nall good"]
    # The timeline has a row for it, with its label (whole on hover).
    assert '<div class="tl-label" title="fix-123">fix-123</div>' in page.source
    assert page.attr("rect", "class") == ["o-ok"]
    assert "<title>agent-wrapper report: 1 run, 0 not passed</title>" in page.source
    assert "wall time</b> 42.1 s (2026-01-05 09:00:00 UTC to 2026-01-05 09:00:42 UTC)" in (
        page.source
    )


def test_three_runs_say_which_failed_why_and_which_hit_the_steer_cap(tmp_path: Path) -> None:
    runs = [
        # Its events say it called no tool; the others have no events to read.
        FakeRun("alpha", seconds=5, tokens=100, calls=[]),
        FakeRun(
            "beta",
            outcome="error",
            start=1,
            seconds=70,
            stop_reason="error",
            tokens=None,
            error={"kind": "agent_error", "message": "rate limited"},
            warnings=["the Stop gate never passed"],
        ),
        FakeRun(
            "gamma",
            start=2,
            seconds=3700,
            tokens=300,
            steers=[(100, "tests fail"), (200, "still failing")],
            max_steers=2,
            stop_allowed_by="max_steers",
            escalations=[(300, "Which branch?")],
            # Ended ok, but its expectation was not met.
            entry={"passed": False},
        ),
    ]
    page = report(write_batch(tmp_path / "runs", runs))
    assert_self_contained(page)
    assert page.rows == [
        ["alpha", "ok", "yes", "", "stop", "5.0 s", "100", "unknown", "0", "", "0", "0"],
        ["beta", "error", "no", "agent_error", "error", "1 min 10 s", "\u2014", "unknown", "0",
         "", "\u2014", "1"],
        ["gamma", "ok", "no", "", "stop", "1 h 01 min", "300", "unknown", "2/2 cap", "",
         "\u2014", "0"],
    ]  # fmt: skip
    assert '<b>passed</b> <span class="no">1 of 3</span>' in page.source
    assert "<b>tokens</b> 400 (1 runs unknown)" in page.source
    assert '<b>steer cap</b> <span class="cap">1 hit it</span>' in page.source
    assert "<dt>error</dt><dd>agent_error: rate limited</dd>" in page.source
    assert "<li>the Stop gate never passed</li>" in page.source
    # Both runs that did not pass are open; the one that did is closed.
    opened = [attrs.get("id") for tag, attrs in page.tags if tag == "details" and "open" in attrs]
    assert opened == ["run-1", "run-2"]
    # Two steers and an escalation are marked on gamma's bar.
    marks = page.attr("svg", "class")
    assert (marks.count("m m-steer"), marks.count("m m-escalation")) == (2, 1)
    assert f"<dd>{stamp(ORIGIN + 2 + 300)[:10]} 09:05:02 UTC: Which branch?</dd>" in page.source


def test_a_thousand_runs_are_packed_into_as_many_lanes_as_ran_at_once(tmp_path: Path) -> None:
    runs = thousand_runs(jobs=8)
    for run in runs:
        run.final_text, run.stderr = "y" * 5000, "e" * 5000
    page = report(write_batch(tmp_path / "runs", runs))
    assert_self_contained(page)
    assert page.labels == [f"task-{n:04d}" for n in range(1000)]
    assert "8 lanes: runs going on at once" in page.source
    bars = [c for c in page.attr("rect", "class") if c and c.startswith("o-")]
    assert len(bars) == 1000
    # No per-run label rows on the timeline, and no section opened by itself.
    assert 'class="tl-label"' not in page.source
    assert not any(tag == "details" and "open" in attrs for tag, attrs in page.tags)
    failed = sum(run.outcome != "ok" for run in runs)
    assert f'<b>passed</b> <span class="no">{1000 - failed:,} of 1,000</span>' in page.source
    # Each run's texts are cut shorter than in a small batch: the page stays small.
    assert page.pres[:2] == [
        "y" * (FINAL_TEXT_CHARS // 4) + "\n[\u2026 4,000 characters more in result.json]",
        "e" * (STDERR_TAIL_BYTES // 4),
    ]
    assert len(page.source.encode()) < 3_000_000


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 20)), max_size=40))
def test_lanes_never_overlap_and_are_as_few_as_runs_at_once(spans: list[tuple[int, int]]) -> None:
    intervals = [(float(start), float(start + length)) for start, length in spans]
    chosen = lanes(intervals)
    for a in range(len(intervals)):
        for b in range(a + 1, len(intervals)):
            if chosen[a] == chosen[b]:
                (s1, e1), (s2, e2) = intervals[a], intervals[b]
                assert e1 <= s2 or e2 <= s1
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = now = 0
    for _, change in edges:
        now += change
        most = max(most, now)
    assert (max(chosen) + 1 if chosen else 0) == most


def test_durations_read_as_a_person_says_them() -> None:
    assert [duration_text(ms) for ms in (None, 400, 12_340, 245_000, 3_720_000)] == [
        "\u2014",
        "0.4 s",
        "12.3 s",
        "4 min 05 s",
        "1 h 02 min",
    ]


# -- hostile text ---------------------------------------------------------------------

HOSTILE = [
    "<script>window.pwned = 1</script>",
    '"><img src=x onerror="window.pwned=2">',
    '</td></tr></table><a href="https://example.com">x</a>',
    "bell\x07 esc\x1b[31m nul\x00 del\x7f c1\x85 rtl\u202eevil",
    "<!-- comment --> &amp; &lt;ok&gt; ]]> <![CDATA[ x ]]>",
    "L" * 5000,
]


def test_hostile_labels_and_texts_are_shown_as_text(tmp_path: Path) -> None:
    runs = [
        FakeRun(
            label,
            outcome="error" if n % 2 else "ok",
            start=n,
            final_text=label + "\n" + HOSTILE[(n + 1) % len(HOSTILE)],
            stderr="</pre><script>window.pwned=3</script>\x1b[0m",
            warnings=[label],
            error={"kind": "agent_error", "message": label},
            stop_reason=label[:40],
        )
        for n, label in enumerate(HOSTILE)
    ]
    page = report(write_batch(tmp_path / "runs", runs))
    assert_self_contained(page)
    assert page.labels == [visible(label) for label in HOSTILE]
    assert page.summaries == [
        f"{'error' if n % 2 else 'ok'} {visible(label)} 10.0 s" for n, label in enumerate(HOSTILE)
    ]
    assert "pwned" not in "".join(page.scripts)
    # No control character reaches the page; each is shown by a visible symbol.
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", page.source)
    assert "bell\u2407 esc\u241b[31m nul\u2400 del\u2421 c1\ufffd rtl\ufffdevil" in page.labels


def test_a_label_that_is_all_markup_cannot_open_an_element(tmp_path: Path) -> None:
    label = "<b>bold</b><svg onload=alert(1)>"
    page = report(write_batch(tmp_path / "markup", [FakeRun(label)]))
    plain = report(write_batch(tmp_path / "plain", [FakeRun("plain")]))
    # The page has the same elements whatever the label holds.
    assert [tag for tag, _ in page.tags] == [tag for tag, _ in plain.tags]
    assert page.labels == [label]
    assert html.escape(label) in page.source
    assert "<b>bold</b>" not in page.source


# -- what cannot be read ----------------------------------------------------------------


def test_unreadable_runs_are_listed_and_named_on_the_page(tmp_path: Path) -> None:
    runs = [
        FakeRun("corrupt", result_text='{"outcome": "ok", '),
        FakeRun("gone", outcome="error", no_dir=True),
        FakeRun("silent", no_result=True),
        FakeRun("fine", final_text="all good"),
    ]
    data = load_report([write_batch(tmp_path / "runs", runs)])
    page = parse(build_html(data))
    assert page.labels == ["corrupt", "gone", "silent", "fine"]
    # What batch.json says of each is still shown.
    assert [row[1] for row in page.rows] == ["ok", "error", "ok", "ok"]
    missing = [run.missing for run in data.runs]
    assert missing[0] == (
        f"{tmp_path / 'runs' / 'r00001' / 'result.json'}: result.json is not valid JSON",
    )
    assert "not found" in missing[1][0]
    assert missing[2][0].endswith("no result.json there")
    assert missing[3] == ()
    assert "3 runs without a start and an end (no readable result.json)" in page.source
    assert "all good" in page.pres


def test_a_run_directory_holding_another_run_is_shown_as_such_and_not_passed(
    tmp_path: Path,
) -> None:
    runs = [
        FakeRun("replaced", final_text="the first run"),
        FakeRun("kept", final_text="kept from the first run"),
        FakeRun("fine"),
    ]
    folder = write_batch(tmp_path / "runs", runs)
    batch = json.loads((folder / "batch.json").read_text())
    for entry in batch["results"]:
        entry["passed"] = True
    (folder / "batch.json").write_text(json.dumps(batch))
    # A later run of the first two lines was killed midway: its result.json
    # is in their directories now; the second's batch kept the first in history/.
    for name in ("r00001", "r00002"):
        path = folder / name / "result.json"
        first = json.loads(path.read_text())
        if name == "r00002":
            (folder / name / "history").mkdir()
            (
                folder / name / "history" / f"20260105T090000Z-{first['runId']}.result.json"
            ).write_bytes(path.read_bytes())
        later = {**first, "runId": "a-later-run", "outcome": "aborted", "finalText": "cut short"}
        path.write_text(json.dumps(later))
    data = load_report([folder])
    page = parse(build_html(data))
    assert [row[:3] for row in page.rows] == [
        ["replaced", "ok", "not the same run"],
        ["kept", "ok", "yes"],
        ["fine", "ok", "yes"],
    ]
    replaced, kept, _ = data.runs
    assert replaced.passed is False
    assert replaced.mismatch is not None
    assert "is run a-later-run, batch.json names run run-r00001-runs" in replaced.mismatch
    assert "cut short" not in page.source
    assert kept.mismatch is None
    assert kept.final_text == "kept from the first run"
    assert "now holds a later run of the line" in kept.missing[0]
    assert '<b>passed</b> <span class="no">2 of 3</span>' in page.source
    assert "<b>not the same run</b>" in page.source
    assert "agent-wrapper report: 3 runs, 1 not passed" in page.source


def test_a_symlink_planted_in_a_run_directory_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-KEY-MATERIAL\n")
    secret_json = tmp_path / "secret.json"
    secret_json.write_text('{"outcome": "ok", "finalText": "SECRET-FROM-JSON"}')
    folder = write_batch(tmp_path / "runs", [FakeRun("planted", no_result=True)])
    run_dir = folder / "r00001"
    (run_dir / "stderr.log").symlink_to(secret)
    (run_dir / "events.jsonl").symlink_to(secret)
    (run_dir / "result.json").symlink_to(secret_json)
    data = load_report([folder])
    page = build_html(data)
    assert "SECRET" not in page
    assert data.runs[0].stderr_tail is None
    assert data.runs[0].tool_calls is None
    [problem] = data.runs[0].missing
    assert problem.startswith(f"{run_dir / 'result.json'}: result.json cannot be read: ")


def test_a_batch_entry_without_a_run_directory_says_so(tmp_path: Path) -> None:
    folder = write_batch(tmp_path / "runs", [FakeRun("nowhere")])
    (folder / "batch.json").write_text(
        (folder / "batch.json").read_text().replace('"runDir"', '"elsewhere"')
    )
    [run] = load_report([folder]).runs
    assert run.missing == ("its batch.json entry names no run directory",)
    assert run.label == "nowhere"


def test_a_corrupt_batch_json_is_said_and_the_other_shards_are_shown(tmp_path: Path) -> None:
    good = write_batch(
        tmp_path / "all" / "shard-1", [FakeRun("one")], shard={"index": 1, "count": 2}
    )
    bad = tmp_path / "all" / "shard-2"
    bad.mkdir()
    (bad / "batch.json").write_text("[not json")
    data = load_report([tmp_path / "all"])
    assert [run.label for run in data.runs] == ["one"]
    assert data.problems == (f"{bad / 'batch.json'}: batch.json is not valid JSON",)
    page = build_html(data)
    assert "What could not be read" in page
    assert f"<li>{bad / 'batch.json'}: batch.json is not valid JSON</li>" in page
    assert good.name in page


def test_a_run_directory_from_another_machine_is_found_next_to_its_batch(tmp_path: Path) -> None:
    folder = write_batch(tmp_path / "runs", [FakeRun("moved", final_text="found me")])
    batch = (folder / "batch.json").read_text()
    (folder / "batch.json").write_text(batch.replace(str(folder), "/ci/job/42/runs"))
    data = load_report([folder])
    assert data.runs[0].final_text == "found me"
    assert data.runs[0].run_dir == str(folder / "r00001")


def test_a_merged_batch_json_finds_its_runs_in_the_shard_folders_beside_it(
    tmp_path: Path,
) -> None:
    one = write_batch(tmp_path / "fleet" / "shard-1", [FakeRun("a", final_text="from one")])
    two = write_batch(
        tmp_path / "fleet" / "shard-2", [FakeRun("b", final_text="from two")], first_line=2
    )
    results = [
        {**entry, "runDir": entry["runDir"].replace(str(tmp_path / "fleet"), "/ci/workspace")}
        for folder in (one, two)
        for entry in json.loads((folder / "batch.json").read_text())["results"]
    ]
    merged = tmp_path / "fleet" / "merged.json"
    merged.write_text(
        json.dumps({**json.loads((one / "batch.json").read_text()), "results": results})
    )
    data = load_report([merged])
    assert [(run.label, run.final_text) for run in data.runs] == [
        ("a", "from one"),
        ("b", "from two"),
    ]
    assert [run.missing for run in data.runs] == [(), ()]


def test_a_long_final_text_is_cut_and_says_where_the_rest_is(tmp_path: Path) -> None:
    text = "x" * (FINAL_TEXT_CHARS + 500)
    data = load_report([write_batch(tmp_path / "runs", [FakeRun("long", final_text=text)])])
    shown = data.runs[0].final_text or ""
    assert shown.startswith("x" * FINAL_TEXT_CHARS)
    assert shown.endswith("[\u2026 500 characters more in result.json]")


# -- shards, merged batches and the fields a fleet adds ----------------------------------


def test_shard_folders_are_combined_in_spec_order_and_a_missing_shard_is_named(
    tmp_path: Path,
) -> None:
    spec = {"path": "spec.jsonl", "sha256": "ab" * 32, "lines": 6}
    one = write_batch(
        tmp_path / "s1",
        [FakeRun("a"), FakeRun("d")],
        first_line=1,
        step=3,
        shard={"index": 1, "count": 3},
        spec=spec,
    )
    three = write_batch(
        tmp_path / "s3",
        [FakeRun("c"), FakeRun("f", outcome="timeout")],
        first_line=3,
        step=3,
        shard={"index": 3, "count": 3},
        spec=spec,
    )
    page = report(three, one)
    assert page.labels == ["a shard 1/3", "c shard 3/3", "d shard 1/3", "f shard 3/3"]
    assert '<b>shards</b> 1/3, 3/3 <span class="no">missing: 2/3</span>' in page.source
    assert f'<b>spec</b> spec.jsonl, sha256 <code title="{"ab" * 32}">{"ab" * 6}</code>' in (
        page.source
    )
    assert "6 lines" in page.source


def test_shards_of_different_specs_are_said(tmp_path: Path) -> None:
    one = write_batch(tmp_path / "s1", [FakeRun("a")], spec={"path": "a.jsonl", "sha256": "1" * 64})
    two = write_batch(tmp_path / "s2", [FakeRun("b")], spec={"path": "b.jsonl", "sha256": "2" * 64})
    data = load_report([one, two])
    assert data.spec is None
    assert data.problems == ("the batches come from different specs: a.jsonl (111111111111), "
                             "b.jsonl (222222222222)",)  # fmt: skip


def test_passed_and_reused_from_a_merged_batch_are_shown(tmp_path: Path) -> None:
    runs = [
        FakeRun("kept", entry={"passed": True, "reused": True}),
        FakeRun("failed-expectation", entry={"passed": False, "expect": {"finalText": "42"}}),
        FakeRun("no-field", outcome="error"),
    ]
    page = report(write_batch(tmp_path / "merged", runs))
    assert [row[2] for row in page.rows] == ["yes", "no", "no"]
    assert "(reused)" in page.rows[0][0]
    assert "<dt>expected</dt><dd>{&quot;finalText&quot;:&quot;42&quot;}</dd>" in page.source


def test_a_path_without_a_batch_says_what_to_give(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportInputError, match=r"empty holds no batch.json .*give the runs"):
        load_report([tmp_path / "empty"])
    with pytest.raises(ReportInputError, match="nowhere does not exist: give the runs"):
        load_report([tmp_path / "nowhere"])


def test_empty_data_is_still_a_page() -> None:
    page = parse(build_html(ReportData(runs=())))
    assert_self_contained(page)
    assert page.rows == []


# -- the command line ---------------------------------------------------------------


def wrapper(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wrapper", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def test_report_writes_the_page_and_prints_where(tmp_path: Path) -> None:
    write_batch(tmp_path / "runs", [FakeRun("one"), FakeRun("two", no_result=True)])
    proc = wrapper("report", "runs", "--html", "out/report.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out" / "report.html"
    assert proc.stdout == f"{out}\n"
    assert proc.stderr == (
        f"agent-wrapper: warning: report: 1 batch or run file(s) could not be read; "
        f"the page says which ({out})\n"
    )
    assert parse(out.read_text()).labels == ["one", "two"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["report", "nowhere", "--html", "r.html"],
            "report: nowhere does not exist: give the runs directory of a batch "
            "(its --runs-dir) or a batch.json file",
        ),
        (
            ["report", "runs"],
            "report: say where the page goes: agent-wrapper report RUNS_DIR... --html FILE",
        ),
    ],
)
def test_report_usage_errors_say_what_to_do(tmp_path: Path, args: list[str], message: str) -> None:
    write_batch(tmp_path / "runs", [FakeRun("one")])
    proc = wrapper(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"agent-wrapper: error: {message}\n"
    assert not (tmp_path / "r.html").exists()


def test_report_that_cannot_write_says_so(tmp_path: Path) -> None:
    write_batch(tmp_path / "runs", [FakeRun("one")])
    (tmp_path / "blocker").write_text("")
    proc = wrapper("report", "runs", "--html", "blocker/r.html", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        f"agent-wrapper: error: report: cannot write {tmp_path / 'blocker' / 'r.html'}: "
    )
    assert proc.stderr.endswith("give --html a path in a folder you can write to\n")


@pytest.mark.usefixtures("no_leaks")
def test_batch_html_is_written_at_the_end_of_the_batch(tmp_path: Path) -> None:
    steps = [{"assistant": {"text": "Done <b>here</b>.", "stopReason": "stop"}}]
    for name in ("good", "bad"):
        (tmp_path / name).mkdir()
    good = write_scenario(tmp_path / "good", steps)
    bad = write_scenario(tmp_path / "bad", [{"stderr": "boom\n"}, {"exit": 3}])
    spec = tmp_path / "spec.jsonl"
    spec.write_text(
        "".join(
            json.dumps({"command": [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(path)],
                        "task": "Do it", "label": label}) + "\n"
            for label, path in (("fine", good), ("broken", bad))
        )
    )  # fmt: skip
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wrapper",
            "batch",
            str(spec),
            "--runs-dir",
            "runs",
            "--html",
            "out/report.html",
            "--output",
            "quiet",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    page = parse((tmp_path / "out" / "report.html").read_text())
    assert_self_contained(page)
    assert page.labels == ["fine", "broken"]
    assert [row[1] for row in page.rows] == ["ok", "error"]
    assert "Done <b>here</b>." in page.pres
    assert "boom" in page.pres


def test_batch_html_may_not_go_where_a_run_writes(tmp_path: Path) -> None:
    (tmp_path / "good").mkdir()
    good = write_scenario(tmp_path / "good", [{"assistant": {"text": "x", "stopReason": "stop"}}])
    spec = tmp_path / "spec.jsonl"
    command = [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(good)]
    spec.write_text(json.dumps({"command": command, "result": "r.json"}) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "wrapper", "batch", str(spec), "--html", "r.json"],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 2
    assert "where the HTML report (--html) goes" in proc.stderr


# -- what supervision did: marks, columns, costs, reused runs ------------------------


def test_each_intervention_has_its_mark_and_its_cells(tmp_path: Path) -> None:
    runs = [
        FakeRun(
            "outside",
            cost=1.2,
            steers=[(3, "tests fail")],
            outside=[(2, "delivered"), (4, "sent"), (6, "refused")],
        ),
        FakeRun(
            "lingering",
            start=1,
            cost=0.004,
            signals=[
                (9, "SIGTERM", "the agent was still running after its final message"),
                (9.5, "SIGKILL", "still running 0.5s after SIGTERM"),
            ],
        ),
        FakeRun("retried", start=2, retries=[4]),
        FakeRun(
            "aborted",
            outcome="aborted",
            start=3,
            stop_reason=None,
            tokens=None,
            error={"kind": "abort_requested", "message": "the run was aborted on request: no"},
            signals=[(5, "SIGTERM", "the run was aborted on request")],
        ),
        FakeRun(
            "crashed",
            outcome="error",
            start=4,
            cost=0.0,
            stop_reason="toolUse",
            error={"kind": "exited_early", "message": "the agent exited with status 1"},
        ),
    ]
    page = report(write_batch(tmp_path / "runs", runs))
    assert_self_contained(page)
    assert page.rows == [
        ["outside", "ok", "yes", "", "stop", "10.0 s", "1,000", "$1.20", "1 + 2", "", "\u2014",
         "0"],
        ["lingering", "ok", "yes", "", "stop", "10.0 s", "1,000", "< $0.01", "0", "SIGKILL",
         "\u2014", "0"],
        ["retried", "ok", "yes", "", "stop", "10.0 s", "1,000", "unknown", "1", "", "\u2014",
         "0"],
        ["aborted", "aborted", "no", "abort_requested", "", "10.0 s", "\u2014", "unknown", "0",
         "SIGTERM", "\u2014", "0"],
        ["crashed", "error", "no", "exited_early", "toolUse", "10.0 s", "1,000", "$0", "0", "",
         "\u2014", "0"],
    ]  # fmt: skip
    # Unknown costs are counted apart, never as nothing.
    assert "<b>cost</b> $1.20 + 2 unknown" in page.source
    assert "<b>steers from outside</b> 2" in page.source
    marks = [c for c in page.attr("svg", "class") if c and c.startswith("m ") and "sample" not in c]
    # The refused steer from outside never reached the agent: no mark.
    expected = ["m m-steer", "m m-outside", "m m-outside", "m m-signal", "m m-signal"]
    expected += ["m m-retry", "m m-signal", "m m-abort"]
    assert sorted(marks) == sorted(expected)
    titles = re.findall(
        r'<svg class="m m-[a-z_]+" data-i="\d+"[^>]*><title>([^<]*)</title>', page.source
    )
    assert "SIGTERM / SIGKILL sent: SIGKILL: still running 0.5s after SIGTERM" in titles
    assert "abort: the run was aborted on request: no" in titles
    assert "steer from outside: s2 sent by resuming, 12 characters" in titles
    assert "Stop-hook steer: attempt 2 by gate: tests fail" in titles
    # The refused steer is in the run's section, with why.
    assert (
        f"<dt>steer from outside, refused</dt><dd>{stamp(ORIGIN + 6)[:10]} 09:00:06 UTC: "
        "s3: the run ended first</dd>"
    ) in page.source
    assert any(t.startswith("error retry (new attempt): attempt 2: The previous") for t in titles)
    # The legend names each kind of mark the timeline holds, and only those.
    legend = re.findall(r'<span class="key">.*?</svg></svg> ([^<]+)</span>', page.source)
    assert legend == [
        "Stop-hook steer", "error retry (new attempt)", "steer from outside", "abort",
        "SIGTERM / SIGKILL sent",
    ]  # fmt: skip
    # The cleanup cell says why on hover; the crash's error, what it was.
    assert (
        'title="SIGTERM: the agent was still running after its final message; '
        'SIGKILL: still running 0.5s after SIGTERM">SIGKILL</td>'
    ) in page.source
    assert 'title="exited_early: the agent exited with status 1">exited_<wbr>early' in page.source


def test_the_agents_own_retries_are_marked_from_its_events(tmp_path: Path) -> None:
    folder = write_batch(tmp_path / "runs", [FakeRun("flaky", calls=[])])
    events = folder / "r00001" / "events.jsonl"
    retry = {"type": "retry", "seq": 2, "ts": stamp(ORIGIN + 3), "attempt": 1, "source": "agent",
             "phase": "start", "retryAttempt": 1, "maxAttempts": 3, "delayMs": 1500,
             "message": "overloaded", "success": None}  # fmt: skip
    ended = {**retry, "seq": 3, "phase": "end", "message": None, "success": True}
    with events.open("a") as out:
        for line in (retry, ended):
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
    page = report(folder)
    assert "<title>the agent&#x27;s own retry: retry 1 of 3: overloaded</title>" in page.source
    assert [c for c in page.attr("svg", "class") if c == "m m-agent_retry"] == ["m m-agent_retry"]


def test_the_wall_time_is_the_timelines_span_and_a_rerun_is_marked(tmp_path: Path) -> None:
    runs = [
        # Kept by --skip-passed from a batch an hour earlier.
        FakeRun("kept", start=-3600, seconds=20, entry={"reused": True}),
        FakeRun("again", start=1, seconds=9),
    ]
    page = report(write_batch(tmp_path / "runs", runs))
    assert (
        "<b>wall time</b> 1 h 00 min (2026-01-05 08:00:00 UTC to 2026-01-05 09:00:10 UTC)"
        in page.source
    )
    assert (
        "<b>reused</b> 1 run reused from an earlier batch; this batch ran the others in 10.0 s "
        "from 2026-01-05 09:00:00 UTC (the dashed line on the timeline)" in page.source
    )
    # The timeline's last tick says the same span; a dashed line where the re-run began.
    ticks = re.findall(
        r'<text x="[0-9.]+%" y="12" text-anchor="[a-z]+">([^<]+)</text>', page.source
    )
    assert ticks[-1] == "1 h 00 min"
    assert len(re.findall('<line class="rerun" x1="99.7[0-9]*%"', page.source)) == 1
    assert "re-run began 2026-01-05 09:00:00 UTC" in page.source
    assert '<rect class="o-ok reused"' in page.source
    # A batch without reused runs: its own start and end, no dashed line.
    fresh = report(
        write_batch(tmp_path / "fresh", [FakeRun("a", seconds=5), FakeRun("b", start=2)])
    )
    assert "<b>wall time</b> 12.0 s (2026-01-05 09:00:00 UTC to 2026-01-05 09:00:12 UTC)" in (
        fresh.source
    )
    assert 'class="rerun"' not in fresh.source
    assert "<b>reused</b>" not in fresh.source


@pytest.mark.usefixtures("no_leaks")
def test_a_skip_passed_rerun_says_what_was_reused_and_where_it_began(tmp_path: Path) -> None:
    from tests.test_batch import OK_STEPS, line, run_batch, scenario, write_spec

    crash: list[dict[str, Any]] = [{"stderr": "fatal"}, {"exit": 3}]
    spec = write_spec(
        tmp_path,
        [
            line(scenario(tmp_path, "ok", OK_STEPS), label="fine"),
            line(scenario(tmp_path, "crash", crash), label="broken"),
        ],
    )
    assert run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "quiet").returncode == 1
    # The re-run comes a while later: the earlier run lies apart on the timeline.
    time.sleep(1.5)
    again = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "quiet", "--skip-passed")
    assert again.returncode == 1
    data = load_report([tmp_path / "runs"])
    page = parse(build_html(data))
    fine, broken = data.runs
    assert (fine.reused, broken.reused) == (True, False)
    assert data.started is not None
    assert fine.started is not None
    assert fine.started < data.started
    span = data.span
    assert span is not None
    assert span == (fine.started, data.ended)
    wall = duration_text((span[1] - span[0]) * 1000)
    assert f"<b>wall time</b> {wall} (" in page.source
    ticks = re.findall(
        r'<text x="[0-9.]+%" y="12" text-anchor="[a-z]+">([^<]+)</text>', page.source
    )
    assert ticks[-1] == wall
    assert "<b>reused</b> 1 run reused from an earlier batch; this batch ran the others in " in (
        page.source
    )
    assert len(re.findall('<line class="rerun"', page.source)) == 1
    assert '<rect class="o-ok reused"' in page.source


JUNK: list[object] = [None, 7, "x", [], {}, [None, 3, "s"], [{"at": "not a time"}], {"a": 1}]


@pytest.mark.parametrize("value", JUNK)
@pytest.mark.parametrize(
    "key", ["steers", "externalSteers", "externalSteerCount", "attempts", "signalsSent", "usage"]
)
def test_what_a_run_did_read_from_a_corrupt_result_never_breaks_the_page(
    tmp_path: Path, key: str, value: object
) -> None:
    folder = write_batch(tmp_path / "runs", [FakeRun("odd", outcome="aborted")])
    path = folder / "r00001" / "result.json"
    result = json.loads(path.read_text())
    result[key] = value
    if key == "attempts" and isinstance(value, list):
        result[key] = [{"signalsSent": value}, *value]
    path.write_text(json.dumps(result))
    page = report(folder)
    assert_self_contained(page)
    assert page.labels == ["odd"]
    # A corrupt usage is an unknown cost, never nothing.
    if key == "usage":
        assert page.rows[0][7] == "unknown"
