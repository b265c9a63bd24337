"""The events a run observes beside the stream's tools (``PostCompact``,
``PermissionDenied``, ``Notification``), a PreToolUse handler's rewritten
input (``updatedInput``: applied by Claude Code, pi and opencode, refused elsewhere)
and the ``budget_resume`` prompt, as a user sees them: the handlers' input,
the agent's answer, the run's warnings and a person's reply."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HANG_LIMIT, ROOT, agent_env, read_events, write_scenario
from tests.test_budget_pause import THOUSAND, start_capped
from tests.test_cost_runs import working
from tests.test_hooks import answer, run_with
from tests.test_policies import cli, finish, records, wait_for_question
from tests.test_prompt_hooks import gate, prompt_inputs
from wrapper.core.events import HookDecision, WarningEvent
from wrapper.core.settings import Settings, merge_settings
from wrapper.hooks.native import RECORDS, NativeRecords, pi_extension

pytestmark = pytest.mark.usefixtures("no_leaks")

FAKE_CLAUDE = ROOT / "fixtures" / "fake_agent" / "claude"


def settings_of(data: dict[str, Any]) -> Settings:
    return merge_settings(["settings.json"], lambda _: data)


def logger(tmp_path: Path, name: str) -> tuple[dict[str, Any], Path]:
    """A handler that appends its input to ``name``.jsonl; returns it and the log."""
    log = tmp_path / f"{name}.jsonl"
    script = tmp_path / f"{name}.py"
    script.write_text(
        "import json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(json.load(sys.stdin)) + '\\n')\n"
    )
    return {"type": "command", "command": f"{sys.executable} {script}"}, log


def logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def answering(tmp_path: Path, name: str, reply: dict[str, Any]) -> dict[str, Any]:
    """A PreToolUse handler that answers ``reply``."""
    script = tmp_path / f"{name}.py"
    script.write_text(f"import json, sys\njson.load(sys.stdin)\nprint(json.dumps({reply!r}))\n")
    return {"type": "command", "command": f"{sys.executable} {script}"}


REWRITE = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": {"command": "echo safe"},
    }
}


def run_claude(
    tmp_path: Path, settings: dict[str, Any], steps: list[dict[str, Any]]
) -> tuple[subprocess.CompletedProcess[bytes], Path]:
    """A run of the fake Claude Code (stream-json) with ``settings``."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    scenario = write_scenario(tmp_path, steps)
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "quiet", "--run-dir", str(run_dir)]
    argv += ["--settings", str(path), "--task", "Fix it", "--", str(FAKE_CLAUDE), "-p"]
    argv += ["--output-format", "stream-json", "--verbose", "--scenario", str(scenario)]
    proc = subprocess.run(
        argv,
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return proc, run_dir


# -- PostCompact ------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["pi", "claude"])
def test_post_compact_runs_when_the_stream_says_a_compaction_ended(
    agent: str, tmp_path: Path
) -> None:
    auto, log = logger(tmp_path, "post-compact")
    manual, never = logger(tmp_path, "manual-only")
    settings = {
        "hooks": {
            "PostCompact": [
                {"matcher": "auto", "hooks": [auto]},
                {"matcher": "manual", "hooks": [manual]},
            ]
        },
        "observers": {"drainTimeout": 60},
    }
    steps = [{"compaction": {"reason": "threshold"}}, *answer("Done.")]
    if agent == "pi":
        assert run_with(tmp_path, settings, steps).returncode == 0
    else:
        proc, _ = run_claude(tmp_path, settings, steps)
        assert proc.returncode == 0, proc.stderr.decode()
    (seen,) = logged(log)
    assert (seen["hook_event_name"], seen["trigger"]) == ("PostCompact", "auto")
    # pi's compaction_end carries the summary; Claude Code's message after
    # its compact_boundary frames it.
    if agent == "pi":
        assert seen["compact_summary"] == "Summary of the earlier conversation."
    else:
        assert seen["compact_summary"].startswith("This session is being continued")
        assert "\n\nSummary of the earlier conversation.\n\n" in seen["compact_summary"]
    assert seen["run_id"], "the wrapper's fields, as the other events have them"
    assert logged(never) == [], "a matcher selects the trigger"


def test_a_long_compaction_summary_is_cut_as_a_tool_response_is(tmp_path: Path) -> None:
    auto, log = logger(tmp_path, "post-compact")
    settings = {"hooks": {"PostCompact": [{"hooks": [auto]}]}, "observers": {"drainTimeout": 60}}
    summary = "\x1b[1mbold\x1b[0m " + "x" * 5000
    steps = [{"compaction": {"reason": "threshold", "summary": summary}}, *answer("Done.")]
    assert run_with(tmp_path, settings, steps).returncode == 0
    (seen,) = logged(log)
    assert seen["compact_summary"].startswith("bold xxx")
    assert seen["compact_summary"].endswith(" more characters]")
    assert len(seen["compact_summary"]) < 4100


# -- PermissionDenied and updatedInput over ACP -------------------------------------------


def test_permission_denied_follows_a_pre_tool_use_deny_over_acp(tmp_path: Path) -> None:
    from tests.test_acp_e2e import DENY, HANG, TOOL_RUN, pre_tool_use_settings, start

    settings = pre_tool_use_settings(tmp_path, DENY)
    observer, log = logger(tmp_path, "denied")
    data = json.loads(settings.read_text())
    data["hooks"]["PermissionDenied"] = [{"matcher": "@execute", "hooks": [observer]}]
    settings.write_text(json.dumps(data))
    proc = start(tmp_path, TOOL_RUN, "--task", "Fix", "--settings", str(settings))
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    (seen,) = logged(log)
    assert seen["hook_event_name"] == "PermissionDenied"
    assert (seen["tool_name"], seen["tool_input"], seen["reason"]) == (
        "execute",
        {"command": "make test"},
        "not on this branch: execute",
    )
    assert seen["tool_use_id"]


def test_permission_denied_follows_the_default_deny_over_acp(tmp_path: Path) -> None:
    # No handler decides: --permissions deny refuses the tool, a denial made
    # without a hook, which Claude Code's PermissionDenied reports too.
    from tests.test_acp_e2e import HANG, TOOL_RUN, permission_answers, start

    observer, log = logger(tmp_path, "denied")
    settings = tmp_path / "settings.json"
    hooks = {"PermissionDenied": [{"matcher": "@execute", "hooks": [observer]}]}
    settings.write_text(json.dumps({"hooks": hooks}))
    proc = start(
        tmp_path, TOOL_RUN, "--task", "Fix", "--settings", str(settings), "--permissions", "deny"
    )
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert permission_answers(tmp_path) == [{"outcome": "selected", "optionId": "cancel"}]
    (seen,) = logged(log)
    assert (seen["hook_event_name"], seen["tool_name"], seen["tool_input"]) == (
        "PermissionDenied",
        "execute",
        {"command": "make test"},
    )
    assert seen["reason"] == "denied by the permissions setting (deny)"
    assert seen["tool_use_id"]


def test_a_rewritten_input_is_refused_over_acp_and_the_call_denied(tmp_path: Path) -> None:
    from tests.test_acp_e2e import HANG, TOOL_RUN, permission_answers, start

    rewrite = answering(tmp_path, "rewrite", REWRITE)
    observer, log = logger(tmp_path, "denied")
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [{"matcher": "execute", "hooks": [rewrite]}],
                    "PermissionDenied": [{"hooks": [observer]}],
                }
            }
        )
    )
    proc = start(tmp_path, TOOL_RUN, "--task", "Fix", "--settings", str(settings))
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert permission_answers(tmp_path) == [{"outcome": "selected", "optionId": "cancel"}]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    (warning,) = [w for w in result["warnings"] if w["code"] == "updated_input_refused"]
    assert "rewrote the input of 'execute'" in warning["message"]
    assert "an ACP agent cannot take a changed input" in warning["message"]
    assert "the call was denied rather than run unchanged" in warning["message"]
    assert f"agent-wrapper: warning: {warning['message']}" in stderr.decode()
    (denied,) = logged(log)
    assert "would only allow this call with a changed input" in denied["reason"]


# -- through the relay: Claude Code, pi, and the agents that cannot take it ----------------


def relay(
    tmp_path: Path, settings: dict[str, Any], agent: str, tool: str, tool_input: dict[str, Any]
) -> subprocess.CompletedProcess[bytes]:
    """The whole-chain relay for ``agent``, as its hook runs it."""
    path = tmp_path / "relayed.json"
    path.write_text(json.dumps(settings))
    argv = [sys.executable, "-m", "wrapper", "hook-relay", "--agent", agent]
    argv += ["--handler", "*", "*", "PreToolUse", "--settings", str(path)]
    event = {
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "call-1",
    }
    return subprocess.run(
        argv,
        input=json.dumps(event).encode(),
        capture_output=True,
        env={**os.environ, "AGENT_WRAPPER_RUN_DIR": str(tmp_path / "run")},
        cwd=ROOT,
        timeout=HANG_LIMIT,
        check=False,
    )


def test_the_relay_hands_claude_the_rewritten_input(tmp_path: Path) -> None:
    settings = {"hooks": {"PreToolUse": [{"hooks": [answering(tmp_path, "rw", REWRITE)]}]}}
    relayed = relay(tmp_path, settings, "claude", "Bash", {"command": "rm -rf build"})
    assert relayed.returncode == 0, relayed.stderr.decode()
    assert json.loads(relayed.stdout)["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": {"command": "echo safe"},
    }
    events = NativeRecords(tmp_path / "run" / RECORDS).read_new()
    (decided,) = [e for e in events if isinstance(e, HookDecision)]
    assert (decided.decision, decided.reason) == ("allow", "the tool's input was rewritten")
    assert not [e for e in events if isinstance(e, WarningEvent)]


def test_a_plain_answer_with_a_rewritten_input_is_applied_too(tmp_path: Path) -> None:
    plain = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"a": 1}}}
    settings = {"hooks": {"PreToolUse": [{"hooks": [answering(tmp_path, "rw", plain)]}]}}
    relayed = relay(tmp_path, settings, "pi", "bash", {"command": "ls"})
    assert json.loads(relayed.stdout)["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "updatedInput": {"a": 1},
    }


def test_an_agent_that_cannot_take_a_rewritten_input_is_told_to_deny(tmp_path: Path) -> None:
    settings = {"hooks": {"PreToolUse": [{"hooks": [answering(tmp_path, "rw", REWRITE)]}]}}
    relayed = relay(tmp_path, settings, "codex", "Bash", {"command": "rm -rf build"})
    specific = json.loads(relayed.stdout)["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    assert "updatedInput" not in specific
    events = NativeRecords(tmp_path / "run" / RECORDS).read_new()
    (decided,) = [e for e in events if isinstance(e, HookDecision)]
    assert decided.decision == "block"
    assert (decided.tool_name, decided.tool_input, decided.tool_use_id) == (
        "Bash",
        {"command": "rm -rf build"},
        "call-1",
    )
    (warning,) = [e for e in events if isinstance(e, WarningEvent)]
    assert warning.code == "updated_input_refused"


PLAY_CLAUDES_HOOK = """
import json, os, subprocess, sys
run_dir = os.environ["AGENT_WRAPPER_RUN_DIR"]
given = json.load(open(os.path.join(run_dir, "hooks", "claude-settings.json")))
event = {
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "rm -rf build"},
    "tool_use_id": "toolu_1",
}
for group in given["hooks"]["PreToolUse"]:
    for hook in group["hooks"]:
        subprocess.run(["/bin/sh", "-c", hook["command"]], input=json.dumps(event).encode())
"""


def test_permission_denied_follows_a_deny_the_agent_enforced_itself(tmp_path: Path) -> None:
    deny = tmp_path / "deny.py"
    deny.write_text("import sys\nprint('No shell.', file=sys.stderr)\nsys.exit(2)\n")
    observer, log = logger(tmp_path, "denied")
    settings = {
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"command": f"{sys.executable} {deny}"}]}],
            "PermissionDenied": [{"matcher": "Bash", "hooks": [observer]}],
        },
        "observers": {"drainTimeout": 60},
    }
    play = tmp_path / "play.py"
    play.write_text(PLAY_CLAUDES_HOOK)
    # the fake agent plays Claude Code's side: its hook, run before the tool
    steps = [{"run": {"argv": [sys.executable, str(play)]}}, *answer("Done.")]
    proc, _ = run_claude(tmp_path, settings, steps)
    assert proc.returncode == 0, proc.stderr.decode()
    (seen,) = logged(log)
    assert (seen["hook_event_name"], seen["tool_name"], seen["reason"]) == (
        "PermissionDenied",
        "Bash",
        "No shell.",
    )
    assert (seen["tool_input"], seen["tool_use_id"]) == ({"command": "rm -rf build"}, "toolu_1")


NODE_CALL = """
const { default: extension } = await import(process.argv[2]);
let handler = null;
extension({ on: (name, fn) => { if (name === "tool_call") handler = fn; } });
const input = { command: "rm -rf build", timeout: 5 };
const event = { toolName: "bash", toolCallId: "t1", input };
const outcome = await handler(event);
console.log(JSON.stringify({ input: event.input, outcome: outcome ?? null }));
"""


def test_pis_extension_runs_the_call_with_the_rewritten_input(tmp_path: Path) -> None:
    node = "/usr/bin/node" if Path("/usr/bin/node").exists() else None
    if node is None:
        pytest.skip("node is not installed")
    stub = tmp_path / "relay-stub"
    stub.write_text(f"#!/bin/sh\ncat > /dev/null\necho '{json.dumps(REWRITE)}'\n")
    stub.chmod(0o755)
    settings = settings_of({"hooks": {"PreToolUse": [{"hooks": [{"command": "x"}]}]}})
    extension = tmp_path / "extension.mjs"
    extension.write_text(pi_extension(settings, str(stub), []))
    call = tmp_path / "call.mjs"
    call.write_text(NODE_CALL)
    done = subprocess.run(
        [node, str(call), str(extension)],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"input": {"command": "echo safe"}, "outcome": None}


# -- Notification and budget_resume -------------------------------------------------------


def test_a_paused_budget_notifies_and_a_refused_budget_resume_keeps_the_question(
    tmp_path: Path,
) -> None:
    observer, log = logger(tmp_path, "notified")
    settings = gate(tmp_path, Notification=[{"hooks": [observer]}])
    proc, run_dir = start_capped(
        tmp_path,
        [working(1, THOUSAND)],
        "--escalation-timeout",
        "60",
        "--settings",
        str(settings),
    )
    status_question = wait_for_question(run_dir, "esc-1")["question"]
    refused = cli(tmp_path, "reply", str(run_dir), "Go on, FORBIDDEN as it is")
    assert refused.returncode == 1
    assert "no forbidden words, please" in refused.stderr
    status = json.loads((run_dir / "status.json").read_text())
    assert (status["state"], status["escalationId"]) == ("waiting", "esc-1")
    assert cli(tmp_path, "reply", str(run_dir), "--continue").returncode == 0
    result = finish(proc, run_dir)
    assert result["outcome"] == "ok"
    sources = [(p["source"], p["prompt"][:25]) for p in prompt_inputs(tmp_path)]
    assert sources == [
        ("task", "Do the task"),
        ("budget_resume", "Go on, FORBIDDEN as it is"),
        ("budget_resume", "Your budget was raised to"),
    ]
    assert "budget was raised to 5,000 tokens" in records(tmp_path)[1]["prompt"]
    events = read_events(run_dir / "events.jsonl")
    assert any(e["type"] == "warning" and e["code"] == "reply_refused" for e in events)
    # 80 % of the cap, the question at the cap, 80 % of the cap as raised
    notes = sorted((n["notification_type"], n["message"]) for n in logged(log))
    assert [kind for kind, _ in notes] == ["budget_warning", "budget_warning", "idle_prompt"]
    assert "2,000 tokens, 80% of its --max-tokens cap of 2,500" in notes[0][1]
    assert "4,000 tokens, 80% of its --max-tokens cap of 5,000" in notes[1][1]
    assert notes[2][1] == status_question
    assert {n["hook_event_name"] for n in logged(log)} == {"Notification"}


def test_a_notification_matcher_selects_its_type(tmp_path: Path) -> None:
    observer, log = logger(tmp_path, "notified")
    settings = tmp_path / "s.json"
    settings.write_text(
        json.dumps({"hooks": {"Notification": [{"matcher": "steer_refused", "hooks": [observer]}]}})
    )
    proc, run_dir = start_capped(
        tmp_path, [], "--escalation-timeout", "0.5", "--settings", str(settings)
    )
    finish(proc, run_dir)
    assert logged(log) == [], "neither the cap's warning nor the question is a refused steer"


# -- hook-test ------------------------------------------------------------------------------


def hook_test(tmp_path: Path, settings: dict[str, Any], event: dict[str, Any], *more: str) -> Any:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(settings))
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(event))
    argv = [sys.executable, "-m", "wrapper", "hook-test", "--settings", str(path)]
    argv += ["--event", str(event_file), *more]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=HANG_LIMIT, cwd=tmp_path, check=False
    )


def test_hook_test_reports_a_rewritten_input_and_where_it_holds(tmp_path: Path) -> None:
    settings = {"hooks": {"PreToolUse": [{"hooks": [answering(tmp_path, "rw", REWRITE)]}]}}
    event = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "x"}}
    done = hook_test(tmp_path, settings, event, "--agent", "claude")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["updatedInput"] == {"command": "echo safe"}
    assert report["handlers"][0]["updatedInput"] == {"command": "echo safe"}
    done = hook_test(tmp_path, settings, event, "--agent", "gemini")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["decision"] == "block"
    assert "would only allow this call with a changed input" in report["reason"]
    note = json.loads(hook_test(tmp_path, settings, event).stdout)["note"]
    assert "applied on claude, opencode, pi; on any other agent the call is denied" in note


@pytest.mark.parametrize(
    ("event", "matcher", "runs"),
    [
        ({"notification_type": "idle_prompt", "message": "Waiting."}, "idle_prompt", 1),
        ({"notification_type": "budget_warning", "message": "80%"}, "idle_prompt", 0),
        ({"trigger": "manual"}, "manual", 1),
        ({"tool_name": "Bash", "reason": "No."}, "Bash", 1),
    ],
)
def test_hook_test_runs_the_observed_events_by_their_matcher(
    tmp_path: Path, event: dict[str, Any], matcher: str, runs: int
) -> None:
    name = (
        "Notification"
        if "notification_type" in event
        else "PostCompact"
        if "trigger" in event
        else "PermissionDenied"
    )
    observer, log = logger(tmp_path, "seen")
    settings = {"hooks": {name: [{"matcher": matcher, "hooks": [observer]}]}}
    done = hook_test(tmp_path, settings, {"hook_event_name": name, **event})
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["handlers"]) == runs
    assert len(logged(log)) == runs
    assert "NOT ENFORCED" not in done.stderr


def test_the_new_events_are_no_longer_notes(tmp_path: Path) -> None:
    text = textwrap.dedent("""{"hooks": {"Notification": [{"hooks": [{"command": "true"}]}],
        "PostCompact": [{"hooks": [{"command": "true"}]}],
        "PermissionDenied": [{"hooks": [{"command": "true"}]}]}}""")
    settings = settings_of(json.loads(text))
    assert settings.notes == ()
    assert {e: len(settings.handlers(e)) for e in ("Notification", "PostCompact")} == {
        "Notification": 1,
        "PostCompact": 1,
    }


def test_a_refused_steer_notifies(tmp_path: Path) -> None:
    from tests.test_external_steer import Running, long_tool
    from tests.test_external_steer import cli as steer_cli

    observer, log = logger(tmp_path, "notified")
    settings = gate(tmp_path, Notification=[{"matcher": "steer_refused", "hooks": [observer]}])
    run = Running(
        tmp_path,
        [long_tool(3), *answer("Built it.")],
        [answer("Steered.")],
        options=["--settings", str(settings), "--steer-timeout", "0.3"],
    )
    run.wait_for_tool()
    steered = steer_cli("steer", str(run.run_dir), "--text", "Write FORBIDDEN code")
    assert steered.returncode == 1
    code, _, _, _ = run.finish()
    assert code == 0
    (seen,) = logged(log)
    assert seen["notification_type"] == "steer_refused"
    assert seen["message"].startswith("A steer was refused: ")
    assert "no forbidden words, please" in seen["message"]


def test_a_tool_to_approve_is_a_permission_prompt_and_the_stop_an_idle_prompt(
    tmp_path: Path,
) -> None:
    from tests.test_acp_e2e import (
        HANG,
        TOOL_RUN,
        pre_tool_use_settings,
        reply,
        start,
        wait_for_escalation,
    )

    ask = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}}
    script = f"import sys\nsys.stdin.read()\nprint({json.dumps(ask)!r})\n"
    settings = pre_tool_use_settings(tmp_path, script)
    observer, log = logger(tmp_path, "notified")
    data = json.loads(settings.read_text())
    data["hooks"]["Notification"] = [{"hooks": [observer]}]
    settings.write_text(json.dumps(data))
    options = ("--settings", str(settings), "--on-stop", "escalate", "--escalation-timeout", "60")
    proc = start(tmp_path, TOOL_RUN, "--task", "Fix", *options)
    try:
        wait_for_escalation(tmp_path, "esc-1")
        reply(tmp_path, "--continue")
        wait_for_escalation(tmp_path, "esc-2")
        reply(tmp_path, "--stop")
        _, stderr = proc.communicate(timeout=HANG)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, stderr
    kinds = sorted((n["notification_type"], n["message"]) for n in logged(log))
    assert [kind for kind, _ in kinds] == ["idle_prompt", "permission_prompt"]
    assert "make test" in kinds[1][1]


def test_a_cap_is_nearing_from_its_share_on_and_the_raised_cap_is_the_first_amount_more() -> None:
    from wrapper.core.cost import Caps, CostLedger
    from wrapper.core.events import Usage
    from wrapper.core.limits import CAP_NOTICE_SHARE

    ledger = CostLedger(fallback_model=None, granularity="turn")
    ledger.add(Usage(input=700, output=99, cost_usd=0.5), None)
    caps = Caps(max_cost=1.0, max_tokens=1000)
    assert caps.nearing(ledger, (0, 0.0), CAP_NOTICE_SHARE) is None
    said = caps.nearing(ledger, (1, 0.0), CAP_NOTICE_SHARE)
    assert said == "the run used 800 tokens, 80% of its --max-tokens cap of 1,000"
    cost = Caps(max_cost=1.0).nearing(ledger, (0, 0.31), CAP_NOTICE_SHARE)
    assert cost == "the run cost $0.8100, 81% of its --max-cost cap of $1"
    assert caps.raised_by(Caps(max_cost=1.0, max_tokens=1000)) == Caps(2.0, 2000)
    # Each cap on its own: both are near, each is said.
    assert list(caps.nearing_each(ledger, (1, 0.31), CAP_NOTICE_SHARE)) == [
        "max_tokens",
        "max_cost",
    ]


def test_each_cap_notifies_at_its_own_share(tmp_path: Path) -> None:
    # The first message spends 80 % of the tokens, the second 80 % of the
    # cost: one notice each, neither cap stopping the run.
    observer, log = logger(tmp_path, "notified")
    first = {"input": 700, "output": 100, "cost": {"total": 0.1}}
    second = {"input": 5, "output": 5, "cost": {"total": 0.75}}
    run = run_with(
        tmp_path,
        {"hooks": {"Notification": [{"hooks": [observer]}]}},
        [*working(1, first)[:2], *working(1, second)],
        options=("--max-tokens", "1000", "--max-cost", "1"),
    )
    assert run.returncode == 0, run.stderr
    notes = [(n["notification_type"], n["message"]) for n in logged(log)]
    assert [kind for kind, _ in notes] == ["budget_warning", "budget_warning"], notes
    assert "the run used 800 tokens, 80% of its --max-tokens cap of 1,000" in notes[0][1]
    assert "the run cost $0.8500, 85% of its --max-cost cap of $1" in notes[1][1]
