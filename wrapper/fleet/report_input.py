"""Reading what the HTML report shows: batch.json files and their runs' directories.

A path names a batch's runs directory (holding batch.json), a folder of such
directories (the shards of one spec, as CI artifacts are downloaded), or a
batch.json file (one batch, a shard, or a merged one). Each run's
result.json is read from its run directory for what batch.json does not
hold (final text, warnings, steers, times), and the end of its stderr.log.

Only a path that holds no batch.json at all is an error (``ReportInputError``,
a usage error); anything else that cannot be read (a corrupt batch.json or
result.json, a run directory that is gone) is said on the page instead.
A run directory recorded on another machine (an absolute path from a CI
job) is looked for next to the batch.json that names it.
"""

from __future__ import annotations

import glob
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from wrapper.core.cost import run_cost
from wrapper.files.artifacts import (
    RESULT_MAX_BYTES,
    UnreadableFile,
    atomic_write,
    ensure_dir,
    read_regular_file,
)
from wrapper.fleet.html_report import (
    SIGNAL_RANK,
    Mark,
    ReportData,
    ReportRun,
    SpecInfo,
    build_html,
)
from wrapper.fleet.passing import expectation_of, same_run
from wrapper.fleet.passing import passed as is_passed
from wrapper.fleet.report_marks import (
    RUN_FILE_FLAGS,
    as_int,
    epoch,
    marks_of,
    objects,
    read_events,
    refused_steers,
    signals_sent,
)

#: How much of a run's final text the page holds (the rest is in
#: result.json), and of the end of its stderr.log.
FINAL_TEXT_CHARS = 4000
STDERR_TAIL_BYTES = 2048
#: Past this many runs each holds a quarter of that: a page for 1,000 runs
#: stays a few megabytes, quick to open and to keep as an artifact.
MANY_RUNS = 200


class ReportInputError(Exception):
    """A path given holds no batch to report; the text says what to give instead."""


def batch_files(paths: Sequence[Path]) -> list[Path]:
    """The batch.json files ``paths`` name, in the order given."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            if (path / "batch.json").is_file():
                found.append(path / "batch.json")
                continue
            below = sorted(path.glob("*/batch.json"))
            if not below:
                raise ReportInputError(
                    f"{path} holds no batch.json (nor does any folder in it): give the runs "
                    "directory of a batch (its --runs-dir) or a batch.json file"
                )
            found.extend(below)
        elif path.exists():
            found.append(path)
        else:
            raise ReportInputError(
                f"{path} does not exist: give the runs directory of a batch (its --runs-dir) "
                "or a batch.json file"
            )
    unique: list[Path] = []
    for path in found:
        if path.resolve() not in {p.resolve() for p in unique}:
            unique.append(path)
    return unique


def load_report(paths: Sequence[Path]) -> ReportData:
    """Everything the page shows, from the batches ``paths`` name; raises
    ``ReportInputError`` when one of them names no batch."""
    files = batch_files(paths)
    problems: list[str] = []
    runs: list[tuple[tuple[int, str], ReportRun]] = []
    seen_ids: set[str] = set()
    starts: list[float] = []
    ends: list[float] = []
    shards: list[str] = []
    counts: set[int] = set()
    specs: dict[str, SpecInfo] = {}
    warnings: list[str] = []
    batches: list[tuple[Path, dict[str, Any], list[Any]]] = []
    for path in files:
        batch, problem = _read_json(path, "batch.json")
        if batch is None:
            problems.append(problem or f"{path}: could not be read")
            continue
        results = batch.get("results")
        if not isinstance(results, list):
            problems.append(f"{path}: not a batch.json (no list of results)")
            continue
        batches.append((path, batch, results))
    many = sum(len(results) for _, _, results in batches) > MANY_RUNS
    room = (FINAL_TEXT_CHARS // 4, STDERR_TAIL_BYTES // 4) if many else None
    for path, batch, results in batches:
        shard = _shard(batch.get("shard"))
        if shard is not None:
            shards.append(f"{shard[0]}/{shard[1]}")
            counts.add(shard[1])
        spec = _spec(batch.get("spec"))
        if spec is not None:
            specs.setdefault(spec.sha256 or spec.path or "", spec)
        for stamp, into in (("startedAt", starts), ("endedAt", ends)):
            when = epoch(batch.get(stamp))
            if when is not None:
                into.append(when)
        prefix = f"shard {shard[0]}/{shard[1]}: " if shard is not None and len(files) > 1 else ""
        for warning in batch.get("warnings") or ():
            if isinstance(warning, Mapping):
                warnings.append(prefix + str(warning.get("message")))
        for entry in results:
            if not isinstance(entry, Mapping):
                problems.append(f"{path}: a result that is not a JSON object was skipped")
                continue
            run_id = entry.get("runId")
            if isinstance(run_id, str):
                if run_id in seen_ids:
                    continue
                seen_ids.add(run_id)
            run = _run(entry, path.parent, shard, room)
            runs.append(((run.line if run.line is not None else 1 << 62, run.shard or ""), run))
    if len(specs) > 1:
        named = ", ".join(f"{s.path} ({(s.sha256 or '?')[:12]})" for s in specs.values())
        problems.append(f"the batches come from different specs: {named}")
    runs.sort(key=lambda item: item[0])
    return ReportData(
        runs=tuple(run for _, run in runs),
        started=min(starts) if starts else None,
        ended=max(ends) if ends else None,
        spec=next(iter(specs.values())) if len(specs) == 1 else None,
        shards=tuple(sorted(set(shards), key=_shard_order)),
        shard_count=next(iter(counts)) if len(counts) == 1 else None,
        warnings=tuple(warnings),
        problems=tuple(problems),
        sources=tuple(str(path) for path in files),
    )


def _shard_order(text: str) -> tuple[int, str]:
    head = text.split("/", 1)[0]
    return (int(head) if head.isdigit() else 1 << 30, text)


def _run(
    entry: Mapping[str, Any],
    batch_dir: Path,
    shard: tuple[int, int] | None,
    room: tuple[int, int] | None = None,
) -> ReportRun:
    """One run from its batch.json entry and what its directory still holds;
    ``room``: how much final text and stderr it may hold, if not the most."""
    text_chars, stderr_bytes = room or (FINAL_TEXT_CHARS, STDERR_TAIL_BYTES)
    missing: list[str] = []
    recorded = entry.get("runDir")
    run_dir = _find_run_dir(recorded, batch_dir) if isinstance(recorded, str) else None
    result: Mapping[str, Any] = {}
    stderr_tail = None
    tool_calls = None
    agent_retries: list[Mark] = []
    mismatch = None
    if not isinstance(recorded, str):
        missing.append("its batch.json entry names no run directory")
    elif run_dir is None:
        missing.append(f"run directory {recorded} not found (looked next to the batch.json too)")
    else:
        read, problem = _read_json(run_dir / "result.json", "result.json", follow=False)
        if read is None:
            missing.append(problem or f"{run_dir / 'result.json'}: could not be read")
        elif same_run(read, entry):
            result = read
            stderr_tail = _tail(run_dir / "stderr.log", stderr_bytes)
            tool_calls, agent_retries = read_events(run_dir / "events.jsonl")
        else:
            # Another run of the line (a later batch, a re-run cut short)
            # replaced it: nothing of the directory is this run's now, but
            # the batch that replaced it kept its result.json in history/.
            kept = _kept_result(run_dir, entry)
            if kept is not None:
                result = kept
                later = (
                    f"{run_dir} now holds a later run of the line (run id "
                    f"{_brief_id(read.get('runId'))}): this run's result.json was read "
                    "from its history/ folder; its stderr and events are gone"
                )
                missing.append(later)
            else:
                mismatch = (
                    f"not the same run: {run_dir / 'result.json'} is run "
                    f"{_brief_id(read.get('runId'))}, batch.json names run "
                    f"{_brief_id(entry.get('runId'))} (run again since?); what batch.json "
                    "says of it could not be checked, and it is not counted as passed"
                )
    merged: dict[str, Any] = {**entry, **{k: v for k, v in result.items() if v is not None}}
    label = entry.get("label")
    line = entry.get("line")
    line = line if isinstance(line, int) and not isinstance(line, bool) else None
    name = label if isinstance(label, str) else f"line {line}" if line is not None else "(unnamed)"
    outcome = merged.get("outcome") if isinstance(merged.get("outcome"), str) else "error"
    expect = entry.get("expect")
    passed = entry.get("passed")
    if mismatch is not None:
        # What batch.json says of the run cannot be checked any more.
        passed = False
    elif not isinstance(passed, bool) and result:
        passed = is_passed(result, expectation_of(expect))
    cost = run_cost(merged)
    raw_usage = merged.get("usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, Mapping) else {}
    steers = as_int(result.get("steerCount"))
    max_steers = as_int(result.get("maxSteers"))
    marks = marks_of(result) + agent_retries
    signals = signals_sent(result)
    error = merged.get("error")
    error_kind = error.get("kind") if isinstance(error, Mapping) else None
    final_text = result.get("finalText") if isinstance(result.get("finalText"), str) else None
    if final_text is not None and len(final_text) > text_chars:
        rest = len(final_text) - text_chars
        final_text = final_text[:text_chars] + f"\n[\u2026 {rest:,} characters more in result.json]"
    entry_shard = _shard(entry.get("shard")) or shard
    return ReportRun(
        label=name,
        line=line,
        run_dir=str(run_dir) if run_dir is not None else str(recorded),
        outcome=str(outcome),
        passed=passed if isinstance(passed, bool) else outcome == "ok",
        stop_reason=_str(merged.get("stopReason")),
        duration_ms=as_int(merged.get("durationMs")),
        started=epoch(result.get("startedAt")),
        ended=epoch(result.get("endedAt")),
        tokens=_tokens(usage),
        cost_usd=cost.usd,
        cost_source=cost.source,
        steers=steers,
        max_steers=max_steers,
        hit_steer_cap=result.get("stopAllowedBy") == "max_steers"
        or (steers is not None and max_steers is not None and 0 < max_steers <= steers),
        outside_steers=as_int(result.get("externalSteerCount")),
        refused_steers=tuple(refused_steers(result)),
        cleanup=max((sig for sig, _ in signals), key=SIGNAL_RANK.__getitem__, default=None),
        cleanup_reasons=tuple(f"{sig}: {why}" for sig, why in signals),
        error_kind=error_kind if isinstance(error_kind, str) else None,
        tools=tuple(str(t) for t in result.get("toolsUsed") or () if isinstance(t, str)),
        tool_calls=tool_calls,
        warnings=tuple(str(w.get("message")) for w in objects(result.get("warnings"))),
        error=_error(merged.get("error")),
        final_text=final_text,
        stderr_tail=stderr_tail,
        marks=tuple(sorted(marks, key=lambda m: m.at)),
        shard=f"{entry_shard[0]}/{entry_shard[1]}" if entry_shard is not None else None,
        reused=entry.get("reused") is True,
        expect=None if expect is None else orjson.dumps(expect).decode(),
        missing=tuple(missing),
        mismatch=mismatch,
    )


def _kept_result(run_dir: Path, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The run's result.json as a later batch kept it in the run directory's
    ``history/`` (named after its run id) before running the line again."""
    run_id = entry.get("runId")
    if not isinstance(run_id, str) or not run_id.isprintable() or "/" in run_id:
        return None
    history = run_dir / "history"
    escaped = glob.escape(run_id)
    for pattern in (f"*-{escaped}.result.json", f"*-{escaped}-*.result.json"):
        for path in sorted(history.glob(pattern)):
            kept, _ = _read_json(path, "result.json", follow=False)
            if kept is not None and same_run(kept, entry):
                return kept
    return None


def _brief_id(value: Any) -> str:
    return str(value)[:40] if isinstance(value, str) and value.isprintable() else "(none)"


def _find_run_dir(recorded: str, batch_dir: Path) -> Path | None:
    """The run directory as recorded, else the one at the end of its path
    below the batch.json's folder (``label``, ``shard-2/label``, ...): a
    batch's artifacts downloaded elsewhere, or a merged batch.json next to
    its shards' folders."""
    path = Path(recorded)
    parts = [part for part in path.parts if part not in (path.anchor, "..", ".")]
    candidates = [path if path.is_absolute() else batch_dir / path]
    candidates += [batch_dir.joinpath(*parts[-k:]) for k in range(1, min(len(parts), 4) + 1)]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def _read_json(
    path: Path, what: str, *, follow: bool = True
) -> tuple[dict[str, Any] | None, str | None]:
    """A JSON object from ``path``, or None and why not, as a sentence."""
    try:
        raw = read_regular_file(path, RESULT_MAX_BYTES, follow_symlinks=follow)
    except FileNotFoundError:
        return None, f"{path}: no {what} there"
    except (UnreadableFile, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, f"{path}: {what} cannot be read: {reason}"
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, f"{path}: {what} is not valid JSON"
    if not isinstance(value, dict):
        return None, f"{path}: {what} is not a JSON object"
    return value, None


def _tail(path: Path, size: int) -> str | None:
    """The end of a text file, from the start of a line, or None."""
    try:
        fd = os.open(path, RUN_FILE_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return None
        start = max(0, info.st_size - size)
        data = os.pread(fd, info.st_size - start, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    if start > 0 and b"\n" in data:
        data = data.split(b"\n", 1)[1]
    text = data.decode("utf-8", errors="replace").rstrip("\n")
    return text or None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _tokens(usage: Mapping[str, Any]) -> int | None:
    total = as_int(usage.get("totalTokens"))
    if total is not None:
        return total
    parts = [as_int(usage.get(key)) for key in ("input", "output", "cacheRead", "cacheWrite")]
    known = [p for p in parts if p is not None]
    return sum(known) if known else None


def _error(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return None
    kind, message = value.get("kind"), value.get("message")
    return f"{kind}: {message}" if kind else str(message)


def _shard(value: Any) -> tuple[int, int] | None:
    if not isinstance(value, Mapping):
        return None
    index, count = as_int(value.get("index")), as_int(value.get("count"))
    # A batch that is not sharded is shard 1/1: nothing to show.
    if index is None or count is None or count <= 1:
        return None
    return index, count


def _spec(value: Any) -> SpecInfo | None:
    if not isinstance(value, Mapping):
        return None
    return SpecInfo(
        path=_str(value.get("path")),
        sha256=_str(value.get("sha256")),
        lines=as_int(value.get("lines")),
    )


def write_html(paths: Sequence[Path], out: Path) -> ReportData:
    """Write the page for the batches ``paths`` name to ``out`` (atomically);
    returns what it shows. Raises ``ReportInputError`` when a path names no
    batch, ``OSError`` when the page cannot be written."""
    data = load_report(paths)
    ensure_dir(out.parent)
    atomic_write(out, build_html(data).encode("utf-8", errors="replace"), durable=False)
    return data


def report_main(paths: Sequence[Path], html: str | None) -> int:
    """``agent-wrapper report``: 0 the page was written, 1 it could not be, 2 usage."""
    if not html:
        return _usage("say where the page goes: agent-wrapper report RUNS_DIR... --html FILE")
    out = (Path.cwd() / html).absolute()
    try:
        data = write_html(paths, out)
    except ReportInputError as exc:
        return _usage(str(exc))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        _usage(f"cannot write {out}: {reason}; give --html a path in a folder you can write to")
        return 1
    unread = len(data.problems) + sum(bool(run.missing) for run in data.runs)
    if unread:
        print(
            f"agent-wrapper: warning: report: {unread} batch or run file(s) could not be "
            f"read; the page says which ({out})",
            file=sys.stderr,
        )
    print(out)
    return 0


def _usage(message: str) -> int:
    print(f"agent-wrapper: error: report: {message}", file=sys.stderr)
    return 2
