"""The command line as a user meets it: usage errors, version, output modes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import wrapper
from tests.conftest import (
    FAKE_AGENT,
    FAKE_PI,
    HANG_LIMIT,
    ROOT,
    invoke,
    read_result,
    wrapper_argv,
    write_scenario,
)
from wrapper.core.config import MAX_TASK_BYTES
from wrapper.supervision.prepare import RunUsageError, read_task_file

FINAL: list[dict[str, Any]] = [
    {"assistant": {"text": "All done.", "stopReason": "stop"}},
    {"agent_settled": {}},
]


def cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wrapper", *args],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        cwd=cwd,
        env=env,
        check=False,
    )


def test_version() -> None:
    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"agent-wrapper {wrapper.__version__}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--task", "x"], "no COMMAND"),
        (["run", "--task", "x", "--"], "no COMMAND"),
        (["run", "--grace", "soon", "--", "pi"], "expected a number of seconds"),
        (["run", "--grace", "-1", "--", "pi"], "non-negative"),
        (["run", "--timeout", "0", "--", "pi"], "more than 0"),
        (["run", "--max-depth", "0", "--", "pi"], "at least 1"),
        (["run", "--output", "xml", "--", "pi"], "invalid choice"),
        (["run", "--dialect", "nope", "--", "pi"], "invalid choice"),
        (["run", "--task", "a", "--task-file", "b", "--", "pi"], "not allowed with"),
        (["run", "--task-file", "/no/such/file", "--", "pi"], "cannot read it"),
        (["run", "--task", "x", "--", "cat", "--json"], "pass --dialect"),
        ([], "required"),
        (["run", "--task", "x", "pi", "--mode", "json"], "put the agent's command after --"),
        (["run", "--timout", "5", "--", "pi"], "did you mean --timeout?"),
        (["run", "--task", "", "--", "pi"], "--task is empty"),
        (["run", "--task", " \n", "--", "pi"], "--task is empty"),
        (["status", "--jsn", "x"], "did you mean --json?"),
    ],
)
def test_usage_errors_exit_2_and_say_what_to_do(
    args: list[str], message: str, tmp_path: Path
) -> None:
    proc = cli(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not (tmp_path / ".agent-wrapper").exists(), "a usage error starts no run"


def test_batch_help_lists_no_option_batch_refuses_and_run_help_has_examples() -> None:
    batch = cli("batch", "--help")
    assert batch.returncode == 0
    for refused in ("--label", "--run-dir", "--result"):
        assert f"{refused} " not in batch.stdout
        # still read, to be refused with where it belongs instead
        said = cli("batch", "spec.jsonl", refused, "x")
        assert said.returncode == 2
        assert "give it on a line of the spec" in said.stderr
    # a default for every line: taken, so shown
    assert "--task TEXT" in batch.stdout
    assert "--timeout SECONDS" in batch.stdout
    run = cli("run", "--help")
    assert run.returncode == 0
    example = "  agent-wrapper run --task 'Fix the failing test' -- pi --mode json -p\n"
    assert f"examples:\n{example}" in run.stdout
    assert "127 COMMAND could not be started" in " ".join(run.stdout.split())


def test_version_has_a_short_flag() -> None:
    proc = cli("-V")
    assert proc.returncode == 0
    assert proc.stdout == f"agent-wrapper {wrapper.__version__}\n"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["run", "--settings", "/no/such/settings.json", "--", "pi"],
            "agent-wrapper: error: --settings /no/such/settings.json: cannot read it: "
            "No such file or directory",
        ),
        (
            ["batch", "/no/such/spec.jsonl"],
            "agent-wrapper: error: batch: /no/such/spec.jsonl: cannot read it: "
            "No such file or directory",
        ),
    ],
)
def test_an_error_found_after_parsing_is_one_line(
    args: list[str], line: str, tmp_path: Path
) -> None:
    proc = cli(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == line + "\n"


@pytest.mark.parametrize(
    ("program", "message"),
    [
        # a mistyped name says no agent: the task could not be placed
        ("pii", "pii: not found on PATH (install it, or give its path)"),
        ("./pii", "./pii: No such file or directory"),
        # a known agent that is not installed, by the same rule
        ("claude-not-installed", "claude-not-installed: not found on PATH"),
    ],
)
def test_a_program_that_is_not_found_is_exit_127_with_a_result(
    program: str, message: str, tmp_path: Path
) -> None:
    command = [program, "--mode", "json", "-p"]
    if program.startswith("claude"):
        command = [program, "-p", "--output-format", "stream-json", "--verbose"]
    dialect = ["--dialect", "claude"] if program.startswith("claude") else []
    proc = cli("run", "--output", "quiet", *dialect, "--task", "x", "--", *command, cwd=tmp_path)
    assert proc.returncode == 127, proc.stderr
    [result_path] = (tmp_path / ".agent-wrapper" / "runs").glob("*/result.json")
    result = read_result(result_path)
    assert (result["outcome"], result["exitStatus"]) == ("spawn_failed", 127)
    assert result["error"]["kind"] == "spawn_failed"
    assert result["error"]["message"].startswith(message)
    assert result["task"] == "x"
    assert proc.stderr == (
        f"agent-wrapper: spawn_failed: {result['error']['message']} (result: {result_path})\n"
    )


def test_a_task_file_holding_a_nul_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "task.md").write_bytes(b"Fix\0it")
    proc = cli("run", "--task-file", "task.md", "--", "pi", "--mode", "json", cwd=tmp_path)
    assert proc.returncode == 2
    [message] = [text for text in proc.stderr.splitlines() if "error:" in text]
    assert "--task-file task.md: the task contains a NUL character" in message
    assert not (tmp_path / ".agent-wrapper").exists()


def test_unknown_executable_without_task_recognises_the_stream(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, FINAL)
    run_dir = tmp_path / "run"
    # An executable name that says nothing: the stream must tell.
    argv = wrapper_argv(run_dir, scenario, task=None, options=["--output", "quiet"])
    argv[argv.index(str(FAKE_PI))] = str(FAKE_AGENT)
    proc = invoke([*argv, "hi"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""
    result = read_result(run_dir / "result.json")
    assert result["dialect"] == "pi"
    assert result["finalText"] == "All done."
    assert result["task"] is None


def test_default_run_dir_is_under_agent_wrapper_with_a_gitignore(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, FINAL)
    proc = invoke(wrapper_argv(None, scenario, task="hi"), tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / ".agent-wrapper" / ".gitignore").read_text() == "*\n"
    [run_dir] = (tmp_path / ".agent-wrapper" / "runs").iterdir()
    result = read_result(run_dir / "result.json")
    assert result["runId"] == run_dir.name
    last = json.loads(proc.stdout.decode().splitlines()[-1])
    assert last["type"] == "result_written"
    assert last["path"] == str(run_dir / "result.json")


def test_pretty_output_is_for_people(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Checking.",
                "stopReason": "toolUse",
                "toolCalls": [{"name": "bash", "arguments": {"command": "ls -la"}}],
            }
        },
        {"tool": {"name": "bash", "duration": 0.1, "result": "ok"}},
        *FINAL,
    ]
    scenario = write_scenario(tmp_path, steps)
    run_dir = tmp_path / "run"
    options = ["--output", "pretty", "--label", "pretty-check"]
    proc = invoke(wrapper_argv(run_dir, scenario, task="hi", options=options), tmp_path)
    assert proc.returncode == 0
    out = proc.stdout.decode()
    assert "pretty-check" in out
    assert "Checking." in out
    assert "⚙ bash  ls -la" in out
    assert "All done." in out
    assert "■ ok (stop)" in out
    assert str(run_dir / "result.json") in out
    assert "\x1b[" not in out, "no colour codes when stdout is not a terminal"
    assert not any(line.startswith("{") for line in out.splitlines())


def test_a_failed_run_says_why_in_one_line_on_stderr_and_in_the_last_event(
    tmp_path: Path,
) -> None:
    steps = [{"assistant": {"text": "", "stopReason": "error", "errorMessage": "quota gone"}}]
    scenario = write_scenario(tmp_path, [*steps, *FINAL[1:]])
    run_dir = tmp_path / "run"
    proc = invoke(wrapper_argv(run_dir, scenario, task="hi"), tmp_path)
    assert proc.returncode == 1
    result = read_result(run_dir / "result.json")
    last = json.loads(proc.stdout.decode().splitlines()[-1])
    assert (last["type"], last["error"]) == ("result_written", result["error"])
    assert proc.stderr.decode().splitlines()[-1] == (
        f"agent-wrapper: error: {result['error']['message']} (result: {run_dir}/result.json)"
    )
    pretty = invoke(
        wrapper_argv(tmp_path / "run2", scenario, task="hi", options=["--output", "pretty"]),
        tmp_path,
    )
    assert "■ error (error)" in pretty.stdout.decode()
    assert "quota gone" in pretty.stdout.decode().splitlines()[-1]
    assert b"agent-wrapper: error" not in pretty.stderr, "the live view already said it"


def test_a_successful_run_is_silent_on_stderr(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, FINAL)
    proc = invoke(wrapper_argv(tmp_path / "run", scenario, task="hi"), tmp_path)
    assert proc.returncode == 0
    assert proc.stderr == b""
    assert json.loads(proc.stdout.decode().splitlines()[-1])["error"] is None


def test_cli_module_does_not_import_the_run_machinery() -> None:
    # --version and usage errors must not pay for trio and psutil.
    code = "import sys, wrapper.cli; sys.exit('trio' in sys.modules or 'psutil' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], timeout=HANG_LIMIT, check=False).returncode
        == 0
    )


def test_public_surface_is_pinned() -> None:
    assert sorted(wrapper.__all__) == sorted(
        [
            "TERMINAL_STOP_REASONS",
            "CompletionTracker",
            "ErrorKind",
            "LineFramer",
            "Limits",
            "Outcome",
            "RunFacts",
            "SendSignal",
            "StopReason",
            "Verdict",
            "__version__",
            "canonical_stop_reason",
            "decide",
            "is_terminal",
            "last_assistant_message",
            "run",
            "run_async",
            "RunResult",
            "RunOutcome",
            "RunErrorInfo",
            "RunUsageError",
            "steer",
            "abort",
            "Receipt",
        ]
    )
    for name in wrapper.__all__:
        assert hasattr(wrapper, name)


def test_pretty_output_of_a_claude_run_with_a_long_tool_and_a_question(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Building.",
                "toolCalls": [{"name": "bash", "arguments": {"command": "make"}}],
            }
        },
        {"tool": {"name": "bash", "duration": 1.5, "result": "built"}},
        {"assistant": {"text": "Should I also drop the old API?"}},
        {"agent_end": {"willRetry": False}},
        {"agent_settled": {}},
    ]
    scenario = write_scenario(tmp_path, steps)
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "pretty", "--run-dir"]
    argv += [str(run_dir), "--on-stop", "escalate", "--escalation-timeout", "0.5"]
    argv += ["--task", "Build it", "--", str(ROOT / "fixtures" / "fake_agent" / "claude")]
    argv += ["--output-format=stream-json", "--scenario", str(scenario)]
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert out.count("Should I also drop the old API?") == 2, "once said, once asked"
    assert out.count("Building.") == 1
    assert "no stop reason" not in out
    assert " 0 tokens" not in out
    assert "  ✓ Bash done · 1." in out
    assert f"reply {run_dir} --escalation esc-1 'your answer'" in out


# -- output the dialect does not recognise ---------------------------------------------


def test_plain_text_output_says_no_line_was_recognised_and_how_to_fix_it(
    tmp_path: Path,
) -> None:
    # What `claude -p` prints without --output-format stream-json: plain text.
    command = [sys.executable, "-c", "print('hello'); print('world')"]
    proc = cli("run", "--dialect", "claude", "--run-dir", str(tmp_path / "run"), "--", *command)
    assert proc.returncode == 1
    error = read_result(tmp_path / "run" / "result.json")["error"]
    assert error["kind"] == "exited_early"
    message = error["message"]
    assert "none of the 2 lines of its output was recognised as a claude event" in message
    assert "--dialect" in message
    assert "`claude -p --output-format stream-json --verbose`" in message
    assert message in proc.stderr


def test_one_unrecognised_line_is_told_in_the_singular(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "print('hello')"]
    proc = cli("run", "--dialect", "codex", "--run-dir", str(tmp_path / "run"), "--", *command)
    assert proc.returncode == 1
    message = read_result(tmp_path / "run" / "result.json")["error"]["message"]
    assert "the one line of its output was not recognised as a codex event" in message
    assert "`codex exec --json`" in message


def test_unrecognised_output_of_an_unknown_agent_asks_for_a_dialect(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "print('{\"hello\": 1}'); print('x')"]
    proc = cli("run", "--run-dir", str(tmp_path / "run"), "--", *command)
    assert proc.returncode == 1
    message = read_result(tmp_path / "run" / "result.json")["error"]["message"]
    assert "none of the 2 lines of its output was recognised as any known agent's event" in message
    assert "pass --dialect" in message


def test_empty_output_says_it_was_empty(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "pass"]
    proc = cli("run", "--dialect", "gemini", "--run-dir", str(tmp_path / "run"), "--", *command)
    assert proc.returncode == 1
    message = read_result(tmp_path / "run" / "result.json")["error"]["message"]
    assert "without a final message: its output was empty (no line at all)" in message
    assert "recognised" not in message


def test_a_failing_exit_after_unrecognised_output_says_both(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "print('Error: not logged in'); raise SystemExit(1)"]
    proc = cli("run", "--dialect", "claude", "--run-dir", str(tmp_path / "run"), "--", *command)
    assert proc.returncode == 1
    message = read_result(tmp_path / "run" / "result.json")["error"]["message"]
    assert "exited with status 1" in message
    assert "the one line of its output was not recognised as a claude event" in message


def test_recognised_output_never_mentions_recognition(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, [{"assistant": {"text": "x", "stopReason": "toolUse"}}])
    proc = invoke(wrapper_argv(tmp_path / "run", scenario, task="hi"), tmp_path)
    assert proc.returncode == 1
    message = read_result(tmp_path / "run" / "result.json")["error"]["message"]
    assert "without a final message (no terminal stop reason)" in message


#: What a task past the limit is told, whichever way it came.
TASK_LIMIT_SAID = "longer than 64 MiB (67108864 bytes), the most a task may be"


def _with_little_memory() -> None:
    """An unbounded read of the task runs out of this at once (MemoryError)
    instead of filling the machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize("source", ["/dev/zero", "file", "stdin"])
def test_a_task_file_past_the_limit_is_a_usage_error_naming_it(tmp_path: Path, source: str) -> None:
    stdin: bytes | None = None
    if source == "file":
        path = tmp_path / "task.md"
        with path.open("wb") as file:  # sparse: no disk space, still that long
            file.truncate(MAX_TASK_BYTES + 1)
        task_file = str(path)
    elif source == "stdin":
        task_file = "-"
        stdin = b"x" * (MAX_TASK_BYTES + 4096)
    else:
        task_file = source
    proc = subprocess.run(
        [sys.executable, "-m", "wrapper", "run", "--task-file", task_file, "--", "pi"],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=HANG_LIMIT,
        cwd=tmp_path,
        preexec_fn=_with_little_memory,
        check=False,
    )
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"agent-wrapper: error: --task-file {task_file}: {TASK_LIMIT_SAID}"
    )
    assert "Traceback" not in stderr
    assert not (tmp_path / ".agent-wrapper").exists(), "a usage error starts no run"


def test_a_task_at_the_limit_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    path = tmp_path / "task.md"
    path.write_bytes(b"a\r\nb" + b"c" * 5)
    assert read_task_file(str(path), limit=9) == "a\nb" + "c" * 5
    with pytest.raises(RunUsageError, match="longer than 8 bytes"):
        read_task_file(str(path), limit=8)
