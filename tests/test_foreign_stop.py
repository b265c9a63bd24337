"""A job cancelled as a whole (Slurm's scancel, a process group's SIGTERM):
every process of the run gets the stop signal, the agent first. The agent's
death by that signal must not be taken for a failure of its own."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.conftest import (
    HANG_LIMIT,
    agent_env,
    read_result,
    wrapper_argv,
    write_scenario,
)
from tests.test_batch import batch_argv, line, read_report, scenario, write_spec

SLOW = [{"sleep": 60}]


def events(stream: IO[bytes]) -> Iterator[dict[str, object]]:
    for raw in stream:
        yield json.loads(raw)


def wrapper_processes(top: int) -> list[int]:
    """The wrapper's worker(s) and its first process, as a job's signal reaches them."""
    children = Path(f"/proc/{top}/task/{top}/children").read_text().split()
    return [*(int(pid) for pid in children), top]


def terminate_each(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


@pytest.mark.usefixtures("no_leaks")
def test_an_agent_signalled_with_its_wrapper_ends_aborted(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, SLOW)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        wrapper_argv(run_dir, path),
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        seen = events(proc.stdout)
        agent = next(e for e in seen if e["type"] == "spawned")["pid"]
        assert isinstance(agent, int)
        os.kill(agent, signal.SIGTERM)
        # The wrapper has taken the agent's death in before its own signal comes.
        next(e for e in seen if e["type"] == "exited")
        terminate_each(wrapper_processes(proc.pid))
        proc.stdout.read()
        assert proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "aborted"
    assert result["error"]["kind"] == "interrupted"
    assert result["exitSignal"] == "SIGTERM"


@pytest.mark.usefixtures("no_leaks")
def test_an_agent_signalled_alone_is_still_an_error(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, SLOW)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        wrapper_argv(run_dir, path),
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        agent = next(e for e in events(proc.stdout) if e["type"] == "spawned")["pid"]
        assert isinstance(agent, int)
        os.kill(agent, signal.SIGTERM)
        proc.stdout.read()
        assert proc.wait(timeout=HANG_LIMIT) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "error"
    assert result["error"]["kind"] == "killed_by_signal"


@pytest.mark.usefixtures("no_leaks")
def test_a_batch_cancelled_as_a_job_ends_every_run_aborted(tmp_path: Path) -> None:
    slow = scenario(tmp_path, "slow", SLOW)
    spec = write_spec(tmp_path, [line(slow, label=f"r{n}") for n in range(2)])
    proc = subprocess.Popen(
        batch_argv(spec, "--jobs", "2", "--runs-dir", "runs", "--output", "jsonl"),
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        seen = events(proc.stdout)
        agents: list[object] = []
        for event in seen:
            if event["type"] == "spawned":
                agents.append(event["pid"])
                if len(agents) == 2:
                    break
        terminate_each([pid for pid in agents if isinstance(pid, int)])
        exited = 0
        for event in seen:
            exited += event["type"] == "exited"
            if exited == 2:
                break
        terminate_each(wrapper_processes(proc.pid))
        proc.stdout.read()
        assert proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    report = read_report(tmp_path / "runs")
    assert report["outcomes"] == {"aborted": 2}
