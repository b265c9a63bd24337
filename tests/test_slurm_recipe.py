"""The Slurm recipe of docs/batch.md, as written, on a real single-node Slurm
(tests/slurm_cluster.py): 4 shards, a failing run, a lingering agent, one
task cancelled with scancel and resubmitted alone with --skip-passed, and
the dependent merge reporting the whole spec."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAKE_PI, ROOT, validate, write_scenario
from tests.recipes import recipe
from tests.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_cluster

OK: list[dict[str, Any]] = [{"assistant": {"text": "Done.", "stopReason": "stop"}}]
CRASH: list[dict[str, Any]] = [{"stderr": "fatal: the tool blew up"}, {"exit": 3}]
LINGER: list[dict[str, Any]] = [
    {"assistant": {"text": "Done, then lingering.", "stopReason": "stop"}},
    {"agent_end": {"willRetry": False}},
    {"linger": {"seconds": 30, "ignoreSigterm": False}},
]
SLOW: list[dict[str, Any]] = [{"sleep": 120}]
#: Seconds from a task's SIGTERM to its SIGKILL: above --kill-after (3 s)
#: plus the cleanup, as the recipe asks.
KILL_WAIT = 10


def spec_lines(tmp_path: Path) -> list[dict[str, Any]]:
    """8 lines, shard I of 4 holding places I-1 and I+3: shard 2 holds the
    slow run (cancelled) beside a quick one, shard 3 the failing run, shard
    4 the lingering agent."""

    def scenario(name: str, steps: list[dict[str, Any]]) -> str:
        folder = tmp_path / "scenarios" / name
        folder.mkdir(parents=True, exist_ok=True)
        return str(write_scenario(folder, steps))

    paths = {name: scenario(name, steps) for name, steps in (("ok", OK), ("crash", CRASH))}
    paths["linger"] = scenario("linger", LINGER)
    paths["slow"] = scenario("slow", SLOW)
    kinds = ["ok", "slow", "crash", "linger", "ok", "ok", "ok", "ok"]
    return [
        {
            "command": [str(FAKE_PI), "--mode", "json", "-p", "--scenario", paths[kind]],
            "task": f"task {n} ({kind})",
            "label": f"{kind}-{n}",
        }
        for n, kind in enumerate(kinds)
    ]


def submit(cluster: SlurmCluster, name: str, cwd: Path) -> tuple[str, str]:
    """Run the recipe's submission block ``name``: the array's job id and the merge's."""
    proc = subprocess.run(
        ["sh", "-e", "-c", recipe(name) + 'echo "array $job"\n'],
        cwd=cwd,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr + cluster.logs()
    said = proc.stdout.split()
    merge = said[said.index("job") + 1]
    array = said[said.index("array") + 1]
    return array, merge


def starts(record: Path) -> dict[str, int]:
    """How many times the agent of each task was started."""
    counts: dict[str, int] = {}
    for text in record.read_text().splitlines():
        prompt = json.loads(text)["prompt"]
        counts[prompt] = counts.get(prompt, 0) + 1
    return counts


def test_the_slurm_recipe_retries_a_cancelled_task_and_merges(tmp_path: Path) -> None:
    try:
        with slurm_cluster(cpus=16, kill_wait=KILL_WAIT) as cluster:
            run_recipe(cluster, tmp_path)
    except SlurmUnavailable as e:
        pytest.skip(str(e))


def run_recipe(cluster: SlurmCluster, tmp_path: Path) -> None:
    lines = spec_lines(tmp_path)
    (tmp_path / "spec.jsonl").write_text("".join(json.dumps(entry) + "\n" for entry in lines))
    (tmp_path / "agents.sh").write_text(recipe("slurm agents.sh"))
    (tmp_path / "merge.sh").write_text(recipe("slurm merge.sh"))
    record = tmp_path / "record.jsonl"
    cluster.env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{cluster.env['PATH']}"
    cluster.env["FAKE_AGENT_RECORD"] = str(record)
    results = tmp_path / "results"

    array, merge = submit(cluster, "slurm submit", tmp_path)
    slow_dir, quick = results / "shard-2" / "slow-1", results / "shard-2" / "ok-5" / "result.json"

    def slow_running() -> bool:
        try:
            status = json.loads((slow_dir / "status.json").read_text())
        except (OSError, ValueError):
            return False
        return bool(status.get("state") == "running" and quick.exists())

    cluster.wait_for("shard 2's slow run to be going", slow_running, timeout=60)
    cluster.scancel(f"{array}_2")
    states = cluster.wait_job(array, timeout=60)
    assert states == {
        f"{array}_1": "COMPLETED",
        f"{array}_2": "CANCELLED",
        f"{array}_3": "FAILED",  # exit 1: a run did not pass
        f"{array}_4": "COMPLETED",
    }, cluster.logs()
    cancelled = json.loads((slow_dir / "result.json").read_text())
    # Every process of the task got SIGTERM, the agent among the first: aborted all the same.
    assert (cancelled["outcome"], cancelled["error"]["kind"]) == ("aborted", "interrupted")
    shard2 = json.loads((results / "shard-2" / "batch.json").read_text())
    assert shard2["exitStatus"] == 143
    lingering = json.loads((results / "shard-4" / "linger-3" / "result.json").read_text())
    assert (lingering["outcome"], lingering["forcedCleanup"]) == ("ok", True)
    cluster.wait_job(merge, timeout=60)
    first = json.loads((results / "batch.json").read_text())
    assert first["runs"] == 8
    assert first["outcomes"] == {"ok": 6, "aborted": 1, "error": 1}
    assert first["exitStatus"] == 1

    # The resubmitted task: the slow run (now quick, its line unchanged) runs
    # again, the run that finished in it is not started again.
    before = starts(record)
    write_scenario(tmp_path / "scenarios" / "slow", OK)
    array2, merge2 = submit(cluster, "slurm retry", tmp_path)
    assert cluster.wait_job(array2, timeout=60) == {f"{array2}_2": "COMPLETED"}, cluster.logs()
    cluster.wait_job(merge2, timeout=60)
    after = starts(record)
    again = {task: after[task] - before.get(task, 0) for task in after}
    assert {task: n for task, n in again.items() if n} == {"task 1 (slow)": 1}
    assert sum(before.values()) == 8
    report = json.loads((results / "batch.json").read_text())
    validate("batch", report)
    assert report["exitStatus"] == 1  # complete; the failing run still fails
    assert report["spec"]["lines"] == 8
    assert [entry["label"] for entry in report["results"]] == [line["label"] for line in lines]
    assert report["outcomes"] == {"ok": 7, "error": 1}
    entries = {entry["label"]: entry for entry in report["results"]}
    assert entries["ok-5"]["reused"] is True
    assert (
        entries["slow-1"]["rerunBecause"] == "its earlier run did not pass (aborted, interrupted)"
    )
    assert entries["crash-2"]["passed"] is False
    history = [json.loads(p.read_text()) for p in (slow_dir / "history").iterdir()]
    assert [old["outcome"] for old in history] == ["aborted"]
    junit = (results / "junit.xml").read_text()
    assert junit.count("<testcase ") == 8
