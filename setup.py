"""The build step pyproject.toml cannot say: the guardian's compiled waiter.

``wrapper/process/waiter.c`` is compiled with the platform's C compiler into
``wrapper/process/_waiter`` whenever the package is built: into the wheel
(``pip install .``), or beside the source for an editable install
(``pip install -e .``, which ``scripts/setup`` makes). Where there is no
compiler, or the compile fails, the build says so in one line and goes on:
the guardian then waits with its Python waiter.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py

#: The waiter's source and program, in the package's ``wrapper.process``.
PACKAGE = "wrapper.process"
SOURCE = "waiter.c"
PROGRAM = "_waiter"
#: C99 and POSIX only (the source defines its feature level itself).
FLAGS = ("-std=c99", "-O2", "-Wall")
#: A compile takes well under a second; this only catches a hung compiler.
COMPILE_LIMIT = 120


def compiler() -> list[str]:
    """The C compiler: ``CC`` if set, else the one Python was built with, else ``cc``."""
    named = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(str(named))


def compile_waiter(source: str, program: str) -> bool:
    """Compile ``source`` into ``program``; on failure say why in one line
    (the Python waiter is used) and return False, with no ``program`` left:
    neither one an earlier build left (a build directory or a source tree is
    reused) nor one cut short."""
    _remove(program)
    command = [*compiler(), *FLAGS, "-o", program, source]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=COMPILE_LIMIT, check=False
        )
    except (OSError, subprocess.SubprocessError) as error:
        why = str(error)
    else:
        if done.returncode == 0:
            return True
        lines = (done.stderr or done.stdout).strip().splitlines()
        why = lines[0] if lines else f"exit status {done.returncode}"
    _remove(program)
    said = f"{command[0]} could not compile {source} ({why})"
    print(f"agent-wrapper: {said}; the guardian will wait in Python", file=sys.stderr)
    return False


def _remove(program: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(program)


class BuildWithWaiter(build_py):
    """build_py, then the compiled waiter beside the built package (an editable
    install: beside the source)."""

    def run(self) -> None:
        super().run()
        source_dir = os.path.abspath(self.get_package_dir(PACKAGE))
        if getattr(self, "editable_mode", False):
            target_dir = source_dir
        else:
            target_dir = os.path.join(self.build_lib, *PACKAGE.split("."))
            os.makedirs(target_dir, exist_ok=True)
        program = os.path.join(target_dir, PROGRAM)
        if compile_waiter(os.path.join(source_dir, SOURCE), program):
            self._waiter = program

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs: list[str] = super().get_outputs(include_bytecode)
        waiter = getattr(self, "_waiter", None)
        return [*outputs, waiter] if waiter else outputs


# The build backend runs this file as the main module; the tests import it.
if __name__ == "__main__":
    setup(cmdclass={"build_py": BuildWithWaiter})
