"""PreToolUse handlers enforced natively by the real CLIs (the agent runs them
as its own hooks, behind the wrapper's relay: Claude Code's ``--settings``,
pi's ``--extension``, opencode's plugin, Codex's ``-c`` hooks), against the
mock model server: a denied tool leaves no side effect and the run records
the decision and its reason; an allowed tool runs; one ``@execute`` rule
denies every agent's shell tool; the CLI's own settings (Claude Code's
``--settings`` on COMMAND, opencode's ``OPENCODE_CONFIG_CONTENT``) still apply.
Runs only when ``AGENT_WRAPPER_CLIS`` names the install cache."""

from __future__ import annotations

import dataclasses
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
SHELL = {"claude": "Bash", "pi": "bash", "opencode": "bash", "codex": "Bash"}
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
    env: dict[str, Any] | None = None,
) -> Case:
    """One ``tool`` case with ``hooks`` as the run's settings; ``env``: the
    user's own opencode configuration given in OPENCODE_CONFIG_CONTENT,
    which then also takes over the provider from the case's config file."""
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
        config_content=env,
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
    if cli == "codex":
        # Codex reports no item for a command its hook blocked.
        assert case.of_type("tool_start") == [], where
    else:
        (tool,) = case.of_type("tool_end")
        assert tool["isError"] is True
    # The agent is told why: the request after the refused tool carries the reason.
    assert any(REASON in json.dumps(r["body"]) for r in case.requests), where
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
    # opencode reaches the mock through the provider of the user's own
    # OPENCODE_CONFIG file: it still loads beside the wrapper's plugin.
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


#: The agents whose own mechanism takes a changed input, and those that cannot.
REWRITING = [(cli, version) for cli, version in NATIVE if cli in ("pi", "claude", "opencode")]
NOT_REWRITING = [(cli, version) for cli, version in NATIVE if cli == "codex"]


def rewrite_command(cli: str, version: str, mock: Mock, tmp_path: Path) -> Case:
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
    return run_with_hooks(cli, version, tmp_path, mock, hooks)


@pytest.mark.parametrize(("cli", "version"), REWRITING, ids=[f"{c}-{v}" for c, v in REWRITING])
def test_a_rewritten_input_is_what_runs(cli: str, version: str, mock: Mock, tmp_path: Path) -> None:
    case = rewrite_command(cli, version, mock, tmp_path)
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    files = case.files()
    assert files.get("tool-rewritten.txt") == "rewritten", where
    assert "tool-out.txt" not in files, "the command as the model asked for it never ran"
    (decision,) = decisions(case)
    assert decision["reason"] == "the tool's input was rewritten", where
    codes = [w["code"] for w in case.result["warnings"]]
    assert "updated_input_refused" not in codes, where
    assert case.leftover == [], where


@pytest.mark.parametrize(
    ("cli", "version"), NOT_REWRITING, ids=[f"{c}-{v}" for c, v in NOT_REWRITING]
)
def test_a_rewritten_input_an_agent_cannot_take_is_denied(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    case = rewrite_command(cli, version, mock, tmp_path)
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    files = case.files()
    assert "tool-rewritten.txt" not in files, where
    assert "tool-out.txt" not in files, "neither the rewritten command nor the original ran"
    assert [d["decision"] for d in decisions(case)] == ["block"], where
    codes = [w["code"] for w in case.result["warnings"]]
    assert "updated_input_refused" in codes, where
    assert case.leftover == [], where


#: One rule for every agent's shell tool, whatever it is called.
KINDS = [
    (cli, version)
    for cli, version in NATIVE
    if cli in ("pi", "opencode", "codex") or (cli, version) == ("claude", "2.1.332")
]


@pytest.mark.parametrize(("cli", "version"), KINDS, ids=[f"{c}-{v}" for c, v in KINDS])
def test_one_execute_rule_denies_every_agents_shell(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    deny = script(tmp_path, "deny.py", f"print({REASON!r}, file=sys.stderr)\nsys.exit(2)\n")
    hooks = {"PreToolUse": [{"matcher": "@execute", "hooks": [{"type": "command", "args": deny}]}]}
    case = run_with_hooks(cli, version, tmp_path, mock, hooks)
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    assert "tool-out.txt" not in case.files(), where
    assert [(d["decision"], d["reason"]) for d in decisions(case)] == [("block", REASON)], where
    assert case.leftover == [], where


OPENCODE = [(cli, version) for cli, version in NATIVE if cli == "opencode"]


@pytest.mark.parametrize(("cli", "version"), OPENCODE, ids=[f"{c}-{v}" for c, v in OPENCODE])
def test_opencodes_own_config_content_still_applies(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    """The user's OPENCODE_CONFIG_CONTENT is merged, not replaced: here it
    holds the only provider the model can be reached through, and a plugin
    of the user's own that leaves a mark."""
    deny = script(tmp_path, "deny.py", f"print({REASON!r}, file=sys.stderr)\nsys.exit(2)\n")
    hooks = {"PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "args": deny}]}]}
    marker = tmp_path / "own-plugin-ran"
    own = tmp_path / "own-plugin.mjs"
    own.write_text(
        'import { writeFileSync } from "node:fs";\n'
        f"export default async () => {{ writeFileSync({json.dumps(str(marker))}, 'yes'); "
        "return {}; };\n"
    )
    case = run_with_hooks(cli, version, tmp_path, mock, hooks, env={"plugin": [own.as_uri()]})
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    assert case.result["outcome"] == "ok", where
    assert "tool-out.txt" not in case.files(), where
    assert [d["decision"] for d in decisions(case)] == ["block"], where
    assert marker.read_text() == "yes", "the user's own plugin was merged, not dropped"


@pytest.mark.parametrize("version", cli_versions(CLIS["codex"]))
def test_codex_hooks_turned_off_in_config_toml_still_deny(
    version: str, mock: Mock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's config.toml turns Codex's hooks feature off: without the
    # wrapper's -c features.hooks=true, Codex skips the run's hook and the
    # denied command runs.
    codex = CLIS["codex"]

    def configure(home: Path, base: str, exe: str) -> Any:
        setup = codex.configure(home, base, exe)
        config = home / ".codex" / "config.toml"
        config.write_text(config.read_text() + "\n[features]\nhooks = false\n")
        return setup

    monkeypatch.setitem(CLIS, "codex", dataclasses.replace(codex, configure=configure))
    deny = script(tmp_path, "deny.py", f"print({REASON!r}, file=sys.stderr)\nsys.exit(2)\n")
    hooks = {"PreToolUse": [{"matcher": "@execute", "hooks": [{"type": "command", "args": deny}]}]}
    case = run_with_hooks("codex", version, tmp_path, mock, hooks)
    where = f"codex {version}: stderr:\n{case.stderr[-3000:]}"
    assert "tool-out.txt" not in case.files(), where
    (decision,) = decisions(case)
    assert (decision["decision"], decision["reason"]) == ("block", REASON), where


@pytest.mark.parametrize(("cli", "version"), NATIVE, ids=IDS)
def test_a_denied_tool_runs_the_permission_denied_handlers(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    log = tmp_path / "denied.jsonl"
    deny = script(tmp_path, "deny.py", f"print({REASON!r}, file=sys.stderr)\nsys.exit(2)\n")
    observe = script(
        tmp_path, "observe.py", f"open({str(log)!r}, 'a').write(json.dumps(event) + '\\n')\n"
    )
    hooks = {
        "PreToolUse": [{"matcher": "@execute", "hooks": [{"type": "command", "args": deny}]}],
        "PermissionDenied": [{"hooks": [{"type": "command", "args": observe}]}],
    }
    case = run_with_hooks(cli, version, tmp_path, mock, hooks)
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    assert log.exists(), where
    (denied,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert (denied["hook_event_name"], denied["tool_name"]) == ("PermissionDenied", SHELL[cli])
    assert denied["reason"] == REASON
