"""The run options, defined once: the flags of ``run`` and ``batch`` on the
command line, the keyword arguments of ``wrapper.run`` and the keys of a
batch line are these, each value checked the same way (``fleet.spec.one_value``
converts a value as the flag's own type would)."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number of seconds, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected more than 0 seconds")
    return value


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def usd(text: str) -> float:
    try:
        value = float(text.removeprefix("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount of USD, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected an amount of USD above 0, got {text!r}")
    return value


def add_run_options(parser: argparse.ArgumentParser, *, one_run: bool = True) -> None:
    """The options of a run, for ``run`` and (as the defaults of every line)
    ``batch``. Without ``one_run`` (a batch), the options that name one run
    alone (its label, directory and result) are not shown in the help: the
    batch refuses them, pointing at the spec's keys, so they are still read."""
    from wrapper.core.config import (
        CONTEXT_POLICIES,
        DEFAULT_DRAIN_TIMEOUT,
        DEFAULT_ESCALATION_TIMEOUT,
        DEFAULT_GRACE,
        DEFAULT_KILL_AFTER,
        DEFAULT_MAX_DEPTH,
        DEFAULT_MAX_EXTERNAL_STEERS,
        DEFAULT_MAX_STEERS,
        DEFAULT_RUNS_ROOT,
        DEFAULT_SETTLE_GRACE,
        DEFAULT_STEER_TIMEOUT,
        ColorMode,
        OutputMode,
    )
    from wrapper.core.cost import ON_BUDGET
    from wrapper.core.framing import DEFAULT_MAX_LINE_BYTES
    from wrapper.core.registry import BY_NAME

    task = parser.add_mutually_exclusive_group()
    task.add_argument(
        "--task", metavar="TEXT", help="the prompt, placed where the agent expects it"
    )
    task.add_argument(
        "--task-file", metavar="PATH", help="read the prompt from PATH (- for standard input)"
    )
    parser.add_argument(
        "--dialect",
        choices=["auto", *sorted(BY_NAME)],
        default="auto",
        help="the agent's stream format (default: auto, from the command line)",
    )

    def one_runs(text: str) -> str:
        return text if one_run else argparse.SUPPRESS

    parser.add_argument("--label", metavar="TEXT", help=one_runs("a human name for the run"))
    parser.add_argument(
        "--run-dir",
        metavar="DIR",
        help=one_runs(f"where the run's files go (default: ./{DEFAULT_RUNS_ROOT}/RUN_ID)"),
    )
    parser.add_argument(
        "--result",
        metavar="PATH",
        type=Path,
        help=one_runs("where result.json goes (default: RUN_DIR/result.json)"),
    )
    parser.add_argument(
        "--grace",
        metavar="SECONDS",
        type=seconds,
        default=None,
        help="how long the agent may keep running after its final message "
        f"(default: the agent's, see docs/dialects; {DEFAULT_GRACE:g} for an unknown agent "
        "until its stream is recognised)",
    )
    parser.add_argument(
        "--settle-grace",
        metavar="SECONDS",
        type=seconds,
        default=None,
        help="the same, once the agent said it is completely done "
        f"(default: the agent's, see docs/dialects; {DEFAULT_SETTLE_GRACE:g} for an unknown agent "
        "until its stream is recognised)",
    )
    parser.add_argument(
        "--kill-after",
        metavar="SECONDS",
        type=seconds,
        default=DEFAULT_KILL_AFTER,
        help=f"SIGTERM to SIGKILL (default {DEFAULT_KILL_AFTER:g})",
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=positive_seconds,
        help="hard limit on the whole run (default: none)",
    )
    parser.add_argument(
        "--attempt-timeout",
        metavar="SECONDS",
        type=positive_seconds,
        help="limit on each attempt; an expired attempt still goes through the Stop hooks "
        "(default: none)",
    )
    parser.add_argument(
        "--idle-timeout",
        metavar="SECONDS",
        type=positive_seconds,
        help="end the run when the agent writes nothing for this long while no tool is "
        "running (default: off)",
    )
    parser.add_argument(
        "--settings",
        metavar="FILE",
        action="append",
        default=[],
        help="hooks and stop settings, in Claude Code's settings format (repeatable; "
        "later files add hooks and replace other keys)",
    )
    parser.add_argument(
        "--max-steers",
        metavar="N",
        type=count,
        help="how many times a blocked stop may send the agent back to work "
        f"(default: stop.maxSteers from the settings, else {DEFAULT_MAX_STEERS})",
    )
    parser.add_argument(
        "--max-external-steers",
        metavar="N",
        type=count,
        help="how many steers from outside (agent-wrapper steer) the run takes; later "
        "ones are refused (default: stop.maxExternalSteers from the settings, else "
        f"{DEFAULT_MAX_EXTERNAL_STEERS})",
    )
    parser.add_argument(
        "--steer-timeout",
        metavar="SECONDS",
        type=seconds,
        default=DEFAULT_STEER_TIMEOUT,
        help="how long a running tool may go on before a steer from outside interrupts "
        f"the agent anyway (default: {DEFAULT_STEER_TIMEOUT:g})",
    )
    parser.add_argument(
        "--hooks-fail-closed",
        action="store_true",
        help="a Stop handler that crashes, times out or answers garbage ends the run as "
        "an error (hook_failed) instead of allowing the stop (default: stop.failClosed "
        "from the settings, else fail open)",
    )
    parser.add_argument(
        "--no-check-mode",
        dest="check_mode",
        action="store_false",
        help="start an agent known by its name even when its command line lacks the "
        "option of its JSON mode (by default such a run is refused, exit 2)",
    )
    parser.add_argument(
        "--fail-on-max-steers",
        action="store_true",
        help="Stop handlers that still block when the steer limit is reached end the run "
        "as an error (gate_not_passed, exit 1) instead of ok with a warning (default: "
        "stop.failOnMaxSteers from the settings, else off)",
    )
    parser.add_argument(
        "--subagent",
        action="store_true",
        help="run as a subagent: stops fire SubagentStop handlers instead of Stop "
        "(implied when the wrapper runs inside another wrapped agent)",
    )
    parser.add_argument(
        "--on-stop",
        choices=["allow", "signal", "idle", "escalate"],
        help="what a stop the hooks allowed means: allow it; require an explicit "
        "completion signal; treat it as idle (settings onIdle); or ask a person "
        "(default: onStop from the settings, else by --context, else allow)",
    )
    parser.add_argument(
        "--permissions",
        choices=["allow", "deny"],
        help="how a tool an ACP agent asks permission for is answered when no "
        "PreToolUse handler decides (default: permissions from the settings, else allow)",
    )
    parser.add_argument(
        "--auth-method",
        metavar="ID",
        help="the authenticate method given to an ACP agent that answers session/new "
        "with 'authentication required' (default: acp.authMethod from the settings; "
        "without one such a run fails, naming the agent's methods)",
    )
    parser.add_argument(
        "--context",
        choices=sorted(CONTEXT_POLICIES),
        help="where the run happens: pipeline (default policy signal) or standalone "
        "(default policy escalate)",
    )
    parser.add_argument(
        "--escalation-timeout",
        metavar="SECONDS",
        type=positive_seconds,
        default=DEFAULT_ESCALATION_TIMEOUT,
        help="how long to wait for a person's reply before letting the agent stop "
        f"(default {DEFAULT_ESCALATION_TIMEOUT:g})",
    )
    parser.add_argument(
        "--max-cost",
        metavar="USD",
        type=usd,
        help="stop the run (error budget_exceeded, exit 1) once what it cost reaches USD, "
        "checked on every usage the agent reports (default: limits.maxCost from the "
        "settings, else none; see docs/cost.md)",
    )
    parser.add_argument(
        "--max-tokens",
        metavar="N",
        type=positive_int,
        help="stop the run the same way once its input, output and cache-write tokens "
        "reach N (default: limits.maxTokens from the settings, else none)",
    )
    parser.add_argument(
        "--on-budget",
        choices=list(ON_BUDGET),
        help="what reaching --max-cost or --max-tokens does: stop the run, or escalate: "
        "interrupt the agent and ask a person (reply --continue raises the cap by its "
        "first amount and resumes the agent; --stop or --escalation-timeout ends the run "
        "budget_exceeded) (default: limits.onBudget from the settings, else stop)",
    )
    parser.add_argument(
        "--drain-timeout",
        metavar="SECONDS",
        type=seconds,
        default=DEFAULT_DRAIN_TIMEOUT,
        help="after the agent exits, how long to wait for its output to end; for an ACP "
        "agent whose output ended mid-turn, how long it may take to exit "
        f"(default {DEFAULT_DRAIN_TIMEOUT:g})",
    )
    parser.add_argument(
        "--output",
        choices=[mode.value for mode in OutputMode],
        default=OutputMode.AUTO.value,
        help="what to print on stdout: jsonl events, a pretty live view, or nothing "
        "(default: auto, pretty on a terminal, jsonl otherwise)",
    )
    parser.add_argument(
        "--color",
        choices=[mode.value for mode in ColorMode],
        default=ColorMode.AUTO.value,
        help="colours in the live view (default: auto, on a terminal unless NO_COLOR is set)",
    )
    parser.add_argument(
        "--max-depth",
        metavar="N",
        type=positive_int,
        default=DEFAULT_MAX_DEPTH,
        help="refuse to start when nested deeper than N wrapped agents "
        f"(default {DEFAULT_MAX_DEPTH})",
    )
    parser.add_argument(
        "--max-line-bytes",
        metavar="N",
        type=positive_int,
        default=DEFAULT_MAX_LINE_BYTES,
        help=f"skip output lines longer than N bytes (default {DEFAULT_MAX_LINE_BYTES})",
    )


def run_parser() -> argparse.ArgumentParser:
    """A parser of the run options alone (the API's and a batch line's)."""
    parser = argparse.ArgumentParser(prog="agent-wrapper run", add_help=False)
    add_run_options(parser)
    return parser


def options_from(values: Mapping[str, Any], cwd: Path) -> argparse.Namespace:
    """The ``run`` parser's options with ``values`` (by their snake_case
    names) over their defaults, each checked as the command line checks it."""
    import difflib

    from wrapper.fleet.spec import one_value
    from wrapper.supervision.prepare import RunUsageError

    parser = run_parser()
    actions = {
        action.dest: action
        for action in parser._actions
        if action.option_strings and action.dest != "help"
    }
    namespace = parser.parse_args([])
    for name, given in values.items():
        action = actions.get(name)
        if action is None:
            close = difflib.get_close_matches(name, list(actions), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"unknown run option {name!r}{hint}")
        value: Any = given
        if isinstance(given, os.PathLike):
            value = os.fspath(given)
        elif isinstance(given, list | tuple):
            value = [os.fspath(v) if isinstance(v, os.PathLike) else v for v in given]
        with usage_errors():
            converted = one_value(name, value, action, cwd)
        setattr(namespace, action.dest, converted)
    if namespace.task is not None and namespace.task_file is not None:
        raise RunUsageError("'task' and 'task_file' cannot both be given")
    return namespace


@contextlib.contextmanager
def usage_errors() -> Iterator[None]:
    """The shared checks' errors as a Python caller expects them: a wrong
    type is a ``TypeError``, a wrong value a ``RunUsageError``."""
    from wrapper.fleet.spec import SpecError, WrongType
    from wrapper.supervision.prepare import RunUsageError

    try:
        yield
    except WrongType as exc:
        raise TypeError(str(exc)) from None
    except SpecError as exc:
        raise RunUsageError(str(exc)) from None
