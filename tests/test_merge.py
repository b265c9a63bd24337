"""``agent-wrapper merge``: one report from the shards of one spec, through
the command line against the fake agent."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from tests.conftest import HANG_LIMIT, agent_env, validate
from tests.test_batch import OK_STEPS, line, run_batch, scenario, write_spec

CRASH: list[dict[str, Any]] = [{"stderr": "fatal"}, {"exit": 3}]


def merge(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "wrapper", "merge", *args],
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def sharded(tmp_path: Path, spec: Path, count: int, prefix: str = "shard") -> list[str]:
    """Run every shard of ``spec``; returns their runs folders."""
    folders = []
    for index in range(1, count + 1):
        folder = f"{prefix}{index}"
        proc = run_batch(tmp_path, spec, "--shard", f"{index}/{count}", "--runs-dir", folder)
        assert proc.returncode in (0, 1), proc.stderr.decode()
        folders.append(folder)
    return folders


def six_lines(tmp_path: Path, *, expect: dict[str, str] | None = None) -> Path:
    ok = scenario(tmp_path, "ok", OK_STEPS)
    crash = scenario(tmp_path, "crash", CRASH)
    extra = {"expect": expect} if expect else {}
    lines = [line(ok, label=f"r{n}") for n in range(6)]
    lines[4] = line(crash, label="r4", **extra)
    return write_spec(tmp_path, lines)


def test_a_complete_merge_is_one_report_in_spec_order(tmp_path: Path) -> None:
    spec = six_lines(tmp_path)
    folders = sharded(tmp_path, spec, 4)
    proc = merge(tmp_path, *folders, "--junit", "all.xml", "--out", "all.json")
    assert proc.returncode == 1, proc.stderr.decode()
    report = json.loads((tmp_path / "all.json").read_text())
    validate("batch", report)
    assert report["runs"] == 6
    assert report["passed"] == 5
    assert [entry["label"] for entry in report["results"]] == [f"r{n}" for n in range(6)]
    assert report["outcomes"] == {"ok": 5, "error": 1}
    assert report["spec"]["lines"] == 6
    assert sorted(shard["index"] for shard in report["shards"]) == [1, 2, 3, 4]
    [suite] = ET.parse(tmp_path / "all.xml").getroot().iter("testsuite")
    assert suite.get("name") == "spec.jsonl"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert len(cases) == 6
    assert [name for name, case in cases.items() if case.find("failure") is not None] == ["r4"]
    assert "6 of the 6 runs of spec.jsonl from 4 inputs: 5 passed" in proc.stderr.decode()
    # Without --out the report goes to stdout.
    plain = merge(tmp_path, *(f"{folder}/batch.json" for folder in folders))
    assert json.loads(plain.stdout)["runs"] == 6


def test_an_expected_failure_passes_in_the_merge(tmp_path: Path) -> None:
    spec = six_lines(tmp_path, expect={"outcome": "error"})
    proc = merge(tmp_path, *sharded(tmp_path, spec, 3), "--junit", "all.xml")
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert report["success"] is True
    assert report["results"][4]["passed"] is True
    assert all(
        case.find("failure") is None for case in ET.parse(tmp_path / "all.xml").iter("testcase")
    )


def forge(folder: Path, label: str, **claims: Any) -> None:
    """Make a shard's batch.json claim what its run did not come to."""
    path = folder / "batch.json"
    report = json.loads(path.read_text())
    for entry in report["results"]:
        if entry["label"] == label:
            entry.update(claims)
    path.write_text(json.dumps(report))


def test_the_merged_entry_is_what_merge_verified_not_the_shards_claim(tmp_path: Path) -> None:
    spec = six_lines(tmp_path)
    folders = sharded(tmp_path, spec, 2)
    # r4 (a crash) is in shard 1; its batch.json says it went well.
    forge(tmp_path / folders[0], "r4", outcome="ok", success=True, passed=True, error=None)
    proc = merge(tmp_path, *folders, "--out", "all.json")
    assert proc.returncode == 1, proc.stderr.decode()
    report = json.loads((tmp_path / "all.json").read_text())
    validate("batch", report)
    entry = report["results"][4]
    assert (entry["outcome"], entry["success"], entry["passed"]) == ("error", False, False)
    assert entry["error"]["kind"] == "exited_early"
    assert entry["verified"] is True
    assert report["passed"] == 5
    assert report["outcomes"] == {"ok": 5, "error": 1}
    assert all(e["verified"] for e in report["results"])


def test_a_run_whose_result_cannot_be_read_is_marked_unverified(tmp_path: Path) -> None:
    spec = six_lines(tmp_path)
    folders = sharded(tmp_path, spec, 2)
    (tmp_path / folders[0] / "r4" / "result.json").unlink()
    forge(tmp_path / folders[0], "r4", passed=True)
    proc = merge(tmp_path, *folders, "--out", "all.json")
    assert proc.returncode == 1, proc.stderr.decode()
    report = json.loads((tmp_path / "all.json").read_text())
    validate("batch", report)
    entry = report["results"][4]
    # The shard's outcome is all there is, but passed is merge's rule, not its claim.
    assert (entry["outcome"], entry["passed"], entry["verified"]) == ("error", False, False)
    assert report["passed"] == 5
    (warning,) = [w for w in report["warnings"] if w["code"] == "unverified_runs"]
    assert warning["message"].startswith("1 run could not be checked against the run's own")
    assert warning["message"].endswith("taken unverified: line 5 (r4)")
    assert f"agent-wrapper: merge: warning: {warning['message']}" in proc.stderr.decode()


def test_a_missing_shard_is_named_with_its_lines(tmp_path: Path) -> None:
    spec = six_lines(tmp_path)
    folders = sharded(tmp_path, spec, 4)
    proc = merge(tmp_path, folders[0], folders[2], folders[3])
    assert proc.returncode == 4
    stderr = proc.stderr.decode()
    assert "no report of shard 2/4" in stderr
    assert "2 of the spec's 6 runs are in no input: line 2 (r1), line 6 (r5)" in stderr
    report = json.loads(proc.stdout)
    assert report["success"] is False
    assert {w["code"] for w in report["warnings"]} >= {"missing_shards", "missing_runs"}


def test_a_doubled_line_is_named(tmp_path: Path) -> None:
    spec = six_lines(tmp_path)
    folders = sharded(tmp_path, spec, 2)
    assert run_batch(tmp_path, spec, "--runs-dir", "whole").returncode == 1
    proc = merge(tmp_path, *folders, "whole")
    assert proc.returncode == 4
    stderr = proc.stderr.decode()
    assert "6 runs are in more than one input: line 1 (r0) (in " in stderr
    # The same shard given twice.
    proc = merge(tmp_path, *folders, folders[0])
    assert proc.returncode == 4
    assert "shard 1/2 is given 2 times" in proc.stderr.decode()


def test_shards_of_different_specs_are_refused(tmp_path: Path) -> None:
    spec = six_lines(tmp_path)
    [first, _] = sharded(tmp_path, spec, 2)
    other = tmp_path / "other"
    other.mkdir()
    ok = scenario(other, "ok", OK_STEPS)
    changed = write_spec(other, [line(ok, label=f"x{n}") for n in range(6)])
    [_, second] = sharded(tmp_path, changed, 2, prefix="other")
    proc = merge(tmp_path, first, second)
    assert proc.returncode == 4
    assert "the inputs are shards of 2 different specs" in proc.stderr.decode()


def test_what_is_no_batch_report_is_a_usage_error(tmp_path: Path) -> None:
    proc = merge(tmp_path, "nowhere")
    assert proc.returncode == 2
    assert "merge: nowhere: cannot read it (No such file or directory)" in proc.stderr.decode()
    (tmp_path / "x.json").write_text("[1, 2]")
    proc = merge(tmp_path, "x.json")
    assert proc.returncode == 2
    assert "not a batch.json" in proc.stderr.decode()
    assert merge(tmp_path).returncode == 2
