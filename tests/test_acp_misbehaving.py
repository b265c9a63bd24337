"""``agent-wrapper run --dialect acp`` against agents that misbehave in ways
the fake agent's scenarios do not play (``tests/acp_scripted_agent.py``):
what a user finds in result.json, status.json and the run directory."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import read_result

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "tests" / "acp_scripted_agent.py"

#: Only to catch a hang.
HANG = 60.0


def run(
    tmp_path: Path, script: dict[str, Any], *options: str, timeout: float = HANG
) -> tuple[subprocess.CompletedProcess[bytes], dict[str, Any]]:
    """The wrapper running the scripted agent to its end; its result.json."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "wrapper", "run", "--output", "quiet"),
            *("--run-dir", str(tmp_path / "run"), "--dialect", "acp", "--task", "Go"),
            *options,
            *("--", sys.executable, str(AGENT), str(path)),
        ],
        check=False,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
    )
    return proc, read_result(tmp_path / "run" / "result.json")


def events(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "run" / "events.jsonl").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines]


def chunk(text: str, **extra: Any) -> dict[str, Any]:
    content = {"type": "text", "text": text}
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"update": {"sessionUpdate": "agent_message_chunk", "content": content, **extra}},
    }


def test_a_stray_tool_call_after_the_answer_leaves_the_run_ok(tmp_path: Path) -> None:
    stray = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "update": {"sessionUpdate": "tool_call", "toolCallId": "late", "kind": "execute"}
        },
    }
    script = {"turn": [chunk("Done.")], "atClose": [stray, {"$sleep": 0.3}]}
    proc, result = run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert result["outcome"] == "ok"
    assert result["error"] is None
    assert result["finalText"] == "Done."
    codes = [w["code"] for w in result["warnings"]]
    assert "acp_update_outside_turn" in codes
    assert not [e for e in events(tmp_path) if e["type"] == "tool_start"]


def test_an_agent_that_asked_the_model_again_answers_with_its_last_message(
    tmp_path: Path,
) -> None:
    # As an agent does after max_tokens: the first message is cut short, the
    # second is the answer; each chunk names its message.
    turn = [
        chunk("The answer is fo", messageId="m1"),
        chunk("The answer is ", messageId="m2"),
        chunk("42.", messageId="m2"),
    ]
    proc, result = run(tmp_path, {"turn": turn})
    assert proc.returncode == 0, proc.stderr
    assert result["finalText"] == "The answer is 42."


def test_an_agent_needing_its_own_login_says_so_with_its_words(tmp_path: Path) -> None:
    # It lists no authenticate method: --auth-method cannot help; its login can.
    script = {
        "stderr": "Not signed in. Please run `auggie login` first.",
        "sessionNew": {"code": -32000, "message": "Authentication required: no session token"},
    }
    proc, result = run(tmp_path, script)
    assert proc.returncode == 1
    assert result["outcome"] == "error"
    message = result["error"]["message"]
    assert "name the one to use with --auth-method" not in message
    assert "own command" in message
    assert "Authentication required: no session token" in message
    assert "auggie login" in message


def test_a_flood_of_requests_from_an_agent_that_does_not_read_stays_bounded(
    tmp_path: Path,
) -> None:
    flood = {"$flood": {"count": 30000, "method": "fs/read_text_file"}}
    proc, result = run(tmp_path, {"turn": [flood, chunk("Done.")]})
    assert proc.returncode == 0, proc.stderr
    assert result["outcome"] == "ok"
    assert result["finalText"] == "Done."
    dropped = [w for w in result["warnings"] if w["code"] == "acp_replies_dropped"]
    assert len(dropped) == 1
    assert "not reading its input" in dropped[0]["message"]
    # What waited to be written stayed bounded: most answers were never queued.
    records = (tmp_path / "run" / "protocol.jsonl").read_bytes().splitlines()
    answers = [r for r in map(orjson.loads, records) if r["dir"] == "out" and "error" in r["msg"]]
    assert 1000 <= len(answers) < 5000


#: A PreToolUse handler that notes how many of its kind run at once.
COUNTING_HOOK = """
import json, os, pathlib, sys, time
json.load(sys.stdin)
here = pathlib.Path(__file__).parent / "running"
here.mkdir(exist_ok=True)
mine = here / str(os.getpid())
mine.write_text("")
with open(here.parent / "counts", "a") as counts:
    counts.write(f"{len(list(here.iterdir()))}\\n")
time.sleep(0.4)
mine.unlink()
"""


def test_many_permission_requests_at_once_run_a_bounded_number_of_hooks(
    tmp_path: Path,
) -> None:
    hook = tmp_path / "hook.py"
    hook.write_text(COUNTING_HOOK)
    group = {"matcher": "execute", "hooks": [{"command": f"{sys.executable} {hook}"}]}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    script = {"turn": [{"$permissions": 12}, chunk("Done.")]}
    proc, result = run(tmp_path, script, "--settings", str(settings))
    assert proc.returncode == 0, proc.stderr
    assert result["outcome"] == "ok"
    counts = [int(n) for n in (tmp_path / "counts").read_text().split()]
    # Every request was decided, by at most the limit of handlers at a time.
    assert len(counts) == 12
    assert max(counts) <= 4
    ends = [e for e in events(tmp_path) if e["type"] == "tool_end"]
    assert [e["isError"] for e in ends] == [False] * 12


def test_a_flood_of_permission_requests_waits_for_a_bounded_number_of_decisions(
    tmp_path: Path,
) -> None:
    # 1000 requests at once, each decided by a handler taking 0.4 s, 4 at a
    # time: all of them waiting would hold the agent for 100 s. At most 64
    # wait; the others are denied at once, and the agent gets every answer.
    hook = tmp_path / "hook.py"
    hook.write_text(COUNTING_HOOK)
    group = {"matcher": "execute", "hooks": [{"command": f"{sys.executable} {hook}"}]}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    script = {"turn": [{"$permissions": 1000}, chunk("Done.")]}
    proc, result = run(tmp_path, script, "--settings", str(settings))
    assert proc.returncode == 0, proc.stderr
    assert (result["outcome"], result["finalText"]) == ("ok", "Done.")
    denied = [w for w in result["warnings"] if w["code"] == "acp_permissions_denied"]
    assert len(denied) == 1
    assert "64 permission requests" in denied[0]["message"]
    counts = [int(n) for n in (tmp_path / "counts").read_text().split()]
    assert 64 <= len(counts) < 200
    assert max(counts) <= 4
    ends = [e for e in events(tmp_path) if e["type"] == "tool_end"]
    assert len(ends) == 1000
    # Those the handlers decided ran; the others were refused.
    assert len([e for e in ends if not e["isError"]]) == len(counts)


def test_a_burst_of_permission_requests_no_hook_decides_is_answered_by_the_setting(
    tmp_path: Path,
) -> None:
    # Without a handler to wait for, each is answered as it comes: none waits,
    # so the bound on those waiting refuses none of them.
    proc, result = run(tmp_path, {"turn": [{"$permissions": 300}, chunk("Done.")]})
    assert proc.returncode == 0, proc.stderr
    assert "acp_permissions_denied" not in [w["code"] for w in result["warnings"]]
    ends = [e for e in events(tmp_path) if e["type"] == "tool_end"]
    assert [e["isError"] for e in ends] == [False] * 300


def waiting_question(tmp_path: Path, other_than: str | None = None) -> dict[str, Any]:
    """status.json once it shows a question (not ``other_than``)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            status: dict[str, Any] = json.loads((tmp_path / "run" / "status.json").read_text())
        except (OSError, ValueError):
            status = {}
        if status.get("state") == "waiting" and status.get("escalationId") not in (
            None,
            other_than,
        ):
            return status
        time.sleep(0.05)
    raise AssertionError("no question is shown")


def reply(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "wrapper", "reply", str(tmp_path / "run"), *args],
        check=False,
        timeout=HANG,
        capture_output=True,
    )


def test_two_questions_about_tools_at_once_are_asked_one_after_the_other(
    tmp_path: Path,
) -> None:
    ask = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}}
    hook = tmp_path / "hook.py"
    hook.write_text(f"import sys\nsys.stdin.read()\nprint({json.dumps(ask)!r})\n")
    group = {"matcher": "execute", "hooks": [{"command": f"{sys.executable} {hook}"}]}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turn": [{"$permissions": 2}, chunk("Done.")]}))
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "wrapper", "run", "--output", "quiet"),
            *("--run-dir", str(tmp_path / "run"), "--dialect", "acp", "--task", "Go"),
            *("--settings", str(settings), "--on-stop", "escalate"),
            *("--escalation-timeout", "120"),
            *("--", sys.executable, str(AGENT), str(script)),
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        first = waiting_question(tmp_path)
        answered = reply(tmp_path, "--continue")
        assert answered.returncode == 0, answered.stderr
        # The other question is shown in its turn, and answered as any.
        second = waiting_question(tmp_path, other_than=first["escalationId"])
        assert {"echo 0", "echo 1"} == {
            q["question"].split(": ", 1)[1].split(".")[0] for q in (first, second)
        }
        answered = reply(tmp_path, "--stop")
        assert answered.returncode == 0, answered.stderr
        waiting_question(tmp_path, other_than=second["escalationId"])  # may it stop?
        reply(tmp_path, "--stop")
        _, stderr = proc.communicate(timeout=HANG)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, stderr
    result = read_result(tmp_path / "run" / "result.json")
    assert [e["answer"] for e in result["escalations"]] == ["continue", "stop", "stop"]
    ends = sorted(
        (e["toolCallId"], e["isError"]) for e in events(tmp_path) if e["type"] == "tool_end"
    )
    assert sorted(is_error for _, is_error in ends) == [False, True]


def test_a_question_about_a_tool_closes_when_the_turn_ends_first(tmp_path: Path) -> None:
    ask = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}}
    hook = tmp_path / "hook.py"
    hook.write_text(f"import sys\nsys.stdin.read()\nprint({json.dumps(ask)!r})\n")
    group = {"matcher": "execute", "hooks": [{"command": f"{sys.executable} {hook}"}]}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    script = tmp_path / "script.json"
    # The agent gives up on its tools and ends the turn while a person is asked.
    script.write_text(json.dumps({"turn": [{"$ask": 2}, {"$sleep": 2}, chunk("Done.")]}))
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "wrapper", "run", "--output", "quiet"),
            *("--run-dir", str(tmp_path / "run"), "--dialect", "acp", "--task", "Go"),
            *("--settings", str(settings), "--on-stop", "escalate"),
            *("--escalation-timeout", "120"),
            *("--", sys.executable, str(AGENT), str(script)),
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        about_tool = waiting_question(tmp_path)
        assert "echo" in about_tool["question"]
        # Nobody answers it: once the turn is over the stop is asked about.
        about_stop = waiting_question(tmp_path, other_than=about_tool["escalationId"])
        assert "echo" not in about_stop["question"]
        reply(tmp_path, "--stop")
        _, stderr = proc.communicate(timeout=HANG)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, stderr
    result = read_result(tmp_path / "run" / "result.json")
    assert result["outcome"] == "ok"
    answers = [e["answer"] for e in result["escalations"]]
    assert answers[-1] == "stop"
    assert "continue" not in answers


def test_an_agent_that_closes_its_output_mid_turn_but_stays_alive_is_ended(
    tmp_path: Path,
) -> None:
    script = {"turn": [chunk("Working on it"), {"$closeStdout": 60}]}
    started = time.monotonic()
    proc, result = run(tmp_path, script, "--drain-timeout", "1", "--kill-after", "2")
    # Ended after the drain timeout, not left to wait for --timeout (none).
    assert time.monotonic() - started < 30
    assert proc.returncode == 1
    assert result["outcome"] == "error"
    assert result["error"]["kind"] == "stopped_answering"
    assert "closed its output" in result["error"]["message"]
    assert [s["signal"] for s in result["signalsSent"]][:1] == ["SIGTERM"]
    assert b"stopped_answering" in proc.stderr or b"closed its output" in proc.stderr


BLOCK = """
import json, sys
json.load(sys.stdin)
print(json.dumps({"decision": "block", "reason": "Now run the tests."}))
"""


def test_an_agent_that_closed_its_output_between_turns_is_ended_on_the_next(
    tmp_path: Path,
) -> None:
    hook = tmp_path / "stop.py"
    hook.write_text(BLOCK)
    settings = tmp_path / "settings.json"
    command = f"{sys.executable} {hook}"
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"command": command}]}]}}))
    script = {"turn": [chunk("Fixed.")], "after": [{"$closeStdout": 60}]}
    started = time.monotonic()
    proc, result = run(
        tmp_path, script, "--settings", str(settings), "--drain-timeout", "1", "--kill-after", "2"
    )
    assert time.monotonic() - started < 30
    assert result["outcome"] == "error", proc.stderr
    assert result["error"]["kind"] == "stopped_answering"
    assert result["steerCount"] == 1


BLOCK_ONCE = """
import json, pathlib, sys
json.load(sys.stdin)
mark = pathlib.Path(__file__).with_suffix(".blocked")
if not mark.exists():
    mark.write_text("")
    print(json.dumps({"decision": "block", "reason": "Now run the tests."}))
"""


def test_text_sent_after_a_turns_answer_is_not_the_next_turns(tmp_path: Path) -> None:
    hook = tmp_path / "stop.py"
    hook.write_text(BLOCK_ONCE)
    settings = tmp_path / "settings.json"
    command = f"{sys.executable} {hook}"
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"command": command}]}]}}))
    script = {"turn": [chunk("Tested.")], "after": [chunk("One more thing"), chunk("...")]}
    proc, result = run(tmp_path, script, "--settings", str(settings))
    assert proc.returncode == 0, proc.stderr
    assert result["steerCount"] == 1
    assert result["finalText"] == "Tested."
    late = [w for w in result["warnings"] if w["code"] == "acp_text_outside_turn"]
    # One per gap between turns (the second follows the last answer).
    assert len(late) == 2
    assert "One more thing" in late[0]["message"]
