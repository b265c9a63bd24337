"""The guardian's waiting life, in a fresh interpreter with nothing imported.

``wrapper.guardian`` execs this file (``python -I -S waiter.py WORKER FD
PATH ARGV...``) in the process the runner started, once it has forked the
worker: same pid, the worker still its child, the child-subreaper flag
kept, the stop signals blocked. It passes the stop signals on to the worker
as they come, reads the run (a batch: each run) the worker announces on the
pipe FD until the worker closes it or dies, and waits for the worker. A
worker that exited is followed at once with its exit status; only a
worker that died by a signal, or left processes behind, brings in
``wrapper.guardian`` (from PATH, the original ``sys.path``) to clean up.
Only built-in modules until then: the waiting costs the least a Python
process can.

A worker whose guardian died execs this file too (``--orphaned``), to end
its runs from a clean start.
"""

import _signal  # type: ignore[import-not-found]  # signal without its enum module
import posix
import sys

#: The stop signals passed on: SIGTERM, SIGINT, SIGHUP, SIGQUIT (as in
#: ``wrapper.guardian.STOP_SIGNALS``; the signal module is not imported here).
STOP_SIGNALS = (15, 2, 1, 3)


def main(argv: list[str]) -> None:
    if argv[1] == "--orphaned":
        _orphaned(argv[2:])
    worker, announced, path = int(argv[1]), int(argv[2]), argv[3]

    def forward(signum: int, _frame: object) -> None:
        try:  # noqa: SIM105 - contextlib is not imported here
            posix.kill(worker, signum)
        except OSError:
            pass

    for signum in STOP_SIGNALS:
        _signal.signal(signum, forward)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, STOP_SIGNALS)
    announcement = b""
    try:
        while chunk := posix.read(announced, 65536):
            announcement += chunk
    except OSError:
        pass
    posix.close(announced)
    try:
        _, status = posix.waitpid(worker, 0)
    except ChildProcessError:  # cannot happen: the worker is its child
        status = 9
    _reap_the_dead()
    if posix.WIFEXITED(status) and not _has_children():
        posix._exit(posix.WEXITSTATUS(status))
    sys.path[:] = path.split(":")
    from wrapper.guardian import worker_ended  # noqa: PLC0415 - only now on the path

    worker_ended(worker, status, announcement)


def _orphaned(args: list[str]) -> None:
    """The worker exec'd this file in its own place when its guardian died:
    ``--orphaned GUARDIAN GROUP PATH [RUN_ID RUN_DIR RESULT]...`` (see
    ``wrapper.guardian.orphaned_entry``). Never returns."""
    sys.path[:] = args[2].split(":")
    from wrapper.guardian import orphaned_entry  # noqa: PLC0415 - only now on the path

    orphaned_entry(args)


def _reap_the_dead() -> None:
    """Reap what the worker left that has exited already (its status is nobody's)."""
    while True:
        try:
            pid, _ = posix.waitpid(-1, posix.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return


def _has_children() -> bool:
    try:
        with open(f"/proc/self/task/{posix.getpid()}/children", "rb") as file:
            return bool(file.read().split())
    except OSError:
        return True  # unknown: let the guardian look


if __name__ == "__main__":
    main(sys.argv)
