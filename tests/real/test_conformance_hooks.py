"""PreToolUse handlers enforced natively by the real CLIs (the agent runs them
as its own hooks, behind the wrapper's relay), against the mock model server:
a denied tool leaves no side effect and the run records the decision and its
reason; an allowed tool runs; the CLI's own settings on COMMAND still apply.
Runs only when ``AGENT_WRAPPER_CLIS`` names the install cache."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.clis import CLIS
from tests.real.harness import Case, Mock, cache_dir, cli_versions, mock_server_running, run_case

#: The CLIs whose own hooks the wrapper hands PreToolUse handlers to, and
#: what each calls its shell tool (matchers are case-sensitive).
SHELL = {"claude": "Bash", "pi": "bash"}
NATIVE = [(cli, version) for cli in SHELL for version in cli_versions(CLIS[cli])]
IDS = [f"{cli}-{version}" for cli, version in NATIVE]
REASON = "No shell in this run."


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mock]:
    with mock_server_running(tmp_path_factory.mktemp("mock") / "requests.jsonl") as server:
        yield server


def script(tmp_path: Path, name: str, body: str) -> list[str]:
    path = tmp_path / name
    path.write_text("import json, sys\nevent = json.load(sys.stdin)\n" + body)
    return [sys.executable, str(path)]


def run_with_hooks(
    cli: str,
    version: str,
    tmp_path: Path,
    mock: Mock,
    hooks: dict[str, Any],
    agent_args: list[str] | None = None,
) -> Case:
    exe = CLIS[cli].executable(cache_dir(), version)
    if not exe.exists():
        pytest.fail(f"{cli} {version} is not installed at {exe}: run scripts/conformance")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": hooks}))
    return run_case(
        cli,
        "tool",
        tmp_path / "case",
        mock,
        version=version,
        options=["--settings", str(settings)],
        agent_args=agent_args,
    )


def decisions(case: Case) -> list[dict[str, Any]]:
    return [e for e in case.of_type("hook_decision") if e["event"] == "PreToolUse"]


@pytest.mark.parametrize(("cli", "version"), NATIVE, ids=IDS)
def test_a_denied_tool_never_runs_and_the_reason_is_recorded(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    log = tmp_path / "asked.jsonl"
    deny = script(
        tmp_path,
        "deny.py",
        f"open({str(log)!r}, 'a').write(json.dumps(event) + '\\n')\n"
        f"print({REASON!r}, file=sys.stderr)\nsys.exit(2)\n",
    )
    hooks = {"PreToolUse": [{"matcher": SHELL[cli], "hooks": [{"type": "command", "args": deny}]}]}
    case = run_with_hooks(cli, version, tmp_path, mock, hooks)
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    assert "tool-out.txt" not in case.files(), where
    (decision,) = decisions(case)
    assert (decision["decision"], decision["reason"], decision["exitCode"]) == (
        "block",
        REASON,
        2,
    ), where
    (asked,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert asked["hook_event_name"] == "PreToolUse"
    assert asked["tool_name"] == SHELL[cli]
    assert asked["run_id"] == case.result["runId"]
    (tool,) = case.of_type("tool_end")
    assert tool["isError"] is True
    notes = [w["message"] for w in case.result["warnings"]]
    assert not any("NOT ENFORCED" in n for n in notes), notes
    assert case.leftover == [], where


@pytest.mark.parametrize(("cli", "version"), NATIVE, ids=IDS)
def test_an_allowed_tool_runs(cli: str, version: str, mock: Mock, tmp_path: Path) -> None:
    allow = script(tmp_path, "allow.py", "")
    matcher = f"{SHELL[cli]}|read"
    hooks = {"PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "args": allow}]}]}
    case = run_with_hooks(cli, version, tmp_path, mock, hooks)
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    assert case.files().get("tool-out.txt") == "tool-ok", where
    assert [d["decision"] for d in decisions(case)] == ["allow"], where
    assert case.result["outcome"] == "ok", where


CLAUDE = [(cli, version) for cli, version in NATIVE if cli == "claude"]


@pytest.mark.parametrize(("cli", "version"), CLAUDE, ids=[f"{c}-{v}" for c, v in CLAUDE])
def test_claudes_own_settings_on_command_still_apply(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    allow = script(tmp_path, "allow.py", "")
    hooks = {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "args": allow}]}]}
    marker = tmp_path / "post-tool-use-ran"
    own = script(tmp_path, "own.py", f"open({str(marker)!r}, 'w').write(event['tool_name'])\n")
    user = tmp_path / "claude-own.json"
    user.write_text(
        json.dumps(
            {"hooks": {"PostToolUse": [{"hooks": [{"type": "command", "command": " ".join(own)}]}]}}
        )
    )
    case = run_with_hooks(cli, version, tmp_path, mock, hooks, agent_args=["--settings", str(user)])
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    assert case.files().get("tool-out.txt") == "tool-ok", where
    assert [d["decision"] for d in decisions(case)] == ["allow"], where
    assert marker.read_text() == "Bash", "the CLI's own --settings was merged, not dropped"
    assert case.result["command"][-2:] == ["--settings", str(user)], "result.json: the user's"


@pytest.mark.parametrize(("cli", "version"), NATIVE, ids=IDS)
def test_a_rewritten_input_is_what_runs(cli: str, version: str, mock: Mock, tmp_path: Path) -> None:
    rewrite = script(
        tmp_path,
        "rewrite.py",
        "changed = dict(event['tool_input'])\n"
        "changed['command'] = 'printf rewritten > tool-rewritten.txt'\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',\n"
        "    'permissionDecision': 'allow', 'updatedInput': changed}}))\n",
    )
    hooks = {
        "PreToolUse": [{"matcher": SHELL[cli], "hooks": [{"type": "command", "args": rewrite}]}]
    }
    case = run_with_hooks(cli, version, tmp_path, mock, hooks)
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    files = case.files()
    assert files.get("tool-rewritten.txt") == "rewritten", where
    assert "tool-out.txt" not in files, "the command as the model asked for it never ran"
    (decision,) = decisions(case)
    assert decision["reason"] == "the tool's input was rewritten", where
    codes = [w["code"] for w in case.result["warnings"]]
    assert "updated_input_refused" not in codes, where
    assert case.leftover == [], where
