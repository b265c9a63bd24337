"""One answer for every prompt: ``UserPromptSubmit`` runs before each prompt
the wrapper sends (the task, a Stop hook's steer, a steer or follow-up from
outside, a person's reply), says which in ``source``, and a block refuses
that prompt only. And a Stop handler's ``additionalContext`` steers the
agent like a block's reason, within the steer limit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    agent_env,
    read_events,
    run_wrapper,
    wait_until,
    wrapper_argv,
    write_scenario,
)
from tests.test_external_steer import Running, cli, long_tool, of_type

pytestmark = pytest.mark.usefixtures("no_leaks")

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def answer(text: str) -> list[dict[str, Any]]:
    return [{"assistant": {"text": text, "stopReason": "stop"}}, *END]


def gate(tmp_path: Path, **more: Any) -> Path:
    """Settings whose UserPromptSubmit handler logs its input and refuses a
    prompt that says FORBIDDEN (exit 2, the reason on stderr); ``more``: other
    hook events."""
    script = tmp_path / "prompt-gate.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import json, sys
            event = json.load(sys.stdin)
            with open({str(tmp_path / "prompt-inputs.jsonl")!r}, "a") as log:
                log.write(json.dumps(event) + "\\n")
            if "FORBIDDEN" in event["prompt"]:
                print("no forbidden words, please", file=sys.stderr)
                sys.exit(2)
            """
        )
    )
    handler = {"type": "command", "command": f"{sys.executable} {script}"}
    hooks: dict[str, Any] = {"UserPromptSubmit": [{"hooks": [handler]}], **more}
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"hooks": hooks}))
    return path


def prompt_inputs(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "prompt-inputs.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def stop_handler(tmp_path: Path, answer_json: dict[str, Any]) -> list[dict[str, Any]]:
    script = tmp_path / "stop.py"
    script.write_text(
        f"import json, sys\njson.load(sys.stdin)\nprint(json.dumps({answer_json!r}))\n"
    )
    return [{"hooks": [{"type": "command", "command": f"{sys.executable} {script}"}]}]


def agent_prompts(tmp_path: Path) -> list[str]:
    record = tmp_path / "record.jsonl"
    if not record.exists():
        return []
    return [json.loads(line)["prompt"] for line in record.read_text().splitlines()]


# -- the task ---------------------------------------------------------------------


def test_the_task_is_given_as_source_task_and_a_blocked_task_ends_the_run(
    tmp_path: Path,
) -> None:
    settings = gate(tmp_path)
    run = run_wrapper(tmp_path, answer("Done."), options=["--settings", str(settings)])
    assert run.returncode == 0, run.stderr
    (given,) = prompt_inputs(tmp_path)
    assert (given["source"], given["prompt"]) == ("task", "Do the task")

    blocked = tmp_path / "blocked"
    blocked.mkdir()
    settings = gate(blocked)
    run = run_wrapper(
        blocked, answer("Done."), task="FORBIDDEN task", options=["--settings", str(settings)]
    )
    assert run.returncode == 1
    assert (run.result["outcome"], run.result["error"]["kind"]) == ("refused", "prompt_blocked")
    assert "no forbidden words, please" in run.result["error"]["message"]
    assert agent_prompts(blocked) == [], "the agent never started"


# -- a Stop hook's steer ------------------------------------------------------------


@pytest.mark.parametrize("fail_on_max_steers", [False, True])
def test_a_blocked_stop_hook_steer_lets_the_stop_go_ahead(
    tmp_path: Path, fail_on_max_steers: bool
) -> None:
    stop = stop_handler(tmp_path, {"decision": "block", "reason": "Say FORBIDDEN things."})
    settings = gate(tmp_path, Stop=stop)
    options = ["--settings", str(settings)]
    if fail_on_max_steers:
        options.append("--fail-on-max-steers")
    run = run_wrapper(tmp_path, answer("Done."), options=options)
    assert agent_prompts(tmp_path) == ["Do the task"], "the blocked steer never reached it"
    sources = [(given["source"], given["prompt"]) for given in prompt_inputs(tmp_path)]
    assert sources == [("task", "Do the task"), ("stop_hook", "Say FORBIDDEN things.")]
    assert run.result["steerCount"] == 0
    assert run.result["finalText"] == "Done."
    if fail_on_max_steers:
        assert run.returncode == 1
        assert run.result["outcome"] == "error"
        assert run.result["error"]["kind"] == "gate_not_passed"
        assert "no forbidden words, please" in run.result["error"]["message"]
    else:
        assert run.returncode == 0, run.stderr
        assert run.result["outcome"] == "ok"
        (warning,) = [w for w in run.result["warnings"] if w["code"] == "steer_prompt_blocked"]
        assert "no forbidden words, please" in warning["message"]
        assert "Say FORBIDDEN things." in warning["message"]
        # The loud line: a CI log shows the gate did not pass.
        assert "agent-wrapper: warning: the Stop gate did not pass" in run.stderr


# -- steers and follow-ups from outside -----------------------------------------------


@pytest.mark.parametrize(("when", "source"), [("now", "steer"), ("next-stop", "follow_up")])
def test_a_blocked_steer_from_outside_is_refused_and_the_run_goes_on(
    tmp_path: Path, when: str, source: str
) -> None:
    settings = gate(tmp_path)
    run = Running(
        tmp_path,
        [long_tool(3), *answer("Built it.")],
        [answer("Steered.")],
        options=["--settings", str(settings), "--steer-timeout", "0.3"],
    )
    run.wait_for_tool()
    steered = cli("steer", str(run.run_dir), "--text", "Write FORBIDDEN code", "--when", when)
    assert steered.returncode == 1
    assert "no forbidden words, please" in steered.stderr
    fine = cli("steer", str(run.run_dir), "--text", "And the docs", "--when", "next-stop")
    assert fine.returncode == 0, fine.stderr
    code, result, events, _ = run.finish()
    assert code == 0
    assert result["outcome"] == "ok"
    assert result["finalText"] == "Steered."
    refused, delivered = result["externalSteers"]
    assert refused["outcome"] == "refused"
    assert "no forbidden words, please" in refused["why"]
    assert delivered["outcome"] == "delivered"
    assert "FORBIDDEN" not in "".join(run.prompts())
    assert [s["id"] for s in of_type(events, "steer_refused")] == ["s1"]
    sources = [given["source"] for given in prompt_inputs(tmp_path)]
    assert sources == ["task", source, "follow_up"]


# -- a person's reply -------------------------------------------------------------


def test_a_blocked_reply_is_refused_to_the_person_and_the_question_stays_open(
    tmp_path: Path,
) -> None:
    settings = gate(tmp_path)
    scenario = write_scenario(
        tmp_path, answer("Should I drop the old API?"), resumes=[answer("Dropped it.")]
    )
    run_dir = tmp_path / "run"
    options = ["--on-stop", "escalate", "--escalation-timeout", "60", "--settings", str(settings)]
    proc = subprocess.Popen(
        wrapper_argv(run_dir, scenario, options=options),
        env=agent_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def waiting(escalation: str) -> bool:
            try:
                status = json.loads((run_dir / "status.json").read_text())
            except (OSError, ValueError):
                return False
            return bool(status["state"] == "waiting" and status["escalationId"] == escalation)

        assert wait_until(lambda: waiting("esc-1"), timeout=30)
        refused = cli("reply", str(run_dir), "Yes, and say FORBIDDEN")
        assert refused.returncode == 1
        assert "no forbidden words, please" in refused.stderr
        status = json.loads((run_dir / "status.json").read_text())
        assert (status["state"], status["escalationId"]) == ("waiting", "esc-1")
        taken = cli("reply", str(run_dir), "Yes, drop it.")
        assert taken.returncode == 0, taken.stderr
        assert "answered esc-1 (text)" in taken.stdout
        assert wait_until(lambda: waiting("esc-2"), timeout=30)
        assert cli("reply", str(run_dir), "--stop").returncode == 0
        proc.wait(timeout=HANG_LIMIT)
    finally:
        proc.kill()
        proc.wait()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["outcome"] == "ok"
    assert result["finalText"] == "Dropped it."
    assert agent_prompts(tmp_path) == ["Do the task", "User answered: Yes, drop it."]
    assert [e["answer"] for e in result["escalations"]] == ["text", "stop"]
    sources = [(g["source"], g["prompt"]) for g in prompt_inputs(tmp_path)]
    assert sources == [
        ("task", "Do the task"),
        ("reply", "User answered: Yes, and say FORBIDDEN"),
        ("reply", "User answered: Yes, drop it."),
    ]
    events = read_events(run_dir / "events.jsonl")
    assert any(e["type"] == "warning" and e["code"] == "reply_refused" for e in events), (
        "the run's events say a reply was refused"
    )


# -- a Stop handler's additionalContext -------------------------------------------------


def test_stop_context_steers_the_agent_and_stops_at_the_steer_limit(tmp_path: Path) -> None:
    stop = stop_handler(
        tmp_path,
        {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "Also lint."}},
    )
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"Stop": stop}}))
    run = run_wrapper(
        tmp_path,
        answer("Done."),
        options=["--settings", str(settings), "--max-steers", "2"],
        scenario_extra={"resumes": [answer("Linted."), answer("Linted again.")]},
    )
    assert run.returncode == 0, run.stderr
    assert run.result["outcome"] == "ok"
    assert agent_prompts(tmp_path) == ["Do the task", "Also lint.", "Also lint."]
    assert [(s["attempt"], s["reason"]) for s in run.result["steers"]] == [
        (2, "Also lint."),
        (3, "Also lint."),
    ]
    assert run.result["steerCount"] == 2
    assert run.result["finalText"] == "Linted again."
    codes = [w["code"] for w in run.result["warnings"]]
    assert "hook_failed" not in codes
    assert "max_steers_reached" in codes


async def test_the_mcp_reply_tool_is_told_a_refused_reply(tmp_path: Path) -> None:
    import trio

    from tests.test_mcp_registry import pi, server
    from wrapper.mcp.registry import ToolError

    settings = gate(tmp_path)
    async with server(tmp_path, allow_settings=(tmp_path,)) as tools:
        command = pi(tmp_path, answer("Drop the old API?"), [answer("Dropped it.")])
        started = await tools.start(
            command=command, task="Refactor", on_stop="escalate", settings=str(settings)
        )
        run_id = started["run_id"]
        with trio.fail_after(30):
            while (await tools.status(run_id=run_id))["state"] != "waiting":
                await trio.sleep(0.05)
        with pytest.raises(ToolError, match="no forbidden words, please"):
            await tools.reply(run_id=run_id, text="Yes, and say FORBIDDEN")
        status = await tools.status(run_id=run_id)
        assert (status["state"], status["escalation_id"]) == ("waiting", "esc-1")
        replied = await tools.reply(run_id=run_id, text="Yes, drop it")
        assert replied["answered"] == "text"
        await tools.abort(run_id=run_id)
