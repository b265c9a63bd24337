"""Caps per fleet (``batch --batch-max-cost/--batch-max-tokens``), seen from
outside: the runs going on stopped at the cap, the lines left unstarted
recorded in batch.json, the next invocation going on from there, and
``merge`` summing the shards' spend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HANG_LIMIT, agent_env, read_result
from tests.test_batch import line, read_report, run_batch, scenario, write_spec
from tests.test_cost_runs import working

pytestmark = pytest.mark.usefixtures("no_leaks")

MERGE = [sys.executable, "-m", "wrapper", "merge"]
#: Each message costs $0.40 as the agent reports it: a run of three, $1.20.
PRICED = {"input": 100, "output": 10, "cost": {"total": 0.4}}


def four_lines(tmp_path: Path) -> Path:
    steps = working(3, PRICED)
    return write_spec(
        tmp_path, [line(scenario(tmp_path, name, steps), label=name) for name in "abcd"]
    )


def test_a_batch_stops_at_its_cost_cap_and_skip_passed_goes_on(tmp_path: Path) -> None:
    spec = four_lines(tmp_path)
    options = ["--runs-dir", "runs", "--output", "quiet", "--jobs", "1"]
    proc = run_batch(tmp_path, spec, *options, "--batch-max-cost", "2")
    assert proc.returncode == 1, proc.stderr.decode()
    report = read_report(tmp_path / "runs")
    # a ran to its end ($1.20); b reached the batch's $2 at its second message
    a, b, c, d = report["results"]
    assert (a["outcome"], a["notStarted"]) == ("ok", None)
    assert b["error"]["kind"] == "budget_exceeded"
    assert "--batch-max-cost cap of $2" in b["error"]["message"]
    stopped = read_result(tmp_path / "runs" / "b" / "result.json")
    assert stopped["error"]["kind"] == "budget_exceeded"
    for unstarted in (c, d):
        assert unstarted["notStarted"] == "batch_cap"
        assert unstarted["error"]["kind"] == "budget_exceeded"
        assert unstarted["error"]["message"].startswith("not started: ")
        assert unstarted["runId"] is None
        assert not (tmp_path / "runs" / unstarted["label"]).exists()
    spend = report["spend"]
    assert spend["maxCost"] == 2
    assert spend["usd"] == pytest.approx(2.0, abs=0.01)
    assert "--batch-max-cost cap of $2" in spend["capReached"]
    assert "2 line(s) not started (c, d)" in proc.stderr.decode()

    # the next invocation keeps a, runs the rest, and counts only its own spend
    again = run_batch(tmp_path, spec, *options, "--skip-passed", "--batch-max-cost", "4")
    assert again.returncode == 0, again.stderr.decode()
    report = read_report(tmp_path / "runs")
    assert [r["reused"] for r in report["results"]] == [True, False, False, False]
    assert all(r["passed"] and r["notStarted"] is None for r in report["results"])
    assert report["spend"]["usd"] == pytest.approx(3 * 1.2, abs=0.01)
    assert report["spend"]["capReached"] is None


def test_a_batch_stops_at_its_token_cap(tmp_path: Path) -> None:
    spec = four_lines(tmp_path)
    proc = run_batch(
        tmp_path, spec, "--runs-dir", "runs", "--output", "pretty", "--jobs", "1",
        "--batch-max-tokens", "300",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr.decode()
    shown = proc.stdout.decode()
    assert "not started c (the batch reached its cap)" in shown
    assert "[batch] 4/4 done, 0 running" in shown
    report = read_report(tmp_path / "runs")
    assert report["spend"]["tokens"] >= 300
    assert "--batch-max-tokens cap of 300" in report["spend"]["capReached"]
    assert any(r["error"] and r["error"]["kind"] == "budget_exceeded" for r in report["results"])


def test_merge_sums_the_shards_spend(tmp_path: Path) -> None:
    spec = four_lines(tmp_path)
    for index in (1, 2):
        proc = run_batch(
            tmp_path, spec, "--runs-dir", f"s{index}", "--output", "quiet",
            "--shard", f"{index}/2", "--batch-max-cost", "100",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
    spends = [read_report(tmp_path / f"s{index}")["spend"]["usd"] for index in (1, 2)]
    merged = subprocess.run(
        [*MERGE, "s1/batch.json", "s2/batch.json", "--out", "merged.json"],
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        check=False,
    )
    assert merged.returncode == 0, merged.stderr.decode()
    report = json.loads((tmp_path / "merged.json").read_text())
    assert report["spend"]["usd"] == pytest.approx(sum(spends))
    assert report["spend"]["usd"] == pytest.approx(4 * 1.2, abs=0.01)
    assert all(r["notStarted"] is None for r in report["results"])


def test_the_fleet_sums_its_runs_and_counts_an_unknown_cost_apart(tmp_path: Path) -> None:
    from tests.test_cost_runs import spending_of
    from wrapper.core.events import AssistantMessage, Usage
    from wrapper.fleet.budget import FleetBudget, summed_spend

    reached: list[str] = []
    budget = FleetBudget(1.0, None, reached.append)
    priced, _ = spending_of(tmp_path / "a", "pi", "--mode", "json")
    unpriced, _ = spending_of(tmp_path / "b", "pi", "--mode", "json")
    budget.watch(priced)
    budget.watch(unpriced)
    paid = Usage(input=10, output=5, cost_usd=0.6)
    priced.observe(AssistantMessage(stop_reason="toolUse", usage=paid))
    # no model named, no cost reported: its cost is unknown, never 0
    unpriced.observe(AssistantMessage(stop_reason="stop", usage=Usage(input=10, output=5)))
    budget.ended(unpriced)
    tokens, usd, unknown = budget.spend()
    assert (tokens, round(usd, 6), unknown) == (30, 0.6, 1)
    assert reached == []
    priced.observe(AssistantMessage(stop_reason="stop", usage=paid))
    (why,) = reached
    assert why == (
        "the batch's runs cost $1.2000 (1 runs' cost unknown, not counted), "
        "which reaches its --batch-max-cost cap of $1"
    )
    said = budget.to_json()
    assert said["unknownCostRuns"] == 1
    assert summed_spend([said, said, None])["usd"] == pytest.approx(2.4)  # type: ignore[index]
