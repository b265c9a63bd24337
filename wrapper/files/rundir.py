"""Reading a run directory from outside: status.json, result.json, events.jsonl.

The one reader every command that looks at runs uses (``status``, ``ps``,
``watch``, the transcript's tail). It never writes into a run directory and
never talks to the run's socket: watching a run costs the run nothing.

Anything in a run directory may be missing (a run starting), partial (a
line being written) or garbled (the agent can write there): a file that
cannot be read is taken as absent, a line that is not a JSON object is
skipped, and nothing here raises on what it reads.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from wrapper.core.cost import ShownCost, run_cost
from wrapper.core.event_log import Stamped, decode_event
from wrapper.core.limits import WATCH_LINE_MAX_BYTES, WATCH_READ_BYTES
from wrapper.files.artifacts import RESULT_MAX_BYTES, RUN_MARKER, list_run_folder
from wrapper.files.mailbox import read_json

STATUS = "status.json"
RESULT = "result.json"
EVENTS = "events.jsonl"
CONFIG = "config.json"

#: How a run's files are opened: never blocking on a FIFO the agent planted.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC

Warn = Callable[[str], None]


def read_status(run_dir: Path, warn: Warn | None = None) -> dict[str, Any] | None:
    """status.json as a JSON object, or None when it is missing or unreadable."""
    return read_json(run_dir / STATUS, warn)


def read_result(
    run_dir: Path, status: Mapping[str, Any] | None = None, warn: Warn | None = None
) -> dict[str, Any] | None:
    """The run's result.json: in the run directory, else where its
    config.json says it went (``--result``). With ``status``, only a result
    of the same run (a reused directory may hold an older one)."""
    result = read_json(run_dir / RESULT, warn, RESULT_MAX_BYTES)
    if result is None:
        config = read_json(run_dir / CONFIG, warn, RESULT_MAX_BYTES)
        path = config.get("resultPath") if config else None
        if isinstance(path, str):
            result = read_json(Path(path), warn, RESULT_MAX_BYTES)
    if result is not None and status is not None and result.get("runId") != status.get("runId"):
        return None
    return result


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` holds a run: its status.json or result.json, or the
    mark a run leaves first thing (a run still starting)."""
    return any((path / name).is_file() for name in (STATUS, RESULT, RUN_MARKER))


def wrapper_alive(pid: object) -> bool:
    """Whether ``pid`` is a running process (unknown pids count as running)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True


def epoch(stamp: object) -> float | None:
    """An ISO 8601 timestamp of a run's files as seconds since the epoch."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def change_mark(path: Path | str) -> tuple[int, int, int] | None:
    """What changes when a file is written or replaced (its inode, size and
    modification time), or None when it is not there: a reader polls this
    and reads the file again only when it differs."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


# --- one run as the lists show it ----------------------------------------------


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """What one run directory says of its run at one moment.

    Figures a run does not report (an older wrapper's status.json, an agent
    that says nothing of tokens) are ``None``, never 0.
    """

    path: Path
    status: Mapping[str, Any] | None
    result: Mapping[str, Any] | None
    #: The wrapper that writes status.json is gone without a result.
    gone: bool = False

    @property
    def run_id(self) -> str | None:
        return _str((self.status or {}).get("runId")) or _str((self.result or {}).get("runId"))

    @property
    def label(self) -> str | None:
        return _str((self.status or {}).get("label")) or _str((self.result or {}).get("label"))

    @property
    def finished(self) -> bool:
        return self.result is not None or (self.status or {}).get("state") == "finished"

    @property
    def ended(self) -> bool:
        """Finished, or never to finish (its wrapper is gone)."""
        return self.finished or self.gone

    @property
    def state(self) -> str:
        if self.finished:
            return "finished"
        if self.gone:
            return "gone"
        if self.status is None:
            # Only the run's mark is there yet.
            return "starting"
        return _str(self.status.get("state")) or "unknown"

    @property
    def current_tool(self) -> str | None:
        return None if self.ended else _str((self.status or {}).get("currentTool"))

    @property
    def outcome(self) -> str | None:
        if self.result is not None:
            return _str(self.result.get("outcome"))
        if self.gone:
            return "wrapper_killed"
        return _str((self.status or {}).get("outcome"))

    @property
    def success(self) -> bool | None:
        if self.result is not None:
            value = self.result.get("success")
            return value if isinstance(value, bool) else None
        outcome = self.outcome
        return None if outcome is None else outcome == "ok"

    @property
    def exit_status(self) -> int | None:
        """The status ``run`` exited (or would exit) with."""
        return _int((self.result or {}).get("exitStatus"))

    @property
    def started_at(self) -> float | None:
        return epoch((self.status or {}).get("startedAt")) or epoch(
            (self.result or {}).get("startedAt")
        )

    @property
    def ended_at(self) -> float | None:
        if self.result is not None:
            return epoch(self.result.get("endedAt"))
        if self.ended:
            return epoch((self.status or {}).get("updatedAt"))
        return None

    def elapsed(self, now: float) -> float | None:
        started = self.started_at
        if started is None:
            return None
        return max(0.0, (self.ended_at or now) - started)

    def _usage(self) -> Mapping[str, Any] | None:
        source = self.result if self.result is not None else self.status
        usage = (source or {}).get("usage")
        return usage if isinstance(usage, Mapping) else None

    @property
    def tokens(self) -> int | None:
        usage = self._usage()
        if usage is None:
            return None
        total = _int(usage.get("totalTokens"))
        if total is not None:
            return total
        counts = [_int(usage.get(key)) for key in ("input", "output")]
        if any(count is None for count in counts):
            return None
        return sum(count for count in counts if count is not None)

    @property
    def cost(self) -> ShownCost:
        """What the run cost: result.json's ``cost`` once it ended, the
        agent's own figure in status.json's usage while it runs."""
        return run_cost(self.result if self.result is not None else self.status)

    @property
    def cost_usd(self) -> float | None:
        return self.cost.usd

    @property
    def steers(self) -> tuple[int, int] | None:
        """Steers so far: (by Stop hooks, from outside)."""
        if self.result is not None:
            hook = _int(self.result.get("steerCount"))
            outside = _int(self.result.get("externalSteerCount"))
        else:
            counts = (self.status or {}).get("steers")
            if not isinstance(counts, Mapping):
                return None
            hook, outside = _int(counts.get("hook")), _int(counts.get("outside"))
        if hook is None or outside is None:
            return None
        return hook, outside

    def to_json(self, now: float) -> dict[str, Any]:
        """The run as ``ps --json`` lists it (every path whole)."""
        steers = self.steers
        return {
            "runDir": str(self.path.absolute()),
            "runId": self.run_id,
            "label": self.label,
            "state": self.state,
            "currentTool": self.current_tool,
            "startedAt": _str((self.status or {}).get("startedAt"))
            or _str((self.result or {}).get("startedAt")),
            "elapsedSeconds": _round(self.elapsed(now)),
            "tokens": self.tokens,
            "costUsd": self.cost.usd,
            "costSource": self.cost.source,
            "steers": None if steers is None else {"hook": steers[0], "outside": steers[1]},
            "outcome": self.outcome,
            "success": self.success,
            "exitStatus": self.exit_status,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def snapshot(
    run_dir: Path, warn: Warn | None = None, *, result_there: bool | None = None
) -> RunSnapshot:
    """What ``run_dir`` says of its run now (``result_there``: whether its
    result.json is there, when the caller has just looked)."""
    status = read_status(run_dir, warn)
    # A running run has no result yet (its final status.json write comes
    # after result.json): looking for one, and for where --result sent it,
    # would read two files a look for nothing.
    running = status is not None and status.get("state") != "finished"
    result = None
    if result_there is None:
        result_there = change_mark(run_dir / RESULT) is not None
    if not running or result_there:
        result = read_result(run_dir, status, warn)
    gone = (
        result is None
        and status is not None
        and status.get("state") != "finished"
        and not wrapper_alive(status.get("wrapperPid"))
    )
    return RunSnapshot(run_dir, status, result, gone)


# --- where runs are ------------------------------------------------------------


def runs_in(folder: Path) -> list[Path]:
    """The run directories ``folder`` stands for: itself when it is one, else
    those in it, else those one level further down (a folder of batches, of
    a spec's shards). Hidden names are passed over."""
    return scan(folder)[0]


def scan(folder: Path) -> tuple[list[Path], list[Path]]:
    """``runs_in(folder)``, and the folders whose change (a run directory
    created, or a directory becoming one) would change it: a reader that
    polls stats those and scans again only when one changed."""
    if is_run_dir(folder):
        return [folder], []
    found, below = _level(folder)
    if found:
        return found, [folder, *below]
    watched = [folder, *below]
    for child in below:
        runs, others = _level(child)
        found.extend(runs)
        watched.extend(others)
    return found, watched


def _level(folder: Path) -> tuple[list[Path], list[Path]]:
    """The run directories in ``folder``, and its other directories."""
    runs: list[Path] = []
    others: list[Path] = []
    for name in sorted(list_run_folder(folder)):
        if name.startswith("."):
            continue
        child = folder / name
        if is_run_dir(child):
            runs.append(child)
        elif child.is_dir() and not child.is_symlink():
            others.append(child)
    return runs, others


# --- events.jsonl ----------------------------------------------------------------


def _open_regular(path: Path) -> int | None:
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _object(line: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class EventTail:
    """Reads events.jsonl as it grows: each ``read`` returns the events of
    the lines completed since the last one.

    It reads only what was added (a file that shrank or was replaced, as a
    reused run directory's is, is read again from its start); a line still
    being written waits for its end; a line that is not an event is
    skipped, and so is one longer than ``WATCH_LINE_MAX_BYTES``.
    """

    def __init__(self, path: Path, *, from_end: bool = False) -> None:
        self.path = path
        self._offset = 0
        self._inode: int | None = None
        self._carry = b""
        self._skipping = False
        self._mark: tuple[int, int, int] | None = None
        if from_end:
            mark = change_mark(path)
            if mark is not None:
                self._inode, self._offset, _ = mark
                self._mark = mark

    def read(self) -> list[Stamped]:
        mark = change_mark(self.path)
        if mark is None or mark == self._mark:
            return []
        self._mark = mark
        inode, size, _ = mark
        if inode != self._inode or size < self._offset:
            self._inode, self._offset, self._carry, self._skipping = inode, 0, b"", False
        fd = _open_regular(self.path)
        if fd is None:
            return []
        events: list[Stamped] = []
        try:
            while True:
                chunk = os.pread(fd, WATCH_READ_BYTES, self._offset)
                if not chunk:
                    break
                self._offset += len(chunk)
                events.extend(self._lines(chunk))
                if len(chunk) < WATCH_READ_BYTES:
                    break
        except OSError:
            pass
        finally:
            os.close(fd)
        return events

    def _lines(self, chunk: bytes) -> Iterator[Stamped]:
        pieces = (self._carry + chunk).split(b"\n")
        self._carry = pieces.pop()
        for piece in pieces:
            if self._skipping:
                self._skipping = False
                continue
            decoded = _object(piece)
            stamped = decode_event(decoded) if decoded is not None else None
            if stamped is not None:
                yield stamped
        if len(self._carry) > WATCH_LINE_MAX_BYTES:
            self._carry, self._skipping = b"", True


#: Bytes read per step backwards.
TAIL_BLOCK_BYTES = 64 * 1024


def json_lines_backwards(path: Path | str, limit: int) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, from its last line up, within its
    last ``limit`` bytes; lines that are not JSON objects (a torn final
    write, noise) are skipped. A missing file, or one that is not a regular
    file, has none."""
    fd = _open_regular(Path(path))
    if fd is None:
        return
    try:
        for line in _lines_backwards(fd, limit):
            value = _object(line)
            if value is not None:
                yield value
    except OSError:
        return
    finally:
        os.close(fd)


def _lines_backwards(fd: int, limit: int) -> Iterator[bytes]:
    end = os.fstat(fd).st_size
    floor = max(0, end - limit)
    carry = b""
    while end > floor:
        start = max(floor, end - TAIL_BLOCK_BYTES)
        block = os.pread(fd, end - start, start) + carry
        end = start
        lines = block.split(b"\n")
        # The first piece may be the end of a line that starts further back.
        carry = lines[0] if start > floor else b""
        for line in reversed(lines if start == floor else lines[1:]):
            if line.strip():
                yield line
