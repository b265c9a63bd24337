"""The command line: argument parsing, subcommands and exit statuses only.

One module, though long: every subcommand's parser and its dispatch, and
the checks that turn its arguments into what is run (a batch's whole spec,
before any run starts, included), are the command line's one job; the runs
themselves and what a batch, a merge or a report does are elsewhere
(``supervision``, ``fleet``, ``commands``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from wrapper import __version__, options

if TYPE_CHECKING:
    from wrapper.core.settings import Settings

# Everything else is imported where it is needed: ``--version`` and the small
# subcommands must not pay for what a run needs.

PROG = "agent-wrapper"


RUN_EXAMPLES = f"""examples:
  {PROG} run --task 'Fix the failing test' -- pi --mode json -p
  {PROG} run --label fix-123 --timeout 3600 --task-file task.md -- \\
      claude -p --output-format stream-json --verbose
  {PROG} run -- codex exec --json 'Fix it'    # no --task: COMMAND runs as it is

Exit status: 0 ok, 1 error, 124 timeout, 127 COMMAND could not be started, 128+N
stopped by signal N, 2 usage error, 3 result.json could be written nowhere. The
run's files (result.json, events.jsonl, ...) are in RUN_DIR; result.json says
what happened."""


RUN_DIR_HELP = "the run's directory, or its label (unique among `ps`'s runs)"
LATEST_HELP = "the newest run under ./.agent-wrapper (instead of RUN_DIR)"
COLOR_HELP = "colours (default: auto, on a terminal unless NO_COLOR is set)"


class _KeepsExamples(argparse.HelpFormatter):
    """Wraps prose as argparse does, but keeps a paragraph of indented lines
    (examples to paste) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in text.split("\n\n"):
            if "\n  " in paragraph:
                paragraphs.append("\n".join(indent + line for line in paragraph.splitlines()))
            else:
                paragraphs.append(super()._fill_text(paragraph, width, indent))
        return "\n\n".join(paragraphs)


def build_parser() -> argparse.ArgumentParser:
    from wrapper.core.framing import DEFAULT_MAX_LINE_BYTES
    from wrapper.core.registry import BY_NAME
    from wrapper.fleet.defaults import DEFAULT_JOBS

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Supervise a coding-agent CLI running in its JSON mode: normalize its "
        "events, detect when it has really finished, clean up its process tree, and "
        "always write result.json.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

    run = sub.add_parser(
        "run",
        help="run an agent under supervision",
        usage=f"{PROG} run [OPTIONS] [--task TEXT | --task-file PATH] -- COMMAND [ARG...]",
        description="Run COMMAND (the agent with its own flags, JSON mode included, "
        "e.g. `pi --mode json -p`) and supervise it. The wrapper inserts only the task.",
        epilog=RUN_EXAMPLES,
        formatter_class=_KeepsExamples,
    )
    options.add_run_options(run)
    batch = sub.add_parser(
        "batch",
        help="run the runs of a JSONL spec, several at once",
        usage=f"{PROG} batch SPEC.jsonl [--jobs N] [--runs-dir DIR] [--junit FILE] "
        "[--html FILE] [--shard I/N] [--skip-passed | --skip-finished] [--exit-zero] "
        "[--batch-max-cost USD] [--batch-max-tokens N] "
        "[--output MODE] [run options...]",
        description="Run every run of SPEC.jsonl (one JSON object a line: command, and "
        "optionally task, label, cwd, env and any run option in camelCase), at most N at "
        "once, in one process with one guardian. The run options given here are the "
        "defaults a line overrides. Writes each run's directory, RUNS_DIR/batch.json and, "
        "with --junit, a JUnit report. Exit 0 when every run passed (ended ok, or as its line's "
        "expect says), 1 when one did not, 2 on a usage error, 3 when the batch itself failed, "
        "128+N when stopped by signal N.",
    )
    batch.add_argument("spec", metavar="SPEC.jsonl", help="the runs, one JSON object a line")
    batch.add_argument(
        "--jobs",
        metavar="N",
        type=options.positive_int,
        default=DEFAULT_JOBS,
        help=f"how many runs at once (default: the CPUs this process may use, here {DEFAULT_JOBS})",
    )
    batch.add_argument(
        "--runs-dir",
        metavar="DIR",
        help="where the runs' directories (RUNS_DIR/LABEL, else RUNS_DIR/LINE) and batch.json "
        "go (default: ./.agent-wrapper/batches/BATCH_ID)",
    )
    batch.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    batch.add_argument(
        "--html", metavar="FILE", help="also write an HTML report to FILE (as `report` does)"
    )
    batch.add_argument(
        "--shard",
        metavar="I/N",
        help="run only shard I of N (from 1): the lines whose place in the spec, from 0, "
        "is I-1 modulo N",
    )
    again = batch.add_mutually_exclusive_group()
    again.add_argument(
        "--skip-passed",
        action="store_true",
        help="do not start a line whose run directory holds a result.json of the same line "
        "(same digest) that passed, or that a person aborted on request; the others run again, "
        "afresh (the agent's session is not resumed)",
    )
    again.add_argument(
        "--skip-finished",
        action="store_true",
        help="do not start a line whose run directory holds a result.json of the same line, "
        "whatever its outcome",
    )
    batch.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 whenever every line ran to its end, whatever the outcomes (for engines "
        "that must not retry agent failures); a batch that failed itself or was stopped by a "
        "signal still says so",
    )
    batch.add_argument(
        "--batch-max-cost",
        metavar="USD",
        type=options.usd,
        help="cap what the runs this batch starts cost together: at USD no line starts and "
        "the runs going on are stopped (budget_exceeded), exit 1 (--max-cost stays each "
        "run's own cap; see docs/cost.md)",
    )
    batch.add_argument(
        "--batch-max-tokens",
        metavar="N",
        type=options.positive_int,
        help="the same for their input, output and cache-write tokens together",
    )
    options.add_run_options(batch, one_run=False)
    from wrapper.mcp_command import add_parser as add_mcp_parser

    add_mcp_parser(sub)
    report = sub.add_parser(
        "report",
        help="write one HTML page of a batch, of several shards or of a merged batch.json",
        usage=f"{PROG} report RUNS_DIR... --html FILE",
        description="Write one self-contained HTML page of what the batches came to. "
        "Exit 0 written, 1 the page could not be written, 2 usage error.",
    )
    report.add_argument(
        "paths", metavar="RUNS_DIR", nargs="+", help="a batch's --runs-dir, a folder of them "
        "(the shards of a spec) or a batch.json",
    )  # fmt: skip
    report.add_argument("--html", metavar="FILE", help="where the page goes (required)")
    merge = sub.add_parser(
        "merge",
        help="merge the reports of a spec's shards into one batch.json and JUnit report",
        usage=f"{PROG} merge RUNS_DIR... [--junit FILE] [--out FILE]",
        description="Read the batch.json of every shard (its runs folder, or the file) and "
        "write one batch.json (to --out, else stdout) and, with --junit, one JUnit report. "
        "Checks that the inputs are shards of one spec and that every run of it is there "
        "exactly once, and names what is missing or doubled. Exit 0: complete, every run "
        "passed; 1: complete, some did not; 4: runs or shards missing or doubled, or shards "
        "of different specs; 2: usage.",
    )
    merge.add_argument(
        "inputs", nargs="+", metavar="RUNS_DIR", help="a shard's runs folder or its batch.json"
    )
    merge.add_argument("--junit", metavar="FILE", help="also write one JUnit XML report to FILE")
    merge.add_argument("--out", metavar="FILE", help="write the merged batch.json to FILE")
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
        type=options.positive_int,
        default=DEFAULT_MAX_LINE_BYTES,
        help=f"skip lines longer than N bytes (default {DEFAULT_MAX_LINE_BYTES})",
    )

    prices = sub.add_parser(
        "prices",
        help="what the price table says models cost (the cost extra)",
        description="Look up each MODEL in the price table (genai-prices, installed with "
        "agent-wrapper[cost]) and keep the answer in the price cache that runs read. "
        "Exit 0: every model has a price; 1: some has none, or the table is not "
        "installed; 2: usage.",
    )
    prices.add_argument(
        "models", nargs="+", metavar="MODEL", help="a model name, as agents give it"
    )
    prices.add_argument("--json", action="store_true", help="print one JSON object")
    prices.add_argument(
        "--no-cache", dest="cached", action="store_false", help="look up even what is cached"
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
    reply.add_argument("run_dir", metavar="RUN_DIR", nargs="?", help=RUN_DIR_HELP)
    reply.add_argument("text", metavar="TEXT", nargs="?")
    reply.add_argument("--latest", action="store_true", help=LATEST_HELP)
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
    status.add_argument("run_dir", metavar="RUN_DIR", nargs="?", help=RUN_DIR_HELP)
    status.add_argument("--latest", action="store_true", help=LATEST_HELP)
    status.add_argument(
        "--json",
        action="store_true",
        help='print {"status": status.json, "result": result.json or null} instead',
    )

    steer = sub.add_parser(
        "steer",
        help="send a running agent a new instruction",
        description="Steer a running run from outside: the text reaches the agent in its "
        "session (by resuming it, or live where the agent takes messages while it runs). "
        "Waits for the receipt. Exit status: 0 delivered (the agent acknowledged it) or "
        "sent (on a live agent's input, not acknowledged when --wait ended), 1 refused (or "
        "the run is not running, or takes no requests), 124 still queued when --wait ended, "
        "75 the run is busy with other requests (try again), 2 usage.",
    )
    steer.add_argument("run_dir", metavar="RUN_DIR", nargs="?", help=RUN_DIR_HELP)
    steer.add_argument("--latest", action="store_true", help=LATEST_HELP)
    given = steer.add_mutually_exclusive_group(required=True)
    given.add_argument("--text", metavar="TEXT", help="the instruction")
    given.add_argument("--file", metavar="PATH", help="read the instruction from a file (- stdin)")
    steer.add_argument(
        "--when",
        choices=["now", "next-stop"],
        default="now",
        help="now: as soon as the agent can take it (a running tool may finish first, "
        "up to the run's --steer-timeout); next-stop: when the agent next stops, instead "
        "of ending the run (default: now)",
    )
    steer.add_argument(
        "--wait",
        metavar="SECONDS",
        type=options.seconds,
        default=30.0,
        help="how long to wait for the receipt (default: 30)",
    )
    steer.add_argument("--json", action="store_true", help="print the receipt as JSON")
    abort = sub.add_parser(
        "abort",
        help="end a running run now",
        description="Abort a running run from outside: the agent is stopped (its own cancel "
        "first where it has one, then SIGTERM and SIGKILL), the run ends aborted "
        "(abort_requested, exit 143) with its result.json. Exit status: 0 the run ended, 1 "
        "refused (or not running), 124 still ending when --wait ended, 75 busy (try "
        "again), 2 usage.",
    )
    abort.add_argument("run_dir", metavar="RUN_DIR", nargs="?", help=RUN_DIR_HELP)
    abort.add_argument("--latest", action="store_true", help=LATEST_HELP)
    abort.add_argument("--reason", metavar="TEXT", help="why, for result.json's error message")
    abort.add_argument(
        "--wait",
        metavar="SECONDS",
        type=options.seconds,
        default=30.0,
        help="how long to wait for the run to end (default: 30)",
    )
    abort.add_argument("--json", action="store_true", help="print the receipt as JSON")

    ps = sub.add_parser(
        "ps",
        help="list runs: running first, with their state, tool, tokens, cost and outcome",
        usage=f"{PROG} ps [DIR...] [--json]",
        description="List the runs under ./.agent-wrapper/runs and ./.agent-wrapper/batches "
        "(or in the DIRs given: run directories, a batch's --runs-dir, folders of them), "
        "running ones first: label, state, current tool, elapsed time, tokens, cost, steers "
        "(Stop hook + from outside), outcome and run directory; '-' is a figure the run does "
        "not report. Only reads the runs' files. Exit 0, 2 a DIR that does not exist.",
    )
    ps.add_argument("dirs", metavar="DIR", nargs="*", help="where to look (default: here)")
    ps.add_argument("--json", action="store_true", help="print a JSON array, paths whole")
    ps.add_argument("--color", choices=["auto", "always", "never"], default="auto", help=COLOR_HELP)
    watch = sub.add_parser(
        "watch",
        help="follow a run's live view, or a table of many runs, from another terminal",
        usage=f"{PROG} watch [RUN_DIR | LABEL | --latest] [--since now]\n"
        f"       {PROG} watch [RUNS_DIR...] [--only STATE] [--follow | --once]",
        description="With one run (its directory, its label, or --latest): print what its "
        "--output pretty shows, from its start (or from now), until its result, and exit "
        "with the run's exit status (1 if its wrapper died without a result). With folders "
        "of runs (a batch's --runs-dir, several, or none: the runs of this folder): a table "
        "of them, running first, redrawn at most once a second, until every run ended "
        "(exit 0 all ok, 1 otherwise); without a terminal a line per change. Only reads "
        "the runs' files. 2: usage.",
    )
    watch.add_argument("targets", metavar="RUN_DIR|RUNS_DIR", nargs="*")
    watch.add_argument("--latest", action="store_true", help=LATEST_HELP)
    watch.add_argument(
        "--since",
        choices=["start", "now"],
        default="start",
        help="one run: show its events from its start (default) or only those from now on",
    )
    watch.add_argument(
        "--only",
        action="append",
        choices=["running", "waiting", "finished", "ok", "failed"],
        default=[],
        help="the table: show only runs in this state (repeatable)",
    )
    ending = watch.add_mutually_exclusive_group()
    ending.add_argument(
        "--follow", action="store_true", help="the table: keep watching after every run ended"
    )
    ending.add_argument("--once", action="store_true", help="the table: print it once and exit")
    watch.add_argument(
        "--color", choices=["auto", "always", "never"], default="auto", help=COLOR_HELP
    )

    hook_test = sub.add_parser(
        "hook-test",
        help="run hook handlers on a given event and print their decision",
        description="Run the handlers the settings configure for EVENT.json's "
        "hook_event_name (default Stop) on that event, as a run would, and print the "
        "decision as JSON. For people writing hooks. Exit status: 0 allow, 1 block or "
        "end, 2 usage error (a malformed event, a handler whose program or script is "
        "missing).",
    )
    hook_test.add_argument(
        "--settings", metavar="FILE", action="append", required=True, help="settings file"
    )
    hook_test.add_argument(
        "--event", metavar="EVENT.json", required=True, help="the hook input (- for stdin)"
    )
    hook_test.add_argument(
        "--agent",
        metavar="DIALECT",
        help="the agent whose tool the event's tool_name is, for matchers that name a "
        "tool kind (@execute); default: the kind the dialects agree on",
    )

    relay = sub.add_parser("hook-relay")  # the agent's own hook (wrapper.hooks.native)
    relay.add_argument("--settings", action="append", required=True)
    relay.add_argument("--handler", nargs=3, metavar=("GROUP", "INDEX", "ORIGIN"), required=True)
    relay.add_argument("--agent", default=None)  # its dialect, which knows its tools' kinds
    return parser


def _split_command(args: list[str]) -> tuple[list[str], list[str] | None]:
    """Split ``run`` arguments at the first ``--``: options before, COMMAND after."""
    if "--" not in args:
        return args, None
    index = args.index("--")
    return args[:index], args[index + 1 :]


def _unrecognized(
    sub: argparse.ArgumentParser,
    subcommand: str,
    given: list[str],
    extras: list[str],
    had_separator: bool,
) -> str:
    """The usage error for arguments no option takes (``given``: the
    subcommand's arguments, ``extras`` among them): a likely fix first."""
    import difflib

    words = " ".join(extras)
    flags = [name for action in sub._actions for name in action.option_strings]
    hints = []
    for word in extras:
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            close = difflib.get_close_matches(name, flags, n=1, cutoff=0.75)
            if close:
                hints.append(f"{name}: did you mean {close[0]}?")
    if subcommand == "run" and not had_separator and not hints:
        import shlex

        from wrapper.process.invocation import wrapper_command

        # The same run, pasted back as it is printed: this wrapper as it was
        # started, the options as given, the rest after ``--``, all quoted.
        kept = list(given)
        for word in extras:
            if word in kept:
                kept.remove(word)
        if not {"--task", "--task-file"} & {word.split("=", 1)[0] for word in kept}:
            kept = ["--task", "Fix it", *kept]
        example = f"{wrapper_command()} run {shlex.join([*kept, '--', *extras])}"
        hints.append(f"put the agent's command after --, e.g. {example}")
    message = f"unrecognized arguments: {words}"
    return "; ".join([message, *hints])


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub: argparse.ArgumentParser = action.choices[name]
            return sub
    return parser


def _usage_error(message: str) -> NoReturn:
    """A usage error found once the arguments are parsed: one line and exit 2.
    The top-level usage line that ``parser.error`` would print first says
    nothing about it."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(2)


def _run_dir(subcommand: str, given: str | None, use_latest: bool) -> str:
    """The run directory ``given`` names (a path, or a run's label), or the
    newest run with ``--latest``; a usage error when none or several do."""
    from wrapper.commands.find import RunNotFound, resolve

    try:
        return str(resolve(given, use_latest))
    except RunNotFound as exc:
        print(f"{PROG} {subcommand}: {exc}", file=sys.stderr)
        sys.exit(2)


def _load_settings(paths: list[str], *, enforces_pre_tool_use: bool = False) -> Settings:
    from wrapper.supervision.prepare import RunUsageError, load_settings

    try:
        return load_settings(paths, enforces_pre_tool_use=enforces_pre_tool_use)
    except RunUsageError as exc:
        _usage_error(str(exc))


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in in (["--version"], ["-V"]):  # answered before the parser and what it imports
        print(f"{PROG} {__version__}")
        return 0
    parser = build_parser()
    command: list[str] | None = None
    if args_in and args_in[0] == "run":
        args_in, command = _split_command(args_in)
    if args_in and args_in[0] == "reply":
        # TEXT may follow the options (``reply RUN_DIR --escalation ID TEXT``,
        # the form the run prints): plain parsing would fill the optional TEXT
        # with nothing as soon as RUN_DIR is read and refuse it later.
        args, extras = _subparser(parser, "reply").parse_known_intermixed_args(args_in[1:])
        args.subcommand = "reply"
    else:
        args, extras = parser.parse_known_args(args_in)
    if extras:
        sub = _subparser(parser, args.subcommand)
        given = args_in[1:]
        sub.error(_unrecognized(sub, args.subcommand, given, extras, command is not None))
    if args.subcommand == "run":
        return _run(args, command)
    if args.subcommand == "batch":
        from wrapper.batch_command import BatchUsageError, batch_main

        try:
            return batch_main(args)
        except BatchUsageError as exc:
            _usage_error(str(exc))
    if args.subcommand == "mcp":
        from wrapper.mcp_command import McpUsageError, mcp_main

        try:
            return mcp_main(args)
        except McpUsageError as exc:
            _usage_error(str(exc))
    if args.subcommand == "report":
        from wrapper.fleet.report_input import report_main

        return report_main([Path(path) for path in args.paths], args.html)
    if args.subcommand == "merge":
        from wrapper.fleet.merge import merge_main

        return merge_main(args.inputs, args.junit, args.out)
    if args.subcommand == "ps":
        from wrapper.commands.ps import ps_main

        return ps_main(args.dirs, args.json, args.color)
    if args.subcommand == "watch":
        from wrapper.commands.watch import WatchOptions, watch_main
        from wrapper.core.config import ColorMode

        watching = WatchOptions(
            color=ColorMode(args.color),
            since_now=args.since == "now",
            follow=args.follow,
            once=args.once,
            only=tuple(args.only),
        )
        return watch_main(args.targets, args.latest, watching)
    if args.subcommand in ("reply", "status", "steer", "abort"):
        if args.subcommand == "reply" and args.latest and args.text is None:
            # ``reply --latest TEXT``: the one word given is the answer.
            args.text, args.run_dir = args.run_dir, None
        args.run_dir = _run_dir(args.subcommand, args.run_dir, args.latest)
    if args.subcommand in ("signal", "reply", "status"):
        from wrapper.commands import control as tools

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
    if args.subcommand in ("steer", "abort"):
        from wrapper.commands import steer as outside

        if args.subcommand == "abort":
            return outside.abort_main(args.run_dir, args.reason, args.wait, args.json)
        try:
            text = args.text if args.file is None else outside.read_text_file(args.file)
        except outside.TooLong as exc:
            return outside.fail_usage("steer", str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            return outside.fail_usage("steer", f"--file {args.file}: {exc}")
        return outside.steer_main(args.run_dir, text, args.when, args.wait, args.json)
    if args.subcommand == "prices":
        from wrapper.commands.prices import main as prices_main

        return prices_main(args.models, as_json=args.json, cached=args.cached)
    if args.subcommand == "normalize":
        from wrapper.commands.normalize import main as normalize_main

        return normalize_main(
            args.file,
            dialect_name=args.dialect,
            summary=args.summary,
            exit_code=args.exit_code,
            max_line_bytes=args.max_line_bytes,
        )
    if args.subcommand == "hook-test":
        from wrapper.commands.hook_test import hook_test

        # It runs PreToolUse handlers: the note that they are ignored would be wrong.
        settings = _load_settings(args.settings, enforces_pre_tool_use=True)
        return hook_test(settings, args.event, args.agent)
    if args.subcommand == "hook-relay":
        from wrapper.commands.hook_relay import hook_relay

        return hook_relay(args.settings, *args.handler, agent=args.agent)
    parser.error(f"unknown subcommand {args.subcommand!r}")
    return None


def _run(args: argparse.Namespace, command: list[str] | None) -> int:
    from wrapper.supervision.prepare import RunUsageError, prepare_run

    try:
        # A settings note is said once: the live view shows it among the
        # run's warnings; without a live view stderr is where a person sees it.
        pretty = args.output == "pretty" or (args.output == "auto" and os.isatty(1))
        prepared = prepare_run(args, command, say_notes=not pretty)
    except RunUsageError as exc:
        _usage_error(str(exc))
    config, dialect, launch = prepared.config, prepared.dialect, prepared.launch
    from wrapper.process import guardian

    # Stop signals from here on are acted on once the run is up.
    early_signals = guardian.record_stop_signals()
    # The guardian learns which run to end should this process die, before
    # anything of it exists (see wrapper/process/guardian.py).
    guardian.announce(config.run_id, config.run_dir, config.result_path)

    from wrapper.process.proctree import become_subreaper
    from wrapper.supervision.early import early_start

    # Orphans of the agent's tree come back to the wrapper and stay findable.
    become_subreaper()
    # The agent starts now, its start-up overlapping the wrapper's imports.
    environ = dict(os.environ)
    from wrapper.sinks import flush_spans, traced_runs

    traced = traced_runs(environ)
    planned_ids = None
    if traced:
        from wrapper.sinks.trace_ids import plan_ids

        planned_ids = plan_ids(environ)
    early = None
    # An agent driven over its stdin (ACP) is started by the run proper.
    if launch.prompt is None and not traced:
        early = early_start(config, launch.argv, launch.files, environ, early_signals)
    elif launch.prompt is None and planned_ids is not None:
        # A traced run's agent gets its attempt's span as TRACEPARENT: the
        # span's ids are chosen now, before OpenTelemetry is loaded.
        agent_environ = {**environ, "TRACEPARENT": planned_ids.traceparent}
        early = early_start(config, launch.argv, launch.files, agent_environ, early_signals)

    import linecache
    from functools import partial

    from wrapper.deferral import loading_trio

    with loading_trio():
        import trio

    # attrs keeps the source of each method it writes for trio's classes (to
    # show it in tracebacks), about 0.2 MB a run would hold for its whole
    # life; dropped before the run's own modules load into the space it frees.
    linecache.clearcache()
    from wrapper.fleet.owner import execute

    run = partial(
        execute,
        config,
        dialect,
        launch,
        environ,
        early,
        early_signals=early_signals,
        planned_ids=planned_ids,
    )
    status: int = trio.run(run)
    flush_spans()
    return status
