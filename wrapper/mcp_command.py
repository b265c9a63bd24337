"""The ``mcp`` subcommand: its options made into what the server allows
(``wrapper.mcp.registry.Policy``), the run options given on its command line
made the defaults of every run it starts, and the server served
(``wrapper.mcp.server``, the one module that imports the MCP SDK: without
the ``mcp`` extra the command says how to install it)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wrapper import options

if TYPE_CHECKING:
    from collections.abc import Mapping

    from wrapper.mcp.registry import Policy

PROG = "agent-wrapper"

#: The run options a server cannot take: its stdout is the protocol, and
#: each run's directory, result, label and task come with its ``start``.
REFUSED = {
    "output": "stdout is the protocol (each run's output is in its run_dir)",
    "run_dir": "each run's directory is RUNS_DIR/RUN_ID (--runs-dir)",
    "result": "each run's result.json is in its directory",
    "label": "each start gives its own label",
    "task": "each start gives its own task",
    "task_file": "each start gives its own task",
}

INSTALL = "pip install 'agent-wrapper[mcp]'"


class McpUsageError(Exception):
    """The server's options cannot be served; the text says why."""


def add_parser(sub: Any) -> None:
    """The ``mcp`` subcommand's parser."""
    from wrapper.core.config import DEFAULT_RUNS_ROOT
    from wrapper.core.limits import MCP_DEFAULT_MAX_RUNS

    mcp = sub.add_parser(
        "mcp",
        help="serve MCP on stdin/stdout: a parent agent starts, waits for, steers and "
        "reads subagents of any CLI",
        usage=f"{PROG} mcp [--runs-dir DIR] [--max-runs N] [--allow PROGRAM]... "
        "[--allow-any-command] [--allow-cwd DIR]... [--allow-settings DIR]... "
        "[RUN OPTIONS]",
        description="Serve the Model Context Protocol on stdin and stdout (an MCP client "
        "starts it): tools start, wait, status, events, steer, reply, abort, result and "
        "list (see docs/mcp.md). The run options given here are every run's defaults. "
        "Closing stdin, or SIGTERM/SIGINT/SIGHUP, aborts every run still going; each "
        f"writes its result.json. Needs the mcp extra: {INSTALL}. Exit 0 when the client "
        "closed stdin, 128+N on signal N, 2 on a usage error.",
    )
    mcp.add_argument(
        "--runs-dir",
        metavar="DIR",
        help=f"where each run's directory goes, DIR/RUN_ID (default: ./{DEFAULT_RUNS_ROOT})",
    )
    mcp.add_argument(
        "--max-runs",
        metavar="N",
        type=options.positive_int,
        default=MCP_DEFAULT_MAX_RUNS,
        help=f"the most runs going on at once; a start past it is refused "
        f"(default {MCP_DEFAULT_MAX_RUNS})",
    )
    mcp.add_argument(
        "--allow",
        metavar="PROGRAM",
        action="append",
        default=[],
        help="a program start may run besides the agents the wrapper knows (repeatable)",
    )
    mcp.add_argument(
        "--allow-any-command",
        action="store_true",
        help="start may run any program (the parent model then runs what it likes)",
    )
    mcp.add_argument(
        "--allow-cwd",
        metavar="DIR",
        action="append",
        default=[],
        help="a directory a run may work in besides the server's own (repeatable)",
    )
    mcp.add_argument(
        "--allow-settings",
        metavar="DIR",
        action="append",
        default=[],
        help="a directory start may take settings files from (their hooks run programs; "
        "default: none)",
    )
    options.add_run_options(mcp, one_run=False)


def mcp_main(args: argparse.Namespace) -> int:
    """Serve until the client goes or a stop signal comes."""
    policy = policy_of(args, Path.cwd(), os.environ)
    try:
        from wrapper.mcp import server
    except ImportError as exc:
        if not (exc.name or "").startswith(("mcp", "pydantic", "anyio")):
            raise
        raise McpUsageError(
            f"mcp needs the MCP SDK, which is not installed ({exc}): {INSTALL}"
        ) from None
    from wrapper.process import guardian
    from wrapper.process.proctree import become_subreaper

    guardian.leave_guardians_group()
    # Orphans of the agents' trees come back to the server and stay findable.
    become_subreaper()
    from functools import partial

    import trio

    from wrapper.sinks import flush_spans

    status: int = trio.run(partial(server.serve, policy, _options_from))
    flush_spans()
    return status


def policy_of(args: argparse.Namespace, cwd: Path, environ: Mapping[str, str]) -> Policy:
    """What the server allows and every run's defaults, from its command
    line; ``McpUsageError`` for an option a server cannot take."""
    from wrapper.mcp.registry import Policy

    given = _given_run_options(args)
    for dest, why in REFUSED.items():
        if dest in given:
            flag = "--" + dest.replace("_", "-")
            raise McpUsageError(f"mcp takes no {flag}: {why}")
    for dest in ("settings",):
        if dest in given:
            given[dest] = [str((cwd / path).absolute()) for path in given[dest]]
    for name, folders in (
        ("--allow-cwd", args.allow_cwd),
        ("--allow-settings", args.allow_settings),
    ):
        for folder in folders:
            if not (cwd / folder).is_dir():
                raise McpUsageError(f"{name} {folder}: not a directory")
    runs_dir = Path(args.runs_dir) if args.runs_dir else _default_runs_dir()
    return Policy(
        runs_dir=(cwd / runs_dir).absolute(),
        cwd=cwd,
        environ=dict(environ),
        max_runs=args.max_runs,
        allow=tuple(args.allow),
        allow_any_command=args.allow_any_command,
        allow_cwd=tuple((cwd / folder).absolute() for folder in args.allow_cwd),
        allow_settings=tuple((cwd / folder).absolute() for folder in args.allow_settings),
        defaults=given,
    )


def _default_runs_dir() -> Path:
    from wrapper.core.config import DEFAULT_RUNS_ROOT

    return DEFAULT_RUNS_ROOT


def _given_run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The run options the command line set (those not at their default)."""
    defaults = options.run_parser().parse_args([])
    return {
        dest: getattr(args, dest)
        for dest, default in vars(defaults).items()
        if hasattr(args, dest) and getattr(args, dest) != default
    }


def _options_from(values: Any, cwd: Path) -> argparse.Namespace:
    return options.options_from(values, cwd)
