"""THE table of the conformance tier: what a user sees, per CLI and scenario.

Scenarios (the mock's scripts, chosen by a marker in the task):

- ``plain``: one answer.
- ``tool``: a call of the CLI's own shell tool that writes a file, then an answer.
- ``steer``: an answer; a Stop hook blocks once; the resumed request must carry
  the first answer and the hook's reason, then the final answer.
- ``steer_tool``: as ``steer``, with a shell tool call in the steered turn.
- ``overload``: the first request fails (529 for Anthropic, 500 elsewhere),
  the CLI's retry succeeds.
- ``auth``: every request is refused with 401.
- ``length``: the answer stops at the output-token limit.
- ``slow``: a shell tool that runs 3 s, longer than ``--grace 1``.

Every row also implies: result.json valid, no process of the run left, and
(``signals`` False) no signal sent to the agent, which exits by itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.real import mock_server as m

SCENARIOS = ("plain", "tool", "steer", "steer_tool", "overload", "auth", "length", "slow")


@dataclass(frozen=True, slots=True)
class Expect:
    outcome: str
    stop: str
    raw: str | None
    exit: int
    #: finalText; None: not asserted (an error's text is the CLI's own wording).
    final: str | None
    steers: int = 0
    tools: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    #: Whether the wrapper may send a signal (never, for an agent that exits by itself).
    signals: bool = False


def _row(
    shell: str, raw_stop: str, raw_length: str, raw_error: str, **special: Expect
) -> dict[str, Expect]:
    """The rows of one CLI: what every well-behaved CLI does, then its exceptions."""
    rows = {
        "plain": Expect("ok", "stop", raw_stop, 0, m.PLAIN_ANSWER),
        "tool": Expect(
            "ok", "stop", raw_stop, 0, m.TOOL_ANSWER, tools=(shell,), files={m.TOOL_FILE: "tool-ok"}
        ),
        "steer": Expect("ok", "stop", raw_stop, 0, m.STEERED_ANSWER, steers=1),
        "steer_tool": Expect(
            "ok",
            "stop",
            raw_stop,
            0,
            m.STEERED_ANSWER,
            steers=1,
            tools=(shell,),
            files={m.STEER_FILE: "steer-ok"},
        ),
        "overload": Expect("ok", "stop", raw_stop, 0, m.PLAIN_ANSWER),
        "auth": Expect("error", "error", raw_error, 1, None),
        "length": Expect("ok", "length", raw_length, 0, m.LENGTH_TEXT),
        "slow": Expect(
            "ok", "stop", raw_stop, 0, m.TOOL_ANSWER, tools=(shell,), files={m.SLOW_FILE: "slow-ok"}
        ),
    }
    rows.update(special)
    return rows


#: cli -> scenario -> what the user sees.
EXPECTED: dict[str, dict[str, Expect]] = {
    "pi": _row("bash", "stop", "length", "error"),
    "claude": _row(
        "Bash",
        "end_turn",
        "max_tokens",
        "is_error",
        # Claude Code turns the API's max_tokens into an error result ("Claude's
        # response exceeded the 32000 output token maximum", the assistant line
        # says error: max_output_tokens) and exits 1: the limit is still the
        # stop reason; the non-zero exit after it makes the run an error.
        length=Expect("error", "length", "max_output_tokens", 1, None),
    ),
    "codex": _row(
        "command_execution",
        "turn.completed",
        "turn.failed",
        "turn.failed",
        # An incomplete response (max_output_tokens) ends the turn with
        # turn.failed and exit 1: stop reason length, the run an error.
        length=Expect("error", "length", "turn.failed", 1, None),
    ),
    "gemini": _row(
        "run_shell_command",
        "success",
        "success",
        "error",
        # Gemini CLI 0.61's stream-json mode drops the model's finish reason
        # (MAX_TOKENS leaves no trace on stdout or in its session file): the
        # run looks like a plain success. Recorded as the CLI shows it.
        length=Expect("ok", "stop", "success", 0, m.LENGTH_TEXT),
        # The case's own --grace 1 is shorter than the 3-8 s Gemini takes to
        # exit after a shell tool: the wrapper ends it, as the user asked.
        slow=Expect(
            "ok",
            "stop",
            "success",
            0,
            m.TOOL_ANSWER,
            tools=("run_shell_command",),
            files={m.SLOW_FILE: "slow-ok"},
            signals=True,
        ),
    ),
    "opencode": _row("bash", "stop", "length", "APIError"),
    # Qwen Code 0.24.4's -o stream-json: Claude Code's stream (the claude
    # dialect), with no stop_reason on its result line (raw: the subtype).
    "qwen": _row(
        "run_shell_command",
        "success",
        "success",
        "error_during_execution",
        # Qwen Code answers finish_reason "length" by asking the model to go
        # on (a system/retry line each time), three times, then ends the turn
        # as a success holding the four pieces: the limit leaves no trace in
        # its stream, so the run looks like a plain success.
        length=Expect("ok", "stop", "success", 0, m.LENGTH_TEXT * 4),
    ),
}


#: (cli, version) -> the rows where that pinned version differs from the CLI's
#: own, each with a comment saying what the version does.
BY_VERSION: dict[tuple[str, str], dict[str, Expect]] = {
    ("claude", "2.1.332"): {
        # Claude Code 2.1.332's result line of a refused key says
        # terminal_reason "api_error" (2.1.197 said nothing more than
        # is_error): the dialect keeps the more telling raw reason.
        "auth": Expect("error", "error", "api_error", 1, None),
    },
}


def expected(cli: str, version: str) -> dict[str, Expect]:
    """The rows of one version of a CLI."""
    return EXPECTED[cli] | BY_VERSION.get((cli, version), {})
