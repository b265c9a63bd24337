"""The agents the wrapper knows: one entry per dialect.

This is the one list that the command line's ``--dialect`` choices, the
recognition of an agent from its command line, and the fake agent's formats
all come from. It imports nothing but the standard library and none of the
wrapper's other modules, so that choosing a dialect imports that dialect's
module alone and a plain ``python3`` (the fake agent) can read it.

An entry matches a command line when the program it runs goes by one of the
entry's ``executables`` and, for an entry with ``needs``, when the command
line also holds one of them: an option (``--acp``) anywhere before a ``--``,
an option with its value (``--output-format=stream-json``, given as one word
or as two), or a word (``acp``) as the program's first argument, the way
subcommands are given. An entry's ``also`` names other programs that write
its format in one of their modes, each with the ``needs`` that select it
(``qwen -o stream-json`` writes Claude Code's stream). Forms with ``needs``
are tried first, so that ``gemini --acp`` can be another dialect than
``gemini``. The program is looked for through
the launchers that run one (``env``, ``npx``, ...), and a package name
(``@scope/name@1.2``) counts as its bare name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple


class Agent(NamedTuple):
    """One dialect, as the rest of the project finds it."""

    #: The ``--dialect`` value and the name in result.json.
    name: str
    #: Where its class is: ``module:Class``, imported only when chosen.
    dialect: str
    #: The program names it goes by (basenames).
    executables: tuple[str, ...]
    #: The fake agent's renderer module for this format (``fixtures/fake_agent``).
    renderer: str
    #: Options or first arguments, one of which the command line must hold.
    needs: tuple[str, ...] = ()
    #: Programs that speak this format whatever their arguments (adapters
    #: that run another agent behind it), for an entry with ``needs``.
    adapters: tuple[str, ...] = ()
    #: Other programs that write this format in one of their modes:
    #: (their names, the options or first arguments that select the mode).
    also: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    #: The options or first arguments that put the program in the mode whose
    #: stream this dialect reads (as ``needs``); one must be on the command
    #: line of a program known by its name, or the run is refused.
    mode: tuple[str, ...] = ()


AGENTS: tuple[Agent, ...] = (
    # Each CLI goes by its executable and, run through npx and the like, by
    # the bare name of its npm package.
    Agent(
        "pi",
        "wrapper.dialects.pi:PiDialect",
        ("pi", "pi-coding-agent"),
        "pi",
        mode=("--mode=json", "--mode=rpc"),
    ),
    Agent(
        "claude",
        "wrapper.dialects.claude:ClaudeDialect",
        ("claude", "claude-code"),
        "claude",
        # Qwen Code's stream-json output is Claude Code's stream.
        also=((("qwen", "qwen-code"), ("-o=stream-json", "--output-format=stream-json")),),
        mode=("--output-format=stream-json",),
    ),
    Agent(
        "codex",
        "wrapper.dialects.codex:CodexDialect",
        ("codex",),
        "codex",
        mode=("--json", "--experimental-json", "app-server"),
    ),
    Agent(
        "gemini",
        "wrapper.dialects.gemini:GeminiDialect",
        ("gemini", "gemini-cli"),
        "gemini",
        mode=("--output-format=stream-json", "-o=stream-json"),
    ),
    Agent(
        "opencode",
        "wrapper.dialects.opencode:OpencodeDialect",
        ("opencode", "opencode-ai"),
        "opencode",
        mode=("--format=json",),
    ),
    Agent("amp", "wrapper.dialects.amp:AmpDialect", ("amp",), "amp", mode=("--stream-json",)),
    Agent(
        "cursor",
        "wrapper.dialects.cursor:CursorDialect",
        ("cursor-agent", "cursor"),
        "cursor",
        mode=("--output-format=stream-json",),
    ),
    Agent(
        "acp",
        "wrapper.dialects.acp.dialect:AcpDialect",
        (
            "gemini",
            "opencode",
            "cursor-agent",
            "qwen",
            "goose",
            "kimi",
            "copilot",
            "droid",
            "kilo",
        ),
        "acp",
        needs=("--acp", "acp"),
        adapters=("claude-code-acp", "codex-acp"),
    ),
)

BY_NAME: dict[str, Agent] = {agent.name: agent for agent in AGENTS}

#: Programs that run another one named by their first argument that is not an
#: option (``env`` also skips ``NAME=value`` settings).
LAUNCHERS = frozenset({"env", "npx", "bunx", "pnpx", "uvx"})
#: Options of those launchers that take a value in the next argument.
_LAUNCHER_VALUE_OPTIONS = frozenset({"-p", "--package", "-u", "--unset", "-C", "--chdir"})


def program(command: Sequence[str]) -> tuple[str, Sequence[str]] | None:
    """The name of the program a command line runs and the arguments it gets,
    looking through launchers; None when there is none."""
    args = list(command)
    while args:
        name = _bare_name(args[0])
        if name not in LAUNCHERS:
            return name, args[1:]
        rest = args[1:]
        while rest and (rest[0].startswith("-") or (name == "env" and "=" in rest[0])):
            skip = 2 if rest[0] in _LAUNCHER_VALUE_OPTIONS else 1
            rest = rest[skip:]
        args = rest
    return None


def program_name(command: Sequence[str]) -> str | None:
    """The name of the program a command line runs (see ``program``): what
    result.json calls the agent, whichever format its stream was read in."""
    found = program(command)
    return found[0] if found is not None else None


def _bare_name(arg: str) -> str:
    name = os.path.basename(arg)
    if arg.startswith("@") and "/" in arg:  # a scoped package: @scope/name[@version]
        name = arg.split("/", 1)[1]
    head, at, _version = name.rpartition("@")
    return head if at and head else name


def _holds(args: Sequence[str], needs: tuple[str, ...]) -> bool:
    options = args[: args.index("--")] if "--" in args else args
    for index, arg in enumerate(options):
        if not arg.startswith("-"):
            continue
        if arg in needs or f"{arg}={''.join(options[index + 1 : index + 2])}" in needs:
            return True
    return bool(args) and not args[0].startswith("-") and args[0] in needs


def lacks_mode(command: Sequence[str]) -> Agent | None:
    """The agent a command line runs by its own name without the option that
    puts it in the mode whose stream the wrapper reads; None otherwise."""
    agent = detect(command)
    found = program(command)
    if agent is None or found is None or not agent.mode:
        return None
    name, args = found
    if name not in agent.executables or _holds(args, agent.mode):
        return None
    return agent


def detect(command: Sequence[str]) -> Agent | None:
    """The agent a command line runs, when it says so conclusively."""
    found = program(command)
    if found is None:
        return None
    name, args = found
    # (agent, needs) for every way this program can write an agent's format.
    forms = [(agent, agent.needs) for agent in AGENTS if name in agent.executables]
    forms += [
        (agent, needs) for agent in AGENTS for programs, needs in agent.also if name in programs
    ]
    forms += [(agent, ()) for agent in AGENTS if name in agent.adapters]
    for agent, needs in sorted(forms, key=lambda form: not form[1]):
        if not needs or _holds(args, needs):
            return agent
    return None
