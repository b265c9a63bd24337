"""PreToolUse handlers enforced by the agent itself, through its own hooks
(Claude Code's ``--settings``, pi's ``--extension``): what the agent is
given, the relay the handlers run behind, and the relay's records read back
into the run.

Claude Code is given a copy of the user's own settings for it with one hook
per PreToolUse handler of the run's settings, under the handler's matcher:
``WRAPPER hook-relay --handler GROUP INDEX ORIGIN --settings FILE...``. pi
is given an extension whose ``tool_call`` handler runs
``WRAPPER hook-relay --handler '*' '*' PreToolUse --settings FILE...``: the
relay runs every handler whose matcher takes the tool, in order, the first
that refuses deciding.
The relay (``wrapper.commands.hook_relay``) runs the user's handler as a run
would (any handler type), appends what it decided to ``RECORDS`` in the run
directory and answers the agent in its own protocol; the run turns the
records into its ``hook_started``/``hook_decision`` events and warnings, so
that a decision taken inside the agent is seen as one the wrapper took.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from wrapper.core.events import Event, HookDecision, HookStarted, WarningEvent
from wrapper.core.hook_protocol import Decision, HandlerResult
from wrapper.core.limits import RELAY_ANSWER_MAX_BYTES
from wrapper.core.settings import Handler, Settings

#: Where the relay appends its decisions, in the run directory.
RECORDS = Path("hooks") / "native-decisions.jsonl"
#: The settings file Claude Code is given, in the run directory.
SETTINGS_FILE = Path("hooks") / "claude-settings.json"
#: The extension pi is given, in the run directory.
EXTENSION_FILE = Path("hooks") / "pi-extension.mjs"
#: ``--handler`` for the relay that runs the whole chain of the tool.
WHOLE_CHAIN = ("*", "*", "PreToolUse")
#: The agent's own time limit on a relayed hook is the handler's and this
#: much more: the relay enforces the handler's, and must have time to answer.
RELAY_MARGIN = 10.0
#: A record line is read back only up to this size (a reason is cut long before).
RECORD_BYTES = 256 * 1024
#: A tool's input is kept in a record (for ``PermissionDenied`` handlers) only
#: up to this size once encoded; a larger one is recorded as null, so that a
#: record stays well under ``RECORD_BYTES``.
RECORD_INPUT_BYTES = 64 * 1024
#: The agents whose own hooks take a rewritten tool input (``updatedInput``):
#: Claude Code applies it from the hook's answer, pi's extension and
#: opencode's plugin by changing the call's input in place (pi's extension
#: API documents it, checked on 0.73.1; opencode 1.18.33 runs a tool with
#: the object it handed its plugins as ``output.args``). Through the relay,
#: any other agent gets a deny instead of the call unchanged.
TAKES_UPDATED_INPUT = frozenset({"claude", "pi", "opencode"})
#: Tools of those agents that read their input before the hook runs, so a
#: rewritten one would not hold: opencode 1.18.33's MCP resource tools parse
#: their arguments before calling ``tool.execute.before``.
KEEPS_ITS_INPUT = {
    "opencode": frozenset(
        {"list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"}
    ),
}


def takes_updated_input(agent: str | None, tool: str | None) -> bool:
    """Whether ``agent``'s call of ``tool`` runs with a rewritten input."""
    if agent not in TAKES_UPDATED_INPUT:
        return False
    return tool not in KEEPS_ITS_INPUT.get(agent, frozenset())


def agent_settings(
    user: Mapping[str, Any],
    settings: Settings,
    wrapper_bin: str,
    files: Sequence[str],
    agent: str = "claude",
) -> dict[str, Any]:
    """``user`` (the agent's settings from its command line, or empty) with a
    relayed hook for each PreToolUse handler of ``settings`` (read from
    ``files``, absolute), after the user's own. A matcher that names a tool
    kind (``@execute``) means nothing to the agent: its hooks run for every
    tool, and the relay (told the ``agent``, whose dialect knows its tools'
    kinds) applies the matcher itself."""
    merged = dict(user)
    hooks = dict(merged["hooks"]) if isinstance(merged.get("hooks"), dict) else {}
    groups = list(hooks["PreToolUse"]) if isinstance(hooks.get("PreToolUse"), list) else []
    for g, group in enumerate(settings.pre_tool_use):
        relayed = [
            relay_hook(wrapper_bin, files, g, h, handler, agent=agent)
            for h, handler in enumerate(group.handlers)
        ]
        entry: dict[str, Any] = {"hooks": relayed}
        if group.matcher and not group.names_kinds:
            entry["matcher"] = group.matcher
        groups.append(entry)
    hooks["PreToolUse"] = groups
    merged["hooks"] = hooks
    return merged


def pi_extension(
    settings: Settings, wrapper_bin: str, files: Sequence[str], agent: str = "pi"
) -> str:
    """pi's extension that relays each tool call to the run's PreToolUse
    handlers: a refusal (``deny``, ``ask``, exit 2, ``continue: false``)
    blocks the tool with its reason; anything else, the relay's failure
    included, lets it run."""
    argv = [wrapper_bin, "hook-relay", "--agent", agent, "--handler", *WHOLE_CHAIN]
    for path in files:
        argv += ["--settings", path]
    limit = sum(h.timeout for g in settings.pre_tool_use for h in g.handlers) + RELAY_MARGIN
    return relay_script(_PI_EXTENSION, argv, limit)


def relay_script(template: str, argv: Sequence[str], limit: float) -> str:
    """``template`` (pi's extension, opencode's plugin) with the relay's
    words, its time limit and the most of its answer read."""
    script = template.replace("$LIMIT_MS", str(math.ceil(limit * 1000)))
    script = script.replace("$MAX_BUFFER", str(RELAY_ANSWER_MAX_BYTES))
    # The relay's words last: a path in them may read "$LIMIT_MS" too.
    return script.replace("$RELAY", orjson.dumps(argv).decode())


_PI_EXTENSION = """\
// Written by agent-wrapper for one run: the run's PreToolUse handlers, run
// through its relay before each tool call.
import { execFile } from "node:child_process";

const RELAY = $RELAY;

export default function (pi) {
  pi.on("tool_call", async (event) => {
    const input = JSON.stringify({
      hook_event_name: "PreToolUse",
      cwd: process.cwd(),
      tool_name: event.toolName,
      tool_input: event.input,
      tool_use_id: event.toolCallId,
    });
    const out = await new Promise((resolve) => {
      const child = execFile(
        RELAY[0],
        RELAY.slice(1),
        { timeout: $LIMIT_MS, maxBuffer: $MAX_BUFFER },
        (error, stdout, stderr) => {
          // Fail open, but say so: the tool runs unchecked.
          if (error) {
            // A number: its exit status; a string: why it could not run or be read.
            const code = typeof error.code === "number" ? `exit status ${error.code}` : error.code;
            const why = code || (error.killed ? "no answer in time" : error.message);
            const said = String(stderr).trim().slice(-300);
            const tail = said ? `: ${said}` : "";
            console.error(
              `agent-wrapper: the PreToolUse relay failed (${why}${tail}); the tool runs`,
            );
          }
          resolve(error ? "" : stdout);
        },
      );
      child.stdin.on("error", () => {});
      child.stdin.end(input);
    });
    let answer = null;
    try {
      answer = out.trim() ? JSON.parse(out) : null;
    } catch {
      answer = null;
    }
    if (answer === null || typeof answer !== "object") return undefined;
    if (answer.continue === false) {
      return { block: true, reason: answer.stopReason || "a PreToolUse handler ended the run" };
    }
    const specific = answer.hookSpecificOutput || {};
    if (specific.permissionDecision === "deny" || specific.permissionDecision === "ask") {
      return { block: true, reason: specific.permissionDecisionReason };
    }
    const updated = specific.updatedInput;
    if (updated !== null && typeof updated === "object" && !Array.isArray(updated)) {
      // pi runs the call with its input object as the handlers left it:
      // replaced whole, as the hooks protocol's updatedInput replaces it.
      for (const key of Object.keys(event.input)) delete event.input[key];
      Object.assign(event.input, updated);
    }
    return undefined;
  });
}
"""


def relay_hook(
    wrapper_bin: str,
    files: Sequence[str],
    group: int,
    index: int,
    handler: Handler,
    *,
    agent: str = "claude",
) -> dict[str, Any]:
    """The agent's hook that runs ``handler`` through the relay."""
    # The handler's place in its file, to check it is still there: the file
    # itself is given by its absolute path, and was perhaps named otherwise.
    where = handler.origin.rsplit(": ", 1)[-1]
    argv = [wrapper_bin, "hook-relay", "--agent", agent]
    argv += ["--handler", str(group), str(index), where]
    for path in files:
        argv += ["--settings", path]
    return {
        "type": "command",
        "command": shlex.join(argv),
        "timeout": math.ceil(handler.timeout + RELAY_MARGIN),
    }


def deciding_result(results: Sequence[HandlerResult]) -> HandlerResult | None:
    """The result that decides a PreToolUse chain, as over ACP: the first
    that says allow or refuses; a plain allow leaves the decision to the
    next handler, then to the agent (None)."""
    return next(
        (r for r in results if r.decision is not Decision.ALLOW or r.permission == "allow"),
        None,
    )


def rewriting_result(
    results: Sequence[HandlerResult], deciding: HandlerResult | None
) -> HandlerResult | None:
    """The result whose rewritten input the call would run with: the
    deciding handler's if it allows with one, else the first plain allow
    before it that has one; None when the call is refused anyway."""
    if deciding is not None and deciding.decision is not Decision.ALLOW:
        return None
    for result in results:
        if result.updated_input is not None and result.warning is None:
            return result
        if result is deciding:
            break
    return None


def agent_answer(
    result: HandlerResult, updated_input: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """What the relay tells the agent (Claude Code's PreToolUse answer) for
    the handler's ``result``, with the tool's input as a handler rewrote it
    (``updated_input``, for an agent that takes one); None to say nothing
    (the agent decides as it would without the hook: a handler that allowed
    without saying so, or failed, which fails open)."""
    if result.warning is not None and updated_input is None:
        return None
    if result.decision is Decision.END:
        answer: dict[str, Any] = {"continue": False}
        if result.reason:
            answer["stopReason"] = result.reason
        return answer
    specific: dict[str, Any] = {"hookEventName": "PreToolUse"}
    if result.decision is Decision.BLOCK:
        specific["permissionDecision"] = "ask" if result.permission == "ask" else "deny"
        specific["permissionDecisionReason"] = result.reason or "denied by a PreToolUse handler"
    elif result.permission == "allow":
        specific["permissionDecision"] = "allow"
        if result.reason:
            specific["permissionDecisionReason"] = result.reason
    if result.context:
        specific["additionalContext"] = result.context
    if updated_input is not None and result.decision is Decision.ALLOW:
        specific["updatedInput"] = updated_input
    if len(specific) == 1:
        return None
    return {"hookSpecificOutput": specific}


def record(
    decided: HookDecision,
    tool: str | None,
    updated_input: str | None = None,
    call: Mapping[str, Any] | None = None,
) -> bytes:
    """One line of ``RECORDS``. ``updated_input``: what became of the
    handler's rewritten input (``applied``, ``refused``), None without one;
    ``call``: the hook input (the tool's input and id, for a refusal's
    ``PermissionDenied`` handlers)."""
    call = call or {}
    tool_input = call.get("tool_input")
    try:
        if len(orjson.dumps(tool_input)) > RECORD_INPUT_BYTES:
            tool_input = None
    except TypeError:
        tool_input = None
    use_id = call.get("tool_use_id")
    return (
        orjson.dumps(
            {
                "handler": decided.handler,
                "decision": decided.decision,
                "reason": decided.reason,
                "warning": decided.warning,
                "exitCode": decided.exit_code,
                "durationMs": decided.duration_ms,
                "tool": tool,
                "updatedInput": updated_input,
                "toolInput": tool_input,
                "toolUseId": use_id if isinstance(use_id, str) else None,
            }
        )
        + b"\n"
    )


class NativeRecords:
    """The relay's records of one run, read as they grow."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def read_new(self) -> list[Event]:
        """The events of the records appended since the last call."""
        try:
            with self.path.open("rb") as file:
                file.seek(self._offset)
                data = file.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self._offset += end
        events: list[Event] = []
        for line in data[:end].splitlines():
            if len(line) > RECORD_BYTES:
                continue
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(entry, dict):
                events += _events(entry)
        return events


def _events(entry: dict[str, Any]) -> list[Event]:
    def text(key: str) -> str | None:
        value = entry.get(key)
        return value if isinstance(value, str) else None

    def number(key: str) -> int | None:
        value = entry.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    handler = text("handler") or "?"
    decision = text("decision") or "allow"
    warning = text("warning")
    tool = text("tool")
    events: list[Event] = [
        HookStarted(event="PreToolUse", handler=handler),
        HookDecision(
            event="PreToolUse",
            handler=handler,
            decision=decision,
            reason=text("reason"),
            warning=warning,
            exit_code=number("exitCode"),
            duration_ms=number("durationMs") or 0,
            tool_name=tool,
            tool_input=entry.get("toolInput"),
            tool_use_id=text("toolUseId"),
        ),
    ]
    if warning is not None:
        events.append(
            WarningEvent(
                code="hook_failed",
                message=f"PreToolUse handler {handler} {warning}; "
                f"the agent decided on {tool or 'the tool'} as without it",
            )
        )
    if entry.get("updatedInput") == "refused":
        events.append(refused_input_warning(handler, tool, "the agent"))
    return events


def refused_input_warning(handler: str, tool: str | None, agent: str) -> WarningEvent:
    """The warning for a rewritten tool input that ``agent`` cannot take:
    the call is denied rather than run as the agent asked for it."""
    return WarningEvent(
        code="updated_input_refused",
        message=f"PreToolUse handler {handler} rewrote the input of {tool or 'a tool'!r}, "
        f"but {agent} cannot take a changed input: the call was denied rather than run "
        "unchanged (only Claude Code, pi and opencode apply updatedInput, opencode not to "
        "its MCP resource tools; return a deny with a reason to steer the agent instead)",
    )


def refused_input_reason(handler: str) -> str:
    """What the agent is told of a call denied for a rewritten input it cannot take."""
    return (
        f"PreToolUse handler {handler} would only allow this call with a changed input, "
        "which cannot be applied here; the call was denied"
    )
