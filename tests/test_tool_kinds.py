"""Tool kinds in matchers: ``@execute`` (and ``@edit``, ``@read``,
``@search``, ``@fetch``, ``@other``) names what a tool does, whatever the
agent calls it; each dialect says which of its tools is which."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HANG_LIMIT, ROOT, run_wrapper
from tests.real.clis import CLIS
from tests.test_real_captures import summary
from wrapper.core.settings import SettingsError, merge_settings
from wrapper.dialects import DIALECTS, tool_kind

CAPTURES = ROOT / "tests" / "data" / "real"

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def _shell_tools() -> list[tuple[str, str, str]]:
    """(cli, dialect, tool) for every tool the real CLIs' captured runs used:
    the tier's tool scenarios all run a shell command."""
    found = set()
    for path in sorted(CAPTURES.glob("*/tool*.jsonl")):
        cli = path.parent.name.rsplit("-", 1)[0]
        if cli not in CLIS:
            continue
        tools = summary(cli, path, 0).get("toolsUsed") or []
        assert isinstance(tools, list)
        found |= {(cli, CLIS[cli].dialect, str(tool)) for tool in tools}
    return sorted(found)


SHELL_TOOLS = _shell_tools()


def test_every_agent_with_a_captured_tool_run_is_covered() -> None:
    assert {cli for cli, _, _ in SHELL_TOOLS} >= {"pi", "claude", "codex", "gemini", "opencode"}


@pytest.mark.parametrize(("cli", "dialect", "tool"), SHELL_TOOLS)
def test_each_real_agents_shell_tool_is_of_kind_execute(cli: str, dialect: str, tool: str) -> None:
    assert DIALECTS[dialect]().tool_kind(tool) == "execute", (cli, tool)


@pytest.mark.parametrize(
    ("dialect", "tool", "kind"),
    [
        ("pi", "bash", "execute"),
        ("pi", "edit", "edit"),
        ("pi", "read", "read"),
        ("claude", "Bash", "execute"),
        ("claude", "Write", "edit"),
        ("claude", "Grep", "search"),
        ("claude", "WebFetch", "fetch"),
        ("claude", "mcp__github__create_issue", "other"),
        ("gemini", "run_shell_command", "execute"),
        ("gemini", "replace", "edit"),
        ("codex", "command_execution", "execute"),
        ("codex", "shell", "execute"),
        ("codex", "file_change", "edit"),
        ("opencode", "bash", "execute"),
        ("opencode", "webfetch", "fetch"),
        ("cursor", "shell", "execute"),
        ("amp", "Bash", "execute"),
        ("amp", "edit_file", "edit"),
        ("acp", "execute", "execute"),
        ("acp", "delete", "edit"),
        ("acp", "think", "other"),
    ],
)
def test_dialect_tables(dialect: str, tool: str, kind: str) -> None:
    assert DIALECTS[dialect]().tool_kind(tool) == kind


def test_without_an_agent_the_kind_is_the_one_the_dialects_agree_on() -> None:
    assert tool_kind(None, "bash") == "execute"
    assert tool_kind(None, "Bash") == "execute"
    # ACP's "edit" and Qwen Code's "edit" agree; pi's "ls" is no one else's
    assert tool_kind(None, "edit") == "edit"
    assert tool_kind(None, "no_such_tool") == "other"


def _settings(data: dict[str, Any]) -> Any:
    return merge_settings(["s.json"], lambda _: data)


def test_a_matcher_names_kinds_beside_names() -> None:
    settings = _settings(
        {
            "hooks": {
                "PreToolUse": [
                    {"matcher": "@execute|Read", "hooks": [{"type": "command", "command": "x"}]}
                ]
            }
        }
    )
    assert settings.pre_tool_use_handlers("Bash", "execute")
    assert settings.pre_tool_use_handlers("Read", "read")
    assert not settings.pre_tool_use_handlers("Edit", "edit")
    # a plain name matches as before, the kind unknown
    assert settings.pre_tool_use_handlers("Read")


@pytest.mark.parametrize(
    ("matcher", "problem"),
    [
        ("@exec", 'unknown tool kind "@exec"'),
        ("@executes", 'did you mean "@execute"?'),
        ("Bash.*|@edit", "not in a regular expression"),
    ],
)
def test_a_bad_kind_is_a_settings_error(matcher: str, problem: str) -> None:
    data = {
        "hooks": {
            "PostToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": "x"}]}]
        }
    }
    with pytest.raises(SettingsError, match=r"hooks\.PostToolUse\[0\]\.matcher") as raised:
        _settings(data)
    assert problem in str(raised.value)


# -- a run: the observers and the native relay -------------------------------------


def _observer(tmp_path: Path) -> str:
    script = tmp_path / "observe.py"
    script.write_text(
        "import json, sys\n"
        "event = json.load(sys.stdin)\n"
        f"open({str(tmp_path / 'observed.jsonl')!r}, 'a').write(json.dumps(event) + '\\n')\n"
    )
    return f"{sys.executable} {script}"


def test_an_execute_observer_sees_the_shell_tool_only(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    handler = {"type": "command", "command": _observer(tmp_path)}
    settings.write_text(
        json.dumps(
            {
                "hooks": {"PostToolUse": [{"matcher": "@execute", "hooks": [handler]}]},
                "observers": {"drainTimeout": 60},
            }
        )
    )
    steps: list[dict[str, Any]] = [
        {
            "assistant": {
                "text": "Reading, then testing.",
                "toolCalls": [
                    {"name": "read", "arguments": {"path": "a.py"}},
                    {"name": "bash", "arguments": {"command": "pytest -q"}},
                ],
            }
        },
        {"tool": {"name": "read", "duration": 0.05, "result": "code"}},
        {"tool": {"name": "bash", "duration": 0.05, "result": "1 passed"}},
        {"assistant": {"text": "Done.", "stopReason": "stop"}},
        *END,
    ]
    run = run_wrapper(tmp_path, steps, options=["--settings", str(settings)])
    assert run.returncode == 0, run.stderr
    observed = [json.loads(line) for line in (tmp_path / "observed.jsonl").read_text().splitlines()]
    assert [event["tool_name"] for event in observed] == ["bash"]


def test_the_relay_applies_a_kind_matcher_for_the_agent(tmp_path: Path) -> None:
    """What pi's extension and Claude Code's hooks run: the relay, told the
    agent, takes ``@execute`` for the agent's shell tool and no other."""
    deny = tmp_path / "deny.py"
    deny.write_text("import sys\nprint('no shell', file=sys.stderr)\nsys.exit(2)\n")
    settings = tmp_path / "settings.json"
    handler = {"type": "command", "command": f"{sys.executable} {deny}"}
    settings.write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "@execute", "hooks": [handler]}]}})
    )

    def relay(agent: str, handler_args: list[str], tool: str) -> str:
        argv = [sys.executable, "-m", "wrapper", "hook-relay", "--agent", agent]
        argv += ["--handler", *handler_args, "--settings", str(settings)]
        payload = {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": {}}
        done = subprocess.run(
            argv,
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=HANG_LIMIT,
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    whole = ["*", "*", "PreToolUse"]
    assert '"permissionDecision":"deny"' in relay("pi", whole, "bash")
    assert relay("pi", whole, "read") == ""
    one = ["0", "0", "hooks.PreToolUse[0].hooks[0]"]
    assert '"permissionDecision":"deny"' in relay("claude", one, "Bash")
    assert relay("claude", one, "Read") == ""


def test_claude_is_given_no_matcher_it_cannot_read(tmp_path: Path) -> None:
    from wrapper.hooks.native import agent_settings

    settings = _settings(
        {
            "hooks": {
                "PreToolUse": [
                    {"matcher": "@execute", "hooks": [{"type": "command", "command": "x"}]},
                    {"matcher": "Edit", "hooks": [{"type": "command", "command": "y"}]},
                ]
            }
        }
    )
    merged = agent_settings({}, settings, "agent-wrapper", ["/s.json"], "claude")
    first, second = merged["hooks"]["PreToolUse"]
    assert "matcher" not in first, "Claude runs it for every tool; the relay applies @execute"
    assert "--agent claude" in first["hooks"][0]["command"]
    assert second["matcher"] == "Edit"


def test_hook_test_reports_the_kind_and_matches_on_it(tmp_path: Path) -> None:
    deny = tmp_path / "deny.py"
    deny.write_text("import sys\nprint('no shell', file=sys.stderr)\nsys.exit(2)\n")
    settings = tmp_path / "settings.json"
    handler = {"type": "command", "command": f"{sys.executable} {deny}"}
    settings.write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "@execute", "hooks": [handler]}]}})
    )
    event = tmp_path / "event.json"

    def hook_test(tool: str, *agent: str) -> tuple[int, dict[str, Any]]:
        event.write_text(json.dumps({"hook_event_name": "PreToolUse", "tool_name": tool}))
        argv = [sys.executable, "-m", "wrapper", "hook-test", "--settings", str(settings)]
        argv += ["--event", str(event), *agent]
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=HANG_LIMIT, cwd=tmp_path, check=False
        )
        return done.returncode, json.loads(done.stdout) if done.stdout else {}

    code, report = hook_test("run_shell_command", "--agent", "gemini")
    assert (code, report["toolKind"], report["decision"]) == (1, "execute", "block")
    code, report = hook_test("Bash")
    assert (code, report["toolKind"]) == (1, "execute")
    code, report = hook_test("read_file", "--agent", "gemini")
    assert (code, report["toolKind"], report["decision"]) == (0, "read", "allow")
    code, _ = hook_test("Bash", "--agent", "nope")
    assert code == 2


def test_hook_test_never_says_it_ignores_the_pre_tool_use_handlers_it_runs(
    tmp_path: Path,
) -> None:
    settings = tmp_path / "settings.json"
    deny = "import sys; print('no shell', file=sys.stderr); sys.exit(2)"
    handler = {"type": "command", "args": [sys.executable, "-c", deny]}
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [handler]}]}}))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash"}))
    argv = [sys.executable, "-m", "wrapper", "hook-test", "--settings", str(settings)]
    done = subprocess.run(
        [*argv, "--event", str(event)],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["decision"] == "block"
    assert "NOT ENFORCED" not in done.stderr
    assert "ignored" not in done.stderr


def test_hook_test_gives_a_prompt_its_source(tmp_path: Path) -> None:
    log = tmp_path / "input.json"
    script = tmp_path / "log.py"
    script.write_text(f"import sys\nopen({str(log)!r}, 'w').write(sys.stdin.read())\n")
    settings = tmp_path / "settings.json"
    handler = {"type": "command", "command": f"{sys.executable} {script}"}
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [handler]}]}}))
    event = tmp_path / "event.json"

    def hook_test(payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        event.write_text(json.dumps({"hook_event_name": "UserPromptSubmit", **payload}))
        argv = [sys.executable, "-m", "wrapper", "hook-test", "--settings", str(settings)]
        return subprocess.run(
            [*argv, "--event", str(event)],
            capture_output=True,
            text=True,
            timeout=HANG_LIMIT,
            cwd=tmp_path,
            check=False,
        )

    assert hook_test({"prompt": "Fix it"}).returncode == 0
    assert json.loads(log.read_text())["source"] == "task"
    assert hook_test({"prompt": "Go on", "source": "reply"}).returncode == 0
    assert json.loads(log.read_text())["source"] == "reply"
    bad = hook_test({"prompt": "Go on", "source": "email"})
    assert bad.returncode == 2
    assert "source: expected one of task, stop_hook, steer, follow_up, reply" in bad.stderr


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_each_agents_page_lists_its_tool_kinds(dialect: str) -> None:
    page = (ROOT / "docs" / "dialects" / f"{dialect}.md").read_text()
    table = DIALECTS[dialect].tool_kinds
    assert table, f"{dialect} maps none of its tools to a kind"
    for tool, kind in table.items():
        assert f"| `{tool}` | `@{kind}` |" in page, (dialect, tool)


def test_an_execute_deny_holds_over_acp(tmp_path: Path) -> None:
    from tests.test_acp_e2e import (
        DENY,
        HANG,
        TOOL_RUN,
        permission_answers,
        pre_tool_use_settings,
        start,
    )

    settings = pre_tool_use_settings(tmp_path, DENY, matcher="@execute")
    proc = start(tmp_path, TOOL_RUN, "--task", "Fix", "--settings", str(settings))
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert permission_answers(tmp_path) == [{"outcome": "selected", "optionId": "cancel"}]
