"""The conformance tier's ACP cases: real agents driven over the Agent Client
Protocol through ``agent-wrapper run --dialect acp``, against the mock model
server, asserted as a user sees them (result.json, protocol.jsonl, the mock's
requests, the process table). Collected only when ``AGENT_WRAPPER_CLIS``
names the install cache (``scripts/conformance``); see tests/real/README.md.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.real import mock_server as m
from tests.real.acp_probe import acp_setup
from tests.real.harness import (
    CASE_LIMIT,
    RUN_LIMIT,
    STEER_HOOK,
    Mock,
    _processes_of,
    cache_dir,
    mock_server_running,
)
from tests.real.test_conformance_steer import (
    STEER_TEXT,
    STEER_WAIT,
    TOOL_WAIT,
    WORD,
    tool_called,
    wait_until,
    wrapper_cli,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "wrapper/schemas/result.schema.json").read_text())

#: The ACP agents of the tier, as ``acp_setup`` knows them. opencode runs its
#: tools without asking unless configured to ask (``opencode-ask``); it does
#: no context check of its own (and the mock enforces none), so no overflow.
#: Qwen Code runs as ``qwen --acp --approval-mode default`` (it asks before
#: its shell tool), Kilo CLI as ``kilo acp`` (an opencode fork: it asks only
#: when configured to, ``kilo-ask``).
AGENTS = ("gemini", "opencode", "qwen", "kilo")
ASKING_AGENTS = ("gemini", "opencode-ask", "qwen", "kilo-ask")
#: What a 5 MB prompt comes to for the agents that check their context
#: (outcome, stopReason, rawStopReason): Gemini CLI ends the turn with
#: max_tokens; Qwen Code 0.24.4 refuses the prompt with a JSON-RPC error
#: (-32603 "Context is too large to send safely after automatic
#: compression"), which the wrapper reports as the agent's error.
CONTEXT_CHECKING_AGENTS = {
    "gemini": ("ok", "length", "max_tokens"),
    "qwen": ("error", "error", "error -32603"),
}

#: A PreToolUse handler that refuses every shell command.
DENY_HOOK = """\
import json, sys
event = json.load(sys.stdin)
print("no shell commands here: " + str(event.get("tool_name")), file=sys.stderr)
sys.exit(2)
"""


@dataclass
class AcpCase:
    returncode: int
    result: dict[str, Any]
    protocol: list[dict[str, Any]]
    stderr: str
    workdir: Path
    requests: list[dict[str, Any]]
    leftover: list[str]

    def out(self, method: str) -> list[dict[str, Any]]:
        return [
            r["msg"]
            for r in self.protocol
            if r["dir"] == "out" and r["msg"].get("method") == method
        ]

    def came_in(self, method: str) -> list[dict[str, Any]]:
        return [
            r["msg"] for r in self.protocol if r["dir"] == "in" and r["msg"].get("method") == method
        ]

    def where(self) -> str:
        return f"stderr:\n{self.stderr[-3000:]}"


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mock]:
    with mock_server_running(tmp_path_factory.mktemp("mock") / "requests.jsonl") as server:
        yield server


def run_acp(
    agent: str,
    scenario: str,
    base: Path,
    mock: Mock,
    *options: str,
    task_text: str | None = None,
    sigterm_in_tool: bool = False,
    during: Callable[[Path, str], None] | None = None,
) -> AcpCase:
    home, work, run_dir = base / "home", base / "work", base / "run"
    home.mkdir()
    work.mkdir()
    agent_env, command = acp_setup(agent, home, mock.url, cache_dir())
    nonce = secrets.token_hex(6)
    marker = f"[scenario:{scenario}:{nonce}]"
    text = f"{marker} Do the scripted task." if task_text is None else f"{marker} {task_text}"
    task_file = base / "task.txt"
    task_file.write_text(text)
    argv = [sys.executable, "-m", "wrapper", "run", "--dialect", "acp", "--output", "quiet"]
    argv += ["--run-dir", str(run_dir), "--timeout", str(RUN_LIMIT), *options]
    argv += ["--task-file", str(task_file), "--", *command]
    env = {**os.environ, **agent_env, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if sigterm_in_tool:
        deadline = time.monotonic() + RUN_LIMIT
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = json.loads((run_dir / "status.json").read_text())
            except (OSError, ValueError):
                status = {}
            if status.get("currentTool"):
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
    if during is not None:
        during(run_dir, nonce)
    _, stderr = proc.communicate(timeout=CASE_LIMIT)
    result = json.loads((run_dir / "result.json").read_text())
    protocol = [json.loads(line) for line in (run_dir / "protocol.jsonl").read_text().splitlines()]
    return AcpCase(
        returncode=proc.returncode,
        result=result,
        protocol=protocol,
        stderr=stderr.decode(errors="replace"),
        workdir=work,
        requests=mock.requests(nonce),
        leftover=_processes_of(result["runId"]),
    )


def settings_with(base: Path, event: str, script: str, matcher: str | None = None) -> str:
    hook = base / f"{event}.py"
    hook.write_text(script)
    group: dict[str, Any] = {"hooks": [{"type": "command", "args": [sys.executable, str(hook)]}]}
    if matcher is not None:
        group["matcher"] = matcher
    path = base / "settings.json"
    path.write_text(json.dumps({"hooks": {event: [group]}}))
    return str(path)


def check_common(case: AcpCase, *, signalled: bool = False) -> None:
    jsonschema.validate(case.result, SCHEMA)
    assert case.leftover == [], case.where()
    pids = {a["pid"] for a in case.result["attempts"]}
    assert len(pids) == 1, "one agent process for the whole run"
    if not signalled:
        assert all(a["signalsSent"] == [] for a in case.result["attempts"]), case.where()
        assert case.result["forcedCleanup"] is False, case.where()


@pytest.mark.parametrize("agent", AGENTS)
def test_plain_answer(agent: str, mock: Mock, tmp_path: Path) -> None:
    case = run_acp(agent, "plain", tmp_path, mock)
    result = case.result
    assert (result["outcome"], result["stopReason"], result["rawStopReason"]) == (
        "ok",
        "stop",
        "end_turn",
    ), case.where()
    assert result["finalText"] == m.PLAIN_ANSWER
    assert case.requests, "the agent never reached the mock"
    check_common(case)


@pytest.mark.parametrize("agent", ASKING_AGENTS)
def test_tool_call_with_permission_granted(agent: str, mock: Mock, tmp_path: Path) -> None:
    case = run_acp(agent, "tool", tmp_path, mock)
    result = case.result
    assert result["outcome"] == "ok", case.where()
    # An ACP turn's text is all of it, the words before the tool call included.
    assert result["finalText"].endswith(m.TOOL_ANSWER)
    assert result["toolsUsed"] == ["execute"]
    assert case.came_in("session/request_permission"), "the agent asked before its tool"
    assert (case.workdir / m.TOOL_FILE).read_text().strip() == "tool-ok"
    check_common(case)


@pytest.mark.parametrize("agent", AGENTS)
def test_stop_hook_steers_the_live_session(agent: str, mock: Mock, tmp_path: Path) -> None:
    settings = settings_with(tmp_path, "Stop", STEER_HOOK)
    case = run_acp(agent, "steer", tmp_path, mock, "--settings", settings)
    result = case.result
    assert result["outcome"] == "ok", case.where()
    assert result["steerCount"] == 1
    assert result["finalText"] == m.STEERED_ANSWER
    assert len(result["attempts"]) == 2
    assert len(case.out("session/new")) == 1
    prompts = case.out("session/prompt")
    assert len(prompts) == 2
    assert prompts[1]["params"]["prompt"][0]["text"] == m.STEER_REASON
    # The model saw the history: the steered request carried the first answer.
    steered = [r for r in case.requests if r.get("steered")]
    assert steered, "no model request carried the hook's reason"
    assert all(r["reply"]["text"] != m.LOST_CONTEXT for r in steered)
    check_common(case)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_steer_from_outside_reaches_the_live_session(
    agent: str, mock: Mock, tmp_path: Path
) -> None:
    # ``agent-wrapper steer`` 1 s into the 3 s shell call: the tool is let
    # finish, the turn is cancelled over the protocol and the steer is the
    # next prompt of the same session and process, no signal sent. Gemini
    # CLI forgets a cancelled turn (its next request held neither the task
    # nor the call): its turn is let end instead.
    sent: dict[str, Any] = {}

    def steer(run_dir: Path, nonce: str) -> None:
        assert wait_until(lambda: tool_called(mock, nonce), TOOL_WAIT), "no shell call"
        time.sleep(1.0)
        sent["proc"] = wrapper_cli(
            "steer", str(run_dir), "--text", STEER_TEXT, "--wait", str(STEER_WAIT), "--json"
        )

    case = run_acp(agent, "slow", tmp_path, mock, during=steer)
    result = case.result
    steered = sent["proc"]
    assert steered.returncode == 0, f"{case.where()}\nsteer: {steered.stdout} {steered.stderr}"
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 2)
    assert (result["outcome"], result["externalSteerCount"]) == ("ok", 1), case.where()
    assert result["finalText"].endswith(f"SAW:{WORD}"), case.where()
    assert (case.workdir / m.SLOW_FILE).exists(), "the tool was cut short"
    prompts = case.out("session/prompt")
    assert len(prompts) == 2
    assert prompts[1]["params"]["prompt"][0]["text"] == STEER_TEXT
    assert bool(case.out("session/cancel")) == (agent != "gemini"), case.where()
    carrying = [r for r in case.requests if f"[inject:{WORD}]" in json.dumps(r["body"])]
    assert carrying, "no model request carried the steer"
    history = json.dumps(carrying[0]["body"])
    assert "[scenario:slow:" in history, "the first task was lost"
    assert m.SLOW_FILE in history, "the tool call was lost"
    check_common(case)


@pytest.mark.parametrize("agent", CONTEXT_CHECKING_AGENTS)
def test_a_prompt_too_big_for_the_context(agent: str, mock: Mock, tmp_path: Path) -> None:
    case = run_acp(
        agent, "plain", tmp_path, mock, task_text="Summarize: " + "lorem ipsum " * 416_666
    )
    result = case.result
    assert (
        result["outcome"],
        result["stopReason"],
        result["rawStopReason"],
    ) == CONTEXT_CHECKING_AGENTS[agent], case.where()
    check_common(case)


@pytest.mark.parametrize("agent", ASKING_AGENTS)
def test_a_pretooluse_deny_is_honoured(agent: str, mock: Mock, tmp_path: Path) -> None:
    settings = settings_with(tmp_path, "PreToolUse", DENY_HOOK, matcher="execute")
    case = run_acp(agent, "tool", tmp_path, mock, "--settings", settings)
    assert case.came_in("session/request_permission"), case.where()
    assert not (case.workdir / m.TOOL_FILE).exists(), "the refused tool ran"
    requests = case.came_in("session/request_permission")
    kinds = {
        (json.dumps(r["id"]), o["optionId"]): o["kind"]
        for r in requests
        for o in r["params"]["options"]
    }
    answers = [
        (json.dumps(r["msg"]["id"]), r["msg"]["result"]["outcome"])
        for r in case.protocol
        if r["dir"] == "out"
        and "result" in r["msg"]
        and any(q["id"] == r["msg"]["id"] for q in requests)
    ]
    assert answers
    # Each request was answered with one of its reject options.
    chosen = [kinds.get((key, a.get("optionId"))) for key, a in answers]
    assert all(kind is not None and kind.startswith("reject") for kind in chosen), answers
    check_common(case)


@pytest.mark.parametrize("agent", AGENTS)
def test_sigterm_mid_turn(agent: str, mock: Mock, tmp_path: Path) -> None:
    case = run_acp(agent, "slow", tmp_path, mock, sigterm_in_tool=True)
    result = case.result
    assert result["outcome"] == "aborted", case.where()
    assert case.returncode == 128 + signal.SIGTERM
    assert case.out("session/cancel"), "the turn was cancelled over the protocol first"
    check_common(case, signalled=True)


#: The Claude Code and Codex adapters: installed from the registry like the
#: CLIs; they never exit when their stdin closes, so their runs end with the
#: ladder after the close grace (forcedCleanup, outcome still ok).
ADAPTERS = ("claude-acp", "codex-acp")


@pytest.mark.parametrize("agent", ADAPTERS)
def test_adapter_plain_answer(agent: str, mock: Mock, tmp_path: Path) -> None:
    case = run_acp(agent, "plain", tmp_path, mock)
    result = case.result
    assert (result["outcome"], result["rawStopReason"]) == ("ok", "end_turn"), case.where()
    # codex-acp sends its own notice (no metadata for the mock's model) as answer text first.
    assert result["finalText"].endswith(m.PLAIN_ANSWER)
    check_common(case, signalled=True)


@pytest.mark.parametrize("agent", ADAPTERS)
def test_adapter_steered_on_the_live_session(agent: str, mock: Mock, tmp_path: Path) -> None:
    settings = settings_with(tmp_path, "Stop", STEER_HOOK)
    case = run_acp(agent, "steer", tmp_path, mock, "--settings", settings)
    result = case.result
    assert result["outcome"] == "ok", case.where()
    assert (result["steerCount"], len(result["attempts"])) == (1, 2)
    assert result["finalText"].endswith(m.STEERED_ANSWER)
    steered = [r for r in case.requests if r.get("steered")]
    assert steered, "no model request carried the hook's reason"
    assert all(r["reply"]["text"] != m.LOST_CONTEXT for r in steered)
    check_common(case, signalled=True)


#: The agents that take seconds to start (``initialize`` and ``session/new``).
SLOW_STARTING_AGENTS = ("qwen", "kilo")


@pytest.mark.parametrize("agent", SLOW_STARTING_AGENTS)
def test_a_steer_while_the_agent_starts_goes_after_the_first_prompt(
    agent: str, mock: Mock, tmp_path: Path
) -> None:
    # ``agent-wrapper steer`` as soon as the run takes steers, before the
    # agent has a session: it waits for the session and is the next prompt
    # once the first turn answered; nothing is cancelled or signalled.
    sent: dict[str, Any] = {}

    def steer(run_dir: Path, nonce: str) -> None:
        def control() -> bool:
            try:
                return json.loads((run_dir / "status.json").read_text()).get("control") is not None
            except (OSError, ValueError):
                return False

        assert wait_until(control, TOOL_WAIT), "the run never took steers"
        sent["proc"] = wrapper_cli(
            "steer", str(run_dir), "--text", STEER_TEXT, "--wait", str(STEER_WAIT), "--json"
        )

    case = run_acp(agent, "plain", tmp_path, mock, during=steer)
    events = [
        json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    ]
    types = [e["type"] for e in events]
    assert types.index("steer_requested") < types.index("session"), "the agent started first"
    steered = sent["proc"]
    assert steered.returncode == 0, f"{case.where()}\nsteer: {steered.stdout} {steered.stderr}"
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 2)
    result = case.result
    assert (result["outcome"], result["externalSteerCount"]) == ("ok", 1), case.where()
    assert result["error"] is None
    prompts = case.out("session/prompt")
    assert len(prompts) == 2
    assert "[scenario:plain:" in prompts[0]["params"]["prompt"][0]["text"]
    assert prompts[1]["params"]["prompt"][0]["text"] == STEER_TEXT
    assert not case.out("session/cancel"), "a session with no turn yet was cancelled"
    assert result["finalText"].endswith(f"SAW:{WORD}"), case.where()
    assert "turn_cancelled" not in [w["code"] for w in result["warnings"]]
    check_common(case)
