"""The run directory and its files.

Every write here is allowed to fail: the failure is recorded once per artifact
in ``ArtifactErrors`` and that artifact is not written again, while the run
and the other artifacts go on. Nothing here decides an outcome.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

import orjson

#: Files of a previous run that would mislead a runner if left in a reused run
#: directory: its result and status, the session the wrapper gave pi (a new run
#: would resume it), prompt files.
STALE_FILES = ("result.json", "status.json", "session.jsonl", "task.md", "prompt.md")
#: Folders of a previous run: completion signals and escalations (a stale
#: signal must not end the new run) and verifier runs.
STALE_FOLDERS = ("signals", "escalations", "hooks")

STREAM_BUFFER_BYTES = 1024 * 1024


class ArtifactErrors:
    """Artifact failures, one entry per artifact, in the order they happened."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self._seen: set[str] = set()

    def record(self, artifact: str, path: Path | None, error: BaseException) -> bool:
        """Record a failure; False if this artifact had already failed."""
        if artifact in self._seen:
            return False
        self._seen.add(artifact)
        message = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        self.entries.append(
            {"artifact": artifact, "path": str(path) if path else None, "error": message}
        )
        return True

    def failed(self, artifact: str) -> bool:
        return artifact in self._seen


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never a mix.

    ``durable`` also fsyncs the file and its directory, so the new content
    survives a crash right after the rename.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if durable:
        with contextlib.suppress(OSError):
            dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


def dump_json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"


def prepare_run_dir(run_dir: Path, runs_root: Path | None, errors: ArtifactErrors) -> bool:
    """Create the run directory and clear a previous run's results from it."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if runs_root is not None:
            ignore = runs_root.parent / ".gitignore"
            if not ignore.exists():
                ignore.write_text("*\n")
        for name in STALE_FILES:
            with contextlib.suppress(FileNotFoundError):
                (run_dir / name).unlink()
        for name in STALE_FOLDERS:
            shutil.rmtree(run_dir / name, ignore_errors=True)
    except OSError as exc:
        errors.record("run_dir", run_dir, exc)
        return False
    return True


class StreamFile:
    """An append-only artifact (a log). Buffered; writes stop after the first failure."""

    def __init__(self, name: str, path: Path, errors: ArtifactErrors, *, enabled: bool) -> None:
        self.name = name
        self.path = path
        self._errors = errors
        self._file: Any = None
        if enabled:
            try:
                self._file = open(path, "wb", buffering=STREAM_BUFFER_BYTES)  # noqa: SIM115
            except OSError as exc:
                errors.record(name, path, exc)

    @property
    def ok(self) -> bool:
        return self._file is not None

    def write(self, data: bytes | bytearray) -> None:
        if self._file is None:
            return
        try:
            self._file.write(data)
        except OSError as exc:
            self._fail(exc)

    def flush(self) -> None:
        if self._file is None:
            return
        try:
            self._file.flush()
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self._file.close()
        except OSError as exc:
            self._errors.record(self.name, self.path, exc)
        self._file = None

    def _fail(self, exc: OSError) -> None:
        self._errors.record(self.name, self.path, exc)
        file, self._file = self._file, None
        with contextlib.suppress(OSError):
            file.close()
