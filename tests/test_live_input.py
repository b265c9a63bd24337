"""Agents driven live on their stdin by JSON messages, end to end against
the fake agent. pi's RPC mode (``pi --mode rpc``): the task as the first
``prompt``, a steer from outside as pi's ``steer`` into the running turn
(no signal, the same process), a follow-up as ``follow_up``, a Stop
handler's block as the next ``prompt``, an abort as pi's ``abort`` first.
Claude Code's stream-json input: a user message for each, a steer joining
the turn while a tool runs, an abort as its ``interrupt`` control request
first. And the pure parts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAKE_PI, wait_until
from tests.test_external_steer import (
    Running,
    _abort_checked,
    _hook,
    _settings,
    answer,
    cli,
    of_type,
    steer_held,
    until_file,
)
from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    ToolEnded,
    ToolStarted,
    WarningEvent,
)
from wrapper.dialects import UsageError
from wrapper.dialects.claude import ClaudeDialect
from wrapper.dialects.claude_input import ClaudeInputClient, is_stream_input
from wrapper.dialects.pi import PiDialect
from wrapper.dialects.pi_rpc import PiRpcClient, is_rpc

pytestmark = pytest.mark.usefixtures("no_leaks")

RPC = ("--mode", "rpc")


def tool(seconds: float) -> dict[str, Any]:
    return {"tool": {"name": "bash", "duration": seconds, "result": "built"}}


def messages(tmp_path: Path) -> list[dict[str, Any]]:
    """What the fake pi took on its stdin, in order."""
    record = tmp_path / "record.jsonl"
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    return [line for line in lines if "received" in line]


def sent(run_dir: Path) -> list[dict[str, Any]]:
    """The commands the wrapper wrote on pi's stdin (protocol.jsonl)."""
    lines = [json.loads(line) for line in (run_dir / "protocol.jsonl").read_text().splitlines()]
    return [line["msg"] for line in lines if line["dir"] == "out"]


def one_process(events: list[dict[str, Any]]) -> None:
    spawned = of_type(events, "spawned")
    assert len(spawned) == 1, "one agent process"
    assert not of_type(events, "signal_sent"), "a live delivery sends no signal"


# -- the pure parts ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "rpc"),
    [
        (["pi", "--mode", "rpc"], True),
        (("pi", "--mode=rpc", "--model", "m"), True),
        (["pi", "--mode", "json", "-p"], False),
        (["pi", "--", "--mode", "rpc"], False),
        (["pi", "--mode"], False),
    ],
)
def test_rpc_mode_is_told_from_the_command_line(command: list[str], rpc: bool) -> None:
    assert is_rpc(command) is rpc


def test_the_task_goes_on_stdin_and_a_resume_is_the_next_prompt(tmp_path: Path) -> None:
    launch = PiDialect().launch(["pi", "--mode", "rpc"], "-do it", tmp_path, resumable=True)
    assert (launch.argv, launch.prompt) == (["pi", "--mode", "rpc"], "-do it")
    resumed = PiDialect().resume(["pi", "--mode", "rpc", "--no-session"], "more", tmp_path, None)
    assert (resumed.argv, resumed.prompt) == (["pi", "--mode", "rpc", "--no-session"], "more")
    with pytest.raises(UsageError, match="needs a task"):
        PiDialect().launch(["pi", "--mode", "rpc"], None, tmp_path)


def test_a_command_pi_refused_is_a_warning() -> None:
    refused = b'{"id":"prompt-2","type":"response","command":"prompt","success":false,'
    refused += b'"error":"Agent is already processing."}'
    (warning,) = PiDialect().parse(refused)
    assert isinstance(warning, WarningEvent)
    assert warning.code == "agent_refused_command"
    assert warning.message == "pi refused prompt: Agent is already processing."
    assert PiDialect().parse(b'{"type":"response","command":"steer","success":true}') == []


def test_the_client_steers_only_a_running_run() -> None:
    client = PiRpcClient()
    assert client.steer("x") is None
    assert client.abort() is None
    assert client.prompt("task") == {"id": "prompt-1", "type": "prompt", "message": "task"}
    assert client.steer("s") == {"id": "steer-2", "type": "steer", "message": "s"}
    assert client.follow_up("f") == {"id": "follow_up-3", "type": "follow_up", "message": "f"}
    assert client.observe(AssistantMessage(stop_reason="stop")) is None
    assert client.observe(AgentEnded(will_retry=True)) is None
    assert client.observe(AgentEnded(will_retry=False)) == "ended"
    assert client.steer("late") is None, "between runs a steer is the next prompt"
    assert client.observe(AgentEnded(will_retry=False)) is None
    client.close()
    assert client.prompt("after") is None


def test_claude_stream_input_is_told_from_the_command_line(tmp_path: Path) -> None:
    stream = ["claude", "-p", "--input-format", "stream-json", "--output-format", "stream-json"]
    assert is_stream_input(stream)
    assert is_stream_input(["claude", "--input-format=stream-json"])
    assert not is_stream_input(["claude", "-p", "--output-format", "stream-json"])
    launch = ClaudeDialect().launch(stream, "-x task", tmp_path)
    # The echo of each message it takes is what acknowledges a steer.
    replaying = [*stream, "--replay-user-messages"]
    assert (launch.argv, launch.prompt) == (replaying, "-x task")
    resumed = ClaudeDialect().resume(replaying, "more", tmp_path, "session-1")
    assert (resumed.argv, resumed.prompt) == (replaying, "more"), "given once"
    with pytest.raises(UsageError, match="needs a task"):
        ClaudeDialect().launch(stream, None, tmp_path)


def test_the_claude_client_steers_only_while_a_tool_runs() -> None:
    client = ClaudeInputClient()
    message = {"type": "user", "message": {"role": "user", "content": "task"}}
    assert client.prompt("task") == message
    assert client.steer("s") is None, "while the model answers it would be a turn of its own"
    assert client.observe(ToolStarted(tool="Bash")) == "steerable"
    assert client.takes("now")
    assert not client.takes("next-stop"), "Claude Code has no follow-up"
    assert client.steer("s") == {"type": "user", "message": {"role": "user", "content": "s"}}
    assert client.observe(ToolEnded(tool="Bash")) is None
    assert client.steer("s") is None
    interrupt = client.abort()
    assert interrupt is not None
    assert interrupt["request"] == {"subtype": "interrupt"}
    assert client.observe(AgentEnded(will_retry=False, settled=True)) == "ended"
    assert client.abort() is None


# -- end to end ----------------------------------------------------------------------


def test_a_plain_run_takes_its_task_on_stdin_and_ends_when_stdin_closes(
    tmp_path: Path,
) -> None:
    run = Running(tmp_path, [tool(0.2), *answer("Built it.")], agent=FAKE_PI, agent_args=RPC)
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["outcome"] == "ok"
    assert result["finalText"] == "Built it."
    assert result["exitCode"] == 0
    assert len(result["attempts"]) == 1
    assert "Build it" not in of_type(events, "spawned")[0]["argv"], "no task argument"
    assert [(m["received"], m["text"]) for m in messages(tmp_path)] == [("prompt", "Build it")]
    one_process(events)


def test_a_steer_during_a_tool_joins_the_running_turn(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [tool(4), *answer("Built it, and saw the steer.")],
        [answer("never played")],
        agent=FAKE_PI,
        agent_args=RPC,
    )
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "Skip the docs", "--json")
    receipt = json.loads(steered.stdout)
    assert (steered.returncode, receipt["state"], receipt["how"]) == (0, "delivered", "live")
    assert receipt["attempt"] == 1, "the steer joined the running turn"
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Built it, and saw the steer."
    one_process(events)
    assert len(result["attempts"]) == 1
    (delivered,) = of_type(events, "steer_delivered")
    assert (delivered["how"], delivered["nextAttempt"]) == ("live", 1)
    took = [(m["received"], m["text"], m["during"]) for m in messages(tmp_path)]
    assert took == [("prompt", "Build it", "idle"), ("steer", "Skip the docs", "tool")]
    assert result["externalSteers"][0]["how"] == "live"


def test_a_follow_up_is_pis_follow_up_in_the_same_run(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [tool(3), *answer("Built it.")],
        [answer("Docs written.")],
        agent=FAKE_PI,
        agent_args=RPC,
    )
    run.wait_for_tool()
    follow = cli("steer", str(run.run_dir), "--text", "Then the docs", "--when", "next-stop")
    assert follow.returncode == 0, follow.stderr
    assert "live" in follow.stdout
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Docs written."
    one_process(events)
    assert len(result["attempts"]) == 1
    took = [(m["received"], m["text"]) for m in messages(tmp_path)]
    assert took == [("prompt", "Build it"), ("follow_up", "Then the docs")]


def test_a_stop_hook_block_is_the_next_prompt_on_the_same_process(tmp_path: Path) -> None:
    marks = tmp_path / "hook-ran"
    script = (
        "import json\n"
        f"open({str(marks)!r}, 'a').write('x')\n"
        f"if len(open({str(marks)!r}).read()) == 1:\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'Tests fail.'}))\n"
    )
    settings = _settings(tmp_path, _hook(tmp_path, script))
    run = Running(
        tmp_path,
        answer("Built it."),
        [answer("Tests pass now.")],
        options=["--settings", str(settings)],
        agent=FAKE_PI,
        agent_args=RPC,
    )
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Tests pass now."
    assert result["steerCount"] == 1
    assert len(result["attempts"]) == 2, "one attempt per prompt turn"
    assert len({attempt["pid"] for attempt in result["attempts"]}) == 1
    one_process(events)
    took = [(m["received"], m["text"]) for m in messages(tmp_path)]
    assert took == [("prompt", "Build it"), ("prompt", "Tests fail.")]
    assert marks.read_text() == "xx"


def test_a_steer_between_turns_is_the_next_prompt(tmp_path: Path) -> None:
    started, may_end = tmp_path / "hook-started", tmp_path / "hook-may-end"
    # The stop hook runs until the run holds the steer (at most 30 s): the
    # steer comes between the turns, however long it takes to arrive.
    script = f"open({str(started)!r}, 'a').write('x')\n{until_file(may_end)}"
    settings = _settings(tmp_path, _hook(tmp_path, script))
    run = Running(
        tmp_path,
        answer("Built it."),
        [answer("Steered.")],
        options=["--settings", str(settings)],
        agent=FAKE_PI,
        agent_args=RPC,
    )
    assert wait_until(started.exists)
    steered = steer_held(run, may_end, "--text", "And keep the API", "--json")
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 2)
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Steered."
    one_process(events)
    took = [(m["received"], m["text"]) for m in messages(tmp_path)]
    assert took == [("prompt", "Build it"), ("prompt", "And keep the API")]


def test_abort_sends_pis_abort_first(tmp_path: Path) -> None:
    run = Running(tmp_path, [tool(40), *answer("Built it.")], agent=FAKE_PI, agent_args=RPC)
    run.wait_for_tool()
    _abort_checked(run)
    kinds = [message["type"] for message in sent(run.run_dir)]
    assert kinds == ["prompt", "abort"]


def test_pi_in_json_mode_is_still_run_with_its_task_as_argument(tmp_path: Path) -> None:
    run = Running(tmp_path, [tool(0.2), *answer("Built it.")], agent=FAKE_PI)
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Built it."
    assert of_type(events, "spawned")[0]["argv"][-1] == "Build it"
    assert not (run.run_dir / "protocol.jsonl").exists()
    assert run.prompts() == ["Build it"]


# -- Claude Code's stream-json input -------------------------------------------------

STREAM = ("-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
CLAUDE = FAKE_PI.parent / "claude"

TOOL_CALL = {
    "assistant": {
        "text": "Running it.",
        "stopReason": "toolUse",
        "toolCalls": [{"name": "Bash", "arguments": {"command": "make"}}],
    }
}


def test_claude_stream_input_takes_a_steer_during_a_tool_in_the_same_turn(
    tmp_path: Path,
) -> None:
    run = Running(
        tmp_path,
        [TOOL_CALL, tool(4), *answer("Built it, and saw the steer.")],
        [answer("never played")],
        agent=CLAUDE,
        agent_args=STREAM,
    )
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "Skip the docs", "--json")
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 1)
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Built it, and saw the steer."
    one_process(events)
    assert len(result["attempts"]) == 1
    assert "Build it" not in of_type(events, "spawned")[0]["argv"], "no task argument"
    took = [(m["received"], m["text"], m["midTool"]) for m in messages(tmp_path)]
    assert took == [("user", "Build it", False), ("user", "Skip the docs", True)]


def test_claude_stream_input_takes_a_steer_with_no_tool_as_the_next_prompt(
    tmp_path: Path,
) -> None:
    run = Running(
        tmp_path,
        [{"sleep": 3}, *answer("Built it.")],
        [answer("Steered.")],
        agent=CLAUDE,
        agent_args=STREAM,
    )
    run.wait_for_events()
    steered = cli("steer", str(run.run_dir), "--text", "Skip the docs", "--json")
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 2)
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Steered."
    one_process(events)
    assert len(result["attempts"]) == 2
    took = [(m["received"], m["text"]) for m in messages(tmp_path)]
    assert took == [("user", "Build it"), ("user", "Skip the docs")]


def test_claude_stream_input_takes_a_stop_hook_block_on_the_same_process(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "hook-ran"
    script = (
        "import json\n"
        f"open({str(marks)!r}, 'a').write('x')\n"
        f"if len(open({str(marks)!r}).read()) == 1:\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'Tests fail.'}))\n"
    )
    settings = _settings(tmp_path, _hook(tmp_path, script))
    run = Running(
        tmp_path,
        answer("Built it."),
        [answer("Tests pass now.")],
        options=["--settings", str(settings)],
        agent=CLAUDE,
        agent_args=STREAM,
    )
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Tests pass now."
    assert result["steerCount"] == 1
    assert len(result["attempts"]) == 2
    one_process(events)
    took = [(m["received"], m["text"]) for m in messages(tmp_path)]
    assert took == [("user", "Build it"), ("user", "Tests fail.")]


def test_claude_stream_input_abort_interrupts_over_its_protocol_first(tmp_path: Path) -> None:
    run = Running(
        tmp_path, [TOOL_CALL, tool(40), *answer("Built it.")], agent=CLAUDE, agent_args=STREAM
    )
    run.wait_for_tool()
    _abort_checked(run)
    kinds = [message["type"] for message in sent(run.run_dir)]
    assert kinds == ["user", "control_request"]


def test_claude_print_mode_still_takes_its_task_as_argument(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        answer("Built it."),
        agent=CLAUDE,
        agent_args=("-p", "--output-format", "stream-json", "--verbose"),
    )
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Built it."
    assert of_type(events, "spawned")[0]["argv"][-1] == "Build it"
    assert not (run.run_dir / "protocol.jsonl").exists()


def test_a_live_steer_goes_through_the_prompt_handlers(tmp_path: Path) -> None:
    # A UserPromptSubmit handler that blocks the steer's text refuses it; the
    # agent goes on untouched.
    script = tmp_path / "gate.py"
    script.write_text(
        "import json, sys\n"
        "prompt = json.load(sys.stdin)['prompt']\n"
        "if 'forbidden' in prompt:\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'not that'}))\n"
    )
    handler = {"type": "command", "command": f"{sys.executable} {script}"}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [handler]}]}}))
    run = Running(
        tmp_path,
        [tool(3), *answer("Built it.")],
        options=["--settings", str(settings)],
        agent=FAKE_PI,
        agent_args=RPC,
    )
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "a forbidden turn", "--json")
    receipt = json.loads(steered.stdout)
    assert (steered.returncode, receipt["state"]) == (1, "refused")
    assert "not that" in receipt["why"]
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Built it."
    one_process(events)
    assert [m["received"] for m in messages(tmp_path)] == ["prompt"]


@pytest.mark.parametrize(("agent", "args"), [(FAKE_PI, RPC), (CLAUDE, STREAM)])
def test_an_attempt_timeout_ends_the_live_turn_by_its_own_abort(
    tmp_path: Path, agent: Path, args: tuple[str, ...]
) -> None:
    run = Running(
        tmp_path,
        [tool(30), *answer("Built it.")],
        [answer("never played")],
        options=["--attempt-timeout", "2", "--kill-after", "20"],
        agent=agent,
        agent_args=args,
    )
    code, result, events, stderr = run.finish()
    # The turn is ended by the agent's own abort, the process spared.
    assert (code, result["outcome"], result["error"]["kind"]) == (124, "timeout", "attempt_timeout")
    assert result["attempts"][0]["stopReason"] == "aborted", stderr
    assert not of_type(events, "signal_sent"), "the agent was signalled"
    assert len(of_type(events, "spawned")) == 1
    cancelled = [e for e in of_type(events, "warning") if e["code"] == "turn_cancelled"]
    assert cancelled, "the turn was not cancelled over the protocol"
    own = sent(run.run_dir)[-1]
    assert own.get("type") in ("abort", "control_request"), own
    assert result["forcedCleanup"] is False
