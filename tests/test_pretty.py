"""The live view: what a person watching the run reads."""

from __future__ import annotations

from collections.abc import Sequence

from wrapper.core.events import (
    AssistantMessage,
    Escalated,
    Event,
    RunStarted,
    Spawned,
    StderrLine,
    TextDelta,
    ToolEnded,
    ToolStarted,
    Usage,
)
from wrapper.sinks.pretty import HEADER_CHARS, PrettyView


def shown(events: Sequence[tuple[Event, float]], **options: str) -> str:
    view = PrettyView(color=False, **options)
    return "".join(view.render(event, elapsed) for event, elapsed in events)


def test_claudes_final_text_is_printed_once() -> None:
    progress = AssistantMessage(text="The parser is fixed.")
    result = AssistantMessage(
        stop_reason="stop", raw_stop_reason="end_turn", text="The parser is fixed."
    )
    out = shown([(progress, 1.0), (result, 1.2)])
    assert out.count("The parser is fixed.") == 1
    assert "─ stop · 1.2s" in out


def test_streamed_text_then_its_messages_is_printed_once() -> None:
    events: list[tuple[Event, float]] = [
        (TextDelta(text="The parser "), 0.5),
        (TextDelta(text="is fixed."), 0.6),
        (AssistantMessage(text="The parser is fixed."), 0.7),
        (AssistantMessage(stop_reason="stop", text="The parser is fixed."), 0.8),
    ]
    assert shown(events).count("is fixed.") == 1


def test_a_message_in_progress_prints_no_empty_status() -> None:
    out = shown([(AssistantMessage(text="Looking."), 0.4)])
    assert out == "Looking.\n"
    assert "no stop reason" not in out
    assert "0 tokens" not in out


def test_tokens_are_shown_once_known() -> None:
    message = AssistantMessage(stop_reason="stop", text="Hi.", usage=Usage(total_tokens=1234))
    assert "─ stop · 2.0s · 1,234 tokens" in shown([(message, 2.0)])


def test_stderr_lines_amid_a_streamed_line_leave_the_answer_readable_whole() -> None:
    # Gemini CLI writes start-up notes on stderr while it streams its answer.
    events: list[tuple[Event, float]] = [
        (TextDelta(text="Hello from"), 0.5),
        (StderrLine(text="Loaded cached credentials."), 0.6),
        (StderrLine(text="Using the mock."), 0.6),
        (TextDelta(text=" mock.\nSecond line."), 0.7),
        (AssistantMessage(stop_reason="stop", text="Hello from mock.\nSecond line."), 0.8),
    ]
    assert shown(events).splitlines() == [
        "Hello from …",
        "  stderr: Loaded cached credentials.",
        "  stderr: Using the mock.",
        "… mock.",
        "Second line.",
        "  ─ stop · 0.8s",
    ]


def test_stderr_lines_after_a_finished_line_mark_nothing() -> None:
    events: list[tuple[Event, float]] = [
        (TextDelta(text="First line.\n"), 0.5),
        (StderrLine(text="note"), 0.6),
        (TextDelta(text="Second line."), 0.7),
        (ToolStarted(tool="bash", summary="ls"), 0.8),
        (StderrLine(text="late note"), 0.9),
        (TextDelta(text="After the tool."), 1.0),
    ]
    assert shown(events).splitlines() == [
        "First line.",
        "  stderr: note",
        "Second line.",
        "  ⚙ bash  ls",
        "  stderr: late note",
        "After the tool.",
    ]


def test_a_long_command_line_keeps_the_task_and_closes_its_quotes() -> None:
    task = "Fix the 'range' parser: " + "x" * 300
    argv = ("claude", "-p", "--output-format", "stream-json", "--verbose", *["--flag"] * 40)
    line = shown([(Spawned(pid=42, argv=(*argv, "--", task), dialect="claude"), 0.0)])
    header = line.removeprefix("▶ ").removesuffix(" (pid 42)\n")
    assert len(header) <= HEADER_CHARS
    assert header.startswith("claude -p")
    assert "…" in header
    # the task is there, cut but quoted: the shell would read it back as one word
    assert header.endswith("…'")
    assert "'Fix the '\"'\"'range'\"'\"' parser: xxx" in header


def test_a_short_command_line_is_shown_whole() -> None:
    line = shown([(Spawned(pid=7, argv=("pi", "-p", "Say hi"), dialect="pi"), 0.0)])
    assert line == "▶ pi -p 'Say hi' (pid 7)\n"


def test_a_long_tool_says_when_it_ends_and_how_long_it_took() -> None:
    events: list[tuple[Event, float]] = [
        (ToolStarted(tool="bash", tool_call_id="c1", summary="make"), 1.0),
        (ToolStarted(tool="read", tool_call_id="c2", summary="a.py"), 1.1),
        (ToolEnded(tool="read", tool_call_id="c2"), 1.2),
        (ToolEnded(tool="bash", tool_call_id="c1"), 13.5),
        (ToolStarted(tool="bash", tool_call_id="c3", summary="false"), 14.0),
        (ToolEnded(tool="bash", tool_call_id="c3", is_error=True), 14.1),
    ]
    lines = shown(events).splitlines()
    assert lines == [
        "  ⚙ bash  make",
        "  ⚙ read  a.py",
        "  ✓ bash done · 12.5s",
        "  ⚙ bash  false",
        "  ✗ bash failed · 0.1s",
    ]


def test_a_run_waiting_for_a_person_says_how_to_reply() -> None:
    event = Escalated(id="esc-1", question="Drop the old API?")
    out = shown([(event, 5.0)], reply="agent-wrapper reply /tmp/run")
    assert "? waiting for a person (esc-1): Drop the old API?" in out
    assert "agent-wrapper reply /tmp/run --escalation esc-1 'your answer'" in out
    assert "--continue" in out
    assert "--stop" in out


def test_terminal_control_sequences_in_agent_text_are_removed() -> None:
    hostile = (
        "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # clipboard write
        "Done\x1b]0;new title\x1b\\"  # window title
        "\x1b[2J\x1b[H"  # clear the screen
        ":\tall\x1b[31m good\x1b[0m\r\n"
        "\x9b2Jsecond line\x07\x08\n"
    )
    out = shown([(TextDelta(text=hostile), 0.1)])
    assert out == "Done:\tall good\n2Jsecond line\n"
    message = AssistantMessage(stop_reason="stop", text="ok\x1b]52;c;eA==\x07!")
    assert shown([(message, 0.2)]).startswith("ok!\n")
    assert shown([(StderrLine(text="\x1b[1mwarn\x1b[0m"), 0.3)]) == "  stderr: warn\n"


def test_on_a_terminal_a_long_tool_shows_its_elapsed_time_in_place() -> None:
    view = PrettyView(color=False)
    assert view.ticker(0.5) == "", "nothing runs: nothing to show"
    view.render(ToolStarted(tool="bash", tool_call_id="c1", summary="make"), 1.0)
    assert view.ticker(2.0) == "", "a tool that just started needs no clock"
    first = view.ticker(4.2)
    assert first == "\r\x1b[2K  ⋯ bash running · 3s"
    assert view.ticker(5.2) == "\r\x1b[2K  ⋯ bash running · 4s"
    # the next output replaces the status line instead of running on from it
    end = view.render(ToolEnded(tool="bash", tool_call_id="c1"), 6.0)
    assert end == "\r\x1b[2K  ✓ bash done · 5.0s\n"
    assert view.ticker(7.0) == ""
    assert view.render(TextDelta(text="Built."), 7.5) == "Built."


def test_a_run_says_first_where_it_is_and_how_to_steer_it_whole() -> None:
    run_dir = (
        "/home/you/" + "a very long project name " * 12 + "/.agent-wrapper/runs/20261128T054848Z"
    )
    spawned = Spawned(pid=7, argv=("pi", "--mode", "rpc"), dialect="pi")
    out = shown(
        [(RunStarted(run_dir=run_dir), 0.0), (spawned, 0.1)],
        wrapper="/opt/venv/bin/agent-wrapper",
    )
    first, second, third = out.splitlines()
    assert first == f"● run directory: {run_dir}"
    quoted = f"'{run_dir}'"
    assert second == f"  to steer it:  /opt/venv/bin/agent-wrapper steer {quoted} --text '...'"
    assert third.startswith("▶ pi --mode rpc")


def test_a_run_without_a_run_directory_shows_no_steer_command() -> None:
    assert shown([(RunStarted(run_dir=None), 0.0)]) == ""
