"""The throwaway Slurm cluster (tests/slurm_cluster.py) does what a user of
Slurm sees: a job runs and writes its file, an array's tasks each get their
index and count, scancel of one task sends its script SIGTERM and leaves the
others running, and nothing of the cluster outlives it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.slurm_cluster import (
    SlurmCluster,
    SlurmError,
    SlurmUnavailable,
    pid_alive,
    processes_with_conf,
    slurm,
    slurm_cluster,
)

__all__ = ["slurm"]


def test_a_wrapped_job_writes_its_file(slurm: SlurmCluster, tmp_path: Path) -> None:
    out = tmp_path / "hello.txt"
    job = slurm.sbatch(["--wrap", f"echo hello from $SLURM_JOB_ID > {out}"], cwd=tmp_path)
    assert slurm.wait_job(job, timeout=60) == {job: "COMPLETED"}
    assert out.read_text() == f"hello from {job}\n"


def test_each_array_task_gets_its_index_and_the_count(slurm: SlurmCluster, tmp_path: Path) -> None:
    job = slurm.sbatch(
        [
            "--array=0-3",
            f"--output={tmp_path}/task-%a.out",
            "--wrap",
            'echo "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_JOB_ID"',
        ],
        cwd=tmp_path,
    )
    states = slurm.wait_job(job, timeout=90)
    assert states == {f"{job}_{i}": "COMPLETED" for i in range(4)}
    for i in range(4):
        assert (tmp_path / f"task-{i}.out").read_text() == f"{i}/4 {job}\n"


TRAPPING_TASK = """#!/bin/bash
# Each task says it started, then waits for its release file; SIGTERM
# leaves a marker.
dir={dir}
trap 'echo TERM > "$dir/term-$SLURM_ARRAY_TASK_ID"; exit 143' TERM
echo $$ > "$dir/started-$SLURM_ARRAY_TASK_ID"
while [ ! -e "$dir/release-$SLURM_ARRAY_TASK_ID" ]; do sleep 0.2 & wait $!; done
echo done > "$dir/done-$SLURM_ARRAY_TASK_ID"
"""


def test_scancel_of_one_array_task_sends_it_sigterm_and_spares_the_others(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    script = tmp_path / "task.sh"
    script.write_text(TRAPPING_TASK.format(dir=tmp_path))
    job = slurm.sbatch(["--array=0-1", f"--output={tmp_path}/task-%a.out", str(script)])
    slurm.wait_for(
        "both tasks to start",
        lambda: all((tmp_path / f"started-{i}").exists() for i in range(2)),
        timeout=60,
    )
    slurm.scancel(f"{job}_1")
    slurm.wait_for("task 1 to end", lambda: slurm.job_states(job)[f"{job}_1"] == "CANCELLED")
    assert (tmp_path / "term-1").read_text() == "TERM\n"
    assert not pid_alive(int((tmp_path / "started-1").read_text()))
    assert slurm.job_states(job)[f"{job}_0"] == "RUNNING"

    (tmp_path / "release-0").touch()
    assert slurm.wait_job(job, timeout=30) == {f"{job}_0": "COMPLETED", f"{job}_1": "CANCELLED"}
    assert (tmp_path / "done-0").read_text() == "done\n"
    assert not (tmp_path / "term-0").exists()
    assert not (tmp_path / "done-1").exists()


def test_a_job_that_ignores_sigterm_is_killed_kill_wait_seconds_later(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    # What a job's grace period has to fit in: scancel sends SIGTERM, and
    # KillWait seconds later SIGKILL to every process of the job.
    script = tmp_path / "stubborn.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"trap 'date +%s.%N > {tmp_path}/term' TERM\n"
        f"echo $$ > {tmp_path}/pid\n"
        "while :; do sleep 0.1; done\n"
    )
    job = slurm.sbatch([str(script)], cwd=tmp_path)
    slurm.wait_for("the job to start", (tmp_path / "pid").exists, timeout=60)
    pid = int((tmp_path / "pid").read_text())
    slurm.scancel(job)
    slurm.wait_for("SIGTERM", (tmp_path / "term").exists)
    termed = float((tmp_path / "term").read_text())
    slurm.wait_for("the job's process to die", lambda: not pid_alive(pid), timeout=30)
    killed = time.time()
    assert slurm.wait_job(job, timeout=30) == {job: "CANCELLED"}
    assert slurm.kill_wait - 1 <= killed - termed <= slurm.kill_wait + 3


def test_nothing_of_the_cluster_outlives_it(tmp_path: Path) -> None:
    # Its own cluster, left with a job still running: the daemons, the job's
    # slurmstepd and the job itself must all be gone afterwards.
    try:
        with slurm_cluster() as cluster:
            cluster.sbatch(["--wrap", f"echo $$ > {tmp_path}/pid; sleep 600"], cwd=tmp_path)
            cluster.wait_for("the job to start", (tmp_path / "pid").exists, timeout=60)
            daemons = {name: proc.pid for name, proc in cluster.daemons.items()}
            conf, root = cluster.conf, cluster.root
            assert set(daemons) == {"munged", "slurmctld", "slurmd"}
            assert all(pid_alive(pid) for pid in daemons.values())
            ours = processes_with_conf(conf)
            assert set(daemons.values()) <= set(ours)
    except SlurmUnavailable as e:
        pytest.skip(str(e))
    job_pid = int((tmp_path / "pid").read_text())
    assert job_pid in ours
    left = {name: pid for name, pid in daemons.items() if pid_alive(pid)}
    assert left == {}, f"still running: {left}"
    assert not pid_alive(job_pid)
    assert processes_with_conf(conf) == []
    assert not root.exists()


def test_the_cluster_stops_when_its_time_budget_runs_out() -> None:
    try:
        with slurm_cluster(budget=10) as cluster:
            daemons = [proc.pid for proc in cluster.daemons.values()]
            deadline = time.monotonic() + 30
            while not cluster.stopped and time.monotonic() < deadline:
                time.sleep(0.2)
            assert cluster.expired
            assert not any(pid_alive(pid) for pid in daemons)
            assert processes_with_conf(cluster.conf) == []
            with pytest.raises(SlurmError, match="time budget ran out"):
                cluster.run(["sinfo"])
    except SlurmUnavailable as e:
        pytest.skip(str(e))


def test_a_node_declared_with_more_cpus_runs_jobs_that_ask_for_them(tmp_path: Path) -> None:
    try:
        with slurm_cluster(cpus=8) as cluster:
            job = cluster.sbatch(
                [
                    "--array=1-2",
                    "--cpus-per-task=4",
                    f"--output={tmp_path}/t-%a.out",
                    "--wrap",
                    "echo $SLURM_CPUS_PER_TASK",
                ],
                cwd=tmp_path,
            )
            assert cluster.wait_job(job) == {f"{job}_1": "COMPLETED", f"{job}_2": "COMPLETED"}
    except SlurmUnavailable as e:
        pytest.skip(str(e))
    assert [(tmp_path / f"t-{i}.out").read_text() for i in (1, 2)] == ["4\n", "4\n"]


def test_a_missing_program_is_named_with_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import slurm_cluster as module

    monkeypatch.setattr(module, "_SEARCH", ())
    monkeypatch.setenv("PATH", "/nonexistent")
    reason = module.unavailable_reason()
    assert reason is not None
    assert reason.startswith("SLURM IS NOT INSTALLED: ")
    assert "slurmctld (slurmctld)" in reason
    assert "munged (munge)" in reason
    assert (
        "apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge" in reason
    )


def test_a_user_other_than_root_is_told_to_run_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import slurm_cluster as module

    monkeypatch.setattr(module, "find_programs", dict)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason = module.unavailable_reason()
    assert reason is not None
    assert "NEEDS ROOT" in reason
