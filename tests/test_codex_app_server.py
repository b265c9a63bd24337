"""Codex's app-server (``codex app-server``) driven live, end to end against
the fake agent: the session opened over JSON-RPC, the task as the first
``turn/start``, a steer from outside as ``turn/steer`` into the running turn
(no signal, the same process), a follow-up and a Stop handler's block as the
next ``turn/start``, an abort as ``turn/interrupt`` first, an approval the
agent asks for declined with a warning. And the pure parts: the client and
the mapping of the app-server's notifications."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import FAKE_PI, validate
from tests.test_external_steer import (
    Running,
    _abort_checked,
    _hook,
    _settings,
    answer,
    cli,
    of_type,
)
from tests.test_live_input import messages, one_process, sent, tool
from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    Event,
    SessionStarted,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnStarted,
    WarningEvent,
)
from wrapper.dialects import UsageError
from wrapper.dialects.codex import CodexDialect, is_app_server
from wrapper.dialects.codex_app_server import CodexAppServerClient
from wrapper.dialects.two_way import Answer

pytestmark = pytest.mark.usefixtures("no_leaks")

CODEX = FAKE_PI.parent / "codex"
APP = ("app-server",)
THREAD, TURN = "thread-1", "turn-1"


def line(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message)


def parsed(dialect: CodexDialect, *lines: dict[str, Any]) -> list[Event]:
    events: list[Event] = []
    for message in lines:
        events += dialect.parse(line(message))
    return events


def item(state: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"method": f"item/{state}", "params": {"item": body, "threadId": THREAD}}


def command(done: bool, **more: Any) -> dict[str, Any]:
    body = {"type": "commandExecution", "id": "call-1", "command": "/bin/bash -lc make"}
    body |= {"status": "completed" if done else "inProgress", **more}
    return item("completed" if done else "started", body)


def completed(status: str, error: Any = None) -> dict[str, Any]:
    turn = {"id": TURN, "status": status, "error": error}
    return {"method": "turn/completed", "params": {"threadId": THREAD, "turn": turn}}


def usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    last = {"inputTokens": input_tokens, "cachedInputTokens": 0, "outputTokens": output_tokens}
    last["totalTokens"] = input_tokens + output_tokens
    params = {"threadId": THREAD, "turnId": TURN, "tokenUsage": {"last": last, "total": last}}
    return {"method": "thread/tokenUsage/updated", "params": params}


# -- the pure parts ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "live"),
    [
        (["codex", "app-server"], True),
        (["codex", "-c", "approval_policy=never", "app-server"], True),
        (["codex", "exec", "--json"], False),
        (["codex", "exec", "--json", "--", "app-server"], False),
        (["codex", "-c", "app-server", "exec", "--json"], False),
    ],
)
def test_the_app_server_is_told_from_the_command_line(command: list[str], live: bool) -> None:
    assert is_app_server(command) is live
    assert (CodexDialect().input_client(command) is not None) is live


def test_the_task_goes_on_stdin_and_a_resume_is_the_next_prompt(tmp_path: Path) -> None:
    command = ["codex", "app-server", "-c", "approval_policy=never"]
    launch = CodexDialect().launch(command, "-do it", tmp_path, resumable=True)
    assert (launch.argv, launch.prompt) == (command, "-do it")
    resumed = CodexDialect().resume(command, "more", tmp_path, THREAD)
    assert (resumed.argv, resumed.prompt) == (command, "more")
    with pytest.raises(UsageError, match="needs a task"):
        CodexDialect().launch(command, None, tmp_path)


def opened(client: CodexAppServerClient) -> list[dict[str, Any]]:
    """The session opened for the task ``task`` and its turn started."""
    assert client.prompt("task") is None, "the turn waits for the thread"
    opening = client.outbox()
    assert [m.get("method") for m in opening] == ["initialize", "initialized", "thread/start"]
    assert opening[0]["params"]["clientInfo"]["name"] == "agent-wrapper"
    assert opening[2]["params"] == {"cwd": "/work"}, "approvals and sandbox are the user's"
    assert "jsonrpc" not in opening[0]
    assert client.received({"id": 1, "result": {"userAgent": "codex"}}) == []
    assert client.received({"id": 2, "result": {"thread": {"id": THREAD}}}) == []
    (start,) = client.outbox()
    assert start == {
        "id": 3,
        "method": "turn/start",
        "params": {"threadId": THREAD, "input": [{"type": "text", "text": "task"}]},
    }
    return opening


def test_the_client_opens_the_session_then_starts_the_turn() -> None:
    client = CodexAppServerClient("/work")
    opened(client)
    assert not client.takes("now"), "not before the turn's id is known"
    assert client.steer("s") is None
    assert client.abort() is None
    client.received({"id": 3, "result": {"turn": {"id": TURN, "status": "inProgress"}}})
    assert client.observe(TurnStarted()) == "steerable"
    assert client.takes("now")
    assert not client.takes("next-stop"), "a follow-up is the next turn"
    assert client.follow_up("f") is None
    assert client.steer("s") == {
        "id": 4,
        "method": "turn/steer",
        "params": {
            "threadId": THREAD,
            "expectedTurnId": TURN,
            "input": [{"type": "text", "text": "s"}],
        },
    }
    assert client.abort() == {
        "id": 5,
        "method": "turn/interrupt",
        "params": {"threadId": THREAD, "turnId": TURN},
    }
    client.received(completed("interrupted"))
    assert client.observe(AgentEnded(will_retry=False, settled=True)) == "ended"
    assert client.steer("late") is None, "between turns a steer is the next prompt"
    nxt = client.prompt("next")
    assert nxt is not None
    assert (nxt["method"], nxt["params"]["input"][0]["text"]) == ("turn/start", "next")
    client.close()
    assert client.prompt("after") is None


def test_a_new_process_continues_the_thread() -> None:
    dialect = CodexDialect()
    command = ["codex", "app-server"]
    dialect.resume(command, "more", Path("/run"), THREAD)
    client = dialect.input_client(command, "/work")
    assert client is not None
    start = client.prompt("more")
    opening = client.outbox()
    assert [m.get("method") for m in opening] == ["initialize", "initialized", "thread/resume"]
    assert opening[2]["params"] == {"threadId": THREAD, "cwd": "/work", "excludeTurns": True}
    assert start is not None
    assert start["params"]["threadId"] == THREAD, "the turn follows at once"
    dialect.launch(command, "task", Path("/run"))
    fresh = dialect.input_client(command, "/work")
    assert fresh is not None
    fresh.prompt("task")
    assert [m.get("method") for m in fresh.outbox()][-1] == "thread/start"


def test_a_refused_steer_is_told_to_the_wrapper_not_kept() -> None:
    client = CodexAppServerClient("/work")
    opened(client)
    client.received({"method": "turn/started", "params": {"turn": {"id": TURN}}})
    steer = client.steer("and the docs")
    assert steer is not None
    refusal = {"id": steer["id"], "error": {"code": -32600, "message": "no active turn to steer"}}
    (warning,) = client.received(refusal)
    assert isinstance(warning, WarningEvent)
    assert warning.code == "agent_refused_command"
    assert "no active turn to steer" in warning.message
    (told,) = client.answers()
    assert told == Answer(str(steer["id"]), "Codex refused it: no active turn to steer")
    assert client.answers() == [], "taken once"
    client.observe(AgentEnded(will_retry=False, settled=True))
    nxt = client.prompt("Tests fail.")
    assert nxt is not None
    texts = [part["text"] for part in nxt["params"]["input"]]
    assert texts == ["Tests fail."], "the wrapper gives the refused steer again, not the client"


def test_an_answered_steer_is_acknowledged() -> None:
    client = CodexAppServerClient("/work")
    opened(client)
    client.received({"method": "turn/started", "params": {"turn": {"id": TURN}}})
    steer = client.steer("and the docs")
    assert steer is not None
    assert client.received({"id": steer["id"], "result": {"turnId": TURN}}) == []
    assert client.answers() == [Answer(client.ticket(steer))]


def test_a_refused_turn_start_ends_the_turn_failed() -> None:
    client = CodexAppServerClient("/work")
    opened(client)
    refusal = {"id": 3, "error": {"code": -32600, "message": "thread not found: thread-1"}}
    warning, final, end = client.received(refusal)
    assert isinstance(warning, WarningEvent)
    assert isinstance(final, AssistantMessage)
    assert (final.stop_reason, final.raw_stop_reason) == ("error", "turn/start")
    assert final.error_message is not None
    assert "thread not found" in final.error_message
    assert client.observe(end) == "ended"


def test_a_command_the_turns_end_cut_short_ends_with_it() -> None:
    events = parsed(CodexDialect(), command(done=False), completed("interrupted"))
    _, cut, final, _ = events
    assert isinstance(cut, ToolEnded)
    assert (cut.tool_call_id, cut.is_error) == ("call-1", True)
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "aborted"


def test_an_approval_request_is_declined_with_a_warning() -> None:
    client = CodexAppServerClient("/work")
    opened(client)
    request = {
        "id": 0,
        "method": "item/commandExecution/requestApproval",
        "params": {"threadId": THREAD, "itemId": "call-1", "command": "rm -rf build"},
    }
    (warning,) = client.received(request)
    assert isinstance(warning, WarningEvent)
    assert "rm -rf build" in warning.message
    assert 'approval_policy="never"' in warning.message
    assert client.outbox() == [{"id": 0, "result": {"decision": "decline"}}]
    (long,) = client.received({**request, "params": {"command": "x" * 5000}})
    assert isinstance(long, WarningEvent)
    assert len(long.message) < 400, "a script is not copied whole"
    client.outbox()
    client.received({"id": 7, "method": "item/tool/requestUserInput", "params": {}})
    (answer_,) = client.outbox()
    assert answer_["id"] == 7
    assert answer_["error"]["code"] == -32601, "never left hanging"


def test_the_app_servers_notifications_map_to_the_stream() -> None:
    dialect = CodexDialect()
    started = {"method": "thread/started", "params": {"thread": {"id": THREAD, "cwd": "/w"}}}
    turn = {"method": "turn/started", "params": {"threadId": THREAD, "turn": {"id": TURN}}}
    message = {"type": "agentMessage", "id": "msg-1", "text": ""}
    delta = {"method": "item/agentMessage/delta", "params": {"itemId": "msg-1", "delta": "Bui"}}
    delta2 = {"method": "item/agentMessage/delta", "params": {"itemId": "msg-1", "delta": "lt."}}
    events = parsed(
        dialect,
        {"id": 1, "result": {"userAgent": "codex", "codexHome": "/h"}},
        {"method": "configWarning", "params": {"summary": "no bubblewrap"}},
        started,
        turn,
        command(done=False),
        command(done=True, aggregatedOutput="ok", exitCode=2),
        usage(20, 10),
        item("started", message),
        delta,
        delta2,
        item("completed", {**message, "text": "Built."}),
        usage(30, 5),
        completed("completed"),
    )
    session, turn_start, tool_start, tool_end, *texts, final, end = events
    assert session == SessionStarted(session_id=THREAD, cwd="/w")
    assert isinstance(turn_start, TurnStarted)
    assert isinstance(tool_start, ToolStarted)
    assert (tool_start.tool, tool_start.tool_call_id) == ("command_execution", "call-1")
    assert isinstance(tool_end, ToolEnded)
    assert (tool_end.is_error, tool_end.result) == (True, "ok"), "exit status 2 failed"
    assert texts == [TextDelta(text="Bui"), TextDelta(text="lt.")], "each piece once"
    assert isinstance(final, AssistantMessage)
    assert (final.stop_reason, final.raw_stop_reason, final.text) == ("stop", "completed", "Built.")
    assert final.usage is not None
    assert (final.usage.input, final.usage.output) == (50, 15), "the turn's requests summed"
    assert isinstance(end, AgentEnded)
    assert CodexDialect.recognises(started)


@pytest.mark.parametrize(
    ("status", "canonical"),
    [("completed", "stop"), ("interrupted", "aborted"), ("failed", "error"), ("odd", "odd")],
)
def test_a_turns_status_is_its_stop_reason(status: str, canonical: str) -> None:
    error = {"message": "model unreachable"} if status == "failed" else None
    final, _ = parsed(CodexDialect(), completed(status, error))
    assert isinstance(final, AssistantMessage)
    assert (final.stop_reason, final.raw_stop_reason) == (canonical, status)
    if status == "failed":
        assert final.error_message == "model unreachable"


# -- end to end ----------------------------------------------------------------------

TOOL_CALL = {
    "assistant": {
        "text": "Running it.",
        "stopReason": "toolUse",
        "toolCalls": [{"name": "bash", "arguments": {"command": "make"}}],
    }
}


def received(tmp_path: Path) -> list[tuple[str, str]]:
    return [(m["received"], m["text"]) for m in messages(tmp_path)]


def methods(run_dir: Path) -> list[str]:
    return [m.get("method", "answer") for m in sent(run_dir)]


def test_a_plain_run_opens_a_session_and_ends_when_stdin_closes(tmp_path: Path) -> None:
    run = Running(
        tmp_path, [TOOL_CALL, tool(0.2), *answer("Built it.")], agent=CODEX, agent_args=APP
    )
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["outcome"] == "ok"
    assert result["finalText"] == "Built it."
    assert result["exitCode"] == 0
    assert len(result["attempts"]) == 1
    assert result["toolsUsed"] == ["command_execution"]
    assert result["sessionId"] is not None
    assert "app-server" in of_type(events, "spawned")[0]["argv"]
    assert "Build it" not in of_type(events, "spawned")[0]["argv"], "no task argument"
    assert methods(run.run_dir) == ["initialize", "initialized", "thread/start", "turn/start"]
    assert received(tmp_path) == [("turn_start", "Build it")]
    one_process(events)
    validate("result", result)


def test_a_steer_during_a_tool_joins_the_running_turn(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [TOOL_CALL, tool(4), *answer("Built it, and saw the steer.")],
        [answer("never played")],
        agent=CODEX,
        agent_args=APP,
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
    took = [(m["received"], m["text"], m["midTool"]) for m in messages(tmp_path)]
    assert took == [("turn_start", "Build it", False), ("turn_steer", "Skip the docs", True)]
    assert all(m["accepted"] for m in messages(tmp_path))
    assert result["externalSteers"][0]["how"] == "live"
    validate("result", result)


def test_a_follow_up_is_the_next_turn(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [TOOL_CALL, tool(3), *answer("Built it.")],
        [answer("Docs written.")],
        agent=CODEX,
        agent_args=APP,
    )
    run.wait_for_tool()
    follow = cli("steer", str(run.run_dir), "--text", "Then the docs", "--when", "next-stop")
    assert follow.returncode == 0, follow.stderr
    assert "live" in follow.stdout
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Docs written."
    one_process(events)
    assert len(result["attempts"]) == 2, "one attempt per turn"
    assert received(tmp_path) == [("turn_start", "Build it"), ("turn_start", "Then the docs")]
    assert methods(run.run_dir).count("turn/start") == 2
    validate("result", result)


def test_a_stop_hook_block_is_the_next_turn_on_the_same_process(tmp_path: Path) -> None:
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
        agent=CODEX,
        agent_args=APP,
    )
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Tests pass now."
    assert result["steerCount"] == 1
    assert len(result["attempts"]) == 2
    assert len({attempt["pid"] for attempt in result["attempts"]}) == 1
    one_process(events)
    assert received(tmp_path) == [("turn_start", "Build it"), ("turn_start", "Tests fail.")]
    assert marks.read_text() == "xx"
    validate("result", result)


def test_abort_interrupts_the_turn_over_its_protocol_first(tmp_path: Path) -> None:
    run = Running(
        tmp_path, [TOOL_CALL, tool(40), *answer("Built it.")], agent=CODEX, agent_args=APP
    )
    run.wait_for_tool()
    result = _abort_checked(run)
    assert methods(run.run_dir) == [
        "initialize",
        "initialized",
        "thread/start",
        "turn/start",
        "turn/interrupt",
    ]
    validate("result", result)


ASKING = {"tool": {"name": "bash", "duration": 0.5, "details": {"askApproval": True}}}


def test_an_approval_the_agent_asks_for_is_declined_with_a_warning(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [TOOL_CALL, ASKING, *answer("Built it anyway.")],
        agent=CODEX,
        agent_args=APP,
    )
    code, result, _, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Built it anyway."
    (warning,) = [w for w in result["warnings"] if "declined" in w["message"]]
    assert "item/commandExecution/requestApproval" in warning["message"]
    assert 'approval_policy="never"' in warning["message"]
    answers = [m for m in sent(run.run_dir) if "method" not in m]
    assert [answer_["result"] for answer_ in answers] == [{"decision": "decline"}]
    assert ("approval", "decline") in received(tmp_path)
    validate("result", result)


# -- the real app-server's lines -----------------------------------------------------

CAPTURES = Path(__file__).parent / "data" / "real" / "twoway" / "codex-0.169.0"


def replayed(name: str) -> tuple[list[Event], CodexAppServerClient]:
    """The events of a capture's stdout (the probe's requests, not the
    client's, are answered there: the client learns the thread from
    ``thread/started``)."""
    dialect = CodexDialect()
    client = dialect.input_client(["codex", "app-server"], "/work")
    assert client is not None
    events: list[Event] = []
    for raw in (CAPTURES / f"{name}.jsonl").read_text().splitlines():
        entry = json.loads(raw)
        if entry.get("dir") == "stdout":
            events += dialect.parse(orjson.dumps(entry["msg"]))
    return events, client


def test_a_real_steered_turn_reads_as_one_turn_with_its_tool_and_answer() -> None:
    events, client = replayed("steer")
    kinds = [type(event).__name__ for event in events if not isinstance(event, TextDelta)]
    assert kinds == [
        "SessionStarted",
        "TurnStarted",
        "ToolStarted",
        "ToolEnded",
        "AssistantMessage",
        "AgentEnded",
    ]
    final = next(event for event in events if isinstance(event, AssistantMessage))
    assert (final.stop_reason, final.raw_stop_reason) == ("stop", "completed")
    assert final.text == "TOOL-DONE SAW:STEER"
    assert final.usage is not None
    assert final.usage.total_tokens == 60
    assert client.thread_id is not None


def test_a_real_interrupted_turn_is_aborted_and_its_command_ended() -> None:
    events, _ = replayed("interrupt")
    finals = [event for event in events if isinstance(event, AssistantMessage)]
    assert [final.stop_reason for final in finals] == ["aborted", "stop"]
    (started,) = [event for event in events if isinstance(event, ToolStarted)]
    ended = [event for event in events if isinstance(event, ToolEnded)]
    assert [event.tool_call_id for event in ended][:1] == [started.tool_call_id]
    assert ended[0].is_error


def test_an_attempt_timeout_ends_the_turn_by_turn_interrupt(tmp_path: Path) -> None:
    run = Running(
        tmp_path,
        [TOOL_CALL, tool(30), *answer("Built it.")],
        [answer("never played")],
        options=["--attempt-timeout", "2", "--kill-after", "20"],
        agent=CODEX,
        agent_args=APP,
    )
    code, result, events, stderr = run.finish()
    # The turn is ended by Codex's own interrupt, the process spared.
    assert (code, result["outcome"], result["error"]["kind"]) == (124, "timeout", "attempt_timeout")
    assert result["attempts"][0]["stopReason"] == "aborted", stderr
    assert result["attempts"][0]["rawStopReason"] == "interrupted"
    one_process(events)
    assert sent(run.run_dir)[-1]["method"] == "turn/interrupt"
    (ended,) = of_type(events, "tool_end")
    assert ended["isError"] is True, "the command ended with the turn"
    assert result["forcedCleanup"] is False
    validate("result", result)


def test_a_steer_while_the_model_answers_joins_the_turn_too(tmp_path: Path) -> None:
    # Unlike Claude Code's stream-json input, the app-server takes a steer
    # at any time of a turn: the turn goes on with it.
    run = Running(
        tmp_path,
        [{"sleep": 3}, *answer("Built it, and saw the steer.")],
        [answer("never played")],
        agent=CODEX,
        agent_args=APP,
    )
    run.wait_for_events()
    steered = cli("steer", str(run.run_dir), "--text", "Skip the docs", "--json")
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 1)
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Built it, and saw the steer."
    assert len(result["attempts"]) == 1
    one_process(events)
    assert received(tmp_path) == [("turn_start", "Build it"), ("turn_steer", "Skip the docs")]
