"""The fake agent in the two-way modes of Claude Code, pi and Codex, driven
through pipes as a client would drive the real CLIs.

Each test starts the fake under the CLI's own name and flags, writes
messages on its stdin while it plays (mid-tool, while the model request is
open, after the end), and checks what a client sees: where each message
landed, how the turn ended, that the process stayed (one pid), how it
exits, and that its lines have the shapes of the real CLI's
(``tests/data/real/twoway/``, recorded from the real CLIs).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "fixtures" / "fake_agent"
TWOWAY = Path(__file__).parent / "data" / "real" / "twoway"

#: Only to catch a hang.
HANG = 20.0
#: The scripted tool's duration: long enough to write into, short for the suite.
TOOL_SECONDS = 1.5
#: A tool that is only ever interrupted.
LONG_SECONDS = 30.0

Line = dict[str, Any]


def tool_scenario(seconds: float = TOOL_SECONDS) -> dict[str, Any]:
    return {
        "version": 1,
        "steps": [
            {
                "assistant": {
                    "text": "Running it.",
                    "toolCalls": [{"name": "bash", "arguments": {"command": "sleep 3"}}],
                }
            },
            {"tool": {"duration": seconds, "result": "slow-ok"}},
            {"assistant": {"text": "TOOL-DONE"}},
            {"agent_end": {}},
        ],
        "resumes": [[{"assistant": {"text": "AGAIN"}}, {"agent_end": {}}]],
    }


#: An answer that takes a while to come: time to write while the request is open.
THINK: dict[str, Any] = {
    "version": 1,
    "steps": [{"assistant": {"text": "PLAIN-OK", "duration": TOOL_SECONDS}}, {"agent_end": {}}],
    "resumes": [[{"assistant": {"text": "AGAIN"}}, {"agent_end": {}}]],
}


class Agent:
    """The fake, started under a CLI's name, with a thread reading its stdout."""

    def __init__(
        self, tmp_path: Path, launcher: str, args: list[str], scenario: dict[str, Any]
    ) -> None:
        path = tmp_path / "scenario.json"
        path.write_text(json.dumps(scenario))
        self.record = tmp_path / "record.jsonl"
        environ = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT_")}
        environ |= {"FAKE_AGENT_RECORD": str(self.record), "FAKE_AGENT_HOME": str(tmp_path)}
        self.proc = subprocess.Popen(
            [str(FAKE / launcher), *args, "--scenario", str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=environ,
        )
        self.lines: list[Line] = []
        #: When each line came (time.monotonic()).
        self.times: list[float] = []
        self.cursor = 0
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self.changed:
                self.lines.append(json.loads(raw))
                self.times.append(time.monotonic())
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def send(self, *messages: dict[str, Any] | str) -> None:
        """Write the messages, one a line, in one write."""
        assert self.proc.stdin is not None
        texts = [m if isinstance(m, str) else json.dumps(m) for m in messages]
        self.proc.stdin.write("".join(f"{text}\n" for text in texts).encode())
        self.proc.stdin.flush()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait_for(self, pred: Callable[[Line], bool], timeout: float = HANG) -> Line:
        """The next line from the cursor on that matches; the cursor moves past it."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for index in range(self.cursor, len(self.lines)):
                    if pred(self.lines[index]):
                        self.cursor = index + 1
                        return self.lines[index]
                self.cursor = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or (not self.reader.is_alive() and self.cursor == len(self.lines)):
                    raise AssertionError(f"no such line; last lines: {self.lines[-5:]}")
                self.changed.wait(min(left, 0.2))

    def exit_code(self, timeout: float = HANG) -> int:
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout)
        return code

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode()

    def messages(self) -> list[Line]:
        """The record's lines for the messages the fake received."""
        lines = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [line for line in lines if "received" in line]

    def pids(self) -> set[int]:
        return {json.loads(line)["pid"] for line in self.record.read_text().splitlines()}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def agents() -> Any:
    started: list[Agent] = []
    yield started
    for agent in started:
        agent.kill()


def start(
    agents: list[Agent], tmp_path: Path, launcher: str, args: list[str], scenario: dict[str, Any]
) -> Agent:
    agent = Agent(tmp_path, launcher, args, scenario)
    agents.append(agent)
    return agent


def is_type(kind: str, **fields: Any) -> Callable[[Line], bool]:
    return lambda line: (
        line.get("type") == kind and all(line.get(k) == v for k, v in fields.items())
    )


# ---------------------------------------------------------------------------
# Shapes: the sequence of line kinds, compared with the real CLI's capture


def capture(cli: str, scenario: str) -> list[Line]:
    path = TWOWAY / cli / f"{scenario}.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [e["msg"] for e in entries if e["dir"] == "stdout"]


def collapse(kinds: list[str]) -> list[str]:
    return [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]


def claude_kind(line: Line) -> str:
    kind = str(line.get("type"))
    if kind == "system":
        return f"system/{line.get('subtype')}"
    if kind in ("user", "assistant"):
        content = line["message"]["content"]
        first = content[0]["type"] if isinstance(content, list) and content else "text"
        return f"{kind}/{first}"
    return kind


#: Lines of the real CLIs that tell of their environment or of machinery the
#: fake has no counterpart for (a background-task registry, a model without
#: metadata, a sandbox helper, remote control, rate limits, text streamed
#: piece by piece).
NOT_PLAYED = {
    "system/task_started",
    "system/task_notification",
    "configWarning",
    "warning",
    "remoteControl/status/changed",
    "account/rateLimits/updated",
    "message_update",
    "tool_execution_update",
}


def pi_kind(line: Line) -> str:
    kind = str(line.get("type"))
    return f"response/{line.get('command')}" if kind == "response" else kind


def codex_kind(line: Line) -> str:
    method = line.get("method")
    if method is None:
        return "error" if "error" in line else "result"
    if str(method).startswith("item/") and "item" in line["params"]:
        return f"{method}:{line['params']['item']['type']}"
    return str(method)


def kinds(lines: list[Line], kind_of: Callable[[Line], str]) -> list[str]:
    return collapse([k for k in map(kind_of, lines) if k not in NOT_PLAYED])


def keys_match(
    ours: list[Line], real: list[Line], kind_of: Callable[[Line], str], *, ordered: bool = True
) -> None:
    """Our lines of each kind the real CLI wrote have no key it lacks, and
    (``ordered``) the keys they share come in the same order."""
    real_keys: dict[str, list[str]] = {}
    for line in real:
        known = real_keys.setdefault(kind_of(line), [])
        known.extend(key for key in line if key not in known)
    for line in ours:
        wanted = real_keys.get(kind_of(line))
        if wanted is None or kind_of(line) in NOT_PLAYED:
            continue
        assert set(line) <= set(wanted), (kind_of(line), set(line) - set(wanted))
        if ordered:
            assert list(line) == [k for k in wanted if k in line], kind_of(line)


# ---------------------------------------------------------------------------
# Claude Code: -p --input-format stream-json --output-format stream-json --verbose

CLAUDE = ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]


def user(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}}


def has_block(kind: str) -> Callable[[Line], bool]:
    return lambda line: (
        line.get("type") in ("user", "assistant")
        and any(block.get("type") == kind for block in line["message"]["content"])
    )


def test_claude_message_mid_tool_lands_in_the_same_turn(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "claude", CLAUDE, tool_scenario())
    agent.send(user("Do the task."))
    init = agent.wait_for(is_type("system", subtype="init"))
    agent.wait_for(has_block("tool_use"))
    started = agent.times[agent.cursor - 1]
    agent.send(user("Also mention this."))
    agent.wait_for(has_block("tool_result"))
    # The message did not cut the tool short.
    assert agent.times[agent.cursor - 1] - started >= TOOL_SECONDS - 0.2
    result = agent.wait_for(is_type("result"))
    assert (result["subtype"], result["result"]) == ("success", "TOOL-DONE")
    # A message after the end is a new turn of the same session and process.
    agent.send(user("And then?"))
    second = agent.wait_for(is_type("system", subtype="init"))
    assert second["session_id"] == init["session_id"]
    assert agent.wait_for(is_type("result"))["result"] == "AGAIN"
    agent.close()
    assert agent.exit_code() == 0
    assert list(map(claude_kind, agent.lines)).count("result") == 2
    assert [(m["received"], m["text"], m["midTool"]) for m in agent.messages()] == [
        ("user", "Do the task.", False),
        ("user", "Also mention this.", True),
        ("user", "And then?", False),
    ]
    assert len(agent.pids()) == 1


def test_claude_shapes_match_the_capture(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "claude", CLAUDE, tool_scenario(0.5))
    agent.send(user("Do the task."))
    agent.wait_for(has_block("tool_use"))
    agent.send(user("Also mention this."))
    agent.wait_for(is_type("result"))
    agent.close()
    assert agent.exit_code() == 0
    for version in ("claude-2.1.197", "claude-2.1.332"):
        real = capture(version, "mid_tool")
        assert kinds(agent.lines, claude_kind) == kinds(real, claude_kind)
        # Claude Code's own key order differs between its versions.
        keys_match(agent.lines, real, claude_kind, ordered=False)


def test_claude_message_while_the_model_answers_is_a_turn_of_its_own(
    tmp_path: Path, agents: Any
) -> None:
    agent = start(agents, tmp_path, "claude", CLAUDE, THINK)
    agent.send(user("Do the task."))
    agent.wait_for(is_type("system", subtype="init"))
    agent.send(user("Also mention this."))
    assert agent.wait_for(is_type("result"))["result"] == "PLAIN-OK"
    agent.wait_for(is_type("system", subtype="init"))
    assert agent.wait_for(is_type("result"))["result"] == "AGAIN"
    agent.close()
    assert agent.exit_code() == 0
    assert kinds(agent.lines, claude_kind) == kinds(
        capture("claude-2.1.332", "mid_think"), claude_kind
    )
    assert [(m["during"], m["midTool"]) for m in agent.messages()] == [
        ("idle", False),
        ("model", False),
    ]


def test_claude_interrupt_stops_the_tool_and_the_process_stays(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "claude", CLAUDE, tool_scenario(LONG_SECONDS))
    agent.send(user("Do the task."))
    agent.wait_for(has_block("tool_use"))
    sent = time.monotonic()
    agent.send(
        {"type": "control_request", "request_id": "int-1", "request": {"subtype": "interrupt"}}
    )
    answer = agent.wait_for(is_type("control_response"))
    assert answer["response"]["request_id"] == "int-1"
    result = agent.wait_for(is_type("result"))
    assert time.monotonic() - sent < 5
    assert (result["subtype"], result["is_error"], result["terminal_reason"]) == (
        "error_during_execution",
        True,
        "aborted_tools",
    )
    real = capture("claude-2.1.332", "interrupt")
    ours = kinds(agent.lines, claude_kind)
    assert ours == kinds(real, claude_kind)[: len(ours)]
    agent.send(user("Carry on."))
    assert agent.wait_for(is_type("result"))["result"] == "AGAIN"
    agent.close()
    assert agent.exit_code() == 0
    assert kinds(agent.lines, claude_kind) == kinds(real, claude_kind)


def test_claude_end_of_input_mid_turn_finishes_the_turn(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "claude", CLAUDE, tool_scenario())
    agent.send(user("Do the task."))
    agent.wait_for(has_block("tool_use"))
    agent.close()
    assert agent.wait_for(is_type("result"))["result"] == "TOOL-DONE"
    assert agent.exit_code() == 0


def test_claude_end_of_input_while_idle_exits_0(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "claude", CLAUDE, tool_scenario())
    agent.close()
    assert agent.exit_code() == 0
    assert agent.lines == []


def test_claude_line_that_is_not_json_exits_1(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "claude", CLAUDE, tool_scenario())
    agent.send("this is not json")
    agent.send(user("Never answered."))
    assert agent.exit_code() == 1
    assert agent.lines == []
    assert "Error parsing streaming input line" in agent.stderr()


def test_claude_messages_mid_tool_share_one_answer_and_the_last_entry_repeats(
    tmp_path: Path, agents: Any
) -> None:
    scenario = tool_scenario()
    scenario["resumes"] = [
        [{"assistant": {"text": "AGAIN"}}, {"agent_end": {}}],
        [{"assistant": {"text": "LAST"}}, {"agent_end": {}}],
    ]
    agent = start(agents, tmp_path, "claude", CLAUDE, scenario)
    agent.send(user("Do the task."))
    agent.wait_for(has_block("tool_use"))
    agent.send(user("One."))
    agent.send(user("Two."))
    assert agent.wait_for(is_type("result"))["result"] == "TOOL-DONE"
    answers = []
    for text in ("Three.", "Four.", "Five."):
        agent.send(user(text))
        answers.append(agent.wait_for(is_type("result"))["result"])
    assert answers == ["AGAIN", "LAST", "LAST"]
    agent.close()
    assert agent.exit_code() == 0
    assert [m["midTool"] for m in agent.messages()] == [False, True, True, False, False, False]
    assert len(agent.pids()) == 1


def test_claude_mid_tool_message_with_no_answer_left_goes_on_in_the_turn(
    tmp_path: Path, agents: Any
) -> None:
    scenario = tool_scenario()
    del scenario["steps"][2]
    agent = start(agents, tmp_path, "claude", CLAUDE, scenario)
    agent.send(user("Do the task."))
    agent.wait_for(has_block("tool_use"))
    agent.send(user("Also mention this."))
    assert agent.wait_for(is_type("result"))["result"] == "AGAIN"
    agent.close()
    assert agent.exit_code() == 0
    assert list(map(claude_kind, agent.lines)).count("result") == 1
    assert list(map(claude_kind, agent.lines)).count("system/init") == 1


# ---------------------------------------------------------------------------
# pi --mode rpc

PI = ["--mode", "rpc"]


def test_pi_steer_mid_tool_lands_in_the_same_run(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "pi", PI, tool_scenario())
    agent.send({"id": "prompt-1", "type": "prompt", "message": "Do the task."})
    assert agent.wait_for(is_type("response"))["id"] == "prompt-1"
    agent.wait_for(is_type("tool_execution_start"))
    started = agent.times[agent.cursor - 1]
    agent.send({"id": "steer-2", "type": "steer", "message": "Also mention this."})
    update = agent.wait_for(is_type("queue_update"))
    assert update["steering"] == ["Also mention this."]
    assert agent.wait_for(is_type("response"))["id"] == "steer-2"
    agent.wait_for(is_type("tool_execution_end"))
    assert agent.times[agent.cursor - 1] - started >= TOOL_SECONDS - 0.2
    steer = agent.wait_for(
        lambda line: line["type"] == "message_end" and line["message"]["role"] == "user"
    )
    assert steer["message"]["content"][0]["text"] == "Also mention this."
    answer = agent.wait_for(is_type("message_end"))
    assert answer["message"]["content"][0]["text"] == "TOOL-DONE"
    end = agent.wait_for(is_type("agent_end"))
    assert [m["role"] for m in end["messages"]] == [
        "user",
        "assistant",
        "toolResult",
        "user",
        "assistant",
    ]
    agent.close()
    assert agent.exit_code() == 0
    real = capture("pi-0.73.1", "steer")
    assert kinds(agent.lines, pi_kind) == kinds(real, pi_kind)
    keys_match(agent.lines, real, pi_kind)
    assert [(m["received"], m["midTool"]) for m in agent.messages()] == [
        ("prompt", False),
        ("steer", True),
    ]


def test_pi_follow_up_comes_after_the_model_stops_in_the_same_run(
    tmp_path: Path, agents: Any
) -> None:
    agent = start(agents, tmp_path, "pi", PI, tool_scenario())
    agent.send({"id": "prompt-1", "type": "prompt", "message": "Do the task."})
    agent.wait_for(is_type("tool_execution_start"))
    agent.send({"id": "follow_up-2", "type": "follow_up", "message": "Then this."})
    agent.wait_for(is_type("agent_end"))
    agent.close()
    assert agent.exit_code() == 0
    texts = [
        line["message"]["content"][0]["text"]
        for line in agent.lines
        if line["type"] == "message_end" and line["message"]["role"] in ("user", "assistant")
    ]
    assert texts == ["Do the task.", "Running it.", "TOOL-DONE", "Then this.", "AGAIN"]
    assert [line["type"] for line in agent.lines].count("agent_end") == 1
    assert kinds(agent.lines, pi_kind) == kinds(capture("pi-0.73.1", "follow_up"), pi_kind)


def test_pi_prompt_after_the_end_is_a_new_run_and_busy_prompts_are_refused(
    tmp_path: Path, agents: Any
) -> None:
    agent = start(agents, tmp_path, "pi", PI, tool_scenario())
    agent.send({"id": "prompt-1", "type": "prompt", "message": "Do the task."})
    agent.wait_for(is_type("tool_execution_start"))
    agent.send({"id": "prompt-2", "type": "prompt", "message": "Too soon."})
    refused = agent.wait_for(is_type("response", id="prompt-2"))
    assert refused["success"] is False
    assert "streamingBehavior" in refused["error"]
    agent.wait_for(is_type("agent_end"))
    agent.send({"id": "prompt-3", "type": "prompt", "message": "Next."})
    agent.wait_for(is_type("agent_start"))
    end = agent.wait_for(is_type("agent_end"))
    assert end["messages"][-1]["content"][0]["text"] == "AGAIN"
    agent.close()
    assert agent.exit_code() == 0
    assert [(m["text"], m["accepted"]) for m in agent.messages()] == [
        ("Do the task.", True),
        ("Too soon.", False),
        ("Next.", True),
    ]
    assert len(agent.pids()) == 1


def test_pi_abort_ends_the_run_then_answers(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "pi", PI, tool_scenario(LONG_SECONDS))
    agent.send({"id": "prompt-1", "type": "prompt", "message": "Do the task."})
    agent.wait_for(is_type("tool_execution_start"))
    sent = time.monotonic()
    agent.send({"id": "abort-2", "type": "abort"})
    killed = agent.wait_for(is_type("tool_execution_end"))
    assert killed["isError"] is True
    assert killed["result"]["content"][0]["text"] == "Command aborted"
    aborted = agent.wait_for(
        lambda line: line["type"] == "message_end" and line["message"]["role"] == "assistant"
    )
    assert aborted["message"]["stopReason"] == "aborted"
    agent.wait_for(is_type("agent_end"))
    assert agent.wait_for(is_type("response"))["id"] == "abort-2"
    assert time.monotonic() - sent < 5
    agent.send({"id": "prompt-3", "type": "prompt", "message": "Carry on."})
    assert agent.wait_for(is_type("agent_end"))["messages"][-1]["content"][0]["text"] == "AGAIN"
    agent.close()
    assert agent.exit_code() == 0
    real = capture("pi-0.73.1", "abort")
    assert kinds(agent.lines, pi_kind) == kinds(real, pi_kind)
    keys_match(agent.lines, real, pi_kind)


def test_pi_end_of_input_mid_run_exits_0_at_once(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "pi", PI, tool_scenario(LONG_SECONDS))
    agent.send({"id": "prompt-1", "type": "prompt", "message": "Do the task."})
    agent.wait_for(is_type("tool_execution_start"))
    closed = time.monotonic()
    agent.close()
    assert agent.exit_code() == 0
    assert time.monotonic() - closed < 5
    assert "agent_end" not in [line["type"] for line in agent.lines]


def test_pi_bad_lines_are_answered_and_pi_carries_on(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "pi", PI, tool_scenario(0.1))
    agent.send("this is not json")
    agent.send({"id": "no_such_command-1", "type": "no_such_command"})
    parse = agent.wait_for(is_type("response"))
    assert (parse["command"], parse["success"]) == ("parse", False)
    assert parse["error"].startswith("Failed to parse command:")
    unknown = agent.wait_for(is_type("response"))
    assert unknown == {
        "type": "response",
        "command": "no_such_command",
        "success": False,
        "error": "Unknown command: no_such_command",
    }
    agent.send({"id": "prompt-1", "type": "prompt", "message": "Do the task."})
    agent.wait_for(is_type("agent_end"))
    agent.close()
    assert agent.exit_code() == 0
    real = capture("pi-0.73.1", "bad_lines")
    assert kinds(agent.lines, pi_kind)[:2] == kinds(real, pi_kind)[:2]


def test_pi_steer_while_the_model_answers_is_a_further_turn_of_the_run(
    tmp_path: Path, agents: Any
) -> None:
    agent = start(agents, tmp_path, "pi", PI, THINK)
    agent.send({"id": "prompt-1", "type": "prompt", "message": "Do the task."})
    agent.wait_for(is_type("message_end"))
    agent.send({"id": "steer-2", "type": "steer", "message": "Also mention this."})
    agent.wait_for(is_type("agent_end"))
    agent.close()
    assert agent.exit_code() == 0
    texts = [
        line["message"]["content"][0]["text"]
        for line in agent.lines
        if line["type"] == "message_end"
    ]
    assert texts == ["Do the task.", "PLAIN-OK", "Also mention this.", "AGAIN"]
    assert kinds(agent.lines, pi_kind) == kinds(capture("pi-0.73.1", "steer_think"), pi_kind)
    assert [m["during"] for m in agent.messages()] == ["idle", "model"]


# ---------------------------------------------------------------------------
# codex app-server


class Codex:
    """A JSON-RPC client of the fake's app-server, with a thread started."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.next_id = 1
        self.request("initialize", {"clientInfo": {"name": "test", "version": "0"}})
        agent.send({"method": "initialized"})
        answer = self.request("thread/start", {"cwd": ".", "approvalPolicy": "never"})
        self.thread = answer["result"]["thread"]["id"]
        agent.wait_for(lambda line: line.get("method") == "thread/started")

    def request(self, method: str, params: dict[str, Any], *, wait: bool = True) -> Line:
        request_id = self.next_id
        self.next_id += 1
        self.agent.send({"id": request_id, "method": method, "params": params})
        if not wait:
            return {"id": request_id}
        return self.agent.wait_for(lambda line: line.get("id") == request_id)

    def text(self, text: str) -> list[dict[str, str]]:
        return [{"type": "text", "text": text}]

    def turn(self, text: str) -> str:
        answer = self.request("turn/start", {"threadId": self.thread, "input": self.text(text)})
        turn_id: str = answer["result"]["turn"]["id"]
        return turn_id

    def steer(self, turn_id: str, text: str) -> Line:
        params = {"threadId": self.thread, "expectedTurnId": turn_id, "input": self.text(text)}
        return self.request("turn/steer", params)


def method_is(method: str, item: str | None = None) -> Callable[[Line], bool]:
    return lambda line: (
        line.get("method") == method and (item is None or line["params"]["item"]["type"] == item)
    )


def item_texts(lines: list[Line]) -> list[str]:
    found = []
    for line in lines:
        if line.get("method") == "item/completed":
            item = line["params"]["item"]
            if item["type"] == "userMessage":
                found.append(item["content"][0]["text"])
            elif item["type"] == "agentMessage":
                found.append(item["text"])
    return found


def test_codex_steer_mid_tool_lands_in_the_same_turn(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "codex", ["app-server"], tool_scenario())
    codex = Codex(agent)
    turn_id = codex.turn("Do the task.")
    agent.wait_for(method_is("item/started", "commandExecution"))
    started = agent.times[agent.cursor - 1]
    assert codex.steer(turn_id, "Also mention this.")["result"] == {"turnId": turn_id}
    agent.wait_for(method_is("item/completed", "commandExecution"))
    assert agent.times[agent.cursor - 1] - started >= TOOL_SECONDS - 0.2
    done = agent.wait_for(method_is("turn/completed"))
    assert done["params"]["turn"]["status"] == "completed"
    assert item_texts(agent.lines) == [
        "Do the task.",
        "Running it.",
        "Also mention this.",
        "TOOL-DONE",
    ]
    # After the end: a new turn in the same thread and process.
    second = codex.turn("Next.")
    assert second != turn_id
    assert agent.wait_for(method_is("turn/completed"))["params"]["threadId"] == codex.thread
    agent.close()
    assert agent.exit_code() == 0
    real = capture("codex-0.169.0", "steer")
    first_turn = agent.lines[: agent.lines.index(done) + 1]
    assert kinds(first_turn, codex_kind) == kinds(real, codex_kind)
    keys_match(agent.lines, real, codex_kind)
    assert [(m["received"], m["midTool"]) for m in agent.messages()] == [
        ("turn_start", False),
        ("turn_steer", True),
        ("turn_start", False),
    ]
    assert len(agent.pids()) == 1


def test_codex_steer_while_the_model_answers_drops_that_answer(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "codex", ["app-server"], THINK)
    codex = Codex(agent)
    turn_id = codex.turn("Do the task.")
    agent.wait_for(method_is("item/completed", "userMessage"))
    codex.steer(turn_id, "Also mention this.")
    agent.wait_for(method_is("turn/completed"))
    agent.close()
    assert agent.exit_code() == 0
    assert item_texts(agent.lines) == ["Do the task.", "Also mention this.", "AGAIN"]
    real = capture("codex-0.169.0", "steer_think")
    assert kinds(agent.lines, codex_kind) == kinds(real, codex_kind)


def test_codex_interrupt_completes_the_turn_interrupted(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "codex", ["app-server"], tool_scenario(LONG_SECONDS))
    codex = Codex(agent)
    turn_id = codex.turn("Do the task.")
    agent.wait_for(method_is("item/started", "commandExecution"))
    sent = time.monotonic()
    answer = codex.request("turn/interrupt", {"threadId": codex.thread, "turnId": turn_id})
    assert answer["result"] == {}
    done = agent.wait_for(method_is("turn/completed"))
    assert done["params"]["turn"]["status"] == "interrupted"
    assert time.monotonic() - sent < 5
    codex.turn("Carry on.")
    agent.wait_for(method_is("turn/completed"))
    agent.close()
    assert agent.exit_code() == 0
    real = capture("codex-0.169.0", "interrupt")
    assert kinds(agent.lines, codex_kind) == kinds(real, codex_kind)


def test_codex_refuses_a_steer_without_a_turn_and_bad_lines(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "codex", ["app-server"], tool_scenario(0.1))
    codex = Codex(agent)
    refused = codex.steer("no-such-turn", "Hello?")
    assert refused["error"] == {"code": -32600, "message": "no active turn to steer"}
    agent.send("this is not json")
    unknown = codex.request("no/such/method", {})
    assert unknown["error"]["code"] == -32600
    assert "unknown variant `no/such/method`" in unknown["error"]["message"]
    codex.turn("Do the task.")
    assert agent.wait_for(method_is("turn/completed"))["params"]["turn"]["status"] == "completed"
    agent.close()
    assert agent.exit_code() == 0
    assert "Failed to deserialize JSONRPCMessage" in agent.stderr()
    assert [m["accepted"] for m in agent.messages()] == [False, True]


def test_codex_end_of_input_mid_turn_exits_0_at_once(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "codex", ["app-server"], tool_scenario(LONG_SECONDS))
    codex = Codex(agent)
    codex.turn("Do the task.")
    agent.wait_for(method_is("item/started", "commandExecution"))
    closed = time.monotonic()
    agent.close()
    assert agent.exit_code() == 0
    assert time.monotonic() - closed < 5
    assert not [line for line in agent.lines if line.get("method") == "turn/completed"]
    assert "failed to record rollout items" in agent.stderr()


def test_codex_turn_start_while_a_turn_runs_joins_it(tmp_path: Path, agents: Any) -> None:
    agent = start(agents, tmp_path, "codex", ["app-server"], tool_scenario())
    codex = Codex(agent)
    turn_id = codex.turn("Do the task.")
    agent.wait_for(method_is("item/started", "commandExecution"))
    assert codex.turn("Also mention this.") == turn_id
    agent.wait_for(method_is("turn/completed"))
    agent.close()
    assert agent.exit_code() == 0
    assert item_texts(agent.lines) == [
        "Do the task.",
        "Running it.",
        "Also mention this.",
        "TOOL-DONE",
    ]
    assert [line.get("method") for line in agent.lines].count("turn/completed") == 1


# ---------------------------------------------------------------------------
# Every capture replayed: the client's lines written to the fake at the same
# points of its stream, the same kinds of lines coming back in the same order.

#: The mock's scripted tasks as scenarios.
MOCK_TASKS: dict[str, dict[str, Any]] = {
    "plain": {
        "version": 1,
        "steps": [{"assistant": {"text": "PLAIN-OK"}}, {"agent_end": {}}],
        "resumes": [[{"assistant": {"text": "AGAIN"}}, {"agent_end": {}}]],
    },
    "slow": tool_scenario(1.0),
    "long": tool_scenario(LONG_SECONDS),
    "think": THINK,
}

#: Captures the fake does not replay, and why.
NOT_REPLAYED = {
    "claude-2.1.197/mid_tool_replay": "--replay-user-messages is not played",
    "claude-2.1.332/mid_tool_replay": "--replay-user-messages is not played",
    "claude-2.1.197/mid_think_replay": "--replay-user-messages is not played",
    "claude-2.1.332/mid_think_replay": "--replay-user-messages is not played",
    # A race: codex had not started the turn when its input ended; the fake
    # starts a turn as soon as it answers turn/start.
    "codex-0.169.0/eof_early": "the turn had not started",
}

LAUNCH = {"claude": ("claude", CLAUDE), "pi": ("pi", PI), "codex": ("codex", ["app-server"])}
KIND_OF = {"claude": claude_kind, "pi": pi_kind, "codex": codex_kind}


def replayable() -> list[tuple[str, str]]:
    found = []
    for folder in sorted(TWOWAY.iterdir()):
        if folder.is_dir():
            for path in sorted(folder.glob("*.jsonl")):
                if f"{folder.name}/{path.stem}" not in NOT_REPLAYED:
                    found.append((folder.name, path.stem))
    return found


def ids_in(lines: list[Line]) -> list[str]:
    """Thread and turn ids in order of first appearance."""
    found: list[str] = []
    for line in lines:
        holders = [line.get("result"), line.get("params")]
        for holder in holders:
            if not isinstance(holder, dict):
                continue
            for key in ("thread", "turn"):
                value = holder.get(key)
                if isinstance(value, dict) and value.get("id") not in found:
                    found.append(value["id"])
    return found


@pytest.mark.parametrize(("cli", "name"), replayable())
def test_capture_replayed_gives_the_same_kinds_of_lines(
    cli: str, name: str, tmp_path: Path, agents: Any
) -> None:
    family = cli.split("-", maxsplit=1)[0]
    kind_of = KIND_OF[family]
    entries = [
        json.loads(line) for line in (TWOWAY / cli / f"{name}.jsonl").read_text().splitlines()
    ]
    sent = [e["msg"] for e in entries if e["dir"] == "stdin"]
    # The mock's task is named in the first message: [scenario:NAME:...].
    named = json.dumps(sent).split("[scenario:")
    task = named[1].split(":")[0] if len(named) > 1 else "plain"
    launcher, args = LAUNCH[family]
    agent = start(agents, tmp_path, launcher, args, MOCK_TASKS[task])
    real: list[Line] = []
    batch: list[str] = []
    closed = False
    for index, entry in enumerate(entries):
        if entry["dir"] == "stdout":
            real.append(entry["msg"])
            continue
        closing = entry["dir"] == "probe" and entry["msg"]["event"] == "stdin_closed"
        if closed or (entry["dir"] != "stdin" and not closing):
            continue
        # Write where the real CLI's client wrote: once the fake has printed
        # as much of its stream (and the ids the line names).
        wanted = (len(kinds(real, kind_of)), len(ids_in(real)))
        deadline = time.monotonic() + HANG
        while (len(kinds(list(agent.lines), kind_of)), len(ids_in(list(agent.lines)))) < wanted:
            assert time.monotonic() < deadline, (wanted, kinds(agent.lines, kind_of))
            time.sleep(0.02)
        if closing:
            agent.close()
            closed = True
            continue
        message = entry["msg"]
        text = message["raw"] if set(message) == {"raw"} else json.dumps(message)
        for theirs, ours in zip(ids_in(real), ids_in(list(agent.lines)), strict=False):
            text = text.replace(theirs, ours)
        batch.append(text)
        following = entries[index + 1] if index + 1 < len(entries) else None
        # Lines the client wrote together arrive together.
        together = (
            following is not None
            and following["dir"] == "stdin"
            and following["t"] - entry["t"] < 0.002
        )
        if not together:
            agent.send(*batch)
            batch = []
    exits = [
        e["msg"]["code"] for e in entries if e["dir"] == "probe" and e["msg"]["event"] == "exit"
    ]
    assert agent.exit_code() == exits[0]
    assert kinds(agent.lines, kind_of) == kinds(real, kind_of)
    # Claude Code's own key order differs between its versions.
    keys_match(agent.lines, real, kind_of, ordered=family != "claude")
