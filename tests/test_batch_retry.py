"""Retrying a batch: ``--skip-passed`` and ``--skip-finished`` keep what an
earlier batch finished (known by the line's digest) and run the rest again,
keeping the earlier result.json in ``history/``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    agent_env,
    read_result,
    state_of,
    wait_until,
    write_scenario,
)
from tests.test_batch import (
    OK_STEPS,
    batch_argv,
    line,
    read_report,
    run_batch,
    scenario,
    write_spec,
)

CRASH: list[dict[str, Any]] = [{"stderr": "fatal"}, {"exit": 3}]


def starts(tmp_path: Path) -> int:
    """How many times an agent was started (the fake records each start)."""
    record = tmp_path / "record.jsonl"
    return len(record.read_text().splitlines()) if record.exists() else 0


def by_label(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["label"]: entry for entry in report["results"]}


def history(run_dir: Path) -> list[dict[str, Any]]:
    folder = run_dir / "history"
    if not folder.is_dir():
        return []
    return [json.loads(path.read_text()) for path in sorted(folder.iterdir())]


def test_skip_passed_keeps_what_passed_and_runs_the_rest_again(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        [
            line(scenario(tmp_path, "ok", OK_STEPS), label="fine"),
            line(scenario(tmp_path, "crash", CRASH), label="broken"),
        ],
    )
    first = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "quiet")
    assert first.returncode == 1
    assert starts(tmp_path) == 2
    runs = tmp_path / "runs"
    fine_before = read_result(runs / "fine" / "result.json")
    broken_before = read_result(runs / "broken" / "result.json")
    assert fine_before["batch"]["lineDigest"] == read_report(runs)["results"][0]["lineDigest"]

    again = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "quiet", "--skip-passed")
    assert again.returncode == 1
    assert starts(tmp_path) == 3  # only the broken line started again
    report = read_report(runs)
    entries = by_label(report)
    assert entries["fine"]["reused"] is True
    assert entries["fine"]["runId"] == fine_before["runId"]
    assert entries["fine"]["rerunBecause"] is None
    assert entries["broken"]["reused"] is False
    assert entries["broken"]["rerunBecause"] == "its earlier run did not pass (error, exited_early)"
    assert report["reused"] == 1
    assert "broken: running it again: its earlier run did not pass" in again.stderr.decode()
    # The kept run is untouched; the re-run one's earlier result is in history/.
    assert read_result(runs / "fine" / "result.json") == fine_before
    assert read_result(runs / "broken" / "result.json")["runId"] != broken_before["runId"]
    assert [old["runId"] for old in history(runs / "broken")] == [broken_before["runId"]]
    assert history(runs / "fine") == []


def test_skip_finished_starts_nothing_that_finished(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        [
            line(scenario(tmp_path, "ok", OK_STEPS), label="fine"),
            line(scenario(tmp_path, "crash", CRASH), label="broken"),
        ],
    )
    assert run_batch(tmp_path, spec, "--runs-dir", "runs").returncode == 1
    again = run_batch(tmp_path, spec, "--runs-dir", "runs", "--skip-finished")
    # Nothing ran, and the batch still says how the lines ended.
    assert again.returncode == 1
    assert starts(tmp_path) == 2
    report = read_report(tmp_path / "runs")
    assert report["reused"] == 2
    assert report["outcomes"] == {"ok": 1, "error": 1}
    assert (
        run_batch(tmp_path, spec, "--runs-dir", "runs", "--skip-finished", "--exit-zero").returncode
        == 0
    )


def test_a_changed_line_runs_again_and_lines_are_matched_by_digest(tmp_path: Path) -> None:
    ok = scenario(tmp_path, "ok", OK_STEPS)
    spec = write_spec(tmp_path, [line(ok, label="a"), line(ok, label="b", task="B")])
    assert run_batch(tmp_path, spec, "--runs-dir", "runs").returncode == 0
    # A new line in front of them, and line a's task changed: b moved but is the same.
    spec = write_spec(
        tmp_path,
        [line(ok, label="new"), line(ok, label="a", task="changed"), line(ok, label="b", task="B")],
    )
    again = run_batch(tmp_path, spec, "--runs-dir", "runs", "--skip-passed")
    assert again.returncode == 0, again.stderr.decode()
    assert starts(tmp_path) == 4
    entries = by_label(read_report(tmp_path / "runs"))
    assert entries["b"]["reused"] is True
    assert entries["b"]["line"] == 3
    assert entries["a"]["reused"] is False
    assert entries["a"]["rerunBecause"] == "its line changed since that run (another line digest)"
    assert entries["new"]["rerunBecause"] == "it has not run before"
    assert read_result(tmp_path / "runs" / "a" / "result.json")["task"] == "changed"


def test_a_run_aborted_on_request_is_settled(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, [line(scenario(tmp_path, "ok", OK_STEPS), label="stopped")])
    assert run_batch(tmp_path, spec, "--runs-dir", "runs").returncode == 0
    path = tmp_path / "runs" / "stopped" / "result.json"
    result = json.loads(path.read_text())
    # What a person's abort leaves: aborted, on request.
    result.update(
        outcome="aborted",
        success=False,
        error={"kind": "abort_requested", "message": "aborted on request", "apiStatus": None},
    )
    path.write_text(json.dumps(result))
    again = run_batch(tmp_path, spec, "--runs-dir", "runs", "--skip-passed")
    assert starts(tmp_path) == 1
    assert again.returncode == 1  # kept, but it did not pass
    [entry] = read_report(tmp_path / "runs")["results"]
    assert (entry["reused"], entry["outcome"], entry["passed"]) == (True, "aborted", False)


def test_a_result_left_half_written_runs_again(tmp_path: Path) -> None:
    ok = scenario(tmp_path, "ok", OK_STEPS)
    spec = write_spec(tmp_path, [line(ok, label="torn"), line(ok, label="gone", task="2")])
    assert run_batch(tmp_path, spec, "--runs-dir", "runs").returncode == 0
    torn = tmp_path / "runs" / "torn" / "result.json"
    torn.write_bytes(torn.read_bytes()[:40])
    (tmp_path / "runs" / "gone" / "result.json").unlink()
    again = run_batch(tmp_path, spec, "--runs-dir", "runs", "--skip-finished")
    assert again.returncode == 0, again.stderr.decode()
    assert starts(tmp_path) == 4
    entries = by_label(read_report(tmp_path / "runs"))
    assert entries["torn"]["rerunBecause"] == "its result.json is not JSON (half-written?)"
    assert entries["gone"]["rerunBecause"] == "its earlier run left no result.json (it was killed)"
    read_result(torn)


@pytest.mark.usefixtures("no_leaks")
def test_a_run_whose_batch_was_sigkilled_runs_again(tmp_path: Path) -> None:
    slow_steps = scenario(tmp_path, "slow", [{"sleep": 60}])
    spec = write_spec(
        tmp_path,
        [line(scenario(tmp_path, "ok", OK_STEPS), label="done"), line(slow_steps, label="slow")],
    )
    proc = subprocess.Popen(
        batch_argv(spec, "--jobs", "2", "--runs-dir", "runs", "--output", "quiet"),
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    runs = tmp_path / "runs"
    try:
        # Both agents started (the fake records its start), the first one finished.
        assert wait_until(
            lambda: (
                state_of(runs / "slow") == "running"
                and (runs / "done" / "result.json").exists()
                and starts(tmp_path) == 2
            )
        )
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        [worker] = [int(pid) for pid in children]
        os.kill(worker, signal.SIGKILL)
        proc.wait(timeout=HANG_LIMIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed = read_result(runs / "slow" / "result.json")
    assert killed["error"]["kind"] == "wrapper_killed"
    # The same line (its digest unchanged), now quick.
    write_scenario(slow_steps.parent, OK_STEPS)
    again = run_batch(tmp_path, spec, "--runs-dir", "runs", "--skip-finished")
    assert again.returncode == 0, again.stderr.decode()
    assert starts(tmp_path) == 3
    entries = by_label(read_report(runs))
    assert entries["done"]["reused"] is True
    assert entries["slow"]["rerunBecause"] == (
        "its earlier run did not run to its end (its wrapper was killed)"
    )
    assert [old["runId"] for old in history(runs / "slow")] == [killed["runId"]]


def test_skip_passed_without_runs_dir_is_refused_naming_the_latest_batch(tmp_path: Path) -> None:
    ok = scenario(tmp_path, "ok", OK_STEPS)
    spec = write_spec(tmp_path, [line(ok, label="fine")])
    first = run_batch(tmp_path, spec, "--output", "quiet")
    assert first.returncode == 0, first.stderr.decode()
    [folder] = (tmp_path / ".agent-wrapper" / "batches").iterdir()
    for option in ("--skip-passed", "--skip-finished"):
        again = run_batch(tmp_path, spec, "--output", "quiet", option)
        assert again.returncode == 2
        stderr = again.stderr.decode()
        assert f"batch: {option} needs --runs-dir" in stderr
        assert (
            f"the latest batch of this spec went to --runs-dir .agent-wrapper/batches/{folder.name}"
            in stderr
        )
    assert starts(tmp_path) == 1
    # Another shard's batches are not this one's.
    other = run_batch(tmp_path, spec, "--output", "quiet", "--skip-passed", "--shard", "1/2")
    assert other.returncode == 2
    assert "give the same --runs-dir to the first batch and to its retries" in other.stderr.decode()
    # Lines that each name their run directory need no runs folder.
    own = write_spec(tmp_path, [line(ok, label="mine", runDir="mine")])
    for _ in range(2):
        kept = run_batch(tmp_path, own, "--output", "quiet", "--skip-passed")
        assert kept.returncode == 0, kept.stderr.decode()
    assert starts(tmp_path) == 2


def test_skip_passed_says_when_no_line_ran_before(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, [line(scenario(tmp_path, "ok", OK_STEPS), label="fine")])
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "quiet", "--skip-passed")
    assert proc.returncode == 0
    assert (
        "batch: --skip-passed: no line of this batch has run before where its runs go "
        f"({tmp_path / 'runs'}): every line runs"
    ) in proc.stderr.decode()
