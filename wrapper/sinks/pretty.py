"""A readable live view of a run, for a person watching a terminal or tmux pane.

Whatever the agent writes is shown as plain text: terminal control sequences
in it (a clipboard write, a title change, a screen clear) would act on the
person's terminal, so they are removed; newlines and tabs stay.
"""

from __future__ import annotations

import re
import shlex

from wrapper.core.control import delivered_how
from wrapper.core.cost import cost_text
from wrapper.core.events import (
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
    RunStarted,
    SignalSent,
    Spawned,
    StderrLine,
    Steer,
    SteerDelivered,
    SteerRefused,
    SteerRequested,
    SteerSent,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnStarted,
    UnparsedLine,
    WarningEvent,
    is_terminal,
)
from wrapper.core.limits import TICK_AFTER_SECONDS, TOOL_END_LINE_SECONDS

_DIM, _BOLD, _RED, _GREEN, _YELLOW, _CYAN, _RESET = (
    "\x1b[2m",
    "\x1b[1m",
    "\x1b[31m",
    "\x1b[32m",
    "\x1b[33m",
    "\x1b[36m",
    "\x1b[0m",
)


#: Escape sequences (OSC up to its terminator or the end, CSI, DCS/PM/APC
#: strings, two-byte escapes) and every C0/C1 control but newline and tab.
_CONTROLS = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)

#: The header shows each argument of the command cut to this many characters,
#: and at most this many characters of the whole, keeping its first and last
#: arguments (the executable, the task).
HEADER_ARG_CHARS = 60
HEADER_CHARS = 200
#: Carriage return and erase-line: replaces the status line in place.
_ERASE_LINE = "\r\x1b[2K"


def plain(text: str) -> str:
    """``text`` without terminal control sequences; newlines and tabs kept."""
    return _CONTROLS.sub("", text)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def command_line(argv: tuple[str, ...] | list[str]) -> str:
    """A shell-quoted, shortened command line: every quote is closed, and the
    last argument (where the task goes) is never cut off by a long middle."""
    words = [shlex.quote(_clip(plain(arg), HEADER_ARG_CHARS)) for arg in argv]
    line = " ".join(words)
    if len(line) <= HEADER_CHARS or len(words) < 3:
        return line
    head, tail = words[:1], words[-1:]
    for word in words[1:-1]:
        if len(" ".join([*head, word, "…", *tail])) > HEADER_CHARS:
            break
        head.append(word)
    return " ".join([*head, "…", *tail])


class PrettyView:
    """Turns events into text. ``render`` returns what to print, possibly ''.

    ``reply`` is the command a person runs to answer the run (``agent-wrapper
    reply RUN_DIR``), shown when the run waits for one. ``wrapper`` is how a
    person runs the wrapper (a shell word), in the command to steer the run
    shown at its start.
    """

    def __init__(
        self,
        *,
        color: bool,
        label: str | None = None,
        reply: str | None = None,
        wrapper: str = "agent-wrapper",
    ) -> None:
        self._color = color
        self._label = label
        self._reply = reply
        self._wrapper = wrapper
        self._streaming = False
        #: The last text streamed did not end its line.
        self._line_open = False
        #: A streamed line was cut by the agent's stderr lines: its rest,
        #: when it comes, is marked as continuing it.
        self._cut = False
        self._streamed_text = False
        #: The text of the last assistant message shown, so that a final
        #: message repeating it (Claude's result line) is not printed twice.
        self._said = ""
        self._tokens = 0
        self._stop = ""
        #: Each running tool (by call id, else name): its name and when it
        #: started, in run seconds.
        self._tools: dict[str, tuple[str, float]] = {}
        #: A status line is on screen, to be erased before the next output.
        self._ticking = False

    def _c(self, style: str, text: str) -> str:
        return f"{style}{text}{_RESET}" if self._color else text

    def render(self, event: Event, elapsed: float) -> str:
        erase, self._ticking = (_ERASE_LINE if self._ticking else ""), False
        return erase + self._render(event, elapsed)

    def ticker(self, elapsed: float) -> str:
        """The status line of the longest-running tool (on a terminal, called
        every ``TICK_SECONDS``): it replaces itself, and the next output
        replaces it. '' when no tool has been running long."""
        if self._streaming or not self._tools:
            return ""
        name, started = min(self._tools.values(), key=lambda tool: tool[1])
        if elapsed - started < TICK_AFTER_SECONDS:
            return ""
        self._ticking = True
        line = self._c(_DIM, f"  ⋯ {plain(name)} running · {elapsed - started:.0f}s")
        return _ERASE_LINE + line

    def _render(self, event: Event, elapsed: float) -> str:
        if isinstance(event, TextDelta):
            return self._delta(plain(event.text))
        prefix = ""
        if self._streaming:
            self._streaming = False
            open_line, self._line_open = self._line_open, False
            if isinstance(event, StderrLine):
                # Agents write notes on stderr while they stream (Gemini CLI
                # does at start-up): the cut line says it goes on, and its
                # rest, after the notes, says it continues, so the answer
                # reads whole around them.
                if open_line:
                    prefix = self._c(_DIM, " …") + "\n"
                    self._cut = True
            else:
                prefix = "\n"
        text = self._line(event, elapsed)
        if text and not isinstance(event, StderrLine):
            self._cut = False
        return prefix + text + "\n" if text else prefix

    def _delta(self, text: str) -> str:
        self._streaming = True
        self._streamed_text = True
        if not text:
            return ""
        lead = ""
        if self._cut and not text.startswith("\n"):
            lead = self._c(_DIM, "…" if text.startswith(" ") else "… ")
        self._cut = False
        self._line_open = not text.endswith("\n")
        return lead + text

    def _line(self, event: Event, elapsed: float) -> str:
        if isinstance(event, AssistantMessage):
            if is_terminal(event.stop_reason):
                self._stop = f" ({event.stop_reason})"
            if event.usage is not None and event.usage.total_tokens:
                self._tokens += event.usage.total_tokens
            repeated = self._streamed_text or event.text == self._said
            body = "" if repeated else plain(event.text)
            self._streamed_text = False
            self._said = event.text or self._said
            if event.stop_reason is None:
                # a message still in progress (Claude's assistant lines): its
                # text is worth showing, a status without a reason is not
                return body
            tokens = f" · {self._tokens:,} tokens" if self._tokens else ""
            status = self._c(_DIM, f"  ─ {plain(event.stop_reason)} · {elapsed:.1f}s{tokens}")
            return f"{body}\n{status}" if body else status
        if isinstance(event, TurnStarted):
            self._said = ""
            return ""
        if isinstance(event, ToolStarted):
            self._said = ""
            self._tools[event.tool_call_id or event.tool] = (event.tool, elapsed)
            arg = f"  {plain(event.summary)}" if event.summary else ""
            return self._c(_CYAN, f"  ⚙ {plain(event.tool)}") + self._c(_DIM, arg)
        if isinstance(event, ToolEnded):
            running = self._tools.pop(event.tool_call_id or event.tool, None)
            took = elapsed - running[1] if running is not None else None
            duration = f" · {took:.1f}s" if took is not None else ""
            if event.is_error:
                return self._c(_RED, f"  ✗ {plain(event.tool)} failed{duration}")
            if took is not None and took >= TOOL_END_LINE_SECONDS:
                return self._c(_DIM, f"  ✓ {plain(event.tool)} done{duration}")
            return ""
        if isinstance(event, Retry):
            if event.phase != "start":
                return ""
            what = (
                f" (attempt {event.retry_attempt}/{event.max_attempts})"
                if event.retry_attempt
                else ""
            )
            return self._c(_YELLOW, f"  ↻ retrying{what}: {plain(event.message or '')}")
        if isinstance(event, RunStarted):
            if event.run_dir is None:
                return ""
            # Whole, never cut: it is what a person copies to find or steer the run.
            steer = f"{self._wrapper} steer {shlex.quote(event.run_dir)} --text '...'"
            return (
                self._c(_DIM, "● run directory: ")
                + plain(event.run_dir)
                + "\n"
                + self._c(_DIM, "  to steer it:  ")
                + plain(steer)
            )
        if isinstance(event, Spawned):
            name = f"{plain(self._label)}: " if self._label else ""
            return self._c(_DIM, f"▶ {name}{command_line(event.argv)} (pid {event.pid})")
        if isinstance(event, GraceStarted | GraceCancelled | SignalSent | Exited):
            return self._c(_DIM, f"  · {_describe(event)}")
        if isinstance(event, HookDecision):
            verdict = event.decision if event.warning is None else f"allow ({event.warning})"
            reason = f": {event.reason}" if event.reason else ""
            line = plain(f"  ⚑ {event.event} {event.handler} → {verdict}{reason}")
            return self._c(_DIM, _clip(line, 300))
        if isinstance(event, Steer):
            line = plain(f"↪ steering (attempt {event.next_attempt}): {event.reason}")
            return self._c(_YELLOW, _clip(line, 300))
        if isinstance(event, SteerRequested):
            when = " at the next stop" if event.when == "next-stop" else ""
            return self._c(_YELLOW, f"↪ steer {event.id} from outside{when} (queued)")
        if isinstance(event, SteerDelivered):
            how = delivered_how(event.how)
            line = f"↪ steer {event.id} delivered {how} (attempt {event.next_attempt})"
            return self._c(_YELLOW, line)
        if isinstance(event, SteerSent):
            attempt = event.next_attempt
            line = f"↪ steer {event.id} sent live (attempt {attempt}), not yet acknowledged"
            return self._c(_YELLOW, line)
        if isinstance(event, SteerRefused):
            return self._c(_YELLOW, _clip(plain(f"  ! steer {event.id} refused: {event.why}"), 300))
        if isinstance(event, Escalated):
            question = _tail(plain(event.question or ""), 400)
            line = self._c(_BOLD + _YELLOW, f"? waiting for a person ({event.id}): {question}")
            if self._reply is not None:
                answer = f"{self._reply} --escalation {shlex.quote(event.id)}"
                line += "\n" + self._c(
                    _YELLOW,
                    f"  to answer: {answer} 'your answer'   (or --continue, or --stop)",
                )
            return line
        if isinstance(event, EscalationAnswered):
            text = f": {plain(event.text)}" if event.text else ""
            return self._c(_YELLOW, f"  ↩ {event.id} answered ({event.answer}){text}")
        if isinstance(event, WarningEvent):
            return self._c(_YELLOW, f"  ! {plain(event.message)}")
        if isinstance(event, StderrLine):
            return self._c(_DIM, f"  stderr: {plain(event.text)}")
        if isinstance(event, UnparsedLine) and event.reason != "blank line":
            return self._c(_DIM, f"  ? {plain(event.text[:200])}")
        if isinstance(event, ResultWritten):
            style = _GREEN if event.outcome == "ok" else _RED
            where = event.path or "(stderr)"
            line = self._c(_BOLD + style, f"■ {event.outcome}{self._stop}") + self._c(
                _DIM,
                f" in {elapsed:.1f}s · {self._tokens:,} tokens · cost {cost_text(event.cost_usd)}"
                f" · result: {where}",
            )
            if event.error is not None:
                line += "\n" + self._c(style, f"  {plain(str(event.error['message']))}")
            return line
        return ""


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


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
