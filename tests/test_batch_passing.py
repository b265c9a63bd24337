"""What counts as passed in a batch (``expect``), its exit statuses and its
JUnit report, through the command line against the fake agent."""

from __future__ import annotations

import json
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import validate
from tests.test_batch import OK_STEPS, line, read_report, run_batch, scenario, write_spec

CRASH: list[dict[str, Any]] = [{"stderr": "fatal: the tool blew up"}, {"exit": 3}]


def cases(path: Path) -> dict[str | None, ET.Element]:
    return {case.get("name"): case for case in ET.parse(path).iter("testcase")}


def test_a_run_that_ends_as_its_line_expects_passes(tmp_path: Path) -> None:
    crash = scenario(tmp_path, "crash", CRASH)
    spec = write_spec(
        tmp_path,
        [
            line(scenario(tmp_path, "ok", OK_STEPS), label="fine"),
            line(crash, label="crash", expect={"outcome": "error", "errorKind": "exited_early"}),
            line(crash, label="crash-kind", task="other", expect={"errorKind": "exited_early"}),
        ],
    )
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--junit", "j.xml", "--output", "quiet")
    assert proc.returncode == 0, proc.stderr.decode()
    report = read_report(tmp_path / "runs")
    assert report["exitStatus"] == 0
    assert report["success"] is True
    assert report["passed"] == 3
    crashed = report["results"][1]
    # The real outcome is kept beside the expectation.
    assert crashed["outcome"] == "error"
    assert crashed["success"] is False
    assert crashed["passed"] is True
    assert crashed["expect"] == {"outcome": "error", "errorKind": "exited_early"}
    assert report["results"][0]["expect"] is None
    found = cases(tmp_path / "j.xml")
    assert found["crash"].find("failure") is None
    out = found["crash"].find("system-out")
    assert out is not None
    assert "fatal: the tool blew up" in (out.text or "")


def test_a_run_that_misses_its_expectation_fails_and_says_what_was_expected(
    tmp_path: Path,
) -> None:
    crash = scenario(tmp_path, "crash", CRASH)
    spec = write_spec(tmp_path, [line(crash, label="crash", expect={"errorKind": "timeout"})])
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--junit", "j.xml", "--output", "quiet")
    assert proc.returncode == 1
    report = read_report(tmp_path / "runs")
    assert report["results"][0]["passed"] is False
    failure = cases(tmp_path / "j.xml")["crash"].find("failure")
    assert failure is not None
    message = failure.get("message") or ""
    assert message.startswith("expected error kind timeout, got error (exited_early)")
    assert "None" not in (failure.text or "")


def test_an_expected_outcome_pins_it_so_a_crash_scenario_that_ends_ok_fails(
    tmp_path: Path,
) -> None:
    fine = scenario(tmp_path, "ok", OK_STEPS)
    crash = scenario(tmp_path, "crash", CRASH)
    spec = write_spec(
        tmp_path,
        [
            line(
                fine,
                label="meant-to-crash",
                expect={"outcome": "error", "errorKind": "exited_early"},
            ),
            line(fine, label="kind-alone", task="b", expect={"errorKind": "exited_early"}),
            line(fine, label="either-ok", task="c", expect={"outcome": ["ok", "error"]}),
            line(crash, label="either-crash", expect={"outcome": ["ok", "error"]}),
            line(crash, label="not-listed", task="d", expect={"outcome": ["ok", "timeout"]}),
        ],
    )
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--junit", "j.xml", "--output", "quiet")
    assert proc.returncode == 1
    report = read_report(tmp_path / "runs")
    got = {r["label"]: (r["outcome"], r["passed"]) for r in report["results"]}
    assert got == {
        "meant-to-crash": ("ok", False),
        "kind-alone": ("ok", False),
        "either-ok": ("ok", True),
        "either-crash": ("error", True),
        "not-listed": ("error", False),
    }
    assert report["passed"] == 2
    assert report["results"][2]["expect"] == {"outcome": ["ok", "error"]}
    found = cases(tmp_path / "j.xml")
    failure = found["meant-to-crash"].find("failure")
    assert failure is not None
    assert (failure.get("message") or "").startswith(
        "expected outcome error with error kind exited_early, got ok"
    )
    failure = found["not-listed"].find("failure")
    assert failure is not None
    assert (failure.get("message") or "").startswith("expected outcome ok or timeout, got error")


def test_a_bad_expectation_is_a_usage_error_naming_the_line(tmp_path: Path) -> None:
    path = scenario(tmp_path, "ok", OK_STEPS)
    for expect, said in (
        ({"outcom": "error"}, "did you mean 'outcome'?"),
        ({"outcome": "crashed"}, '"outcome" must be one of ok, error'),
        ({}, "names nothing"),
        ({"outcome": []}, "or a list of them"),
        ({"outcome": ["ok", "crashed"]}, "or a list of them"),
        ({"outcome": "ok", "errorKind": "exited_early"}, "can never hold"),
        ("error", '"expect" must be an object'),
    ):
        spec = write_spec(tmp_path, [line(path), line(path, expect=expect)])
        proc = run_batch(tmp_path, spec, "--runs-dir", "runs")
        assert proc.returncode == 2
        stderr = proc.stderr.decode()
        assert "line 2" in stderr
        assert said in stderr
        assert not (tmp_path / "runs").exists()


def test_exit_zero_is_for_agent_failures_only(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, [line(scenario(tmp_path, "crash", CRASH), label="crash")])
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "quiet", "--exit-zero")
    assert proc.returncode == 0, proc.stderr.decode()
    report = read_report(tmp_path / "runs")
    assert report["exitStatus"] == 0
    assert report["success"] is False
    assert report["results"][0]["passed"] is False


def test_a_batch_that_cannot_write_its_report_exits_3(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, [line(scenario(tmp_path, "ok", OK_STEPS), label="fine")])
    # Where batch.json goes is taken by a folder: the runs are fine, the batch is not.
    (tmp_path / "runs" / "batch.json").mkdir(parents=True)
    for extra in ((), ("--exit-zero",)):
        proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "quiet", *extra)
        assert proc.returncode == 3
        assert "could not write" in proc.stderr.decode()
        assert json.loads((tmp_path / "runs" / "fine" / "result.json").read_text())["success"]


def test_the_junit_suite_names_the_spec_and_shard_and_has_wall_time(tmp_path: Path) -> None:
    slow = scenario(tmp_path, "slow", [{"sleep": 0.5}, *OK_STEPS])
    spec = write_spec(tmp_path, [line(slow, label=f"r{n}") for n in range(6)])
    proc = run_batch(
        tmp_path, spec, "--runs-dir", "runs", "--junit", "j.xml", "--shard", "2/2", "--jobs", "3"
    )
    assert proc.returncode == 0, proc.stderr.decode()
    root = ET.parse(tmp_path / "j.xml").getroot()
    [suite] = root.iter("testsuite")
    assert suite.get("name") == "spec.jsonl (shard 2/2)"
    assert suite.get("hostname") == socket.gethostname()
    assert (suite.get("timestamp") or "").startswith("20")
    runs = [float(case.get("time") or 0) for case in suite.iter("testcase")]
    assert len(runs) == 3
    # Three half-second runs at once: the wall time, not their sum.
    assert float(suite.get("time") or 0) < sum(runs)
    report = read_report(tmp_path / "runs")
    assert report["shard"] == {"index": 2, "count": 2}
    assert report["spec"]["lines"] == 6
    assert report["spec"]["path"] == str(spec)
    assert [entry["index"] for entry in report["results"]] == [1, 3, 5]


def test_the_spec_schema_knows_what_expect_may_name() -> None:
    from tests.conftest import schema
    from wrapper.fleet.passing import ERROR_KINDS, OUTCOMES

    spec = schema("spec")
    expect = spec["properties"]["expect"]["properties"]
    assert tuple(spec["$defs"]["outcome"]["enum"]) == OUTCOMES
    assert sorted(expect["errorKind"]["enum"]) == sorted(ERROR_KINDS)
    validate("spec", {"command": ["pi"], "expect": {"outcome": "error", "errorKind": "timeout"}})
    validate("spec", {"command": ["pi"], "expect": {"outcome": ["ok", "error"]}})
    wrongs: list[dict[str, Any]] = [
        {"outcom": "error"},
        {},
        {"outcome": "crashed"},
        {"outcome": []},
    ]
    for wrong in wrongs:
        with pytest.raises(jsonschema.ValidationError):
            validate("spec", {"command": ["pi"], "expect": wrong})
