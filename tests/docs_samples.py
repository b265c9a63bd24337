"""The shell sessions the documents show, run for real.

A session is a fenced block right after a line ``<!-- doc-run: NAME -->``
in README.md or a page under docs/: lines starting with ``$ `` are commands
(a line ending in a backslash goes on on the next one), the lines after a
command are what it printed. Each session runs in a fresh temporary folder
that holds links to the repository's ``.venv``, ``wrapper``, ``fixtures``,
``scripts``, ``examples`` and ``pyproject.toml``, so that its commands read
as they would at the repository's root and leave nothing there (a path
under ``/tmp/`` in a command is taken in the session's own folder); one bash
runs the commands in turn (``echo $?`` sees the previous command's status),
stderr merged into stdout, stdin from ``/dev/null``.

``python -m tests.docs_samples`` (``scripts/docs-samples``) rewrites each
session's output from a run, and remakes the picture of the report
(``tests.report_picture``); ``--check`` only compares, as the test does:
two outputs are the same when they differ only in what changes from run to
run (times, durations, pids, run ids); the temporary folder is shown as
``SHOWN_FOLDER``, as the absolute path a reader's own run would print.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: What a session's folder links to, by the same name.
LINKED = (".venv", "wrapper", "fixtures", "scripts", "examples", "pyproject.toml", "setup.py")

#: What the documents show for the session's folder: the program prints
#: absolute paths, and so do the documents, under a folder a reader has.
SHOWN_FOLDER = "/home/you/project"

#: A whole session may take this long; only there to catch a hang.
SESSION_LIMIT = 120.0

_SESSION = re.compile(
    r"<!-- doc-run: (?P<name>[^>]+?) -->\n```(?P<lang>[a-z]*)\n(?P<body>.*?)```", re.S
)
#: Printed between two commands' outputs; no command prints it.
_SEPARATOR = "\x1edoc-run\x1e"


@dataclass(frozen=True)
class Session:
    name: str
    path: Path
    #: Each command (continuation lines joined as written) and its output.
    steps: tuple[tuple[str, str], ...]

    @property
    def commands(self) -> list[str]:
        return [command for command, _ in self.steps]


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parse(body: str) -> tuple[tuple[str, str], ...]:
    steps: list[tuple[str, str]] = []
    command: list[str] = []
    output: list[str] = []
    continued = False
    for line in body.splitlines():
        if continued:
            command.append(line)
            continued = line.endswith("\\")
        elif line.startswith("$ "):
            if command:
                steps.append(("\n".join(command), "".join(output)))
            command, output = [line[2:]], []
            continued = line.endswith("\\")
        else:
            output.append(line + "\n")
    if command:
        steps.append(("\n".join(command), "".join(output)))
    return tuple(steps)


def sessions() -> Iterator[Session]:
    for path in documents():
        for match in _SESSION.finditer(path.read_text()):
            yield Session(match["name"], path, parse(match["body"]))


def run(session: Session) -> list[str]:
    """What each command of ``session`` prints, run now."""
    _set_up()
    with tempfile.TemporaryDirectory(prefix="doc-run-") as folder:
        here = Path(folder)
        for name in LINKED:
            (here / name).symlink_to(ROOT / name)
        (here / "tmp").mkdir()
        # After each command: the separator, then its status again for the next one.
        after = f"__status=$?; printf '{_SEPARATOR}\\n'; (exit $__status)\n"
        script = "".join(f"{_in_folder(command, here)}\n{after}" for command in session.commands)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_WRAPPER_")}
        env |= {"FAKE_AGENT_HOME": str(here / "agent-home"), "NO_COLOR": "1"}
        env.pop("FAKE_AGENT_RECORD", None)
        proc = subprocess.run(
            ["bash", "-c", script],
            cwd=here,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=SESSION_LIMIT,
            check=False,
        )
        printed = proc.stdout.replace(f"{folder}/tmp/", "/tmp/").replace(folder, SHOWN_FOLDER)
        # The wrapper names itself by its absolute path (the live view's
        # command to steer the run): the repository's, where the reader's
        # own folder would be.
        printed = printed.replace(str(ROOT), SHOWN_FOLDER)
        outputs = printed.split(_SEPARATOR + "\n")
    return [o if o.endswith("\n") or not o else o + "\n" for o in outputs[: len(session.commands)]]


@cache
def _set_up() -> None:
    """Made current here first, the set-up that a session's scripts/demo runs
    finds nothing to install: installed from the session's folder, the
    package would point into a folder about to be removed. Once a process
    is enough: the sessions do not change what it installs."""
    subprocess.run([ROOT / "scripts" / "setup"], check=True, stdin=subprocess.DEVNULL)


def _in_folder(command: str, folder: Path) -> str:
    """``command`` with its paths under ``/tmp/`` moved into ``folder``."""
    return re.sub(r"(?<=[\s(\"'=])/tmp/", f"{folder}/tmp/", command)


#: What changes from one run to the next, and what stands for it.
_VARYING = (
    (re.compile(r"\d{8}T\d{6}Z-[0-9a-f]+"), "RUN_ID"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"), "TIME"),
    (re.compile(r"\b\d+(\.\d+)?s\b"), "Ns"),
    (re.compile(r"(pid\"?:? ?)\d+"), r"\1PID"),
    (re.compile(r"(\"pids\": ?\[)[\d, ]+"), r"\1PIDS"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "UUID"),
    (re.compile(r"(\"durationMs\": )\d+"), r"\1N"),
)


#: The live view's line for a tool's end, shown only when the tool took a
#: second or more as the wrapper measured it: a tool the fake agent runs for
#: exactly a second may fall either side of that on a loaded machine.
_TIMED_LINE = re.compile(r"^  ✓ .* done · [\d.]+s\n", re.M)
#: The settle grace's line, shown only when the agent's last line is read
#: before its exit is seen: an agent that exits right after it may be seen
#: gone first (then its exit ends the run, and there is no grace to show).
_SETTLED_LINE = re.compile(
    r"^  · the agent says it is done: waiting [\d.]+s for it to exit\n", re.M
)


def normalized(output: str) -> str:
    output = _SETTLED_LINE.sub("", _TIMED_LINE.sub("", output))
    for pattern, replacement in _VARYING:
        output = pattern.sub(replacement, output)
    return output


def rendered(steps: tuple[tuple[str, str], ...]) -> str:
    return "".join(
        "$ " + command + "\n" + (output if output.endswith("\n") or not output else output + "\n")
        for command, output in steps
    )


def rewrite(path: Path) -> int:
    """Run every session of ``path`` and write what it printed; the number of sessions."""
    text = path.read_text()
    count = 0

    def one(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        session = Session(match["name"], path, parse(match["body"]))
        outputs = run(session)
        body = rendered(tuple(zip(session.commands, outputs, strict=True)))
        return f"<!-- doc-run: {match['name']} -->\n```{match['lang']}\n{body}```"

    path.write_text(_SESSION.sub(one, text))
    return count


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        stale = []
        for session in sessions():
            now = run(session)
            shown = [output for _, output in session.steps]
            if [normalized(o) for o in now] != [normalized(o) for o in shown]:
                stale.append(f"{session.path.relative_to(ROOT)}: {session.name}")
        for line in stale:
            print(f"docs-samples: output differs from a run now: {line}", file=sys.stderr)
        return 1 if stale else 0
    if argv:
        print("usage: scripts/docs-samples [--check]", file=sys.stderr)
        return 2
    for path in documents():
        if count := rewrite(path):
            print(f"{path.relative_to(ROOT)}: {count} session(s) rewritten")
    return _remake_picture()


def _remake_picture() -> int:
    """docs/report.png, the picture of the report of today's demo batch."""
    from tests import browser, report_picture

    if not any(shutil.which(name) for name in browser.BINARIES):
        print(
            f"docs-samples: NO HEADLESS BROWSER, {report_picture.PICTURE.relative_to(ROOT)} "
            f"not remade (apt-get install -y {browser.PACKAGE})",
            file=sys.stderr,
        )
        return 1
    report_picture.make()
    print(f"{report_picture.PICTURE.relative_to(ROOT)}: remade")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
