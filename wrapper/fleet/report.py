"""What a batch came to: ``batch.json`` for programs and JUnit XML for CI.

Both are built from each run's result.json as it was written (or from what
the batch knows when a run wrote none), so that they never say more than
the runs themselves did.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wrapper.supervision.result_file import WARNINGS_AT_END

#: What batch.json's layout is, raised when a field changes meaning.
BATCH_SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One run of the batch as the reports show it."""

    name: str
    label: str | None
    line: int
    run_dir: str
    #: The run's result.json, or None when it has none.
    result: Mapping[str, Any] | None
    #: Seconds from the run's start to its end, as the batch measured it.
    duration: float

    @property
    def outcome(self) -> str:
        outcome = (self.result or {}).get("outcome")
        return outcome if isinstance(outcome, str) else "error"

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def error(self) -> Mapping[str, Any] | None:
        if self.result is None:
            return {"kind": "internal", "message": "the run wrote no result.json"}
        error = self.result.get("error")
        return error if isinstance(error, Mapping) else None

    def to_json(self) -> dict[str, Any]:
        result = self.result or {}
        return {
            "label": self.label,
            "line": self.line,
            "runId": result.get("runId"),
            "runDir": self.run_dir,
            "outcome": self.outcome,
            "success": self.ok,
            "exitStatus": result.get("exitStatus"),
            "stopReason": result.get("stopReason"),
            "durationMs": round(self.duration * 1000),
            "usage": result.get("usage"),
            "error": self.error,
        }


def batch_json(
    entries: Sequence[RunEntry],
    *,
    started_at: str,
    ended_at: str,
    exit_status: int,
    warnings: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """The whole batch: counts by outcome, then every run in spec order, and
    the batch's own warnings (``{code, message}``)."""
    outcomes: dict[str, int] = {}
    for entry in entries:
        outcomes[entry.outcome] = outcomes.get(entry.outcome, 0) + 1
    return {
        "schemaVersion": BATCH_SCHEMA_VERSION,
        "startedAt": started_at,
        "endedAt": ended_at,
        "exitStatus": exit_status,
        "success": bool(entries) and all(entry.ok for entry in entries),
        "runs": len(entries),
        "outcomes": outcomes,
        "results": [entry.to_json() for entry in entries],
        "warnings": [dict(warning) for warning in warnings],
    }


def junit_xml(entries: Sequence[RunEntry], *, suite: str = "agent-wrapper") -> bytes:
    """One testcase per run; a run that is not ``ok`` is a failure whose
    message is its error, with the run's directory and stop reason in its text.

    Every attribute and text goes through ``_xml_safe``: labels, directories
    and error kinds come from the spec and the agents, and a character XML
    cannot carry would make the whole report unreadable to CI."""
    failures = sum(not entry.ok for entry in entries)
    total = sum(entry.duration for entry in entries)
    root = _element(
        None, "testsuites", tests=str(len(entries)), failures=str(failures), time=f"{total:.3f}"
    )
    tests = _element(
        root,
        "testsuite",
        name=suite,
        tests=str(len(entries)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=f"{total:.3f}",
    )
    for entry in entries:
        case = _element(
            tests, "testcase", classname=suite, name=entry.name, time=f"{entry.duration:.3f}"
        )
        if not entry.ok:
            error = entry.error or {}
            kind = str(error.get("kind") or entry.outcome)
            message = str(error.get("message") or f"the run ended {entry.outcome}")
            details = [f"outcome: {entry.outcome}", f"run directory: {entry.run_dir}"]
            if entry.result is not None:
                details.append(f"stop reason: {entry.result.get('stopReason')}")
            _element(case, "failure", "\n".join(details), message=message, type=kind)
        _element(case, "system-out", entry.run_dir)
        # A run can end ok and still carry what CI must see (a quality gate
        # that never passed): the warnings a run repeats on stderr.
        grave = [
            f"warning: {warning.get('message')}"
            for warning in (entry.result or {}).get("warnings") or ()
            if isinstance(warning, Mapping) and warning.get("code") in WARNINGS_AT_END
        ]
        if grave:
            _element(case, "system-err", "\n".join(grave))
    ET.indent(root)
    body: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return body + b"\n"


def _element(
    parent: ET.Element | None, tag: str, text: str | None = None, **attributes: str
) -> ET.Element:
    """An element whose attributes and text XML 1.0 can all carry."""
    safe = {name: _xml_safe(value) for name, value in attributes.items()}
    element = ET.Element(tag, safe) if parent is None else ET.SubElement(parent, tag, safe)
    if text is not None:
        element.text = _xml_safe(text)
    return element


def _xml_safe(text: str) -> str:
    """Text without the characters XML 1.0 cannot hold at all (control
    characters, lone surrogates, U+FFFE and U+FFFF), each replaced by U+FFFD."""
    return "".join(
        ch
        if ch in "\t\n\r"
        or ("\x20" <= ch <= "\ud7ff")
        or ("\ue000" <= ch <= "\ufffd")
        or ch > "\uffff"
        else "\ufffd"
        for ch in text
    )
