"""Settings: Claude Code's settings format plus the wrapper's own keys, as
values, and how the files' JSON objects merge into them (the files are read
by ``wrapper.files.settings_file``).

Merging is strict about what the wrapper uses and loud about what it does
not: a malformed value is a ``SettingsError`` naming the file, the key and
the problem; a key the wrapper has no use for is skipped with a note; a hook
event it cannot enforce on a streaming agent is reported, never dropped
silently. Several files merge in order: hook lists concatenate, any other
key from a later file replaces the earlier value.

One module, though long: it is the one schema of the settings, every key's
check beside the value it makes, so that a key's meaning is read in one place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from wrapper.core import matchers
from wrapper.core.cost import caps_settings, limits_json
from wrapper.core.shellwords import ShellSyntax, split_command
from wrapper.core.spelling import closest
from wrapper.core.urls import url_without_secrets

#: Stop handlers: may block a stop and steer the agent.
STOP_EVENTS = frozenset({"Stop", "SubagentStop"})
#: Handlers that run before a prompt is sent and may add to it (or refuse it).
PROMPT_EVENTS = frozenset({"UserPromptSubmit", "SubagentStart"})
#: Handlers fired from what the stream shows; they observe and never block.
OBSERVED_EVENTS = frozenset({"PostToolUse", "PostToolUseFailure", "PreCompact"})
#: Handlers of the run's own life: ``SessionStart`` (before an agent session's
#: first prompt; may add context), ``SessionEnd`` (once the run's outcome is
#: decided) and ``StopFailure`` (a turn ended on an API error); none blocks.
LIFECYCLE_EVENTS = frozenset({"SessionStart", "SessionEnd", "StopFailure"})
#: Claude Code events that need the agent's cooperation; the wrapper only
#: sees the stream, so it cannot enforce them.
UNENFORCEABLE_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "Notification"})
HOOK_EVENTS = STOP_EVENTS | PROMPT_EVENTS | OBSERVED_EVENTS | LIFECYCLE_EVENTS
#: Newer Claude Code events, tied to its own features (teams, worktrees,
#: MCP): the wrapper does not run them, and knowing them keeps them from
#: being taken for misspellings of the events above.
OTHER_CLAUDE_EVENTS = frozenset(
    {
        "PostCompact",
        "Setup",
        "TeammateIdle",
        "TaskCreated",
        "TaskCompleted",
        "InstructionsLoaded",
        "ConfigChange",
        "WorktreeCreate",
        "WorktreeRemove",
        "PermissionDenied",
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
TOOL_EVENTS = frozenset({"PostToolUse", "PostToolUseFailure"})

#: Per-handler time limits, by handler type, in seconds.
DEFAULT_HANDLER_TIMEOUTS = {"command": 60.0, "http": 60.0, "prompt": 30.0, "agent": 60.0}
#: Claude Code handler types the wrapper skips (with a note): an ``mcp_tool``
#: handler calls a tool of an MCP server the agent is connected to, and the
#: wrapper has no such connection of its own.
SKIPPED_HANDLER_TYPES = frozenset({"mcp_tool"})
#: Built-in error retry: how many steers it may use unless the settings say.
DEFAULT_MAX_RETRIES = 2

#: A handler's command is shown in events and result.json at most this long
#: (its middle is cut: the start and the script name at the end matter most).
NAME_CHARS = 160

_WRAPPER_KEYS = frozenset(
    {
        "hooks",
        "stop",
        "evaluator",
        "disableAllHooks",
        "onStop",
        "permissions",
        "acp",
        "limits",
        "onIdle",
        "notify",
        "summarizer",
        "observers",
    }
)
#: How a tool an ACP agent asks permission for is answered when no hook decides.
PERMISSION_ANSWERS = ("allow", "deny")
#: What a run does when the agent stops and the hooks allowed it.
ON_STOP_POLICIES = ("allow", "signal", "idle", "escalate")
#: What the ``idle`` policy does with a stop.
IDLE_ACTIONS = ("nudge", "done", "fail", "escalate")
DEFAULT_NUDGE = "Continue with the task, or signal completion."
#: A summarizer's time limit unless the settings say.
DEFAULT_SUMMARIZER_TIMEOUT = 30.0
#: When the run ends, how long observer hooks still running may take to
#: finish before they are killed (result.json waits for them meanwhile).
DEFAULT_OBSERVER_DRAIN = 5.0


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


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleSettings:
    """``onIdle``: what a stop means under the ``idle`` policy."""

    action: str = "nudge"
    message: str = DEFAULT_NUDGE
    #: Nudges before escalating; None for "forever" (the steer limit still holds).
    attempts: int | None = 1
    #: Seconds to wait before a nudge.
    cooldown: float = 0.0

    def to_json(self) -> dict[str, Any]:
        attempts = "forever" if self.attempts is None else self.attempts
        return {
            "action": self.action,
            "message": self.message,
            "attempts": attempts,
            "cooldown": self.cooldown,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """A run's settings: its hooks and the stop gate's rules."""

    hooks: Mapping[str, tuple[MatcherGroup, ...]] = field(default_factory=dict)
    retry_on_error: bool = False
    max_retries: int = DEFAULT_MAX_RETRIES
    max_steers: int | None = None
    #: ``stop.maxExternalSteers``: steers from outside the run it takes.
    max_external_steers: int | None = None
    #: A Stop handler that fails (crash, timeout, an answer that cannot be
    #: understood) ends the run as an error instead of allowing the stop.
    fail_closed: bool = False
    #: The run ends as an error when the Stop handlers still block at the
    #: steer limit, instead of ending ``ok`` with a warning.
    fail_on_max_steers: bool = False
    evaluator: tuple[str, ...] | None = None
    on_stop: str | None = None
    #: ``permissions``: how tools an ACP agent asks for are answered by default.
    permissions: str | None = None
    #: ``acp.authMethod``: the ``authenticate`` method an ACP agent that
    #: requires authentication is given.
    acp_auth_method: str | None = None
    #: ``acp.mcpServers``: the MCP servers given to an ACP agent's session,
    #: as the protocol spells them.
    acp_mcp_servers: tuple[Mapping[str, Any], ...] = ()
    idle: IdleSettings = field(default_factory=IdleSettings)
    #: ``limits``: the run's caps (``maxCost`` USD, ``maxTokens``), and ``onBudget``.
    max_cost: float | None = None
    max_tokens: int | None = None
    on_budget: str | None = None
    #: The escalation notifier's argv, and whether to also try ``notify-send``.
    notify: tuple[str, ...] | None = None
    desktop_notify: bool = True
    summarizer: tuple[str, ...] | None = None
    summarizer_timeout: float = DEFAULT_SUMMARIZER_TIMEOUT
    observer_drain: float = DEFAULT_OBSERVER_DRAIN
    #: Things skipped or not enforced, to tell the user (stderr and result.json).
    notes: tuple[str, ...] = ()
    #: PreToolUse matcher groups: enforced only where the agent asks the
    #: wrapper before a tool runs (ACP); elsewhere ignored, with a note.
    pre_tool_use: tuple[MatcherGroup, ...] = ()
    #: The notes that say PreToolUse is not enforced (dropped where it is).
    pre_tool_use_notes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()

    def pre_tool_use_handlers(self, tool: str, kind: str | None = None) -> list[Handler]:
        """The PreToolUse handlers whose matcher takes ``tool`` (of ``kind``), in order."""
        return [
            h for group in self.pre_tool_use if group.matches(tool, kind) for h in group.handlers
        ]

    def handlers(
        self, event: str, tool: str | None = None, kind: str | None = None
    ) -> list[Handler]:
        """The handlers for ``event`` in configuration order (for tools, those
        whose matcher takes ``tool``, of ``kind``)."""
        groups = self.hooks.get(event, ())
        if event not in TOOL_EVENTS:
            tool = None
        return [h for group in groups if group.matches(tool, kind) for h in group.handlers]

    def to_json(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "hooks": {event: len(self.handlers(event)) for event in self.hooks},
            "stop": {
                "retryOnError": self.retry_on_error,
                "maxRetries": self.max_retries,
                "maxSteers": self.max_steers,
                "maxExternalSteers": self.max_external_steers,
                "failClosed": self.fail_closed,
                "failOnMaxSteers": self.fail_on_max_steers,
            },
            "evaluator": list(self.evaluator) if self.evaluator is not None else None,
            "onStop": self.on_stop,
            "onIdle": self.idle.to_json(),
            "notify": list(self.notify) if self.notify is not None else None,
            "summarizer": list(self.summarizer) if self.summarizer is not None else None,
            "observers": {"drainTimeout": self.observer_drain},
            "limits": limits_json(self.max_cost, self.max_tokens, self.on_budget),
            "acp": {
                "authMethod": self.acp_auth_method,
                "mcpServers": [server.get("name") for server in self.acp_mcp_servers],
            },
        }


def merge_settings(files: Sequence[str], read: Callable[[str], dict[str, Any]]) -> Settings:
    """Merge the settings ``files`` in order, each one's JSON object given by
    ``read`` when its turn comes; raise ``SettingsError`` on any problem."""
    merged: dict[str, Any] = {}
    hooks: dict[str, list[MatcherGroup]] = {}
    notes: list[str] = []
    pre_tool_use: list[MatcherGroup] = []
    pre_notes: list[str] = []
    for where in files:
        data = read(where)
        for key in data:
            if key not in _WRAPPER_KEYS or (key == "permissions" and _claude_permissions(data)):
                notes.append(f"{where}: key {key!r} is not used by agent-wrapper; skipped")
        if data.get("disableAllHooks") is True:
            merged["disableAllHooks"] = True
        elif "disableAllHooks" in data and not isinstance(data["disableAllHooks"], bool):
            raise SettingsError(f"{where}: disableAllHooks: expected true or false")
        before = len(notes)
        for event, groups in _hooks(where, data.get("hooks", {}), notes).items():
            hooks.setdefault(event, []).extend(groups)
        raw_hooks = data.get("hooks", {})
        if isinstance(raw_hooks, dict) and isinstance(raw_hooks.get("PreToolUse"), list):
            key = "hooks.PreToolUse"
            for i, value in enumerate(raw_hooks["PreToolUse"]):
                group = _group(where, f"{key}[{i}]", "PreToolUse", value, notes)
                if matchers.valid_matcher(group.matcher):
                    pre_tool_use.append(group)
                else:
                    notes.append(f"{where}: {key}[{i}].matcher: not a valid pattern; skipped")
            pre_notes += [n for n in notes[before:] if f": {key}: NOT ENFORCED" in n]
        for key in _WRAPPER_KEYS - {"hooks", "disableAllHooks"}:
            if key in data and not (key == "permissions" and _claude_permissions(data)):
                merged[key] = (where, data[key])
    if merged.get("disableAllHooks"):
        notes.append("disableAllHooks is true: no hook handler will run")
        hooks = {}
        pre_tool_use = []
    stop = _stop(*merged["stop"]) if "stop" in merged else {}
    evaluator = _evaluator(*merged["evaluator"]) if "evaluator" in merged else None
    if evaluator is None:
        for groups in hooks.values():
            for handler in (h for group in groups for h in group.handlers):
                if handler.type == "prompt":
                    raise SettingsError(
                        f"{handler.origin}: a prompt handler needs an evaluator: add "
                        '"evaluator": {"command": [...]} to the settings'
                    )
    policies: dict[str, Any] = {}
    if "onStop" in merged:
        where, value = merged["onStop"]
        if value not in ON_STOP_POLICIES:
            raise SettingsError(f"{where}: onStop: expected one of {', '.join(ON_STOP_POLICIES)}")
        policies["on_stop"] = value
    if "permissions" in merged:
        where, value = merged["permissions"]
        if value not in PERMISSION_ANSWERS:
            raise SettingsError(
                f"{where}: permissions: expected one of {', '.join(PERMISSION_ANSWERS)}"
            )
        policies["permissions"] = value
    if "acp" in merged:
        policies.update(_acp(*merged["acp"]))
    if "limits" in merged:
        policies.update(caps_settings(*merged["limits"], error=SettingsError))
    if "onIdle" in merged:
        policies["idle"] = _on_idle(*merged["onIdle"])
    if "notify" in merged:
        policies.update(_notify(*merged["notify"]))
    if "summarizer" in merged:
        policies.update(_summarizer(*merged["summarizer"]))
    if "observers" in merged:
        where, value = merged["observers"]
        value = _known_keys(where, "observers", value, {"drainTimeout"})
        if "drainTimeout" in value:
            policies["observer_drain"] = _seconds(
                where, "observers.drainTimeout", value["drainTimeout"], zero=True
            )
    return Settings(
        hooks={event: tuple(groups) for event, groups in hooks.items()},
        evaluator=evaluator,
        notes=tuple(notes),
        pre_tool_use=tuple(pre_tool_use),
        pre_tool_use_notes=tuple(pre_notes),
        files=tuple(files),
        **stop,
        **policies,
    )


def _hooks(where: str, value: Any, notes: list[str]) -> dict[str, list[MatcherGroup]]:
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: hooks: expected an object of event names")
    found: dict[str, list[MatcherGroup]] = {}
    for event, groups in value.items():
        key = f"hooks.{event}"
        if not isinstance(groups, list):
            raise SettingsError(f"{where}: {key}: expected a list of matcher groups")
        parsed = [_group(where, f"{key}[{i}]", event, g, notes) for i, g in enumerate(groups)]
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


def _claude_permissions(data: Mapping[str, Any]) -> bool:
    """Whether ``permissions`` is Claude Code's own object (allow/deny lists),
    not the wrapper's answer to an ACP agent's permission requests."""
    return isinstance(data.get("permissions"), dict)


def _group(
    where: str, key: str, event: str, value: Any, notes: list[str] | None = None
) -> MatcherGroup:
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
    if matcher and not plain and event in TOOL_EVENTS:
        try:
            re.compile(matcher)
        except re.error as exc:
            raise SettingsError(f"{where}: {key}.matcher: not a valid pattern: {exc}") from None
    handlers = value.get("hooks")
    if not isinstance(handlers, list) or not handlers:
        raise SettingsError(f"{where}: {key}.hooks: expected a non-empty list of handlers")
    kept = []
    for i, raw in enumerate(handlers):
        handler = _handler(where, f"{key}.hooks[{i}]", raw)
        if handler is not None:
            kept.append(handler)
        elif notes is not None:
            notes.append(
                f"{where}: {key}.hooks[{i}]: an mcp_tool handler is skipped: it calls a tool "
                "of an MCP server the agent is connected to, and the wrapper has no MCP "
                "connection of its own; use a command or http handler instead"
            )
    return MatcherGroup(matcher, tuple(kept))


def _handler(where: str, key: str, value: Any) -> Handler | None:
    """The handler ``value`` configures; None for a type the wrapper skips."""
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: {key}: expected an object")
    kind = value.get("type", "command")
    if kind in SKIPPED_HANDLER_TYPES:
        return None
    if kind not in DEFAULT_HANDLER_TIMEOUTS:
        raise SettingsError(
            f"{where}: {key}.type: {kind!r} is not a handler type "
            "(command, http, prompt, agent; mcp_tool is skipped)"
        )
    timeout = _seconds(
        where, f"{key}.timeout", value.get("timeout", DEFAULT_HANDLER_TIMEOUTS[kind])
    )
    origin = f"{where}: {key}"
    if kind == "command":
        return _command_handler(where, key, value, origin, timeout)
    if kind == "http":
        return _http_handler(where, key, value, origin, timeout)
    prompt = value.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise SettingsError(f"{where}: {key}.prompt: a {kind} handler needs a prompt")
    agent = None
    if kind == "agent" and "command" in value:
        agent = _argv(where, f"{key}.command", value["command"])
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
        args = _argv(where, f"{key}.args", value["args"])
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


def _argv(where: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            words = split_command(value, {})
        except ShellSyntax as exc:
            raise SettingsError(f"{where}: {key}: {exc}; give a list of arguments") from None
        return tuple(words)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise SettingsError(f"{where}: {key}: expected a non-empty list of strings")
    return tuple(value)


def _stop(where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: stop: expected an object")
    known = {
        "retryOnError",
        "maxRetries",
        "maxSteers",
        "maxExternalSteers",
        "failClosed",
        "failOnMaxSteers",
    }
    for key in value:
        if key not in known:
            raise SettingsError(
                f"{where}: stop.{key}: unknown key (known: {', '.join(sorted(known))})"
            )
    out: dict[str, Any] = {}
    for key, name in (
        ("retryOnError", "retry_on_error"),
        ("failClosed", "fail_closed"),
        ("failOnMaxSteers", "fail_on_max_steers"),
    ):
        if key in value:
            if not isinstance(value[key], bool):
                raise SettingsError(f"{where}: stop.{key}: expected true or false")
            out[name] = value[key]
    for key, name in (
        ("maxRetries", "max_retries"),
        ("maxSteers", "max_steers"),
        ("maxExternalSteers", "max_external_steers"),
    ):
        if key in value:
            number = value[key]
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise SettingsError(f"{where}: stop.{key}: expected a whole number >= 0")
            out[name] = number
    return out


def _evaluator(where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, dict) or "command" not in value:
        raise SettingsError(f'{where}: evaluator: expected {{"command": [...]}}')
    return _argv(where, "evaluator.command", value["command"])


def _known_keys(where: str, key: str, value: Any, known: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: {key}: expected an object")
    for name in value:
        if name not in known:
            raise SettingsError(
                f"{where}: {key}.{name}: unknown key (known: {', '.join(sorted(known))})"
            )
    return value


def _acp(where: str, value: Any) -> dict[str, Any]:
    value = _known_keys(where, "acp", value, {"authMethod", "mcpServers"})
    out: dict[str, Any] = {}
    if "authMethod" in value:
        method = value["authMethod"]
        if not isinstance(method, str) or not method.strip():
            raise SettingsError(
                f"{where}: acp.authMethod: expected the id of one of the agent's "
                "authentication methods (a non-empty string)"
            )
        out["acp_auth_method"] = method
    if "mcpServers" in value:
        servers = value["mcpServers"]
        if not isinstance(servers, list) or not all(
            isinstance(s, dict) and isinstance(s.get("name"), str) and s["name"] for s in servers
        ):
            raise SettingsError(
                f"{where}: acp.mcpServers: expected a list of MCP server objects, each "
                'with a "name" (as ACP\'s session/new takes them)'
            )
        out["acp_mcp_servers"] = tuple(servers)
    return out


def _on_idle(where: str, value: Any) -> IdleSettings:
    value = _known_keys(where, "onIdle", value, {"action", "message", "attempts", "cooldown"})
    out: dict[str, Any] = {}
    if "action" in value:
        if value["action"] not in IDLE_ACTIONS:
            raise SettingsError(
                f"{where}: onIdle.action: expected one of {', '.join(IDLE_ACTIONS)}"
            )
        out["action"] = value["action"]
    if "message" in value:
        if not isinstance(value["message"], str) or not value["message"].strip():
            raise SettingsError(f"{where}: onIdle.message: expected a non-empty string")
        out["message"] = value["message"]
    if "attempts" in value:
        attempts = value["attempts"]
        if attempts == "forever":
            out["attempts"] = None
        elif isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise SettingsError(
                f'{where}: onIdle.attempts: expected a whole number >= 1 or "forever"'
            )
        else:
            out["attempts"] = attempts
    if "cooldown" in value:
        out["cooldown"] = _seconds(where, "onIdle.cooldown", value["cooldown"], zero=True)
    return IdleSettings(**out)


def _notify(where: str, value: Any) -> dict[str, Any]:
    value = _known_keys(where, "notify", value, {"command", "desktop"})
    out: dict[str, Any] = {}
    if "command" in value:
        out["notify"] = _argv(where, "notify.command", value["command"])
    if "desktop" in value:
        if not isinstance(value["desktop"], bool):
            raise SettingsError(f"{where}: notify.desktop: expected true or false")
        out["desktop_notify"] = value["desktop"]
    return out


def _summarizer(where: str, value: Any) -> dict[str, Any]:
    value = _known_keys(where, "summarizer", value, {"command", "timeout"})
    if "command" not in value:
        raise SettingsError(f'{where}: summarizer: expected {{"command": [...]}}')
    out: dict[str, Any] = {"summarizer": _argv(where, "summarizer.command", value["command"])}
    if "timeout" in value:
        out["summarizer_timeout"] = _seconds(where, "summarizer.timeout", value["timeout"])
    return out


def _seconds(where: str, key: str, value: Any, *, zero: bool = False) -> float:
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
