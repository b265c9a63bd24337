"""Where a run's control socket lives, and finding it from outside.

The socket goes in the run directory (``control.sock``) unless that path is
too long for a socket; then it goes in a directory of the user's own under
the runtime directory (``$XDG_RUNTIME_DIR/agent-wrapper``, else
``/tmp/agent-wrapper-UID``, mode 0700), and status.json's ``control`` is the
pointer to it. The socket itself is mode 0600: whoever can open it can
steer and abort the run, which is the run's user (and root). The run
directory is no security boundary: the agent, running as that user, can
write it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from wrapper.core.control import socket_path


class NoSocket(Exception):
    """No socket can be made for the run; the text says why."""


def runtime_dir(environ: Mapping[str, str]) -> str:
    """The user's own directory for sockets whose run directory is too deep."""
    xdg = environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "agent-wrapper")
    return f"/tmp/agent-wrapper-{os.getuid()}"


def prepare(run_dir: Path, run_id: str, environ: Mapping[str, str]) -> str:
    """The path to bind the run's socket to, its directory made and checked,
    a stale socket at it (a killed run's, in a reused run directory)
    removed. Raises ``NoSocket``."""
    path = socket_path(str(run_dir), run_id, runtime_dir(environ))
    folder = os.path.dirname(path)
    if folder != str(run_dir):
        _own_private_dir(folder)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise NoSocket(f"cannot look at {path}: {exc.strerror}") from None
    if not stat.S_ISSOCK(info.st_mode):
        raise NoSocket(f"{path} exists and is not a socket; it was left as it is")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return path


def _own_private_dir(folder: str) -> None:
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        raise NoSocket(f"cannot make {folder}: {exc.strerror}") from None
    if (
        not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.getuid()
        or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    ):
        raise NoSocket(f"{folder} is not a private directory of this user's; no socket made there")


def remove(path: str, inode: int | None) -> None:
    """Remove the run's socket, if it is still the one the run made."""
    with contextlib.suppress(OSError):
        if inode is None or os.lstat(path).st_ino == inode:
            os.unlink(path)


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
