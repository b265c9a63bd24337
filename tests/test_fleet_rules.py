"""The fleet's pure rules: when a run passed, what the retry options keep,
and a merge that is fed reports it cannot make sense of."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from wrapper.fleet.merge import merge, read_shards
from wrapper.fleet.passing import Expectation, expectation_of, finished, passed, settled
from wrapper.fleet.report import junit_xml
from wrapper.fleet.retry import Earlier

DIGEST = "a" * 64


def result(outcome: str, kind: str | None = None, digest: str | None = DIGEST) -> dict[str, Any]:
    return {
        "runId": "r1",
        "outcome": outcome,
        "error": {"kind": kind, "message": "m"} if kind else None,
        "batch": {"lineDigest": digest} if digest else None,
    }


@pytest.mark.parametrize(
    ("ended", "expect", "expected"),
    [
        (result("ok"), None, True),
        # An expected outcome pins it: a scenario meant to crash fails when it ends ok.
        (result("ok"), Expectation(("error",)), False),
        (result("ok"), Expectation(("error",), "exited_early"), False),
        (result("ok"), Expectation(None, "exited_early"), False),
        (result("ok"), Expectation(("ok", "error"), "exited_early"), True),
        (result("error", "exited_early"), None, False),
        (result("error", "exited_early"), Expectation(("error",)), True),
        (result("error", "exited_early"), Expectation(None, "exited_early"), True),
        (result("error", "exited_early"), Expectation(("error",), "agent_error"), False),
        (result("error", "exited_early"), Expectation(("ok", "error"), "exited_early"), True),
        (result("error", "agent_error"), Expectation(("ok", "error"), "exited_early"), False),
        (result("timeout", "timeout"), Expectation(("error",), "timeout"), False),
        (result("timeout", "timeout"), Expectation(("ok", "error")), False),
        (result("timeout", "idle_timeout"), Expectation(None, "idle_timeout"), True),
        (None, Expectation(("error",)), False),
    ],
)
def test_passed(ended: dict[str, Any] | None, expect: Expectation | None, expected: bool) -> None:
    assert passed(ended, expect) is expected


def test_an_expectation_is_recorded_as_the_line_wrote_it() -> None:
    for written in (
        {"outcome": "error"},
        {"outcome": ["ok", "error"], "errorKind": "exited_early"},
        {"errorKind": "timeout"},
    ):
        expect = expectation_of(written)
        assert expect is not None
        assert expect.to_json() == written
    assert expectation_of({"outcome": 3}) is None


def test_an_abort_on_request_is_settled_but_not_passed() -> None:
    aborted = result("aborted", "abort_requested")
    assert not passed(aborted, None)
    assert settled(aborted, None)
    assert not settled(result("aborted", "interrupted"), None)


def test_a_run_whose_wrapper_was_killed_is_not_finished() -> None:
    assert finished(result("error", "exited_early"))
    assert not finished(result("aborted", "wrapper_killed"))
    assert not finished(None)


@pytest.mark.parametrize(
    ("earlier", "every_outcome", "why"),
    [
        (result("ok"), False, None),
        (result("error", "agent_error"), True, None),
        (
            result("error", "agent_error"),
            False,
            "its earlier run did not pass (error, agent_error)",
        ),
        (result("ok", digest="b" * 64), False, "its line changed since that run"),
        (result("ok", digest=None), True, "its result.json records no line digest"),
    ],
)
def test_what_the_retry_options_keep(
    earlier: dict[str, Any], every_outcome: bool, why: str | None
) -> None:
    said = Earlier(earlier, None, True).why_again(DIGEST, None, every_outcome=every_outcome)
    assert said == why or (why is not None and said is not None and said.startswith(why))


def test_nothing_earlier_runs_for_the_first_time(tmp_path: Path) -> None:
    earlier = Earlier.read(tmp_path / "result.json", tmp_path)
    assert earlier.why_again(DIGEST, None, every_outcome=False) == "it has not run before"
    (tmp_path / "result.json").write_text('["not", "an", "object"]')
    earlier = Earlier.read(tmp_path / "result.json", tmp_path)
    assert earlier.why_again(DIGEST, None, every_outcome=True) == (
        "its result.json is not a JSON object"
    )


@pytest.mark.parametrize(
    "results",
    [
        [{"index": True}, {"index": "0"}, "line", None, {"index": 10**30}],
        [{"index": 0, "runDir": "\x00nul", "durationMs": -5, "expect": "error", "label": 3}],
        {"index": 0},
    ],
)
def test_a_merge_of_odd_reports_names_problems_and_never_raises(
    tmp_path: Path, results: Any
) -> None:
    path = tmp_path / "batch.json"
    spec = {"path": 7, "sha256": "c" * 64, "lines": "two"}
    path.write_text(
        json.dumps({"spec": spec, "shard": {"index": "1"}, "results": [], "warnings": "w"})
    )
    report = json.loads(path.read_text())
    report["results"] = results if isinstance(results, list) else [results]
    path.write_text(json.dumps(report))
    merged = merge(read_shards([str(path)]))
    assert merged.exit_status in (0, 1, 4)
    json.dumps(merged.report)
    ET.fromstring(junit_xml(merged.entries))
