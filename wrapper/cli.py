"""The command line: argument parsing, subcommands and exit statuses only.

One module, though long: every subcommand's parser, and the checks that turn
its arguments into what is run (a batch's whole spec, before any run
starts, included), are the command line's one job; the runs themselves and
what a batch or a merge does are elsewhere (``supervision``, ``fleet``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from wrapper import __version__, options

if TYPE_CHECKING:
    import signal

    from wrapper.core.settings import Settings
    from wrapper.fleet.batch import Batch

# Everything else is imported where it is needed: ``--version`` and the small
# subcommands must not pay for what a run needs.

PROG = "agent-wrapper"


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
    )
    options.add_run_options(run)
    batch = sub.add_parser(
        "batch",
        help="run the runs of a JSONL spec, several at once",
        usage=f"{PROG} batch SPEC.jsonl [--jobs N] [--runs-dir DIR] [--junit FILE] "
        "[--shard I/N] [--skip-passed | --skip-finished] [--exit-zero] [--output MODE] "
        "[run options...]",
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
    options.add_run_options(batch)
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


def _load_settings(paths: list[str]) -> Settings:
    from wrapper.supervision.prepare import RunUsageError, load_settings

    try:
        return load_settings(paths)
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
        return _batch(args)
    if args.subcommand == "merge":
        from wrapper.fleet.merge import merge_main

        return merge_main(args.inputs, args.junit, args.out)
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

        settings = _load_settings(args.settings)
        return hook_test(settings, args.event)
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
    traced = _traced(environ)
    planned_ids = None
    if traced:
        from wrapper.sinks import telemetry

        planned_ids = telemetry.plan_ids(environ)
    early = None
    # An agent driven over its stdin (ACP) is started by the run proper.
    if launch.prompt is None and not traced:
        early = early_start(config, launch.argv, launch.files, environ, early_signals)
    elif launch.prompt is None and planned_ids is not None:
        # A traced run's agent gets its attempt's span as TRACEPARENT: the
        # span's ids are chosen now, before OpenTelemetry is loaded.
        agent_environ = {**environ, "TRACEPARENT": planned_ids.traceparent}
        early = early_start(config, launch.argv, launch.files, agent_environ, early_signals)

    from functools import partial

    import trio

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
    _flush_spans()
    return status


def _batch(args: argparse.Namespace) -> int:
    """Check the whole spec (every line made into a run, as ``run`` would)
    before anything starts; then run the batch."""
    # A stop signal while the spec is checked (a long spec takes seconds; a
    # task file may be a pipe nobody writes yet) ends the checks at once.
    stop = _StopHandler.install()
    try:
        runs_dir, junit = _report_places(args)
        batch = _checked_batch(args, runs_dir, junit)
        # From here on a stop signal is recorded, to be acted on once the batch is up.
        stop.checking = False
    except _StopWhileChecking as stopped:
        # Nothing was written yet: a new batch id, if it comes to that, is no loss.
        runs_dir, junit = _report_places(args)
        return _stopped_before_start(args, runs_dir, junit, stopped.sig)
    if not args.runs_dir:
        _ignored_by_git(runs_dir)
    from wrapper.process import guardian
    from wrapper.process.proctree import become_subreaper

    # The runs' guardian alone in the runner's process group (see wrapper/process/guardian.py).
    guardian.leave_guardians_group()
    # Orphans of the agents' trees come back to the wrapper and stay findable.
    become_subreaper()
    from functools import partial

    import trio

    from wrapper.fleet.batch import run_batch

    status: int = trio.run(partial(run_batch, batch, stop.received))
    _flush_spans()
    return status


def _report_places(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """Where the batch's runs and batch.json go, and its JUnit report."""
    from wrapper.fleet.defaults import DEFAULT_BATCHES_ROOT
    from wrapper.supervision.prepare import new_run_id

    cwd = Path.cwd()
    runs_dir = (cwd / (args.runs_dir or DEFAULT_BATCHES_ROOT / new_run_id())).absolute()
    return runs_dir, (cwd / args.junit).absolute() if args.junit else None


class _StopWhileChecking(BaseException):
    """A stop signal came while the batch's spec was being checked.

    A BaseException, so that no ``except Exception`` of the checks catches
    it. The checks only read (nothing of a run exists yet), so they may be
    cut short anywhere, a read blocked on a pipe included."""

    def __init__(self, sig: signal.Signals) -> None:
        super().__init__(sig)
        self.sig = sig


class _StopHandler:
    """The stop signals' handler until the batch's loop takes them over: it
    records every one, and the first that comes while ``checking`` ends the
    checks. One handler throughout, so that no signal finds the handlers
    being swapped."""

    def __init__(self) -> None:
        import signal

        self._signals = signal.Signals
        self.checking = True
        self.received: list[signal.Signals] = []

    @classmethod
    def install(cls) -> _StopHandler:
        import signal

        from wrapper.core.signals import STOP_SIGNALS

        handler = cls()
        for sig in STOP_SIGNALS:
            signal.signal(sig, handler)
        return handler

    def __call__(self, signum: int, _frame: object) -> None:
        sig = self._signals(signum)
        self.received.append(sig)
        if self.checking:
            self.checking = False
            raise _StopWhileChecking(sig)


def _checked_batch(args: argparse.Namespace, runs_dir: Path, junit: Path | None) -> Batch:
    """The batch the spec asks for, every line checked and prepared, or a
    usage error (exit 2) naming the first line that is wrong."""
    import copy
    import hashlib
    from functools import partial

    from wrapper.core.config import ColorMode, OutputMode
    from wrapper.fleet.batch import Batch, BatchRun
    from wrapper.fleet.report import SpecInfo
    from wrapper.fleet.retry import Earlier
    from wrapper.fleet.spec import (
        LineDigests,
        Places,
        SpecError,
        folder_names,
        parse_shard,
        parse_spec,
        planned_places,
        shard,
    )
    from wrapper.fleet.spec import run_options as line_options
    from wrapper.supervision.prepare import RunUsageError, prepare_run
    from wrapper.supervision.run import resolve_output

    for flag, dest in (("--run-dir", "run_dir"), ("--result", "result"), ("--label", "label")):
        if getattr(args, dest) is not None:
            _usage_error(
                f"batch: {flag} is one run's: give it on a line of the spec "
                "(runDir, result, label); --runs-dir says where the runs go"
            )
    if args.task_file == "-":
        _usage_error("batch: --task-file cannot be -: the runs of a batch share no standard input")
    spec_path = Path(args.spec)
    try:
        raw = spec_path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _usage_error(f"batch: {args.spec}: cannot read it: {reason}")
    try:
        shard_of = parse_shard(args.shard) if args.shard else (1, 1)
    except SpecError as exc:
        _usage_error(f"batch: {exc}")
    try:
        every = parse_spec(text, spec_path.parent.absolute(), options.run_parser(), args)
    except SpecError as exc:
        _usage_error(f"batch: {args.spec}: {exc}")
    selected = shard(every, *shard_of)
    spec_info = SpecInfo(str(spec_path.absolute()), hashlib.sha256(raw).hexdigest(), len(every))
    digests = LineDigests(
        [action.dest for action in line_options(options.run_parser()).values()], args
    )
    base_environ = dict(os.environ)
    names = dict(zip((run.index for run in every), folder_names(every), strict=True))
    output = OutputMode(args.output)
    quiet_runs = "jsonl" if resolve_output(output) is OutputMode.JSONL else "quiet"
    reports = {runs_dir / "batch.json": "where the batch's report (batch.json) goes"}
    if junit is not None:
        reports[junit] = "where the JUnit report (--junit) goes"
    places = Places(reports)
    chosen = {run.index for run in selected}
    items: list[BatchRun] = []
    for run in every:
        if run.index not in chosen:
            # Another shard's run: the spec is the same whichever shard runs it.
            try:
                places.claim(run.line, *planned_places(run, runs_dir / names[run.index]))
            except SpecError as exc:
                _usage_error(f"batch: {args.spec}: line {run.line}: {exc}")
            continue
        run_options = copy.copy(run.options)
        run_options.output = quiet_runs
        # One copy of the environment for the lines that add nothing to it:
        # reading os.environ whole costs more than preparing a run.
        environ = {**base_environ, **run.env} if run.env else base_environ
        try:
            prepared = prepare_run(
                run_options,
                run.command,
                cwd=run.cwd,
                environ=environ,
                run_dir=runs_dir / names[run.index],
                batch=partial(digests.recorded, run),
            )
        except RunUsageError as exc:
            _usage_error(f"batch: {args.spec}: line {run.line}: {exc}")
        config = prepared.config
        try:
            places.claim(run.line, config.run_dir, config.result_path)
        except SpecError as exc:
            _usage_error(f"batch: {args.spec}: line {run.line}: {exc}")
        digest = str((config.batch or {}).get("lineDigest"))
        item = BatchRun(
            run.name,
            run.label,
            run.line,
            prepared,
            environ,
            index=run.index,
            line_digest=digest,
            expect=run.expect,
        )
        if args.skip_passed or args.skip_finished:
            earlier = Earlier.read(config.result_path, config.run_dir)
            item.rerun = earlier.why_again(digest, run.expect, every_outcome=args.skip_finished)
            if item.rerun is None:
                item.result, item.reused, item.state = earlier.result, True, "done"
            elif earlier.there:
                _say_once(f"batch: {run.name}: running it again: {item.rerun}")
        items.append(item)
    return Batch(
        runs=items,
        runs_dir=runs_dir,
        jobs=args.jobs,
        output=output,
        junit=junit,
        color=ColorMode(args.color),
        shard=shard_of,
        spec=spec_info,
        exit_zero=args.exit_zero,
    )


def _say_once(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def _ignored_by_git(runs_dir: Path) -> None:
    """The default root sits in the agent's working tree: keep it out of git."""
    from wrapper.files.artifacts import ensure_dir, write_new

    try:
        ensure_dir(runs_dir.parent)
        write_new(runs_dir.parent.parent / ".gitignore", b"*\n")
    except OSError:
        pass  # the batch reports what it cannot write where it writes it


def _stopped_before_start(
    args: argparse.Namespace, runs_dir: Path, junit: Path | None, sig: signal.Signals
) -> int:
    """A stop signal came while the spec was checked: no run starts, and the
    reports say so; the exit status is the signal's, as for a batch stopped later."""
    from wrapper.fleet.batch import report_stopped_before_start

    if not args.runs_dir:
        _ignored_by_git(runs_dir)
    return report_stopped_before_start(runs_dir, junit, sig)


def _traced(environ: dict[str, str]) -> bool:
    """Whether runs export traces (looked at without importing anything unless
    the environment names OpenTelemetry at all)."""
    if not any(name.startswith("OTEL_") for name in environ):
        return False
    from wrapper.sinks import telemetry

    return telemetry.enabled(environ)


def _flush_spans() -> None:
    """The runs' spans reach the collector, or it is given up on after the
    flush bound: the process ends with os._exit, which waits for nothing."""
    telemetry = sys.modules.get("wrapper.sinks.telemetry")
    if telemetry is not None:
        # Whoever set OTEL_* to get traces reads stderr, not result.json.
        for notice in (telemetry.unavailable(), telemetry.flush()):
            if notice is not None:
                with contextlib.suppress(OSError, ValueError):
                    print(f"agent-wrapper: warning: {notice}", file=sys.stderr, flush=True)
