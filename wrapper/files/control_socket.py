"""Where a run's control socket lives, and finding it from outside.

The socket goes in the run directory (``control.sock``) unless that path is
too long for a socket; then it goes in a directory made for the run alone
(``agent-wrapper-XXXXXXXX`` under ``$XDG_RUNTIME_DIR``, else the temporary
directory): made fresh with a name nobody could guess, mode 0700, never one
that already existed, so that another user who makes a directory first
cannot take the run's socket away. status.json's ``control`` is the pointer
to it, and the directory goes with the socket at the run's end. The socket
itself is mode 0600: whoever can open it can steer and abort the run, which
is the run's user (and root). The run directory is no security boundary:
the agent, running as that user, can write it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wrapper.core.control import (
    PRIVATE_DIR_PREFIX,
    PRIVATE_DIR_RANDOM_CHARS,
    SOCKET_NAME,
    fits_socket,
)


class NoSocket(Exception):
    """No socket can be made for the run; the text says why."""


@dataclass(frozen=True, slots=True)
class Place:
    """Where the run's socket is bound: ``path``, and ``private_dir``, the
    directory made for it alone (None: it is in the run directory)."""

    path: str
    private_dir: str | None = None


def private_parents(environ: Mapping[str, str]) -> list[str]:
    """Where a directory for the socket may be made, in order: the user's
    runtime directory, the temporary directory, ``/tmp``."""
    found: list[str] = []
    xdg = environ.get("XDG_RUNTIME_DIR")
    for parent in (xdg, environ.get("TMPDIR"), tempfile.gettempdir(), "/tmp"):
        if parent and os.path.isabs(parent) and parent not in found:
            found.append(parent)
    return found


def prepare(run_dir: Path, environ: Mapping[str, str]) -> Place:
    """Where to bind the run's socket: in ``run_dir``, a stale socket at it
    (a killed run's, in a reused run directory) removed; else, when that
    path is too long, in a private directory made now. Raises ``NoSocket``."""
    inside = os.path.join(str(run_dir), SOCKET_NAME)
    if fits_socket(inside):
        _clear_stale(inside)
        return Place(inside)
    folder = _make_private_dir(private_parents(environ))
    return Place(os.path.join(folder, SOCKET_NAME), folder)


def _clear_stale(path: str) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise NoSocket(f"cannot look at {path}: {exc.strerror}") from None
    if not stat.S_ISSOCK(info.st_mode):
        raise NoSocket(f"{path} exists and is not a socket; it was left as it is")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _make_private_dir(parents: list[str]) -> str:
    """A directory made now for this run's socket alone, mode 0700, in the
    first of ``parents`` where its socket path is short enough and one can
    be made. ``mkdtemp`` makes it with a random name and fails rather than
    take one that exists: nothing made before, by anyone, is ever used."""
    # the random part of the name, a separator and the socket's name
    tail = PRIVATE_DIR_RANDOM_CHARS + 1 + len(SOCKET_NAME)
    failures: list[str] = []
    for parent in parents:
        if not fits_socket(os.path.join(parent, PRIVATE_DIR_PREFIX + "x" * tail)):
            failures.append(f"{parent}: too long a path for a socket")
            continue
        try:
            folder = tempfile.mkdtemp(prefix=PRIVATE_DIR_PREFIX, dir=parent)
        except OSError as exc:
            failures.append(f"{parent}: {exc.strerror or exc}")
            continue
        problem = _not_private(folder)
        if problem is None:
            return folder
        failures.append(problem)
    raise NoSocket(
        "the run directory's path is too long for a socket, and no private directory "
        f"could be made for one ({'; '.join(failures)}); set XDG_RUNTIME_DIR or TMPDIR "
        "to a short directory of your own, or use a shorter --run-dir"
    )


def _not_private(folder: str) -> str | None:
    """Why ``folder`` is not a directory of this user's that only they can
    enter, or None."""
    try:
        info = os.lstat(folder)
    except OSError as exc:
        return f"cannot look at {folder}: {exc.strerror}"
    if (
        not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.getuid()
        or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    ):
        return f"{folder} is not a private directory of this user's"
    return None


def remove(place: Place, inode: int | None) -> None:
    """Remove the run's socket, if it is still the one the run made
    (``inode``; None: it made none), and the directory made for it (only if
    nothing else is in it)."""
    with contextlib.suppress(OSError):
        if inode is not None and os.lstat(place.path).st_ino == inode:
            os.unlink(place.path)
    if place.private_dir is not None:
        with contextlib.suppress(OSError):
            os.rmdir(place.private_dir)


def remove_left(path: object) -> None:
    """Remove what a run whose wrapper died left of its socket in a private
    directory (status.json's ``control``): the socket, if it is one of this
    user's, and the directory made for it."""
    if not isinstance(path, str) or not os.path.isabs(path):
        return
    folder = os.path.dirname(path)
    if not os.path.basename(folder).startswith(PRIVATE_DIR_PREFIX) or _not_private(folder):
        return
    if os.path.basename(path) == SOCKET_NAME and check_socket(path) is None:
        with contextlib.suppress(OSError):
            os.unlink(path)
    with contextlib.suppress(OSError):
        os.rmdir(folder)


def check_socket(path: str) -> str | None:
    """Why ``path`` is not a socket of this user's to send a steer to, or None."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return f"{path} is gone"
    except OSError as exc:
        return f"cannot look at {path}: {exc.strerror}"
    if not stat.S_ISSOCK(info.st_mode):
        return f"{path} is not a socket"
    if info.st_uid != os.getuid():
        return f"{path} belongs to another user"
    return None
