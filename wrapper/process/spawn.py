"""Starting the agent, with nothing but the standard library.

The agent is started with plain ``subprocess`` (its own session and process
group, stdin from ``/dev/null``), so that the command line can start it
before the wrapper has imported trio: the agent's own start-up then overlaps
the wrapper's (``early_start``). The supervisor watches it through
``Child``, which imports trio only when it is first used, for the same
reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wrapper.core.config import RunConfig, child_depth, child_env
from wrapper.files.artifacts import ArtifactErrors, atomic_write, dump_json, prepare_run_dir
from wrapper.process import proctree
from wrapper.process.guardian import wrapper_pid

# The annotations need these only when checked.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import trio

#: How often a child is polled for its exit where there are no pidfds.
EXIT_POLL = 0.02


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


__all__ = ["Child", "EarlyStart", "early_start", "spawn", "spawn_error"]


@dataclass(slots=True)
class EarlyStart:
    """What the command line did before the run proper: the run directory
    prepared, the agent started, and the stop signals that arrived meanwhile
    (recorded, to be acted on once the run is up)."""

    errors: ArtifactErrors
    dir_ok: bool
    started: subprocess.Popen[bytes] | OSError
    signals: list[signal.Signals] = field(default_factory=list)
    #: When the run began (wall clock), for result.json and status.json.
    started_at: float = field(default_factory=time.time)


def early_start(
    config: RunConfig,
    launch_argv: Sequence[str],
    files: Mapping[Path, str],
    environ: Mapping[str, str],
    early_signals: list[signal.Signals],
) -> EarlyStart | None:
    """Start the agent before the wrapper imports its heavy parts, when nothing
    has to happen first (a refusal for nesting depth, prompt hooks that may
    change or refuse the task). None when the run must start the usual way.
    ``early_signals`` holds the stop signals received so far, and those to come
    until the run is up (``guardian.record_stop_signals``)."""
    settings = config.settings
    if (
        child_depth(environ) > config.max_depth
        or settings.handlers("UserPromptSubmit")
        or (config.subagent and settings.handlers("SubagentStart"))
    ):
        return None
    started_at = time.time()
    errors = ArtifactErrors()
    dir_ok = prepare_run_dir(config.run_dir, config.runs_root, errors, config.run_id)
    if dir_ok:
        # Runners polling status.json see the run from its first moment; the
        # run proper takes the file over once it is up. config.json tells the
        # guardian what the run was, should the wrapper die before it is up.
        status = config.starting_status(started_at, wrapper_pid())
        with contextlib.suppress(OSError):
            atomic_write(config.run_dir / "status.json", dump_json(status), durable=False)
            atomic_write(config.run_dir / "config.json", dump_json(config.to_json()), durable=False)
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text.encode(), durable=False)
    except OSError:
        return None  # the run proper reports it
    started: subprocess.Popen[bytes] | OSError
    try:
        started = spawn(launch_argv, child_env(config, 1, environ), config.cwd)
    except OSError as exc:
        started = exc
    return EarlyStart(errors, dir_ok, started, early_signals, started_at)


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
