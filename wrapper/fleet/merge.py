"""``agent-wrapper merge``: one batch.json and one JUnit report from the
shards of one spec, with what is missing or doubled named.

Each shard's batch.json records its spec (path, SHA-256, how many runs) and
each run's place in it (``index``), so the merge needs nothing else: it
checks that every input is a shard of one spec, that every run of the spec
is there exactly once, and says which are not.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from wrapper.core.cost import CostSum
from wrapper.files.artifacts import atomic_write, dump_json, ensure_dir
from wrapper.fleet.budget import summed_spend
from wrapper.fleet.passing import expectation_of, same_run
from wrapper.fleet.report import (
    BATCH_SCHEMA_VERSION,
    RunEntry,
    SpecInfo,
    SuiteInfo,
    junit_xml,
    suite_name,
)

#: Every run of the spec is there once and passed.
MERGED_PASSED = 0
#: Every run is there once; some did not pass.
MERGED_NOT_PASSED = 1
#: Shards or runs missing or doubled, or shards of more than one spec.
MERGED_INCOMPLETE = 4
#: How many missing or doubled runs a message names before it counts the rest.
NAMED_AT_MOST = 10


class MergeUsageError(Exception):
    """An input that is no batch.json a merge can read: the message says which and why."""


@dataclass(slots=True)
class Shard:
    """One input: where its batch.json is and what it says."""

    path: Path
    report: Mapping[str, Any]

    @property
    def spec(self) -> Mapping[str, Any]:
        spec = self.report.get("spec")
        return spec if isinstance(spec, Mapping) else {}

    @property
    def shard(self) -> tuple[int, int] | None:
        shard = self.report.get("shard")
        if not isinstance(shard, Mapping):
            return None
        index, count = shard.get("index"), shard.get("count")
        return (index, count) if isinstance(index, int) and isinstance(count, int) else None


@dataclass(slots=True)
class Merged:
    """What the merge came to: the report, the JUnit entries, the problems."""

    report: dict[str, Any]
    entries: list[RunEntry]
    problems: list[dict[str, str]] = field(default_factory=list)
    exit_status: int = MERGED_PASSED
    #: What a person should know that does not make the merge incomplete.
    notes: list[dict[str, str]] = field(default_factory=list)


def read_shards(paths: Sequence[str]) -> list[Shard]:
    """Every input's batch.json (a folder holding one, or the file itself)."""
    shards = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            path = path / "batch.json"
        try:
            report = orjson.loads(path.read_bytes())
        except OSError as exc:
            raise MergeUsageError(
                f"{path}: cannot read it ({exc.strerror or exc}): give a batch's runs "
                "folder or its batch.json"
            ) from None
        except orjson.JSONDecodeError as exc:
            raise MergeUsageError(f"{path}: not JSON ({exc}): is it a batch.json?") from None
        if not isinstance(report, dict) or not isinstance(report.get("results"), list):
            raise MergeUsageError(f"{path}: not a batch.json (no results list)")
        spec = report.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("sha256"), str):
            raise MergeUsageError(
                f"{path}: records no spec (written by an older agent-wrapper): run its "
                "shard again to merge it"
            )
        shards.append(Shard(path, report))
    return shards


def merge(shards: Sequence[Shard]) -> Merged:
    """The shards' runs as one batch, in spec order, with every problem named."""
    problems: list[dict[str, str]] = []
    specs: dict[str, list[Shard]] = {}
    for shard in shards:
        specs.setdefault(str(shard.spec.get("sha256")), []).append(shard)
    first = shards[0]
    if len(specs) > 1:
        which = "; ".join(
            f"{_spec_name(group[0])} (sha256 {digest[:12]}…): "
            + ", ".join(str(shard.path) for shard in group)
            for digest, group in specs.items()
        )
        problems.append(
            {
                "code": "mixed_specs",
                "message": f"the inputs are shards of {len(specs)} different specs: {which}; "
                "merge the shards of one spec at a time",
            }
        )
    lines = first.spec.get("lines")
    total = lines if isinstance(lines, int) and lines >= 0 else 0
    problems += _shard_problems(shards)
    seen: dict[int, list[tuple[Shard, Mapping[str, Any]]]] = {}
    for shard in shards:
        for result in shard.report.get("results") or ():
            if isinstance(result, Mapping) and isinstance(result.get("index"), int):
                seen.setdefault(result["index"], []).append((shard, result))
    missing = [index for index in range(total) if index not in seen]
    doubled = {index: found for index, found in seen.items() if len(found) > 1}
    outside = sorted(index for index in seen if not 0 <= index < total)
    names = _line_names(first)
    if missing:
        problems.append(
            {
                "code": "missing_runs",
                "message": f"{len(missing)} of the spec's {total} runs are in no input: "
                + _listed([names.get(index, f"run {index + 1}") for index in missing]),
            }
        )
    if doubled:
        said = [
            f"{names.get(index, f'run {index + 1}')} (in "
            + ", ".join(str(shard.path) for shard, _ in found)
            + ")"
            for index, found in sorted(doubled.items())
        ]
        problems.append(
            {
                "code": "doubled_runs",
                "message": f"{len(doubled)} runs are in more than one input: {_listed(said)}",
            }
        )
    if outside:
        problems.append(
            {
                "code": "unknown_runs",
                "message": f"{len(outside)} runs are past the spec's {total} runs "
                "(a shard of another spec?)",
            }
        )
    results = [found[0] for _, found in sorted(seen.items())]
    checked = [_entry(shard, result) for shard, result in results]
    entries = [entry for entry, _ in checked]
    unverified = [names.get(entry.index, entry.name) for entry, verified in checked if not verified]
    if unverified:
        problems_after = [
            {
                "code": "unverified_runs",
                "message": f"{len(unverified)} run{'s' if len(unverified) != 1 else ''} "
                "could not be checked against the run's own result.json (not where the "
                "shard wrote it, or another run's): what the shard's batch.json says of it "
                "is taken unverified: " + _listed(unverified),
            }
        ]
    else:
        problems_after = []
    outcomes: dict[str, int] = {}
    for entry in entries:
        outcomes[entry.outcome] = outcomes.get(entry.outcome, 0) + 1
    all_passed = all(entry.passed for entry in entries)
    if problems:
        exit_status = MERGED_INCOMPLETE
    else:
        exit_status = MERGED_PASSED if all_passed else MERGED_NOT_PASSED
    warnings = [
        {"code": str(w.get("code")), "message": f"{shard.path}: {w.get('message')}"}
        for shard in shards
        for w in shard.report.get("warnings") or ()
        if isinstance(w, Mapping)
    ]
    started = [s.report.get("startedAt") for s in shards]
    ended = [s.report.get("endedAt") for s in shards]
    report = {
        "schemaVersion": BATCH_SCHEMA_VERSION,
        "startedAt": min((v for v in started if isinstance(v, str)), default=None),
        "endedAt": max((v for v in ended if isinstance(v, str)), default=None),
        "exitStatus": exit_status,
        "success": not problems and bool(entries) and all_passed,
        "shard": None,
        "spec": dict(first.spec),
        "runs": len(entries),
        "passed": sum(entry.passed for entry in entries),
        "reused": sum(entry.reused for entry in entries),
        "outcomes": outcomes,
        "cost": CostSum.of(entry.cost.usd for entry in entries).to_json(),
        "results": [
            _merged_result(result, entry, verified)
            for (_, result), (entry, verified) in zip(results, checked, strict=True)
        ],
        "warnings": problems + problems_after + warnings,
        "spend": summed_spend(shard.report.get("spend") for shard in shards),
        "shards": [
            {
                "path": str(shard.path),
                "index": shard.shard[0] if shard.shard else None,
                "count": shard.shard[1] if shard.shard else None,
                "exitStatus": shard.report.get("exitStatus"),
            }
            for shard in shards
        ],
    }
    return Merged(report, entries, problems, exit_status, problems_after)


def _shard_problems(shards: Sequence[Shard]) -> list[dict[str, str]]:
    """Shards missing or given twice, when the inputs agree on how many there are."""
    counts = {shard.shard[1] for shard in shards if shard.shard is not None}
    if len(counts) != 1:
        return []
    [count] = counts
    given: dict[int, list[Shard]] = {}
    for shard in shards:
        if shard.shard is not None:
            given.setdefault(shard.shard[0], []).append(shard)
    problems = []
    missing = [index for index in range(1, count + 1) if index not in given]
    if missing:
        problems.append(
            {
                "code": "missing_shards",
                "message": "no report of shard "
                + ", ".join(f"{index}/{count}" for index in missing)
                + ": did it run, and is its folder among the inputs?",
            }
        )
    for index, group in sorted(given.items()):
        if len(group) > 1:
            problems.append(
                {
                    "code": "doubled_shards",
                    "message": f"shard {index}/{count} is given {len(group)} times: "
                    + ", ".join(str(shard.path) for shard in group),
                }
            )
    return problems


def _spec_name(shard: Shard) -> str:
    return str(shard.spec.get("path") or shard.path)


def _line_names(shard: Shard) -> dict[int, str]:
    """How messages name each run of the spec: its line in the file (and
    label), when the spec is still there as it was; else its place."""
    path, digest = shard.spec.get("path"), shard.spec.get("sha256")
    if not isinstance(path, str):
        return {}
    try:
        raw = Path(path).read_bytes()
    except (OSError, ValueError):
        return {}
    if hashlib.sha256(raw).hexdigest() != digest:
        return {}
    names: dict[int, str] = {}
    index = 0
    for number, text in enumerate(raw.decode("utf-8", "replace").splitlines(), start=1):
        if not text.strip():
            continue
        label = None
        with contextlib.suppress(ValueError):
            obj = orjson.loads(text)
            label = obj.get("label") if isinstance(obj, dict) else None
        names[index] = f"line {number}" + (f" ({label})" if isinstance(label, str) else "")
        index += 1
    return names


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:NAMED_AT_MOST])
    more = len(items) - NAMED_AT_MOST
    return shown + (f" and {more} more" if more > 0 else "")


#: What a merged entry takes from the run's own result.json when it could
#: be read, and otherwise from its shard's batch.json (which may say anything).
_CHECKED_FIELDS = (
    "outcome",
    "success",
    "passed",
    "exitStatus",
    "stopReason",
    "usage",
    "costUsd",
    "costSource",
    "error",
)


def _merged_result(result: Mapping[str, Any], entry: RunEntry, verified: bool) -> dict[str, Any]:
    """A shard's entry as the merge verified it: what the run came to and
    whether it passed are the merge's own findings, never the shard's claim;
    ``verified`` says whether they come from the run's result.json."""
    own = entry.to_json()
    merged = dict(result)
    merged.update({key: own[key] for key in _CHECKED_FIELDS})
    merged["verified"] = verified
    merged.setdefault("notStarted", None)  # a shard's batch.json from before it was said
    return merged


def _entry(shard: Shard, result: Mapping[str, Any]) -> tuple[RunEntry, bool]:
    """A run of a shard as the merge shows it: from its result.json when it
    is still where the shard wrote it (and is that run's: same run id and
    line digest), else from batch.json; and whether it was the former."""
    run_dir = str(result.get("runDir") or "")
    full: Mapping[str, Any] | None = None
    with contextlib.suppress(OSError, ValueError):
        loaded = orjson.loads((Path(run_dir) / "result.json").read_bytes())
        if isinstance(loaded, dict) and same_run(loaded, result):
            full = loaded
    verified = full is not None
    if full is None:
        full = {
            key: result.get(key)
            for key in (
                "runId",
                "outcome",
                "exitStatus",
                "stopReason",
                "usage",
                "costUsd",
                "costSource",
                "error",
            )
        }
    took = result.get("durationMs")
    label = result.get("label")
    line = result.get("line")
    return RunEntry(
        name=label if isinstance(label, str) else f"line {line}",
        label=label if isinstance(label, str) else None,
        line=line if isinstance(line, int) else 0,
        run_dir=run_dir,
        result=full,
        duration=took / 1000 if isinstance(took, int) and took >= 0 else 0,
        index=result["index"],
        line_digest=result.get("lineDigest") if isinstance(result.get("lineDigest"), str) else None,
        expect=expectation_of(result.get("expect")),
        reused=result.get("reused") is True,
    ), verified


def merge_main(paths: Sequence[str], junit: str | None, out: str | None) -> int:
    """The ``merge`` subcommand: returns its exit status (2: an input unreadable)."""
    try:
        shards = read_shards(paths)
    except MergeUsageError as exc:
        _say(f"error: merge: {exc}")
        return 2
    merged = merge(shards)
    body = dump_json(merged.report)
    if junit is not None:
        first = shards[0]
        spec = first.spec
        info = SpecInfo(str(spec.get("path") or ""), str(spec.get("sha256")), 0)
        suite = SuiteInfo(
            name=suite_name(info, None),
            timestamp=merged.report["startedAt"],
            hostname=socket.gethostname(),
            wall=_seconds(merged.report["startedAt"], merged.report["endedAt"]),
        )
        if not _write(Path(junit), junit_xml(merged.entries, suite)):
            return 2
    if out is not None:
        if not _write(Path(out), body):
            return 2
    else:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.buffer.write(body)
            sys.stdout.flush()
    for problem in merged.problems:
        _say(f"merge: {problem['message']}")
    for note in merged.notes:
        _say(f"merge: warning: {note['message']}")
    report = merged.report
    spec_path = Path(str(report["spec"].get("path") or "the spec")).name
    _say(
        f"merge: {report['runs']} of the {report['spec'].get('lines')} runs of {spec_path} "
        f"from {len(shards)} inputs: {report['passed']} passed, "
        f"{report['runs'] - report['passed']} did not"
        + ("" if not merged.problems else "; incomplete (exit 4)")
    )
    return merged.exit_status


def _seconds(start: Any, end: Any) -> float | None:
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return None


def _write(path: Path, body: bytes) -> bool:
    try:
        ensure_dir(path.parent)
        atomic_write(path, body)
    except OSError as exc:
        _say(f"error: merge: could not write {path}: {exc.strerror or exc}; choose another place")
        return False
    return True


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"agent-wrapper: {line}", file=sys.stderr, flush=True)
