"""PreToolUse handlers handed to Claude Code through its own ``--settings``:
the settings file the agent is given (a copy of the user's, merged), the
relay each handler runs behind, and what the run makes of the relay's
records. The real CLI's side is in tests/real/test_conformance_hooks.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HANG_LIMIT, ROOT, agent_env, read_result, write_scenario
from tests.test_hooks import answer, hook_script, records, run_cli
from wrapper.core.events import HookDecision, HookStarted, WarningEvent
from wrapper.hooks.native import RECORDS, NativeRecords

pytestmark = pytest.mark.usefixtures("no_leaks")

FAKE_CLAUDE = ROOT / "fixtures" / "fake_agent" / "claude"


def deny_bash(tmp_path: Path) -> dict[str, Any]:
    gate = hook_script(
        tmp_path,
        "gate.py",
        "json.load(sys.stdin)\nprint('No shell.', file=sys.stderr)\nsys.exit(2)\n",
    )
    return {
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": gate}]}]
        }
    }


def run_claude(
    tmp_path: Path,
    settings: dict[str, Any],
    agent_args: Sequence[str] = (),
    *,
    where: Path | None = None,
) -> tuple[subprocess.CompletedProcess[bytes], list[str]]:
    """A run of the fake Claude Code with ``settings``; returns it and its COMMAND."""
    path = where or tmp_path / "wrapper-settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings))
    scenario = write_scenario(tmp_path, answer("Done."))
    command = [str(FAKE_CLAUDE), "-p", "--output-format", "stream-json", "--verbose"]
    command += ["--scenario", str(scenario), *agent_args]
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet"]
    # relative, as a person types it: the relay is given it whole
    argv += ["--run-dir", str(tmp_path / "run"), "--settings", os.path.relpath(path, tmp_path)]
    argv += ["--task", "Fix it"]
    proc = subprocess.run(
        [*argv, "--", *command],
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return proc, command


def given_settings(tmp_path: Path) -> tuple[list[str], dict[str, Any] | None]:
    """The agent's argv as it was started, and the settings file it was given."""
    argv = records(tmp_path)[0]["argv"]
    if "--settings" not in argv:
        return argv, None
    return argv, json.loads(Path(argv[argv.index("--settings") + 1]).read_text())


def test_claude_gets_the_handlers_in_a_merged_copy_of_its_own_settings(tmp_path: Path) -> None:
    own = tmp_path / "claude-own.json"
    own.write_text(json.dumps({"model": "opus", "hooks": {"PostToolUse": [{"hooks": []}]}}))
    proc, command = run_claude(tmp_path, deny_bash(tmp_path), ["--settings", str(own)])
    assert proc.returncode == 0, proc.stderr.decode()
    argv, given = given_settings(tmp_path)
    assert argv.count("--settings") == 1
    assert str(own) not in argv, "the user's file is replaced by the merged copy"
    assert given is not None
    assert argv[argv.index("--settings") + 1] == str(
        tmp_path / "run" / "hooks" / "claude-settings.json"
    )
    assert given["model"] == "opus"
    assert given["hooks"]["PostToolUse"] == [{"hooks": []}]
    (group,) = given["hooks"]["PreToolUse"]
    assert group["matcher"] == "Bash"
    (hook,) = group["hooks"]
    assert " hook-relay " in hook["command"]
    assert hook["timeout"] == 70
    result = read_result(tmp_path / "run" / "result.json")
    assert result["command"] == command, "result.json keeps the user's COMMAND"
    assert not any("NOT ENFORCED" in w["message"] for w in result["warnings"])
    assert "NOT ENFORCED" not in proc.stderr.decode()


def test_the_relay_runs_the_handler_answers_claude_and_records_the_decision(
    tmp_path: Path,
) -> None:
    proc, _ = run_claude(tmp_path, deny_bash(tmp_path))
    assert proc.returncode == 0, proc.stderr.decode()
    _, given = given_settings(tmp_path)
    assert given is not None
    (hook,) = given["hooks"]["PreToolUse"][0]["hooks"]
    run_dir = tmp_path / "run"
    event = {
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm -rf /"},
    }
    env = {**os.environ, "AGENT_WRAPPER_RUN_DIR": str(run_dir), "CLAUDE_PROJECT_DIR": str(tmp_path)}
    relayed = subprocess.run(
        ["/bin/sh", "-c", hook["command"]],
        input=json.dumps(event).encode(),
        capture_output=True,
        env=env,
        timeout=HANG_LIMIT,
        check=False,
    )
    assert relayed.returncode == 0, relayed.stderr.decode()
    assert json.loads(relayed.stdout) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "No shell.",
        }
    }
    events = NativeRecords(run_dir / RECORDS).read_new()
    assert type(events[0]) is HookStarted
    decided = events[1]
    assert isinstance(decided, HookDecision)
    assert (decided.event, decided.decision, decided.reason, decided.exit_code) == (
        "PreToolUse",
        "block",
        "No shell.",
        2,
    )
    assert NativeRecords(run_dir / RECORDS).read_new()[1:2] == [decided]


def test_a_relay_that_cannot_find_its_handler_fails_open_and_says_so(tmp_path: Path) -> None:
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps(deny_bash(tmp_path)))
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "wrapper", "hook-relay", "--settings", str(settings)]
    argv += ["--handler", "3", "0", "x"]
    relayed = subprocess.run(
        argv,
        input=b'{"tool_name": "Bash"}',
        capture_output=True,
        env={**os.environ, "AGENT_WRAPPER_RUN_DIR": str(run_dir)},
        cwd=ROOT,
        timeout=HANG_LIMIT,
        check=False,
    )
    assert (relayed.returncode, relayed.stdout) == (0, b"")
    events = NativeRecords(run_dir / RECORDS).read_new()
    (warning,) = [e for e in events if isinstance(e, WarningEvent)]
    assert warning.code == "hook_failed"
    assert "could not be found again in the settings" in warning.message


def test_a_file_given_to_both_is_relayed_and_never_run_twice(tmp_path: Path) -> None:
    settings = deny_bash(tmp_path)
    shared = tmp_path / "shared.json"
    proc, _ = run_claude(tmp_path, settings, ["--settings", str(shared)], where=shared)
    assert proc.returncode == 0, proc.stderr.decode()
    _, given = given_settings(tmp_path)
    assert given is not None
    (group,) = given["hooks"]["PreToolUse"]
    assert " hook-relay " in group["hooks"][0]["command"]


def test_handlers_in_claudes_own_settings_files_are_left_to_it(tmp_path: Path) -> None:
    proc, _ = run_claude(
        tmp_path, deny_bash(tmp_path), where=tmp_path / ".claude" / "settings.json"
    )
    assert proc.returncode == 0, proc.stderr.decode()
    argv, given = given_settings(tmp_path)
    assert given is None
    assert "--settings" not in argv


def test_without_pre_tool_use_handlers_claude_gets_no_settings(tmp_path: Path) -> None:
    proc, _ = run_claude(tmp_path, {"hooks": {}})
    assert proc.returncode == 0, proc.stderr.decode()
    assert given_settings(tmp_path) == (records(tmp_path)[0]["argv"], None)
    assert not (tmp_path / "run" / "hooks").exists()


# -- pi: an extension ----------------------------------------------------------------------


def test_pi_gets_an_extension_that_relays_each_tool_call(tmp_path: Path) -> None:
    settings = {
        "hooks": {
            "PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "command": "true"}]}]
        }
    }
    path = tmp_path / "wrapper-settings.json"
    path.write_text(json.dumps(settings))
    scenario = write_scenario(tmp_path, answer("Done."))
    argv = [
        sys.executable,
        "-m",
        "wrapper",
        "run",
        "--output",
        "quiet",
        "--run-dir",
        str(tmp_path / "run"),
    ]
    argv += ["--settings", str(path), "--task", "Fix it", "--"]
    argv += [
        str(ROOT / "fixtures" / "fake_agent" / "pi"),
        "--mode",
        "json",
        "-p",
        "--scenario",
        str(scenario),
    ]
    proc = subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    (started,) = records(tmp_path)
    assert started["prompt"] == "Fix it", "the extension is an option, not part of the task"
    extension = Path(started["flags"]["--extension"])
    assert extension == tmp_path / "run" / "hooks" / "pi-extension.mjs"
    text = extension.read_text()
    assert 'pi.on("tool_call"' in text
    assert '"hook-relay","--agent","pi","--handler","*","*","PreToolUse","--settings",' in text
    result = read_result(tmp_path / "run" / "result.json")
    assert not any("NOT ENFORCED" in w["message"] for w in result["warnings"])


def relay_chain(
    tmp_path: Path, settings: dict[str, Any], tool: str
) -> subprocess.CompletedProcess[bytes]:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(settings))
    argv = [sys.executable, "-m", "wrapper", "hook-relay", "--handler", "*", "*", "PreToolUse"]
    argv += ["--settings", str(path)]
    event = {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": {}}
    return subprocess.run(
        argv,
        input=json.dumps(event).encode(),
        capture_output=True,
        env={**os.environ, "AGENT_WRAPPER_RUN_DIR": str(tmp_path / "run")},
        cwd=ROOT,
        timeout=HANG_LIMIT,
        check=False,
    )


def test_the_whole_chain_relay_applies_the_matchers_and_the_first_refusal_decides(
    tmp_path: Path,
) -> None:
    note = hook_script(tmp_path, "note.py", "json.load(sys.stdin)\n")
    settings = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "bash|edit", "hooks": [{"type": "command", "command": note}]},
                deny_bash(tmp_path)["hooks"]["PreToolUse"][0] | {"matcher": "bash"},
            ]
        }
    }
    relayed = relay_chain(tmp_path, settings, "bash")
    assert relayed.returncode == 0, relayed.stderr.decode()
    specific = json.loads(relayed.stdout)["hookSpecificOutput"]
    assert (specific["permissionDecision"], specific["permissionDecisionReason"]) == (
        "deny",
        "No shell.",
    )
    events = NativeRecords(tmp_path / "run" / RECORDS).read_new()
    assert [e.decision for e in events if isinstance(e, HookDecision)] == ["allow", "block"]

    relayed = relay_chain(tmp_path, settings, "read")
    assert (relayed.returncode, relayed.stdout) == (0, b"")
    assert NativeRecords(tmp_path / "run" / RECORDS).read_new()[4:] == [], "no handler took it"


def test_hook_test_runs_pre_tool_use_handlers_by_their_matcher(tmp_path: Path) -> None:
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps(deny_bash(tmp_path)))
    event = tmp_path / "event.json"
    for tool, status, decision in (("Bash", 1, "block"), ("Read", 0, "allow")):
        event.write_text(json.dumps({"hook_event_name": "PreToolUse", "tool_name": tool}))
        proc = run_cli(tmp_path, "hook-test", "--settings", str(settings), "--event", str(event))
        assert proc.returncode == status, proc.stderr
        report = json.loads(proc.stdout)
        assert report["decision"] == decision
        assert len(report["handlers"]) == (1 if tool == "Bash" else 0)
    assert report["reason"] is None


@pytest.mark.parametrize("kind", ["missing", "fifo", "not-json", "inline"])
def test_claudes_own_settings_that_cannot_be_copied_are_a_usage_error(
    tmp_path: Path, kind: str
) -> None:
    own = tmp_path / "own.json"
    if kind == "fifo":
        os.mkfifo(own)
    elif kind == "not-json":
        own.write_text("{oops")
    value = '{"model": "opus"}' if kind == "inline" else str(own)
    proc, _ = run_claude(tmp_path, deny_bash(tmp_path), ["--settings", value])
    if kind == "inline":
        assert proc.returncode == 0, proc.stderr.decode()
        assert given_settings(tmp_path)[1]["model"] == "opus"  # type: ignore[index]
        return
    assert proc.returncode == 2
    (line,) = proc.stderr.decode().splitlines()
    assert line.startswith("agent-wrapper: error: run: COMMAND's --settings: ")
    assert "must be a readable JSON object" in line
