"""Steering and aborting a running agent from outside: ``agent-wrapper
steer`` / ``abort`` (and ``wrapper.steer`` / ``wrapper.abort``) against
real runs of the fake agent, at every moment of a run."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import wrapper
from tests.conftest import (
    FAKE_PI,
    HANG_LIMIT,
    ROOT,
    agent_env,
    read_events,
    read_result,
    validate,
    wait_until,
    write_scenario,
)
from tests.dialect_support import LAUNCHERS, mode_args
from wrapper.core.control import REQUEST_MAX_BYTES

pytestmark = pytest.mark.usefixtures("no_leaks")

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def answer(text: str) -> list[dict[str, Any]]:
    return [{"assistant": {"text": text, "stopReason": "stop"}}, *END]


def long_tool(seconds: float = 40) -> dict[str, Any]:
    return {"tool": {"name": "bash", "duration": seconds, "result": "built"}}


class Running:
    """A wrapper run in the background, as a parent or a person sees it."""

    def __init__(
        self,
        tmp_path: Path,
        steps: Sequence[dict[str, Any]],
        resumes: Sequence[Sequence[dict[str, Any]]] = (),
        *,
        options: Sequence[str] = (),
        agent: Path = FAKE_PI,
        agent_args: Sequence[str] = ("--mode", "json", "-p"),
        task: str | None = "Build it",
        env: dict[str, str] | None = None,
    ) -> None:
        extra = {"resumes": [list(r) for r in resumes]} if resumes else {}
        scenario = write_scenario(tmp_path, steps, **extra)
        self.tmp_path = tmp_path
        self.run_dir = tmp_path / "run"
        argv = [sys.executable, "-m", "wrapper", "run", "--output", "jsonl"]
        argv += ["--run-dir", str(self.run_dir), *options]
        if task is not None:
            argv += ["--task", task]
        argv += ["--", str(agent), *agent_args, "--scenario", str(scenario)]
        # A home of the test's own: the agents' session stores are not this machine's.
        self.proc = subprocess.Popen(
            argv,
            env=agent_env(tmp_path, HOME=str(tmp_path), **(env or {})),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert wait_until(lambda: self.status().get("control") is not None), self.status()

    def status(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads((self.run_dir / "status.json").read_text())
        except (OSError, ValueError):
            return {}
        return data

    def wait_for_tool(self) -> None:
        assert wait_until(lambda: self.status().get("currentTool") is not None), self.status()

    def wait_for_events(self) -> None:
        """Until the agent has started, and a moment more (some say nothing
        of a tool until it ended)."""
        assert wait_until((self.tmp_path / "record.jsonl").exists), self.status()
        time.sleep(1.0)

    def wait_for_state(self, state: str) -> None:
        assert wait_until(lambda: self.status().get("state") == state), self.status()

    def finish(self) -> tuple[int, dict[str, Any], list[dict[str, Any]], str]:
        stdout, stderr = self.proc.communicate(timeout=HANG_LIMIT)
        self.stdout = stdout.decode(errors="replace")
        result = read_result(self.run_dir / "result.json")
        status = self.status()
        validate("status", status)
        assert status["control"] is None
        assert status["pendingSteers"] == []
        assert not (self.run_dir / "control.sock").exists(), "the socket outlived the run"
        events = read_events(self.run_dir / "events.jsonl")
        return self.proc.returncode, result, events, stderr.decode(errors="replace")

    def prompts(self) -> list[str]:
        record = self.tmp_path / "record.jsonl"
        if not record.exists():
            return []
        return [json.loads(line)["prompt"] for line in record.read_text().splitlines()]


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``agent-wrapper ARGS`` as a person or a parent agent runs it."""
    return subprocess.run(
        [sys.executable, "-m", "wrapper", *args],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        cwd=cwd,
        check=False,
    )


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


# -- delivery by resume ------------------------------------------------------------


def test_a_steer_during_a_tool_resumes_the_session_with_it(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [long_tool(), *answer("Built it.")],
        [answer("Fixed the parser.")],
        options=["--steer-timeout", "1"],
    )
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "Stop building, fix the parser")
    assert steered.returncode == 0, steered.stderr
    assert "delivered steer s1 by resume (attempt 2)" in steered.stdout
    code, result, events, _ = run.finish()
    assert code == 0
    assert result["outcome"] == "ok"
    assert result["finalText"] == "Fixed the parser."
    first, steer = run.prompts()
    assert first == "Build it"
    # The call cut short is named: an agent may resume without a call that
    # had no result yet, and the model would not know it was interrupted.
    text, note = steer.split("\n\n")
    assert text == "Stop building, fix the parser"
    assert note.startswith("[Your tool call bash"), note
    assert note.endswith("was interrupted to deliver this; it did not finish.]"), note
    assert result["externalSteerCount"] == 1
    (record,) = result["externalSteers"]
    assert record["outcome"] == "delivered"
    assert record["how"] == "resume"
    assert record["attempt"] == 2
    assert record["textLength"] == len("Stop building, fix the parser")
    assert result["steerCount"] == 0, "Stop-hook steering is untouched"
    assert len(result["attempts"]) == 2
    kinds = [e["type"] for e in events if e["type"].startswith("steer_") or e["type"] == "spawned"]
    assert kinds == ["spawned", "steer_requested", "spawned", "steer_delivered"]
    assert [e["signal"] for e in of_type(events, "signal_sent")][:1] == ["SIGINT"]


def test_a_steer_interrupts_the_agent_and_not_the_tool_it_set_apart(tmp_path: Path) -> None:
    # Agents start their shell tools in process groups of their own and, on
    # SIGINT, interrupt them and record the call; the wrapper's SIGINT goes
    # to the agent's group only, as a terminal's Ctrl-C does, and what the
    # agent leaves running is ended before the resumed attempt starts.
    pidfile = tmp_path / "tool.pid"
    tool = {"spawn": {"seconds": 60, "setsid": True, "pidfile": str(pidfile)}}
    run = Running(
        tmp_path,
        [{"tool": {"name": "bash", "finish": False}}, tool, {"sleep": 40}, *answer("Built.")],
        [answer("Steered.")],
        options=["--steer-timeout", "0.5"],
    )
    run.wait_for_tool()
    assert wait_until(pidfile.exists)
    tool_pid = int(pidfile.read_text())
    steered = cli("steer", str(run.run_dir), "--text", "Stop that")
    assert steered.returncode == 0, steered.stderr
    code, result, events, _ = run.finish()
    assert (code, result["finalText"]) == (0, "Steered.")
    agent_pid = result["attempts"][0]["pid"]
    signals = of_type(events, "signal_sent")
    assert signals[0]["signal"] == "SIGINT"
    assert signals[0]["pids"] == [agent_pid], "the SIGINT reached the tool set apart"
    ended = [e for e in signals if tool_pid in e["pids"]]
    assert [e["signal"] for e in ended][:1] == ["SIGTERM"]
    second_spawn = of_type(events, "spawned")[1]["seq"]
    assert ended[0]["seq"] < second_spawn, "the tool outlived its attempt"


def test_a_running_tool_is_let_finish_within_the_steer_timeout(tmp_path: Path) -> None:
    run = Running(tmp_path, [long_tool(2), *answer("Built it.")], [answer("Steered.")])
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "Now the docs")
    assert steered.returncode == 0, steered.stderr
    code, result, events, _ = run.finish()
    assert code == 0
    assert result["finalText"] == "Steered."
    assert run.prompts()[1] == "Now the docs", "a tool that finished was not cut short"
    tool_end = next(e["seq"] for e in events if e["type"] == "tool_end")
    sigint = next(e["seq"] for e in of_type(events, "signal_sent") if e["signal"] == "SIGINT")
    assert tool_end < sigint, "the agent was interrupted before its tool ended"


def test_a_steer_between_turns_interrupts_at_once(tmp_path: Path) -> None:
    thinking: list[dict[str, Any]] = [
        {"assistant": {"text": "Let me think.", "toolCalls": [{"name": "bash"}]}},
        {"sleep": 40},
        *answer("Thought."),
    ]
    run = Running(tmp_path, thinking, [answer("Steered.")])
    run.wait_for_events()
    started = time.monotonic()
    steered = cli("steer", str(run.run_dir), "--text", "Think less")
    assert steered.returncode == 0, steered.stderr
    assert time.monotonic() - started < 20
    code, result, _, _ = run.finish()
    assert (code, result["finalText"]) == (0, "Steered.")


def test_a_steer_before_the_first_answer_waits_for_it(tmp_path: Path) -> None:
    # Interrupted before its session holds the task, the agent would be
    # resumed into a session without it.
    steps: list[dict[str, Any]] = [
        {"sleep": 2},
        {"assistant": {"text": "Looking.", "toolCalls": [{"name": "bash"}]}},
        {"sleep": 40},
        *answer("Looked."),
    ]
    run = Running(tmp_path, steps, [answer("Steered.")])
    steered = cli("steer", str(run.run_dir), "--text", "Look elsewhere")
    assert steered.returncode == 0, steered.stderr
    code, result, events, _ = run.finish()
    assert (code, result["finalText"]) == (0, "Steered.")
    first_answer = next(e["seq"] for e in events if e["type"] == "assistant_message")
    sigint = next(e["seq"] for e in of_type(events, "signal_sent") if e["signal"] == "SIGINT")
    assert first_answer < sigint
    record = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert record[1]["resumed"] is True


@pytest.mark.parametrize("dialect", sorted(LAUNCHERS))
def test_every_agent_takes_a_steer_by_resume(dialect: str, tmp_path: Path) -> None:
    agent = ROOT / "fixtures" / "fake_agent" / LAUNCHERS[dialect]
    # opencode says nothing of a tool (nor of its session) until it ended:
    # its steer waits for the tool.
    run = Running(
        tmp_path,
        [long_tool(5), *answer("Built it.")],
        [answer("Fixed the parser.")],
        options=["--steer-timeout", "0.5"],
        agent=agent,
        agent_args=(*mode_args(dialect), *(["exec"] if dialect == "codex" else [])),
    )
    run.wait_for_events()
    steered = cli("steer", str(run.run_dir), "--text", "Fix the parser", "--json")
    receipt = json.loads(steered.stdout)
    assert (steered.returncode, receipt["state"], receipt["how"]) == (0, "delivered", "resume")
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["dialect"] == dialect
    assert result["finalText"] == "Fixed the parser."
    text, *note = run.prompts()[-1].split("\n\n")
    assert text == "Fix the parser"
    # Some say nothing of a tool until it ended: the steer then waits for it.
    cut = any("--steer-timeout" in e["reason"] for e in of_type(events, "signal_sent"))
    assert bool(note) == cut, (dialect, note)
    assert not note or note[0].startswith("[Your tool call "), note


def test_ten_steers_in_a_row_all_reach_the_agent(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [long_tool(), *answer("Built it.")],
        [[long_tool(0.5), *answer("Steered.")]],
        options=["--steer-timeout", "0.5"],
    )
    run.wait_for_tool()
    texts = [f"instruction {n}" for n in range(10)]
    receipts: list[wrapper.Receipt] = []
    threads = [
        threading.Thread(target=lambda t=t: receipts.append(wrapper.steer(run.run_dir, t)))
        for t in texts
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_LIMIT)
    assert sorted(r.state for r in receipts) == ["delivered"] * 10
    code, result, _, _ = run.finish()
    assert code == 0
    assert result["externalSteerCount"] == 10
    said = "\n".join(run.prompts()[1:])
    for text in texts:
        assert text in said


def test_a_follow_up_waits_for_the_stop_and_that_stop_runs_no_hooks(tmp_path: Path) -> None:
    marks = tmp_path / "hook-ran"
    settings = _settings(tmp_path, _hook(tmp_path, f"open({str(marks)!r}, 'a').write('x')"))
    run = Running(
        tmp_path,
        [long_tool(3), *answer("Built it.")],
        [answer("Docs written.")],
        options=["--settings", str(settings)],
    )
    run.wait_for_tool()
    follow = cli("steer", str(run.run_dir), "--text", "Then the docs", "--when", "next-stop")
    assert follow.returncode == 0, follow.stderr
    code, result, events, _ = run.finish()
    assert code == 0
    assert result["finalText"] == "Docs written."
    assert run.prompts() == ["Build it", "Then the docs"]
    assert not [e for e in of_type(events, "signal_sent") if e["signal"] == "SIGINT"]
    assert marks.read_text() == "x", "the stop that carried the follow-up ran no hooks"
    assert result["externalSteers"][0]["when"] == "next-stop"


def until_file(path: Path, indent: str = "") -> str:
    """Python lines that wait until ``path`` exists (at most 30 s): a hook
    that runs as long as its test needs, not a fixed time to sit out."""
    return (
        f"{indent}import os, time\n{indent}deadline = time.monotonic() + 30\n"
        f"{indent}while not os.path.exists({str(path)!r}) and time.monotonic() < deadline:\n"
        f"{indent}    time.sleep(0.05)\n"
    )


def steer_held(run: Running, gate: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``agent-wrapper steer RUN_DIR ARGS`` while what holds it back waits
    for ``gate``: the command waits for its delivery, so ``gate`` is made
    once the run holds the steer. The command's outcome."""
    receipts: list[subprocess.CompletedProcess[str]] = []
    sender = threading.Thread(target=lambda: receipts.append(cli("steer", str(run.run_dir), *args)))
    sender.start()
    assert wait_until(lambda: bool(run.status().get("pendingSteers"))), run.status()
    gate.touch()
    sender.join(HANG_LIMIT)
    (steered,) = receipts
    return steered


def test_a_steer_during_a_stop_hook_joins_its_block(tmp_path: Path) -> None:
    started, may_end = tmp_path / "hook-started", tmp_path / "hook-may-end"
    script = (
        "import json,os,sys,time\n"
        f"open({str(started)!r}, 'a').write('x')\n"
        f"if len(open({str(started)!r}).read()) == 1:\n"
        f"{until_file(may_end, '    ')}"
        "    print(json.dumps({'decision': 'block', 'reason': 'Tests fail.'}))\n"
    )
    settings = _settings(tmp_path, _hook(tmp_path, script))
    run = Running(
        tmp_path,
        answer("Built it."),
        [answer("Tests pass now.")],
        options=["--settings", str(settings)],
    )
    assert wait_until(started.exists)
    steered = steer_held(run, may_end, "--text", "And keep the API")
    assert steered.returncode == 0, steered.stderr
    code, result, _, _ = run.finish()
    assert code == 0
    prompt = run.prompts()[1]
    assert prompt.index("Tests fail.") < prompt.index("And keep the API")
    assert "[Stop hook" in prompt
    assert "[Steer s1 from outside the run]" in prompt
    assert result["steerCount"] == 1
    assert result["externalSteerCount"] == 1


def test_the_stop_after_a_steer_says_no_hook_was_active(tmp_path: Path) -> None:
    inputs = tmp_path / "inputs.jsonl"
    settings = _settings(
        tmp_path, _hook(tmp_path, f"open({str(inputs)!r}, 'a').write(sys.stdin.read() + '\\n')")
    )
    run = Running(
        tmp_path,
        [long_tool(), *answer("Built it.")],
        [answer("Steered.")],
        options=["--settings", str(settings), "--steer-timeout", "0.3"],
    )
    run.wait_for_tool()
    assert cli("steer", str(run.run_dir), "--text", "Go on").returncode == 0
    code, _, _, _ = run.finish()
    assert code == 0
    (payload,) = [json.loads(line) for line in inputs.read_text().splitlines()]
    assert payload["stop_hook_active"] is False


def test_a_steer_while_a_person_is_asked_is_delivered_after_the_answer(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        answer("Should I also drop the old API?"),
        [answer("Kept the API.")],
        options=["--on-stop", "escalate", "--escalation-timeout", "30"],
    )
    run.wait_for_state("waiting")
    receipt: list[wrapper.Receipt] = []
    sender = threading.Thread(
        target=lambda: receipt.append(wrapper.steer(run.run_dir, "Keep the API", wait=HANG_LIMIT))
    )
    sender.start()
    assert wait_until(lambda: bool(run.status().get("pendingSteers")))
    replied = cli("reply", str(run.run_dir), "--stop")
    assert replied.returncode == 0, replied.stderr
    sender.join(HANG_LIMIT)
    assert receipt[0].state == "delivered"
    # The steered attempt's answer is asked about in turn: stopped here
    # rather than left to the escalation timeout, which only catches hangs.
    assert wait_until(lambda: run.status().get("question") == "Kept the API."), run.status()
    assert cli("reply", str(run.run_dir), "--stop").returncode == 0
    code, result, _, _ = run.finish()
    assert code == 0
    assert result["finalText"] == "Kept the API."


@pytest.mark.parametrize(
    ("program", "args", "cancels"), [("opencode", ("acp",), True), ("gemini", ("--acp",), False)]
)
def test_a_live_session_takes_the_steer_as_its_next_prompt(
    tmp_path: Path, program: str, args: tuple[str, ...], cancels: bool
) -> None:
    # Gemini CLI forgets a cancelled turn: its steer waits for the turn's end.
    tool_call = {
        "assistant": {
            "text": "Running it.",
            "stopReason": "toolUse",
            "toolCalls": [{"name": "bash", "arguments": {"command": "make"}}],
        }
    }
    run = Running(
        tmp_path,
        [tool_call, {"tool": {"name": "bash", "duration": 6, "updates": 12}}, *answer("Built.")],
        [answer("Steered live.")],
        # the fake agent ends a cancelled turn only once its scenario played on
        options=["--steer-timeout", "0.5", "--kill-after", "30"],
        agent=ROOT / "fixtures" / "fake_agent" / program,
        agent_args=args,
    )
    run.wait_for_events()
    steered = cli("steer", str(run.run_dir), "--text", "Skip the build", "--json")
    receipt = json.loads(steered.stdout)
    assert (steered.returncode, receipt["state"], receipt["how"]) == (0, "delivered", "live")
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["dialect"] == "acp"
    assert result["finalText"] == "Steered live."
    assert len({e["pid"] for e in of_type(events, "spawned")}) == 1, "one agent process"
    assert not of_type(events, "signal_sent"), "a live steer sends no signal"
    # A turn cancelled for the steer is the steer's doing: no warning.
    cancelled = [e for e in of_type(events, "warning") if e["code"] == "turn_cancelled"]
    assert not cancelled, cancelled
    first = result["attempts"][0]
    assert first["stopReason"] == ("aborted" if cancels else "stop"), first


def test_the_live_view_shows_each_steer(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [long_tool(), *answer("Built it.")],
        [answer("Steered.")],
        options=["--steer-timeout", "0.3", "--output", "pretty"],
    )
    run.wait_for_tool()
    assert cli("steer", str(run.run_dir), "--text", "Go on").returncode == 0
    assert run.finish()[0] == 0
    assert "↪ steer s1 from outside (queued)" in run.stdout
    assert "↪ steer s1 delivered by resume (attempt 2)" in run.stdout


# -- refusals ----------------------------------------------------------------------


def test_a_steer_after_the_end_is_refused(tmp_path: Path) -> None:
    run = Running(tmp_path, answer("Done."))
    code, _, _, _ = run.finish()
    assert code == 0
    late = cli("steer", str(run.run_dir), "--text", "One more thing")
    assert late.returncode == 1
    assert "refused: the run has ended (outcome ok)" in late.stderr


def test_a_session_that_cannot_be_resumed_refuses_the_steer_and_leaves_the_agent(
    tmp_path: Path,
) -> None:
    run = Running(
        tmp_path,
        [long_tool(3), *answer("Built it.")],
        agent_args=("--mode", "json", "-p", "--no-session"),
    )
    run.wait_for_tool()
    refused = cli("steer", str(run.run_dir), "--text", "Fix the parser")
    assert refused.returncode == 1
    assert "--no-session" in refused.stderr
    code, result, events, _ = run.finish()
    assert code == 0
    assert result["finalText"] == "Built it."
    assert not of_type(events, "signal_sent"), "the agent was interrupted for nothing"
    assert result["externalSteers"][0]["outcome"] == "refused"


def test_a_session_whose_file_is_missing_refuses_the_steer(tmp_path: Path) -> None:
    config = tmp_path / "claude-config"
    (config / "projects").mkdir(parents=True)
    run = Running(
        tmp_path,
        [long_tool(3), *answer("Built it.")],
        agent=ROOT / "fixtures" / "fake_agent" / "claude",
        agent_args=mode_args("claude"),
        env={"CLAUDE_CONFIG_DIR": str(config)},
    )
    run.wait_for_events()
    refused = cli("steer", str(run.run_dir), "--text", "Fix the parser")
    assert refused.returncode == 1
    assert f"has no file under {config}" in refused.stderr
    code, result, events, _ = run.finish()
    assert (code, result["finalText"]) == (0, "Built it.")
    assert not of_type(events, "signal_sent")


def test_a_run_without_a_task_refuses_steers(tmp_path: Path) -> None:
    run = Running(tmp_path, [long_tool(3), *answer("Built it.")], task=None)
    run.wait_for_tool()
    refused = cli("steer", str(run.run_dir), "--text", "Fix the parser")
    assert refused.returncode == 1
    assert "no --task" in refused.stderr
    code, result, _, _ = run.finish()
    assert (code, result["finalText"]) == (0, "Built it.")


def test_past_the_limit_steers_are_refused(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [long_tool(4), *answer("Built it.")],
        [answer("Docs.")],
        options=["--max-external-steers", "1"],
    )
    run.wait_for_tool()
    first = cli("steer", str(run.run_dir), "--text", "docs", "--when", "next-stop", "--wait", "0")
    assert first.returncode == 124, first.stderr
    assert "queued" in first.stdout
    second = cli("steer", str(run.run_dir), "--text", "tests")
    assert second.returncode == 1
    assert "--max-external-steers" in second.stderr
    code, result, _, _ = run.finish()
    assert code == 0
    assert [s["outcome"] for s in result["externalSteers"]] == ["delivered", "refused"]


def test_a_run_that_ends_with_steers_queued_lists_them_refused(tmp_path: Path) -> None:
    run = Running(tmp_path, [long_tool(30), *answer("Built it.")], [answer("Docs.")])
    run.wait_for_tool()
    queued = cli("steer", str(run.run_dir), "--text", "docs", "--when", "next-stop", "--wait", "0")
    assert queued.returncode == 124
    assert run.status()["pendingSteers"][0]["id"] == "s1"
    status = cli("status", str(run.run_dir))
    assert "steers waiting to be delivered: s1 (next-stop)" in status.stdout
    run.proc.terminate()
    code, result, events, _ = run.finish()
    assert code == 143
    (steer,) = result["externalSteers"]
    assert steer["outcome"] == "refused"
    assert "ended" in steer["why"]
    assert of_type(events, "steer_refused")


def test_steer_usage_errors(tmp_path: Path) -> None:
    nothing = cli("steer", str(tmp_path), "--text", "x")
    assert nothing.returncode == 2
    assert "no agent-wrapper run" in nothing.stderr
    empty = cli("steer", str(tmp_path), "--text", "  ")
    assert empty.returncode == 2
    neither = cli("steer", str(tmp_path))
    assert neither.returncode == 2


# -- abort -------------------------------------------------------------------------


def _abort_checked(run: Running, reason: str = "wrong direction") -> dict[str, Any]:
    aborted = cli("abort", str(run.run_dir), "--reason", reason)
    assert aborted.returncode == 0, aborted.stderr
    assert "the run ended (outcome aborted)" in aborted.stdout
    code, result, _, _ = run.finish()
    assert code == 143
    assert result["outcome"] == "aborted"
    assert result["error"]["kind"] == "abort_requested"
    assert reason in result["error"]["message"]
    return result


def test_abort_during_a_tool(tmp_path: Path) -> None:
    run = Running(tmp_path, [long_tool(), *answer("Built it.")])
    run.wait_for_tool()
    _abort_checked(run)


def test_abort_between_turns(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"assistant": {"text": "Hm.", "toolCalls": [{"name": "bash"}]}},
        {"sleep": 40},
    ]
    run = Running(tmp_path, [*steps, *answer("x")])
    run.wait_for_events()
    _abort_checked(run)


def test_abort_during_a_stop_hook(tmp_path: Path) -> None:
    started = tmp_path / "hook-started"
    script = f"open({str(started)!r}, 'w').write('x')\nimport time\ntime.sleep(40)\n"
    settings = _settings(tmp_path, _hook(tmp_path, script))
    run = Running(tmp_path, answer("Built it."), options=["--settings", str(settings)])
    assert wait_until(started.exists)
    _abort_checked(run)


def test_abort_while_a_person_is_asked(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        answer("Drop the old API?"),
        options=["--on-stop", "escalate", "--escalation-timeout", "60"],
    )
    run.wait_for_state("waiting")
    _abort_checked(run)


def test_abort_after_the_end_is_refused(tmp_path: Path) -> None:
    run = Running(tmp_path, answer("Done."))
    assert run.finish()[0] == 0
    late = cli("abort", str(run.run_dir))
    assert late.returncode == 1
    assert "the run has ended" in late.stderr


def test_the_api_steers_and_aborts_a_run_that_blocks_in_another_thread(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, [long_tool(), *answer("Built it.")])
    run_dir = tmp_path / "run"
    outcome: list[wrapper.RunResult] = []
    env = agent_env(tmp_path)

    def run() -> None:
        outcome.append(
            wrapper.run(
                [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)],
                task="Build it",
                run_dir=run_dir,
                env={k: v for k, v in env.items() if k.startswith("FAKE_AGENT_")},
            )
        )

    runner = threading.Thread(target=run)
    runner.start()
    assert wait_until(lambda: _status(run_dir).get("currentTool") is not None)
    receipt = wrapper.abort(run_dir, reason="enough")
    runner.join(HANG_LIMIT)
    assert receipt.state == "ended"
    assert receipt.outcome == "aborted"
    assert outcome[0].outcome == "aborted"
    assert outcome[0].error is not None
    assert outcome[0].error["kind"] == "abort_requested"


# -- the socket's bad inputs ---------------------------------------------------------


def _raw(path: str, data: bytes, *, read: bool = True, timeout: float = 10) -> bytes:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        if data:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(data)
        if not read:
            return b""
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def gated_tool(gate: Path, bound: float = 30) -> list[dict[str, Any]]:
    """A tool that runs until the test creates ``gate`` (at most ``bound``
    seconds): as long as the test needs, not a fixed time to sit out."""
    waiter = (
        "import os, sys, time\n"
        f"deadline = time.monotonic() + {bound}\n"
        "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
    )
    return [
        {"assistant": {"text": "Building.", "toolCalls": [{"name": "bash"}]}},
        {"run": {"argv": [sys.executable, "-c", waiter, str(gate)], "timeout": bound + 30}},
        {"tool": {"name": "bash", "duration": 0, "result": "built"}},
    ]


def test_garbage_huge_slow_and_many_clients_leave_the_run_untouched(tmp_path: Path) -> None:
    gate = tmp_path / "tool-may-end"
    run = Running(tmp_path, [*gated_tool(gate), *answer("Built it.")], [answer("Steered.")])
    path = run.status()["control"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert b"not JSON" in _raw(path, b"garbage\n")
    assert b"unknown" in _raw(path, b'{"op": "explode"}\n')
    assert b"larger than" in _raw(path, b"x" * (REQUEST_MAX_BYTES + 2))
    assert b"no request within" in _raw(path, b"", timeout=15)
    answers: list[bytes] = []
    many = [
        threading.Thread(target=lambda: answers.append(_raw(path, b"[]\n"))) for _ in range(100)
    ]
    for thread in many:
        thread.start()
    for thread in many:
        thread.join(HANG_LIMIT)
    assert len(answers) == 100, "a client could not connect, or got no answer"
    assert all(b"not a JSON object" in answer or b"busy" in answer for answer in answers)
    assert run.proc.poll() is None, "the run was still in its tool through all of it"
    gate.touch()
    code, result, _, _ = run.finish()
    assert code == 0
    assert result["finalText"] == "Built it."
    assert result["externalSteers"] == []


@pytest.mark.parametrize("planted", ["fifo", "symlink"])
def test_a_file_planted_where_the_socket_goes_is_left_alone(tmp_path: Path, planted: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".agent-wrapper-run").write_text('{"runId": "earlier", "version": "0.1.0"}')
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    if planted == "fifo":
        os.mkfifo(run_dir / "control.sock")
    else:
        (run_dir / "control.sock").symlink_to(target)
    scenario = write_scenario(tmp_path, answer("Done."))
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--run-dir"]
    argv += [str(run_dir), "--task", "Go", "--", str(FAKE_PI), "--mode", "json", "-p"]
    argv += ["--scenario", str(scenario)]
    proc = subprocess.run(
        argv, env=agent_env(tmp_path), capture_output=True, timeout=HANG_LIMIT, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result = read_result(run_dir / "result.json")
    assert [w["code"] for w in result["warnings"]] == ["control_unavailable"]
    assert target.read_text() == "keep"
    refused = cli("steer", str(run_dir), "--text", "x")
    assert refused.returncode == 1


def test_a_run_directory_too_deep_for_a_socket_gets_one_elsewhere(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    run = Running(
        deep,
        [long_tool(), *answer("Built it.")],
        [answer("Steered.")],
        options=["--steer-timeout", "0.5"],
    )
    path = run.status()["control"]
    assert not path.startswith(str(deep))
    run.wait_for_tool()
    assert cli("steer", str(run.run_dir), "--text", "go", "--wait", "30").returncode == 0
    assert run.finish()[0] == 0
    assert not os.path.exists(path)


# -- helpers -----------------------------------------------------------------------


def _hook(tmp_path: Path, body: str) -> Path:
    path = tmp_path / f"hook-{len(list(tmp_path.glob('hook-*.py')))}.py"
    path.write_text("import sys\n" + body)
    return path


def _settings(tmp_path: Path, *scripts: Path) -> Path:
    hooks = [{"type": "command", "command": f"{sys.executable} {script}"} for script in scripts]
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"hooks": {"Stop": [{"hooks": hooks}]}}))
    return path


def _status(run_dir: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return data
