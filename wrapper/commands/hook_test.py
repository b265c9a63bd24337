"""``agent-wrapper hook-test``: run the configured handlers on one event and
print what they decided, the way a run would have taken it.

Its handlers are checked as ``run`` checks them (a missing program or script
is a usage error, not a block whose reason is the interpreter's complaint),
and its exit status is the decision: 0 allow, 1 block or end, 2 usage, so a
script or a CI step can test a hook without parsing the report."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import trio

from wrapper.core.events import Event
from wrapper.core.hook_protocol import PROMPT_SOURCES, Decision, HandlerResult
from wrapper.core.hook_settings import MATCH_FIELDS
from wrapper.core.jsonout import dumps
from wrapper.core.settings import STOP_EVENTS, Handler, Settings, SettingsError
from wrapper.dialects import DIALECTS, tool_kind
from wrapper.files.settings_file import check_commands
from wrapper.files.transcript import last_assistant_message
from wrapper.hooks.native import (
    TAKES_UPDATED_INPUT,
    deciding_result,
    refused_input_reason,
    rewriting_result,
    takes_updated_input,
)
from wrapper.hooks.runner import HookContext, failure_warnings, run_chain

PROG = "agent-wrapper hook-test"

#: Events whose first block or end decides (the others only observe).
BLOCKING = STOP_EVENTS | {"UserPromptSubmit", "PreToolUse"}


#: Fields the wrapper itself reads from the event, and what each must be
#: when present (``null`` is taken as absent, except for the event name).
_TEXT_FIELDS = ("transcript_path", "cwd", "tool_name", "last_assistant_message")


def event_problem(payload: Any) -> str | None:
    """What makes ``payload`` unusable as a hook event, or None."""
    if not isinstance(payload, dict):
        return "not a JSON object"
    if "hook_event_name" in payload and not isinstance(payload["hook_event_name"], str):
        return 'hook_event_name: expected a string such as "Stop"'
    for key in _TEXT_FIELDS:
        value = payload.get(key)
        if value is not None and not isinstance(value, str):
            return f"{key}: expected a string or null"
        if isinstance(value, str) and "\0" in value:
            return f"{key}: contains a NUL character"
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and not Path(cwd).is_dir():
        return f"cwd: {cwd} is not a directory; handlers run there"
    return None


def _rewritten(
    report: dict[str, Any],
    handlers: list[Handler],
    results: list[HandlerResult],
    agent: str | None,
    tool: str | None,
) -> None:
    """A PreToolUse chain's rewritten input in ``report`` (``updatedInput``),
    as a run takes it: applied by the agents that can, the call denied on
    the others (on ``agent``'s, when it is named, for its ``tool``)."""
    rewriter = rewriting_result(results, deciding_result(results))
    report["updatedInput"] = rewriter.updated_input if rewriter is not None else None
    if rewriter is None:
        return
    who = handlers[results.index(rewriter)].name
    if agent is None:
        report["note"] = (
            f"{who} rewrote the tool's input: applied on "
            f"{', '.join(sorted(TAKES_UPDATED_INPUT))}; on any other agent the call is denied"
        )
    elif not takes_updated_input(agent, tool):
        report.update(decision="block", reason=refused_input_reason(who), handler=who)


def hook_test(settings: Settings, event_path: str, agent: str | None = None) -> int:
    """Run the handlers of the event at ``event_path`` (``-``: stdin);
    ``agent``: the dialect whose tool names the event's ``tool_name`` is
    (for matchers that name a kind), else the kind the dialects agree on."""
    if agent is not None and agent not in DIALECTS:
        print(f"{PROG}: --agent {agent}: expected one of {', '.join(DIALECTS)}", file=sys.stderr)
        return 2
    try:
        raw = sys.stdin.buffer.read() if event_path == "-" else Path(event_path).read_bytes()
        payload = orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError) as exc:
        print(f"{PROG}: --event {event_path}: {exc}", file=sys.stderr)
        return 2
    problem = event_problem(payload)
    if problem is not None:
        print(f"{PROG}: --event {event_path}: {problem}", file=sys.stderr)
        return 2
    name = payload.setdefault("hook_event_name", "Stop")
    if name == "UserPromptSubmit":
        # as a run gives it: what the prompt is
        source = payload.setdefault("source", "task")
        if source not in PROMPT_SOURCES:
            print(
                f"{PROG}: --event {event_path}: source: expected one of "
                f"{', '.join(PROMPT_SOURCES)}, got {source!r}",
                file=sys.stderr,
            )
            return 2
    transcript = payload.get("transcript_path")
    if payload.get("last_assistant_message") is None and isinstance(transcript, str):
        payload["last_assistant_message"] = last_assistant_message(transcript)
    cwd = Path(payload["cwd"]) if isinstance(payload.get("cwd"), str) else Path.cwd()
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(cwd)}
    try:
        check_commands(settings, env, cwd)
    except SettingsError as exc:
        print(f"{PROG}: --settings {exc}", file=sys.stderr)
        return 2
    events: list[Event] = []
    ctx = HookContext(
        cwd=cwd,
        env=env,
        run_dir=cwd / ".agent-wrapper" / "hook-test",
        agent_command=(),
        evaluator=settings.evaluator,
        emit=events.append,
    )
    tool = payload.get("tool_name") if isinstance(payload.get("tool_name"), str) else None
    kind = tool_kind(agent, tool) if tool is not None else None
    if name == "PreToolUse":  # kept apart: only some agents enforce it
        handlers = settings.pre_tool_use_handlers(tool or "", kind)
    elif name in MATCH_FIELDS:  # matched on a notification's type, a compaction's trigger
        value = payload.get(MATCH_FIELDS[name])
        value = value if isinstance(value, str) else None
        groups = settings.hooks.get(name, ())
        handlers = [h for g in groups if g.matches(value) for h in g.handlers]
    else:
        handlers = settings.handlers(name, tool, kind)
    # as a run has it: with stop.failClosed a failing Stop handler ends the run
    fail_closed = settings.fail_closed and name in STOP_EVENTS
    results = trio.run(
        functools.partial(
            run_chain,
            handlers,
            name,
            payload,
            ctx,
            blocking=name in BLOCKING,
            stop_at_failure=fail_closed,
        )
    )
    then = "a run would end as an error (stop.failClosed)" if fail_closed else "taken as allow"
    warnings = failure_warnings(name, handlers, results, then)
    for warning in warnings:
        print(f"{PROG}: warning: {' '.join(warning.message.split())}", file=sys.stderr)
    deciding = next((r for r in results if r.decision is not Decision.ALLOW), None)
    index = results.index(deciding) if deciding is not None else None
    report: dict[str, Any] = {
        "event": name,
        "toolKind": kind,
        "decision": str(deciding.decision) if deciding is not None else "allow",
        "reason": deciding.reason if deciding is not None else None,
        "handler": handlers[index].name if index is not None else None,
        "handlers": [
            {
                "handler": handler.name,
                "decision": str(result.decision),
                "reason": result.reason,
                "warning": result.warning,
                "exitCode": result.exit_code,
                "additionalContext": result.context,
                "extendMaxSteers": result.extend_max_steers,
                "updatedInput": result.updated_input,
            }
            for handler, result in zip(handlers, results, strict=False)
        ],
        "skipped": len(handlers) - len(results),
    }
    if name == "PreToolUse":
        _rewritten(report, handlers, results, agent, tool)
    if not handlers:
        report["note"] = f"no handler is configured for {name}"
    if fail_closed and warnings:
        failed = next(i for i, r in enumerate(results) if r.warning is not None)
        report.update(decision="end", reason=warnings[0].message, handler=handlers[failed].name)
    sys.stdout.buffer.write(dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    return 0 if report["decision"] == "allow" else 1
