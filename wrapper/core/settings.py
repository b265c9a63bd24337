"""Settings: Claude Code's settings format plus the wrapper's own keys, as
values, and how the files' JSON objects merge into them (the files are read
by ``wrapper.files.settings_file``).

Merging is strict about what the wrapper uses and loud about what it does
not: a malformed value is a ``SettingsError`` naming the file, the key and
the problem; a key the wrapper has no use for is skipped with a note; a hook
event it cannot enforce on a streaming agent is reported, never dropped
silently. Several files merge in order: hook lists concatenate, any other
key from a later file replaces the earlier value.

Every key's check sits beside the value it makes; the hooks' events and
handlers are ``wrapper.core.hook_settings``'s (their names are also found
here, where callers have always looked for them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wrapper.core import hook_settings, matchers, mcp_servers
from wrapper.core.cost import caps_settings, limits_json
from wrapper.core.hook_settings import (
    HOOK_EVENTS,
    KNOWN_EVENTS,
    OBSERVED_EVENTS,
    STOP_EVENTS,
    TOOL_EVENTS,
    Handler,
    MatcherGroup,
    SettingsError,
    near_miss,
)

#: Hook names callers find here as well.
__all__ = [
    "HOOK_EVENTS",
    "KNOWN_EVENTS",
    "OBSERVED_EVENTS",
    "STOP_EVENTS",
    "TOOL_EVENTS",
    "Handler",
    "IdleSettings",
    "MatcherGroup",
    "Settings",
    "SettingsError",
    "merge_settings",
    "near_miss",
]

#: Built-in error retry: how many steers it may use unless the settings say.
DEFAULT_MAX_RETRIES = 2

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
        "mcpServers",
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
    servers: dict[str, mcp_servers.McpServer] = {}
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
        for event, groups in hook_settings.hooks(where, data.get("hooks", {}), notes).items():
            hooks.setdefault(event, []).extend(groups)
        raw_hooks = data.get("hooks", {})
        if isinstance(raw_hooks, dict) and isinstance(raw_hooks.get("PreToolUse"), list):
            key = "hooks.PreToolUse"
            for i, value in enumerate(raw_hooks["PreToolUse"]):
                group = hook_settings.group(where, f"{key}[{i}]", "PreToolUse", value)
                if matchers.valid_matcher(group.matcher):
                    pre_tool_use.append(group)
                else:
                    notes.append(f"{where}: {key}[{i}].matcher: not a valid pattern; skipped")
            pre_notes += [n for n in notes[before:] if f": {key}: NOT ENFORCED" in n]
        if "mcpServers" in data:
            # Server by server, as Claude Code merges its scopes: a later
            # file's server of the same name replaces the earlier one.
            servers.update(mcp_servers.parse_servers(where, data["mcpServers"]))
        for key in _WRAPPER_KEYS - {"hooks", "disableAllHooks", "mcpServers"}:
            if key in data and not (key == "permissions" and _claude_permissions(data)):
                merged[key] = (where, data[key])
    if merged.get("disableAllHooks"):
        notes.append("disableAllHooks is true: no hook handler will run")
        hooks = {}
        pre_tool_use = []
    hooks = {event: mcp_servers.attach(groups, servers) for event, groups in hooks.items()}
    pre_tool_use = mcp_servers.attach(pre_tool_use, servers)
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
            policies["observer_drain"] = hook_settings.seconds(
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


def _claude_permissions(data: Mapping[str, Any]) -> bool:
    """Whether ``permissions`` is Claude Code's own object (allow/deny lists),
    not the wrapper's answer to an ACP agent's permission requests."""
    return isinstance(data.get("permissions"), dict)


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
    return hook_settings.argv(where, "evaluator.command", value["command"])


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
        out["cooldown"] = hook_settings.seconds(
            where, "onIdle.cooldown", value["cooldown"], zero=True
        )
    return IdleSettings(**out)


def _notify(where: str, value: Any) -> dict[str, Any]:
    value = _known_keys(where, "notify", value, {"command", "desktop"})
    out: dict[str, Any] = {}
    if "command" in value:
        out["notify"] = hook_settings.argv(where, "notify.command", value["command"])
    if "desktop" in value:
        if not isinstance(value["desktop"], bool):
            raise SettingsError(f"{where}: notify.desktop: expected true or false")
        out["desktop_notify"] = value["desktop"]
    return out


def _summarizer(where: str, value: Any) -> dict[str, Any]:
    value = _known_keys(where, "summarizer", value, {"command", "timeout"})
    if "command" not in value:
        raise SettingsError(f'{where}: summarizer: expected {{"command": [...]}}')
    out: dict[str, Any] = {
        "summarizer": hook_settings.argv(where, "summarizer.command", value["command"])
    }
    if "timeout" in value:
        out["summarizer_timeout"] = hook_settings.seconds(
            where, "summarizer.timeout", value["timeout"]
        )
    return out
