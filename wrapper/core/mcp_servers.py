"""The MCP servers ``mcp_tool`` hook handlers call: a settings file's
``mcpServers`` key, in the format of Claude Code's ``.mcp.json`` (a server's
name, then ``command``/``args``/``env`` for a server on stdio or ``url``/
``headers`` for one over HTTP), and what a handler's ``input`` becomes for a
given hook input.

A handler naming a server no settings file configures is a settings error:
found only when the hook fires, it would fail open every time, and a gate
that never holds is worse than a run that does not start. A server that is
configured but named by no handler is checked all the same, so a typo in it
is found before the day it is needed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from wrapper.core.hook_settings import Handler, MatcherGroup, SettingsError
from wrapper.core.jsonout import dumps

#: The transports the wrapper speaks; Claude Code's ``sse`` (deprecated in
#: the protocol), ``ws`` and ``sdk`` (in-process) servers are refused by name.
STDIO, HTTP = "stdio", "http"
_TYPES = {"stdio": STDIO, "http": HTTP, "streamable-http": HTTP, "streamableHttp": HTTP}
#: ``${NAME}`` or ``${NAME:-default}`` in a server's command, args, env,
#: url and headers, expanded from the run's environment as Claude Code does.
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: ``${path}`` in a handler's input: a dotted path into the hook input.
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.\-]+)\}")


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServer:
    """One configured MCP server."""

    name: str
    #: ``stdio`` or ``http``.
    transport: str
    #: Where it was configured, for messages.
    origin: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def expanded(self, environ: Mapping[str, str]) -> McpServer:
        """This server with ``${NAME}`` in its fields replaced from ``environ``
        (unset and no default: empty)."""

        def sub(text: str) -> str:
            return _VARIABLE.sub(lambda m: environ.get(m.group(1), m.group(2) or ""), text)

        return McpServer(
            name=self.name,
            transport=self.transport,
            origin=self.origin,
            command=sub(self.command) if self.command is not None else None,
            args=tuple(sub(a) for a in self.args),
            env=tuple((k, sub(v)) for k, v in self.env),
            url=sub(self.url) if self.url is not None else None,
            headers=tuple((k, sub(v)) for k, v in self.headers),
        )

    def filled_in(self, environ: Mapping[str, str]) -> tuple[str, ...]:
        """The values ``${NAME}`` in this server's url and headers take from
        ``environ``: a variable there most often holds a token, and an
        expanded url or header says it wherever the url is quoted."""
        texts = [self.url or "", *(value for _name, value in self.headers)]
        found = (
            environ.get(m.group(1), m.group(2) or "")
            for text in texts
            for m in _VARIABLE.finditer(text)
        )
        return tuple(value for value in dict.fromkeys(found) if value)


def parse_servers(where: str, value: Any) -> dict[str, McpServer]:
    """The servers of one settings file's ``mcpServers`` object."""
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: mcpServers: expected an object of server names")
    return {name: _server(where, name, spec) for name, spec in value.items()}


def _server(where: str, name: str, spec: Any) -> McpServer:
    key = f"mcpServers.{name}"
    if not isinstance(spec, dict):
        raise SettingsError(f"{where}: {key}: expected an object")
    declared = spec.get("type", "http" if "url" in spec else "stdio")
    transport = _TYPES.get(declared) if isinstance(declared, str) else None
    if transport is None:
        raise SettingsError(
            f"{where}: {key}.type: {declared!r} is not a transport the wrapper can call "
            '(stdio with "command", or http with "url"; sse, ws and sdk servers are not '
            "supported by mcp_tool handlers)"
        )
    origin = f"{where}: {key}"
    if transport == STDIO:
        command = spec.get("command")
        if not isinstance(command, str) or not command.strip():
            raise SettingsError(f'{where}: {key}.command: a stdio server needs a "command" string')
        args = spec.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise SettingsError(f"{where}: {key}.args: expected a list of strings")
        env = _strings(where, f"{key}.env", spec.get("env", {}))
        return McpServer(
            name=name, transport=STDIO, origin=origin, command=command, args=tuple(args), env=env
        )
    url = spec.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://", "${")):
        raise SettingsError(f'{where}: {key}.url: an http server needs an http(s) "url"')
    headers = _strings(where, f"{key}.headers", spec.get("headers", {}))
    return McpServer(name=name, transport=HTTP, origin=origin, url=url, headers=headers)


def _strings(where: str, key: str, value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise SettingsError(f"{where}: {key}: expected an object of names and string values")
    return tuple(value.items())


def attach(groups: list[MatcherGroup], servers: Mapping[str, McpServer]) -> list[MatcherGroup]:
    """``groups`` with each ``mcp_tool`` handler given the server it names."""
    out = []
    for group in groups:
        handlers = tuple(_attached(h, servers) for h in group.handlers)
        out.append(MatcherGroup(group.matcher, handlers))
    return out


def _attached(handler: Handler, servers: Mapping[str, McpServer]) -> Handler:
    if handler.type != "mcp_tool":
        return handler
    server = servers.get(handler.server or "")
    if server is None:
        known = ", ".join(sorted(servers)) or "none is configured"
        raise SettingsError(
            f'{handler.origin}.server: no MCP server "{handler.server}" in the settings\' '
            f'"mcpServers" (known: {known}); add it there, as in a .mcp.json file'
        )
    return dataclasses.replace(handler, mcp_server=server)


def tool_arguments(handler: Handler, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The handler's ``input`` with ``${path}`` in its strings replaced from
    the hook input: a string that is one placeholder takes the value as it
    is (an object stays an object); inside other text a value is written as
    JSON unless it is a string; a path the input lacks gives an empty string."""
    template = orjson.loads(handler.tool_input) if handler.tool_input else {}
    filled = _fill(template, payload)
    return filled if isinstance(filled, dict) else {}


def _fill(value: Any, payload: Mapping[str, Any]) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, payload) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, payload) for v in value]
    if not isinstance(value, str):
        return value
    whole = _PLACEHOLDER.fullmatch(value)
    if whole is not None:
        found = _lookup(payload, whole.group(1))
        return "" if found is None else found
    return _PLACEHOLDER.sub(lambda m: _text(_lookup(payload, m.group(1))), value)


def _lookup(payload: Mapping[str, Any], path: str) -> Any:
    found: Any = payload
    for part in path.split("."):
        if isinstance(found, dict) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        else:
            return None
    return found


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else dumps(value).decode()
