"""The facts of ``tests/data/real/twoway/README.md``, checked on its captures.

The captures were recorded by ``tests/real/twoway_probe.py`` (real CLIs
against the mock model server); nothing here runs an agent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.real import mock_server

TWOWAY = Path(__file__).parent / "data" / "real" / "twoway"
CLAUDE_VERSIONS = ("claude-2.1.197", "claude-2.1.332")

Entry = dict[str, Any]


def load(cli: str, scenario: str) -> list[Entry]:
    path = TWOWAY / cli / f"{scenario}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def stdout(entries: list[Entry]) -> list[Entry]:
    return [e["msg"] for e in entries if e["dir"] == "stdout"]


def probe(entries: list[Entry], event: str) -> list[Entry]:
    return [e["msg"] for e in entries if e["dir"] == "probe" and e["msg"]["event"] == event]


def mock(entries: list[Entry]) -> list[Entry]:
    return [e["msg"] for e in entries if e["dir"] == "mock"]


def t_of(entries: list[Entry], pred: Any) -> float:
    return float(next(e["t"] for e in entries if pred(e)))


def results(entries: list[Entry]) -> list[Entry]:
    return [m for m in stdout(entries) if m.get("type") == "result"]


# ---------------------------------------------------------------------------
# The mock's part


def test_mock_echoes_injected_words() -> None:
    req = mock_server.read_request(
        "chat",
        {"messages": [{"role": "user", "content": "[scenario:plain:ab12] go [inject:ONE]"}]},
        "m",
        stream=True,
    )
    req.tools = {"bash": {}}
    assert mock_server.decide(req, mock_server.State()).text == "PLAIN-OK SAW:ONE"


def test_mock_long_and_think_scenarios() -> None:
    tools = {"bash": {"properties": {"command": {"type": "string"}}}}
    body = {"messages": [{"role": "user", "content": "[scenario:long:ab12] go"}]}
    req = mock_server.read_request("chat", body, "m", stream=True)
    req.tools = tools
    reply = mock_server.decide(req, mock_server.State())
    assert reply.tool is not None
    assert f"sleep {mock_server.LONG_SECONDS}" in reply.tool[1]["command"]
    body = {"messages": [{"role": "user", "content": "[scenario:think:ab12] go"}]}
    req = mock_server.read_request("chat", body, "m", stream=True)
    req.tools = tools
    reply = mock_server.decide(req, mock_server.State())
    assert (reply.text, reply.delay) == ("PLAIN-OK", mock_server.THINK_SECONDS)


# ---------------------------------------------------------------------------
# Claude Code: --input-format stream-json


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
def test_claude_message_mid_tool_joins_the_same_turn(cli: str) -> None:
    entries = load(cli, "mid_tool")
    (result,) = results(entries)
    assert result["subtype"] == "success"
    assert result["result"].endswith("SAW:MIDTOOL")
    last = mock(entries)[-1]
    assert (last["toolResults"], last["injected"]) == (1, ["MIDTOOL"])
    # It rides in the tool result's content, as a system reminder.
    reminder = last["tail"][-1]["parts"][0]
    assert "The user sent a new message while you were working:" in reminder


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
def test_claude_two_messages_mid_tool_reach_the_same_request(cli: str) -> None:
    entries = load(cli, "mid_tool_two")
    (result,) = results(entries)
    assert result["result"].endswith("SAW:ONE,TWO")


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
def test_claude_message_mid_request_is_a_turn_of_its_own(cli: str) -> None:
    entries = load(cli, "mid_think")
    first, second = results(entries)
    assert first["result"] == "PLAIN-OK"
    assert second["result"] == "PLAIN-OK SAW:MIDTHINK"
    # Each turn starts with its own system/init line.
    inits = [m for m in stdout(entries) if m.get("subtype") == "init"]
    assert len(inits) == 2


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
def test_claude_replay_acknowledges_when_a_message_is_taken(cli: str) -> None:
    entries = load(cli, "mid_tool_replay")
    out = stdout(entries)
    replays = [i for i, m in enumerate(out) if m.get("isReplay")]
    injected = [i for i in replays if "[inject:MIDTOOL]" in json.dumps(out[i])]
    assert len(replays) == 2
    assert len(injected) == 1
    tool_result = next(
        i
        for i, m in enumerate(out)
        if m.get("type") == "user" and "tool_result" in json.dumps(m) and not m.get("isReplay")
    )
    result = next(i for i, m in enumerate(out) if m.get("type") == "result")
    assert tool_result < injected[0] < result


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
def test_claude_new_turn_after_result_in_the_same_process(cli: str) -> None:
    entries = load(cli, "after_result")
    first, second = results(entries)
    assert second["result"].endswith("SAW:SECOND")
    assert first["session_id"] == second["session_id"]
    (exit_,) = probe(entries, "exit")
    assert exit_["code"] == 0
    assert probe(entries, "stdin_closed")


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
def test_claude_waits_for_stdin_eof_and_then_exits(cli: str) -> None:
    entries = load(cli, "eof_after_result")
    assert probe(entries, "no_exit"), "still running 5 s after its result"
    (exit_,) = probe(entries, "exit")
    assert exit_["code"] == 0
    assert exit_["afterStdinClosed"] < 1


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
@pytest.mark.parametrize("scenario", ["eof_early", "eof_mid_tool"])
def test_claude_finishes_the_turn_after_stdin_eof(cli: str, scenario: str) -> None:
    entries = load(cli, scenario)
    closed = t_of(entries, lambda e: e["msg"].get("event") == "stdin_closed")
    done = t_of(entries, lambda e: e["dir"] == "stdout" and e["msg"].get("type") == "result")
    assert closed < done
    (result,) = results(entries)
    assert result["subtype"] == "success"
    assert probe(entries, "exit")[0]["code"] == 0


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
@pytest.mark.parametrize(
    ("scenario", "terminal"),
    [("interrupt", "aborted_tools"), ("interrupt_think", "aborted_streaming")],
)
def test_claude_interrupt_ends_the_turn_not_the_process(
    cli: str, scenario: str, terminal: str
) -> None:
    entries = load(cli, scenario)
    response = next(m for m in stdout(entries) if m.get("type") == "control_response")
    assert response["response"]["subtype"] == "success"
    assert response["response"]["request_id"] == "int-1"
    aborted, after = results(entries)
    assert (aborted["subtype"], aborted["is_error"]) == ("error_during_execution", True)
    assert aborted["terminal_reason"] == terminal
    assert after["result"].endswith("SAW:AFTER")


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
def test_claude_interrupt_keeps_a_queued_message(cli: str) -> None:
    aborted, after = results(load(cli, "interrupt_queued"))
    assert aborted["subtype"] == "error_during_execution"
    assert after["result"].endswith("SAW:QUEUED")


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
def test_claude_end_session_exits_with_stdin_open(cli: str) -> None:
    entries = load(cli, "end_session")
    assert not probe(entries, "stdin_closed")
    assert probe(entries, "exit")[0]["code"] == 0


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
def test_claude_a_line_that_is_not_json_ends_the_process(cli: str) -> None:
    entries = load(cli, "not_json")
    assert not results(entries)
    assert probe(entries, "exit")[0]["code"] == 1


# ---------------------------------------------------------------------------
# pi: --mode rpc


PI = "pi-0.73.1"


def agent_ends(entries: list[Entry]) -> list[Entry]:
    return [m for m in stdout(entries) if m.get("type") == "agent_end"]


def user_texts(entries: list[Entry]) -> list[str]:
    return [
        m["message"]["content"][0]["text"]
        for m in stdout(entries)
        if m.get("type") == "message_end" and m["message"].get("role") == "user"
    ]


@pytest.mark.parametrize(
    ("scenario", "word"),
    [("steer", "STEER"), ("steer_think", "STEER"), ("follow_up", "FOLLOW")],
)
def test_pi_steer_and_follow_up_stay_in_the_same_run(scenario: str, word: str) -> None:
    entries = load(PI, scenario)
    assert len(agent_ends(entries)) == 1
    kind = "follow_up" if scenario == "follow_up" else "steer"
    response = next(m for m in stdout(entries) if m.get("command") == kind)
    assert response["success"] is True
    assert any(t.startswith(f"[inject:{word}]") for t in user_texts(entries))
    assert any(word in m["injected"] for m in mock(entries))


def test_pi_steers_one_at_a_time() -> None:
    entries = load(PI, "steer_two")
    assert len(agent_ends(entries)) == 1
    assert [m["injected"] for m in mock(entries)] == [[], ["ONE"], ["ONE", "TWO"]]


def test_pi_prompt_while_busy_needs_streaming_behavior() -> None:
    entries = load(PI, "prompt_busy")
    refused = next(m for m in stdout(entries) if m.get("id") == "prompt-2")
    assert refused["success"] is False
    assert "streamingBehavior" in refused["error"]
    queued = next(m for m in stdout(entries) if m.get("id") == "prompt-3")
    assert queued["success"] is True


@pytest.mark.parametrize("scenario", ["steer_after_end", "follow_up_after_end"])
def test_pi_keeps_a_steer_after_the_run_for_the_next_prompt(scenario: str) -> None:
    # Accepted, but no run of its own: it waits in pi's queue for the next
    # prompt, and is lost if none comes (stdin closed).
    entries = load(PI, scenario)
    kind = scenario.removesuffix("_after_end")
    response = next(m for m in stdout(entries) if m.get("command") == kind)
    assert response["success"] is True
    timeouts = [m["waiting_for"] for m in probe(entries, "timeout")]
    assert any("alone" in what for what in timeouts), "it started a run by itself"
    assert len(agent_ends(entries)) == 2
    assert [m["injected"] for m in mock(entries)][-1] == ["LATE", "NEXT"]


def test_pi_abort_ends_the_run_and_the_next_prompt_works() -> None:
    entries = load(PI, "abort")
    out = stdout(entries)
    stops = [m["message"].get("stopReason") for m in out if m.get("type") == "message_end"]
    assert "aborted" in stops
    assert next(m for m in out if m.get("command") == "abort")["success"] is True
    assert len(agent_ends(entries)) == 2
    assert probe(entries, "exit")[0]["toolCommandsLeft"] == []


@pytest.mark.parametrize("scenario", ["eof_early", "eof_mid_tool"])
def test_pi_exits_at_stdin_eof_abandoning_the_run(scenario: str) -> None:
    entries = load(PI, scenario)
    assert not agent_ends(entries)
    assert not mock(entries) or scenario == "eof_mid_tool"
    (exit_,) = probe(entries, "exit")
    assert exit_["code"] == 0
    # At once: right after reading the EOF (closed before pi had started,
    # it first answers the prompt and starts the run).
    exited = t_of(entries, lambda e: e["msg"] == exit_)
    last = max(
        e["t"] for e in entries if e["dir"] == "stdout" or e["msg"] == {"event": "stdin_closed"}
    )
    assert exited - last < 0.5


def test_pi_leaves_its_running_command_behind_at_eof() -> None:
    entries = load(PI, "eof_mid_tool")
    assert probe(entries, "exit")[0]["toolCommandsLeft"]
    assert mock_server.SLOW_FILE in probe(entries, "workdir")[0]["files"]


def test_pi_answers_bad_lines_without_an_id() -> None:
    out = stdout(load(PI, "bad_lines"))
    parse = next(m for m in out if m.get("command") == "parse")
    assert parse["success"] is False
    assert "id" not in parse
    unknown = next(m for m in out if m.get("command") == "no_such_command")
    assert "id" not in unknown


# ---------------------------------------------------------------------------
# Codex: app-server


CODEX = "codex-0.169.0"


def completed(entries: list[Entry]) -> list[Entry]:
    return [m for m in stdout(entries) if m.get("method") == "turn/completed"]


def answer(entries: list[Entry], rid: int) -> Entry:
    return next(m for m in stdout(entries) if m.get("id") == rid and "method" not in m)


@pytest.mark.parametrize(("scenario", "results_seen"), [("steer", 1), ("steer_think", 0)])
def test_codex_steer_joins_the_running_turn(scenario: str, results_seen: int) -> None:
    entries = load(CODEX, scenario)
    turn = answer(entries, 3)["result"]["turn"]["id"]
    assert answer(entries, 4)["result"] == {"turnId": turn}
    (done,) = completed(entries)
    assert done["params"]["turn"]["status"] == "completed"
    last = mock(entries)[-1]
    assert (last["toolResults"], last["injected"]) == (results_seen, ["STEER"])


def test_codex_steer_mid_request_drops_the_answer_in_flight() -> None:
    entries = load(CODEX, "steer_think")
    first, second = mock(entries)
    assert first["reply"]["text"] == "PLAIN-OK"
    deltas = [m for m in stdout(entries) if m.get("method") == "item/agentMessage/delta"]
    assert [m["params"]["delta"] for m in deltas] == ["PLAIN-OK SAW:STEER"]
    assert "PLAIN-OK" not in json.dumps(second["tail"])


def test_codex_steer_needs_the_active_turn() -> None:
    entries = load(CODEX, "steer_stale")
    for rid in (4, 5):
        error = answer(entries, rid)["error"]
        assert (error["code"], error["message"]) == (-32600, "no active turn to steer")
    busy = load(CODEX, "busy")
    assert "expected active turn id" in answer(busy, 4)["error"]["message"]


def test_codex_turn_start_while_busy_joins_the_running_turn() -> None:
    entries = load(CODEX, "busy")
    turn = answer(entries, 3)["result"]["turn"]["id"]
    assert answer(entries, 5)["result"]["turn"]["id"] == turn
    (done,) = completed(entries)
    assert done["params"]["turn"]["id"] == turn


@pytest.mark.parametrize("scenario", ["interrupt", "interrupt_think"])
def test_codex_interrupt_completes_the_turn_as_interrupted(scenario: str) -> None:
    entries = load(CODEX, scenario)
    assert answer(entries, 4)["result"] == {}
    statuses = [m["params"]["turn"]["status"] for m in completed(entries)]
    assert statuses[0] == "interrupted"
    assert probe(entries, "exit")[0]["toolCommandsLeft"] == []


@pytest.mark.parametrize("scenario", ["eof_early", "eof_mid_tool"])
def test_codex_exits_at_stdin_eof_abandoning_the_turn(scenario: str) -> None:
    entries = load(CODEX, scenario)
    assert not completed(entries)
    (exit_,) = probe(entries, "exit")
    assert (exit_["code"], exit_["toolCommandsLeft"]) == (0, [])
    assert exit_["afterStdinClosed"] < 0.5
    assert probe(entries, "workdir")[0]["files"] == []


def test_codex_ignores_a_line_that_is_not_json() -> None:
    entries = load(CODEX, "bad_lines")
    assert "Invalid request: unknown variant" in answer(entries, 3)["error"]["message"]
    (done,) = completed(entries)
    assert done["params"]["turn"]["status"] == "completed"
    errors = [e["msg"] for e in entries if e["dir"] == "stderr"]
    assert any("Failed to deserialize JSONRPCMessage" in line for line in errors)


@pytest.mark.parametrize("cli", CLAUDE_VERSIONS)
def test_claude_initialize_is_answered(cli: str) -> None:
    entries = load(cli, "initialize")
    response = next(m for m in stdout(entries) if m.get("type") == "control_response")
    assert response["response"]["subtype"] == "success"
    assert "commands" in response["response"]["response"]
    (result,) = results(entries)
    assert result["result"] == "PLAIN-OK"
