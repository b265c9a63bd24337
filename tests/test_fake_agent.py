"""The fake agent itself: resumed sessions, the record line, and every dialect's stream.

The fake is run as a subprocess, the way a supervisor runs it, through the
launchers next to it (`pi`, `claude`, `codex`, ...).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.dialect_support import LAUNCHERS
from wrapper.core.events import SessionStarted
from wrapper.dialects import DIALECTS as DIALECT_CLASSES

ROOT = Path(__file__).resolve().parent.parent
FAKE_DIR = ROOT / "fixtures" / "fake_agent"
SCENARIOS = FAKE_DIR / "scenarios"

#: Every format but pi, the fake's own.
DIALECTS = tuple(name for name in LAUNCHERS if name != "pi")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    record_path: Path

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every stdout line, each of which must be one JSON object."""
        found = []
        for line in self.stdout.splitlines():
            event = json.loads(line)
            assert isinstance(event, dict), line
            found.append(event)
        return found

    @property
    def records(self) -> list[dict[str, Any]]:
        text = self.record_path.read_text() if self.record_path.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]


def run_fake(
    tmp_path: Path,
    args: Sequence[str],
    *,
    dialect: str = "pi",
    env: dict[str, str] | None = None,
) -> Result:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT_")}
    environ["FAKE_AGENT_HOME"] = str(tmp_path / "home")
    environ["FAKE_AGENT_RECORD"] = str(tmp_path / "record.jsonl")
    environ.update(env or {})
    proc = subprocess.run(
        [str(FAKE_DIR / LAUNCHERS[dialect]), *args],
        check=False,
        cwd=tmp_path,
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    return Result(
        proc.returncode,
        proc.stdout.decode(),
        proc.stderr.decode(),
        tmp_path / "record.jsonl",
    )


def write_scenario(tmp_path: Path, scenario: dict[str, Any], name: str = "s.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, **scenario}))
    return path


def answer(text: str, stop: str | None = "stop", **extra: Any) -> dict[str, Any]:
    return {"assistant": {"text": text, "stopReason": stop, **extra}}


END: list[dict[str, Any]] = [{"agent_end": {}}, {"agent_settled": {}}]


# ---------------------------------------------------------------------------
# pi: resumed sessions


def pi_args(scenario: Path, prompt: str, session: str = "S.jsonl") -> list[str]:
    return ["--mode", "json", "-p", "--session", session, "--scenario", str(scenario), prompt]


def final_pi_text(result: Result) -> str:
    ends = [e["message"] for e in result.of_type("message_end")]
    texts = [
        block["text"]
        for message in ends
        if message["role"] == "assistant"
        for block in message["content"]
        if block["type"] == "text"
    ]
    return str(texts[-1])


STEERED: dict[str, Any] = {
    "steps": [answer("first"), *END],
    "resumes": [[answer("resume one"), *END], [answer("resume two"), *END]],
}


def test_first_run_plays_steps(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, STEERED)
    result = run_fake(tmp_path, pi_args(scenario, "task"))
    assert result.returncode == 0, result.stderr
    assert final_pi_text(result) == "first"


def test_first_resume_plays_the_first_resumes_entry(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, STEERED)
    first = run_fake(tmp_path, pi_args(scenario, "task"))
    second = run_fake(tmp_path, pi_args(scenario, "next prompt"))
    assert final_pi_text(second) == "resume one"
    # Same session: the header carries the id the first run created.
    assert second.events[0]["id"] == first.events[0]["id"]


def test_resumes_beyond_the_end_repeat_the_last_entry(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, STEERED)
    texts = [final_pi_text(run_fake(tmp_path, pi_args(scenario, f"p{n}"))) for n in range(5)]
    assert texts == ["first", "resume one", "resume two", "resume two", "resume two"]


def test_without_resumes_a_resumed_session_plays_steps_again(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {"steps": [answer("same"), *END]})
    texts = [final_pi_text(run_fake(tmp_path, pi_args(scenario, f"p{n}"))) for n in range(2)]
    assert texts == ["same", "same"]


def test_empty_resumes_list_plays_steps(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {"steps": [answer("same")], "resumes": []})
    texts = [final_pi_text(run_fake(tmp_path, pi_args(scenario, f"p{n}"))) for n in range(2)]
    assert texts == ["same", "same"]


def test_a_session_without_a_prompt_counts_as_a_fresh_start(tmp_path: Path) -> None:
    quiet = write_scenario(tmp_path, {"preamble": False, "steps": []}, "quiet.json")
    scenario = write_scenario(tmp_path, STEERED)
    run_fake(tmp_path, pi_args(quiet, "task"))
    result = run_fake(tmp_path, pi_args(scenario, "task"))
    assert final_pi_text(result) == "first"
    assert [(r["resumed"], r["attempt"]) for r in result.records] == [(False, 1), (False, 1)]


@pytest.mark.parametrize(
    "resumes",
    [
        {"resumes": "nope"},
        {"resumes": [{"assistant": {}}]},
        {"resumes": [[{"assistant": {"txt": "typo"}}]]},
        {"resumes": [[answer("ok")], [{"no_such_action": {}}]]},
    ],
    ids=["not-a-list", "entry-not-a-list", "bad-option", "bad-action-in-a-later-entry"],
)
def test_invalid_resumes_stop_before_printing(tmp_path: Path, resumes: dict[str, Any]) -> None:
    scenario = write_scenario(tmp_path, {"steps": [answer("fine")], **resumes})
    result = run_fake(tmp_path, pi_args(scenario, "task"))
    assert result.returncode == 2
    assert result.stdout == ""
    assert "resumes" in result.stderr


def test_record_carries_resumed_and_attempt(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, STEERED)
    for n in range(3):
        run_fake(tmp_path, pi_args(scenario, f"prompt {n}"))
    run_fake(tmp_path, ["--mode", "json", "-p", "--scenario", str(scenario), "no session"])
    records = [(r["resumed"], r["attempt"], r["session"]) for r in run_fake_records(tmp_path)]
    assert records == [
        (False, 1, "S.jsonl"),
        (True, 2, "S.jsonl"),
        (True, 3, "S.jsonl"),
        (False, 1, None),
    ]


def run_fake_records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_record_is_written_even_when_the_scenario_is_invalid(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {"resumes": "nope"})
    result = run_fake(tmp_path, pi_args(scenario, "task"))
    assert result.returncode == 2
    [record] = result.records
    assert (record["resumed"], record["attempt"], record["dialect"]) == (False, 1, "pi")


def test_bundled_steer_scenario(tmp_path: Path) -> None:
    steer = SCENARIOS / "steer.json"
    first = run_fake(tmp_path, pi_args(steer, "Fix the parser"))
    second = run_fake(tmp_path, pi_args(steer, "Run the tests"))
    assert first.returncode == second.returncode == 0
    assert first.of_type("tool_execution_start") == []
    [tool] = second.of_type("tool_execution_end")
    assert tool["toolName"] == "bash"
    assert final_pi_text(second) == "All 12 tests pass."
    assert second.of_type("agent_settled")


def test_unfinished_tool_is_still_running_at_a_crash(tmp_path: Path) -> None:
    result = run_fake(tmp_path, pi_args(SCENARIOS / "crash_mid_tool.json", "task"))
    assert result.returncode == 1
    types = [e["type"] for e in result.events]
    assert types[-1] == "tool_execution_start"
    assert "tool_execution_end" not in types
    assert result.events[-1]["toolCallId"] == "call_1"


# ---------------------------------------------------------------------------
# Dialects: command lines


@dataclass(frozen=True)
class Cli:
    start: Callable[[Path, str], list[str]]
    resume: Callable[[Path, str, str], list[str]]
    session_of: Callable[[list[dict[str, Any]]], str]


def cli_for(name: str) -> Cli:
    """How the fake is started and resumed as the CLI ``name``: the argv its
    dialect gives the real CLI (the JSON mode the dialect reads, the task and
    the session where the dialect puts them), with the scenario added."""
    dialect = DIALECT_CLASSES[name]()
    program, *mode = shlex.split(dialect.streaming_command)
    scratch = Path(tempfile.gettempdir())

    def start(scenario: Path, prompt: str) -> list[str]:
        command = [program, *mode, "--scenario", str(scenario)]
        return dialect.launch(command, prompt, scratch).argv[1:]

    def resume(scenario: Path, session: str, prompt: str) -> list[str]:
        command = [program, *mode, "--scenario", str(scenario)]
        return dialect.resume(command, prompt, scratch, session).argv[1:]

    def session_of(events: list[dict[str, Any]]) -> str:
        reader = DIALECT_CLASSES[name]()
        for event in events:
            for parsed in reader.parse(json.dumps(event).encode()):
                if isinstance(parsed, SessionStarted) and parsed.session_id:
                    return parsed.session_id
        raise AssertionError(f"no session id in the {name} stream")

    return Cli(start, resume, session_of)


CLIS = {name: cli_for(name) for name in DIALECTS}


def play(
    tmp_path: Path,
    dialect: str,
    scenario: dict[str, Any],
    prompt: str = "task",
    *,
    status: int = 0,
) -> Result:
    path = write_scenario(tmp_path, scenario)
    result = run_fake(tmp_path, CLIS[dialect].start(path, prompt), dialect=dialect)
    assert result.returncode == status, result.stderr
    check_shapes(dialect, result.events)
    return result


@pytest.mark.parametrize("dialect", DIALECTS)
def test_start_argv_gives_the_prompt_and_no_resume(tmp_path: Path, dialect: str) -> None:
    result = play(tmp_path, dialect, {"steps": [answer("hi"), *END]}, "Fix the bug")
    [record] = result.records
    assert record["prompt"] == "Fix the bug"
    assert record["dialect"] == dialect
    assert (record["resumed"], record["attempt"], record["session"]) == (False, 1, None)
    # The launcher's own --dialect is not part of what the caller passed.
    assert "--dialect" not in record["argv"]
    assert "--dialect" not in record["flags"]
    assert record["argv"][-1] in ("Fix the bug", str(tmp_path / "s.json"))


RESUMED: dict[str, Any] = {
    "steps": [answer("first-attempt"), *END],
    "resumes": [[answer("second-attempt"), *END]],
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_resume_by_id_plays_the_first_resumes_entry(tmp_path: Path, dialect: str) -> None:
    cli = CLIS[dialect]
    path = write_scenario(tmp_path, RESUMED)
    first = run_fake(tmp_path, cli.start(path, "task"), dialect=dialect)
    session = cli.session_of(first.events)
    second = run_fake(tmp_path, cli.resume(path, session, "next prompt"), dialect=dialect)
    assert second.returncode == 0, second.stderr
    check_shapes(dialect, second.events)
    assert "second-attempt" in second.stdout
    assert "first-attempt" not in second.stdout
    assert cli.session_of(second.events) == session
    records = second.records
    assert [(r["resumed"], r["attempt"]) for r in records] == [(False, 1), (True, 2)]
    assert records[1]["session"] == session
    assert records[1]["prompt"] == "next prompt"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_resume_of_an_unknown_id_fails_like_the_real_cli(tmp_path: Path, dialect: str) -> None:
    cli = CLIS[dialect]
    path = write_scenario(tmp_path, RESUMED)
    result = run_fake(tmp_path, cli.resume(path, "T-made-up/../id", "next"), dialect=dialect)
    assert result.returncode == 1
    assert "no session found with id T-made-up/../id" in result.stderr
    assert result.stdout == ""
    assert not list((tmp_path / "home").rglob("*.jsonl"))


def test_claude_session_id_creates_the_session_it_names(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, RESUMED)
    argv = ["-p", "--output-format", "stream-json", "--verbose", "--scenario", str(path)]
    session = "0b1e0c6e-9a52-4f4e-8d0e-3c1b2a6f7d10"
    result = run_fake(tmp_path, [*argv, "--session-id", session, "task"], dialect="claude")
    assert result.returncode == 0, result.stderr
    assert "first-attempt" in result.stdout
    assert CLIS["claude"].session_of(result.events) == session


LATEST_ARGV: dict[str, Callable[[Path], list[str]]] = {
    "claude": lambda s: ["-p", "-c", "--output-format", "stream-json", "--scenario", str(s), "go"],
    "codex": lambda s: ["exec", "--json", "--scenario", str(s), "resume", "--last", "go"],
    "gemini": lambda s: [
        *("--output-format", "stream-json", "--resume", "latest", "-p", "go"),
        *("--scenario", str(s)),
    ],
    "opencode": lambda s: ["run", "-c", "--format", "json", "--scenario", str(s), "go"],
    "amp": lambda s: ["threads", "continue", "-x", "--stream-json", "--scenario", str(s), "go"],
    "cursor": lambda s: [
        *("-p", "--resume", "--output-format", "stream-json"),
        *("--scenario", str(s), "go"),
    ],
}


@pytest.mark.parametrize("dialect", sorted(LATEST_ARGV))
def test_continue_latest_session(tmp_path: Path, dialect: str) -> None:
    cli = CLIS[dialect]
    path = write_scenario(tmp_path, RESUMED)
    first = run_fake(tmp_path, cli.start(path, "task"), dialect=dialect)
    second = run_fake(tmp_path, LATEST_ARGV[dialect](path), dialect=dialect)
    assert second.returncode == 0, second.stderr
    assert "second-attempt" in second.stdout
    assert cli.session_of(second.events) == cli.session_of(first.events)
    assert second.records[-1]["prompt"] == "go"


def test_dialect_from_the_environment(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, {"steps": [answer("hi"), *END]})
    env = {"FAKE_AGENT_DIALECT": "codex"}
    result = run_fake(tmp_path, ["exec", "--json", "--scenario", str(path), "x"], env=env)
    assert result.events[0]["type"] == "thread.started"
    assert result.records[0]["dialect"] == "codex"


def test_unknown_dialect_is_a_usage_error(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, {"steps": []})
    result = run_fake(tmp_path, ["--dialect", "vim", "--scenario", str(path), "x"])
    assert result.returncode == 2
    assert "unknown dialect" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("dialect", DIALECTS)
def test_invalid_scenario_stops_every_dialect_before_printing(tmp_path: Path, dialect: str) -> None:
    path = write_scenario(tmp_path, {"steps": [answer("ok")], "resumes": [["x"]]})
    result = run_fake(tmp_path, CLIS[dialect].start(path, "task"), dialect=dialect)
    assert result.returncode == 2
    assert result.stdout == ""


@pytest.mark.parametrize("dialect", [*DIALECTS, "pi"])
def test_launcher_keeps_the_pid(tmp_path: Path, dialect: str) -> None:
    launcher = FAKE_DIR / LAUNCHERS[dialect]
    assert os.access(launcher, os.X_OK)
    path = write_scenario(tmp_path, {"steps": [{"write_file": {"path": "pid", "text": "x"}}]})
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT_")}
    environ |= {"FAKE_AGENT_RECORD": str(tmp_path / "r.jsonl"), "FAKE_AGENT_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [str(launcher), "--scenario", str(path), "x"], cwd=tmp_path, env=environ
    )
    assert proc.wait(timeout=30) == 0
    [record] = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert record["pid"] == proc.pid
    assert record["dialect"] == dialect


# ---------------------------------------------------------------------------
# Dialects: stream shapes


def check_shapes(dialect: str, events: list[dict[str, Any]]) -> None:
    """Invariants every line of a dialect's stream must satisfy."""
    assert events, "the stream is empty"
    for event in events:
        assert isinstance(event.get("type"), str), event
    # Each format's own invariants, where its CLI's are written down here.
    check = CHECKS.get(dialect)
    if check is not None:
        check(events)


def check_claude(events: list[dict[str, Any]]) -> None:
    init = events[0]
    assert (init["type"], init["subtype"]) == ("system", "init")
    session = init["session_id"]
    assert init["cwd"]
    assert init["model"]
    assert isinstance(init["tools"], list)
    for event in events:
        if event["type"] in ("assistant", "user", "result", "system", "stream_event"):
            assert event["session_id"] == session
        if event["type"] == "assistant":
            message = event["message"]
            assert message["role"] == "assistant"
            assert message["stop_reason"] is None
            assert len(message["content"]) == 1
            assert message["id"].startswith("msg_")
            assert set(message["usage"]) >= {"input_tokens", "output_tokens"}
        if event["type"] == "user":
            assert event["message"]["role"] == "user"
            # A compaction's summary comes as text, in a message of Claude Code's own.
            text = event.get("isSynthetic") is True
            assert isinstance(event["message"]["content"], str if text else list)
    for event in events[:-1]:
        assert event["type"] != "result"


def check_amp(events: list[dict[str, Any]]) -> None:
    init = events[0]
    assert (init["type"], init["subtype"]) == ("system", "init")
    assert events[1]["type"] == "user"
    for event in events:
        if event["type"] in ("assistant", "user", "result"):
            assert event["session_id"] == init["session_id"]
        if event["type"] == "assistant":
            assert event["message"]["type"] == "message"
            assert "stop_reason" in event["message"]


def check_cursor(events: list[dict[str, Any]]) -> None:
    init = events[0]
    assert (init["type"], init["subtype"]) == ("system", "init")
    assert init["apiKeySource"]
    assert init["permissionMode"]
    assert events[1]["type"] == "user"
    for event in events:
        assert event.get("session_id") == init["session_id"]
        if event["type"] == "assistant":
            assert [b["type"] for b in event["message"]["content"]] == ["text"]
            assert "stop_reason" not in event["message"]
        if event["type"] == "tool_call":
            assert event["subtype"] in ("started", "completed")
            [(key, call)] = event["tool_call"].items()
            assert key.endswith("ToolCall") or key == "function"
            assert ("result" in call) == (event["subtype"] == "completed")


def check_gemini(events: list[dict[str, Any]]) -> None:
    init = events[0]
    assert init["type"] == "init"
    assert init["session_id"]
    assert init["model"]
    assert events[1] == {**events[1], "type": "message", "role": "user"}
    known = {"init", "message", "tool_use", "tool_result", "error", "result"}
    for event in events:
        assert event["type"] in known
        assert event["timestamp"].endswith("Z")
        if event["type"] == "message":
            assert isinstance(event["content"], str)
            assert event["role"] == "user" or event["delta"] is True
        if event["type"] == "result":
            assert event["status"] in ("success", "error")
            assert set(event["stats"]) >= {"total_tokens", "input_tokens", "output_tokens"}


def check_codex(events: list[dict[str, Any]]) -> None:
    assert events[0]["type"] == "thread.started"
    assert events[0]["thread_id"]
    assert events[1] == {"type": "turn.started"}
    known = {"item.started", "item.updated", "item.completed", "error", "turn.completed"}
    for event in events[2:]:
        assert event["type"] in known | {"turn.failed"}
        if event["type"].startswith("item."):
            item = event["item"]
            assert item["id"].startswith("item_")
            assert item["type"] in (
                "agent_message",
                "reasoning",
                "command_execution",
                "file_change",
                "mcp_tool_call",
                "error",
            )
    for event in events[:-1]:
        assert event["type"] not in ("turn.completed", "turn.failed")


def check_opencode(events: list[dict[str, Any]]) -> None:
    session = events[0]["sessionID"]
    known = {"step_start", "text", "reasoning", "tool_use", "step_finish", "error"}
    for event in events:
        assert event["type"] in known
        assert isinstance(event["timestamp"], int)
        assert event["sessionID"] == session
        if event["type"] != "error":
            part = event["part"]
            assert part["sessionID"] == session
            assert part["id"].startswith("prt_")
            assert part["messageID"].startswith("msg_")


CHECKS: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    "claude": check_claude,
    "amp": check_amp,
    "cursor": check_cursor,
    "gemini": check_gemini,
    "codex": check_codex,
    "opencode": check_opencode,
}

FINAL: dict[str, Any] = {"steps": [answer("All done."), *END]}

TOOLS: dict[str, Any] = {
    "steps": [
        {
            "assistant": {
                "text": "Running the tests.",
                "toolCalls": [{"name": "bash", "arguments": {"command": "make test"}}],
            }
        },
        {"tool": {"duration": 0.05, "updates": 2, "result": "3 passed"}},
        answer("Tests pass."),
        *END,
    ]
}

ERROR: dict[str, Any] = {
    "steps": [
        {"assistant": {"text": "", "stopReason": "error", "errorMessage": "overloaded"}},
        *END,
    ]
}

ABORT: dict[str, Any] = {
    "steps": [
        {
            "assistant": {
                "text": "Let me run it.",
                "toolCalls": [{"name": "bash", "arguments": {"command": "sleep 100"}}],
            }
        },
        {"tool": {"duration": 0.05, "finish": False}},
        {"assistant": {"text": "", "stopReason": "aborted", "errorMessage": "aborted"}},
        *END,
    ]
}


# claude


def test_claude_final_answer(tmp_path: Path) -> None:
    events = play(tmp_path, "claude", FINAL).events
    assert [e["type"] for e in events] == ["system", "assistant", "result"]
    assert events[1]["message"]["content"] == [{"type": "text", "text": "All done."}]
    result = events[-1]
    assert (result["subtype"], result["is_error"], result["result"]) == (
        "success",
        False,
        "All done.",
    )
    assert (result["stop_reason"], result["terminal_reason"]) == ("end_turn", "completed")
    assert result["usage"]["input_tokens"] == 100
    assert result["total_cost_usd"] == pytest.approx(0.0006)
    assert result["num_turns"] == 1


def test_claude_tool_use(tmp_path: Path) -> None:
    events = play(tmp_path, "claude", TOOLS).events
    blocks = [e["message"]["content"][0] for e in events if e["type"] == "assistant"]
    assert [b["type"] for b in blocks] == ["text", "tool_use", "text"]
    tool_use = blocks[1]
    assert (tool_use["name"], tool_use["input"]) == ("Bash", {"command": "make test"})
    [user] = [e for e in events if e["type"] == "user"]
    [tool_result] = user["message"]["content"]
    assert tool_result == {
        "tool_use_id": tool_use["id"],
        "type": "tool_result",
        "content": "3 passed",
        "is_error": False,
    }
    assert user["tool_use_result"]["stdout"] == "3 passed"
    assert events[-1]["result"] == "Tests pass."
    assert events[-1]["num_turns"] == 2


def test_claude_error_ending(tmp_path: Path) -> None:
    events = play(tmp_path, "claude", ERROR, status=1).events
    synthetic = events[-2]
    assert synthetic["message"]["model"] == "<synthetic>"
    assert synthetic["message"]["content"][0]["text"] == "API Error: overloaded"
    result = events[-1]
    # A failed request says success in subtype; is_error is what counts.
    assert (result["type"], result["subtype"], result["is_error"]) == ("result", "success", True)
    assert result["result"] == "API Error: overloaded"


def test_claude_abort_ending(tmp_path: Path) -> None:
    events = play(tmp_path, "claude", ABORT, status=1).events
    note = events[-2]
    assert note["type"] == "user"
    assert note["message"]["content"][0]["text"].startswith("[Request interrupted by user")
    result = events[-1]
    assert (result["subtype"], result["is_error"]) == ("error_during_execution", True)
    assert result["terminal_reason"] == "aborted_tools"
    assert "result" not in result


def test_claude_abort_while_streaming(tmp_path: Path) -> None:
    scenario = {"steps": [{"assistant": {"text": "Half an", "stopReason": "aborted"}}, *END]}
    result = play(tmp_path, "claude", scenario, status=1).events[-1]
    assert result["terminal_reason"] == "aborted_streaming"


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("length", "max_tokens"), ("stop", "end_turn"), ("refusal", "refusal"), (None, None)],
)
def test_claude_stop_reasons(tmp_path: Path, reason: str | None, expected: str | None) -> None:
    result = play(tmp_path, "claude", {"steps": [answer("x", reason), *END]}).events[-1]
    assert result["stop_reason"] == expected
    assert result["is_error"] is False


def test_claude_partial_messages(tmp_path: Path) -> None:
    path = write_scenario(
        tmp_path,
        {
            "steps": [
                {
                    "assistant": {
                        "thinking": "think",
                        "text": "a b",
                        "toolCalls": [{"name": "read", "arguments": {"path": "x"}}],
                    }
                },
                {"tool": {"result": "body"}},
                answer("done"),
                *END,
            ]
        },
    )
    args = ["-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"]
    result = run_fake(tmp_path, [*args, "--scenario", str(path), "go"], dialect="claude")
    check_shapes("claude", result.events)
    stream = [e["event"] for e in result.of_type("stream_event")]
    kinds = [e["type"] for e in stream]
    assert kinds[0] == "message_start"
    assert kinds.count("message_stop") == 2
    deltas = [e["delta"] for e in stream if e["type"] == "content_block_delta"]
    assert [d["type"] for d in deltas[:4]] == [
        "thinking_delta",
        "text_delta",
        "text_delta",
        "input_json_delta",
    ]
    stops = [e["delta"]["stop_reason"] for e in stream if e["type"] == "message_delta"]
    assert stops == ["tool_use", "end_turn"]
    # Each finished block is also repeated as a whole assistant line.
    assert len(result.of_type("assistant")) == 4


def test_claude_retry_and_compaction(tmp_path: Path) -> None:
    scenario = {
        "steps": [
            {"retry": {"attempt": 1, "maxAttempts": 3, "delayMs": 0, "errorMessage": "529"}},
            {"compaction": {"tokensBefore": 5000}},
            answer("ok"),
            *END,
        ]
    }
    events = play(tmp_path, "claude", scenario).events
    retry, boundary = events[1], events[2]
    assert (retry["subtype"], retry["attempt"], retry["error"]) == ("api_retry", 1, "529")
    assert boundary["subtype"] == "compact_boundary"
    assert boundary["compact_metadata"] == {"trigger": "auto", "pre_tokens": 5000}


def test_claude_retried_error_prints_no_result(tmp_path: Path) -> None:
    scenario = json.loads((SCENARIOS / "retry.json").read_text())
    events = play(tmp_path, "claude", scenario).events
    assert [e["type"] for e in events].count("result") == 1
    assert "API Error" not in json.dumps(events)
    assert events[-1]["is_error"] is False


# codex


def test_codex_final_answer(tmp_path: Path) -> None:
    events = play(tmp_path, "codex", FINAL).events
    assert events[2] == {
        "type": "item.completed",
        "item": {"id": "item_0", "type": "agent_message", "text": "All done."},
    }
    assert events[-1] == {
        "type": "turn.completed",
        "usage": {"input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 20},
    }


def test_codex_tool_use(tmp_path: Path) -> None:
    events = play(tmp_path, "codex", TOOLS).events
    started = [e["item"] for e in events if e["type"] == "item.started"]
    completed = [e["item"] for e in events if e["type"] == "item.completed"]
    assert started == [
        {
            "id": "item_1",
            "type": "command_execution",
            "command": "make test",
            "aggregated_output": "",
            "exit_code": None,
            "status": "in_progress",
        }
    ]
    done = {"aggregated_output": "3 passed", "exit_code": 0, "status": "completed"}
    assert completed[1] == {**started[0], **done}
    assert [c["type"] for c in completed] == ["agent_message", "command_execution", "agent_message"]
    assert events[-1]["type"] == "turn.completed"


def test_codex_other_tools(tmp_path: Path) -> None:
    scenario = {
        "steps": [
            {"assistant": {"toolCalls": [{"name": "edit", "arguments": {"path": "a.py"}}]}},
            {"tool": {}},
            {"assistant": {"toolCalls": [{"name": "read", "arguments": {"path": "b"}}]}},
            {"tool": {"result": "no such file", "isError": True}},
            answer("done"),
            *END,
        ]
    }
    events = play(tmp_path, "codex", scenario).events
    items = [(e["type"], e["item"]["type"]) for e in events if "item" in e]
    assert items == [
        ("item.completed", "file_change"),
        ("item.started", "mcp_tool_call"),
        ("item.completed", "mcp_tool_call"),
        ("item.completed", "agent_message"),
    ]
    change = events[2]["item"]
    assert change["changes"] == [{"path": "a.py", "kind": "update"}]
    failed = events[4]["item"]
    assert (failed["status"], failed["error"], failed["result"]) == (
        "failed",
        {"message": "no such file"},
        None,
    )


def test_codex_error_ending(tmp_path: Path) -> None:
    events = play(tmp_path, "codex", ERROR, status=1).events
    assert events[-2:] == [
        {"type": "error", "message": "overloaded"},
        {"type": "turn.failed", "error": {"message": "overloaded"}},
    ]


def test_codex_abort_ending(tmp_path: Path) -> None:
    events = play(tmp_path, "codex", ABORT, status=130).events
    # An interrupted turn has no final event; the last item never completes.
    assert events[-1]["type"] == "item.started"
    assert not [e for e in events if e["type"].startswith("turn.") and e["type"] != "turn.started"]


def test_codex_retry(tmp_path: Path) -> None:
    scenario = json.loads((SCENARIOS / "retry.json").read_text())
    scenario["steps"][2]["retry"]["delayMs"] = 0
    events = play(tmp_path, "codex", scenario).events
    assert events[2]["item"] == {"id": "item_0", "type": "error", "message": "overloaded"}
    assert events[3] == {"type": "error", "message": "Reconnecting... 1/3 (overloaded)"}
    assert events[-1]["type"] == "turn.completed"


# gemini


def test_gemini_final_answer(tmp_path: Path) -> None:
    events = play(tmp_path, "gemini", FINAL).events
    assert events[1]["content"] == "task"
    deltas = [e["content"] for e in events if e["type"] == "message" and e["role"] == "assistant"]
    assert "".join(deltas) == "All done."
    result = events[-1]
    assert (result["type"], result["status"]) == ("result", "success")
    assert result["stats"]["total_tokens"] == 120
    assert result["stats"]["models"] == {
        "fake-model": {
            "total_tokens": 120,
            "input_tokens": 100,
            "output_tokens": 20,
            "cached": 0,
            "input": 100,
        }
    }


def test_gemini_tool_use(tmp_path: Path) -> None:
    events = play(tmp_path, "gemini", TOOLS).events
    [use] = [e for e in events if e["type"] == "tool_use"]
    [result] = [e for e in events if e["type"] == "tool_result"]
    assert (use["tool_name"], use["parameters"]) == ("run_shell_command", {"command": "make test"})
    assert (result["tool_id"], result["status"], result["output"]) == (
        use["tool_id"],
        "success",
        "3 passed",
    )
    assert events[-1]["stats"]["tool_calls"] == 1


def test_gemini_error_ending(tmp_path: Path) -> None:
    result = play(tmp_path, "gemini", ERROR, status=1).events[-1]
    assert (result["type"], result["status"]) == ("result", "error")
    assert result["error"]["message"] == "overloaded"


def test_gemini_abort_ending(tmp_path: Path) -> None:
    result = play(tmp_path, "gemini", ABORT, status=130)
    assert not result.of_type("result")
    assert result.events[-1]["type"] == "tool_use"
    assert "Operation cancelled." in result.stderr


def test_gemini_retry_is_a_warning(tmp_path: Path) -> None:
    scenario = {"steps": [{"retry": {"delayMs": 0}}, answer("ok"), *END]}
    warning = play(tmp_path, "gemini", scenario).of_type("error")
    assert [w["severity"] for w in warning] == ["warning"]


# opencode


def test_opencode_final_answer(tmp_path: Path) -> None:
    events = play(tmp_path, "opencode", FINAL).events
    assert [e["type"] for e in events] == ["step_start", "text", "step_finish"]
    assert events[0]["sessionID"].startswith("ses_")
    assert events[1]["part"]["text"] == "All done."
    finish = events[-1]["part"]
    assert (finish["type"], finish["reason"]) == ("step-finish", "stop")
    assert finish["tokens"]["input"] == 100


def test_opencode_tool_use(tmp_path: Path) -> None:
    events = play(tmp_path, "opencode", TOOLS).events
    assert [e["type"] for e in events] == [
        "step_start",
        "text",
        "tool_use",
        "step_finish",
        "step_start",
        "text",
        "step_finish",
    ]
    tool = events[2]["part"]
    assert (tool["tool"], tool["state"]["status"], tool["state"]["output"]) == (
        "bash",
        "completed",
        "3 passed",
    )
    assert tool["state"]["input"] == {"command": "make test"}
    assert events[3]["part"]["reason"] == "tool-calls"
    assert events[3]["part"]["messageID"] == tool["messageID"]


def test_opencode_error_ending(tmp_path: Path) -> None:
    events = play(tmp_path, "opencode", ERROR, status=0).events
    assert [e["type"] for e in events] == ["step_start", "error"]
    assert events[-1]["error"] == {"name": "UnknownError", "data": {"message": "overloaded"}}


def test_opencode_abort_ending(tmp_path: Path) -> None:
    events = play(tmp_path, "opencode", ABORT, status=0).events
    assert events[-1]["error"]["name"] == "MessageAbortedError"
    assert "step_finish" not in [e["type"] for e in events]


def test_opencode_length_ending(tmp_path: Path) -> None:
    events = play(tmp_path, "opencode", {"steps": [answer("trunc", "length"), *END]}).events
    assert events[-2]["part"]["reason"] == "length"
    assert events[-1]["error"] == {"name": "MessageOutputLengthError", "data": {}}


def test_opencode_unknown_stop_reason_passes_verbatim(tmp_path: Path) -> None:
    events = play(tmp_path, "opencode", {"steps": [answer("x", "content-filter"), *END]}).events
    assert events[-1]["part"]["reason"] == "content-filter"


# amp


def test_amp_final_answer(tmp_path: Path) -> None:
    events = play(tmp_path, "amp", FINAL).events
    assert [e["type"] for e in events] == ["system", "user", "assistant", "result"]
    assert events[0]["session_id"].startswith("T-")
    assert events[1]["message"]["content"] == [{"type": "text", "text": "task"}]
    assert events[2]["message"]["stop_reason"] == "end_turn"
    result = events[-1]
    assert (result["subtype"], result["is_error"], result["result"]) == (
        "success",
        False,
        "All done.",
    )


def test_amp_tool_use(tmp_path: Path) -> None:
    events = play(tmp_path, "amp", TOOLS).events
    assistants = [e["message"] for e in events if e["type"] == "assistant"]
    assert [m["stop_reason"] for m in assistants] == ["tool_use", "end_turn"]
    assert [b["type"] for b in assistants[0]["content"]] == ["text", "tool_use"]
    [result_line] = [e for e in events if e["type"] == "user"][1:]
    tool_result = result_line["message"]["content"][0]
    assert (tool_result["type"], tool_result["content"]) == ("tool_result", "3 passed")
    assert events[-1]["num_turns"] == 2


def test_amp_error_ending(tmp_path: Path) -> None:
    result = play(tmp_path, "amp", ERROR, status=1).events[-1]
    assert (result["subtype"], result["is_error"], result["error"]) == (
        "error_during_execution",
        True,
        "overloaded",
    )


def test_amp_abort_ending(tmp_path: Path) -> None:
    result = play(tmp_path, "amp", ABORT, status=130)
    # An interrupted amp prints no result; only its exit status tells.
    assert not result.of_type("result")
    assert result.events[-1]["message"]["content"][-1]["type"] == "tool_use"


def test_amp_max_tokens(tmp_path: Path) -> None:
    events = play(tmp_path, "amp", {"steps": [answer("x", "length"), *END]}).events
    assert events[2]["message"]["stop_reason"] == "max_tokens"


# cursor


def test_cursor_final_answer(tmp_path: Path) -> None:
    events = play(tmp_path, "cursor", FINAL).events
    assert [e["type"] for e in events] == ["system", "user", "assistant", "result"]
    result = events[-1]
    assert (result["subtype"], result["is_error"], result["result"]) == (
        "success",
        False,
        "All done.",
    )
    assert result["usage"]["inputTokens"] == 100


def test_cursor_tool_use(tmp_path: Path) -> None:
    events = play(tmp_path, "cursor", TOOLS).events
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [c["subtype"] for c in calls] == ["started", "completed"]
    assert calls[0]["call_id"] == calls[1]["call_id"]
    shell = calls[1]["tool_call"]["shellToolCall"]
    assert shell["args"] == {"command": "make test"}
    assert shell["result"]["success"]["stdout"] == "3 passed"
    # The result is every assistant text of the run, concatenated.
    assert events[-1]["result"] == "Running the tests.Tests pass."


def test_cursor_error_ending(tmp_path: Path) -> None:
    result = play(tmp_path, "cursor", ERROR, status=1)
    assert not result.of_type("result")
    assert "overloaded" in result.stderr


def test_cursor_abort_ending(tmp_path: Path) -> None:
    result = play(tmp_path, "cursor", ABORT, status=130)
    assert not result.of_type("result")
    assert result.events[-1]["subtype"] == "started"


def test_cursor_unknown_tool_is_a_function_call(tmp_path: Path) -> None:
    scenario = {
        "steps": [
            {"assistant": {"toolCalls": [{"name": "mcp_x", "arguments": {"a": 1}}]}},
            {"tool": {"result": "r"}},
            *END,
        ]
    }
    [started, _] = play(tmp_path, "cursor", scenario).of_type("tool_call")
    assert started["tool_call"] == {"function": {"name": "mcp_x", "arguments": '{"a": 1}'}}


def test_cursor_partial_output(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, {"steps": [answer("one two three"), *END]})
    args = ["-p", "--output-format", "stream-json", "--stream-partial-output"]
    result = run_fake(tmp_path, [*args, "--scenario", str(path), "go"], dialect="cursor")
    texts = [
        (e["message"]["content"][0]["text"], "timestamp_ms" in e)
        for e in result.of_type("assistant")
    ]
    assert texts == [("one ", True), ("two ", True), ("three", True), ("one two three", False)]


# every dialect


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    "scenario", ["demo.json", "demo.toml", "retry.json", "garbage.json", "steer.json"]
)
def test_bundled_scenarios_play_in_every_dialect(
    tmp_path: Path, dialect: str, scenario: str
) -> None:
    path = SCENARIOS / scenario
    if scenario == "retry.json":
        data = json.loads(path.read_text())
        data["steps"][2]["retry"]["delayMs"] = 0
        path = write_scenario(tmp_path, data, "retry.json")
    result = run_fake(tmp_path, CLIS[dialect].start(path, "task"), dialect=dialect)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    if scenario == "garbage.json":
        # Its noise lines are the point; the JSON lines between them still parse.
        lines = [line for line in lines if line.startswith('{"type":"') and line.endswith("}")]
    events = [json.loads(line) for line in lines]
    if scenario != "garbage.json":
        check_shapes(dialect, events)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_crash_mid_tool_in_every_dialect(tmp_path: Path, dialect: str) -> None:
    result = run_fake(
        tmp_path, CLIS[dialect].start(SCENARIOS / "crash_mid_tool.json", "t"), dialect=dialect
    )
    assert result.returncode == 1
    assert "heap out of memory" in result.stderr
    check_shapes(dialect, result.events)
    final = {"claude": "result", "amp": "result", "cursor": "result", "gemini": "result"}
    assert not [e for e in result.events if e["type"] == final.get(dialect)]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_format_independent_actions(tmp_path: Path, dialect: str) -> None:
    scenario = {
        "steps": [
            {"event": {"type": "custom", "n": 1}},
            {"line": "plain text"},
            {"bytes_hex": "6f6b0a"},
            {"agent_settled": {}},
            {"exit": 7},
        ]
    }
    path = write_scenario(tmp_path, scenario)
    result = run_fake(tmp_path, CLIS[dialect].start(path, "t"), dialect=dialect)
    assert result.returncode == 7
    assert result.stdout.splitlines()[-3:] == ['{"type":"custom","n":1}', "plain text", "ok"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_preamble_prints_no_start_lines(tmp_path: Path, dialect: str) -> None:
    path = write_scenario(tmp_path, {"preamble": False, "steps": [{"line": "only"}]})
    result = run_fake(tmp_path, CLIS[dialect].start(path, "t"), dialect=dialect)
    assert result.stdout == "only\n"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_scenario_session_id_and_model(tmp_path: Path, dialect: str) -> None:
    scenario = {"sessionId": "fixed-id", "model": "big-model", "steps": [answer("x"), *END]}
    result = play(tmp_path, dialect, scenario)
    assert CLIS[dialect].session_of(result.events) == "fixed-id"
    if dialect in ("claude", "gemini", "cursor"):
        assert "big-model" in result.stdout


EXIT_STATUSES = {
    "claude": (1, 1),
    "codex": (1, 130),
    "gemini": (1, 130),
    "opencode": (0, 0),
    "amp": (1, 130),
    "cursor": (1, 130),
}


@pytest.mark.parametrize("dialect", sorted(EXIT_STATUSES))
def test_exit_status_follows_the_ending(tmp_path: Path, dialect: str) -> None:
    error, aborted = EXIT_STATUSES[dialect]
    failed = ERROR["steps"][0]
    cases = [
        (ERROR, error),
        (ABORT, aborted),
        # A later success (after a retry) clears it...
        ({"steps": [failed, {"agent_end": {"willRetry": True}}, *FINAL["steps"]]}, 0),
        ({"steps": [failed, *FINAL["steps"]]}, 0),
        # ...and an explicit exit step wins.
        ({"steps": [*ERROR["steps"], {"exit": 0}]}, 0),
    ]
    for number, (scenario, status) in enumerate(cases):
        directory = tmp_path / str(number)
        directory.mkdir()
        play(directory, dialect, scenario, status=status)


def test_pi_always_exits_zero_after_the_last_step(tmp_path: Path) -> None:
    for name, scenario in (("e", ERROR), ("a", ABORT)):
        path = write_scenario(tmp_path, scenario, f"{name}.json")
        result = run_fake(tmp_path, ["--mode", "json", "-p", "--scenario", str(path), "t"])
        assert result.returncode == 0


#: Each CLI's JSON mode, with the flag a prompt may follow.
DOUBLE_DASH_OPTIONS = {
    "claude": ["-p", "--output-format", "stream-json", "--verbose"],
    "codex": ["exec", "--json"],
    "gemini": ["--output-format", "stream-json"],
    "opencode": ["run", "--format", "json"],
    "amp": ["--stream-json", "-x"],
    "cursor": ["-p", "--output-format", "stream-json"],
}


@pytest.mark.parametrize("dialect", sorted(DOUBLE_DASH_OPTIONS))
def test_words_after_a_double_dash_are_the_prompt(tmp_path: Path, dialect: str) -> None:
    path = write_scenario(tmp_path, {"steps": [answer("hi"), *END]})
    options = DOUBLE_DASH_OPTIONS[dialect]
    args = [*options, "--scenario", str(path), "--", "resume", "--force"]
    result = run_fake(tmp_path, args, dialect=dialect)
    assert result.returncode == 0, result.stderr
    [record] = result.records
    assert (record["prompt"], record["resumed"], record["session"]) == (
        "resume --force",
        False,
        None,
    )
    assert "--force" not in record["flags"]


def test_pi_has_no_double_dash_convention(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, {"steps": []})
    result = run_fake(tmp_path, ["--mode", "json", "--scenario", str(path), "--", "--x", "task"])
    [record] = result.records
    assert record["prompt"] == "task"
    assert record["flags"]["--"] is True
    assert record["flags"]["--x"] is True
