"""``agent-wrapper batch`` through the command line, against the fake agent."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    FAKE_PI,
    HANG_LIMIT,
    agent_env,
    read_result,
    state_of,
    validate,
    wait_until,
    write_scenario,
)
from wrapper.core.config import MAX_TASK_BYTES

OK_STEPS: list[dict[str, Any]] = [{"assistant": {"text": "Done.", "stopReason": "stop"}}]


def scenario(tmp_path: Path, name: str, steps: list[dict[str, Any]]) -> Path:
    directory = tmp_path / "scenarios" / name
    directory.mkdir(parents=True)
    return write_scenario(directory, steps)


def line(path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "command": [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(path)],
        "task": "Do the task",
        **extra,
    }


def write_spec(tmp_path: Path, lines: list[Any]) -> Path:
    spec = tmp_path / "spec.jsonl"
    spec.write_text(
        "".join((entry if isinstance(entry, str) else json.dumps(entry)) + "\n" for entry in lines)
    )
    return spec


def batch_argv(spec: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "wrapper", "batch", str(spec), *options]


def read_report(runs_dir: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((runs_dir / "batch.json").read_text())
    validate("batch", report)
    return report


def run_batch(tmp_path: Path, spec: Path, *options: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        batch_argv(spec, *options),
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def refused_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: Path, *options: str
) -> subprocess.CompletedProcess[bytes]:
    """``agent-wrapper batch`` through the entry point the command runs, in
    this process: for a spec refused before anything starts, where a new
    interpreter per case would add only its start-up. Its exit status and
    what it printed, as ``run_batch`` gives them."""
    from wrapper.cli import main

    argv = ["batch", str(spec), *options]
    out, err = io.StringIO(), io.StringIO()
    with monkeypatch.context() as patch:
        patch.chdir(tmp_path)
        for name in [name for name in os.environ if name.startswith("AGENT_WRAPPER_")]:
            patch.delenv(name)
        for name, value in agent_env(tmp_path).items():
            patch.setenv(name, value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else 1
    return subprocess.CompletedProcess(argv, code, out.getvalue().encode(), err.getvalue().encode())


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


@pytest.mark.usefixtures("no_leaks")
def test_jobs_bounds_how_many_agents_run_at_once(tmp_path: Path) -> None:
    steps = [{"sleep": 1.0}, *OK_STEPS]
    lines = [line(scenario(tmp_path, f"s{n}", steps), label=f"run {n}") for n in range(4)]
    spec = write_spec(tmp_path, lines)
    proc = run_batch(tmp_path, spec, "--jobs", "2", "--runs-dir", "runs", "--output", "jsonl")
    assert proc.returncode == 0, proc.stderr.decode()
    runs = tmp_path / "runs"
    results = [read_result(runs / f"run-{n}" / "result.json") for n in range(4)]
    assert [result["outcome"] for result in results] == ["ok"] * 4
    agents = [
        (epoch(result["attempts"][0]["startedAt"]), epoch(result["attempts"][0]["endedAt"]))
        for result in results
    ]
    assert most_at_once(agents) == 2
    report = read_report(runs)
    assert report["exitStatus"] == 0
    assert report["outcomes"] == {"ok": 4}
    assert [entry["runId"] for entry in report["results"]] == [r["runId"] for r in results]
    # Every event on stdout says which run it is of.
    events = [json.loads(text) for text in proc.stdout.decode().splitlines()]
    for event in events:
        validate("event", event)
    assert {event["runId"] for event in events} == {result["runId"] for result in results}
    for result in results:
        written = [e for e in events if e["runId"] == result["runId"]]
        assert [e["seq"] for e in written] == list(range(1, len(written) + 1))
        assert written[-1]["type"] == "result_written"


@pytest.mark.usefixtures("no_leaks")
def test_a_failing_run_fails_the_batch_and_its_junit_case(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        [
            line(scenario(tmp_path, "ok", OK_STEPS), label="fine"),
            line(scenario(tmp_path, "bad", [{"stderr": "boom"}, {"exit": 3}]), label="broken"),
        ],
    )
    proc = run_batch(
        tmp_path, spec, "--runs-dir", "runs", "--junit", "junit.xml", "--output", "quiet"
    )
    assert proc.returncode == 1
    assert proc.stdout == b""
    broken = read_result(tmp_path / "runs" / "broken" / "result.json")
    assert broken["outcome"] == "error"
    report = read_report(tmp_path / "runs")
    assert report["exitStatus"] == 1
    assert report["outcomes"] == {"ok": 1, "error": 1}
    assert [(e["label"], e["success"]) for e in report["results"]] == [
        ("fine", True),
        ("broken", False),
    ]
    cases = {case.get("name"): case for case in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    assert cases["fine"].find("failure") is None
    failure = cases["broken"].find("failure")
    assert failure is not None
    assert failure.get("message") == broken["error"]["message"]
    assert failure.get("type") == "exited_early"


def test_a_gate_that_never_passed_shows_in_the_batch_and_junit(tmp_path: Path) -> None:
    gate = tmp_path / "gate.py"
    gate.write_text(
        "import json, sys\njson.load(sys.stdin)\n"
        "print(json.dumps({'decision': 'block', 'reason': 'Not good enough yet.'}))\n"
    )
    hooks = {
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"{sys.executable} {gate}"}]}]}
    }
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(hooks))
    common = {"settings": [str(settings)], "maxSteers": 0}
    spec = write_spec(
        tmp_path,
        [
            line(scenario(tmp_path, "warned", OK_STEPS), label="warned", **common),
            line(
                scenario(tmp_path, "failed", OK_STEPS),
                label="failed",
                failOnMaxSteers=True,
                **common,
            ),
        ],
    )
    proc = run_batch(
        tmp_path, spec, "--runs-dir", "runs", "--junit", "junit.xml", "--output", "quiet"
    )
    assert proc.returncode == 1
    report = read_report(tmp_path / "runs")
    assert [(e["label"], e["outcome"]) for e in report["results"]] == [
        ("warned", "ok"),
        ("failed", "error"),
    ]
    assert report["results"][1]["error"]["kind"] == "gate_not_passed"
    cases = {case.get("name"): case for case in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    assert cases["warned"].find("failure") is None
    said = cases["warned"].find("system-err")
    assert said is not None
    assert "never passed" in (said.text or "")
    failure = cases["failed"].find("failure")
    assert failure is not None
    assert failure.get("type") == "gate_not_passed"
    assert "Not good enough yet." in (failure.get("message") or "")


@pytest.mark.usefixtures("no_leaks")
def test_shards_run_every_line_exactly_once(tmp_path: Path) -> None:
    path = scenario(tmp_path, "ok", OK_STEPS)
    spec = write_spec(tmp_path, [line(path, task=f"task {n}") for n in range(7)])
    tasks: list[str] = []
    for index in (1, 2, 3):
        proc = run_batch(
            tmp_path, spec, "--shard", f"{index}/3", "--runs-dir", f"shard{index}", "--jobs", "3"
        )
        assert proc.returncode == 0, proc.stderr.decode()
        report = read_report(tmp_path / f"shard{index}")
        for entry in report["results"]:
            tasks.append(read_result(Path(entry["runDir"]) / "result.json")["task"])
    assert sorted(tasks) == sorted(f"task {n}" for n in range(7))


@pytest.mark.usefixtures("no_leaks")
def test_sigterm_ends_every_run_aborted_with_its_result(tmp_path: Path) -> None:
    slow = scenario(tmp_path, "slow", [{"sleep": 60}])
    spec = write_spec(tmp_path, [line(slow, label=f"r{n}") for n in range(3)])
    proc = subprocess.Popen(
        batch_argv(spec, "--jobs", "2", "--runs-dir", "runs", "--output", "quiet"),
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    runs = tmp_path / "runs"
    try:
        assert wait_until(lambda: sum(state_of(runs / f"r{n}") == "running" for n in range(3)) == 2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for n in range(3):
        result = read_result(runs / f"r{n}" / "result.json")
        assert result["outcome"] == "aborted"
        assert result["error"]["kind"] == "interrupted"
    report = read_report(runs)
    assert report["exitStatus"] == 143
    assert report["outcomes"] == {"aborted": 3}


@pytest.mark.usefixtures("no_leaks")
def test_a_run_of_a_batch_is_steered_and_another_aborted_through_its_directory(
    tmp_path: Path,
) -> None:
    slow = write_scenario(
        tmp_path,
        [{"assistant": {"text": "Working.", "toolCalls": [{"name": "bash"}]}}, {"sleep": 60}],
        resumes=[[{"assistant": {"text": "Steered.", "stopReason": "stop"}}]],
    )
    spec = write_spec(tmp_path, [line(slow, label="steered"), line(slow, label="aborted")])
    proc = subprocess.Popen(
        batch_argv(spec, "--jobs", "2", "--runs-dir", "runs", "--output", "quiet"),
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    runs = tmp_path / "runs"
    try:
        # Each agent has said its first words (its session is saved from then on).
        assert wait_until(lambda: all(_said_something(runs / r) for r in ("steered", "aborted")))
        control = [sys.executable, "-m", "wrapper"]
        steer = subprocess.run(
            [*control, "steer", str(runs / "steered"), "--text", "Go"],
            timeout=HANG_LIMIT,
            check=False,
        )
        abort = subprocess.run(
            [*control, "abort", str(runs / "aborted")], timeout=HANG_LIMIT, check=False
        )
        assert (steer.returncode, abort.returncode) == (0, 0)
        assert proc.wait(timeout=HANG_LIMIT) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    report = read_report(runs)
    assert [(e["label"], e["outcome"]) for e in report["results"]] == [
        ("steered", "ok"),
        ("aborted", "aborted"),
    ]
    aborted = read_result(runs / "aborted" / "result.json")
    assert aborted["error"]["kind"] == "abort_requested"


@pytest.mark.usefixtures("no_leaks")
def test_one_runs_cleanup_leaves_another_runs_agent_alone(tmp_path: Path) -> None:
    pidfile = tmp_path / "lingering.pid"
    leaves = scenario(
        tmp_path, "leaves", [{"spawn": {"seconds": 60, "pidfile": str(pidfile)}}, *OK_STEPS]
    )
    works = scenario(tmp_path, "works", [{"sleep": 3.0}, *OK_STEPS])
    spec = write_spec(tmp_path, [line(leaves, label="leaves"), line(works, label="works")])
    proc = run_batch(tmp_path, spec, "--jobs", "2", "--runs-dir", "runs")
    assert proc.returncode == 0, proc.stderr.decode()
    left = read_result(tmp_path / "runs" / "leaves" / "result.json")
    assert any(w["code"] == "leftover_processes" for w in left["warnings"])
    assert pidfile.exists()
    # Ended by its run's cleanup, not as an orphan at the batch's end.
    assert read_report(tmp_path / "runs")["warnings"] == []
    working = read_result(tmp_path / "runs" / "works" / "result.json")
    # Still working while the other run cleaned up, and never touched.
    assert epoch(working["attempts"][0]["endedAt"]) > epoch(left["endedAt"])
    assert working["outcome"] == "ok"
    assert working["exitSignal"] is None
    assert working["signalsSent"] == []
    assert not any(w["code"] == "leftover_processes" for w in working["warnings"])


def test_a_bad_line_is_named_and_nothing_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "started"
    starts = scenario(tmp_path, "starts", [{"write_file": {"path": str(marker)}}, *OK_STEPS])
    for case, (bad, named) in enumerate(
        [
            ({"command": "pi --mode json"}, '"command" must be a non-empty list'),
            (line(starts, timeout=-1), "'timeout'"),
            (line(starts, tiemout=5), "did you mean 'timeout'"),
            (line(starts, task="  "), "--task is empty"),
            (line(starts, runDir="runs/a\0b"), "'runDir' contains a NUL character"),
            (line(starts, env={"A": "x\0"}), "\"env\": variable 'A': its value contains a NUL"),
            ('{"command": ["pi"], "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),
            ("{not json", "not JSON"),
        ]
    ):
        spec = write_spec(tmp_path, [line(starts), line(starts), bad])
        # The first case through the command itself, the others in-process.
        if case == 0:
            proc = run_batch(tmp_path, spec, "--runs-dir", "runs")
        else:
            proc = refused_in_process(tmp_path, monkeypatch, spec, "--runs-dir", "runs")
        stderr = proc.stderr.decode()
        assert proc.returncode == 2, stderr
        [message] = [text for text in stderr.splitlines() if "error:" in text]
        assert f"{spec}: line 3: " in message
        assert named in message
        assert not (tmp_path / "runs").exists()
        assert not marker.exists()
    spec = write_spec(tmp_path, [line(starts)])
    proc = run_batch(tmp_path, spec, "--shard", "4/3", "--runs-dir", "runs")
    assert proc.returncode == 2
    assert "batch: --shard 4/3: I must be between 1 and N" in proc.stderr.decode()
    assert not marker.exists()


def test_a_task_file_past_the_limit_names_its_line_and_the_limit(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    starts = scenario(tmp_path, "starts", [{"write_file": {"path": str(marker)}}, *OK_STEPS])
    big = tmp_path / "task.md"
    with big.open("wb") as file:  # sparse: no disk space, still that long
        file.truncate(MAX_TASK_BYTES + 1)
    too_long = {key: value for key, value in line(starts).items() if key != "task"}
    spec = write_spec(tmp_path, [line(starts), {**too_long, "taskFile": str(big)}])
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs")
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert (
        f"{spec}: line 2: --task-file {big}: longer than 64 MiB (67108864 bytes), "
        "the most a task may be"
    ) in stderr
    assert not (tmp_path / "runs").exists()
    assert not marker.exists()


@pytest.mark.usefixtures("no_leaks")
def test_a_killed_worker_leaves_each_started_run_a_result(tmp_path: Path) -> None:
    slow = scenario(tmp_path, "slow", [{"sleep": 60}])
    spec = write_spec(tmp_path, [line(slow, label=f"r{n}") for n in range(3)])
    proc = subprocess.Popen(
        batch_argv(spec, "--jobs", "2", "--runs-dir", "runs", "--output", "quiet"),
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    runs = tmp_path / "runs"
    try:
        assert wait_until(lambda: sum(state_of(runs / f"r{n}") == "running" for n in range(3)) == 2)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        [worker] = [int(pid) for pid in children]
        os.kill(worker, signal.SIGKILL)
        assert proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    started = [n for n in range(3) if (runs / f"r{n}" / "status.json").exists()]
    assert len(started) == 2
    for n in started:
        result = read_result(runs / f"r{n}" / "result.json")
        assert result["outcome"] == "aborted"
        assert result["error"]["kind"] == "wrapper_killed"


@pytest.mark.usefixtures("no_leaks")
def test_an_orphan_no_run_can_claim_is_ended_at_the_batchs_end(tmp_path: Path) -> None:
    # A process that cleared its environment and left the agent's session:
    # it belongs to no run that can be told, so the batch ends it at its end.
    escape = [
        "env",
        "-i",
        "setsid",
        "-f",
        sys.executable,
        "-c",
        "import time; time.sleep(60)",
        f"escapee-{tmp_path}",
    ]
    leaves = scenario(tmp_path, "escapes", [{"run": {"argv": escape}}, *OK_STEPS])
    spec = write_spec(tmp_path, [line(leaves, label="escapes")])
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "quiet")
    assert proc.returncode == 0, proc.stderr.decode()
    result = read_result(tmp_path / "runs" / "escapes" / "result.json")
    assert result["outcome"] == "ok"
    report = read_report(tmp_path / "runs")
    [warning] = report["warnings"]
    assert warning["code"] == "leftover_processes"
    assert "python" in warning["message"]
    assert "outlived the runs" in proc.stderr.decode()


@pytest.mark.usefixtures("no_leaks")
def test_pretty_output_has_a_line_per_run_and_the_progress(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        [
            line(scenario(tmp_path, "ok", OK_STEPS), label="fine"),
            line(scenario(tmp_path, "bad", [{"stderr": "boom"}, {"exit": 3}]), label="broken"),
        ],
    )
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "pretty", "--jobs", "1")
    assert proc.returncode == 1
    lines = proc.stdout.decode().splitlines()
    runs = tmp_path / "runs"
    # Not on a terminal: a line as each run starts, and as it ends.
    assert lines[0] == f"started fine [{runs / 'fine'}]"
    assert "ok fine (ok, " in lines[1]
    assert lines[1].endswith(f"[{runs / 'fine' / 'result.json'}]")
    assert lines[2] == f"started broken [{runs / 'broken'}]"
    [failed] = [text for text in lines if text.startswith("FAILED broken (error, ")]
    assert "exited with status 3" in failed
    assert lines[-1].startswith("[batch] 2/2 done, 0 running, 1 failed, 0 waiting, 0:")
    assert lines[-1].endswith(f"(finished; {runs / 'batch.json'})")
    # The pretty output said how the failed run ended: stderr does not repeat it.
    assert "exited with status 3" not in proc.stderr.decode()


CRASH_STEPS: list[dict[str, Any]] = [{"stderr": "boom"}, {"exit": 3}]


def eight_tiny_runs(tmp_path: Path) -> Path:
    ok = scenario(tmp_path, "ok", OK_STEPS)
    crash = scenario(tmp_path, "crash", CRASH_STEPS)
    lines = [line(ok, label=f"fine-{n}", task=f"task {n}") for n in range(6)]
    lines.append(line(crash, label="broken"))
    lines.append(line(crash, label="meant-to-crash", expect={"outcome": "error"}))
    return write_spec(tmp_path, lines)


@pytest.mark.usefixtures("no_leaks")
def test_without_a_terminal_a_batch_says_each_start_and_end_and_sums_up(tmp_path: Path) -> None:
    spec = eight_tiny_runs(tmp_path)
    # No --output: stdout is a pipe, not a terminal.
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--jobs", "2")
    assert proc.returncode == 1, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    runs = tmp_path / "runs"
    assert len(lines) == 8 + 8 + 1
    assert sorted(text for text in lines if text.startswith("started ")) == sorted(
        f"started {name} [{runs / name}]"
        for name in [*(f"fine-{n}" for n in range(6)), "broken", "meant-to-crash"]
    )
    ends = [text for text in lines[:-1] if not text.startswith("started ")]
    assert len(ends) == 8
    assert sum(text.startswith("ok fine-") and "(ok, " in text for text in ends) == 6
    [broken] = [text for text in ends if " broken " in text]
    assert broken.startswith("FAILED broken (error, ")
    [meant] = [text for text in ends if " meant-to-crash " in text]
    assert meant.startswith("expected meant-to-crash (error, ")
    assert lines[-1].startswith("[batch] 8/8 done, 0 running, 1 failed, 0 waiting, 0:")
    assert lines[-1].endswith(f"(finished; {runs / 'batch.json'})")
    # The end lines said how each run ended: stderr does not repeat it.
    assert "exited with status 3" not in proc.stderr.decode()


@pytest.mark.usefixtures("no_leaks")
def test_jsonl_output_names_the_run_on_stderr_and_is_quiet_about_an_expected_failure(
    tmp_path: Path,
) -> None:
    spec = eight_tiny_runs(tmp_path)
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "jsonl", "--jobs", "2")
    assert proc.returncode == 1
    events = [json.loads(text) for text in proc.stdout.decode().splitlines()]
    assert {event["type"] for event in events} >= {"spawned", "result_written"}
    errors = [text for text in proc.stderr.decode().splitlines() if "exited" in text]
    [said] = errors
    assert said.startswith("agent-wrapper: broken: error: ")
    assert said.endswith(f"(result: {tmp_path / 'runs' / 'broken' / 'result.json'})")
    assert "meant-to-crash" not in proc.stderr.decode()


@pytest.mark.usefixtures("no_leaks")
def test_a_run_that_misses_its_expectation_by_ending_ok_is_named_on_stderr(
    tmp_path: Path,
) -> None:
    ok = scenario(tmp_path, "ok", OK_STEPS)
    spec = write_spec(tmp_path, [line(ok, label="meant-to-crash", expect={"outcome": "error"})])
    proc = run_batch(tmp_path, spec, "--runs-dir", "runs", "--output", "quiet")
    assert proc.returncode == 1
    assert proc.stdout == b""
    assert (
        "agent-wrapper: meant-to-crash: ok: expected outcome error: it ended ok (result: "
        in proc.stderr.decode()
    )


@pytest.mark.usefixtures("no_leaks")
def test_junit_xml_is_well_formed_with_control_characters_in_a_label(tmp_path: Path) -> None:
    label = "bell\x07 escape\x1b[31m tab\t"
    failing = scenario(tmp_path, "bad", [{"stderr": "boom\x1b[0m"}, {"exit": 3}])
    spec = write_spec(tmp_path, [line(failing, label=label)])
    proc = run_batch(
        tmp_path, spec, "--runs-dir", "runs", "--junit", "junit.xml", "--output", "quiet"
    )
    assert proc.returncode == 1, proc.stderr.decode()
    [case] = ET.parse(tmp_path / "junit.xml").iter("testcase")
    assert case.get("name") == "bell\ufffd escape\ufffd[31m tab\t"
    assert case.find("failure") is not None


def test_one_directory_under_two_spellings_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "started"
    starts = scenario(tmp_path, "starts", [{"write_file": {"path": str(marker)}}, *OK_STEPS])
    (tmp_path / "y").mkdir()
    (tmp_path / "x").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "x")
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    # y2/.. is where the symlink's target is, not where the symlink is.
    (tmp_path / "y2").symlink_to(tmp_path / "elsewhere" / "deep")
    for case, (first, second, named) in enumerate(
        [
            ({"runDir": "x"}, {"runDir": "y/../x"}, "x"),
            ({"runDir": "x"}, {"runDir": "./x/"}, "x"),
            ({"runDir": "x"}, {"runDir": "link"}, "link"),
            ({"runDir": "elsewhere/out"}, {"runDir": "y2/../out"}, "out"),
            ({"runDir": "new/a"}, {"runDir": "new/b/../a"}, "a"),
            ({"label": "fix"}, {"runDir": "runs/fix"}, "runs/fix"),
            ({"label": "fix"}, {"runDir": "link/../runs/fix"}, "fix"),
            ({"result": "out/r.json"}, {"result": "out/./sub/../r.json"}, "r.json"),
            ({"result": "link/r.json"}, {"result": "x/r.json"}, "r.json"),
            ({"label": "fix"}, {"result": "runs/fix/result.json"}, "result.json"),
            ({"label": "fine"}, {"result": "runs/batch.json"}, "where the batch's report"),
            ({"label": "fine"}, {"result": "report.xml"}, "where the JUnit report"),
        ]
    ):
        spec = write_spec(tmp_path, [line(starts, **first), line(starts, **second)])
        options = ("--runs-dir", "runs", "--junit", "report.xml", "--output", "quiet")
        # The first case through the command itself, the others in-process.
        if case == 0:
            proc = run_batch(tmp_path, spec, *options)
        else:
            proc = refused_in_process(tmp_path, monkeypatch, spec, *options)
        stderr = proc.stderr.decode()
        assert proc.returncode == 2, (second, stderr)
        [message] = [text for text in stderr.splitlines() if "error:" in text]
        assert f"{spec}: line 2: " in message
        assert named in message
        assert "of its own" in message
        assert not (tmp_path / "runs").exists()
        assert not marker.exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_while_the_spec_is_checked_ends_the_batch_with_a_report_and_no_run(
    tmp_path: Path, sig: signal.Signals
) -> None:
    marker = tmp_path / "started"
    starts = scenario(tmp_path, "starts", [{"write_file": {"path": str(marker)}}, *OK_STEPS])
    # Checking the first line waits on its task file, a pipe nobody writes.
    fifo = tmp_path / "task.fifo"
    os.mkfifo(fifo)
    first = {**line(starts, label="first"), "taskFile": str(fifo)}
    first.pop("task")
    spec = write_spec(tmp_path, [first, *(line(starts) for _ in range(300))])
    proc = subprocess.Popen(
        batch_argv(
            spec,
            "--runs-dir",
            "runs",
            "--junit",
            "junit.xml",
            "--html",
            "report.html",
            "--output",
            "quiet",
        ),
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    writer = None
    try:
        writer = os.open(fifo, os.O_WRONLY)  # returns once the batch reads the task
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=HANG_LIMIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if writer is not None:
            os.close(writer)
    assert proc.returncode == 128 + sig, stderr.decode()
    report = read_report(tmp_path / "runs")
    assert report["exitStatus"] == 128 + sig
    assert (report["runs"], report["results"], report["success"]) == (0, [], False)
    [warning] = report["warnings"]
    assert warning["code"] == "stopped_before_start"
    assert f"stopped by {sig.name} while the spec was being checked" in warning["message"]
    assert warning["message"] in stderr.decode()
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert suite.get("tests") == "0"
    page = (tmp_path / "report.html").read_text()
    assert "agent-wrapper report: 0 runs, 0 not passed" in page
    assert f"stopped by {sig.name} while the spec was being checked" in page
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["batch.json"]
    assert not marker.exists()


def test_a_shared_directory_is_refused_whichever_shard_runs_the_lines(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    starts = scenario(tmp_path, "starts", [{"write_file": {"path": str(marker)}}, *OK_STEPS])
    spec = write_spec(tmp_path, [line(starts, runDir="x"), line(starts, runDir="y/../x")])
    for index in (1, 2):
        proc = run_batch(tmp_path, spec, "--shard", f"{index}/2", "--runs-dir", f"s{index}")
        stderr = proc.stderr.decode()
        assert proc.returncode == 2, stderr
        assert f"{spec}: line 2: " in stderr
        assert "is line 1's too" in stderr
        assert not (tmp_path / f"s{index}").exists()
    assert not marker.exists()


def _said_something(run_dir: Path) -> bool:
    try:
        status = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return False
    return status.get("lastEventAt") is not None
