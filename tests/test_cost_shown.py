"""Where a run's cost is shown: the live view's end line, batch.json, the
JUnit report, the HTML report, ``ps`` and ``watch``, OpenTelemetry spans and
the MCP server's answers, each with the same figure: result.json's
``cost.usd`` (the agent's own or computed from the price table), ``< $0.01``
under a cent, and an unknown cost as unknown, never ``$0.00``.

The computed cost is a Codex run of a model whose price is put in the run's
price cache beforehand, so no price is looked up (nor anything fetched)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import FAKE_PI, HANG_LIMIT, ROOT, agent_env, read_events, validate
from tests.test_html_report import parse
from tests.test_telemetry import Collector
from wrapper.core.cost import CostSum, PriceRecord, ShownCost, cost_text, run_cost
from wrapper.core.limits import MCP_WAIT_MAX
from wrapper.files.prices import NotInTable, cache_root, table_version, write_price

FAKE_CODEX = ROOT / "fixtures" / "fake_agent" / "codex"
#: A model whose price the tests put in the cache: $100 per million tokens of
#: every kind, so a Codex turn of 7,000 tokens costs $0.70.
PRICED = "costshow-model"
#: A model the cache says the table does not know.
UNPRICED = "costshow-nosuch-model"

needs_table = pytest.mark.skipif(
    table_version() is None, reason="the cost extra (genai-prices) is not installed"
)


def seed_prices(cache_home: Path) -> None:
    table = table_version()
    assert table is not None
    root = cache_root({"XDG_CACHE_HOME": str(cache_home)})
    record = PriceRecord(requested=PRICED, matched=PRICED, table=table, input=100.0, output=100.0)
    write_price(root, table, PRICED, record)
    write_price(root, table, UNPRICED, NotInTable("not in the price table"))


def codex_line(folder: Path, model: str, program: str = str(FAKE_CODEX)) -> list[str]:
    """A Codex turn that reports 4,000 input, 2,000 cached and 1,000 output tokens."""
    scenario = _scenario(
        folder,
        [
            {
                "assistant": {
                    "text": "All done.",
                    "stopReason": "stop",
                    "usage": {"input": 4000, "output": 1000, "cacheRead": 2000},
                }
            },
            {"agent_end": {"willRetry": False}},
        ],
    )
    return [program, "exec", "--json", "--model", model, "--scenario", str(scenario)]


def pi_line(folder: Path, cost: float) -> list[str]:
    """A pi turn whose agent reports what it cost."""
    usage = {"input": 100, "output": 10, "cost": {"total": cost}}
    scenario = _scenario(
        folder,
        [
            {"assistant": {"text": "All done.", "stopReason": "stop", "usage": usage}},
            {"agent_end": {"willRetry": False}},
        ],
    )
    return [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)]


def _scenario(folder: Path, steps: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    path = folder / "scenario.json"
    path.write_text(json.dumps({"version": 1, "steps": steps}))
    return path


#: Each run of the batch: its label, and what its cost reads as.
SHOWN = {
    "computed": ("$0.70", 0.70, "computed"),
    "reported": ("$0.25", 0.25, "agent"),
    "cent": ("< $0.01", 0.004, "agent"),
    "unknown": ("unknown", None, "unknown"),
}


@dataclass
class Batch:
    work: Path
    runs: Path
    env: dict[str, str]
    proc: subprocess.CompletedProcess[bytes]
    collector: Collector

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "wrapper", *args],
            capture_output=True,
            text=True,
            timeout=HANG_LIMIT,
            env=self.env,
            cwd=self.work,
            stdin=subprocess.DEVNULL,
            check=False,
        )


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Batch]:
    """One batch of four runs, one per way a cost reads, exported to a
    collector on 127.0.0.1, with its JUnit and HTML reports."""
    if table_version() is None:
        pytest.skip("the cost extra (genai-prices) is not installed")
    work = tmp_path_factory.mktemp("costshow")
    seed_prices(work / "cache")
    commands = {
        "computed": codex_line(work / "s-computed", PRICED),
        "reported": pi_line(work / "s-reported", 0.25),
        "cent": pi_line(work / "s-cent", 0.004),
        "unknown": codex_line(work / "s-unknown", UNPRICED),
    }
    spec = work / "spec.jsonl"
    spec.write_text(
        "".join(
            json.dumps({"label": label, "command": command, "task": "hi"}) + "\n"
            for label, command in commands.items()
        )
    )
    collector = Collector()
    env = agent_env(
        work,
        XDG_CACHE_HOME=str(work / "cache"),
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
        NO_COLOR="1",
    )
    argv = [sys.executable, "-m", "wrapper", "batch", str(spec), "--runs-dir", "runs"]
    argv += ["--junit", "junit.xml", "--html", "report.html", "--output", "quiet"]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            timeout=HANG_LIMIT,
            env=env,
            cwd=work,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        yield Batch(work, work / "runs", env, proc, collector)
    finally:
        collector.server.shutdown()
        collector.server.server_close()


def test_batch_json_has_each_runs_cost_and_the_total_with_unknowns_apart(batch: Batch) -> None:
    report = json.loads((batch.runs / "batch.json").read_text())
    validate("batch", report)
    got = {entry["label"]: (entry["costUsd"], entry["costSource"]) for entry in report["results"]}
    assert got == {
        label: (pytest.approx(usd) if usd is not None else None, source)
        for label, (_, usd, source) in SHOWN.items()
    }
    assert report["cost"] == {"usd": pytest.approx(0.954), "unknown": 1}
    # the per-run figure is result.json's own
    result = json.loads((batch.runs / "computed" / "result.json").read_text())
    assert result["cost"]["usd"] == pytest.approx(0.70)
    assert result["usage"]["costUsd"] is None


def test_merge_sums_the_runs_costs_also_when_their_results_are_gone(batch: Batch) -> None:
    merged = batch.cli("merge", "runs", "--out", "merged.json")
    assert merged.returncode == 0, merged.stderr
    report = json.loads((batch.work / "merged.json").read_text())
    validate("batch", report)
    assert report["cost"] == {"usd": pytest.approx(0.954), "unknown": 1}
    # the shard's batch.json alone (its run folders not brought along): what
    # it says of each run's cost is kept, unverified
    alone = json.loads((batch.runs / "batch.json").read_text())
    for entry in alone["results"]:
        entry["runDir"] = str(batch.work / "elsewhere" / entry["label"])
    (batch.work / "alone.json").write_text(json.dumps(alone))
    merged = batch.cli("merge", "alone.json", "--out", "merged-alone.json")
    report = json.loads((batch.work / "merged-alone.json").read_text())
    assert [entry["verified"] for entry in report["results"]] == [False] * 4
    got = {entry["label"]: (entry["costUsd"], entry["costSource"]) for entry in report["results"]}
    assert got["computed"] == (pytest.approx(0.70), "computed")
    assert got["unknown"] == (None, "unknown")
    assert report["cost"] == {"usd": pytest.approx(0.954), "unknown": 1}


def test_junit_cases_carry_the_cost_as_properties_an_unknown_one_without_a_figure(
    batch: Batch,
) -> None:
    root = ET.parse(batch.work / "junit.xml").getroot()
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in root.iter("testcase")
    }
    assert properties["computed"] == {"cost_usd": "0.7", "cost_source": "computed"}
    assert properties["reported"] == {"cost_usd": "0.25", "cost_source": "agent"}
    assert properties["cent"] == {"cost_usd": "0.004", "cost_source": "agent"}
    assert properties["unknown"] == {"cost_source": "unknown"}


def test_the_html_report_shows_each_runs_cost_and_the_total(batch: Batch) -> None:
    page = parse((batch.work / "report.html").read_text())
    costs = {row[0].split()[0]: row[7] for row in page.rows}
    assert costs == {label: text for label, (text, _, _) in SHOWN.items()}
    assert "<li><b>cost</b> $0.95 + 1 unknown</li>" in page.source
    assert not re.search(r"\$0\.00(?!\d)", page.source), "nothing reads as $0.00"
    assert "<dt>cost</dt><dd>$0.0040 (as the agent reported it)</dd>" in page.source
    assert "<dt>cost</dt><dd>$0.7000 (computed from the price table)</dd>" in page.source


def test_ps_and_watch_show_each_runs_cost_and_the_cost_so_far(batch: Batch) -> None:
    listed = batch.cli("ps", "--json", "runs")
    assert listed.returncode == 0, listed.stderr
    got = {run["label"]: (run["costUsd"], run["costSource"]) for run in json.loads(listed.stdout)}
    assert got == {
        label: (pytest.approx(usd) if usd is not None else None, source)
        for label, (_, usd, source) in SHOWN.items()
    }
    table = batch.cli("ps", "runs")
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[1:]}
    assert rows["computed"][4:5] == ["$0.70"]
    assert rows["reported"][4:5] == ["$0.25"]
    assert rows["cent"][4:6] == ["<", "$0.01"]
    assert rows["unknown"][4:5] == ["-"], "unknown is its own mark, never $0.00"
    once = batch.cli("watch", "--once", "runs")
    assert once.stdout.splitlines()[-1] == (
        "0 running · 4 ok · 0 not ok · cost so far $0.95 + 1 unknown"
    )


def test_the_live_views_end_line_shows_the_runs_cost(batch: Batch) -> None:
    for label, (text, usd, source) in SHOWN.items():
        # what the run's own --output pretty ended with, read back by watch
        watched = batch.cli("watch", str(batch.runs / label))
        assert watched.returncode == 0, watched.stderr
        end = [line for line in watched.stdout.splitlines() if line.startswith("■")]
        assert len(end) == 1, watched.stdout
        assert f" tokens · cost {text} · result: " in end[0]
        events = read_events(batch.runs / label / "events.jsonl")
        written = events[-1]
        assert written["type"] == "result_written"
        assert written["costSource"] == source
        assert written["costUsd"] == (pytest.approx(usd) if usd is not None else None)


def test_the_run_span_carries_the_cost_and_its_source(batch: Batch) -> None:
    spans = [span for span in batch.collector.spans() if span.name.startswith("invoke_agent")]
    labels = {
        json.loads((batch.runs / label / "result.json").read_text())["runId"]: label
        for label in SHOWN
    }
    got: dict[str, tuple[Any, Any]] = {}
    for span in spans:
        attributes = {a.key: a.value for a in span.attributes}
        label = labels[attributes["agent_wrapper.run_id"].string_value]
        usd = attributes.get("agent_wrapper.cost.usd")
        got[label] = (
            None if usd is None else usd.double_value,
            attributes["agent_wrapper.cost.source"].string_value,
        )
    assert got == {
        label: (pytest.approx(usd) if usd is not None else None, source)
        for label, (_, usd, source) in SHOWN.items()
    }


@needs_table
def test_the_runs_own_pretty_view_ends_with_its_computed_cost(tmp_path: Path) -> None:
    seed_prices(tmp_path / "cache")
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "pretty", "--color", "never"]
    argv += ["--run-dir", str(tmp_path / "run"), "--task", "hi", "--"]
    argv += codex_line(tmp_path / "s", PRICED)
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache")),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    end = [line for line in proc.stdout.splitlines() if line.startswith("■")]
    assert len(end) == 1, proc.stdout
    assert " tokens · cost $0.70 · result: " in end[0]


# --- the one rule, pure ----------------------------------------------------------


def test_the_cost_shown_is_result_jsons_then_the_agents_then_unknown() -> None:
    computed = {"cost": {"usd": 0.7, "source": "computed"}, "usage": {"costUsd": None}}
    assert run_cost(computed) == ShownCost(0.7, "computed")
    # a cost with a message left unpriced is unknown, even where the agent
    # reported a figure for some others: a part is not the run's cost
    partial = {"cost": {"usd": None, "source": "unknown"}, "usage": {"costUsd": 0.3}}
    assert run_cost(partial) == ShownCost(None, "unknown")
    # an older result.json, a status.json: what the agent reported
    assert run_cost({"usage": {"costUsd": 0.3}}) == ShownCost(0.3, "agent")
    assert run_cost({"cost": None, "usage": {"costUsd": 0.3}}) == ShownCost(0.3, "agent")
    # a batch.json entry without its result.json
    assert run_cost({"costUsd": 0.7, "costSource": "computed"}) == ShownCost(0.7, "computed")
    for nothing in (None, {}, {"usage": None}, {"usage": {"costUsd": None}}, {"cost": "x"}):
        assert run_cost(nothing) == ShownCost(None, "unknown")
    for garbled in (True, "0.5", float("nan"), -1.0):
        assert run_cost({"cost": {"usd": garbled, "source": "agent"}}).usd is None


def test_costs_read_as_a_person_says_them() -> None:
    assert [cost_text(c) for c in (None, 0.0, 0.0004, 0.004, 0.0099, 0.01, 1.2, 1234.5)] == [
        "unknown", "$0", "< $0.01", "< $0.01", "< $0.01", "$0.01", "$1.20", "$1,234.50",
    ]  # fmt: skip
    assert cost_text(None, "-") == "-"
    assert CostSum.of([1.2, None, 0.0, None]).text == "$1.20 + 2 unknown"
    assert CostSum.of([0.001, 0.002]).text == "< $0.01"
    assert CostSum.of([None, None]).text == "unknown"
    assert CostSum.of([None, None]).to_json() == {"usd": None, "unknown": 2}
    assert CostSum.of([]).text == "unknown"


# --- the MCP server's answers ------------------------------------------------------


@needs_table
async def test_the_mcp_answers_carry_the_cost_and_its_source(tmp_path: Path) -> None:
    from tests.test_mcp_registry import server
    from wrapper.mcp.catalog import TOOLS

    seed_prices(tmp_path / "cache")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    async with server(tmp_path, env=env) as tools:
        computed = await tools.start(command=codex_line(tmp_path / "a", PRICED, "codex"), task="hi")
        unknown = await tools.start(
            command=codex_line(tmp_path / "b", UNPRICED, "codex"), task="hi"
        )
        waited = await tools.wait(mode="all", timeout=MCP_WAIT_MAX)
        assert not waited["timed_out"]
        jsonschema.validate(waited, TOOLS["wait"].output_schema)
        ended = {run["run_id"]: run for run in waited["ended"]}
        assert (
            ended[computed["run_id"]]["cost_usd"],
            ended[computed["run_id"]]["cost_source"],
        ) == (
            pytest.approx(0.70),
            "computed",
        )
        assert (ended[unknown["run_id"]]["cost_usd"], ended[unknown["run_id"]]["cost_source"]) == (
            None,
            "unknown",
        )
        for run_id, usd, source in (
            (computed["run_id"], pytest.approx(0.70), "computed"),
            (unknown["run_id"], None, "unknown"),
        ):
            result = await tools.result(run_id=run_id)
            jsonschema.validate(result, TOOLS["result"].output_schema)
            assert (result["cost_usd"], result["cost_source"]) == (usd, source)
            status = await tools.status(run_id=run_id)
            jsonschema.validate(status, TOOLS["status"].output_schema)
            assert (status["cost_usd"], status["cost_source"]) == (usd, source)
