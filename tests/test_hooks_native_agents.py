"""PreToolUse handlers handed to opencode (a plugin named in its
configuration from the environment) and Codex (``-c`` hooks, trusted with
``-c``): what each agent is given, the user's own configuration merged and
never written, and the relay's answer in Codex's terms. The real CLIs'
enforcement is in tests/real/test_conformance_hooks.py."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HANG_LIMIT, ROOT, agent_env, read_result, write_scenario
from tests.test_hooks import answer, hook_script, records
from wrapper.commands.normalize import normalize
from wrapper.core.events import Compaction
from wrapper.core.framing import DEFAULT_MAX_LINE_BYTES
from wrapper.core.settings import Settings
from wrapper.dialects.claude import ClaudeDialect
from wrapper.dialects.codex import CodexDialect
from wrapper.dialects.opencode import OpencodeDialect
from wrapper.files.settings_file import load_settings
from wrapper.hooks.native import pi_extension
from wrapper.hooks.native_agents import codex_answer, codex_trust_hash, opencode_plugin

FAKE = ROOT / "fixtures" / "fake_agent"


def deny_shell(tmp_path: Path, matcher: str = "@execute") -> Path:
    script = hook_script(tmp_path, "deny.py", "print('no shell', file=sys.stderr)\nsys.exit(2)\n")
    hook = {"type": "command", "command": script}
    path = tmp_path / "wrapper-settings.json"
    path.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [hook]}]}}))
    return path


def run(
    tmp_path: Path, command: list[str], settings: Path, **env: str
) -> subprocess.CompletedProcess[bytes]:
    scenario = write_scenario(tmp_path, answer("Done."))
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet"]
    argv += ["--run-dir", str(tmp_path / "run"), "--settings", str(settings)]
    argv += ["--task", "Fix it", "--", *command, "--scenario", str(scenario)]
    return subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path, **env),
        cwd=tmp_path,
        check=False,
    )


def no_not_enforced(tmp_path: Path, proc: subprocess.CompletedProcess[bytes]) -> None:
    assert b"NOT ENFORCED" not in proc.stderr, proc.stderr.decode()
    result = read_result(tmp_path / "run" / "result.json")
    assert not any("NOT ENFORCED" in w["message"] for w in result["warnings"])


# -- opencode: a plugin ---------------------------------------------------------------------


def test_opencode_run_gets_a_plugin_that_relays_each_tool_call(tmp_path: Path) -> None:
    proc = run(tmp_path, [str(FAKE / "opencode"), "run", "--format", "json"], deny_shell(tmp_path))
    assert proc.returncode == 0, proc.stderr.decode()
    no_not_enforced(tmp_path, proc)
    (started,) = records(tmp_path)
    assert started["prompt"] == "Fix it"
    plugin = tmp_path / "run" / "hooks" / "opencode-plugin.mjs"
    config = json.loads(started["env"]["OPENCODE_CONFIG_CONTENT"])
    assert config == {"plugin": [plugin.as_uri()]}
    text = plugin.read_text()
    assert '"tool.execute.before"' in text
    assert "throw new Error(specific.permissionDecisionReason" in text
    assert (
        '"hook-relay","--agent","opencode","--handler","*","*","PreToolUse","--settings",' in text
    )


def test_opencodes_own_config_content_is_merged_and_its_plugins_kept(tmp_path: Path) -> None:
    own = {"model": "mine/model", "plugin": ["opencode-foo@1.2.3"]}
    proc = run(
        tmp_path,
        [str(FAKE / "opencode"), "run", "--format", "json"],
        deny_shell(tmp_path),
        OPENCODE_CONFIG_CONTENT=json.dumps(own),
    )
    assert proc.returncode == 0, proc.stderr.decode()
    (started,) = records(tmp_path)
    plugin = (tmp_path / "run" / "hooks" / "opencode-plugin.mjs").as_uri()
    config = json.loads(started["env"]["OPENCODE_CONFIG_CONTENT"])
    assert config == {"model": "mine/model", "plugin": ["opencode-foo@1.2.3", plugin]}


def test_opencode_config_content_that_is_not_json_is_a_usage_error(tmp_path: Path) -> None:
    proc = run(
        tmp_path,
        [str(FAKE / "opencode"), "run", "--format", "json"],
        deny_shell(tmp_path),
        OPENCODE_CONFIG_CONTENT='{"model": "x", // mine\n}',
    )
    assert proc.returncode == 2
    assert b"OPENCODE_CONFIG_CONTENT is not JSON" in proc.stderr
    assert b"write it as plain JSON" in proc.stderr
    assert records(tmp_path) == [], "nothing was started"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("[]", b"OPENCODE_CONFIG_CONTENT is JSON but not an object (a list); opencode reads"),
        ("null", b"OPENCODE_CONFIG_CONTENT is JSON but not an object (null)"),
        (
            '{"plugin": "opencode-foo"}',
            b'OPENCODE_CONFIG_CONTENT: "plugin" is a string, not a list: opencode takes a list',
        ),
        ('{"temperature": NaN}', b"OPENCODE_CONFIG_CONTENT is not JSON (NaN is not JSON)"),
    ],
)
def test_opencode_config_content_the_plugin_cannot_join_says_why(
    tmp_path: Path, content: str, said: bytes
) -> None:
    proc = run(
        tmp_path,
        [str(FAKE / "opencode"), "run", "--format", "json"],
        deny_shell(tmp_path),
        OPENCODE_CONFIG_CONTENT=content,
    )
    assert proc.returncode == 2
    assert said in proc.stderr, proc.stderr.decode()
    assert records(tmp_path) == [], "nothing was started"


def test_opencode_config_content_too_long_with_the_plugin_is_a_usage_error(
    tmp_path: Path,
) -> None:
    # Short enough for the wrapper's own environment, too long for one
    # variable once the plugin is added: the agent could not be started.
    own = json.dumps({"instructions": ["x" * 130_990]})
    proc = run(
        tmp_path,
        [str(FAKE / "opencode"), "run", "--format", "json"],
        deny_shell(tmp_path),
        OPENCODE_CONFIG_CONTENT=own,
    )
    assert proc.returncode == 2, proc.stderr.decode()
    assert b"more than the system takes in one variable (131,072)" in proc.stderr
    assert b"name the file in OPENCODE_CONFIG" in proc.stderr
    assert records(tmp_path) == [], "nothing was started"


def test_opencode_without_pre_tool_use_handlers_gets_nothing(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("{}")
    proc = run(tmp_path, [str(FAKE / "opencode"), "run", "--format", "json"], path)
    assert proc.returncode == 0, proc.stderr.decode()
    (started,) = records(tmp_path)
    assert "OPENCODE_CONFIG_CONTENT" not in started["env"]
    assert not (tmp_path / "run" / "hooks").exists()


def with_env_reporting_stop_handler(tmp_path: Path) -> tuple[Path, Path]:
    """Settings with a PreToolUse handler (so opencode gets the plugin) and
    a Stop handler that writes down the opencode configuration it was given."""
    seen = tmp_path / "stop-env.json"
    body = (
        f"json.dump({{'config': os.environ.get('OPENCODE_CONFIG_CONTENT'),\n"
        f"    'saved': os.environ.get('AGENT_WRAPPER_USER_ENV')}}, open({str(seen)!r}, 'w'))\n"
    )
    stop = {"type": "command", "command": hook_script(tmp_path, "stop.py", body)}
    settings = json.loads(deny_shell(tmp_path).read_text())
    settings["hooks"]["Stop"] = [{"hooks": [stop]}]
    path = tmp_path / "wrapper-settings.json"
    path.write_text(json.dumps(settings))
    return path, seen


@pytest.mark.parametrize("own", [None, '{"model": "mine/model"}'])
def test_hook_handlers_never_get_the_runs_opencode_plugin(tmp_path: Path, own: str | None) -> None:
    # A handler that starts opencode (a verifier, a nested run) must not load
    # this run's plugin: it gets the user's own configuration, or none.
    settings, seen = with_env_reporting_stop_handler(tmp_path)
    env = {"OPENCODE_CONFIG_CONTENT": own} if own is not None else {}
    proc = run(tmp_path, [str(FAKE / "opencode"), "run", "--format", "json"], settings, **env)
    assert proc.returncode == 0, proc.stderr.decode()
    (started,) = records(tmp_path)
    assert "opencode-plugin.mjs" in started["env"]["OPENCODE_CONFIG_CONTENT"], "the agent has it"
    assert json.loads(seen.read_text()) == {"config": own, "saved": None}


@pytest.mark.parametrize("own", [None, '{"model": "mine/model"}'])
def test_the_relay_runs_handlers_without_the_runs_opencode_plugin(
    tmp_path: Path, own: str | None
) -> None:
    seen = tmp_path / "seen.json"
    body = f"json.dump(os.environ.get('OPENCODE_CONFIG_CONTENT'), open({str(seen)!r}, 'w'))\n"
    merged = '{"model": "mine/model", "plugin": ["file:///run/hooks/opencode-plugin.mjs"]}'
    saved = json.dumps({"OPENCODE_CONFIG_CONTENT": own})
    event = {"hook_event_name": "PreToolUse", "tool_name": "bash", "tool_input": {}}
    done = relay(
        tmp_path,
        body,
        "opencode",
        event,
        OPENCODE_CONFIG_CONTENT=merged,
        AGENT_WRAPPER_USER_ENV=saved,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(seen.read_text()) == own


# -- Codex: -c hooks, trusted -----------------------------------------------------------------


def config_words(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == "-c"]


def test_codex_exec_gets_a_trusted_hook_on_its_command_line(tmp_path: Path) -> None:
    proc = run(tmp_path, [str(FAKE / "codex"), "exec", "--json"], deny_shell(tmp_path))
    assert proc.returncode == 0, proc.stderr.decode()
    no_not_enforced(tmp_path, proc)
    (started,) = records(tmp_path)
    assert started["prompt"] == "Fix it"
    feature, hooks, state = config_words(started["argv"])
    # A config.toml that turns Codex's hooks off would skip the run's hook.
    assert feature == "features.hooks=true"
    assert hooks.startswith('hooks.PreToolUse=[{matcher = "", hooks = [{type = "command", ')
    command = hooks.split('command = "', 1)[1].split('", timeout = ', 1)[0]
    assert " hook-relay --agent codex --handler '*' '*' PreToolUse --settings " in command
    timeout = int(hooks.rsplit("timeout = ", 1)[1].split("}", 1)[0])
    assert timeout == 60 + 10, "the handler's limit and the relay's margin"
    trust = codex_trust_hash("pre_tool_use", "", command.replace('\\"', '"'), timeout)
    assert state == (
        'hooks.state={"/<session-flags>/config.toml:pre_tool_use:0:0" = '
        f'{{trusted_hash = "{trust}"}}}}'
    )
    assert not (tmp_path / "run" / "hooks").exists(), "no file: nothing of Codex's is written"


def test_the_trust_hash_is_the_one_codex_computes() -> None:
    # A hook given with -c that Codex 0.169.0 ran with this hash as its trust
    # (and did not run without it).
    command = "python3 /tmp/h-native-exp/codex_hook.py"
    assert codex_trust_hash("pre_tool_use", "", command, 30) == (
        "sha256:4a87a8581ee66955b4ea90172919850514fe450e5b77d3e10b2e8df42b86cf0c"
    )


def test_only_codex_exec_takes_the_hook() -> None:
    # The app-server asks the wrapper before a command runs (its approvals).
    dialect = CodexDialect()
    assert dialect.takes_native_hooks(["codex", "exec", "--json"])
    assert dialect.takes_native_hooks(["npx", "@openai/codex", "exec", "--json"])
    assert not dialect.takes_native_hooks(["codex", "app-server"])
    assert not OpencodeDialect().takes_native_hooks(["opencode", "acp"])
    assert OpencodeDialect().takes_native_hooks(["opencode", "run", "--format", "json"])


@pytest.mark.parametrize(
    ("own", "key"),
    [
        (
            ["-c", 'hooks.PreToolUse=[{hooks=[{type="command", command="true"}]}]'],
            "hooks.PreToolUse",
        ),
        (["-c", 'hooks.state={"k" = {trusted_hash = "sha256:0"}}'], "hooks.state"),
        # Every spelling Codex takes: joined to -c, --config with = or not, a quoted key.
        (['-chooks.PreToolUse=[{hooks=[{type="command", command="true"}]}]'], "hooks.PreToolUse"),
        (["--config", "hooks.state={}"], "hooks.state"),
        (["--config=hooks.PreToolUse=[]"], "hooks.PreToolUse"),
        (["-c=hooks.state={}"], "hooks.state"),
        (["-c", '"hooks" . "state"={}'], "hooks.state"),
    ],
)
def test_codex_pre_tool_use_hooks_of_the_users_on_command_are_a_usage_error(
    tmp_path: Path, own: list[str], key: str
) -> None:
    proc = run(tmp_path, [str(FAKE / "codex"), "exec", "--json", *own], deny_shell(tmp_path))
    assert proc.returncode == 2
    assert f"COMMAND's -c {key} sets what the wrapper sets".encode() in proc.stderr
    assert records(tmp_path) == []


@pytest.mark.parametrize(
    "own",
    [
        ["--disable", "hooks"],
        ["--disable=hooks"],
        ["-c", "features.hooks=false"],
        ["-cfeatures.hooks=false"],
        ["-c=features.hooks=false"],
        ["--config=features={hooks=false}"],
    ],
)
def test_a_command_turning_codex_hooks_off_is_a_usage_error(tmp_path: Path, own: list[str]) -> None:
    # Codex 0.169.0 then skips the run's hook and runs every tool unchecked.
    proc = run(tmp_path, [str(FAKE / "codex"), "exec", "--json", *own], deny_shell(tmp_path))
    assert proc.returncode == 2, proc.stderr.decode()
    assert b"COMMAND turns Codex's hooks feature off" in proc.stderr
    assert b"drop it" in proc.stderr
    assert records(tmp_path) == []


def test_a_command_turning_codex_hooks_on_runs(tmp_path: Path) -> None:
    command = [str(FAKE / "codex"), "exec", "--json", "--enable", "hooks"]
    proc = run(tmp_path, [*command, "-c", "features.hooks=true"], deny_shell(tmp_path))
    assert proc.returncode == 0, proc.stderr.decode()


def relay(
    tmp_path: Path,
    body: str,
    agent: str = "codex",
    event: dict[str, Any] | None = None,
    matcher: str = "@execute",
    **env: str,
) -> subprocess.CompletedProcess[bytes]:
    script = hook_script(tmp_path, "handler.py", body)
    path = tmp_path / "s.json"
    hook = {"type": "command", "command": script}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [hook]}]}}))
    argv = [sys.executable, "-m", "wrapper", "hook-relay", "--agent", agent]
    argv += ["--handler", "*", "*", "PreToolUse", "--settings", str(path)]
    event = event or {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}
    return subprocess.run(
        argv,
        input=json.dumps(event).encode(),
        capture_output=True,
        env={**os.environ, "AGENT_WRAPPER_RUN_DIR": str(tmp_path / "run"), **env},
        cwd=ROOT,
        timeout=HANG_LIMIT,
        check=False,
    )


def specific(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any] | None:
    assert proc.returncode == 0, proc.stderr.decode()
    if not proc.stdout.strip():
        return None
    found: dict[str, Any] = json.loads(proc.stdout)["hookSpecificOutput"]
    return found


def test_the_relay_answers_codex_only_what_it_takes(tmp_path: Path) -> None:
    # Codex's shell tool is Bash, an @execute; a refusal is a deny with its reason.
    denied = relay(tmp_path, "print('no shell', file=sys.stderr)\nsys.exit(2)\n")
    assert specific(denied) == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "no shell",
    }
    # Codex takes no continue:false: the tool is denied with the handler's reason.
    ended = relay(tmp_path, "print(json.dumps({'continue': False, 'stopReason': 'stop now'}))\n")
    assert specific(ended) == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "stop now",
    }
    # Nor "ask" (0.169.0 ran a command its hook answered ask): it is a deny.
    ask = {"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "ask"}}
    asked = relay(tmp_path, f"print(json.dumps({ask!r}))\n")
    assert specific(asked) == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "ask",
    }
    # Nor "allow": Codex decides as without the hook.
    allow = {"hookSpecificOutput": {"permissionDecision": "allow"}}
    assert specific(relay(tmp_path, f"print(json.dumps({allow!r}))\n")) is None


REWRITE = (
    "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',"
    " 'permissionDecision': 'allow', 'updatedInput': {'command': 'echo safe'}}}))\n"
)


def native_records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "run" / "hooks" / "native-decisions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_relay_gives_opencode_a_rewritten_input(tmp_path: Path) -> None:
    # opencode runs a tool with the args object its plugins' tool.execute.before
    # left, so a rewritten input is passed on and recorded as applied.
    event = {"hook_event_name": "PreToolUse", "tool_name": "bash", "tool_input": {"command": "x"}}
    said = specific(relay(tmp_path, REWRITE, "opencode", event))
    assert said == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": {"command": "echo safe"},
    }
    (decided,) = native_records(tmp_path)
    assert (decided["decision"], decided["updatedInput"]) == ("allow", "applied")
    assert decided["reason"] == "the tool's input was rewritten"


def test_opencodes_mcp_resource_tools_refuse_a_rewritten_input(tmp_path: Path) -> None:
    # These read their arguments before the plugins run: a rewrite would not hold.
    event = {
        "hook_event_name": "PreToolUse",
        "tool_name": "read_mcp_resource",
        "tool_input": {"server": "s", "uri": "u"},
    }
    body = REWRITE.replace("'command': 'echo safe'", "'server': 's', 'uri': 'v'")
    done = relay(tmp_path, body, "opencode", event, matcher="")
    said = specific(done)
    assert said is not None
    assert said["permissionDecision"] == "deny"
    assert "cannot be applied here" in said["permissionDecisionReason"]
    (decided,) = native_records(tmp_path)
    assert (decided["decision"], decided["updatedInput"]) == ("block", "refused")


def test_opencodes_plugin_changes_the_calls_args_in_place() -> None:
    # opencode calls the tool with the object it handed the plugin as output.args:
    # a new object assigned to output.args would be lost.
    text = opencode_plugin(Settings(), "/bin/agent-wrapper", ["/s.json"])
    assert "for (const key of Object.keys(output.args)) delete output.args[key];" in text
    assert "Object.assign(output.args, updated);" in text


# -- what the real CLIs' streams say of a denied tool ----------------------------------------

CAPTURES = ROOT / "tests" / "data" / "real" / "hooks"


def events_of(dialect: str, capture: str) -> list[dict[str, Any]]:
    out = io.BytesIO()
    with (CAPTURES / capture).open("rb") as source:
        normalize(source, out, dialect_name=dialect, max_line_bytes=DEFAULT_MAX_LINE_BYTES)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_claudes_compaction_ends_with_the_summary_message_after_it() -> None:
    # Claude Code 2.1.332, /compact: the boundary, then the message the
    # session goes on from, which frames the summary (PostCompact's).
    dialect = ClaudeDialect()
    lines = (CAPTURES / "claude-2.1.332-compact.jsonl").read_bytes().splitlines()
    events = [e for line in lines for e in dialect.parse(line)]
    events += dialect.on_exit(0, None)
    (ended,) = [e for e in events if isinstance(e, Compaction)]
    assert (ended.phase, ended.reason) == ("end", "manual")
    assert ended.summary is not None
    assert ended.summary.startswith("This session is being continued")
    assert "\nunknown scenario text\n" in ended.summary


def test_a_compaction_without_a_summary_message_still_ends() -> None:
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "compact_metadata": {"trigger": "auto", "pre_tokens": 10},
    }
    other = {"type": "user", "message": {"role": "user", "content": "not synthetic"}}
    for after in ([other], []):
        dialect = ClaudeDialect()
        events = dialect.parse(json.dumps(boundary).encode())
        for obj in after:
            events += dialect.parse(json.dumps(obj).encode())
        events += dialect.on_exit(0, None)
        (ended,) = [e for e in events if isinstance(e, Compaction)]
        assert (ended.phase, ended.reason, ended.summary) == ("end", "auto", None)


def test_opencode_reports_the_denied_tool_as_failed() -> None:
    # opencode 1.18.33, the tier's tool scenario, its bash call denied by the plugin.
    events = events_of("opencode", "opencode-1.18.33-pretooluse-deny.jsonl")
    (ended,) = [e for e in events if e["type"] == "tool_end"]
    assert (ended["tool"], ended["isError"]) == ("bash", True)
    assert [e["stopReason"] for e in events if e["type"] == "assistant_message"][-1] == "stop"


def test_codex_reports_no_item_for_a_denied_command() -> None:
    # Codex 0.169.0, the same: the command its hook denied is not in the stream at all.
    events = events_of("codex", "codex-0.169.0-pretooluse-deny.jsonl")
    assert not [e for e in events if e["type"] in ("tool_start", "tool_end")]
    assert [e["stopReason"] for e in events if e["type"] == "assistant_message"][-1] == "stop"


def test_codex_is_never_answered_what_it_would_reject() -> None:
    # Codex 0.169.0 fails a hook whose answer it cannot read: a changed input
    # is left out (the run warns it was not applied), a context kept.
    answer = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"command": "true"},
            "additionalContext": "see the policy",
        }
    }
    assert codex_answer(answer) == {
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "see the policy"}
    }
    assert codex_answer(None) is None


def test_opencodes_plugin_names_odd_settings_paths_as_they_are(tmp_path: Path) -> None:
    # A directory name with quotes, a backslash, a template's own markers and
    # JavaScript's: the relay is given the file's path unchanged, never code.
    odd = tmp_path / 'it\'s "q" \\ ${x} `y` $LIMIT_MS $RELAY é\u2028'
    odd.mkdir()
    settings = odd / "settings.json"
    hook = {"type": "command", "args": [sys.executable, "-c", "import sys; sys.exit(2)"]}
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    proc = run(tmp_path, [str(FAKE / "opencode"), "run", "--format", "json"], settings)
    assert proc.returncode == 0, proc.stderr.decode()
    text = (tmp_path / "run" / "hooks" / "opencode-plugin.mjs").read_text()
    (line,) = [line for line in text.split("\n") if line.startswith("const RELAY = ")]
    relay = json.loads(line.removeprefix("const RELAY = ").removesuffix(";"))
    assert relay[-2:] == ["--settings", str(settings)]
    assert "{ timeout: 70000, maxBuffer" in text
    node = shutil.which("node")
    if node is not None:  # opencode's runtime parses it as written
        plugin = tmp_path / "run" / "hooks" / "opencode-plugin.mjs"
        subprocess.run([node, "--check", str(plugin)], check=True, timeout=HANG_LIMIT)


# -- pi's extension and opencode's plugin, run by node as the agents run them -----------------

#: Loads the script as its agent does and calls its hook for one bash call.
RUN_SCRIPT = """\
import { pathToFileURL } from "node:url";
const [kind, path] = process.argv.slice(2);
const mod = await import(pathToFileURL(path).href);
let call;
if (kind === "opencode") {
  const hooks = await mod.default({ directory: process.cwd() });
  const input = { tool: "bash", sessionID: "s", callID: "c" };
  call = () => hooks["tool.execute.before"](input, { args: { command: "ls" } });
} else {
  let listener;
  mod.default({ on: (_name, fn) => { listener = fn; } });
  call = async () => {
    const answer = await listener({ toolName: "bash", input: { command: "ls" }, toolCallId: "c" });
    if (answer && answer.block) throw new Error(answer.reason);
  };
}
try {
  await call();
  console.log("RAN");
} catch (error) {
  console.log("REFUSED: " + error.message);
}
"""


def run_relay_script(
    tmp_path: Path, kind: str, handler_body: str, relay: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``kind``'s script run by node for one bash call, relaying to a
    handler running ``handler_body``; ``relay``: a shell script standing
    for the wrapper instead."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node (the agents' runtime) is not installed")
    settings = tmp_path / "settings.json"
    hook = {"type": "command", "args": [sys.executable, "-c", handler_body]}
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    launcher = tmp_path / "agent-wrapper"
    launcher.write_text(relay or f'#!/bin/sh\nexec "{sys.executable}" -m wrapper "$@"\n')
    launcher.chmod(0o755)
    loaded = load_settings([str(settings)])
    if kind == "opencode":
        text = opencode_plugin(loaded, str(launcher), [str(settings)])
    else:
        text = pi_extension(loaded, str(launcher), [str(settings)])
    script = tmp_path / f"{kind}.mjs"
    script.write_text(text)
    runner = tmp_path / "run.mjs"
    runner.write_text(RUN_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGENT_WRAPPER_RUN_DIR": str(tmp_path / "run")}
    return subprocess.run(
        [node, str(runner), kind, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=HANG_LIMIT,
        check=False,
    )


@pytest.mark.parametrize("kind", ["opencode", "pi"])
def test_a_long_refusal_is_still_a_refusal(tmp_path: Path, kind: str) -> None:
    # A deny as long as a handler may print, the relay's own keys on top:
    # the answer is over a MiB, and reading it must not fail the gate open.
    body = (
        "import json, sys\n"
        "def answer(n):\n"
        "    out = {'permissionDecision': 'deny', 'permissionDecisionReason': 'No shell.',\n"
        "           'additionalContext': 'y' * n}\n"
        "    return json.dumps({'hookSpecificOutput': out})\n"
        "n = 1024 * 1024 - 1 - len(answer(0))\n"
        "print(answer(n))\n"
    )
    proc = run_relay_script(tmp_path, kind, body)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "REFUSED: No shell.", proc.stderr


@pytest.mark.parametrize("kind", ["opencode", "pi"])
def test_a_relay_that_fails_lets_the_tool_run_and_says_so(tmp_path: Path, kind: str) -> None:
    broken = "#!/bin/sh\necho 'cannot start' >&2\nexit 3\n"
    proc = run_relay_script(tmp_path, kind, "print('no')", relay=broken)
    assert proc.stdout.strip() == "RAN", proc.stderr
    assert proc.stderr == (
        "agent-wrapper: the PreToolUse relay failed (exit status 3: cannot start); the tool runs\n"
    )


def test_pis_extension_names_odd_settings_paths_as_they_are(tmp_path: Path) -> None:
    odd = tmp_path / 'it\'s "q" \\ ${x} `y` $LIMIT_MS $MAX_BUFFER $RELAY é'
    odd.mkdir()
    settings = odd / "settings.json"
    hook = {"type": "command", "args": [sys.executable, "-c", "import sys; sys.exit(2)"]}
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    text = pi_extension(load_settings([str(settings)]), "agent-wrapper", [str(settings)])
    (line,) = [line for line in text.split("\n") if line.startswith("const RELAY = ")]
    relay = json.loads(line.removeprefix("const RELAY = ").removesuffix(";"))
    assert relay[-2:] == ["--settings", str(settings)]
