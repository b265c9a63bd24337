"""The guardian (the process the runner started) and the worker it forks: a
kill of either, or of the runner's whole process group, still ends every
process of the run and leaves its result; stop signals reach the run once."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    agent_env,
    processes_matching,
    read_result,
    validate,
    wait_until,
    wrapper_argv,
    write_scenario,
)

pytestmark = pytest.mark.usefixtures("no_leaks")

#: Double-forks, leaves the session and execs a sleeper with an empty
#: environment: nothing marks it as the run's but where it came from.
ESCAPE = (
    "import os, sys\n"
    "if os.fork(): sys.exit(0)\n"
    "os.setsid()\n"
    "if os.fork(): os._exit(0)\n"
    "os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', "
    "sys.argv[1]], {})\n"
)


def _scenario(tmp_path: Path) -> Path:
    return write_scenario(
        tmp_path,
        [
            {"spawn": {"seconds": 60}},
            {"spawn": {"seconds": 60, "ignoreSigterm": True}},
            {
                "run": {
                    "argv": [sys.executable, "-c", ESCAPE, f"escapee-{tmp_path.name}"],
                    "timeout": 30,
                }
            },
            {"assistant": {"text": "working", "stopReason": "toolUse"}},
            {"tool": {"duration": 60}},
        ],
    )


def _marked(tmp_path: Path) -> list[tuple[int, str]]:
    return processes_matching(f"marker-{tmp_path.name}")


def _escapees(tmp_path: Path) -> list[tuple[int, str]]:
    return processes_matching(f"escapee-{tmp_path.name}")


def _escaped(tmp_path: Path) -> bool:
    """Whether the escapee runs as it means to: alone, its environment empty."""
    found = _escapees(tmp_path)
    try:
        return len(found) == 1 and not Path(f"/proc/{found[0][0]}/environ").read_bytes()
    except OSError:
        return False


def _children_of(pid: int) -> list[int]:
    children: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(child) for child in (task / "children").read_text().split()]
    except OSError:
        pass
    return children


def _status(run_dir: Path) -> dict[str, Any]:
    value = json.loads((run_dir / "status.json").read_text())
    assert isinstance(value, dict)
    return value


def _start(tmp_path: Path, **popen: Any) -> tuple[subprocess.Popen[bytes], Path]:
    run_dir = tmp_path / "run"
    wrapper = subprocess.Popen(
        wrapper_argv(run_dir, _scenario(tmp_path)),
        env=agent_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        **popen,
    )
    # Both children running, the escapee out of the agent's session, its
    # environment empty.
    assert wait_until(lambda: len(_marked(tmp_path)) == 2 and _escaped(tmp_path), 30)
    return wrapper, run_dir


@pytest.mark.parametrize("victim", ["wrapper", "worker", "wrapper's group"])
def test_a_sigkill_of_either_process_ends_the_whole_run(tmp_path: Path, victim: str) -> None:
    group = {"process_group": 0} if victim == "wrapper's group" else {}
    wrapper, run_dir = _start(tmp_path, **group)
    try:
        workers = _children_of(wrapper.pid)
        assert len(workers) == 1, workers
        if victim == "wrapper":
            os.kill(wrapper.pid, signal.SIGKILL)
        elif victim == "worker":
            os.kill(workers[0], signal.SIGKILL)
        else:
            os.killpg(wrapper.pid, signal.SIGKILL)
        code = wrapper.wait(timeout=HANG_LIMIT)
        assert wait_until(lambda: not _marked(tmp_path) and not _escapees(tmp_path), 20), (
            _marked(tmp_path),
            _escapees(tmp_path),
        )
        result_path = run_dir / "result.json"
        assert wait_until(result_path.exists, timeout=20)
        # What is left of the wrapper is gone once it wrote the result.
        assert wait_until(lambda: not processes_matching(str(run_dir)), timeout=20)
    finally:
        wrapper.kill()
        wrapper.wait()
    # The runner sees the exit status result.json reports.
    assert code == (128 + signal.SIGKILL if victim == "worker" else -signal.SIGKILL)
    result = read_result(result_path)
    assert (result["outcome"], result["success"]) == ("aborted", False)
    assert result["exitStatus"] == 128 + signal.SIGKILL
    assert result["error"]["kind"] == "wrapper_killed"
    assert result["signalsSent"][0]["signal"] == "SIGTERM"
    status = _status(run_dir)
    validate("status", status)
    assert (status["state"], status["outcome"]) == ("finished", "aborted")
    assert status["wrapperPid"] == wrapper.pid
    shown = subprocess.run(
        [sys.executable, "-m", "wrapper", "status", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        check=False,
    )
    assert shown.returncode == 1
    assert "killed" in shown.stdout


def test_ctrl_c_at_a_terminal_ends_the_run_once(tmp_path: Path) -> None:
    # A terminal sends SIGINT to its foreground process group: the wrapper's,
    # which the worker has left. The run must see it, and only once (a
    # second signal would mean "kill at once").
    wrapper, run_dir = _start(tmp_path, process_group=0)
    try:
        os.killpg(wrapper.pid, signal.SIGINT)
        code = wrapper.wait(timeout=HANG_LIMIT)
    finally:
        wrapper.kill()
        wrapper.wait()
    assert code == 128 + signal.SIGINT
    result = read_result(run_dir / "result.json")
    assert (result["outcome"], result["exitStatus"]) == ("aborted", 128 + signal.SIGINT)
    assert "SIGINT" in result["error"]["message"]
    assert result["signalsSent"][0]["signal"] == "SIGTERM"
    assert not _marked(tmp_path)
    assert not _escapees(tmp_path)


def test_a_status_change_held_back_is_written_while_the_agent_is_silent(
    tmp_path: Path,
) -> None:
    # The tool starts right after the agent is seen running: status.json was
    # just written, so the change waits for the write interval, and the agent
    # says nothing more after it.
    start = {"type": "tool_execution_start", "toolCallId": "1", "toolName": "bash", "args": {}}
    agent = ["sh", "-c", f"echo '{json.dumps(start)}'; exec sleep 60"]
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--dialect", "pi"]
    wrapper = subprocess.Popen(
        [*argv, "--run-dir", str(run_dir), "--", *agent],
        env=agent_env(tmp_path),
        stdin=subprocess.DEVNULL,
    )
    try:

        def tool() -> Any:
            try:
                return _status(run_dir).get("currentTool")
            except (OSError, ValueError):
                return None

        assert wait_until(lambda: tool() == "bash", timeout=20)
        wrapper.send_signal(signal.SIGTERM)
        assert wrapper.wait(timeout=HANG_LIMIT) == 128 + signal.SIGTERM
    finally:
        wrapper.kill()
        wrapper.wait()


def test_the_task_is_read_from_the_terminal_and_the_run_goes_on(tmp_path: Path) -> None:
    # `--task-file -` typed at a terminal: only the terminal's foreground
    # process group may read it, so the run must still be in it then.
    run_dir = tmp_path / "run"
    scenario = write_scenario(tmp_path, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
    argv = wrapper_argv(run_dir, scenario, task=None, options=["--task-file", "-"])
    pid, master = pty.fork()
    if pid == 0:  # the child, its controlling terminal the pty
        try:
            os.execve(argv[0], argv, agent_env(tmp_path))
        finally:
            os._exit(127)
    try:
        os.write(master, b"Tell the time\n\x04")  # the line, then end of file
        output = b""
        deadline = time.monotonic() + HANG_LIMIT
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal's other end is closed: all exited
                    break
                if not chunk:
                    break
                output += chunk
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        else:
            pytest.fail(f"the run did not end; the terminal showed {output!r}")
        if not done:
            _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, output
    result = read_result(run_dir / "result.json")
    assert (result["outcome"], result["task"]) == ("ok", "Tell the time")
