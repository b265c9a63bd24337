"""Amp's Claude-compatible stream-json -> normalized events, and its thread resume."""

from __future__ import annotations

from typing import Any

from tests.dialect_support import (
    final,
    line,
    messages,
    replay,
)
from tests.dialect_table import RESUMED, Agent, Argv, Capture
from tests.test_dialect_claude import claude_samples
from wrapper.core.events import AgentEnded, AssistantMessage, Usage, is_terminal
from wrapper.dialects.amp import AmpDialect

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


# -- recognising ----------------------------------------------------------


def test_recognises_thread_ids_only() -> None:
    # Claude's init (a session id not starting with T-) is the common table's business.
    assert AmpDialect.recognises({"type": "system", "subtype": "init", "session_id": "T-1"})
    assert not AmpDialect.recognises({"type": "result", "session_id": "T-1"})


# -- its row of the common table (tests/test_dialect_common.py) --------------------

ROW = Agent(
    name="amp",
    command=("amp", "--stream-json", "--mode", "smart"),
    types=("system", "assistant", "user", "result"),
    keys=("subtype", "message", "is_error", "result", "error", "session_id", "usage"),
    samples=claude_samples("T-2775dc92", {"cwd": "/w", "tools": ["oracle"]}),
    argv=Argv(
        task=("-x", "Fix it"),
        dashed_task=("-x", " -v is broken"),
        # the thread is continued by a subcommand; the user's flags follow it
        resume=(
            *("amp", "threads", "continue", RESUMED),
            *("--stream-json", "--mode", "smart", "-x", "Go on"),
        ),
        missing_session="Amp reported no session id",
    ),
    display_name="Amp",
)


CAPTURES = [
    Capture(
        "amp_stream_json_official.jsonl",
        "amp",
        ("stop", "success"),
        "2 + 2 equals 4.",
        Usage(input=12783, output=8, cache_read=12416, cache_write=367, total_tokens=25574),
        session="T-2775dc92-90ed-4f85-8b73-8f9766029e83",
    ),
]
