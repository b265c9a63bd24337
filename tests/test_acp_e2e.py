"""``agent-wrapper run`` with an agent speaking ACP (the fake agent as
``gemini --acp``), end to end: what a user finds in result.json, the run
directory and the process table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from wrapper.core.events import AssistantMessage
from wrapper.dialects.acp.protocol_log import replay

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "fixtures" / "fake_agent" / "gemini"

#: Only to catch a hang.
HANG = 60.0

TOOL_RUN: list[dict[str, Any]] = [
    {
        "assistant": {
            "text": "Running it.",
            "stopReason": "toolUse",
            "toolCalls": [{"name": "bash", "arguments": {"command": "make test"}}],
        }
    },
    {"tool": {"name": "bash", "result": "ok", "duration": 0.1}},
    {"assistant": {"text": "Done.", "stopReason": "stop"}},
]


def start(
    tmp_path: Path,
    steps: list[dict[str, Any]],
    *options: str,
    resumes: list[list[dict[str, Any]]] | None = None,
    agent_args: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """The wrapper running the fake agent over ACP; ``resumes``: the steps
    of each later prompt turn."""
    scenario = tmp_path / "scenario.json"
    spec: dict[str, Any] = {"version": 1, "steps": steps}
    if resumes is not None:
        spec["resumes"] = resumes
    scenario.write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT_")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wrapper",
            "run",
            "--output",
            "quiet",
            "--run-dir",
            str(tmp_path / "run"),
            *options,
            "--",
            str(AGENT),
            "--acp",
            "--scenario",
            str(scenario),
            *agent_args,
        ],
        cwd=tmp_path,
        env=env | {"FAKE_AGENT_HOME": str(tmp_path)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def result_of(tmp_path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((tmp_path / "run" / "result.json").read_text())
    return loaded


def current_tool(tmp_path: Path) -> str | None:
    """The tool status.json says the agent is running."""
    try:
        status = json.loads((tmp_path / "run" / "status.json").read_text())
    except (OSError, ValueError):
        return None
    tool = status.get("currentTool")
    return tool.get("name") if isinstance(tool, dict) else tool


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_tool_run_through_the_wrapper(tmp_path: Path) -> None:
    proc = start(tmp_path, TOOL_RUN, "--task", "Fix the tests")
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    result = result_of(tmp_path)
    assert result["dialect"] == "acp"
    assert result["outcome"] == "ok"
    assert (result["stopReason"], result["rawStopReason"]) == ("stop", "end_turn")
    assert result["finalText"] == "Running it.Done."
    assert result["toolsUsed"] == ["execute"]
    # The agent exited by itself once its stdin was closed: nothing was forced.
    assert result["forcedCleanup"] is False
    (attempt,) = result["attempts"]
    assert attempt["exitCode"] == 0
    assert attempt["signalsSent"] == []
    assert not alive(attempt["pid"])
    # protocol.jsonl holds both directions, the task as the first prompt.
    records = [
        orjson.loads(line)
        for line in (tmp_path / "run" / "protocol.jsonl").read_bytes().splitlines()
    ]
    prompts = [
        r["msg"]
        for r in records
        if r["dir"] == "out" and r["msg"].get("method") == "session/prompt"
    ]
    assert [p["params"]["prompt"][0]["text"] for p in prompts] == ["Fix the tests"]
    _, outputs = replay(records)
    finals = [o for o in outputs if isinstance(o, AssistantMessage)]
    assert [m.text for m in finals] == ["Running it.Done."]
    # stdout.log keeps what the agent sent, and only that.
    sent = [
        orjson.loads(line) for line in (tmp_path / "run" / "stdout.log").read_bytes().splitlines()
    ]
    assert sent == [r["msg"] for r in records if r["dir"] == "in"]
    # normalize replays protocol.jsonl as the live run read it.
    normalized = subprocess.run(
        [sys.executable, "-m", "wrapper", "normalize", "--summary", "run/protocol.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        timeout=HANG,
        check=True,
    )
    report = json.loads(normalized.stdout)
    assert report["dialect"] == "acp"
    assert (report["finalText"], report["rawStopReason"]) == ("Running it.Done.", "end_turn")
    assert report["toolsUsed"] == ["execute"]
    assert report["warnings"] == []


def pre_tool_use_settings(tmp_path: Path, script: str, matcher: str = "execute") -> Path:
    """Settings with one PreToolUse handler running ``script`` (Python)."""
    hook = tmp_path / "pre_tool_use.py"
    hook.write_text(script)
    settings = tmp_path / "settings.json"
    group = {"matcher": matcher, "hooks": [{"command": f"{sys.executable} {hook}"}]}
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    return settings


def protocol_records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "run" / "protocol.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def permission_answers(tmp_path: Path) -> list[Any]:
    """The wrapper's answers to the agent's permission requests."""
    records = protocol_records(tmp_path)
    asked = {
        r["msg"]["id"]
        for r in records
        if r["dir"] == "in" and r["msg"].get("method") == "session/request_permission"
    }
    return [
        r["msg"]["result"]["outcome"]
        for r in records
        if r["dir"] == "out" and "result" in r["msg"] and r["msg"].get("id") in asked
    ]


def tool_ends(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "run" / "events.jsonl").read_bytes().splitlines()
    return [e for e in map(orjson.loads, lines) if e["type"] == "tool_end"]


DENY = """
import json, sys
hook = json.load(sys.stdin)
assert hook["hook_event_name"] == "PreToolUse"
assert hook["tool_input"] == {"command": "make test"}, hook
print("not on this branch: " + hook["tool_name"], file=sys.stderr)
sys.exit(2)
"""


def test_a_pretooluse_deny_is_enforced(tmp_path: Path) -> None:
    settings = pre_tool_use_settings(tmp_path, DENY)
    proc = start(tmp_path, TOOL_RUN, "--task", "Fix", "--settings", str(settings))
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    result = result_of(tmp_path)
    # The handlers run for an ACP agent: no note says they are ignored.
    assert not [w for w in result["warnings"] if "NOT ENFORCED" in w["message"]]
    assert b"NOT ENFORCED" not in stderr
    # The agent was told no (a reject option) and the tool did not run.
    assert permission_answers(tmp_path) == [{"outcome": "selected", "optionId": "cancel"}]
    (end,) = tool_ends(tmp_path)
    assert end["isError"] is True
    # The reason is recorded with the handler's decision.
    lines = (tmp_path / "run" / "events.jsonl").read_bytes().splitlines()
    decisions = [e for e in map(orjson.loads, lines) if e["type"] == "hook_decision"]
    assert [(d["event"], d["decision"]) for d in decisions] == [("PreToolUse", "block")]
    assert "not on this branch: execute" in decisions[0]["reason"]


@pytest.mark.parametrize(
    ("answer", "options", "chosen"),
    [
        ({"permissionDecision": "allow"}, ("--permissions", "deny"), "proceed_once"),
        ({"permissionDecision": "deny", "permissionDecisionReason": "no"}, (), "cancel"),
        ({"permissionDecision": "ask"}, (), "cancel"),
        (None, ("--permissions", "deny"), "cancel"),
        (None, (), "proceed_once"),
    ],
)
def test_permission_answers(
    tmp_path: Path, answer: dict[str, Any] | None, options: tuple[str, ...], chosen: str
) -> None:
    specific = {"hookEventName": "PreToolUse", **answer} if answer else None
    script = f"import json, sys\njson.load(sys.stdin)\nanswer = {specific!r}\n" + (
        "if answer:\n    print(json.dumps({'hookSpecificOutput': answer}))\n"
    )
    settings = pre_tool_use_settings(tmp_path, script)
    proc = start(tmp_path, TOOL_RUN, "--task", "Fix", "--settings", str(settings), *options)
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert permission_answers(tmp_path) == [{"outcome": "selected", "optionId": chosen}]
    (end,) = tool_ends(tmp_path)
    assert end["isError"] is (chosen == "cancel")
    codes = [w["code"] for w in result_of(tmp_path)["warnings"]]
    assert ("permission_ask_denied" in codes) == (answer == {"permissionDecision": "ask"})


def test_a_hook_for_another_tool_leaves_the_default(tmp_path: Path) -> None:
    # A Claude matcher names no ACP tool: the permissions setting decides.
    settings = pre_tool_use_settings(tmp_path, DENY, matcher="Bash")
    proc = start(tmp_path, TOOL_RUN, "--task", "Fix", "--settings", str(settings))
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert permission_answers(tmp_path) == [{"outcome": "selected", "optionId": "proceed_once"}]


def test_a_tool_run_unasked_is_reported_when_pretooluse_handlers_exist(tmp_path: Path) -> None:
    settings = pre_tool_use_settings(tmp_path, DENY)
    # The fake agent asks before every tool unless run with --yolo.
    options = ("--task", "Fix", "--settings", str(settings))
    proc = start(tmp_path, TOOL_RUN, *options, agent_args=("--yolo",))
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert permission_answers(tmp_path) == []
    warnings = result_of(tmp_path)["warnings"]
    assert [w["code"] for w in warnings if w["code"] == "pre_tool_use_not_asked"] == [
        "pre_tool_use_not_asked"
    ]


def test_no_task_is_a_usage_error(tmp_path: Path) -> None:
    proc = start(tmp_path, TOOL_RUN)
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 2
    assert b"acp dialect needs a task" in stderr


def test_sigterm_mid_turn_cancels_then_ends_the_agent(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Running it.",
                "stopReason": "toolUse",
                "toolCalls": [{"name": "bash", "arguments": {"command": "sleep 30"}}],
            }
        },
        {"tool": {"name": "bash", "result": "slept", "duration": 30}},
        {"assistant": {"text": "Done.", "stopReason": "stop"}},
    ]
    proc = start(tmp_path, steps, "--task", "Wait")
    protocol = tmp_path / "run" / "protocol.jsonl"
    deadline = time.monotonic() + HANG
    while current_tool(tmp_path) != "execute":
        assert time.monotonic() < deadline, "the tool never started"
        assert proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=HANG)
    result = result_of(tmp_path)
    assert result["outcome"] == "aborted", stderr
    records = [orjson.loads(line) for line in protocol.read_bytes().splitlines()]
    assert "session/cancel" in [r["msg"].get("method") for r in records if r["dir"] == "out"]
    (attempt,) = result["attempts"]
    assert not alive(attempt["pid"])


def stop_hook_settings(tmp_path: Path, script: str) -> Path:
    """Settings with one Stop hook running ``script`` (a Python program)."""
    hook = tmp_path / "stop_hook.py"
    hook.write_text(script)
    settings = tmp_path / "settings.json"
    command = f"{sys.executable} {hook}"
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"command": command}]}]}}))
    return settings


#: Blocks the first stop (no tests run yet), allows the next; slower than
#: the run's grace and idle limit, which must not run while it decides.
BLOCK_ONCE = """
import json, pathlib, sys, time
json.load(sys.stdin)
time.sleep(2)
mark = pathlib.Path(__file__).with_suffix(".blocked")
if mark.exists():
    sys.exit(0)
mark.write_text("")
print(json.dumps({"decision": "block", "reason": "Now run the tests."}))
"""


def test_a_stop_hook_steers_the_live_session(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [{"assistant": {"text": "Fixed.", "stopReason": "stop"}}]
    resumes = [[{"assistant": {"text": "Tests pass.", "stopReason": "stop"}}]]
    settings = stop_hook_settings(tmp_path, BLOCK_ONCE)
    proc = start(tmp_path, steps, "--task", "Fix it", "--settings", str(settings), resumes=resumes)
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    result = result_of(tmp_path)
    assert result["outcome"] == "ok"
    assert result["finalText"] == "Tests pass."
    assert result["steerCount"] == 1
    assert [s["reason"] for s in result["steers"]] == ["Now run the tests."]
    # One agent process took both prompt turns: one attempt per turn.
    first, second = result["attempts"]
    assert first["pid"] == second["pid"] == result["pid"]
    assert second["exitCode"] == 0
    assert result["forcedCleanup"] is False
    assert not alive(result["pid"])
    records = [
        orjson.loads(line)
        for line in (tmp_path / "run" / "protocol.jsonl").read_bytes().splitlines()
    ]
    out = [r["msg"] for r in records if r["dir"] == "out"]
    assert [m["method"] for m in out if m.get("method") == "session/new"] == ["session/new"]
    prompts = [m["params"] for m in out if m.get("method") == "session/prompt"]
    assert [p["prompt"][0]["text"] for p in prompts] == ["Fix it", "Now run the tests."]
    assert prompts[0]["sessionId"] == prompts[1]["sessionId"]


def test_attempt_timeout_cancels_the_turn_and_a_stop_hook_may_steer(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Running it.",
                "stopReason": "toolUse",
                "toolCalls": [{"name": "bash", "arguments": {"command": "sleep 12"}}],
            }
        },
        # The fake agent reads a cancel between the tool's updates and ends
        # the turn (cancelled) once the tool is over.
        {"tool": {"name": "bash", "result": "slept", "duration": 12, "updates": 23}},
        {"assistant": {"text": "Done.", "stopReason": "stop"}},
    ]
    resumes = [[{"assistant": {"text": "Skipped the slow part.", "stopReason": "stop"}}]]
    settings = stop_hook_settings(tmp_path, BLOCK_ONCE)
    options = ("--task", "Wait", "--settings", str(settings), "--attempt-timeout", "5")
    # The turn must end in time after the cancel for the process to be spared.
    proc = start(tmp_path, steps, *options, "--kill-after", "30", resumes=resumes)
    _, stderr = proc.communicate(timeout=HANG)
    result = result_of(tmp_path)
    # Only the first turn had a limit to hit; the steered one ended in time.
    assert result["outcome"] == "ok", stderr
    assert result["finalText"] == "Skipped the slow part."
    first, second = result["attempts"]
    assert first["rawStopReason"] == "cancelled"
    # The limit cancelled the turn over the protocol; the process was not signalled.
    assert first["signalsSent"] == []
    assert second["signalsSent"] == []
    assert first["pid"] == second["pid"]
    records = [
        orjson.loads(line)
        for line in (tmp_path / "run" / "protocol.jsonl").read_bytes().splitlines()
    ]
    methods = [r["msg"].get("method") for r in records if r["dir"] == "out"]
    assert methods.count("session/cancel") == 1
    assert methods.count("session/prompt") == 2
    assert not alive(result["pid"])


WRAPPER = (sys.executable, "-m", "wrapper", "run")


def test_a_silent_agent_of_unknown_dialect_gets_the_acp_hint(tmp_path: Path) -> None:
    # Silent until the run has warned about it (at most 30 s), then gone:
    # no longer than the warning takes to come. (Its code is spelt in two
    # parts: the run's own record of this command line must not match.)
    waits = (
        "import pathlib, time\n"
        "events, deadline = pathlib.Path('run/events.jsonl'), time.monotonic() + 30\n"
        "code = '\"code\":\"silent' '_agent\"'\n"
        "while code not in (events.read_text() if events.exists() else ''):\n"
        "    if time.monotonic() > deadline:\n"
        "        break\n"
        "    time.sleep(0.1)\n"
    )
    proc = subprocess.Popen(
        [*WRAPPER, "--output", "quiet", "--run-dir", "run", "--", sys.executable, "-c", waits],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, stderr = proc.communicate(timeout=HANG)
    codes = [w["code"] for w in result_of(tmp_path)["warnings"]]
    assert "silent_agent" in codes, stderr
    assert b"--dialect acp" in stderr


def test_a_completion_signal_counts_in_the_turn_that_sent_it(tmp_path: Path) -> None:
    # The agent's one process cannot know which attempt it is in: the signal
    # takes the run's current one, so --on-stop signal works across steers.
    signal_step: dict[str, Any] = {
        "run": {"argv": [sys.executable, "-m", "wrapper", "signal", "complete"]}
    }
    steps: list[dict[str, Any]] = [{"assistant": {"text": "Maybe done.", "stopReason": "stop"}}]
    resumes = [[signal_step, {"assistant": {"text": "Done.", "stopReason": "stop"}}]]
    proc = start(tmp_path, steps, "--task", "Fix", "--on-stop", "signal", resumes=resumes)
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    result = result_of(tmp_path)
    assert result["stopAllowedBy"] == "signal"
    assert result["completionSignal"]["attempt"] == 2
    (steer,) = result["steers"]
    assert steer["handler"] == "onStop:signal"
    first, second = result["attempts"]
    assert first["pid"] == second["pid"]


def wait_for_escalation(tmp_path: Path, escalation: str) -> dict[str, Any]:
    status_path = tmp_path / "run" / "status.json"
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        try:
            status: dict[str, Any] = json.loads(status_path.read_text())
        except (OSError, ValueError):
            status = {}
        if status.get("state") == "waiting" and status.get("escalationId") == escalation:
            return status
        time.sleep(0.05)
    raise AssertionError(f"no question {escalation}")


def reply(tmp_path: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "wrapper", "reply", str(tmp_path / "run"), *args],
        check=True,
        timeout=HANG,
        capture_output=True,
    )


def test_a_pretooluse_ask_asks_a_person_with_the_escalate_policy(tmp_path: Path) -> None:
    ask = {"hookEventName": "PreToolUse", "permissionDecision": "ask"}
    answer = json.dumps({"hookSpecificOutput": ask})
    script = f"import sys\nsys.stdin.read()\nprint({answer!r})\n"
    settings = pre_tool_use_settings(tmp_path, script)
    options = ("--settings", str(settings), "--on-stop", "escalate", "--escalation-timeout", "60")
    proc = start(tmp_path, TOOL_RUN, "--task", "Fix", *options)
    try:
        status = wait_for_escalation(tmp_path, "esc-1")
        assert "make test" in status["question"]
        reply(tmp_path, "--continue")
        # The stop is the policy's question too; the person lets it stop.
        wait_for_escalation(tmp_path, "esc-2")
        reply(tmp_path, "--stop")
        _, stderr = proc.communicate(timeout=HANG)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, stderr
    assert permission_answers(tmp_path) == [{"outcome": "selected", "optionId": "proceed_once"}]
    result = result_of(tmp_path)
    assert [e["answer"] for e in result["escalations"]] == ["continue", "stop"]
    (end,) = tool_ends(tmp_path)
    assert end["isError"] is False


def _sent(tmp_path: Path, method: str) -> list[dict[str, Any]]:
    """The params of every ``method`` request the wrapper sent (protocol.jsonl)."""
    records = [
        orjson.loads(line)
        for line in (tmp_path / "run" / "protocol.jsonl").read_bytes().splitlines()
    ]
    return [
        r["msg"].get("params")
        for r in records
        if r.get("dir") == "out" and r["msg"].get("method") == method
    ]


ANSWER: list[dict[str, Any]] = [{"assistant": {"text": "Done.", "stopReason": "stop"}}]


def test_an_agent_requiring_authentication_gets_the_method_named(tmp_path: Path) -> None:
    proc = start(
        tmp_path,
        ANSWER,
        "--task",
        "Go",
        "--auth-method",
        "api-key",
        agent_args=("--require-auth", "api-key"),
    )
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert result_of(tmp_path)["finalText"] == "Done."
    assert _sent(tmp_path, "authenticate") == [{"methodId": "api-key"}]
    assert len(_sent(tmp_path, "session/new")) == 2


def test_authentication_is_never_sent_unless_the_agent_requires_it(tmp_path: Path) -> None:
    proc = start(tmp_path, ANSWER, "--task", "Go", "--auth-method", "api-key")
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert _sent(tmp_path, "authenticate") == []


def test_an_agent_requiring_authentication_without_a_method_fails_clearly(
    tmp_path: Path,
) -> None:
    proc = start(tmp_path, ANSWER, "--task", "Go", agent_args=("--require-auth", "api-key"))
    proc.communicate(timeout=HANG)
    assert proc.returncode != 0
    result = result_of(tmp_path)
    assert result["outcome"] == "error"
    message = result["error"]["message"]
    assert "requires authentication" in message
    assert "api-key" in message
    assert "--auth-method" in message
    assert _sent(tmp_path, "authenticate") == []


def test_the_settings_give_the_auth_method_and_mcp_servers(tmp_path: Path) -> None:
    server = {"name": "docs", "command": "/usr/bin/docs-mcp", "args": ["--stdio"], "env": []}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"acp": {"authMethod": "api-key", "mcpServers": [server]}}))
    proc = start(
        tmp_path,
        ANSWER,
        "--task",
        "Go",
        "--settings",
        str(settings),
        agent_args=("--require-auth", "api-key"),
    )
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert _sent(tmp_path, "authenticate") == [{"methodId": "api-key"}]
    assert [p["mcpServers"] for p in _sent(tmp_path, "session/new")] == [[server], [server]]


@pytest.mark.parametrize(
    "acp",
    [{"authMethod": ""}, {"mcpServers": [{"command": "x"}]}, {"mcpServers": {}}, {"other": 1}],
)
def test_bad_acp_settings_are_a_usage_error(tmp_path: Path, acp: dict[str, Any]) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"acp": acp}))
    proc = start(tmp_path, ANSWER, "--task", "Go", "--settings", str(settings))
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 2
    assert b"acp." in stderr


def test_an_agent_writing_bad_lines_in_a_loop_fills_neither_the_result_nor_the_events(
    tmp_path: Path,
) -> None:
    flood = "i=0; while [ $i -lt 500 ]; do echo '{}'; i=$((i+1)); done"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "wrapper", "run", "--output", "quiet"),
            *("--run-dir", str(tmp_path / "run"), "--dialect", "acp", "--task", "hi"),
            *("--", "sh", "-c", flood),
        ],
        check=False,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=HANG,
    )
    assert proc.returncode == 1
    malformed = [w for w in result_of(tmp_path)["warnings"] if w["code"] == "acp_malformed"]
    assert len(malformed) == 21
    assert "480 more acp_malformed warnings were not recorded" in malformed[-1]["message"]
    events = (tmp_path / "run" / "events.jsonl").read_bytes().splitlines()
    assert sum(b'"acp_malformed"' in line for line in events) == 21
    assert (tmp_path / "run" / "stdout.log").read_bytes() == b"{}\n" * 500
