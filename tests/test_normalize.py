"""``agent-wrapper normalize``: saved streams through the same pure path as a live run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HANG_LIMIT, SHARED_STREAMS


def normalize(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "wrapper", "normalize", *args],
        input=stdin,
        capture_output=True,
        timeout=HANG_LIMIT,
        check=False,
    )


def lines(*objs: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(obj).encode() + b"\n" for obj in objs)


PI_STREAM = (
    lines(
        {"type": "session", "version": 3, "id": "sess-1", "cwd": "/w"},
        {"type": "turn_start"},
        {
            "type": "message_update",
            "message": {},
            "assistantMessageEvent": {"type": "text_delta", "delta": "Do"},
        },
        {
            "type": "message_end",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Done."}],
                "stopReason": "stop",
                "usage": {"input": 5, "output": 2},
            },
        },
    )
    + b"not json\n"
)


def test_events_are_printed_one_per_line() -> None:
    proc = normalize("-", stdin=PI_STREAM)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["type"] for e in events] == [
        "session",
        "turn_start",
        "text_delta",
        "assistant_message",
        "unparsed_line",
    ]
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    assert events[3]["stopReason"] == "stop"


def test_summary(tmp_path: Path) -> None:
    path = tmp_path / "stdout.log"
    path.write_bytes(PI_STREAM)
    proc = normalize("--summary", "--dialect", "pi", str(path))
    summary = json.loads(proc.stdout)
    assert summary["dialect"] == "pi"
    assert (summary["stopReason"], summary["rawStopReason"]) == ("stop", "stop")
    assert summary["finalText"] == "Done."
    assert summary["sessionId"] == "sess-1"
    assert summary["usage"]["input"] == 5


def test_exit_code_feeds_the_rules_that_need_it() -> None:
    stream = lines(
        {"type": "system", "subtype": "init", "session_id": "c1", "model": "m", "tools": []},
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Hal"}]},
        },
    )
    without = json.loads(normalize("--summary", "--dialect", "claude", stdin=stream).stdout)
    assert without["stopReason"] is None
    aborted = json.loads(
        normalize("--summary", "--dialect", "claude", "--exit-code", "143", stdin=stream).stdout
    )
    assert (aborted["stopReason"], aborted["rawStopReason"]) == ("aborted", "exit 143")


def test_unreadable_file_fails_and_bad_flags_are_usage_errors(tmp_path: Path) -> None:
    proc = normalize(str(tmp_path / "missing.log"))
    assert proc.returncode == 1
    assert b"missing.log" in proc.stderr
    assert normalize("--dialect", "nope").returncode == 2


@pytest.mark.skipif(not SHARED_STREAMS.is_dir(), reason="../shared/streams is not present")
@pytest.mark.parametrize(
    ("capture", "dialect", "stop"),
    [
        ("claude_tooluse_v2.1.3.jsonl", "claude", "stop"),
        ("codex_tooluse_v0.46.jsonl", "codex", "stop"),
        ("gemini_real_autherror_v0.50.jsonl", "gemini", "error"),
        ("amp_stream_json_official.jsonl", "amp", "stop"),
    ],
)
def test_real_captures_are_recognised(capture: str, dialect: str, stop: str) -> None:
    summary = json.loads(normalize("--summary", str(SHARED_STREAMS / capture)).stdout)
    assert (summary["dialect"], summary["stopReason"]) == (dialect, stop)
    assert summary["sessionId"]


def test_summary_of_a_failed_run_without_text_has_no_final_text() -> None:
    stream = lines(
        {"type": "thread.started", "thread_id": "t-1"},
        {"type": "turn.started"},
        {"type": "turn.failed", "error": {"message": "unexpected status 401"}},
    )
    proc = normalize("--summary", "--dialect", "codex", "-", stdin=stream)
    summary = json.loads(proc.stdout)
    assert (summary["stopReason"], summary["finalText"]) == ("error", None)


def test_summary_keeps_the_last_word_of_a_run_that_never_ended() -> None:
    stream = lines(
        {
            "type": "message_end",
            "message": {"role": "assistant", "content": [], "stopReason": "pause_turn"},
        }
    )
    proc = normalize("--summary", "--dialect", "pi", "-", stdin=stream)
    summary = json.loads(proc.stdout)
    assert (summary["stopReason"], summary["rawStopReason"]) == ("pause_turn", "pause_turn")
    assert summary["finalText"] is None


def test_a_stream_with_no_recognised_line_says_so_in_the_summary_and_on_stderr(
    tmp_path: Path,
) -> None:
    path = tmp_path / "stdout.log"
    path.write_bytes(b"Hello! How can I help?\n\nAnything else?\n")
    proc = normalize("--summary", "--dialect", "claude", str(path))
    assert proc.returncode == 0
    [warning] = json.loads(proc.stdout)["warnings"]
    assert warning["code"] == "output_unrecognised"
    assert (
        "none of the 3 lines of the stream was recognised as a claude event" in (warning["message"])
    )
    assert "`claude -p --output-format stream-json --verbose`" in warning["message"]
    assert proc.stderr.decode().strip() == f"agent-wrapper normalize: warning: {warning['message']}"


def test_the_events_of_an_unrecognised_stream_end_with_the_warning() -> None:
    proc = normalize("--dialect", "pi", stdin=b'{"type": "nothing_pi_writes"}\n')
    assert proc.returncode == 0
    last = json.loads(proc.stdout.splitlines()[-1])
    assert (last["type"], last["code"]) == ("warning", "output_unrecognised")
    assert "the one line of the stream was not recognised as a pi event" in last["message"]
    assert "`pi --mode json -p`" in last["message"]
    assert b"output_unrecognised" not in proc.stderr
    assert b"warning: the one line" in proc.stderr


def test_an_unrecognised_stream_without_a_dialect_asks_for_one() -> None:
    proc = normalize("--summary", stdin=b"plain text\n")
    [warning] = json.loads(proc.stdout)["warnings"]
    assert "recognised as any known agent's event: pass --dialect" in warning["message"]


def test_an_empty_stream_says_it_is_empty() -> None:
    proc = normalize("--summary", "--dialect", "codex", stdin=b"")
    [warning] = json.loads(proc.stdout)["warnings"]
    assert warning["message"] == "the stream was empty (no line at all)"


def test_a_recognised_stream_has_no_such_warning() -> None:
    proc = normalize("--summary", stdin=PI_STREAM)
    assert json.loads(proc.stdout)["warnings"] == []
    assert proc.stderr == b""


def test_a_warning_repeated_on_every_line_is_kept_twenty_times_then_counted() -> None:
    stream = b"{}\n" * 500
    summary = json.loads(normalize("--summary", "--dialect", "acp", "-", stdin=stream).stdout)
    codes = [warning["code"] for warning in summary["warnings"]]
    assert codes == ["acp_malformed"] * 21
    assert summary["warnings"][-1]["message"].startswith("480 more acp_malformed warnings")
    events = [
        json.loads(line)
        for line in normalize("--dialect", "acp", "-", stdin=stream).stdout.splitlines()
    ]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert sum(e["type"] == "warning" for e in events) == 21


def test_a_reader_that_stops_early_ends_it_quietly_and_successfully(tmp_path: Path) -> None:
    # Far more than a pipe holds, so that normalize is still writing when
    # the reader goes away (``normalize FILE | head -1``).
    stream = tmp_path / "long.jsonl"
    stream.write_bytes(PI_STREAM * 20000)
    shell = f"{sys.executable} -m wrapper normalize {stream} | head -1 >/dev/null"
    proc = subprocess.run(
        ["bash", "-c", shell + "; echo ${PIPESTATUS[0]}"],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT,
        check=False,
    )
    assert proc.stdout == "0\n"
    assert proc.stderr == ""
