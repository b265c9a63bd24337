"""What a batch came to: ``batch.json`` for programs and JUnit XML for CI.

Both are built from each run's result.json as it was written (or from what
the batch knows when a run wrote none), so that they never say more than
the runs themselves did.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from wrapper.core.cost import CostSum, ShownCost, run_cost
from wrapper.fleet.passing import Expectation, passed
from wrapper.supervision.result_file import WARNINGS_AT_END

#: What batch.json's layout is, raised when a field changes meaning.
BATCH_SCHEMA_VERSION = 1
#: How much of a run's final text a JUnit case's ``system-out`` holds, in characters.
SYSTEM_OUT_TEXT = 4000
#: How much of the end of a run's stderr it holds, in bytes.
SYSTEM_OUT_STDERR = 2000


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
    #: Its place among the spec's runs, from 0.
    index: int = 0
    #: The SHA-256 of its line as resolved.
    line_digest: str | None = None
    expect: Expectation | None = None
    #: Whether the run is an earlier one kept by --skip-passed or --skip-finished.
    reused: bool = False
    #: Why a run that was there already ran again, else None.
    rerun: str | None = None

    @property
    def outcome(self) -> str:
        outcome = (self.result or {}).get("outcome")
        return outcome if isinstance(outcome, str) else "error"

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def passed(self) -> bool:
        return passed(self.result, self.expect)

    @property
    def error(self) -> Mapping[str, Any] | None:
        if self.result is None:
            return {"kind": "internal", "message": "the run wrote no result.json"}
        error = self.result.get("error")
        return error if isinstance(error, Mapping) else None

    @property
    def cost(self) -> ShownCost:
        return run_cost(self.result)

    def to_json(self) -> dict[str, Any]:
        result = self.result or {}
        return {
            "label": self.label,
            "line": self.line,
            "index": self.index,
            "lineDigest": self.line_digest,
            "runId": result.get("runId"),
            "runDir": self.run_dir,
            "outcome": self.outcome,
            "success": self.ok,
            "expect": self.expect.to_json() if self.expect is not None else None,
            "passed": self.passed,
            "reused": self.reused,
            "rerunBecause": self.rerun,
            "exitStatus": result.get("exitStatus"),
            "stopReason": result.get("stopReason"),
            "durationMs": round(self.duration * 1000),
            "usage": result.get("usage"),
            # What the run cost, as every view shows it (result.json's
            # ``cost`` has the details).
            "costUsd": self.cost.usd,
            "costSource": self.cost.source,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class SpecInfo:
    """Which spec a batch ran: where it was, its SHA-256, how many runs it holds."""

    path: str
    sha256: str
    lines: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "lines": self.lines}


def batch_json(
    entries: Sequence[RunEntry],
    *,
    started_at: str,
    ended_at: str,
    exit_status: int,
    warnings: Sequence[Mapping[str, str]] = (),
    shard: tuple[int, int] | None = None,
    spec: SpecInfo | None = None,
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
        "success": bool(entries) and all(entry.passed for entry in entries),
        "shard": {"index": shard[0], "count": shard[1]} if shard is not None else None,
        "spec": spec.to_json() if spec is not None else None,
        "runs": len(entries),
        "passed": sum(entry.passed for entry in entries),
        "reused": sum(entry.reused for entry in entries),
        "outcomes": outcomes,
        "cost": CostSum.of(entry.cost.usd for entry in entries).to_json(),
        "results": [entry.to_json() for entry in entries],
        "warnings": [dict(warning) for warning in warnings],
        # Only a merged report lists the shards it was made of.
        "shards": None,
    }


def suite_name(spec: SpecInfo | None, shard: tuple[int, int] | None) -> str:
    """What the JUnit suite is called: the spec and the shard, so that the
    reports of N shards do not all carry one name."""
    name = Path(spec.path).name if spec is not None else "agent-wrapper"
    if shard is not None and shard[1] > 1:
        name += f" (shard {shard[0]}/{shard[1]})"
    return name


@dataclass(frozen=True, slots=True)
class SuiteInfo:
    """The suite's own attributes: its name, when it started, where, how long."""

    name: str = "agent-wrapper"
    timestamp: str | None = None
    hostname: str | None = None
    #: Seconds from the batch's start to its end (not the sum of the runs).
    wall: float | None = None


def junit_xml(entries: Sequence[RunEntry], suite: SuiteInfo | None = None) -> bytes:
    """One testcase per run; a run that did not pass is a failure whose
    message is its error (or the expectation it missed), with its outcome,
    directory and stop reason in its text; ``system-out`` holds the run's
    final text and the end of its stderr.

    Every attribute and text goes through ``_xml_safe``: labels, directories
    and error kinds come from the spec and the agents, and a character XML
    cannot carry would make the whole report unreadable to CI."""
    suite = suite or SuiteInfo()
    failures = sum(not entry.passed for entry in entries)
    total = suite.wall if suite.wall is not None else sum(entry.duration for entry in entries)
    root = _element(
        None,
        "testsuites",
        name=suite.name,
        tests=str(len(entries)),
        failures=str(failures),
        time=f"{total:.3f}",
    )
    attributes = {"timestamp": suite.timestamp, "hostname": suite.hostname}
    tests = _element(
        root,
        "testsuite",
        name=suite.name,
        tests=str(len(entries)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=f"{total:.3f}",
        **{key: value for key, value in attributes.items() if value is not None},
    )
    for entry in entries:
        case = _element(
            tests, "testcase", classname=suite.name, name=entry.name, time=f"{entry.duration:.3f}"
        )
        _properties(case, entry)
        if not entry.passed:
            _failure(case, entry)
        _element(case, "system-out", _system_out(entry))
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


def _properties(case: ET.Element, entry: RunEntry) -> None:
    """What the run cost, as properties CI can chart: ``cost_source``
    always, ``cost_usd`` only when the cost is known (an unknown cost is
    left out, never written as 0)."""
    cost = entry.cost
    properties = _element(case, "properties")
    if cost.usd is not None:
        # Written whole, never in exponent form (a fraction of a cent is
        # a small number, not 0).
        _element(properties, "property", name="cost_usd", value=f"{Decimal(repr(cost.usd)):f}")
    _element(properties, "property", name="cost_source", value=cost.source)


def _failure(case: ET.Element, entry: RunEntry) -> None:
    error = entry.error or {}
    kind = str(error.get("kind") or entry.outcome)
    message = str(error.get("message") or f"the run ended {entry.outcome}")
    if entry.expect is not None:
        got = entry.outcome + (f" ({error.get('kind')})" if error.get("kind") else "")
        message = f"expected {entry.expect.describe()}, got {got}: {message}"
    details = [f"outcome: {entry.outcome}", f"run directory: {entry.run_dir}"]
    stop_reason = (entry.result or {}).get("stopReason")
    if isinstance(stop_reason, str):
        details.append(f"stop reason: {stop_reason}")
    _element(case, "failure", "\n".join(details), message=message, type=kind)


def _system_out(entry: RunEntry) -> str:
    """The run's directory, its final text and the end of its stderr, bounded."""
    result = entry.result or {}
    parts = [f"run directory: {entry.run_dir}"]
    if entry.reused:
        parts.append("kept from an earlier run of the same line")
    if entry.expect is not None:
        parts.append(f"expected: {entry.expect.describe()}")
    final = result.get("finalText")
    if isinstance(final, str) and final:
        parts.append("final text:\n" + _bounded(final, SYSTEM_OUT_TEXT))
    tail = _stderr_tail(result, entry.run_dir)
    if tail:
        parts.append("stderr ends:\n" + tail)
    return "\n".join(parts)


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _stderr_tail(result: Mapping[str, Any], run_dir: str) -> str | None:
    artifacts = result.get("artifacts")
    where = artifacts.get("stderr") if isinstance(artifacts, Mapping) else None
    path = Path(where) if isinstance(where, str) else Path(run_dir) / "stderr.log"
    try:
        with path.open("rb") as file:
            size = file.seek(0, 2)
            file.seek(max(size - SYSTEM_OUT_STDERR, 0))
            data = file.read(SYSTEM_OUT_STDERR)
    except (OSError, ValueError):  # a path no system call takes (NUL, lone surrogate)
        return None
    text = data.decode("utf-8", "replace").strip()
    if not text:
        return None
    return ("…" + text) if size > SYSTEM_OUT_STDERR else text


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
