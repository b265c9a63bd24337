"""The command line: argument parsing, subcommands and exit statuses only."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from wrapper import __version__

if TYPE_CHECKING:
    from wrapper.settings import Settings

# Everything else is imported where it is needed: ``--version`` and the small
# subcommands must not pay for what a run needs.

PROG = "agent-wrapper"


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number of seconds, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected more than 0 seconds")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from wrapper.config import (
        CONTEXT_POLICIES,
        DEFAULT_DRAIN_TIMEOUT,
        DEFAULT_ESCALATION_TIMEOUT,
        DEFAULT_GRACE,
        DEFAULT_KILL_AFTER,
        DEFAULT_MAX_DEPTH,
        DEFAULT_MAX_STEERS,
        DEFAULT_RUNS_ROOT,
        DEFAULT_SETTLE_GRACE,
        OutputMode,
    )
    from wrapper.framing import DEFAULT_MAX_LINE_BYTES
    from wrapper.registry import BY_NAME

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Supervise a coding-agent CLI running in its JSON mode: normalize its "
        "events, detect when it has really finished, clean up its process tree, and "
        "always write result.json.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

    run = sub.add_parser(
        "run",
        help="run an agent under supervision",
        usage=f"{PROG} run [OPTIONS] [--task TEXT | --task-file PATH] -- COMMAND [ARG...]",
        description="Run COMMAND (the agent with its own flags, JSON mode included, "
        "e.g. `pi --mode json -p`) and supervise it. The wrapper inserts only the task.",
    )
    task = run.add_mutually_exclusive_group()
    task.add_argument(
        "--task", metavar="TEXT", help="the prompt, placed where the agent expects it"
    )
    task.add_argument(
        "--task-file", metavar="PATH", help="read the prompt from PATH (- for standard input)"
    )
    run.add_argument(
        "--dialect",
        choices=["auto", *sorted(BY_NAME)],
        default="auto",
        help="the agent's stream format (default: auto, from the command line)",
    )
    run.add_argument("--label", metavar="TEXT", help="a human name for the run")
    run.add_argument(
        "--run-dir",
        metavar="DIR",
        help=f"where the run's files go (default: ./{DEFAULT_RUNS_ROOT}/RUN_ID)",
    )
    run.add_argument(
        "--result",
        metavar="PATH",
        type=Path,
        help="where result.json goes (default: RUN_DIR/result.json)",
    )
    run.add_argument(
        "--grace",
        metavar="SECONDS",
        type=_seconds,
        default=None,
        help="how long the agent may keep running after its final message "
        f"(default: the agent's, see README; {DEFAULT_GRACE:g} for an unknown agent)",
    )
    run.add_argument(
        "--settle-grace",
        metavar="SECONDS",
        type=_seconds,
        default=None,
        help="the same, once the agent said it is completely done "
        f"(default: the agent's, see README; {DEFAULT_SETTLE_GRACE:g} for an unknown agent)",
    )
    run.add_argument(
        "--kill-after",
        metavar="SECONDS",
        type=_seconds,
        default=DEFAULT_KILL_AFTER,
        help=f"SIGTERM to SIGKILL (default {DEFAULT_KILL_AFTER:g})",
    )
    run.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        help="hard limit on the whole run (default: none)",
    )
    run.add_argument(
        "--attempt-timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        help="limit on each attempt; an expired attempt still goes through the Stop hooks "
        "(default: none)",
    )
    run.add_argument(
        "--idle-timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        help="end the run when the agent writes nothing for this long while no tool is "
        "running (default: off)",
    )
    run.add_argument(
        "--settings",
        metavar="FILE",
        action="append",
        default=[],
        help="hooks and stop settings, in Claude Code's settings format (repeatable; "
        "later files add hooks and replace other keys)",
    )
    run.add_argument(
        "--max-steers",
        metavar="N",
        type=_count,
        help="how many times a blocked stop may send the agent back to work "
        f"(default: stop.maxSteers from the settings, else {DEFAULT_MAX_STEERS})",
    )
    run.add_argument(
        "--hooks-fail-closed",
        action="store_true",
        help="a Stop handler that crashes, times out or answers garbage ends the run as "
        "an error (hook_failed) instead of allowing the stop (default: stop.failClosed "
        "from the settings, else fail open)",
    )
    run.add_argument(
        "--subagent",
        action="store_true",
        help="run as a subagent: stops fire SubagentStop handlers instead of Stop "
        "(implied when the wrapper runs inside another wrapped agent)",
    )
    run.add_argument(
        "--on-stop",
        choices=["allow", "signal", "idle", "escalate"],
        help="what a stop the hooks allowed means: allow it; require an explicit "
        "completion signal; treat it as idle (settings onIdle); or ask a person "
        "(default: onStop from the settings, else by --context, else allow)",
    )
    run.add_argument(
        "--context",
        choices=sorted(CONTEXT_POLICIES),
        help="where the run happens: pipeline (default policy signal) or standalone "
        "(default policy escalate)",
    )
    run.add_argument(
        "--escalation-timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        default=DEFAULT_ESCALATION_TIMEOUT,
        help="how long to wait for a person's reply before letting the agent stop "
        f"(default {DEFAULT_ESCALATION_TIMEOUT:g})",
    )
    run.add_argument(
        "--drain-timeout",
        metavar="SECONDS",
        type=_seconds,
        default=DEFAULT_DRAIN_TIMEOUT,
        help="after the agent exits, how long to wait for its output to end "
        f"(default {DEFAULT_DRAIN_TIMEOUT:g})",
    )
    run.add_argument(
        "--output",
        choices=[mode.value for mode in OutputMode],
        default=OutputMode.AUTO.value,
        help="what to print on stdout: jsonl events, a pretty live view, or nothing "
        "(default: auto, pretty on a terminal, jsonl otherwise)",
    )
    run.add_argument(
        "--max-depth",
        metavar="N",
        type=_positive_int,
        default=DEFAULT_MAX_DEPTH,
        help="refuse to start when nested deeper than N wrapped agents "
        f"(default {DEFAULT_MAX_DEPTH})",
    )
    run.add_argument(
        "--max-line-bytes",
        metavar="N",
        type=_positive_int,
        default=DEFAULT_MAX_LINE_BYTES,
        help=f"skip output lines longer than N bytes (default {DEFAULT_MAX_LINE_BYTES})",
    )
    normalize = sub.add_parser(
        "normalize",
        help="print a saved raw stream as normalized events",
        description="Read a saved raw stream (a run's stdout.log, a capture) and print its "
        "normalized events, one JSON object per line, or with --summary what the run "
        "came to.",
    )
    normalize.add_argument("file", nargs="?", default="-", help="the stream (default: stdin)")
    normalize.add_argument(
        "--dialect",
        choices=["auto", *sorted(BY_NAME)],
        default="auto",
        help="the stream's format (default: recognised from its first events)",
    )
    normalize.add_argument(
        "--summary",
        action="store_true",
        help="print one JSON object instead: dialect, stopReason, rawStopReason, finalText, "
        "sessionId, model, usage, toolsUsed, warnings",
    )
    normalize.add_argument(
        "--exit-code",
        metavar="N",
        type=int,
        help="the agent's exit status, for the rules that depend on it (an abort "
        "shown only as exit 130, say)",
    )
    normalize.add_argument(
        "--max-line-bytes",
        metavar="N",
        type=_positive_int,
        default=DEFAULT_MAX_LINE_BYTES,
        help=f"skip lines longer than N bytes (default {DEFAULT_MAX_LINE_BYTES})",
    )

    signal = sub.add_parser(
        "signal",
        help="from inside a wrapped agent: say the task is complete (or ask for a person)",
        description="Run by the agent inside its session: tell the wrapper the task is "
        "complete, that a person is needed (escalate), or that it goes on (continue). "
        "The run directory and attempt come from the environment the wrapper set.",
    )
    signal.add_argument("kind", choices=["complete", "escalate", "continue"])
    signal.add_argument("--message", metavar="TEXT", help="what was done, or the question")
    signal.add_argument(
        "--run-dir", metavar="DIR", help="the run (default: $AGENT_WRAPPER_RUN_DIR)"
    )

    reply = sub.add_parser(
        "reply",
        help="answer a run that is waiting for a person",
        description="Answer the escalation a run is waiting on: TEXT reaches the agent as "
        "'User answered: TEXT'; --continue tells it to go on; --stop lets it stop. "
        "The first reply wins.",
    )
    reply.add_argument("run_dir", metavar="RUN_DIR")
    reply.add_argument("text", metavar="TEXT", nargs="?")
    reply.add_argument("--continue", dest="go_on", action="store_true", help="tell it to go on")
    reply.add_argument("--stop", action="store_true", help="let it stop")
    reply.add_argument(
        "--escalation",
        metavar="ID",
        help="answer only this escalation (as in status.json), never a newer one "
        "(default: the latest)",
    )

    status = sub.add_parser(
        "status",
        help="show a run's state",
        description="Say what a run is doing: running (attempt, agent pid, current tool), "
        "waiting for a person (the question and how to reply), finished (outcome and "
        "error), or ended without finishing because its wrapper is gone.",
    )
    status.add_argument("run_dir", metavar="RUN_DIR")
    status.add_argument(
        "--json",
        action="store_true",
        help='print {"status": status.json, "result": result.json or null} instead',
    )

    hook_test = sub.add_parser(
        "hook-test",
        help="run hook handlers on a given event and print their decision",
        description="Run the handlers the settings configure for EVENT.json's "
        "hook_event_name (default Stop) on that event, as a run would, and print the "
        "decision as JSON. For people writing hooks.",
    )
    hook_test.add_argument(
        "--settings", metavar="FILE", action="append", required=True, help="settings file"
    )
    hook_test.add_argument(
        "--event", metavar="EVENT.json", required=True, help="the hook input (- for stdin)"
    )
    return parser


def _split_command(args: list[str]) -> tuple[list[str], list[str] | None]:
    """Split ``run`` arguments at the first ``--``: options before, COMMAND after."""
    if "--" not in args:
        return args, None
    index = args.index("--")
    return args[:index], args[index + 1 :]


def _unrecognized(
    sub: argparse.ArgumentParser, subcommand: str, extras: list[str], had_separator: bool
) -> str:
    """The usage error for arguments no option takes: a likely fix first."""
    import difflib

    words = " ".join(extras)
    options = [name for action in sub._actions for name in action.option_strings]
    hints = []
    for word in extras:
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            close = difflib.get_close_matches(name, options, n=1, cutoff=0.75)
            if close:
                hints.append(f"{name}: did you mean {close[0]}?")
    if subcommand == "run" and not had_separator and not hints:
        hints.append(
            f"put the agent's command after --, e.g. {PROG} run --task 'Fix it' -- {words}"
        )
    message = f"unrecognized arguments: {words}"
    return "; ".join([message, *hints])


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub: argparse.ArgumentParser = action.choices[name]
            return sub
    return parser


def _load_settings(parser: argparse.ArgumentParser, paths: list[str]) -> Settings:
    from wrapper.prepare import RunUsageError, load_settings

    try:
        return load_settings(paths)
    except RunUsageError as exc:
        parser.error(str(exc))


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in == ["--version"]:  # answered before the parser and what it imports
        print(f"{PROG} {__version__}")
        return 0
    parser = build_parser()
    command: list[str] | None = None
    if args_in and args_in[0] == "run":
        args_in, command = _split_command(args_in)
    args, extras = parser.parse_known_args(args_in)
    if extras:
        sub = _subparser(parser, args.subcommand)
        sub.error(_unrecognized(sub, args.subcommand, extras, command is not None))
    if args.subcommand == "run":
        return _run(parser, args, command)
    if args.subcommand in ("signal", "reply", "status"):
        from wrapper import tools

        if args.subcommand == "signal":
            return tools.signal_main(args.kind, args.message, args.run_dir)
        if args.subcommand == "reply":
            return tools.reply_main(
                args.run_dir,
                args.text,
                go_on=args.go_on,
                stop=args.stop,
                escalation=args.escalation,
            )
        return tools.status_main(args.run_dir, args.json)
    if args.subcommand == "normalize":
        from wrapper.normalize import main as normalize_main

        return normalize_main(
            args.file,
            dialect_name=args.dialect,
            summary=args.summary,
            exit_code=args.exit_code,
            max_line_bytes=args.max_line_bytes,
        )
    if args.subcommand == "hook-test":
        from wrapper.hooks.hook_test import hook_test

        settings = _load_settings(parser, args.settings)
        return hook_test(settings, args.event)
    parser.error(f"unknown subcommand {args.subcommand!r}")
    return None


def _run(
    parser: argparse.ArgumentParser, args: argparse.Namespace, command: list[str] | None
) -> int:
    from wrapper.prepare import RunUsageError, prepare_run

    try:
        prepared = prepare_run(args, command)
    except RunUsageError as exc:
        parser.error(str(exc))
    config, dialect, launch = prepared.config, prepared.dialect, prepared.launch
    from wrapper import guardian

    # Stop signals from here on are acted on once the run is up.
    early_signals = guardian.record_stop_signals()
    # The guardian learns which run to end should this process die, before
    # anything of it exists (see wrapper/guardian.py).
    guardian.announce(config.run_id, config.run_dir, config.result_path)

    from wrapper.child import early_start
    from wrapper.proctree import become_subreaper

    # Orphans of the agent's tree come back to the wrapper and stay findable.
    become_subreaper()
    # The agent starts now, its start-up overlapping the wrapper's imports.
    environ = dict(os.environ)
    early = early_start(config, launch.argv, launch.files, environ, early_signals)

    from functools import partial

    import trio

    from wrapper.execution import execute

    run = partial(execute, config, dialect, launch, environ, early, early_signals=early_signals)
    return trio.run(run)


def entry() -> None:
    """The ``agent-wrapper`` command: ``main``, then a quick exit.

    Everything the wrapper writes is closed by the time ``main`` returns, so
    the interpreter's teardown (some 50 ms of freeing what is about to vanish
    anyway) is skipped: the runner waiting on the wrapper gets its exit
    status sooner. Library callers use ``main``.
    """
    from wrapper.guardian import fork_for_run

    # A run's guardian is the process the runner started; the run goes on
    # in its child (``wrapper.guardian.entry`` forks before importing this module).
    fork_for_run()
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":  # pragma: no cover
    entry()
