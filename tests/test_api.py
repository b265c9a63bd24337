"""The Python API: ``wrapper.run`` and ``wrapper.run_async`` against the fake agent."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, get_args

import pytest
import trio

import wrapper
from tests.conftest import (
    FAKE_PI,
    HANG_LIMIT,
    agent_env,
    read_result,
    wait_until,
    write_scenario,
)
from wrapper.core.config import MAX_TASK_BYTES
from wrapper.sinks.stream import LiveLogs, StatusWriter
from wrapper.supervision.control_server import ControlServer


def fake_command(tmp_path: Path, steps: list[dict[str, Any]], name: str = "s") -> list[str]:
    directory = tmp_path / name
    directory.mkdir()
    scenario = write_scenario(directory, steps)
    return [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AGENT_WRAPPER_"):
            monkeypatch.delenv(name)
    for name, value in agent_env(tmp_path).items():
        monkeypatch.setenv(name, value)


def assert_matches_file(result: wrapper.RunResult, run_dir: Path) -> dict[str, Any]:
    on_disk = read_result(run_dir / "result.json")
    assert dict(result.data) == on_disk
    assert result.outcome == on_disk["outcome"]
    assert result.success == on_disk["success"]
    assert result.exit_status == on_disk["exitStatus"]
    assert result.stop_reason == on_disk["stopReason"]
    assert result.raw_stop_reason == on_disk["rawStopReason"]
    assert result.final_text == on_disk["finalText"]
    assert result.usage == on_disk["usage"]
    assert result.error == on_disk["error"]
    assert result.run_dir == run_dir
    return on_disk


@pytest.mark.usefixtures("env", "no_leaks")
def test_an_ok_run_returns_what_result_json_says(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    command = fake_command(tmp_path, [{"assistant": {"text": "All done.", "stopReason": "stop"}}])
    result = wrapper.run(command, task="Do it", run_dir=tmp_path / "run", label="api-ok")
    on_disk = assert_matches_file(result, tmp_path / "run")
    assert result.outcome == "ok"
    assert result.success
    assert result.exit_status == 0
    assert result.final_text == "All done."
    assert on_disk["label"] == "api-ok"
    assert on_disk["task"] == "Do it"
    # Quiet by default: nothing on the caller's stdout.
    assert capfd.readouterr().out == ""


@pytest.mark.usefixtures("env", "no_leaks")
def test_a_failing_run_and_a_timeout(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    failing = fake_command(tmp_path, [{"stderr": "boom"}, {"exit": 3}], "failing")
    result = wrapper.run(failing, task="Do it", run_dir=tmp_path / "failing-run")
    assert_matches_file(result, tmp_path / "failing-run")
    assert result.outcome == "error"
    assert not result.success
    assert result.exit_status == 1
    assert result.error is not None
    assert result.error["kind"] == "exited_early"

    slow = fake_command(tmp_path, [{"sleep": 60}], "slow")
    result = wrapper.run(slow, task="Do it", run_dir=tmp_path / "slow-run", timeout=0.5)
    assert_matches_file(result, tmp_path / "slow-run")
    assert result.outcome == "timeout"
    assert result.exit_status == 124
    assert result.error is not None
    assert result.error["kind"] == "timeout"
    # The caller has the result: the wrapper writes nothing on its stdout or stderr.
    assert capfd.readouterr() == ("", "")


@pytest.mark.usefixtures("env", "no_leaks")
def test_two_runs_at_once_inside_a_trio_loop(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"sleep": 1.0},
        {"assistant": {"text": "Done.", "stopReason": "stop"}},
    ]
    commands = [fake_command(tmp_path, steps, f"s{n}") for n in (1, 2)]
    results: dict[int, wrapper.RunResult] = {}

    async def both() -> None:
        async def one(n: int) -> None:
            results[n] = await wrapper.run_async(
                commands[n - 1], task=f"task {n}", run_dir=tmp_path / f"run{n}"
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, 1)
            nursery.start_soon(one, 2)

    trio.run(both)
    for n in (1, 2):
        on_disk = assert_matches_file(results[n], tmp_path / f"run{n}")
        assert on_disk["outcome"] == "ok"
        assert on_disk["task"] == f"task {n}"
    assert results[1].data["runId"] != results[2].data["runId"]
    # At once, not one after the other: each agent started before the other ended.
    first, second = (results[n].data["attempts"][0] for n in (1, 2))
    assert first["startedAt"] < second["endedAt"]
    assert second["startedAt"] < first["endedAt"]


@pytest.mark.usefixtures("env", "no_leaks")
def test_a_cancelled_run_async_ends_aborted_with_its_result(tmp_path: Path) -> None:
    command = fake_command(tmp_path, [{"sleep": 60}])

    async def cancel_soon() -> None:
        with trio.move_on_after(1.0):
            await wrapper.run_async(command, task="Do it", run_dir=tmp_path / "run")
            raise AssertionError("the run should have been cancelled")

    trio.run(cancel_soon)
    result = read_result(tmp_path / "run" / "result.json")
    assert result["outcome"] == "aborted"
    assert result["error"]["kind"] == "interrupted"
    # No signal came: the result says who stopped the run.
    assert result["error"]["message"] == "the run's caller cancelled it and stopped the agent"
    reasons = [sent["reason"] for sent in result["signalsSent"]]
    assert reasons
    assert reasons[0] == "the run's caller cancelled it"
    assert not any("received" in reason for reason in reasons), reasons


@pytest.mark.usefixtures("env")
def test_usage_errors(tmp_path: Path) -> None:
    command = [str(FAKE_PI), "--mode", "json", "-p"]
    with pytest.raises(TypeError, match=r"'timout'.*did you mean 'timeout'"):
        wrapper.run(command, task="x", timout=3)
    with pytest.raises(wrapper.RunUsageError, match="timeout"):
        wrapper.run(command, task="x", timeout=-1)
    with pytest.raises(wrapper.RunUsageError, match="is empty"):
        wrapper.run(command, task="  ")
    with pytest.raises(wrapper.RunUsageError, match='"command" must be a non-empty list'):
        wrapper.run([], task="x")
    big = tmp_path / "task.md"
    with big.open("wb") as file:  # sparse: no disk space, still that long
        file.truncate(MAX_TASK_BYTES + 1)
    with pytest.raises(
        wrapper.RunUsageError,
        match=r"^task_file='.*task\.md': longer than 64 MiB \(67108864 bytes\), the most",
    ):
        wrapper.run(command, task_file=big)
    assert not (tmp_path / ".agent-wrapper").exists()


@pytest.mark.usefixtures("env")
def test_usage_errors_name_the_python_arguments_not_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    pi = [str(FAKE_PI), "--mode", "json", "-p"]
    cases: list[tuple[list[str], dict[str, Any], str]] = [
        (["cat"], {"task": "x"}, "the task cannot be placed: pass dialect= (acp, "),
        (pi, {"task": "x", "settings": ["missing.json"]}, f"settings='{tmp_path}/missing.json': "),
        (pi, {"task_file": "missing.md"}, f"task_file='{tmp_path}/missing.md': cannot read it"),
        (pi, {"task": "x", "run_dir": ""}, "run_dir= is empty"),
        (["cat"], {"dialect": "acp"}, "needs a task (task= or task_file=)"),
    ]
    for command, arguments, named in cases:
        with pytest.raises(wrapper.RunUsageError) as usage:
            wrapper.run(command, **arguments)
        message = str(usage.value)
        assert named in message
        # Neither a flag nor the command line's "run:" prefix.
        assert "--" not in message, message
        assert not message.startswith("run:"), message


def test_a_command_given_as_one_string_says_to_split_it() -> None:
    with pytest.raises(TypeError) as caught:
        # A str is a Sequence[str] to a type checker: only the call can refuse it.
        wrapper.run("pi --mode json -p", task="Fix it")
    assert str(caught.value) == (
        '"command" must be a list of strings (the argv), not one string: '
        "pass shlex.split('pi --mode json -p')"
    )


@pytest.mark.usefixtures("env", "no_leaks")
def test_from_asyncio_the_blocking_run_goes_in_a_thread(tmp_path: Path) -> None:
    command = fake_command(tmp_path, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])

    async def main() -> wrapper.RunResult:
        return await asyncio.to_thread(wrapper.run, command, task="Do it", run_dir=tmp_path / "run")

    result = asyncio.run(main())
    assert result.outcome == "ok", result.error
    assert result.final_text == "Done."
    assert_matches_file(result, tmp_path / "run")


def test_run_called_inside_trio_says_to_await_run_async(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where a run that started would write

    async def main() -> None:
        wrapper.run(["pi", "--mode", "json", "-p"], task="Do it")

    with pytest.raises(RuntimeError) as caught:
        trio.run(main)
    assert "inside a trio loop, await wrapper.run_async(...)" in str(caught.value)
    assert not (tmp_path / ".agent-wrapper").exists()


def test_run_async_awaited_from_asyncio_says_what_to_do_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where a run that started would write

    async def main() -> None:
        await wrapper.run_async(["pi", "--mode", "json", "-p"], task="Do it")

    with pytest.raises(RuntimeError) as caught:
        asyncio.run(main())
    message = str(caught.value)
    assert "wrapper.run_async runs inside a trio loop" in message
    assert "asyncio.to_thread(wrapper.run, " in message
    assert not (tmp_path / ".agent-wrapper").exists()


@pytest.mark.usefixtures("env")
def test_values_no_system_call_can_take_are_usage_errors_naming_the_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    command = fake_command(tmp_path, [{"assistant": {"text": "Done.", "stopReason": "stop"}}])
    wrong_types: list[tuple[dict[str, Any], str]] = [
        ({"env": {"A": 1}}, '"env" must be an object of variable names to string values'),
        ({"env": ["A=1"]}, '"env"'),
        ({"command": "pi --mode json"}, "not one string: pass shlex.split('pi --mode json')"),
        ({"timeout": [1]}, "'timeout' must be a string or a number"),
    ]
    for given, named in wrong_types:
        arguments: dict[str, Any] = {"command": command, "task": "x", **given}
        with pytest.raises(TypeError) as caught:
            wrapper.run(**arguments)
        assert named in str(caught.value)
    wrong_values: list[tuple[dict[str, Any], str]] = [
        ({"env": {"A": "a\0b"}}, "\"env\": variable 'A': its value contains a NUL"),
        ({"env": {"A=B": "b"}}, '"env"'),
        ({"command": [*command, "a\0b"]}, '"command": argument 6 contains a NUL'),
        ({"cwd": "a\0b"}, '"cwd" contains a NUL'),
        ({"run_dir": tmp_path / "a\0b"}, "'run_dir' contains a NUL"),
        ({"task": "do\0it"}, "'task' contains a NUL"),
        ({"label": "a\0b"}, "'label' contains a NUL"),
        ({"result": "r\0.json"}, "'result' contains a NUL"),
    ]
    for given, named in wrong_values:
        arguments = {"command": command, "task": "x", **given}
        with pytest.raises(wrapper.RunUsageError) as usage:
            wrapper.run(**arguments)
        assert named in str(usage.value)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["s"]


def test_importing_wrapper_stays_cheap() -> None:
    code = (
        "import sys, wrapper; wrapper.RunUsageError; "
        "sys.exit('trio' in sys.modules or 'psutil' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], timeout=HANG_LIMIT, check=False)
    assert proc.returncode == 0


def test_run_result_is_frozen_and_typed() -> None:
    data = json.loads(json.dumps({"outcome": "ok", "success": True, "exitStatus": 0}))
    result = wrapper.RunResult.from_json(data)
    assert result.run_dir is None
    with pytest.raises(AttributeError):
        result.outcome = "error"  # type: ignore[misc]
    # The types say exactly what result.json may hold.
    assert set(get_args(wrapper.RunOutcome)) == {str(o) for o in wrapper.Outcome}
    schema = json.loads((Path(wrapper.__file__).parent / "schemas/result.schema.json").read_text())
    (error_schema,) = [s for s in schema["properties"]["error"]["oneOf"] if s["type"] == "object"]
    assert set(wrapper.RunErrorInfo.__annotations__) == set(error_schema["required"])
    with pytest.raises(ValueError, match="not an outcome"):
        wrapper.RunResult.from_json({**data, "outcome": "fine"})


#: The documentation's page on the API.
_API_PAGE = Path(__file__).parent.parent / "docs" / "api.md"


def test_the_api_pages_python_examples_pass_mypy_strict(tmp_path: Path) -> None:
    section = _API_PAGE.read_text()
    examples = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(examples) >= 3
    for n, example in enumerate(examples):
        (tmp_path / f"example_{n}.py").write_text(example)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            os.devnull,
            "--cache-dir",
            str(tmp_path / "cache"),
            *sorted(str(path) for path in tmp_path.glob("example_*.py")),
        ],
        capture_output=True,
        text=True,
        # Type-checks the package and trio afresh: slow on a loaded machine.
        timeout=600,
        env={**os.environ, "MYPYPATH": str(_API_PAGE.parent.parent)},
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


#: A program that embeds the API, as a user's script would: ``how`` picks the
#: entry point; it prints "returned" only if the call returned. It takes
#: Python's default Ctrl-C handling back first, as a program started in a
#: terminal has it: a test suite started in the background of a shell
#: (``pytest ... &``) ignores SIGINT, and the host would inherit that, its
#: Ctrl-C then ignored as it should be, the run going on to its end.
_CTRL_C_HOST = """
import signal, sys, trio, wrapper
signal.signal(signal.SIGINT, signal.default_int_handler)
how, run_dir, *command = sys.argv[1:]
if how == "run":
    wrapper.run(command, task="Do it", run_dir=run_dir)
else:
    async def main():
        await wrapper.run_async(command, task="Do it", run_dir=run_dir)
    trio.run(main)
print("returned")
"""


#: Starts the program after it with SIGINT ignored, as a shell starts a
#: background job (or a test suite started as one starts its children).
_SIGINT_IGNORED = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


@pytest.mark.parametrize("started", ["plain", "sigint_ignored"])
@pytest.mark.parametrize("how", ["run", "run_async"])
@pytest.mark.usefixtures("no_leaks")
def test_ctrl_c_ends_the_run_aborted_then_raises_keyboard_interrupt(
    tmp_path: Path, how: str, started: str
) -> None:
    """Ctrl-C in a program blocked in the API: the run ends as a SIGINT to
    ``agent-wrapper run`` would end it, then the program sees KeyboardInterrupt.
    Whatever SIGINT handling the test suite was started with: the program
    takes Python's default back, as one in a terminal has it."""
    command = fake_command(
        tmp_path,
        [
            {"assistant": {"toolCalls": [{"name": "bash"}]}},
            {"tool": {"name": "bash", "duration": 60}},
        ],
    )
    run_dir = tmp_path / "run"
    host = subprocess.Popen(
        [
            sys.executable,
            *(["-c", _SIGINT_IGNORED] if started == "sigint_ignored" else []),
            "-c",
            _CTRL_C_HOST,
            how,
            str(run_dir),
            *command,
        ],
        env=agent_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_until(lambda: _current_tool(run_dir) == "bash")
        host.send_signal(signal.SIGINT)
        out, err = host.communicate(timeout=HANG_LIMIT)
    finally:
        host.kill()
        host.wait()
    text = err.decode()
    # The program dies of the KeyboardInterrupt itself, not of a group holding it.
    assert host.returncode == -signal.SIGINT, text
    assert text.rstrip().splitlines()[-1] == "KeyboardInterrupt", text
    assert "ExceptionGroup" not in text, text
    assert out == b""
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "aborted"
    assert result["exitStatus"] == 128 + signal.SIGINT
    assert result["error"]["kind"] == "interrupted"
    assert "SIGINT" in result["error"]["message"]
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "finished"
    assert status["outcome"] == "aborted"


@pytest.mark.usefixtures("env", "no_leaks")
def test_a_keyboard_interrupt_raised_inside_the_run_still_ends_it_aborted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a loop of the caller's, trio raises Ctrl-C wherever unprotected
    code runs, the run's own tasks included: the run still ends as SIGINT
    would end it, and the caller gets KeyboardInterrupt itself."""
    command = fake_command(
        tmp_path,
        [
            {"assistant": {"toolCalls": [{"name": "bash"}]}},
            {"tool": {"name": "bash", "duration": 60}},
        ],
    )
    write = StatusWriter.write
    raised: list[bool] = []

    def interrupted_once(self: StatusWriter, now: float) -> None:
        if self._fields.get("currentTool") == "bash" and not raised:
            raised.append(True)
            raise KeyboardInterrupt
        write(self, now)

    monkeypatch.setattr(StatusWriter, "write", interrupted_once)

    async def main() -> None:
        await wrapper.run_async(command, task="Do it", run_dir=tmp_path / "run")

    with pytest.raises(KeyboardInterrupt):
        trio.run(main)
    assert raised
    result = read_result(tmp_path / "run" / "result.json")
    assert result["outcome"] == "aborted"
    assert result["exitStatus"] == 128 + signal.SIGINT
    assert result["error"]["kind"] == "interrupted"
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "finished"
    assert status["outcome"] == "aborted"


def _current_tool(run_dir: Path) -> str | None:
    try:
        tool: str | None = json.loads((run_dir / "status.json").read_text())["currentTool"]
    except (OSError, ValueError, KeyError):
        return None
    return tool


@pytest.mark.usefixtures("env", "no_leaks")
def test_a_ctrl_c_while_the_live_logs_are_flushed_still_ends_the_run_aborted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a loop of the caller's, a Ctrl-C that comes while the run's
    background flusher of its logs runs (it wakes twice a second) ends the
    run as SIGINT would, its result written, and reaches the caller."""
    command = fake_command(
        tmp_path,
        [
            {"assistant": {"toolCalls": [{"name": "bash"}]}},
            {"tool": {"name": "bash", "duration": 60}},
        ],
    )
    run_dir = tmp_path / "run"
    flush = LiveLogs.flush
    sent: list[bool] = []

    def ctrl_c_once(self: LiveLogs, now: float) -> None:
        flush(self, now)
        # Called by the flusher's loop, not by a reader of the agent's output.
        in_flusher = sys._getframe(1).f_code is LiveLogs.run.__code__
        # Its first flush comes of the agent's first lines: the agent runs.
        if in_flusher and not sent:
            sent.append(True)
            # The real signal, with trio's handler: it acts where this code runs.
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(LiveLogs, "flush", ctrl_c_once)

    async def main() -> None:
        await wrapper.run_async(command, task="Do it", run_dir=run_dir)

    with pytest.raises(KeyboardInterrupt):
        trio.run(main)
    assert sent
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "aborted"
    assert result["exitStatus"] == 128 + signal.SIGINT
    assert result["error"]["kind"] == "interrupted"
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "finished"
    assert status["outcome"] == "aborted"


@pytest.mark.usefixtures("env", "no_leaks")
def test_a_ctrl_c_while_the_run_answers_a_request_still_ends_it_aborted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a loop of the caller's, a Ctrl-C that comes while the run
    answers a request from outside (a steer) ends it as SIGINT would, its
    result written, and reaches the caller."""
    command = fake_command(
        tmp_path,
        [
            {"assistant": {"toolCalls": [{"name": "bash"}]}},
            {"tool": {"name": "bash", "duration": 60}},
        ],
    )
    run_dir = tmp_path / "run"
    answer = ControlServer._answer
    sent: list[bool] = []

    async def ctrl_c_once(self: ControlServer, stream: trio.SocketStream) -> None:
        if not sent:
            sent.append(True)
            signal.raise_signal(signal.SIGINT)
        await answer(self, stream)

    monkeypatch.setattr(ControlServer, "_answer", ctrl_c_once)

    def steer_once_running() -> None:
        if wait_until(lambda: _current_tool(run_dir) == "bash"):
            with contextlib.suppress(Exception):
                wrapper.steer(run_dir, "Do the other thing", wait=1)

    async def main() -> None:
        await wrapper.run_async(command, task="Do it", run_dir=run_dir)

    outside = threading.Thread(target=steer_once_running)
    outside.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            trio.run(main)
    finally:
        outside.join()
    assert sent
    result = read_result(run_dir / "result.json")
    assert result["outcome"] == "aborted"
    assert result["exitStatus"] == 128 + signal.SIGINT
    assert result["error"]["kind"] == "interrupted"
