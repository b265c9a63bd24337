"""PreToolUse handlers enforced by opencode and Codex themselves, through
their own mechanisms (``wrapper.hooks.native`` does Claude Code and pi): what
each is given and how the relay's answer is put in its terms.

opencode (``opencode run``, checked on 1.18.33) loads plugins named in its
configuration, and reads one more configuration, merged over the others, from
the variable ``OPENCODE_CONFIG_CONTENT``: the run sets it to the user's own
(when they set it) with one more plugin, a file in the run directory. Its
``tool.execute.before`` hook runs ``WRAPPER hook-relay --handler '*' '*'
PreToolUse`` before every tool and throws the refusal's reason, which opencode
reports as the tool's error; the tool does not run. A rewritten input
replaces the keys of ``output.args`` in place: opencode runs the tool with
that object (its MCP resource tools excepted, which read theirs before the
hook: there the relay refuses it, ``native.KEEPS_ITS_INPUT``). Nothing of the user's is
written: their configuration files load as before, the plugin lists merge.

Codex (``codex exec``, checked on 0.169.0) reads hooks from its configuration,
where ``-c`` adds a layer for one invocation: ``-c hooks.PreToolUse=[...]``
gives it one relayed hook for every tool. Codex runs a hook only once trusted,
and trust is a hash of the hook's configuration under its key
(``hooks.state``); the run gives that too with ``-c``, for its own hook only,
so the user's config.toml is not written and no other hook's trust changes.
Codex takes no ``continue: false`` and no ``ask`` or ``allow`` answer from a
PreToolUse hook, and runs the tool when given one (0.169.0 ran a command its
hook answered ``ask``): the relay says ``deny`` for the first two, nothing for
the third (``codex_answer``).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wrapper.core.limits import ARGUMENT_MAX_BYTES
from wrapper.core.settings import Settings
from wrapper.hooks.native import RELAY_MARGIN, WHOLE_CHAIN, relay_script

#: The plugin opencode is given, in the run directory.
OPENCODE_PLUGIN_FILE = Path("hooks") / "opencode-plugin.mjs"
#: The variable opencode reads one more configuration from, merged over its files.
OPENCODE_CONFIG_ENV = "OPENCODE_CONFIG_CONTENT"
#: Where Codex files the hooks given with ``-c`` (its "session flags" layer),
#: which names a hook's trust: ``SOURCE:EVENT:GROUP:HANDLER``.
CODEX_FLAGS_SOURCE = "/<session-flags>/config.toml"


class NativeHooksError(ValueError):
    """The user's own configuration cannot take the run's hooks; the message says why."""


def relay_argv(wrapper_bin: str, files: Sequence[str], agent: str) -> list[str]:
    """The relay that runs every PreToolUse handler whose matcher takes the tool."""
    argv = [wrapper_bin, "hook-relay", "--agent", agent, "--handler", *WHOLE_CHAIN]
    for path in files:
        argv += ["--settings", path]
    return argv


def relay_limit(settings: Settings) -> float:
    """How long the agent lets the relay run: every handler's limit, and a margin to answer."""
    return sum(h.timeout for g in settings.pre_tool_use for h in g.handlers) + RELAY_MARGIN


def opencode_plugin(settings: Settings, wrapper_bin: str, files: Sequence[str]) -> str:
    """opencode's plugin that relays each tool call to the run's PreToolUse
    handlers: a refusal (``deny``, ``ask``, exit 2, ``continue: false``)
    throws its reason, so the tool does not run; a rewritten input is what
    the tool runs with; anything else, the relay's failure included, lets
    it run."""
    argv = relay_argv(wrapper_bin, files, "opencode")
    return relay_script(_OPENCODE_PLUGIN, argv, relay_limit(settings))


_OPENCODE_PLUGIN = """\
// Written by agent-wrapper for one run: the run's PreToolUse handlers, run
// through its relay before each tool call.
import { execFile } from "node:child_process";

const RELAY = $RELAY;

export default async ({ directory }) => ({
  "tool.execute.before": async (input, output) => {
    const payload = JSON.stringify({
      hook_event_name: "PreToolUse",
      cwd: directory || process.cwd(),
      session_id: input.sessionID,
      tool_name: input.tool,
      tool_input: output.args,
      tool_use_id: input.callID,
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
          resolve(error ? "" : String(stdout));
        },
      );
      child.stdin.on("error", () => {});
      child.stdin.end(payload);
    });
    let answer = null;
    try {
      answer = out.trim() ? JSON.parse(out) : null;
    } catch {
      answer = null;
    }
    if (answer === null || typeof answer !== "object") return;
    if (answer.continue === false) {
      throw new Error(answer.stopReason || "a PreToolUse handler ended the run");
    }
    const specific = answer.hookSpecificOutput || {};
    if (specific.permissionDecision === "deny" || specific.permissionDecision === "ask") {
      throw new Error(specific.permissionDecisionReason || "denied by a PreToolUse handler");
    }
    const updated = specific.updatedInput;
    if (updated !== null && typeof updated === "object" && !Array.isArray(updated)) {
      // opencode runs the tool with the very object it handed the plugins as
      // output.args (a new object put there would be lost): replaced whole
      // in place, as the hooks protocol's updatedInput replaces the input.
      for (const key of Object.keys(output.args)) delete output.args[key];
      Object.assign(output.args, updated);
    }
  },
});
"""


def opencode_config(user: str | None, plugin: Path) -> str:
    """What opencode is given in ``OPENCODE_CONFIG_ENV``: ``user`` (the
    user's own value of it, or None) with ``plugin`` added to its plugins."""
    merged: dict[str, Any] = {}
    if user is not None and user.strip():
        try:
            value = json.loads(user, parse_constant=_not_json)
        except ValueError as exc:
            raise NativeHooksError(
                f"{OPENCODE_CONFIG_ENV} is not JSON ({exc}); the wrapper adds its PreToolUse "
                "plugin to it, so write it as plain JSON (no comments or trailing commas)"
            ) from None
        if not isinstance(value, dict):
            raise NativeHooksError(
                f"{OPENCODE_CONFIG_ENV} is JSON but not an object ({_json_kind(value)}); "
                'opencode reads a configuration object from it ({"model": ...}), and the '
                'wrapper adds its PreToolUse plugin to that object\'s "plugin" list'
            )
        merged = value
    plugins = merged.get("plugin", [])
    if not isinstance(plugins, list):
        raise NativeHooksError(
            f'{OPENCODE_CONFIG_ENV}: "plugin" is {_json_kind(plugins)}, not a list: opencode '
            'takes a list of plugins ("plugin": ["name"]), and the wrapper adds its '
            "PreToolUse plugin to it"
        )
    merged["plugin"] = [*plugins, plugin.absolute().as_uri()]
    content = json.dumps(merged)
    # The kernel takes a variable as one string of its environment, NUL included.
    size = len(f"{OPENCODE_CONFIG_ENV}={content}".encode()) + 1
    if size > ARGUMENT_MAX_BYTES:
        raise NativeHooksError(
            f"{OPENCODE_CONFIG_ENV} with the wrapper's PreToolUse plugin added is {size:,} "
            f"bytes, more than the system takes in one variable ({ARGUMENT_MAX_BYTES:,}): "
            "put most of it in a file and name the file in OPENCODE_CONFIG"
        )
    return content


def _not_json(word: str) -> Any:
    # NaN and Infinity: Python reads them, opencode's JSON does not.
    raise ValueError(f"{word} is not JSON")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    kinds = {bool: "a boolean", str: "a string", list: "a list", dict: "an object"}
    return kinds.get(type(value), "a number")


def codex_hook_args(
    settings: Settings, wrapper_bin: str, files: Sequence[str], command: Sequence[str]
) -> list[str]:
    """The ``-c`` words that give Codex one relayed PreToolUse hook for
    every tool, and its trust. ``command``: the user's, which must not set
    PreToolUse hooks with ``-c`` itself (the run's would replace them, or
    theirs the run's)."""
    for index, word in enumerate(command):
        if word == "--":
            break
        following = command[index + 1] if index + 1 < len(command) else ""
        key, value = _codex_override(word, following)
        # A later -c of the same key replaces the earlier one's whole value.
        if key == "hooks" or key.startswith(("hooks.PreToolUse", "hooks.state")):
            raise NativeHooksError(
                f"COMMAND's -c {key} sets what the wrapper sets with -c to give Codex the run's "
                "PreToolUse handlers (hooks.PreToolUse and their trust, hooks.state), and one "
                "would replace the other: put the handlers in the wrapper's settings, or "
                "Codex's own hooks in its config.toml"
            )
        if _turns_codex_hooks_off(word, following, key, value):
            raise NativeHooksError(
                "COMMAND turns Codex's hooks feature off, and with it the hook the wrapper "
                "gives Codex the run's PreToolUse handlers by (the tools would run unchecked): "
                "drop it (the wrapper turns the feature on for the run with -c "
                "features.hooks=true)"
            )
    timeout = math.ceil(relay_limit(settings))
    hook = {"type": "command", "command": shlex.join(relay_argv(wrapper_bin, files, "codex"))}
    # An empty matcher takes every tool: the relay applies the handlers' own.
    group = {"matcher": "", "hooks": [{**hook, "timeout": timeout}]}
    trust = codex_trust_hash("pre_tool_use", "", hook["command"], timeout)
    key = f"{CODEX_FLAGS_SOURCE}:pre_tool_use:0:0"
    return [
        # A config.toml that turns the feature off would skip the run's hook
        # without a word, and the tools would run unchecked.
        "-c",
        "features.hooks=true",
        "-c",
        f"hooks.PreToolUse=[{_toml_inline(group)}]",
        "-c",
        f"hooks.state={{{_toml_string(key)} = {{trusted_hash = {_toml_string(trust)}}}}}",
    ]


def _codex_override(word: str, following: str) -> tuple[str, str]:
    """The dotted key and the value ``word`` (with the word ``following``
    it) overrides with ``-c``, in every spelling Codex takes (``-c k=v``,
    ``--config k=v``, ``--config=k=v``, ``-ck=v``, ``-c=k=v``), quotes and
    spaces around the key's parts left out; ("", "") for a word that is no override."""
    if word in ("-c", "--config"):
        text = following
    elif word.startswith("--config="):
        text = word.split("=", 1)[1]
    elif word.startswith("-c") and not word.startswith("--"):
        text = word[2:].removeprefix("=")
    else:
        return "", ""
    key, _, value = text.partition("=")
    return ".".join(part.strip().strip("\"'").strip() for part in key.split(".")), value.strip()


def _turns_codex_hooks_off(word: str, following: str, key: str, value: str) -> bool:
    """Whether ``word`` (with ``following``) may turn Codex's hooks off:
    ``--disable hooks``, or a ``-c`` of the feature to anything but true."""
    if word == "--disable":
        return following.strip() == "hooks"
    if word.startswith("--disable="):
        return word.split("=", 1)[1].strip() == "hooks"
    if key == "features.hooks":
        return value != "true"
    return key == "features" and "hooks" in value


def codex_trust_hash(event: str, matcher: str | None, command: str, timeout: int) -> str:
    """The hash Codex trusts a command hook by: SHA-256 of the hook's
    configuration as JSON with sorted keys and no spaces (what 0.169.0 computes)."""
    group: dict[str, Any] = {
        "event_name": event,
        "hooks": [{"async": False, "command": command, "timeout": timeout, "type": "command"}],
    }
    if matcher is not None:
        group["matcher"] = matcher
    text = json.dumps(group, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # Only a Codex run with PreToolUse handlers hashes: every other run
    # leaves hashlib (and its OpenSSL binding) unloaded.
    import hashlib  # noqa: PLC0415

    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


#: The keys of a PreToolUse answer's ``hookSpecificOutput`` Codex takes (0.169.0's schema).
_CODEX_KEYS = frozenset(
    {"hookEventName", "permissionDecision", "permissionDecisionReason", "additionalContext"}
)


def codex_answer(answer: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The relay's answer (Claude Code's PreToolUse answer) in what Codex
    takes: ``continue: false`` and ``ask`` become ``deny`` with the reason,
    ``allow`` is left out (Codex refuses all three as unsupported). A changed
    input never gets here: the relay refuses it first, as a deny."""
    if answer is None:
        return None
    if answer.get("continue") is False:
        reason = answer.get("stopReason") or "a PreToolUse handler ended the run"
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    given = answer.get("hookSpecificOutput") or {}
    # Only what Codex reads: an answer with anything else fails as malformed.
    specific = {k: v for k, v in given.items() if k in _CODEX_KEYS}
    decision = specific.get("permissionDecision")
    if decision == "ask":
        specific["permissionDecision"] = "deny"
    elif decision == "allow":
        specific.pop("permissionDecision", None)
        specific.pop("permissionDecisionReason", None)
    if set(specific) <= {"hookEventName"}:
        return None
    return {"hookSpecificOutput": specific}


def _toml_string(text: str) -> str:
    # A TOML basic string: JSON's escapes are TOML's, for what JSON writes.
    return json.dumps(text, ensure_ascii=False)


def _toml_inline(table: Mapping[str, Any]) -> str:
    """``table`` as a TOML inline table (strings, integers, lists, tables)."""

    def value(item: Any) -> str:
        if isinstance(item, str):
            return _toml_string(item)
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, int):
            return str(item)
        if isinstance(item, list):
            return "[" + ", ".join(value(v) for v in item) + "]"
        return _toml_inline(item)

    return "{" + ", ".join(f"{key} = {value(v)}" for key, v in table.items()) + "}"
