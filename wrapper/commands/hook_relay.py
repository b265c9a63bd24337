"""``agent-wrapper hook-relay``: one PreToolUse handler of a run, run for the
agent that enforces it natively (``wrapper.hooks.native``).

The agent runs it as its own hook, with the hook input on stdin. It finds
the handler in the run's settings files, runs it as a run would, appends
its decision to the run directory's records and answers the agent in its
protocol. Whatever goes wrong fails open (exit 0, no answer), recorded when
the run directory is known: a relay must never be what blocks a tool.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import trio

from wrapper.core import environment
from wrapper.core.events import Event, HookDecision
from wrapper.core.hook_protocol import Decision, HandlerResult
from wrapper.core.jsonout import dumps
from wrapper.core.settings import SettingsError
from wrapper.dialects import tool_kind
from wrapper.files.settings_file import load_settings
from wrapper.hooks.native import (
    RECORDS,
    WHOLE_CHAIN,
    agent_answer,
    deciding_result,
    record,
    refused_input_reason,
    rewriting_result,
    takes_updated_input,
)
from wrapper.hooks.native_agents import codex_answer
from wrapper.hooks.runner import HookContext, run_chain

#: What an agent sends a hook it gives up on, or its own group as it ends.
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def hook_relay(
    files: list[str], group: str, index: str, origin: str, *, agent: str | None = None
) -> int:
    """Relay the handler at ``index`` of the PreToolUse matcher group
    ``group`` of the settings ``files``, configured at ``origin`` (its key
    in its file, ``hooks.PreToolUse[G].hooks[H]``); ``WHOLE_CHAIN`` relays
    every handler whose matcher takes the tool, for an agent that cannot
    apply matchers itself. ``agent``: the dialect that knows the kinds of
    the agent's tools, for matchers that name one (``@execute``)."""
    run_dir = os.environ.get(environment.RUN_DIR)
    try:
        payload = orjson.loads(sys.stdin.buffer.read())
    except (OSError, orjson.JSONDecodeError):
        payload = None
    if not isinstance(payload, dict):
        _record(run_dir, origin, None, "was given no JSON object as hook input by the agent")
        return 0
    tool = payload.get("tool_name") if isinstance(payload.get("tool_name"), str) else None
    try:
        settings = load_settings(files)
        kind = tool_kind(agent, tool or "")
        if (group, index, origin) == WHOLE_CHAIN:
            handlers = settings.pre_tool_use_handlers(tool or "", kind)
        else:
            chosen = settings.pre_tool_use[int(group)]
            if chosen.names_kinds and not chosen.matches(tool, kind):
                return 0  # the agent ran it for every tool: this one is not the handler's
            handlers = [chosen.handlers[int(index)]]
    except (SettingsError, IndexError, ValueError) as exc:
        _record(run_dir, origin, tool, f"could not be found again in the settings ({exc})")
        return 0
    if (group, index, origin) != WHOLE_CHAIN and handlers[0].origin.rsplit(": ", 1)[-1] != origin:
        _record(run_dir, origin, tool, "could not be found again: the settings files changed")
        return 0
    # The agent's environment, without what the run gave the agent alone.
    env = environment.without_agent_env(os.environ)
    cwd = Path(env.get("CLAUDE_PROJECT_DIR") or os.getcwd())
    payload.setdefault("run_id", env.get(environment.RUN_ID))
    payload.setdefault("agent_id", env.get(environment.RUN_ID))
    events: list[Event] = []
    ctx = HookContext(
        cwd=cwd,
        env=env,
        # relays may run at once (parallel tool calls): verifiers apart
        run_dir=Path(run_dir or cwd / ".agent-wrapper") / "hooks" / f"relay-{os.getpid()}",
        agent_command=(),
        evaluator=settings.evaluator,
        emit=events.append,
    )
    chain = functools.partial(run_chain, handlers, "PreToolUse", payload, ctx, blocking=True)
    results = trio.run(_until_stopped, chain)
    if results is None:
        _record(run_dir, origin, tool, "was stopped by a signal (the agent's) before it answered")
        return 0
    decided = [e for e in events if isinstance(e, HookDecision)]
    deciding = deciding_result(results)
    rewriter = rewriting_result(results, deciding)
    fate = None
    if rewriter is not None:
        fate = "applied" if takes_updated_input(agent, tool) else "refused"
    for result, decided_one in zip(results, decided, strict=False):
        mine = fate if result is rewriter else None
        said = decided_one
        if mine == "refused":
            why = refused_input_reason(decided_one.handler)
            said = dataclasses.replace(decided_one, decision="block", reason=why)
        elif mine == "applied":
            before = f"{decided_one.reason}; " if decided_one.reason else ""
            said = dataclasses.replace(
                decided_one, reason=f"{before}the tool's input was rewritten"
            )
        _append(run_dir, record(said, tool, mine, payload))
    if rewriter is not None and fate == "refused":
        name = decided[results.index(rewriter)].handler if decided else origin
        deciding = HandlerResult(
            decision=Decision.BLOCK, permission="deny", reason=refused_input_reason(name)
        )
    new_input = rewriter.updated_input if rewriter is not None and fate == "applied" else None
    if deciding is None and new_input is not None:
        deciding = rewriter
    answer = agent_answer(deciding, new_input) if deciding is not None else None
    if agent == "codex":
        answer = codex_answer(answer)
    if answer is not None:
        sys.stdout.buffer.write(dumps(answer) + b"\n")
    return 0


async def _until_stopped(
    chain: Callable[[], Awaitable[list[HandlerResult]]],
) -> list[HandlerResult] | None:
    """The chain's results, or None when the relay is told to stop first
    (an agent ending its hook at its own time limit, or ending itself):
    the handlers' processes and MCP servers, each in a group of its own, are
    ended on the way out, not left to run on after the relay."""
    results: list[HandlerResult] | None = None

    async def run() -> None:
        nonlocal results
        results = await chain()
        nursery.cancel_scope.cancel()

    with trio.open_signal_receiver(*_STOP_SIGNALS) as stops:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            async for _ in stops:
                nursery.cancel_scope.cancel()
                break
    return results


def _record(run_dir: str | None, handler: str, tool: str | None, why: str) -> None:
    failed = HookDecision(event="PreToolUse", handler=handler, decision="allow", warning=why)
    _append(run_dir, record(failed, tool))


def _append(run_dir: str | None, line: bytes) -> None:
    """One write in append mode: records of relays running at once never mix."""
    if not run_dir:
        return
    path = Path(run_dir) / RECORDS
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as exc:
        print(
            f"agent-wrapper hook-relay: cannot record the decision in {path}: {exc}",
            file=sys.stderr,
        )
