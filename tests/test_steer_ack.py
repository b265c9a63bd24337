"""A live steer is ``delivered`` only once the agent acknowledged it: pi's
response, Codex's answer to ``turn/steer``, Claude Code's echo of the user
message. Until then it is ``sent``; one the agent refuses goes again as the
next prompt the wrapper gives it. The pure parts, and end to end against
the fake agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FAKE_PI, validate
from tests.test_external_steer import Running, _hook, _settings, answer, cli, of_type
from tests.test_live_input import CLAUDE, RPC, STREAM, TOOL_CALL, messages, one_process, tool
from wrapper.commands import steer as steer_command
from wrapper.commands.steer import Receipt
from wrapper.core.control import ExternalSteers, SteerRequest
from wrapper.core.events import AgentEnded, ToolStarted
from wrapper.dialects.claude import ClaudeDialect
from wrapper.dialects.claude_input import ClaudeInputClient
from wrapper.dialects.pi import PiDialect
from wrapper.dialects.pi_rpc import HELD_PROMPT
from wrapper.dialects.two_way import Answer

pytestmark = pytest.mark.usefixtures("no_leaks")


# -- the pure parts ------------------------------------------------------------------


def test_pis_response_to_a_steer_is_its_acknowledgement() -> None:
    dialect = PiDialect()
    client = dialect.input_client(["pi", "--mode", "rpc"])
    assert client is not None
    client.prompt("task")
    took, refused = client.steer("one"), client.steer("/ext two")
    assert took is not None
    assert refused is not None
    dialect.parse(b'{"id":"steer-2","type":"response","command":"steer","success":true}')
    line = {
        "id": "steer-3",
        "type": "response",
        "command": "steer",
        "success": False,
        "error": 'Extension command "/ext" cannot be queued.',
    }
    dialect.parse(json.dumps(line).encode())
    assert client.answers() == [
        Answer(client.ticket(took)),
        Answer(client.ticket(refused), 'Extension command "/ext" cannot be queued.'),
    ]
    assert client.answers() == [], "taken once"


def test_pi_keeping_a_steer_for_its_next_run_is_told() -> None:
    dialect = PiDialect()
    client = dialect.input_client(["pi", "--mode", "rpc"])
    assert client is not None
    client.prompt("task")
    assert client.observe(AgentEnded(will_retry=False)) == "ended"
    assert not client.holds()
    assert client.held_prompt() is None
    # A steer written as pi ended its run: acknowledged, and queued by pi.
    dialect.parse(b'{"type":"queue_update","steering":["late"],"followUp":[]}')
    assert client.holds()
    assert client.held_prompt() == HELD_PROMPT
    client.prompt(HELD_PROMPT)
    assert not client.holds(), "a run goes on: pi gives it the messages it kept"
    dialect.parse(b'{"type":"queue_update","steering":[],"followUp":[]}')
    client.observe(AgentEnded(will_retry=False))
    assert not client.holds()


def test_claude_codes_echo_of_a_steer_is_its_acknowledgement() -> None:
    dialect = ClaudeDialect()
    client = dialect.input_client(["claude", "-p", "--input-format", "stream-json"])
    assert client is not None
    client.prompt("task")
    client.observe(ToolStarted(tool="Bash"))
    steer = client.steer("Skip the docs")
    assert steer is not None
    ticket = client.ticket(steer)
    # The echo of the task itself acknowledges nothing the wrapper waits for.
    dialect.parse(b'{"type":"user","message":{"role":"user","content":"task"}}')
    assert client.answers() == []
    echo = {"type": "user", "message": {"role": "user", "content": "Skip the docs"}}
    dialect.parse(json.dumps(echo).encode())
    assert client.answers() == [Answer(ticket)]


def test_a_sent_steer_is_recorded_as_sent() -> None:
    ledger = ExternalSteers(5)
    steer = ledger.request(SteerRequest("go"), 0.0)
    ledger.send(steer, "steer-2", 1)
    record = ledger.to_json()
    assert record["externalSteers"][0]["outcome"] == "sent"
    assert record["externalSteers"][0]["how"] == "live"
    ledger.refused_live(steer, "no active turn")
    assert ledger.queued == [steer], "refused live, it waits for the next prompt"
    assert "no active turn" in (steer.receipt()["why"] or "")


def test_the_steer_command_exits_0_on_sent_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sent = Receipt("sent", id="s1", how="live", attempt=1)
    monkeypatch.setattr(steer_command, "steer", lambda *args: sent)
    assert steer_command.steer_main(str(tmp_path), "go", "now", 1.0, False) == 0
    assert "steer s1 sent, not yet acknowledged" in capsys.readouterr().out


# -- end to end ----------------------------------------------------------------------


def test_a_steer_pi_refuses_is_not_delivered_and_goes_as_the_next_prompt(
    tmp_path: Path,
) -> None:
    run = Running(
        tmp_path,
        [tool(3), *answer("Built it.")],
        [answer("Ran the command.")],
        agent=FAKE_PI,
        agent_args=RPC,
    )
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "/fake-command now", "--json")
    receipt = json.loads(steered.stdout)
    assert (steered.returncode, receipt["state"], receipt["how"]) == (0, "delivered", "live")
    assert receipt["attempt"] == 2, "pi refused it in the turn: it was the next prompt"
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Ran the command."
    one_process(events)
    took = [(m["received"], m["text"]) for m in messages(tmp_path)]
    assert took == [("prompt", "Build it"), ("prompt", "/fake-command now")]
    (steer,) = result["externalSteers"]
    assert (steer["outcome"], steer["attempt"]) == ("delivered", 2)
    codes = [warning["code"] for warning in result["warnings"]]
    assert "steer_refused_live" in codes
    assert [e["nextAttempt"] for e in of_type(events, "steer_delivered")] == [2]


def test_a_claude_steer_is_sent_until_its_echo(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [TOOL_CALL, tool(4), *answer("Built it, and saw the steer.")],
        agent=CLAUDE,
        agent_args=STREAM,
    )
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "Skip the docs", "--wait", "1")
    assert steered.returncode == 0, steered.stderr
    assert "sent, not yet acknowledged" in steered.stdout
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    one_process(events)
    kinds = [e["type"] for e in events if e["type"].startswith("steer_")]
    assert kinds == ["steer_requested", "steer_sent", "steer_delivered"]
    (steer,) = result["externalSteers"]
    assert (steer["outcome"], steer["how"], steer["attempt"]) == ("delivered", "live", 1)
    validate("result", result)


# -- a live agent that exits while its Stop hooks run ---------------------------------


def test_a_live_agent_exiting_while_its_stop_hook_runs_does_not_lose_the_block(
    tmp_path: Path,
) -> None:
    script = "import json, time\ntime.sleep(2)\n"
    script += "print(json.dumps({'decision': 'block', 'reason': 'Tests fail.'}))\n"
    settings = _settings(tmp_path, _hook(tmp_path, script))
    # pi leaves once its run ended (its stdin still open), while the hook runs.
    steps = [*answer("Built it."), {"sleep": 0.5}, {"exit": 0}]
    run = Running(
        tmp_path, steps, options=["--settings", str(settings)], agent=FAKE_PI, agent_args=RPC
    )
    code, result, events, stderr = run.finish()
    assert code == 1, stderr
    assert result["outcome"] == "error"
    assert result["error"]["kind"] == "steer_failed"
    assert "exited while the stop hooks ran" in result["error"]["message"]
    (decision,) = of_type(events, "hook_decision")
    assert decision["decision"] == "block", "the hook was let finish"


# -- the races at a turn's end, with agents scripted to lose them ------------------------

#: pi in RPC mode as 0.73.1 behaves when a steer comes as its run ends: it
#: acknowledges the steer and keeps it queued for its next run (its
#: ``queue_update``), and its run ends without it.
PI_ENDING_AS_STEERED = r"""#!/usr/bin/env python3
import json, os, sys

record = open(os.environ["FAKE_AGENT_RECORD"], "a")


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def answer(text):
    message = {"role": "assistant", "content": [{"type": "text", "text": text}],
               "stopReason": "stop"}
    out({"type": "message_end", "message": message})
    out({"type": "turn_end", "message": message})
    out({"type": "agent_end", "messages": []})


runs, held = 0, []
for line in sys.stdin:
    command = json.loads(line)
    record.write(json.dumps({"received": command["type"], "text": command.get("message")}) + "\n")
    record.flush()
    answered = {"id": command.get("id"), "type": "response", "command": command["type"],
                "success": True}
    if command["type"] == "prompt":
        out(answered)
        out({"type": "agent_start"})
        out({"type": "turn_start"})
        if runs == 0:
            out({"type": "tool_execution_start", "toolCallId": "c1", "toolName": "bash",
                 "args": {"command": "make"}})
        else:
            out({"type": "queue_update", "steering": [], "followUp": []})
            answer("Saw: " + ", ".join(held))
            held = []
        runs += 1
    elif command["type"] == "steer":
        held.append(command["message"])
        out({"type": "tool_execution_end", "toolCallId": "c1", "toolName": "bash",
             "result": {"content": []}, "isError": False})
        answer("Built it.")
        out({"type": "queue_update", "steering": held, "followUp": []})
        out(answered)
"""


def test_a_steer_pi_keeps_for_its_next_run_is_given_that_run(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent = bin_dir / "pi"
    agent.write_text(PI_ENDING_AS_STEERED)
    agent.chmod(0o755)
    run = Running(tmp_path, answer("unused"), agent=agent, agent_args=RPC)
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "Skip the docs", "--json")
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"]) == ("delivered", "live"), "pi acknowledged it"
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    took = [(m["received"], m["text"]) for m in messages(tmp_path)]
    assert took == [
        ("prompt", "Build it"),
        ("steer", "Skip the docs"),
        ("prompt", HELD_PROMPT),
    ], "the session was not closed on the steer pi kept"
    assert result["finalText"] == "Saw: Skip the docs"
    one_process(events)


#: Codex's app-server as 0.169.0 behaves when a steer comes as the turn ends:
#: ``turn/completed``, then ``no active turn to steer``.
CODEX_ENDING_AS_STEERED = r"""#!/usr/bin/env python3
import json, os, sys

record = open(os.environ["FAKE_AGENT_RECORD"], "a")


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def turn(number, text):
    out({"method": "item/completed", "params": {"item": {"type": "agentMessage",
         "id": f"m{number}", "text": text}}})
    out({"method": "turn/completed", "params": {"threadId": "T", "turn": {
         "id": f"U{number}", "status": "completed", "items": []}}})


turns = 0
for line in sys.stdin:
    message = json.loads(line)
    method, params = message.get("method"), message.get("params", {})
    texts = [part["text"] for part in params.get("input", [])]
    if method in ("turn/start", "turn/steer"):
        record.write(json.dumps({"received": method, "text": " ".join(texts)}) + "\n")
        record.flush()
    if method == "initialize":
        out({"id": message["id"], "result": {"userAgent": "scripted"}})
    elif method == "thread/start":
        out({"id": message["id"], "result": {"thread": {"id": "T"}}})
        out({"method": "thread/started", "params": {"thread": {"id": "T"}}})
    elif method == "turn/start":
        turns += 1
        out({"id": message["id"], "result": {"turn": {"id": f"U{turns}", "items": []}}})
        out({"method": "turn/started", "params": {"threadId": "T", "turn": {"id": f"U{turns}"}}})
        if turns == 1:
            out({"method": "item/started", "params": {"item": {"type": "commandExecution",
                 "id": "c1", "command": "make", "status": "inProgress"}}})
        else:
            turn(turns, "Saw: " + " ".join(texts))
    elif method == "turn/steer":
        out({"method": "item/completed", "params": {"item": {"type": "commandExecution",
             "id": "c1", "command": "make", "status": "completed", "exitCode": 0,
             "aggregatedOutput": ""}}})
        turn(turns, "Built it.")
        out({"id": message["id"], "error": {"code": -32600,
             "message": "no active turn to steer"}})
"""


def test_a_steer_codex_refuses_as_its_turn_ends_is_the_next_prompt(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent = bin_dir / "codex"
    agent.write_text(CODEX_ENDING_AS_STEERED)
    agent.chmod(0o755)
    run = Running(tmp_path, answer("unused"), agent=agent, agent_args=["app-server"])
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "Skip the docs", "--json")
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 2)
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    took = [(m["received"], m["text"]) for m in messages(tmp_path)]
    assert took == [
        ("turn/start", "Build it"),
        ("turn/steer", "Skip the docs"),
        ("turn/start", "Skip the docs"),
    ], "given again once, by the wrapper"
    assert result["finalText"] == "Saw: Skip the docs"
    (steer,) = result["externalSteers"]
    assert (steer["outcome"], steer["attempt"]) == ("delivered", 2)
    one_process(events)


#: Claude Code with stream-json input as 2.1.332 behaves when a user message
#: comes just after a tool's result: the turn ends without it (no echo), and
#: a turn of its own follows at once, which takes the model a while; at the
#: end of its input it finishes the turn it is in, then exits.
CLAUDE_STEERED_AFTER_THE_TOOL = r"""#!/usr/bin/env python3
import json, os, sys, time

record = open(os.environ["FAKE_AGENT_RECORD"], "a")


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def init():
    out({"type": "system", "subtype": "init", "session_id": "S", "tools": ["Bash"],
         "model": "m", "claude_code_version": "2.1.332"})


def said(text):
    out({"type": "assistant", "message": {"id": "a", "role": "assistant", "model": "m",
         "content": [{"type": "text", "text": text}], "stop_reason": None}})
    out({"type": "result", "subtype": "success", "is_error": False, "result": text,
         "stop_reason": "end_turn", "session_id": "S"})


messages = 0
for line in sys.stdin:
    message = json.loads(line)
    text = message["message"]["content"]
    record.write(json.dumps({"received": "user", "text": text}) + "\n")
    record.flush()
    messages += 1
    if messages == 1:
        init()
        out({"type": "user", "message": {"role": "user", "content": text}})
        out({"type": "assistant", "message": {"id": "a", "role": "assistant", "model": "m",
             "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                          "input": {"command": "make"}}], "stop_reason": None}})
    elif messages == 2:
        # The tool had just ended: the message misses this turn.
        out({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "built"}]}})
        said("Built it.")
        init()
        time.sleep(3)
        out({"type": "user", "message": {"role": "user", "content": text}})
        said("Saw: " + text)
"""


def test_a_claude_steer_that_missed_the_turn_is_waited_for_as_a_turn_of_its_own(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent = bin_dir / "claude"
    agent.write_text(CLAUDE_STEERED_AFTER_THE_TOOL)
    agent.chmod(0o755)
    run = Running(tmp_path, answer("unused"), agent=agent, agent_args=STREAM)
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "Skip the docs", "--json")
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 2)
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Saw: Skip the docs", "the turn of its own was not cut"
    assert not of_type(events, "signal_sent")
    assert [m["text"] for m in messages(tmp_path)] == ["Build it", "Skip the docs"]
    (steer,) = result["externalSteers"]
    assert (steer["outcome"], steer["attempt"]) == ("delivered", 2)


#: pi refusing a steer live, and the prompt that gives it again too.
PI_REFUSING_TWICE = r"""#!/usr/bin/env python3
import json, os, sys

record = open(os.environ["FAKE_AGENT_RECORD"], "a")


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


runs = 0
for line in sys.stdin:
    command = json.loads(line)
    record.write(json.dumps({"received": command["type"], "text": command.get("message")}) + "\n")
    record.flush()
    answer = {"id": command["id"], "type": "response", "command": command["type"]}
    runs += command["type"] == "prompt"
    if command["type"] == "prompt" and runs == 1:
        out({**answer, "success": True})
        out({"type": "agent_start"})
        out({"type": "tool_execution_start", "toolCallId": "c1", "toolName": "bash",
             "args": {"command": "make"}})
    elif command["type"] == "steer":
        out({**answer, "success": False, "error": "not in a run"})
        out({"type": "tool_execution_end", "toolCallId": "c1", "toolName": "bash",
             "result": {"content": []}, "isError": False})
        message = {"role": "assistant", "content": [{"type": "text", "text": "Built it."}],
                   "stopReason": "stop"}
        out({"type": "message_end", "message": message})
        out({"type": "agent_end", "messages": []})
    else:
        out({**answer, "success": False, "error": "not ever"})
"""


def test_a_steer_refused_live_and_as_the_next_prompt_is_refused_with_the_agents_reason(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent = bin_dir / "pi"
    agent.write_text(PI_REFUSING_TWICE)
    agent.chmod(0o755)
    run = Running(tmp_path, answer("unused"), agent=agent, agent_args=RPC)
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "Skip the docs", "--json")
    receipt = json.loads(steered.stdout)
    assert (steered.returncode, receipt["state"]) == (1, "refused")
    assert receipt["why"] == "the agent refused it: not ever (and live before: not in a run)"
    code, result, _events, stderr = run.finish()
    took = [(m["received"], m["text"]) for m in messages(tmp_path)]
    assert took == [("prompt", "Build it"), ("steer", "Skip the docs"), ("prompt", "Skip the docs")]
    (steer,) = result["externalSteers"]
    assert steer["outcome"] == "refused"
    # pi stays idle after a refused prompt: the run ends then, and says why.
    assert (code, result["outcome"]) == (1, "error"), stderr
    assert "pi refused prompt: not ever" in result["error"]["message"]


@pytest.mark.parametrize(
    ("capture", "holds"),
    [("steer_after_end", True), ("follow_up_after_end", True), ("steer", False)],
)
def test_what_pi_keeps_for_its_next_run_is_read_from_its_queue_updates(
    capture: str, holds: bool
) -> None:
    # The real pi 0.73.1: a steer or follow-up written just after agent_end
    # is queued by pi for its next run (the capture's probe then gives one);
    # one written in the run is consumed by it.
    path = Path(__file__).parent / "data/real/twoway/pi-0.73.1" / f"{capture}.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    dialect = PiDialect()
    client = dialect.input_client(["pi", "--mode", "rpc"])
    assert client is not None
    for record in records:
        message = record["msg"]
        if record["dir"] == "stdin" and message.get("type") == "prompt":
            if message["id"] != "prompt-1":
                break  # what pi holds when the next prompt would be written
            client.prompt(message["message"])
        elif record["dir"] == "stdout":
            for event in dialect.parse(json.dumps(message).encode()):
                client.observe(event)
    assert client.holds() is holds


def test_a_turn_of_claudes_own_is_expected_only_where_it_echoes() -> None:
    client = ClaudeInputClient()
    client.prompt("task")
    client.observe(ToolStarted(tool="Bash"))
    assert client.steer("late") is not None
    client.observe(AgentEnded(will_retry=False))
    assert not client.turn_coming(), "no echo seen: this Claude Code may not echo at all"
    client = ClaudeInputClient()
    client.prompt("task")
    client.echoed("task")
    client.observe(ToolStarted(tool="Bash"))
    assert client.steer("late") is not None
    client.observe(AgentEnded(will_retry=False))
    assert client.turn_coming()
    client.own_turn()
    client.observe(AgentEnded(will_retry=False))
    assert not client.turn_coming(), "its own turn did not echo it: none more is waited for"
