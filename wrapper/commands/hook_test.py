"""``agent-wrapper hook-test``: run the configured handlers on one event and
print what they decided, the way a run would have taken it."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import trio

from wrapper.core.events import Event
from wrapper.core.hook_protocol import Decision
from wrapper.core.jsonout import dumps
from wrapper.core.settings import STOP_EVENTS, Settings
from wrapper.files.transcript import last_assistant_message
from wrapper.hooks.runner import HookContext, run_chain

#: Events whose first block or end decides (the others only observe).
BLOCKING = STOP_EVENTS | {"UserPromptSubmit"}


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


def hook_test(settings: Settings, event_path: str) -> int:
    try:
        raw = sys.stdin.buffer.read() if event_path == "-" else Path(event_path).read_bytes()
        payload = orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError) as exc:
        print(f"agent-wrapper hook-test: --event {event_path}: {exc}", file=sys.stderr)
        return 2
    problem = event_problem(payload)
    if problem is not None:
        print(f"agent-wrapper hook-test: --event {event_path}: {problem}", file=sys.stderr)
        return 2
    name = payload.setdefault("hook_event_name", "Stop")
    transcript = payload.get("transcript_path")
    if payload.get("last_assistant_message") is None and isinstance(transcript, str):
        payload["last_assistant_message"] = last_assistant_message(transcript)
    cwd = Path(payload["cwd"]) if isinstance(payload.get("cwd"), str) else Path.cwd()
    events: list[Event] = []
    ctx = HookContext(
        cwd=cwd,
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(cwd)},
        run_dir=cwd / ".agent-wrapper" / "hook-test",
        agent_command=(),
        evaluator=settings.evaluator,
        emit=events.append,
    )
    tool = payload.get("tool_name") if isinstance(payload.get("tool_name"), str) else None
    handlers = settings.handlers(name, tool)
    results = trio.run(
        functools.partial(run_chain, handlers, name, payload, ctx, blocking=name in BLOCKING)
    )
    deciding = next((r for r in results if r.decision is not Decision.ALLOW), None)
    index = results.index(deciding) if deciding is not None else None
    report: dict[str, Any] = {
        "event": name,
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
            }
            for handler, result in zip(handlers, results, strict=False)
        ],
        "skipped": len(handlers) - len(results),
    }
    if not handlers:
        report["note"] = f"no handler is configured for {name}"
    sys.stdout.buffer.write(dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    return 0
