"""The guardian's two waiters: the compiled one (``wrapper/process/waiter.c``,
built with the package) and the Python one (``guardian_waiter.py``), which
waits where the compiled one was not built or does not start. Each behaviour
of the guardian holds with either: stop signals passed on once, a killed
worker's run ended with its result, leftovers ended, a batch's runs each
ended, an exit status passed through; and a compiled waiter that is missing
or cannot start leaves the run to the Python one."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    ROOT,
    agent_env,
    processes_matching,
    read_result,
    state_of,
    wait_until,
    wrapper_argv,
    write_scenario,
)
from tests.test_batch import batch_argv, line, scenario, write_spec
from tests.test_hardening import _starting_status
from wrapper.core.signals import STOP_SIGNALS
from wrapper.process import guardian

pytestmark = pytest.mark.usefixtures("no_leaks")

WAITERS = ("compiled", "python")
#: The compiled waiter as the package's own build made it.
PROGRAM = Path(guardian.__file__).parent / guardian.WAITER_PROGRAM

WORKING: list[dict[str, Any]] = [
    {"assistant": {"text": "working", "stopReason": "toolUse"}},
    {"tool": {"duration": 60}},
]

#: Stands in for the command line of a run: forks the guardian, then as its
#: worker announces COUNT runs (long directory names: a batch's worth of
#: announcement, past what a pipe holds), leaves a process behind, and ends
#: as MODE says (an exit status, or ``killed``: its own SIGKILL).
GUARDED = """
import os, signal, sys, time
from pathlib import Path
from wrapper.core.signals import STOP_SIGNALS
from wrapper.process import guardian

mode, base, count, name = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
guardian.fork_for_run([sys.argv[0], "run"])
for n in range(count):
    run_dir = base / f"{n:04d}-{'r' * 200}"
    guardian.announce(f"run-{n}", run_dir, run_dir / "result.json", more=n < count - 1)
if os.fork() == 0:
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", "left-" + name])
if mode == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
os._exit(int(mode))
"""


@pytest.fixture(params=WAITERS)
def waiter(request: pytest.FixtureRequest) -> str:
    if request.param == "compiled" and not os.access(PROGRAM, os.X_OK):
        pytest.skip(f"no compiled waiter at {PROGRAM} (no C compiler when the package was built)")
    chosen: str = request.param
    return chosen


def _env(tmp_path: Path, waiter: str) -> dict[str, str]:
    """The test's environment, the guardian choosing ``waiter``."""
    chosen = {guardian.WAITER_VARIABLE: guardian.PYTHON_WAITER} if waiter == "python" else {}
    return agent_env(tmp_path, **chosen)


def waiting_in(pid: int) -> str | None:
    """Which waiter process ``pid`` (a guardian) waits in: ``compiled``,
    ``python``, or ``None`` (not waiting yet, or gone)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if Path(exe).name == guardian.WAITER_PROGRAM:
        return "compiled"
    if words[1:4] == [b"-I", b"-S", b"-c"] and b"guardian_waiter" in words[4]:
        return "python"
    return None


def _children_of(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The processes a test starts, killed should the test end first."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def _start_run(
    tmp_path: Path,
    env: dict[str, str],
    started: list[subprocess.Popen[bytes]],
    steps: list[dict[str, Any]],
) -> tuple[subprocess.Popen[bytes], Path]:
    run_dir = tmp_path / "run"
    wrapper = subprocess.Popen(
        wrapper_argv(run_dir, write_scenario(tmp_path, steps)),
        env=env,
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    started.append(wrapper)
    return wrapper, run_dir


def _running(wrapper: subprocess.Popen[bytes], run_dir: Path, waiter: str) -> None:
    assert wait_until(lambda: state_of(run_dir) == "running", HANG_LIMIT), "the run never ran"
    assert wait_until(lambda: waiting_in(wrapper.pid) == waiter, HANG_LIMIT), (
        f"the guardian waits in {waiting_in(wrapper.pid)}, not the {waiter} waiter"
    )


def test_the_package_as_set_up_has_its_compiled_waiter() -> None:
    # Built by setup.py with the package, wherever a C compiler is found:
    # without it every run would silently cost a Python waiter more.
    if not (shutil.which("cc") or shutil.which("gcc") or os.environ.get("CC")):
        pytest.skip("no C compiler here: the Python waiter is the one used")
    assert os.access(PROGRAM, os.X_OK), f"{PROGRAM} was not built: run scripts/setup"
    assert PROGRAM.stat().st_mtime >= (ROOT / "wrapper/process/waiter.c").stat().st_mtime, (
        f"{PROGRAM} is older than its source: run scripts/setup"
    )


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT], ids=lambda s: s.name
)
def test_a_stop_signal_is_passed_on_and_the_run_ends_aborted(
    tmp_path: Path, waiter: str, started: list[subprocess.Popen[bytes]], sig: signal.Signals
) -> None:
    wrapper, run_dir = _start_run(tmp_path, _env(tmp_path, waiter), started, WORKING)
    _running(wrapper, run_dir, waiter)
    wrapper.send_signal(sig)
    assert wrapper.wait(timeout=HANG_LIMIT) == 128 + sig
    result = read_result(run_dir / "result.json")
    assert (result["outcome"], result["exitStatus"]) == ("aborted", 128 + sig)
    assert sig.name in result["error"]["message"]


def test_a_sigkilled_worker_leaves_a_wrapper_killed_result(
    tmp_path: Path, waiter: str, started: list[subprocess.Popen[bytes]]
) -> None:
    steps = [{"spawn": {"seconds": 60, "ignoreSigterm": True}}, *WORKING]
    wrapper, run_dir = _start_run(tmp_path, _env(tmp_path, waiter), started, steps)
    _running(wrapper, run_dir, waiter)
    assert wait_until(lambda: bool(processes_matching(f"marker-{tmp_path.name}")))
    [worker] = _children_of(wrapper.pid)
    os.kill(worker, signal.SIGKILL)
    assert wrapper.wait(timeout=HANG_LIMIT) == 128 + signal.SIGKILL
    assert not processes_matching(f"marker-{tmp_path.name}")
    result = read_result(run_dir / "result.json")
    assert (result["outcome"], result["exitStatus"]) == ("aborted", 128 + signal.SIGKILL)
    assert result["error"]["kind"] == "wrapper_killed"
    assert f"pid {worker}" in result["error"]["message"]


@pytest.mark.parametrize(("stop_reason", "code"), [("stop", 0), ("error", 1)])
def test_the_runs_exit_status_is_passed_through(
    tmp_path: Path,
    waiter: str,
    started: list[subprocess.Popen[bytes]],
    stop_reason: str,
    code: int,
) -> None:
    steps: list[dict[str, Any]] = [
        {"assistant": {"text": "testing", "toolCalls": [{"name": "bash"}]}},
        {"tool": {"name": "bash", "duration": 2}},
        {"assistant": {"text": "Done.", "stopReason": stop_reason}},
    ]
    wrapper, run_dir = _start_run(tmp_path, _env(tmp_path, waiter), started, steps)
    _running(wrapper, run_dir, waiter)
    assert wrapper.wait(timeout=HANG_LIMIT) == code
    assert read_result(run_dir / "result.json")["exitStatus"] == code


@pytest.mark.parametrize("mode", ["0", "3", "killed"])
def test_what_the_worker_left_is_ended_and_every_run_announced_is_known(
    tmp_path: Path, waiter: str, mode: str
) -> None:
    # 600 runs announced, about 0.3 MB: more than a pipe holds, so the waiter
    # must read as the worker writes, and hand all of it to the cleanup.
    count = 600
    last = tmp_path / f"{count - 1:04d}-{'r' * 200}"
    last.mkdir()
    status = {**_starting_status(f"run-{count - 1}"), "state": "running"}
    (last / "status.json").write_text(json.dumps(status))
    name = f"marker-{tmp_path.name}"
    done = subprocess.run(
        [sys.executable, "-c", GUARDED, mode, str(tmp_path), str(count), name],
        env=_env(tmp_path, waiter),
        cwd=ROOT,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=HANG_LIMIT,
        check=False,
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == (128 + signal.SIGKILL if mode == "killed" else int(mode)), stderr
    assert "Traceback" not in stderr
    # The guardian ended the process the worker left before it exited.
    assert not processes_matching(f"left-{name}")
    if mode == "killed":
        # The run announced last is known to the cleanup: its result is written.
        result = read_result(last / "result.json")
        assert (result["runId"], result["error"]["kind"]) == (f"run-{count - 1}", "wrapper_killed")


def test_a_killed_batch_worker_leaves_each_started_run_a_result(
    tmp_path: Path, waiter: str, started: list[subprocess.Popen[bytes]]
) -> None:
    slow = scenario(tmp_path, "slow", [{"sleep": 60}])
    spec = write_spec(tmp_path, [line(slow, label=f"r{n}") for n in range(2)])
    batch = subprocess.Popen(
        batch_argv(spec, "--jobs", "2", "--runs-dir", "runs", "--output", "quiet"),
        env=_env(tmp_path, waiter),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    started.append(batch)
    runs = tmp_path / "runs"
    assert wait_until(lambda: all(state_of(runs / f"r{n}") == "running" for n in range(2)))
    assert waiting_in(batch.pid) == waiter
    [worker] = _children_of(batch.pid)
    os.kill(worker, signal.SIGKILL)
    assert batch.wait(timeout=HANG_LIMIT) == 128 + signal.SIGKILL
    for n in range(2):
        result = read_result(runs / f"r{n}" / "result.json")
        assert (result["outcome"], result["error"]["kind"]) == ("aborted", "wrapper_killed")


@pytest.mark.parametrize("program", ["missing", "not executable", "not a program"])
def test_a_compiled_waiter_that_cannot_start_leaves_the_run_to_the_python_one(
    tmp_path: Path, started: list[subprocess.Popen[bytes]], program: str
) -> None:
    path = tmp_path / "waiter"
    if program != "missing":
        # Copied from elsewhere, built for another machine: exec fails.
        path.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(100))
        path.chmod(0o644 if program == "not executable" else 0o755)
    env = agent_env(tmp_path, **{guardian.WAITER_VARIABLE: str(path)})
    steps: list[dict[str, Any]] = [
        {"assistant": {"text": "testing", "toolCalls": [{"name": "bash"}]}},
        {"tool": {"name": "bash", "duration": 2}},
        {"assistant": {"text": "Done.", "stopReason": "stop"}},
    ]
    wrapper, run_dir = _start_run(tmp_path, env, started, steps)
    _running(wrapper, run_dir, "python")
    assert wrapper.wait(timeout=HANG_LIMIT) == 0
    assert read_result(run_dir / "result.json")["outcome"] == "ok"


def _build_step() -> Any:
    """The package's ``setup.py``, imported (it builds nothing on import)."""
    spec = importlib.util.spec_from_file_location("package_setup", ROOT / "setup.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_build_without_a_c_compiler_says_so_in_one_line_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    build = _build_step()
    program = tmp_path / guardian.WAITER_PROGRAM
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert build.compile_waiter(str(ROOT / "wrapper/process/waiter.c"), str(program)) is False
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1, said
    assert "could not compile" in said[0]
    assert "the guardian will wait in Python" in said[0]
    assert not program.exists()


def test_a_build_without_a_c_compiler_leaves_no_waiter_of_an_earlier_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # pip builds in the source tree's build/ and an editable install beside the
    # source: a program of an earlier build there would be installed and used
    # (built from an older waiter.c), whatever the line says.
    program = tmp_path / guardian.WAITER_PROGRAM
    program.write_bytes(b"#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert (
        _build_step().compile_waiter(str(ROOT / "wrapper/process/waiter.c"), str(program)) is False
    )
    assert "the guardian will wait in Python" in capsys.readouterr().err
    assert not program.exists()


def test_the_build_compiles_the_waiter_with_the_platforms_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not shutil.which("cc"):
        pytest.skip("no C compiler here")
    monkeypatch.setenv("CC", "cc")
    program = tmp_path / guardian.WAITER_PROGRAM
    assert _build_step().compile_waiter(str(ROOT / "wrapper/process/waiter.c"), str(program))
    # Started with arguments it does not understand, it says so and exits 2.
    done = subprocess.run([str(program)], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "arguments it does not understand" in done.stderr


def test_the_compiled_waiter_passes_on_the_stop_signals_everyone_else_uses() -> None:
    source = (ROOT / "wrapper/process/waiter.c").read_text()
    found = re.search(r"stop_signals\[\] = \{([^}]*)\}", source)
    assert found is not None
    assert [name.strip() for name in found.group(1).split(",")] == [s.name for s in STOP_SIGNALS]


def test_the_benchmarks_measure_the_waiter_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # benchmarks/run with AGENT_WRAPPER_GUARDIAN_WAITER=python measures the
    # Python waiter (it measured the compiled one, saying nothing); a
    # surrounding run's identity still stays out.
    from benchmarks.procs import child_env

    monkeypatch.setenv(guardian.WAITER_VARIABLE, guardian.PYTHON_WAITER)
    monkeypatch.setenv("AGENT_WRAPPER_RUN_ID", "outer")
    env = child_env(tmp_path)
    assert env[guardian.WAITER_VARIABLE] == guardian.PYTHON_WAITER
    assert "AGENT_WRAPPER_RUN_ID" not in env


@pytest.mark.parametrize("closed", ["<&- >&-", "2>&-", "<&- >&- 2>&-"])
def test_a_run_started_with_its_standard_streams_closed_ends_ok(
    tmp_path: Path, waiter: str, closed: str
) -> None:
    # A runner (a daemon, a service manager) may start the wrapper with stdin,
    # stdout or stderr closed: the run's exit status is still the run's (it
    # was 1 with a traceback for an ok run), and its files hold only their own.
    steps: list[dict[str, Any]] = [{"assistant": {"text": "Done.", "stopReason": "stop"}}]
    run_dir = tmp_path / "run"
    argv = wrapper_argv(run_dir, write_scenario(tmp_path, steps))
    done = subprocess.run(
        ["sh", "-c", f'exec "$@" {closed}', "sh", *argv],
        env=_env(tmp_path, waiter), capture_output=True, text=True, timeout=HANG_LIMIT,
        check=False,
    )  # fmt: skip
    assert "Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr
    assert read_result(run_dir / "result.json")["outcome"] == "ok"
    for event in (run_dir / "events.jsonl").read_text().splitlines():
        json.loads(event)


def test_a_big_announcement_is_handed_to_the_cleanup_where_tmp_is_read_only(
    started: list[subprocess.Popen[bytes]],
) -> None:
    # A container with a read-only root has no writable /tmp: an announcement
    # past a pipe's size (a batch, an MCP server of many runs) still reaches
    # the cleanup, so the run announced last gets its result (it did not).
    if not os.access(PROGRAM, os.X_OK):
        pytest.skip("no compiled waiter")
    if not shutil.which("unshare") or any(
        str(path).startswith("/tmp/") for path in (sys.executable, ROOT)
    ):
        pytest.skip("needs unshare, and the interpreter and the source outside /tmp")
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o ro tmpfs /tmp"],
        capture_output=True, check=False,
    )  # fmt: skip
    if probe.returncode != 0 or not os.access("/dev/shm", os.W_OK):
        pytest.skip("cannot mount a read-only /tmp here (not root), or no /dev/shm")
    base = Path(tempfile.mkdtemp(prefix="read-only-tmp-", dir="/dev/shm"))
    try:
        count = 600
        last = base / f"{count - 1:04d}-{'r' * 200}"
        last.mkdir()
        status = {**_starting_status(f"run-{count - 1}"), "state": "running"}
        (last / "status.json").write_text(json.dumps(status))
        name = f"marker-{base.name}"
        script = 'mount -t tmpfs -o ro tmpfs /tmp && exec "$@"'
        command = [sys.executable, "-c", GUARDED, "killed", str(base), str(count), name]
        done = subprocess.run(
            ["unshare", "-m", "sh", "-c", script, "sh", *command],
            env=agent_env(base, PYTHONPATH=str(ROOT)), cwd=ROOT, capture_output=True,
            stdin=subprocess.DEVNULL, timeout=HANG_LIMIT, check=False,
        )  # fmt: skip
        stderr = done.stderr.decode(errors="replace")
        assert done.returncode == 128 + signal.SIGKILL, stderr
        assert "could not all be handed" not in stderr
        assert not processes_matching(name)
        result = read_result(last / "result.json")
        assert (result["runId"], result["error"]["kind"]) == (f"run-{count - 1}", "wrapper_killed")
    finally:
        shutil.rmtree(base, ignore_errors=True)


#: Stands in for the command line of a run whose guardian gets SIGINT in its
#: first instant, while it sets itself up; the worker (its stop signals
#: recorded from the start here, so that only the guardian's handling is
#: tried) announces its run and ends as a run ends on SIGINT.
EARLY_SIGINT = """
import os, signal, sys, time
from pathlib import Path
from wrapper.process import guardian

setting_up = guardian._prctl

def prctl(option, value):
    if option == guardian.PR_SET_CHILD_SUBREAPER:  # in the guardian, just forked
        os.kill(os.getpid(), signal.SIGINT)
    return setting_up(option, value)

guardian._prctl = prctl
early = guardian.record_stop_signals()
guardian.fork_for_run([sys.argv[0], "run"])
guardian.announce("early", Path(sys.argv[1]), Path(sys.argv[1]) / "result.json")
deadline = time.monotonic() + 10
while not early and time.monotonic() < deadline:
    time.sleep(0.01)
os._exit(128 + early[0] if early else 99)
"""


def test_a_stop_signal_in_the_guardians_first_instant_is_passed_on(
    tmp_path: Path, waiter: str
) -> None:
    # It reached the guardian's Python handling halfway through its set-up
    # instead: lost (or, with Python's default handler, a traceback and the
    # guardian dead), the run going on.
    done = subprocess.run(
        [sys.executable, "-c", EARLY_SIGINT, str(tmp_path / "run")],
        env=_env(tmp_path, waiter), cwd=ROOT, capture_output=True,
        stdin=subprocess.DEVNULL, timeout=HANG_LIMIT, check=False,
    )  # fmt: skip
    stderr = done.stderr.decode(errors="replace")
    assert "Traceback" not in stderr
    assert done.returncode == 128 + signal.SIGINT, stderr
