"""Starting the agent, with nothing but the standard library.

The agent is started with plain ``subprocess`` (its own session and process
group, stdin from ``/dev/null``), so that the command line can start it
before the wrapper has imported trio: the agent's own start-up then overlaps
the wrapper's (``wrapper.supervision.early``). The supervisor watches it through
``Child``, which imports trio only when it is first used, for the same
reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import termios
from collections.abc import Mapping, Sequence
from pathlib import Path

from wrapper.core.limits import EXIT_POLL, PIPE_BUFFER_BYTES
from wrapper.process import proctree

# The annotations need these only when checked.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import trio


def spawn(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, *, stdin_pipe: bool = False
) -> subprocess.Popen[bytes]:
    """Start the agent; raises ``OSError`` when it cannot be started. Its
    stdin is /dev/null, or with ``stdin_pipe`` a pipe from the wrapper (an
    agent driven over a protocol, ACP)."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=dict(env),
        cwd=cwd,
    )
    # Its exit status is the supervisor's to collect, not the orphan reaper's.
    proctree.WAITED.add(proc.pid)
    return proc


def spawn_error(argv: Sequence[str], exc: OSError) -> str:
    """Why ``argv`` could not be started, in words a person can act on."""
    name = argv[0]
    if isinstance(exc, FileNotFoundError) and os.sep not in name:
        # A bare name was looked up on PATH: "No such file" would point at a file.
        return f"{name}: not found on PATH (install it, or give its path)"
    return f"{name}: {exc.strerror or exc}"


__all__ = ["Child", "spawn", "spawn_error", "unread_bytes", "widen_pipe"]


class Child:
    """A started agent as trio sees it: ``pid``, ``stdout``/``stderr`` streams,
    ``returncode`` and ``await wait()``."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin = self._stream(popen.stdin) if popen.stdin is not None else None
        self.stdout = self._stream(popen.stdout)
        self.stderr = self._stream(popen.stderr)
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self._pidfd = os.pidfd_open(popen.pid)

    def _stream(self, file: Any) -> trio.lowlevel.FdStream:
        import trio  # noqa: PLC0415 - see the module's docstring

        fd = os.dup(file.fileno())
        file.close()
        return trio.lowlevel.FdStream(fd)

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        """Wait for the child's exit and reap it (by its pid only)."""
        import trio  # noqa: PLC0415 - see the module's docstring

        if self._popen.returncode is None:
            if self._pidfd is not None:
                await trio.lowlevel.wait_readable(self._pidfd)
            else:
                while self._popen.poll() is None:
                    await trio.sleep(EXIT_POLL)
            self._popen.wait()
        proctree.WAITED.discard(self.pid)
        self._close_pidfd()
        return self._popen.returncode

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def unread_bytes(stream: object) -> int:
    """How many bytes wait in the pipe behind ``stream`` (0 where unknown)."""
    fileno = getattr(stream, "fileno", None)
    if fileno is None:
        return 0
    try:
        buf = fcntl.ioctl(fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int.from_bytes(buf, sys.byteorder)


def widen_pipe(stream: object) -> None:
    """Ask for a larger pipe buffer: fewer, larger reads for a chatty agent
    (Linux; the default is 64 KiB; the size is only a hint)."""
    setter = getattr(fcntl, "F_SETPIPE_SZ", None)
    fileno = getattr(stream, "fileno", None)
    if setter is not None and fileno is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fileno(), setter, PIPE_BUFFER_BYTES)
