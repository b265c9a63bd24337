"""Reading settings files, and checking what they name against the files
and programs of the machine the run is on. The settings themselves, and
how several files merge, are ``wrapper.core.settings``."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from wrapper.core.mcp_servers import STDIO
from wrapper.core.settings import Handler, Settings, SettingsError, merge_settings
from wrapper.core.shellwords import ShellSyntax, split_command
from wrapper.files.artifacts import UnreadableFile, read_regular_file


def load_settings(paths: Sequence[Path | str]) -> Settings:
    """Read and merge settings files in order; raise ``SettingsError`` on any problem."""
    return merge_settings([str(path) for path in paths], _read)


#: The largest settings file read: real ones are a few kilobytes, and a
#: limit keeps ``--settings /dev/zero`` or a runaway file from eating memory.
SETTINGS_MAX_BYTES = 4 * 1024 * 1024


def _read(where: str) -> dict[str, Any]:
    # A settings file may be a symlink (dotfile set-ups), but what it leads
    # to must be a regular file: a FIFO would hang the run before it starts.
    try:
        raw = read_regular_file(Path(where), SETTINGS_MAX_BYTES, follow_symlinks=True)
    except OSError as exc:
        raise SettingsError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except UnreadableFile as exc:
        raise SettingsError(f"{exc}; give a JSON settings file instead") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SettingsError(f"{where}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{where}: expected a JSON object at the top level")
    return data


#: One settings file's JSON object, read as ``load_settings`` reads each
#: (the agent's own settings file too, when the wrapper copies it).
read_settings_object = _read


#: Interpreters whose first argument that is not an option is a script to
#: check, and their options whose value is the next argument.
INTERPRETERS = re.compile(r"(python|pypy)(\d+(\.\d+)*)?|node|bash|sh|dash|zsh|ksh|ruby|perl")
_VALUE_OPTIONS = frozenset(
    {"-W", "-X", "-r", "--require", "--import", "--loader", "-C", "--conditions", "-o", "-O"}
)
#: Options after which the code comes from the command line, not a script.
_INLINE_OPTIONS = frozenset({"-c", "-m", "-e", "-E", "--eval", "-p", "--print", "-"})
_SCRIPT_SUFFIXES = (".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".bash", ".zsh", ".rb", ".pl")


class _Lookup(dict[str, str]):
    """An environment that notes the variables it did not have."""

    def __init__(self, env: Mapping[str, str]) -> None:
        super().__init__(env)
        self.missing: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self.missing.add(key)
        return super().get(key, default)


def check_commands(settings: Settings, env: Mapping[str, str], cwd: Path) -> None:
    """Raise ``SettingsError`` for a command handler whose program, or whose
    script when the program is a known interpreter, does not exist: at run
    time it would fail at the first stop, and an interpreter's exit status 2
    for a missing script reads as a block. ``env`` and ``cwd`` are those the
    handlers will get; a command that uses variables only the run defines,
    or runs through a shell, cannot be checked and is left alone."""
    for groups in settings.hooks.values():
        for handler in (h for group in groups for h in group.handlers):
            if handler.type == "mcp_tool":
                _check_server(handler, env, cwd)
                continue
            if handler.type != "command" or handler.shell:
                continue
            if handler.args is not None:
                words = list(handler.args)
            else:
                lookup = _Lookup(env)
                try:
                    words = split_command(handler.command or "", lookup)
                except ShellSyntax:
                    continue
                if lookup.missing:
                    continue
            problem = _missing_program(words, env, cwd)
            if problem is not None:
                raise SettingsError(
                    f"{handler.origin}: command {handler.name!r}: {problem} (relative paths "
                    f"are taken from the run's working directory, {cwd}; "
                    '"$CLAUDE_PROJECT_DIR/..." names a path in it from anywhere)'
                )


def _check_server(handler: Handler, env: Mapping[str, str], cwd: Path) -> None:
    """The same check for the program of the stdio server an ``mcp_tool``
    handler calls (its variables expanded as the handler will have them)."""
    server = handler.mcp_server
    if server is None or server.transport != STDIO:
        return
    lookup = _Lookup(env)
    expanded = server.expanded(lookup)
    if lookup.missing:
        return
    problem = _missing_program([expanded.command or "", *expanded.args], env, cwd)
    if problem is not None:
        raise SettingsError(
            f"{server.origin}: the MCP server of {handler.name}: {problem} (relative paths "
            f"are taken from the run's working directory, {cwd})"
        )


def _missing_program(words: list[str], env: Mapping[str, str], cwd: Path) -> str | None:
    program = words[0]
    if "/" in program:
        path = cwd / program
        if not path.is_file():
            return f"{program} does not exist"
        if not os.access(path, os.X_OK):
            return f"{program} is not executable"
    elif shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        return f"{program} is not found on PATH"
    if not INTERPRETERS.fullmatch(Path(program).name):
        return None
    rest = iter(words[1:])
    for word in rest:
        if word in _INLINE_OPTIONS:
            return None
        if word in _VALUE_OPTIONS:
            next(rest, None)
            continue
        if word.startswith("-") and word != "--":
            continue
        script = next(rest, "") if word == "--" else word
        looks_like_path = "/" in script or script.endswith(_SCRIPT_SUFFIXES)
        if looks_like_path and not (cwd / script).is_file():
            return f"its script {script} does not exist"
        return None
    return None
