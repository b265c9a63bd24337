"""A readable live view of a run, for a person watching a terminal or tmux pane."""

from __future__ import annotations

from wrapper.events import (
    AssistantMessage,
    Escalated,
    EscalationAnswered,
    Event,
    Exited,
    GraceCancelled,
    GraceStarted,
    HookDecision,
    ResultWritten,
    Retry,
    SignalSent,
    Spawned,
    StderrLine,
    Steer,
    TextDelta,
    ToolEnded,
    ToolStarted,
    UnparsedLine,
    WarningEvent,
    is_terminal,
)

_DIM, _BOLD, _RED, _GREEN, _YELLOW, _CYAN, _RESET = (
    "\x1b[2m",
    "\x1b[1m",
    "\x1b[31m",
    "\x1b[32m",
    "\x1b[33m",
    "\x1b[36m",
    "\x1b[0m",
)


class PrettyView:
    """Turns events into text. ``render`` returns what to print, possibly ''."""

    def __init__(self, *, color: bool, label: str | None = None) -> None:
        self._color = color
        self._label = label
        self._streaming = False
        self._streamed_text = False
        self._tokens = 0
        self._stop = ""

    def _c(self, style: str, text: str) -> str:
        return f"{style}{text}{_RESET}" if self._color else text

    def render(self, event: Event, elapsed: float) -> str:
        if isinstance(event, TextDelta):
            self._streaming = True
            self._streamed_text = True
            return event.text
        prefix = ""
        if self._streaming:
            self._streaming = False
            prefix = "\n"
        text = self._line(event, elapsed)
        return prefix + text + "\n" if text else prefix

    def _line(self, event: Event, elapsed: float) -> str:
        if isinstance(event, AssistantMessage):
            if is_terminal(event.stop_reason):
                self._stop = f" ({event.stop_reason})"
            if event.usage is not None and event.usage.total_tokens:
                self._tokens += event.usage.total_tokens
            body = "" if self._streamed_text else event.text
            self._streamed_text = False
            status = self._c(
                _DIM,
                f"  ─ {event.stop_reason or 'no stop reason'} · {elapsed:.1f}s · "
                f"{self._tokens:,} tokens",
            )
            return f"{body}\n{status}" if body else status
        if isinstance(event, ToolStarted):
            arg = f"  {event.summary}" if event.summary else ""
            return self._c(_CYAN, f"  ⚙ {event.tool}") + self._c(_DIM, arg)
        if isinstance(event, ToolEnded):
            return self._c(_RED, f"  ✗ {event.tool} failed") if event.is_error else ""
        if isinstance(event, Retry):
            if event.phase != "start":
                return ""
            what = (
                f" (attempt {event.retry_attempt}/{event.max_attempts})"
                if event.retry_attempt
                else ""
            )
            return self._c(_YELLOW, f"  ↻ retrying{what}: {event.message or ''}")
        if isinstance(event, Spawned):
            name = f"{self._label}: " if self._label else ""
            return self._c(_DIM, f"▶ {name}{' '.join(event.argv)[:160]} (pid {event.pid})")
        if isinstance(event, GraceStarted | GraceCancelled | SignalSent | Exited):
            return self._c(_DIM, f"  · {_describe(event)}")
        if isinstance(event, HookDecision):
            verdict = event.decision if event.warning is None else f"allow ({event.warning})"
            reason = f": {event.reason}" if event.reason else ""
            return self._c(_DIM, f"  ⚑ {event.event} {event.handler} → {verdict}{reason}"[:300])
        if isinstance(event, Steer):
            return self._c(
                _YELLOW, f"↪ steering (attempt {event.next_attempt}): {event.reason}"[:300]
            )
        if isinstance(event, Escalated):
            return self._c(
                _BOLD + _YELLOW,
                f"? waiting for a person ({event.id}): {event.question or ''}"[-400:],
            )
        if isinstance(event, EscalationAnswered):
            text = f": {event.text}" if event.text else ""
            return self._c(_YELLOW, f"  ↩ {event.id} answered ({event.answer}){text}")
        if isinstance(event, WarningEvent):
            return self._c(_YELLOW, f"  ! {event.message}")
        if isinstance(event, StderrLine):
            return self._c(_DIM, f"  stderr: {event.text}")
        if isinstance(event, UnparsedLine) and event.reason != "blank line":
            return self._c(_DIM, f"  ? {event.text[:200]}")
        if isinstance(event, ResultWritten):
            style = _GREEN if event.outcome == "ok" else _RED
            where = event.path or "(stderr)"
            line = self._c(_BOLD + style, f"■ {event.outcome}{self._stop}") + self._c(
                _DIM, f" in {elapsed:.1f}s · {self._tokens:,} tokens · result: {where}"
            )
            if event.error is not None:
                line += "\n" + self._c(style, f"  {event.error['message']}")
            return line
        return ""


def _describe(event: Event) -> str:
    if isinstance(event, GraceStarted):
        if event.settled:
            return f"the agent says it is done: waiting {event.seconds:g}s for it to exit"
        return f"final message ({event.stop_reason}): waiting {event.seconds:g}s for exit"
    if isinstance(event, GraceCancelled):
        return f"still working: {event.reason}"
    if isinstance(event, SignalSent):
        return f"sent {event.signal}: {event.reason}"
    if isinstance(event, Exited):
        return f"agent exited ({event.exit_signal or event.exit_code})"
    return event.TYPE
