"""Where a run's control socket lives and what ``steer`` and ``abort`` say
when they cannot reach it: a directory another user made first takes no
run's control away; a run with no socket says so at its start, and its
senders are told it takes no requests, not that it is dead; a busy run
gets its own exit status; a batch line not started yet is named as such."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
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
from tests.test_external_steer import Running, answer, cli, long_tool

pytestmark = pytest.mark.usefixtures("no_leaks")

#: The exit status of ``steer`` and ``abort`` for a run too busy to take the request.
EX_TEMPFAIL = 75


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a path short enough for sockets below it (pytest's
    own temporary paths may not be)."""
    path = Path(tempfile.mkdtemp(prefix="awt-", dir="/tmp"))
    yield path
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files:
            os.unlink(os.path.join(root, name))
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700)
            os.rmdir(os.path.join(root, name))
    os.rmdir(path)


def _too_deep(tmp_path: Path) -> Path:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    return deep


def test_a_directory_made_first_by_someone_else_does_not_take_control_away(
    tmp_path: Path, short_dir: Path
) -> None:
    # Where a fixed socket directory would be, made first by someone else
    # (open to all: not this user's private directory).
    squatted = short_dir / "agent-wrapper"
    squatted.mkdir()
    squatted.chmod(0o777)
    (squatted / "keep").write_text("theirs")
    deep = _too_deep(tmp_path)
    run = Running(
        deep,
        [long_tool(), *answer("Built it.")],
        [answer("Steered.")],
        options=["--steer-timeout", "0.5"],
        env={"XDG_RUNTIME_DIR": str(short_dir)},
    )
    path = run.status()["control"]
    folder = Path(path).parent
    assert folder.parent == short_dir
    assert folder != squatted
    info = os.lstat(folder)
    assert stat.S_IMODE(info.st_mode) == 0o700
    assert info.st_uid == os.getuid()
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "go", "--wait", "30")
    assert steered.returncode == 0, steered.stderr
    code, result, _, _ = run.finish()
    assert code == 0
    assert result["finalText"] == "Steered."
    assert [w["code"] for w in result["warnings"]] == []
    # The directory made for the run goes with it; the other one is left alone.
    assert not folder.exists()
    assert (squatted / "keep").read_text() == "theirs"


def test_a_killed_wrappers_socket_directory_goes_with_its_run(
    tmp_path: Path, short_dir: Path
) -> None:
    run = Running(
        _too_deep(tmp_path), [long_tool(60), *answer("Built it.")], env={"TMPDIR": str(short_dir)}
    )
    folder = Path(run.status()["control"]).parent
    assert folder.is_dir()
    (worker,) = _children_of(run.proc.pid)
    os.kill(worker, signal.SIGKILL)
    assert run.proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGKILL
    assert read_result(run.run_dir / "result.json")["error"]["kind"] == "wrapper_killed"
    assert not folder.exists()


def _children_of(pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(child) for child in (task / "children").read_text().split()]
    return children


def test_a_run_without_a_socket_says_so_at_its_start_and_to_senders(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".agent-wrapper-run").write_text('{"runId": "earlier", "version": "0.1.0"}')
    # Something not a socket where the socket goes: left alone, so no socket.
    os.mkfifo(run_dir / "control.sock")
    scenario = write_scenario(tmp_path, [long_tool(60), *answer("Built it.")])
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--run-dir"]
    argv += [str(run_dir), "--task", "Go", "--", str(FAKE_PI), "--mode", "json", "-p"]
    argv += ["--scenario", str(scenario)]
    proc = subprocess.Popen(
        argv,
        env=agent_env(tmp_path, HOME=str(tmp_path)),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        first = _first_line(proc)
        assert first.startswith("agent-wrapper: warning: the run takes no steer or abort"), first
        status = _status(run_dir)
        validate("status", status)
        assert status["state"] != "finished"
        assert status["control"] is None
        assert "is not a socket" in status["controlUnavailable"]
        for command in (["steer", str(run_dir), "--text", "x"], ["abort", str(run_dir)]):
            refused = cli(*command)
            assert refused.returncode == 1
            assert "the run takes no steer or abort from outside" in refused.stderr
            assert "not answering" not in refused.stderr
            assert "killed" not in refused.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    result = read_result(run_dir / "result.json")
    assert [w["code"] for w in result["warnings"]] == ["control_unavailable"]


def _first_line(proc: subprocess.Popen[bytes]) -> str:
    """The first line the run writes on stderr, while it runs."""
    assert proc.stderr is not None
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(proc.stderr.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(HANG_LIMIT)
    assert proc.poll() is None, "the run ended before it said anything"
    return got[0].decode() if got else ""


def test_a_busy_run_gets_exit_75_not_the_not_running_status(tmp_path: Path) -> None:
    run = Running(tmp_path, [long_tool(60), *answer("Built it.")])
    path = run.status()["control"]
    # Every connection the run serves at once is taken by a client that
    # sends nothing yet (each is held until the request's time is up).
    held: list[socket.socket] = []
    try:
        for _ in range(64):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)
            held.append(sock)
        time.sleep(0.3)  # the run has accepted them all
        for command in (["steer", str(run.run_dir), "--text", "x"], ["abort", str(run.run_dir)]):
            busy = cli(*command)
            assert busy.returncode == EX_TEMPFAIL, busy.stderr
            assert "busy" in busy.stderr
    finally:
        for sock in held:
            sock.close()
    aborted = cli("abort", str(run.run_dir))
    assert aborted.returncode == 0, aborted.stderr
    code, result, _, _ = run.finish()
    assert code == 143
    assert result["error"]["kind"] == "abort_requested"


def test_a_batch_line_not_started_yet_is_named_with_how_to_stop_the_batch(
    tmp_path: Path,
) -> None:
    slow = write_scenario(tmp_path, [{"sleep": 60}])
    command = [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(slow)]
    spec = tmp_path / "spec.jsonl"
    spec.write_text(
        "".join(
            json.dumps({"command": command, "task": "Do it", "label": label}) + "\n"
            for label in ("first", "second")
        )
    )
    argv = [sys.executable, "-m", "wrapper", "batch", str(spec), "--jobs", "1"]
    argv += ["--runs-dir", "runs", "--output", "quiet"]
    proc = subprocess.Popen(argv, env=agent_env(tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL)
    runs = tmp_path / "runs"
    try:
        assert wait_until(lambda: state_of(runs / "first") == "running")
        assert not (runs / "second").exists()
        for op, extra in (("abort", []), ("steer", ["--text", "x"])):
            said = cli(op, str(runs / "second"), *extra)
            assert said.returncode == 1, said.stderr
            assert "line 2 (second) of the batch running in" in said.stderr
            assert "has not started yet" in said.stderr
            assert f"kill -TERM {proc.pid}" in said.stderr
            assert "is not a directory" not in said.stderr
        # A path that is no line of the batch is still no run's directory.
        stray = cli("abort", str(runs / "third"))
        assert stray.returncode == 2
        assert "is not a directory" in stray.stderr
        # What it says to do stops the batch.
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=HANG_LIMIT) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for label in ("first", "second"):
        assert read_result(runs / label / "result.json")["outcome"] == "aborted"
    # The batch has ended: nothing says it runs any more.
    assert not (runs / ".agent-wrapper-batch").exists()


def _status(run_dir: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return data
