"""Hook settings: the events a settings file may name, each handler as
configured and the checks that make it, with the few value checks the rest of
the settings share (``wrapper.core.settings`` merges the files).

A malformed handler is a ``SettingsError`` naming the file, the key and the
problem; an event the wrapper cannot run is a note, never dropped silently;
a name close to a known event is taken for a typo and refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from wrapper.core import matchers
from wrapper.core.jsonout import dumps
from wrapper.core.shellwords import ShellSyntax, split_command
from wrapper.core.spelling import closest
from wrapper.core.urls import url_without_secrets

if TYPE_CHECKING:
    from wrapper.core.mcp_servers import McpServer

#: Stop handlers: may block a stop and steer the agent.
STOP_EVENTS = frozenset({"Stop", "SubagentStop"})
#: Handlers that run before a prompt is sent and may add to it (or refuse it).
PROMPT_EVENTS = frozenset({"UserPromptSubmit", "SubagentStart"})
#: Handlers fired from what the stream shows or the run does; they observe
#: and never block. ``PostCompact``: a compaction ended (agents whose stream
#: says so); ``PermissionDenied``: a tool was refused (by a PreToolUse
#: handler, or over ACP by the permissions setting's deny);
#: ``Notification``: the run waits for a person, refused a steer, or spent
#: most of a cap.
OBSERVED_EVENTS = frozenset(
    {
        "PostToolUse",
        "PostToolUseFailure",
        "PreCompact",
        "PostCompact",
        "PermissionDenied",
        "Notification",
    }
)
#: Handlers of the run's own life: ``SessionStart`` (before an agent session's
#: first prompt; may add context), ``SessionEnd`` (once the run's outcome is
#: decided) and ``StopFailure`` (a turn ended on an API error); none blocks.
LIFECYCLE_EVENTS = frozenset({"SessionStart", "SessionEnd", "StopFailure"})
#: Claude Code events that need the agent's cooperation; the wrapper only
#: sees the stream, so it cannot enforce them.
UNENFORCEABLE_EVENTS = frozenset({"PreToolUse", "PermissionRequest"})
HOOK_EVENTS = STOP_EVENTS | PROMPT_EVENTS | OBSERVED_EVENTS | LIFECYCLE_EVENTS
#: Newer Claude Code events, tied to its own features (teams, worktrees,
#: MCP): the wrapper does not run them, and knowing them keeps them from
#: being taken for misspellings of the events above.
OTHER_CLAUDE_EVENTS = frozenset(
    {
        "Setup",
        "TeammateIdle",
        "TaskCreated",
        "TaskCompleted",
        "InstructionsLoaded",
        "ConfigChange",
        "WorktreeCreate",
        "WorktreeRemove",
        "Elicitation",
        "ElicitationResult",
    }
)
KNOWN_EVENTS = HOOK_EVENTS | UNENFORCEABLE_EVENTS | OTHER_CLAUDE_EVENTS
#: An unknown event name this close to a known one (edits, ignoring case) is
#: taken for a typo: a gate that silently never runs is worse than an error.
#: Names further off stay a note, since Claude Code keeps adding events.
NEAR_MISS_EDITS = 2
#: Events whose matcher selects tools by name.
TOOL_EVENTS = frozenset({"PostToolUse", "PostToolUseFailure", "PermissionDenied"})
#: Events whose matcher selects by a value of their input: a tool's name, a
#: notification's type, a compaction's trigger (a pattern is checked early).
MATCHED_EVENTS = TOOL_EVENTS | {"Notification", "PostCompact"}
#: The input field the matcher of an event that is not about a tool selects.
MATCH_FIELDS = {"Notification": "notification_type", "PostCompact": "trigger"}

#: Per-handler time limits, by handler type, in seconds. An ``mcp_tool``
#: handler's covers starting its server, the handshake and the call (a
#: Python server on the SDK starts in about a second): the same minute as a
#: command, not Claude Code's ten, since a handler that hangs holds the run.
DEFAULT_HANDLER_TIMEOUTS = {
    "command": 60.0,
    "http": 60.0,
    "prompt": 30.0,
    "agent": 60.0,
    "mcp_tool": 60.0,
}

#: A handler's command is shown in events and result.json at most this long
#: (its middle is cut: the start and the script name at the end matter most).
NAME_CHARS = 160


class SettingsError(Exception):
    """A settings file cannot be used; the message names file, key and problem."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Handler:
    """One hook handler as configured."""

    type: str
    #: Where it was configured, for messages: ``FILE: hooks.Stop[0].hooks[1]``.
    origin: str
    timeout: float
    #: ``command``: the command string (split at run time), or ``args``.
    command: str | None = None
    args: tuple[str, ...] | None = None
    shell: bool = False
    #: ``prompt`` and ``agent``: the instructions for the judge.
    prompt: str | None = None
    #: ``agent``: the verifier agent's command (default: the run's own).
    agent_command: tuple[str, ...] | None = None
    #: ``http``: where the hook input is POSTed, the request's extra headers
    #: (values as configured) and the variables they may use.
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    allowed_env_vars: frozenset[str] = frozenset()
    #: ``mcp_tool``: the server and tool named, the tool's arguments (the
    #: configured ``input`` as JSON text, ``${path}`` placeholders unfilled)
    #: and the server as configured (attached once every file is merged).
    server: str | None = None
    tool: str | None = None
    tool_input: str | None = None
    mcp_server: McpServer | None = None

    @property
    def name(self) -> str:
        """A short description for events and result.json."""
        if self.type == "http":
            return f"http {url_without_secrets(self.url or '')[:NAME_CHARS]}"
        if self.type == "command":
            text = self.command if self.command is not None else " ".join(self.args or ())
            if len(text) <= NAME_CHARS:
                return text
            half = NAME_CHARS // 2
            return text[:half] + "…" + text[-half:]
        if self.type == "mcp_tool":
            return f"mcp_tool {self.server}/{self.tool}"[:NAME_CHARS]
        return f"{self.type} ({self.origin})"


@dataclass(frozen=True, slots=True)
class MatcherGroup:
    """Hook handlers with the tools they are for (``matchers.takes``)."""

    matcher: str | None
    handlers: tuple[Handler, ...]

    def matches(self, tool: str | None, kind: str | None = None) -> bool:
        return matchers.takes(self.matcher, tool, kind)

    @property
    def names_kinds(self) -> bool:
        """Whether the matcher names a tool kind (which the agent's own
        matchers cannot: the wrapper applies it)."""
        return matchers.KIND_MARK in (self.matcher or "")


def hooks(where: str, value: Any, notes: list[str]) -> dict[str, list[MatcherGroup]]:
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: hooks: expected an object of event names")
    found: dict[str, list[MatcherGroup]] = {}
    for event, groups in value.items():
        key = f"hooks.{event}"
        if not isinstance(groups, list):
            raise SettingsError(f"{where}: {key}: expected a list of matcher groups")
        parsed = [group(where, f"{key}[{i}]", event, g) for i, g in enumerate(groups)]
        if event in UNENFORCEABLE_EVENTS:
            notes.append(
                f"{where}: {key}: NOT ENFORCED: the wrapper only sees the agent's output "
                f"stream and cannot run {event} handlers; they are ignored"
            )
        elif event in OTHER_CLAUDE_EVENTS:
            notes.append(
                f"{where}: {key}: a Claude Code event the wrapper does not run; "
                "its handlers are ignored"
            )
        elif event not in HOOK_EVENTS:
            meant = near_miss(event)
            if meant is not None:
                raise SettingsError(
                    f'{where}: hooks: unknown event "{event}"; did you mean "{meant}"? '
                    "(event names are case-sensitive)"
                )
            notes.append(f"{where}: {key}: unknown hook event; its handlers are ignored")
        else:
            found[event] = parsed
    return found


def near_miss(name: str) -> str | None:
    """The known event ``name`` is most likely a misspelling of, if any."""
    return closest(name, KNOWN_EVENTS, NEAR_MISS_EDITS)


def group(where: str, key: str, event: str, value: Any) -> MatcherGroup:
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: {key}: expected an object with a hooks list")
    matcher = value.get("matcher")
    if matcher is not None and not isinstance(matcher, str):
        raise SettingsError(f"{where}: {key}.matcher: expected a string")
    if matcher and matchers.KIND_MARK in matcher:
        try:
            matchers.check_kinds(matcher)
        except matchers.MatcherError as exc:
            raise SettingsError(f"{where}: {key}.matcher: {exc}") from None
    plain = not matcher or matcher == "*" or matchers.MATCHER_LIST.fullmatch(matcher)
    if matcher and not plain and event in MATCHED_EVENTS:
        try:
            re.compile(matcher)
        except re.error as exc:
            raise SettingsError(f"{where}: {key}.matcher: not a valid pattern: {exc}") from None
    handlers = value.get("hooks")
    if not isinstance(handlers, list) or not handlers:
        raise SettingsError(f"{where}: {key}.hooks: expected a non-empty list of handlers")
    kept = [_handler(where, f"{key}.hooks[{i}]", raw) for i, raw in enumerate(handlers)]
    return MatcherGroup(matcher, tuple(kept))


def _handler(where: str, key: str, value: Any) -> Handler:
    """The handler ``value`` configures."""
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: {key}: expected an object")
    kind = value.get("type", "command")
    if kind not in DEFAULT_HANDLER_TIMEOUTS:
        raise SettingsError(
            f"{where}: {key}.type: {kind!r} is not a handler type "
            "(command, http, prompt, agent, mcp_tool)"
        )
    timeout = seconds(where, f"{key}.timeout", value.get("timeout", DEFAULT_HANDLER_TIMEOUTS[kind]))
    origin = f"{where}: {key}"
    if kind == "command":
        return _command_handler(where, key, value, origin, timeout)
    if kind == "http":
        return _http_handler(where, key, value, origin, timeout)
    if kind == "mcp_tool":
        return _mcp_tool_handler(where, key, value, origin, timeout)
    prompt = value.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise SettingsError(f"{where}: {key}.prompt: a {kind} handler needs a prompt")
    agent = None
    if kind == "agent" and "command" in value:
        agent = argv(where, f"{key}.command", value["command"])
    return Handler(type=kind, origin=origin, timeout=timeout, prompt=prompt, agent_command=agent)


def _command_handler(
    where: str, key: str, value: dict[str, Any], origin: str, timeout: float
) -> Handler:
    shell = value.get("shell", False)
    if not isinstance(shell, bool):
        raise SettingsError(f"{where}: {key}.shell: expected true or false")
    if "args" in value:
        if "command" in value:
            raise SettingsError(f"{where}: {key}: give either command or args, not both")
        args = argv(where, f"{key}.args", value["args"])
        return Handler(type="command", origin=origin, timeout=timeout, args=args)
    command = value.get("command")
    if not isinstance(command, str) or not command.strip():
        raise SettingsError(f"{where}: {key}.command: expected a command string (or args)")
    if not shell:
        try:
            split_command(command, {})
        except ShellSyntax as exc:
            raise SettingsError(
                f"{where}: {key}.command: {exc}; commands run without a shell: add "
                '"shell": true to run it with /bin/sh -c, or give "args" as a list'
            ) from None
    return Handler(type="command", origin=origin, timeout=timeout, command=command, shell=shell)


def _http_handler(
    where: str, key: str, value: dict[str, Any], origin: str, timeout: float
) -> Handler:
    url = value.get("url")
    if not isinstance(url, str) or not url.strip():
        raise SettingsError(f'{where}: {key}.url: an http handler needs a "url" string')
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises only when read)
    except ValueError as exc:
        raise SettingsError(f"{where}: {key}.url: not a usable URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(
            f"{where}: {key}.url: expected an http:// or https:// URL with a host, "
            f"got {url_without_secrets(url)!r}"
        )
    headers = value.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise SettingsError(
            f"{where}: {key}.headers: expected an object of header names and string values"
        )
    for name, text in headers.items():
        if not name or any(c in name for c in ":\r\n ") or any(c in text for c in "\r\n\0"):
            raise SettingsError(
                f"{where}: {key}.headers: {name!r} is not a usable header (a name without "
                "spaces or colons, a value on one line)"
            )
    allowed = value.get("allowedEnvVars", [])
    if not isinstance(allowed, list) or not all(isinstance(v, str) for v in allowed):
        raise SettingsError(
            f"{where}: {key}.allowedEnvVars: expected a list of environment variable names"
        )
    return Handler(
        type="http",
        origin=origin,
        timeout=timeout,
        url=url,
        headers=tuple(headers.items()),
        allowed_env_vars=frozenset(allowed),
    )


def _mcp_tool_handler(
    where: str, key: str, value: dict[str, Any], origin: str, timeout: float
) -> Handler:
    for field_name in ("server", "tool"):
        text = value.get(field_name)
        if not isinstance(text, str) or not text.strip():
            raise SettingsError(
                f'{where}: {key}.{field_name}: an mcp_tool handler needs a "{field_name}" '
                "string (the server's name in mcpServers, and the tool to call on it)"
            )
    arguments = value.get("input", {})
    if not isinstance(arguments, dict):
        raise SettingsError(
            f"{where}: {key}.input: expected an object (the tool's arguments; strings may "
            'hold ${path} placeholders filled from the hook input, as "${tool_input.command}")'
        )
    return Handler(
        type="mcp_tool",
        origin=origin,
        timeout=timeout,
        server=value["server"],
        tool=value["tool"],
        tool_input=dumps(arguments).decode(),
    )


def argv(where: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            words = split_command(value, {})
        except ShellSyntax as exc:
            raise SettingsError(f"{where}: {key}: {exc}; give a list of arguments") from None
        return tuple(words)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise SettingsError(f"{where}: {key}: expected a non-empty list of strings")
    return tuple(value)


def seconds(where: str, key: str, value: Any, *, zero: bool = False) -> float:
    """A number of seconds: positive, or also 0 when ``zero``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value < 0
        or (value == 0 and not zero)
    ):
        expected = "a number of seconds >= 0" if zero else "a positive number of seconds"
        raise SettingsError(f"{where}: {key}: expected {expected}")
    return float(value)
