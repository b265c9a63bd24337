"""Amp's Claude-compatible stream-json -> normalized events, and its thread resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.dialect_support import (
    capture,
    final,
    first_object,
    line,
    messages,
    recognisers,
    replay,
    session_id,
)
from wrapper.dialects import CannotResume
from wrapper.dialects.amp import AmpDialect
from wrapper.events import AgentEnded, AssistantMessage, StopReason, Usage, is_terminal

THREAD = "T-2775dc92-90ed-4f85-8b73-8f9766029e83"
INIT = line(
    {"type": "system", "subtype": "init", "cwd": "/w", "session_id": THREAD, "tools": ["oracle"]}
)


def assistant(text: str, stop_reason: str, **usage: int) -> bytes:
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "usage": usage,
    }
    return line({"type": "assistant", "message": message, "session_id": THREAD})


def result(**fields: Any) -> bytes:
    body = {"type": "result", "subtype": "success", "is_error": False, "session_id": THREAD}
    return line({**body, **fields})


def test_assistant_lines_with_a_real_stop_reason_are_still_progress() -> None:
    dialect = AmpDialect()
    dialect.parse(INIT)
    [message] = dialect.parse(assistant("4.", "end_turn", input_tokens=5, output_tokens=1))
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.raw_stop_reason) == (None, "end_turn")
    assert not is_terminal(message.stop_reason)


def test_result_ends_the_run_with_usage_summed_over_the_assistant_lines() -> None:
    events = replay(
        AmpDialect(),
        [
            INIT,
            assistant("Let me check.", "tool_use", input_tokens=5, output_tokens=1),
            assistant("4.", "end_turn", input_tokens=7, output_tokens=2, cache_read_input_tokens=3),
            result(result="4.", num_turns=2),
        ],
    )
    message = final(events)
    assert (message.stop_reason, message.raw_stop_reason) == ("stop", "success")
    assert message.text == "4."
    assert message.usage == Usage(input=12, output=3, cache_read=3, total_tokens=18)
    assert events[-1] == AgentEnded(will_retry=False, settled=True)
    assert [m for m in messages(events) if is_terminal(m.stop_reason)] == [message]


def test_error_result_says_why_in_its_error_field() -> None:
    dialect = AmpDialect()
    [message, _] = dialect.parse(
        result(subtype="error_during_execution", is_error=True, error="terminated", num_turns=24)
    )
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.raw_stop_reason) == ("error", "error_during_execution")
    assert message.error_message == "terminated"


@pytest.mark.parametrize(("exit_code", "canonical"), [(143, "aborted"), (1, "error")])
def test_exit_without_a_result_line(exit_code: int, canonical: str) -> None:
    events = replay(AmpDialect(), [INIT, assistant("Half", "tool_use")], exit_code)
    message = events[-1]
    assert isinstance(message, AssistantMessage)
    assert (message.stop_reason, message.raw_stop_reason) == (canonical, f"exit {exit_code}")


def test_replay_official_example() -> None:
    lines = capture("amp_stream_json_official.jsonl")
    events = replay(AmpDialect(), lines)
    message = final(events)
    assert (message.stop_reason, message.raw_stop_reason) == (StopReason.STOP, "success")
    assert message.text == "2 + 2 equals 4."
    assert session_id(events) == THREAD
    assert message.usage == Usage(
        input=12783, output=8, cache_read=12416, cache_write=367, total_tokens=25574
    )
    assert [m for m in messages(events) if is_terminal(m.stop_reason)] == [message]
    assert recognisers(first_object(lines)) == ["amp"]


# -- recognising and launching ----------------------------------------------------------


def test_recognises_thread_ids_only() -> None:
    assert AmpDialect.recognises({"type": "system", "subtype": "init", "session_id": "T-1"})
    claude = {"type": "system", "subtype": "init", "session_id": "4e0c", "tools": []}
    assert not AmpDialect.recognises(claude)
    assert not AmpDialect.recognises({"type": "result", "session_id": "T-1"})


def test_task_goes_in_execute_mode(tmp_path: Path) -> None:
    argv = AmpDialect().launch(["amp", "--stream-json"], "Fix it", tmp_path).argv
    assert argv == ["amp", "--stream-json", "-x", "Fix it"]


def test_task_starting_with_a_dash_is_not_a_flag(tmp_path: Path) -> None:
    argv = AmpDialect().launch(["amp", "--stream-json"], "-v is broken", tmp_path).argv
    assert argv == ["amp", "--stream-json", "-x", " -v is broken"]


def test_resume_continues_the_thread_with_the_users_flags(tmp_path: Path) -> None:
    command = ["/usr/bin/amp", "--stream-json", "--dangerously-allow-all", "--mode", "smart"]
    launch = AmpDialect().resume(command, "And now add 7", tmp_path, THREAD)
    assert launch.argv == [
        "/usr/bin/amp",
        "threads",
        "continue",
        THREAD,
        "--stream-json",
        "--dangerously-allow-all",
        "--mode",
        "smart",
        "-x",
        "And now add 7",
    ]
    with pytest.raises(CannotResume, match="Amp"):
        AmpDialect().resume(command, "x", tmp_path, None)
