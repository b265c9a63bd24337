"""Checks the messages of ACP captures (tests/data/real/acp) against the
published ACP schema, message by message.

Two checkers, each optional:

- ``--json-schema FILE``: a JSON Schema of ACP (``schema/v1/schema.json`` of
  the npm package ``@agentclientprotocol/sdk``), with ``jsonschema`` (a test
  dependency of the project);
- ``--pydantic``: the generated models of the PyPI package
  ``agent-client-protocol`` (``acp.schema``), which is not a dependency of
  the project: run this with a scratch venv's interpreter that has it.

Each message is checked against the definition its method names (for a
response: the method of the request with that id, sent by the other side).
Prints one line per message that fails, and a table of counts.

    python -m tests.real.acp_schema_check --json-schema schema.json tests/data/real/acp/*/*.jsonl
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

#: method -> (params definition, result definition); None where there is none.
DEFINITIONS: dict[str, tuple[str, str | None]] = {
    "initialize": ("InitializeRequest", "InitializeResponse"),
    "session/new": ("NewSessionRequest", "NewSessionResponse"),
    "session/prompt": ("PromptRequest", "PromptResponse"),
    "session/cancel": ("CancelNotification", None),
    "session/update": ("SessionNotification", None),
    "session/request_permission": ("RequestPermissionRequest", "RequestPermissionResponse"),
}


def messages(path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(direction, definition name, payload) of each checkable message."""
    found = []
    pending: dict[tuple[str, Any], str] = {}
    for raw in path.read_text().splitlines():
        entry = json.loads(raw)
        way, msg = entry["dir"], entry["msg"]
        if way not in ("in", "out") or not isinstance(msg, dict) or "raw" in msg:
            continue
        method = msg.get("method")
        if method is not None:
            if "id" in msg:
                pending[(way, msg["id"])] = method
            names = DEFINITIONS.get(method)
            if names is None:
                found.append((way, f"?{method}", msg))
                continue
            found.append((way, names[0], msg.get("params") or {}))
            continue
        asker = "out" if way == "in" else "in"
        method = pending.pop((asker, msg.get("id")), None)
        if "error" in msg:
            found.append((way, "Error", msg["error"]))
            continue
        names = DEFINITIONS.get(method or "")
        if names is None or names[1] is None:
            found.append((way, f"?response to {method}", msg))
            continue
        found.append((way, names[1], msg.get("result") or {}))
    return found


def dropped_keys(data: Any, dumped: Any, where: str = "") -> list[str]:
    """Keys in the input that the model did not keep (unknown to the schema)."""
    lost: list[str] = []
    if isinstance(data, dict) and isinstance(dumped, dict):
        for key, value in data.items():
            if key not in dumped:
                lost.append(f"{where}.{key}")
            else:
                lost += dropped_keys(value, dumped[key], f"{where}.{key}")
    elif isinstance(data, list) and isinstance(dumped, list):
        if len(data) != len(dumped):
            lost.append(f"{where}[] ({len(data) - len(dumped)} items dropped)")
        for index, (a, b) in enumerate(zip(data, dumped, strict=False)):
            lost += dropped_keys(a, b, f"{where}[{index}]")
    return lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json-schema", type=Path)
    parser.add_argument("--pydantic", action="store_true")
    parser.add_argument("captures", type=Path, nargs="+")
    args = parser.parse_args(argv)
    validator = None
    if args.json_schema:
        jsonschema = importlib.import_module("jsonschema")
        schema = json.loads(args.json_schema.read_text())
        validator_class = jsonschema.validators.validator_for(schema)
        validator = (schema, validator_class)
    models = importlib.import_module("acp.schema") if args.pydantic else None
    counts: Counter[tuple[str, str, str]] = Counter()
    for path in args.captures:
        label = f"{path.parent.name}/{path.name}"
        for way, name, payload in messages(path):
            if name.startswith("?"):
                counts[(name, "unchecked", way)] += 1
                continue
            if validator is not None:
                schema, cls = validator
                if name not in schema["$defs"]:
                    counts[(name, "json-schema: no such definition", way)] += 1
                    continue
                check = cls({"$ref": f"#/$defs/{name}", "$defs": schema["$defs"]})
                errors = sorted(check.iter_errors(payload), key=lambda e: list(e.path))
                verdict = "ok" if not errors else "FAIL"
                counts[(name, f"json-schema {verdict}", way)] += 1
                for error in errors[:3]:
                    where = "/".join(str(p) for p in error.absolute_path)
                    print(f"{label}: {way} {name} json-schema: {where}: {error.message[:200]}")
            if models is not None:
                model = getattr(models, name)
                try:
                    parsed = model.model_validate(payload)
                except Exception as exc:
                    counts[(name, "pydantic FAIL", way)] += 1
                    first = str(exc).splitlines()[:3]
                    print(f"{label}: {way} {name} pydantic: {' | '.join(first)[:300]}")
                    continue
                dumped = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
                lost = dropped_keys(payload, dumped)
                verdict = "ok" if not lost else "ok, keys dropped"
                counts[(name, f"pydantic {verdict}", way)] += 1
                if lost:
                    print(f"{label}: {way} {name} pydantic dropped {lost[:6]}")
    print()
    for (name, verdict, way), count in sorted(counts.items()):
        print(f"{count:5d}  {way:3s}  {name:28s} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
