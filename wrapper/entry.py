"""The ``agent-wrapper`` command (and ``python -m wrapper``).

The one entry point. For a run, the guardian forks off first thing, with
nothing imported yet that the worker would copy (see
``wrapper.process.guardian.fork_for_run``); then the modules a run never uses are
deferred, the command line runs, and the process ends without the
interpreter's teardown.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Run the command line in this process and exit with its status.

    Everything the wrapper writes is closed by the time ``cli.main`` returns,
    so the interpreter's teardown (some 50 ms of freeing what is about to
    vanish anyway) is skipped: the runner waiting on the wrapper gets its exit
    status sooner. Library callers use ``wrapper.cli.main``.
    """
    _hold_standard_streams()
    # Imported here, not at the top: the guardian forks before anything
    # heavier than the guardian module is loaded, so the worker copies nothing.
    from wrapper.process.guardian import fork_for_run  # noqa: PLC0415

    fork_for_run()
    from wrapper.deferral import defer_unused_imports  # noqa: PLC0415

    # Before the command line imports pathlib, and the run trio.
    defer_unused_imports()
    from wrapper.cli import main as command_line  # noqa: PLC0415

    status = command_line()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _hold_standard_streams() -> None:
    """Open /dev/null on each of stdin, stdout and stderr that the runner left
    closed. Otherwise the guardian's pipe, or a file of the run, would take
    its number and be written to as the output, and a write to the missing
    stream would fail the run's exit status: the run's output goes nowhere,
    as the runner asked."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            opened = os.open(os.devnull, os.O_RDWR)
        except OSError:
            return
        if opened != fd:
            os.dup2(opened, fd)
            os.close(opened)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))  # noqa: SIM115
