"""Cursor Agent (``cursor-agent -p --output-format stream-json``).

Checked against Cursor's CLI reference (cursor.com/docs/cli/reference/
output-format, 2026 edition) and public captures of cursor-agent
2025.10 to 2026.01 builds. The CLI is closed source; its stream is close to
Claude Code's, so this dialect is Claude's with these differences:

* ``system``/``init`` has ``apiKeySource`` and ``permissionMode`` but no tool
  list; ``user`` echoes the prompt; ``thinking`` (``delta``/``completed``)
  and ``interaction_query`` lines carry nothing the wrapper needs;
* ``assistant`` lines hold text only (one per message, or one per token with
  ``--stream-partial-output``, followed by the whole message): they become
  ``TextDelta`` events, never assistant messages;
* tools are separate ``tool_call`` lines (``started``/``completed``) whose
  payload sits under a ``<name>ToolCall`` key, with a result of ``success``,
  ``error`` or ``rejected``, or for a shell command that exited non-zero
  ``failure`` (``exitCode``, ``stdout``, ``stderr``);
* the ``result`` line (``subtype`` ``success`` or ``error``, ``is_error``) is
  the end of the run, decided by Claude's rules; it has no stop reason, so
  the raw reason is the subtype, and newer builds add camelCase ``usage``;
  its ``result`` text joins every message of the run, so the final text is
  the last assistant message after the last tool call instead.

When the process fails it may exit non-zero without a ``result`` line (the
error goes to stderr): ``on_exit`` then reports ``error`` (``aborted`` for
exit 130/143).

The task is the last argument and resuming inserts ``--resume SESSION_ID``
before it. Whether cursor-agent honours ``--`` is not documented, so a task
starting with ``-`` gets a leading space instead; a task longer than one
argument is a usage error.

Executables: ``cursor-agent`` and ``cursor`` (as in ``cursor agent -p …``,
where the task still goes last).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from wrapper.core.events import Event, TextDelta, ToolEnded
from wrapper.dialects.base import as_int, as_str, tool_result_text, tool_started
from wrapper.dialects.claude import ClaudeDialect

#: Event types only Cursor's stream has.
_CURSOR_TYPES = frozenset({"tool_call", "thinking", "interaction_query"})


class CursorDialect(ClaudeDialect):
    name: ClassVar[str] = "cursor"
    usage_granularity: ClassVar[str | None] = "turn"
    #: What each tool does, for matchers that name a kind (``@execute``): Cursor Agent's tool calls
    #: (``shellToolCall`` is ``shell``, ...); a tool not listed (an MCP server's) is ``other``.
    tool_kinds: ClassVar[Mapping[str, str]] = {
        "shell": "execute",
        "read": "read",
        "edit": "edit",
        "write": "edit",
        "delete": "edit",
        "grep": "search",
        "glob": "search",
        "ls": "search",
    }
    streaming_command: ClassVar[str] = "cursor-agent -p --output-format stream-json"
    agent_name: ClassVar[str] = "Cursor Agent"
    prompt_flag: ClassVar[tuple[str, ...]] = ()
    guard_dash: ClassVar[bool] = True
    no_session_flag: ClassVar[str | None] = None
    transcript_dir: ClassVar[tuple[str, str] | None] = None

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        kind = obj.get("type")
        if kind in _CURSOR_TYPES:
            return True
        return (
            kind == "system"
            and obj.get("subtype") == "init"
            and "apiKeySource" in obj
            and "tools" not in obj
            and "claude_code_version" not in obj
        )

    def final_text(self, result_text: str | None) -> str:
        # The result line's text joins every message of the run; the final
        # text is the last message's alone.
        return self._text

    # -- handlers ------------------------------------------------------------

    def _assistant_text(self, obj: dict[str, Any]) -> list[Event]:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        texts = [
            block["text"]
            for block in (content if isinstance(content, list) else ())
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        ]
        text = "".join(texts)
        if not text:
            return []
        self._text = text
        return [TextDelta(text=text)]

    def _tool_call(self, obj: dict[str, Any]) -> list[Event]:
        call = obj.get("tool_call")
        found = _tool_payload(call) if isinstance(call, dict) else None
        if found is None:
            return []
        tool, payload = found
        call_id = as_str(obj.get("call_id"))
        args = payload.get("args")
        subtype = obj.get("subtype")
        if subtype == "started":
            # what was said before a tool call is interim, never the final text
            self._text = ""
            return [tool_started(tool, call_id, args)]
        if subtype != "completed":
            return []
        result = payload.get("result")
        result = result if isinstance(result, dict) else {}
        success = result.get("success")
        failure = result.get("failure")
        if isinstance(success, dict):
            output: Any = success.get("stdout", success)
            is_error = as_int(success.get("exitCode")) not in (None, 0)
        elif isinstance(failure, dict):
            # a shell command that exited non-zero: what it said on stderr
            # explains it best, else whatever it printed
            output = failure.get("stderr") or failure.get("stdout") or failure
            is_error = True
        elif "error" in result or "rejected" in result:
            output, is_error = result.get("error") or result.get("rejected"), True
        else:
            output, is_error = success, False
        return [
            ToolEnded(
                tool=tool, tool_call_id=call_id, is_error=is_error, result=tool_result_text(output)
            )
        ]


def _tool_payload(call: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(tool name, payload) from ``{"<name>ToolCall": payload}``."""
    for key, payload in call.items():
        if key.endswith("ToolCall") and isinstance(payload, dict):
            name = key.removesuffix("ToolCall") or key
            args = payload.get("args")
            if name == "mcp" and isinstance(args, dict) and isinstance(args.get("toolName"), str):
                name = f"mcp:{args['toolName']}"
            return name, payload
    return None


CursorDialect.handlers = {
    **ClaudeDialect.handlers,
    "assistant": CursorDialect._assistant_text,
    "tool_call": CursorDialect._tool_call,
}
