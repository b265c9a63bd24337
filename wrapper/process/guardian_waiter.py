"""The guardian's waiting life, in a fresh interpreter with nothing imported.

``wrapper.process.guardian`` starts this module (``python -I -S -c BOOTSTRAP
PACKAGE_DIR IMPORTS WORKER FD ARGV...``, see ``waiter_command``) in the
process the runner started, once it has forked the worker: same pid, the
worker still its child, the child-subreaper flag kept, the stop signals
blocked. It passes the stop signals on to the worker as they come, reads
the run (a batch: each run) the worker announces on the pipe FD until the
worker closes it or dies, and waits for the worker. A worker that exited
is followed at once with its exit status; only a worker that died by a
signal, or left processes behind, brings in ``wrapper.process.guardian`` to clean
up, imported the way the launching process imported it (IMPORTS). Only
built-in modules until then: the waiting costs the least a Python process
can.

The compiled waiter (``wrapper/process/waiter.c``), where it was built,
does the waiting instead and starts this module only to clean up (``IMPORTS
--waited WORKER STATUS FD ARGV...``): the worker already waited for (its
wait status STATUS), what it announced to be read from FD.

A worker whose guardian died starts this module too (``IMPORTS --orphaned
...``), in its own place, to end its runs from a clean start.

IMPORTS is ``N PATH_1 ... PATH_N M NAME_1 ROOT_1 ... NAME_M ROOT_M``: the
launching process's ``sys.path``, and the directory each package the
cleanup needs was found in. Each is its own argument, so that any path
goes through as it is.
"""

import _signal  # type: ignore[import-not-found]  # signal without its enum module
import posix
import sys

#: The stop signals passed on: SIGTERM, SIGINT, SIGHUP, SIGQUIT (as in
#: ``wrapper.core.signals.STOP_SIGNALS``; the signal module is not imported here).
STOP_SIGNALS = (15, 2, 1, 3)
#: The first argument after IMPORTS when the compiled waiter did the waiting.
WAITED = "--waited"


def main(argv: list[str]) -> None:
    """``argv``: ``PACKAGE_DIR IMPORTS WORKER FD ARGV...``, ``PACKAGE_DIR
    IMPORTS --waited WORKER STATUS FD ARGV...`` or ``PACKAGE_DIR IMPORTS
    --orphaned ...``."""
    path, roots, args = _take_imports(argv[1:])
    if args[0] == "--orphaned":
        _orphaned(path, roots, args[1:])
    if args[0] == WAITED:
        _waited(path, roots, args[1:])
    worker, announced = int(args[0]), int(args[1])

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
    _import_as_launched(path, roots)
    from wrapper.process.guardian import worker_ended  # noqa: PLC0415 - only now importable

    worker_ended(worker, status, announcement)


def _waited(path: list[str], roots: dict[str, str], args: list[str]) -> None:
    """The compiled waiter waited for the worker and hands over the cleanup:
    ``--waited WORKER STATUS FD ARGV...``, FD holding the announcement (see
    ``wrapper/process/waiter.c``). Never returns."""
    worker, status, handed = int(args[0]), int(args[1]), int(args[2])
    announcement = b""
    try:
        while chunk := posix.read(handed, 65536):
            announcement += chunk
    except OSError:  # none could be handed over: the runs are not known
        pass
    try:  # noqa: SIM105 - contextlib is not imported here
        posix.close(handed)
    except OSError:
        pass
    _import_as_launched(path, roots)
    from wrapper.process.guardian import worker_ended  # noqa: PLC0415 - only now importable

    worker_ended(worker, status, announcement)


def _orphaned(path: list[str], roots: dict[str, str], args: list[str]) -> None:
    """The worker started this module in its own place when its guardian died:
    ``--orphaned GUARDIAN GROUP [RUN_ID RUN_DIR RESULT]...`` (see
    ``wrapper.process.guardian.orphaned_entry``). Never returns."""
    _import_as_launched(path, roots)
    from wrapper.process.guardian import orphaned_entry  # noqa: PLC0415 - only now importable

    orphaned_entry(args)


def _take_imports(args: list[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """IMPORTS off the front of ``args``: the path, the roots by package name,
    and the arguments that follow."""
    end = 1 + int(args[0])
    path = args[1:end]
    pairs = args[end + 1 : end + 1 + 2 * int(args[end])]
    return path, dict(zip(pairs[::2], pairs[1::2], strict=True)), args[end + 1 + len(pairs) :]


def _import_as_launched(path: list[str], roots: dict[str, str]) -> None:
    """Import from now on as the launching process did: each package of
    ``roots`` from the very directory it was found in there (also when an
    import hook that -S left out found it, or a same-named package comes
    earlier on the path), everything else from ``path``."""
    sys.path[:] = path
    from importlib.machinery import ModuleSpec, PathFinder  # noqa: PLC0415 - only to clean up

    class Roots:
        def find_spec(
            self, name: str, _search: object = None, _target: object = None
        ) -> ModuleSpec | None:
            root = roots.get(name)
            return None if root is None else PathFinder.find_spec(name, [root])

    sys.meta_path.insert(0, Roots())


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
