"""The run directory and its files.

Every write here is allowed to fail: the failure is recorded once per artifact
in ``ArtifactErrors`` and that artifact is not written again, while the run
and the other artifacts go on. Nothing here decides an outcome.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from wrapper.core.jsonout import dumps
from wrapper.core.limits import STREAM_BUFFER_BYTES
from wrapper.core.version import VERSION

#: The file that marks a directory as an agent-wrapper run directory (JSON:
#: ``runId``, ``version``), written first thing at start. Only a directory
#: holding it (or, from earlier versions, a ``config.json`` with a ``runId``)
#: is ever cleared for reuse.
RUN_MARKER = ".agent-wrapper-run"
#: What a reused run directory is cleared of: the wrapper's own files of a
#: previous run that would mislead a runner or the new run (its result and
#: status, the session the wrapper gave pi, which a new run would resume,
#: prompt files), and its own folders (completion signals, escalations,
#: verifier runs). Nothing else in the directory is touched; the logs and
#: config.json are replaced when the new run opens them.
OWN_FILES = (
    "result.json",
    "status.json",
    "session.jsonl",
    "task.md",
    "prompt.md",
    "protocol.jsonl",
)
OWN_FOLDERS = ("signals", "escalations", "hooks")

#: The largest file the wrapper reads back from a run directory (a signal, an
#: answer, status.json): each is a few hundred bytes of JSON, so anything
#: bigger is not one of them and is not worth the memory.
RUN_FILE_MAX_BYTES = 1024 * 1024
#: A run's result.json can carry long final texts and many warnings; reading
#: one back (``status``, a verifier's verdict) is allowed this much.
RESULT_MAX_BYTES = 64 * 1024 * 1024
#: The length of a temporary file's random name part (hex digits), enough
#: that nobody can plant a file at the name in advance.
TEMP_NAME_BYTES = 12
#: How many random names are tried before giving up: a collision of random
#: names means someone fills the directory on purpose, not bad luck.
TEMP_NAME_TRIES = 16


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


class UnreadableFile(Exception):
    """A file that is there but cannot be taken as one of ours; the text says why."""


def read_regular_file(path: Path, max_bytes: int, *, follow_symlinks: bool = False) -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``max_bytes``.

    The open never blocks (a FIFO nobody writes to would otherwise hang the
    caller for good) and, unless ``follow_symlinks``, does not follow a
    symlink at the last component. Raises ``FileNotFoundError`` when there is
    no such file and ``UnreadableFile`` for anything else that is wrong.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise UnreadableFile(f"{path} is a symlink, not a file") from None
        raise UnreadableFile(f"{path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(f"{path} is not a regular file")
        if info.st_size > max_bytes:
            raise UnreadableFile(f"{path} is larger than {max_bytes} bytes")
        chunks = []
        total = 0
        # One byte more than allowed tells a file that grew past the limit
        # after the fstat from one that did not.
        while total <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise UnreadableFile(f"{path} is larger than {max_bytes} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise UnreadableFile(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_run_file(path: Path, max_bytes: int = RUN_FILE_MAX_BYTES) -> bytes | None:
    """A file the wrapper left in a run directory (or expects there), read safely.

    None when it does not exist. A symlink, a FIFO, a device, a directory or
    a file over ``max_bytes`` raises ``UnreadableFile``: anything with write
    access to the run directory (the agent) can put those there.
    """
    try:
        return read_regular_file(path, max_bytes)
    except FileNotFoundError:
        return None


def list_run_folder(folder: Path) -> list[str]:
    """The names in a folder of a run directory; empty when it is missing,
    not a directory, or a symlink (never followed to somewhere else)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        return os.listdir(fd)
    except OSError:
        return []
    finally:
        os.close(fd)


def _create_temp(path: Path) -> tuple[Path, int]:
    """A new file next to ``path`` with a name nobody could predict, created
    exclusively: a file or symlink planted in advance makes this fail
    instead of redirecting the write."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(TEMP_NAME_TRIES - 1):
        tmp = path.with_name(f".{path.name}.{os.urandom(TEMP_NAME_BYTES).hex()}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o644)
        except FileExistsError:
            continue
    tmp = path.with_name(f".{path.name}.{os.urandom(TEMP_NAME_BYTES).hex()}.tmp")
    return tmp, os.open(tmp, flags, 0o644)


def _write_all(fd: int, data: bytes, *, durable: bool) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never a mix.

    The data goes to a temporary file created exclusively under a random
    name, then renamed over ``path`` (a symlink at ``path`` is replaced, not
    followed). ``durable`` also fsyncs the file and its directory, so the new
    content survives a crash right after the rename.
    """
    tmp, fd = _create_temp(path)
    try:
        _write_all(fd, data, durable=durable)
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


def write_new(path: Path, data: bytes) -> bool:
    """Create ``path`` whole with ``data`` unless something is already there;
    True when this call created it (the first writer wins)."""
    tmp, fd = _create_temp(path)
    try:
        _write_all(fd, data, durable=False)
        os.link(tmp, path, follow_symlinks=False)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return True


def ensure_dir(path: Path) -> None:
    """Create ``path`` and its parents; an existing non-directory on the way
    raises ``NotADirectoryError`` naming it (mkdir alone says "File exists")."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), path)
        raise NotADirectoryError(
            errno.ENOTDIR, f"{blocker} is not a directory", str(blocker)
        ) from None


def dump_json(value: Any) -> bytes:
    return dumps(value, option=orjson.OPT_INDENT_2) + b"\n"


def marked_run_id(run_dir: Path) -> str | None:
    """The run id of the run that last used ``run_dir``: from its marker, or
    from the config.json of a run made before there were markers."""
    for name in (RUN_MARKER, "config.json"):
        try:
            data = orjson.loads(read_run_file(run_dir / name, RESULT_MAX_BYTES) or b"null")
        except (UnreadableFile, orjson.JSONDecodeError):
            continue
        run_id = data.get("runId") if isinstance(data, dict) else None
        if isinstance(run_id, str) and run_id:
            return run_id
    return None


def run_dir_problem(run_dir: Path) -> str | None:
    """Why ``run_dir`` cannot be used for a run (it is a non-empty directory
    that holds no agent-wrapper run), or None: a new or empty directory, or
    one a previous run used. A path that is not a directory is left to the
    run, which records it and writes result.json elsewhere."""
    try:
        entries = os.listdir(run_dir)
    except OSError:
        return None
    if not entries or marked_run_id(run_dir) is not None:
        return None
    return (
        f"{run_dir} is not empty and holds no agent-wrapper run; "
        "choose an empty or new directory (or remove it)"
    )


def prepare_run_dir(
    run_dir: Path, runs_root: Path | None, errors: ArtifactErrors, run_id: str | None = None
) -> bool:
    """Create the run directory, mark it as this run's, and clear a previous
    run's own files from it (only when a previous run is recognised there:
    what the wrapper did not create is never deleted)."""
    try:
        ensure_dir(run_dir)
        if runs_root is not None:
            # Created exclusively: a symlink planted at the name (the root
            # sits in the agent's working tree) is left alone, not written through.
            write_new(runs_root.parent / ".gitignore", b"*\n")
        if marked_run_id(run_dir) is not None:
            for name in OWN_FILES:
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    (run_dir / name).unlink()
            for name in OWN_FOLDERS:
                folder = run_dir / name
                if folder.is_symlink():
                    with contextlib.suppress(OSError):
                        folder.unlink()
                else:
                    shutil.rmtree(folder, ignore_errors=True)
        if run_id is not None:
            marker = {"runId": run_id, "version": VERSION}
            atomic_write(run_dir / RUN_MARKER, dump_json(marker), durable=False)
    except OSError as exc:
        errors.record("run_dir", run_dir, exc)
        return False
    return True


class StreamFile:
    """An append-only artifact (a log). Buffered; writes stop after the first failure.

    ``held`` says that something written is not yet flushed to the file;
    ``on_held`` is told when that becomes so (once per flush, not per write),
    so that whoever keeps the log current for its readers needs no timer
    while nothing is written.
    """

    def __init__(self, name: str, path: Path, errors: ArtifactErrors, *, enabled: bool) -> None:
        self.name = name
        self.path = path
        self._errors = errors
        self._file: Any = None
        self.held = False
        self.on_held: Callable[[], None] | None = None
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
            return
        if not self.held:
            self.held = True
            if self.on_held is not None:
                self.on_held()

    def flush(self) -> None:
        if self._file is None:
            return
        self.held = False
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
