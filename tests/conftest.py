"""Shared helpers: run the real wrapper against the fake agent and read what it left."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parent.parent
FAKE_PI = ROOT / "fixtures" / "fake_agent" / "pi"
FAKE_AGENT = ROOT / "fixtures" / "fake_agent" / "fake-agent"
SCHEMAS = ROOT / "wrapper" / "schemas"
SHARED_STREAMS = ROOT.parent / "shared" / "streams"

#: Generous bound for a whole wrapper run in tests: only there to catch hangs.
HANG_LIMIT = 60.0


@cache
def schema(name: str) -> Any:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def validate(name: str, instance: Any) -> None:
    jsonschema.validate(instance, schema(name))


@dataclass
class Run:
    returncode: int
    result: dict[str, Any]
    events: list[dict[str, Any]]
    stdout_events: list[dict[str, Any]]
    stderr: str
    run_dir: Path
    elapsed: float
    status: dict[str, Any] = field(default_factory=dict)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.stdout_events if e["type"] == kind]


def read_result(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text())
    validate("result", result)
    return result


def read_events(path: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    for event in events:
        validate("event", event)
    return events


def parse_stdout_events(stdout: bytes) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in stdout.decode().splitlines() if line.strip()]
    for event in events:
        validate("event", event)
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), "stdout events are numbered from 1 without gaps"
    return events


def write_scenario(directory: Path, steps: Sequence[dict[str, Any]], **extra: Any) -> Path:
    path = directory / "scenario.json"
    path.write_text(json.dumps({"version": 1, **extra, "steps": list(steps)}))
    return path


def wrapper_argv(
    run_dir: Path | None,
    scenario: Path,
    *,
    task: str | None = "Do the task",
    options: Sequence[str] = (),
    agent: Path = FAKE_PI,
) -> list[str]:
    """``agent-wrapper run`` on the fake agent; later ``options`` override earlier ones."""
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "jsonl"]
    if run_dir is not None:
        argv += ["--run-dir", str(run_dir)]
    argv += list(options)
    if task is not None:
        argv += ["--task", task]
    return [*argv, "--", str(agent), "--mode", "json", "-p", "--scenario", str(scenario)]


def agent_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_WRAPPER_")}
    env["FAKE_AGENT_MARKER"] = f"marker-{tmp_path.name}"
    env["FAKE_AGENT_RECORD"] = str(tmp_path / "record.jsonl")
    env["FAKE_AGENT_HOME"] = str(tmp_path / "agent-home")
    env.update(extra)
    return env


def invoke(
    argv: Sequence[str], tmp_path: Path, *, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run a command the way a runner would: no stdin, output captured, the test's env."""
    return subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def run_wrapper(
    tmp_path: Path,
    steps: Sequence[dict[str, Any]],
    *,
    task: str | None = "Do the task",
    options: Sequence[str] = (),
    env: dict[str, str] | None = None,
    scenario_extra: dict[str, Any] | None = None,
) -> Run:
    scenario = write_scenario(tmp_path, steps, **(scenario_extra or {}))
    run_dir = tmp_path / "run"
    started = time.monotonic()
    proc = subprocess.run(
        wrapper_argv(run_dir, scenario, task=task, options=options),
        capture_output=True,
        timeout=HANG_LIMIT,
        env=env if env is not None else agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    elapsed = time.monotonic() - started
    result_path = run_dir / "result.json"
    assert result_path.exists(), f"no result.json; stderr: {proc.stderr.decode()}"
    status = json.loads((run_dir / "status.json").read_text())
    validate("status", status)
    return Run(
        returncode=proc.returncode,
        result=read_result(result_path),
        events=read_events(run_dir / "events.jsonl"),
        stdout_events=parse_stdout_events(proc.stdout),
        stderr=proc.stderr.decode(errors="replace"),
        run_dir=run_dir,
        elapsed=elapsed,
        status=status,
    )


def processes_matching(needle: str) -> list[tuple[int, str]]:
    """Live (non-zombie) processes whose command line contains ``needle``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state != "Z":
            found.append((int(entry.name), cmdline))
    return found


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def state_of(run_dir: Path) -> str | None:
    """The run's state in status.json; None while there is none to read."""
    try:
        state = json.loads((run_dir / "status.json").read_text()).get("state")
    except (OSError, ValueError):
        return None
    return state if isinstance(state, str) else None


@pytest.fixture(scope="session", autouse=True)
def own_price_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The price lookups the tests' runs make (a run's end prices a cost its
    agent did not report) are cached in the session's own folder, never in
    the user's cache directory; one folder for the session, so that each
    model is looked up once."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture
def no_leaks(tmp_path: Path) -> Iterator[None]:
    """Fails the test if any process started for it is still alive afterwards."""
    yield
    needles = [str(tmp_path), f"marker-{tmp_path.name}"]

    def leaked_now() -> list[tuple[int, str]]:
        return [p for needle in needles for p in processes_matching(needle)]

    # A process killed a moment ago may still be on its way out.
    wait_until(lambda: not leaked_now(), timeout=10.0)
    leaked = leaked_now()
    for pid, _ in leaked:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not leaked, f"processes outlived the run: {leaked}"
