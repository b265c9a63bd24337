"""How much a steer from outside may carry: what each run takes (its
agent's command line or its live session), refused before anything is
interrupted; the limit the sender's command and the run share; and what a
run keeps of the steers it refused."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import wrapper
from tests.conftest import FAKE_PI, ROOT
from tests.dialect_support import LAUNCHERS, mode_args
from tests.test_external_steer import (
    Running,
    _raw,
    answer,
    cli,
    long_tool,
    of_type,
)
from wrapper.core.control import (
    REQUEST_MAX_BYTES,
    ExternalSteers,
    SteerRequest,
    message,
    steer_max_bytes,
)
from wrapper.core.limits import (
    ARGUMENT_MAX_BYTES,
    LISTED_REFUSED_STEERS,
    STEER_MAX_BYTES,
    STEER_PROMPT_RESERVE_BYTES,
)

pytestmark = pytest.mark.usefixtures("no_leaks")

CODEX = ROOT / "fixtures" / "fake_agent" / LAUNCHERS["codex"]
CODEX_ARGS = (*mode_args("codex"), "exec")
LIMIT = re.compile(r"a steer this run can take is at most (\d+) bytes")


def _text_file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _limit(run: Running, tmp_path: Path) -> int:
    """What the run says it takes, refusing a steer of 192 000 bytes (more
    than one argument holds)."""
    path = _text_file(tmp_path, "probe", "Fix the parser. " * 12_000)
    refused = cli("steer", str(run.run_dir), "--file", str(path))
    assert refused.returncode == 1, refused.stderr
    found = LIMIT.search(refused.stderr)
    assert found is not None, refused.stderr
    return int(found[1])


def _untouched(run: Running, final: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run ended as it would have without the refused steer."""
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert "Traceback" not in stderr
    assert (result["outcome"], result["error"], result["finalText"]) == ("ok", None, final)
    assert not of_type(events, "signal_sent"), "the agent was interrupted for nothing"
    assert len(result["attempts"]) == 1
    return result, events


# -- the command line of an agent resumed with a steer ---------------------------------


def test_a_steer_too_long_for_the_agents_command_line_is_refused_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    run = Running(
        tmp_path,
        [long_tool(4), *answer("Built it.")],
        [answer("Steered.")],
        options=["--steer-timeout", "0.5"],
        agent=CODEX,
        agent_args=CODEX_ARGS,
    )
    run.wait_for_events()
    text = "Fix the parser. " * 12_000  # 192 000 bytes: more than one argument holds
    steered = cli("steer", str(run.run_dir), "--file", str(_text_file(tmp_path, "s", text)))
    assert steered.returncode == 1, steered.stderr
    found = LIMIT.search(steered.stderr)
    assert found is not None, steered.stderr
    assert "refused: a steer this run can take is at most" in steered.stderr
    limit = int(found[1])
    assert 64 * 1024 < limit < ARGUMENT_MAX_BYTES - STEER_PROMPT_RESERVE_BYTES
    result, events = _untouched(run, "Built it.")
    (refused,) = result["externalSteers"]
    assert refused["outcome"] == "refused"
    assert refused["textLength"] == len(text)
    assert refused["textSha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert of_type(events, "steer_refused")


def test_a_steer_at_the_limit_reaches_an_agent_resumed_on_its_command_line(
    tmp_path: Path,
) -> None:
    run = Running(
        tmp_path,
        [long_tool(20), *answer("Built it.")],
        [answer("Steered.")],
        options=["--steer-timeout", "0.5"],
        agent=CODEX,
        agent_args=CODEX_ARGS,
    )
    run.wait_for_events()
    limit = _limit(run, tmp_path)
    # Quotes: what JSON escapes does not count against the text.
    text = '"' * (limit - 4) + "ok \\"
    steered = cli("steer", str(run.run_dir), "--file", str(_text_file(tmp_path, "s", text)))
    assert steered.returncode == 0, steered.stderr
    code, result, _, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Steered."
    prompt = run.prompts()[-1]
    assert prompt.startswith(text + "\n\n[Your tool call "), prompt[-200:]


def test_a_queued_steer_that_would_make_the_joined_prompt_too_long_is_refused_alone(
    tmp_path: Path,
) -> None:
    run = Running(
        tmp_path,
        [long_tool(4), *answer("Built it.")],
        [answer("Did both.")],
        agent=CODEX,
        agent_args=CODEX_ARGS,
    )
    run.wait_for_events()
    part = _limit(run, tmp_path) * 2 // 3
    first, second, third = "a" * part, "b" * part, "c" * 100
    sent = []
    for text in (first, second, third):
        path = _text_file(tmp_path, "s", text)
        sent.append(
            cli(
                "steer", str(run.run_dir), "--file", str(path), "--when", "next-stop", "--wait", "0"
            )
        )
    assert [s.returncode for s in sent] == [124, 1, 124], [s.stderr for s in sent]
    assert "joined into one prompt" in sent[1].stderr
    assert "a steer this run can take is at most" in sent[1].stderr
    code, result, _, stderr = run.finish()
    assert code == 0, stderr
    assert "Traceback" not in stderr
    assert result["finalText"] == "Did both."
    outcomes = [(s["id"], s["outcome"]) for s in result["externalSteers"]]
    assert outcomes == [
        ("s1", "refused"),
        ("s2", "delivered"),
        ("s3", "refused"),
        ("s4", "delivered"),
    ]
    said = run.prompts()[-1]
    assert first in said
    assert third in said
    assert second not in said


# -- a live session ------------------------------------------------------------------


def test_a_live_session_takes_a_text_of_quotes_at_the_limit_and_refuses_one_over(
    tmp_path: Path,
) -> None:
    run = Running(
        tmp_path,
        [long_tool(8), *answer("Built it.")],
        [answer("never played")],
        agent=FAKE_PI,
        agent_args=("--mode", "rpc"),
    )
    run.wait_for_tool()
    path = run.status()["control"]
    over = json.dumps({"op": "steer", "text": '"' * (STEER_MAX_BYTES + 1)}).encode() + b"\n"
    answered = _raw(path, over)
    assert f"a steer this run can take is at most {STEER_MAX_BYTES} bytes".encode() in answered
    text = '"' * STEER_MAX_BYTES
    steered = cli("steer", str(run.run_dir), "--file", str(_text_file(tmp_path, "s", text)))
    assert steered.returncode == 0, steered.stderr
    assert "delivered steer s1 live" in steered.stdout
    code, result, events, stderr = run.finish()
    assert code == 0, stderr
    assert "Traceback" not in stderr
    assert (result["outcome"], result["finalText"]) == ("ok", "Built it.")
    assert not of_type(events, "signal_sent")
    assert result["externalSteers"][0]["textLength"] == STEER_MAX_BYTES


# -- the sender's command and the API --------------------------------------------------


def test_a_file_over_the_limit_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    zero = cli("steer", str(tmp_path), "--file", "/dev/zero")
    assert zero.returncode == 2, zero.stderr
    assert f"more than the {STEER_MAX_BYTES} bytes a steer may hold" in zero.stderr
    assert "MemoryError" not in zero.stderr
    quotes = _text_file(tmp_path, "quotes", '"' * (STEER_MAX_BYTES + 1))
    over = cli("steer", str(tmp_path), "--file", str(quotes))
    assert over.returncode == 2, over.stderr
    assert str(STEER_MAX_BYTES) in over.stderr
    with pytest.raises(ValueError, match=str(STEER_MAX_BYTES)):
        wrapper.steer(tmp_path, "x" * (STEER_MAX_BYTES + 1))


# -- the limit, and the ledger ------------------------------------------------------------


def test_the_limit_is_what_the_command_line_leaves_less_the_reserve() -> None:
    probe = "\x01"
    argv = ["codex", "exec", "resume", "id", probe]
    alone = steer_max_bytes(argv, probe, {}, 2 * 1024 * 1024)
    assert alone < ARGUMENT_MAX_BYTES - STEER_PROMPT_RESERVE_BYTES
    assert alone > ARGUMENT_MAX_BYTES - STEER_PROMPT_RESERVE_BYTES - 8 * 1024
    # A crowded environment leaves less of the whole command line.
    crowded = steer_max_bytes(argv, probe, {"BIG": "x" * 150_000}, 256 * 1024)
    assert crowded < 256 * 1024 - 150_000 - STEER_PROMPT_RESERVE_BYTES
    assert steer_max_bytes(None, probe, {"BIG": "x" * 150_000}, 1) == STEER_MAX_BYTES
    # The argument around the prompt counts.
    flagged = steer_max_bytes(["amp", f"--prompt={probe}"], probe, {}, 2 * 1024 * 1024)
    assert flagged == alone - len("--prompt=")
    assert REQUEST_MAX_BYTES >= 6 * STEER_MAX_BYTES


def test_joined_steers_count_their_headers() -> None:
    ledger = ExternalSteers(10)
    first = ledger.request(SteerRequest("a" * 60), 0.0, 100)
    assert first.state == "queued"
    second = ledger.request(SteerRequest("b" * 5, "next-stop"), 0.0, 100)
    assert second.state == "refused"
    assert "joined into one prompt" in str(second.why)
    assert first.state == "queued", "the earlier steer goes"
    third = ledger.request(SteerRequest("c" * 3), 0.0, 200)
    assert third.state == "queued"
    assert len(message([first, third])) > 100


def test_refused_steers_keep_no_text_and_result_lists_the_first_ones() -> None:
    ledger = ExternalSteers(1)
    ledger.request(SteerRequest("first"), 0.0)
    big = "y" * STEER_MAX_BYTES
    refused = [ledger.request(SteerRequest(big), 1.0) for _ in range(400)]
    assert all(steer.state == "refused" and steer.text == "" for steer in refused)
    assert len(ledger.items) == 1 + LISTED_REFUSED_STEERS
    assert refused[-1].id == "s401"
    result = ledger.to_json()
    listed = result["externalSteers"]
    assert len(listed) == 1 + LISTED_REFUSED_STEERS
    assert result["externalSteersOmitted"] == 400 - LISTED_REFUSED_STEERS
    assert [s["id"] for s in listed[1:3]] == ["s2", "s3"]
    assert listed[1]["textLength"] == STEER_MAX_BYTES
    assert listed[1]["textSha256"] == hashlib.sha256(big.encode()).hexdigest()


def test_hook_context_is_cut_to_the_room_kept_for_it(tmp_path: Path) -> None:
    hook = tmp_path / "context.py"
    hook.write_text(
        "import json\n"
        'print(json.dumps({"hookSpecificOutput": {"additionalContext": "note " * 10000}}))\n'
    )
    command = {"type": "command", "command": f"{sys.executable} {hook}"}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [command]}]}}))
    run = Running(
        tmp_path,
        [long_tool(20), *answer("Built it.")],
        [answer("Steered.")],
        options=["--steer-timeout", "0.5", "--settings", str(settings)],
        agent=CODEX,
        agent_args=CODEX_ARGS,
    )
    run.wait_for_events()
    limit = _limit(run, tmp_path)
    text = "z" * limit
    steered = cli("steer", str(run.run_dir), "--file", str(_text_file(tmp_path, "s", text)))
    assert steered.returncode == 0, steered.stderr
    code, result, _, stderr = run.finish()
    assert code == 0, stderr
    assert result["finalText"] == "Steered."
    prompt = run.prompts()[-1]
    assert prompt.startswith(text)
    assert len(prompt.encode()) <= limit + STEER_PROMPT_RESERVE_BYTES
    assert prompt.endswith("leaves for it]")
    assert "hook_context_cut" in {w["code"] for w in result["warnings"]}
