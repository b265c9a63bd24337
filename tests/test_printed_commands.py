"""Every command the wrapper prints for a person (or its agent) to run works
when pasted: each is taken from a real run's output or a real error, split as
a shell would split it, and run."""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import site
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from tests.conftest import (
    FAKE_PI,
    HANG_LIMIT,
    ROOT,
    agent_env,
    read_result,
    wait_until,
    wrapper_argv,
    write_scenario,
)

pytestmark = pytest.mark.usefixtures("no_leaks")

WRAPPER = [sys.executable, "-m", "wrapper"]
END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def answer(text: str) -> list[dict[str, Any]]:
    return [{"assistant": {"text": text, "stopReason": "stop"}}, *END]


def paste(command: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` as a person pasting it into a shell would."""
    return subprocess.run(
        shlex.split(command),
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        stdin=subprocess.DEVNULL,
        check=False,
    )


class Lines:
    """The lines a process writes, read as they come."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._queue.put(line.decode(errors="replace"))

    def until(self, pattern: str) -> re.Match[str]:
        while True:
            try:
                line = self._queue.get(timeout=HANG_LIMIT)
            except queue.Empty:
                raise AssertionError(f"no line matched {pattern!r} in {self.seen}") from None
            self.seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found


def escalation_of(run_dir: Path) -> str | None:
    try:
        status = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return None
    return status["escalationId"] if status.get("state") == "waiting" else None


def test_every_printed_reply_command_answers_the_run(tmp_path: Path) -> None:
    # A run directory a shell would split if it were not quoted.
    run_dir = tmp_path / "my run"
    got = tmp_path / "notified.jsonl"
    notifier = tmp_path / "notify.py"
    notifier.write_text(f"import sys\nopen({str(got)!r}, 'a').write(sys.stdin.read() + '\\n')\n")
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps({"notify": {"command": [sys.executable, str(notifier)], "desktop": False}})
    )
    scenario = write_scenario(
        tmp_path, answer("First?"), resumes=[answer("Second?"), answer("Third?")]
    )
    proc = subprocess.Popen(
        [
            *WRAPPER,
            "run",
            "--output",
            "pretty",
            "--run-dir",
            str(run_dir),
            "--settings",
            str(settings),
            "--on-stop",
            "escalate",
            "--escalation-timeout",
            "60",
            "--task",
            "Do it",
            "--",
            str(FAKE_PI),
            "--mode",
            "json",
            "-p",
            "--scenario",
            str(scenario),
        ],
        env=agent_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        live = Lines(proc.stdout)  # type: ignore[arg-type]
        # The live view's command, as printed.
        shown = live.until(r"to answer: (.*)   \(or --continue, or --stop\)").group(1)
        assert "--escalation esc-1" in shown
        replied = paste(shown, tmp_path)
        assert replied.returncode == 0, replied.stderr
        assert replied.stdout == "answered esc-1 (text)\n"

        # The status command's, in its --continue form.
        assert wait_until(lambda: escalation_of(run_dir) == "esc-2", timeout=30)
        status = paste(shlex.join([*WRAPPER, "status", str(run_dir)]), tmp_path)
        hint = re.search(r"answer with: (.*)   \(or --continue, or --stop\)", status.stdout)
        assert hint is not None, status.stdout
        assert hint.group(1).endswith(" 'your answer'")
        replied = paste(hint.group(1).removesuffix(" 'your answer'") + " --continue", tmp_path)
        assert replied.returncode == 0, replied.stderr
        assert replied.stdout == "answered esc-2 (continue)\n"

        # The notifier's, in its other form: --stop instead of the text.
        assert wait_until(lambda: escalation_of(run_dir) == "esc-3", timeout=30)
        assert wait_until(lambda: got.exists() and len(got.read_text().splitlines()) == 3)
        payload = json.loads(got.read_text().splitlines()[-1])
        command = payload["reply"].removesuffix(" (or --continue, or --stop)")
        assert command.endswith(" 'your answer'")
        replied = paste(command.removesuffix(" 'your answer'") + " --stop", tmp_path)
        assert replied.returncode == 0, replied.stderr
        assert replied.stdout == "answered esc-3 (stop)\n"
        assert proc.wait(timeout=HANG_LIMIT) == 0
    finally:
        proc.kill()
        proc.wait()
    result = read_result(run_dir / "result.json")
    assert [e["answer"] for e in result["escalations"]] == ["text", "continue", "stop"]
    assert result["stopAllowedBy"] == "reply"


@pytest.mark.parametrize("console_script", [True, False])
def test_the_signal_command_the_agent_is_told_to_run_works(
    tmp_path: Path, console_script: bool
) -> None:
    # The agent runs, as a shell would, the line of its prompt that says how
    # to signal completion, from a directory where the package is not found.
    record = tmp_path / "record.jsonl"
    agent_runs = (
        "import json, os, shlex, subprocess\n"
        f"prompt = json.loads(open({str(record)!r}).read().splitlines()[-1])['prompt']\n"
        "(line,) = [x for x in prompt.splitlines() if 'signal complete' in x]\n"
        "env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}\n"
        "subprocess.run(shlex.split(line), check=True, env=env, cwd='/')\n"
    )
    python = Path(sys.executable).absolute()
    env = agent_env(tmp_path)
    if not console_script:
        # An interpreter with no agent-wrapper beside it that finds the
        # package through PYTHONPATH, as a run from a source checkout does.
        (tmp_path / "lonely").mkdir()
        python = tmp_path / "lonely" / "python3"
        python.symlink_to(Path(sys.executable).resolve())
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *site.getsitepackages()])
    scenario = write_scenario(
        tmp_path,
        answer("I think I am done."),
        resumes=[[{"run": {"argv": [sys.executable, "-c", agent_runs]}}, *answer("Done.")]],
    )
    run_dir = tmp_path / "run"
    argv = [str(python), *wrapper_argv(run_dir, scenario, options=["--context", "pipeline"])[1:]]
    done = subprocess.run(
        argv,
        env=env,
        capture_output=True,
        timeout=HANG_LIMIT,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = read_result(run_dir / "result.json")
    assert "signal complete" in result["steers"][0]["reason"]
    assert result["completionSignal"]["message"] == "what you did"


def test_the_rerun_a_misplaced_command_suggests_runs_it(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, answer("Fixed."))
    env = {**agent_env(tmp_path), "FAKE_AGENT_SCENARIO": str(scenario)}
    wrong = subprocess.run(
        [*WRAPPER, "run", "--output", "jsonl", "--task", "Fix it", str(FAKE_PI), "--mode", "json"],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert wrong.returncode == 2
    suggested = re.search(r"put the agent's command after --, e\.g\. (.*)$", wrong.stderr)
    assert suggested is not None, wrong.stderr
    rerun = subprocess.run(
        shlex.split(suggested.group(1)),
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert rerun.returncode == 0, rerun.stderr
    (result,) = (tmp_path / ".agent-wrapper" / "runs").glob("*/result.json")
    assert read_result(result)["task"] == "Fix it"


def status_of(run_dir: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return data


@pytest.mark.parametrize("mode", ["json", "rpc"])
def test_the_steer_command_a_run_prints_first_steers_it(tmp_path: Path, mode: str) -> None:
    # A run directory a shell would split, and long: it is shown whole.
    run_dir = tmp_path / ("a folder for the runs of a project with a long name " * 3) / "my run"
    tool_call = {
        "assistant": {
            "text": "Running the build.",
            "stopReason": "toolUse",
            "toolCalls": [{"name": "bash", "arguments": {"command": "make"}}],
        }
    }
    scenario = write_scenario(
        tmp_path,
        # pi's RPC mode takes the steer live and goes on: its tool runs to its end.
        [
            tool_call,
            {"tool": {"name": "bash", "duration": 40 if mode == "json" else 4}},
            *answer("Built."),
        ],
        resumes=[answer("Steered.")],
    )
    agent = [str(FAKE_PI), "--mode", mode, *(["-p"] if mode == "json" else [])]
    proc = subprocess.Popen(
        [
            *WRAPPER,
            "run",
            "--output",
            "pretty",
            "--run-dir",
            str(run_dir),
            "--steer-timeout",
            "0.5",
            "--task",
            "Build it",
            "--",
            *agent,
            "--scenario",
            str(scenario),
        ],
        env=agent_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        live = Lines(proc.stdout)  # type: ignore[arg-type]
        live.until(r"to steer it:")
        # First of all, before the agent's command and anything it says.
        first, second = live.seen
        assert first == f"● run directory: {run_dir}\n"
        shown = re.fullmatch(r"  to steer it:  (.*)\n", second)
        assert shown is not None, second
        command = shown.group(1)
        assert command.endswith(" --text '...'"), command
        assert wait_until(lambda: status_of(run_dir).get("currentTool") == "bash", timeout=30)
        steered = paste(command.replace("'...'", "'Stop the build'"), tmp_path)
        assert steered.returncode == 0, steered.stderr
        assert "delivered steer s1" in steered.stdout
        assert proc.wait(timeout=HANG_LIMIT) == 0
    finally:
        proc.kill()
        proc.wait()
    result = read_result(run_dir / "result.json")
    assert result["externalSteerCount"] == 1
    (steer,) = result["externalSteers"]
    assert steer["how"] == ("resume" if mode == "json" else "live")
