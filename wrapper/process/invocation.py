"""How this very wrapper is started again: by a hook's verifier agent, and
in the commands shown to the agent or a person (``signal``, ``reply``)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def _package_root() -> str:
    """What holds the ``wrapper`` package: a directory on the path, or an
    archive (a zipapp). This module's depth in the package is read from its
    name, so that it stays right wherever the module sits."""
    where = os.path.abspath(__file__)
    for _ in range(__name__.count(".") + 1):
        where = os.path.dirname(where)
    return where


#: Made absolute now, while the current directory is the one a relative path meant.
_PACKAGE_ROOT = _package_root()
#: What this process was started as (the archive, for a zipapp).
_STARTED_AS = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""


def wrapper_argv() -> list[str]:
    """How to start this very wrapper again, as an argument list: ``python
    ARCHIVE`` when it runs from a zipapp (``-m wrapper`` would find no package
    on that Python's own path), else ``python -m wrapper``."""
    if _STARTED_AS == _PACKAGE_ROOT and os.path.isfile(_PACKAGE_ROOT):
        return [sys.executable, _PACKAGE_ROOT]
    return [sys.executable, "-m", "wrapper"]


#: Where a run keeps the launcher it writes when this wrapper is no single
#: executable, relative to its run directory.
LAUNCHER = Path("bin") / "agent-wrapper"


def wrapper_executable() -> str | None:
    """One absolute path a shell can run that starts this very wrapper, or
    None: the console script beside the interpreter of a package run. A
    zipapp is not one even when it has an interpreter line: that line may
    name a Python without the wrapper's dependencies."""
    if wrapper_argv()[1:] != ["-m", "wrapper"]:
        return None
    script = Path(sys.executable).with_name("agent-wrapper")
    return str(script) if script.is_file() and os.access(script, os.X_OK) else None


def launcher_script() -> str:
    """A shell script that starts this very wrapper with its arguments, for
    when there is no single executable to name. The package is found where
    this process found it, whatever directory the script is run from."""
    argv = wrapper_argv()
    lines = ["#!/bin/sh"]
    if argv[1:] == ["-m", "wrapper"]:
        root = shlex.quote(_PACKAGE_ROOT)
        lines += [f'PYTHONPATH={root}${{PYTHONPATH:+:"$PYTHONPATH"}}', "export PYTHONPATH"]
    lines.append(f'exec {shlex.join(argv)} "$@"')
    return "\n".join(lines) + "\n"


def run_command(wrapper_bin: str | None) -> str:
    """How the agent (or a person) runs the wrapper of a run whose
    ``AGENT_WRAPPER_BIN`` is ``wrapper_bin``, as a shell word: that, which
    works from any directory, else ``wrapper_command()``."""
    return shlex.quote(wrapper_bin) if wrapper_bin else wrapper_command()


def wrapper_command() -> str:
    """How the agent (or a person) runs this very wrapper, as a shell word list."""
    executable = wrapper_executable()
    return shlex.quote(executable) if executable is not None else shlex.join(wrapper_argv())
