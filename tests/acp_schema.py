"""The published JSON Schema of the Agent Client Protocol, for tests.

The schema ships in the npm package ``@agentclientprotocol/sdk``
(``schema/v1/schema.json``); ``scripts/acp-schema`` unpacks it into the
cache the conformance tier installs CLIs into. Tests that validate messages
skip when it is absent: no copy is kept in the repository.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest

SDK_PACKAGE = "@agentclientprotocol/sdk"
SDK_VERSION = "2.4.0"

#: method -> (params definition, result definition; None for a notification).
DEFINITIONS: dict[str, tuple[str, str | None]] = {
    "initialize": ("InitializeRequest", "InitializeResponse"),
    "authenticate": ("AuthenticateRequest", "AuthenticateResponse"),
    "session/new": ("NewSessionRequest", "NewSessionResponse"),
    "session/prompt": ("PromptRequest", "PromptResponse"),
    "session/cancel": ("CancelNotification", None),
    "session/update": ("SessionNotification", None),
    "session/request_permission": ("RequestPermissionRequest", "RequestPermissionResponse"),
}


def schema_path() -> Path:
    cache_dir = Path(
        os.environ.get("AGENT_WRAPPER_CLIS") or Path.home() / ".cache" / "agent-wrapper" / "clis"
    )
    name = SDK_PACKAGE.lstrip("@").replace("/", "+")
    return cache_dir / f"{name}@{SDK_VERSION}" / "package" / "schema" / "v1" / "schema.json"


@cache
def _schema() -> dict[str, Any] | None:
    path = schema_path()
    if not path.is_file():
        return None
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def require_schema() -> dict[str, Any]:
    """The schema, or the test is skipped (run scripts/acp-schema to get it)."""
    pytest.importorskip("jsonschema")
    schema = _schema()
    if schema is None:
        pytest.skip(f"no ACP schema at {schema_path()} (run scripts/acp-schema)")
    return schema


@cache
def _wrapped(definition: str) -> dict[str, Any]:
    schema = require_schema()
    if definition not in schema["$defs"]:
        raise KeyError(f"the ACP schema has no definition {definition}")
    return {"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]}


def violations(definition: str, value: Any) -> list[str]:
    """What is wrong with ``value`` as an instance of ``definition``."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(_wrapped(definition))
    return [
        f"{definition}: {e.message} at {list(e.absolute_path)}"
        for e in validator.iter_errors(value)
    ]


def check_conversation(messages: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Every message of a conversation (direction ``out`` client -> agent or
    ``in``, message) checked against the definition its method names; a
    response against the result of the request it answers."""
    problems: list[str] = []
    asked: dict[tuple[str, Any], str] = {}
    for way, msg in messages:
        method = msg.get("method")
        if isinstance(method, str):
            if "id" in msg:
                asked[(way, json.dumps(msg["id"]))] = method
            names = DEFINITIONS.get(method)
            if names is None:
                problems.append(f"{way}: unknown method {method}")
                continue
            problems += violations(names[0], msg.get("params"))
            continue
        asker = "out" if way == "in" else "in"
        method = asked.pop((asker, json.dumps(msg.get("id"))), None)
        if "error" in msg:
            problems += violations("Error", msg["error"])
            continue
        names = DEFINITIONS.get(method or "")
        if names is None or names[1] is None:
            problems.append(f"{way}: a response to no request ({msg.get('id')!r})")
            continue
        problems += violations(names[1], msg.get("result"))
    return problems
