"""A batch's spec: one run a line, checked whole before anything starts.

A line is a JSON object: ``command`` (the agent's argv) and, optionally,
``task``, ``label``, ``cwd``, ``env``, ``expect`` (what the run should end
with, when not ``ok``) and any run option under its long name
in camelCase (``dialect``, ``runDir``, ``timeout``, ``settings``,
``maxSteers``, ``hooksFailClosed``, ...). The run options given on the
command line are the defaults a line overrides. Paths are relative to the
spec file's directory. Every value goes through the same checks as the
option on the command line, so a line means what the same ``run`` would.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wrapper.fleet.passing import ERROR_KINDS, OUTCOMES, Expectation
from wrapper.supervision.prepare import text_problem


class SpecError(Exception):
    """A spec that cannot be run as it is: the message names the line and the key."""


class WrongType(SpecError):
    """A value of a type its key never takes (the Python API's ``TypeError``)."""


#: Keys of a line that are not run options.
OWN_KEYS = ("command", "cwd", "env", "expect")
#: Run options that a batch sets for all its runs, never a line.
BATCH_ONLY = frozenset({"output", "color"})
#: Run options whose values are paths, taken relative to the spec's directory.
PATH_OPTIONS = frozenset({"run_dir", "result", "task_file", "settings"})
#: Longest folder name a label becomes.
MAX_FOLDER = 80


@dataclass(frozen=True, slots=True)
class SpecRun:
    """One run of the batch, as its line asks for it."""

    #: Its place among the spec's runs, from 0 (what ``--shard`` splits on).
    index: int
    #: Its line in the file, from 1 (what errors and default folders name).
    line: int
    command: tuple[str, ...]
    #: The run options, the command line's with the line's over them.
    options: argparse.Namespace
    cwd: Path
    #: Added to the environment the batch itself got.
    env: dict[str, str] = field(default_factory=dict)
    #: What the run should end with when that is not ``ok``.
    expect: Expectation | None = None

    @property
    def label(self) -> str | None:
        label: str | None = self.options.label
        return label

    @property
    def name(self) -> str:
        """How reports name it: its label, else its line."""
        return self.label or f"line {self.line}"


def camel(dest: str) -> str:
    head, *rest = dest.split("_")
    return head + "".join(part.title() for part in rest)


def run_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The run options a line may set, by their camelCase names."""
    return {
        camel(action.dest): action
        for action in parser._actions
        if action.option_strings and action.dest not in ("help", *BATCH_ONLY)
    }


def parse_spec(
    text: str,
    spec_dir: Path,
    parser: argparse.ArgumentParser,
    defaults: argparse.Namespace,
) -> list[SpecRun]:
    """Every run of a spec, or ``SpecError`` for the first line that is wrong.

    ``parser`` is the ``run`` parser whose options a line may set, and
    ``defaults`` what the command line gave them. Blank lines are skipped and
    do not count as runs.
    """
    options = run_options(parser)
    runs: list[SpecRun] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            run = _parse_line(raw, spec_dir, options, defaults)
        except SpecError as exc:
            raise SpecError(f"line {number}: {exc}") from None
        runs.append(SpecRun(len(runs), number, *run))
    if not runs:
        raise SpecError('no runs in it: write one JSON object a line, {"command": [...]}')
    return runs


def _parse_line(
    raw: str,
    spec_dir: Path,
    options: Mapping[str, argparse.Action],
    defaults: argparse.Namespace,
) -> tuple[tuple[str, ...], argparse.Namespace, Path, dict[str, str], Expectation | None]:
    """A line's command, options, working directory, environment and expectation."""
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise SpecError(f"not JSON ({exc})") from None
    except RecursionError:
        raise SpecError("nested too deep to be a run (no run option takes nested values)") from None
    if not isinstance(obj, dict):
        raise SpecError(f'a line is a JSON object such as {{"command": [...]}}, not {raw[:40]!r}')
    command = check_command("command", obj.get("command"))
    namespace = copy.copy(defaults)
    for key, value in obj.items():
        if key in OWN_KEYS:
            continue
        action = options.get(key)
        if action is None:
            raise SpecError(_unknown(key, [*OWN_KEYS, *options]))
        setattr(namespace, action.dest, one_value(key, value, action, spec_dir))
    if "task" in obj and "taskFile" in obj:
        raise SpecError('"task" and "taskFile" cannot both be given')
    if obj.get("taskFile") == "-":
        raise SpecError('"taskFile" cannot be "-": the runs of a batch share no standard input')
    if "task" in obj:
        namespace.task_file = None
    elif "taskFile" in obj:
        namespace.task = None
    cwd = check_cwd("cwd", obj["cwd"], spec_dir) if "cwd" in obj else spec_dir
    env = check_env("env", obj.get("env", {}))
    expect = check_expect("expect", obj["expect"]) if "expect" in obj else None
    return command, namespace, cwd, env, expect


def check_expect(key: str, value: Any) -> Expectation:
    """What a line expects its run to end with: ``{"outcome", "errorKind"}``,
    either; ``outcome`` one outcome or a list of them."""
    if not isinstance(value, Mapping):
        raise WrongType(f'"{key}" must be an object such as {{"outcome": "error"}}')
    for name in value:
        if name not in ("outcome", "errorKind"):
            raise SpecError(f'"{key}": {_unknown(name, ["outcome", "errorKind"])}')
    if not value:
        raise SpecError(f'"{key}" names nothing: give "outcome", "errorKind" or both')
    outcome, kind = value.get("outcome"), value.get("errorKind")
    listed = isinstance(outcome, list)
    outcomes: list[Any] = outcome if isinstance(outcome, list) else [outcome]
    if "outcome" in value and (not outcomes or not all(o in OUTCOMES for o in outcomes)):
        raise SpecError(
            f'"{key}": "outcome" must be one of {", ".join(OUTCOMES)}, or a list of them '
            f'(["ok", "error"]: either passes), not {_brief(outcome)}'
        )
    if "errorKind" in value and kind not in ERROR_KINDS:
        raise SpecError(
            f'"{key}": "errorKind" must be one of {", ".join(ERROR_KINDS)}, not {_brief(kind)}'
        )
    if kind is not None and outcomes == ["ok"]:
        raise SpecError(
            f'"{key}": "errorKind" with "outcome": "ok" can never hold (an ok run has no '
            'error): name the outcome the error comes with, such as "error"'
        )
    if "outcome" not in value:
        return Expectation(None, kind)
    return Expectation(tuple(dict.fromkeys(str(o) for o in outcomes)), kind, listed=listed)


class LineDigests:
    """The SHA-256 of each line as resolved: its command, its task (a task
    file's content, not its name), working directory, added environment,
    expectation and every run option in effect. Two runs of one digest are
    the same run asked for again, wherever the line sits in the spec.

    The options a line leaves as the command line gave them are encoded
    once, not once a line: a spec of many thousands of lines is checked
    before its first run starts."""

    def __init__(self, option_dests: Iterable[str], defaults: argparse.Namespace) -> None:
        self._dests = sorted(
            dest for dest in option_dests if dest not in ("task", "task_file", *BATCH_ONLY)
        )
        self._defaults = defaults
        self._encoded = {dest: _encode(getattr(defaults, dest, None)) for dest in self._dests}

    def recorded(self, run: SpecRun, task: str | None) -> dict[str, str]:
        """What the run's result.json records of its line (``batch``)."""
        return {"lineDigest": self.of(run, task)}

    def of(self, run: SpecRun, task: str | None) -> str:
        given, defaults, encoded = vars(run.options), vars(self._defaults), self._encoded
        parts = []
        for dest in self._dests:
            value = given.get(dest)
            same = value is defaults.get(dest)
            parts.append(f'"{dest}":{encoded[dest] if same else _encode(value)}')
        resolved = {
            "command": list(run.command),
            "task": task,
            "cwd": str(run.cwd),
            "env": run.env,
            "expect": run.expect.to_json() if run.expect is not None else None,
        }
        text = _encode(resolved)[:-1] + ',"options":{' + ",".join(parts) + "}}"
        return hashlib.sha256(text.encode()).hexdigest()


def _encode(value: Any) -> str:
    # Values that are no JSON type (paths, enums, settings) by their text;
    # every string was checked to hold no lone surrogate.
    return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS).decode()


def check_command(key: str, value: Any) -> tuple[str, ...]:
    """The agent's argv given under ``key``, or ``SpecError`` saying what is wrong."""
    if (
        isinstance(value, str)
        or not isinstance(value, Sequence)
        or not all(isinstance(arg, str) for arg in value)
    ):
        raise WrongType(f'"{key}" must be a non-empty list of non-empty strings (the argv)')
    if not value or not all(value):
        raise SpecError(f'"{key}" must be a non-empty list of non-empty strings (the argv)')
    for place, arg in enumerate(value):
        problem = text_problem(arg)
        if problem is not None:
            raise SpecError(f'"{key}": argument {place} {problem}')
    return tuple(value)


def check_cwd(key: str, value: Any, base: Path) -> Path:
    """The working directory given under ``key``, relative to ``base``."""
    if not isinstance(value, str | os.PathLike):
        raise WrongType(f'"{key}" must be a directory path')
    text = os.fspath(value)
    if not isinstance(text, str) or not text:
        raise SpecError(f'"{key}" must be a directory path')
    problem = text_problem(text)
    if problem is not None:
        raise SpecError(f'"{key}" {problem}')
    cwd = (base / text).absolute()
    if not cwd.is_dir():
        raise SpecError(f'"{key}": {cwd} is not a directory')
    return cwd


def check_env(key: str, value: Any) -> dict[str, str]:
    """Variables given under ``key`` for the agent's environment."""
    if not isinstance(value, Mapping):
        raise WrongType(f'"{key}" must be an object of variable names to string values')
    env: dict[str, str] = {}
    for name, val in value.items():
        if not isinstance(name, str) or not isinstance(val, str):
            raise WrongType(
                f'"{key}" must be an object of variable names to string values, '
                f"not {_brief(name)}: {_brief(val)}"
            )
        if not name or "=" in name:
            raise SpecError(f'"{key}": {name!r} is not a variable name (empty, or holds "=")')
        problem = text_problem(name) or text_problem(val)
        if problem is not None:
            where = "its name" if text_problem(name) else "its value"
            raise SpecError(f'"{key}": variable {name!r}: {where} {problem}')
        env[name] = val
    return env


def _brief(value: Any) -> str:
    """A value as a message shows it: short, whatever its size or depth."""
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    text = json.dumps(value) if isinstance(value, str | int | float | bool | None) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _unknown(key: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.7)
    hint = f": did you mean {close[0]!r}?" if close else " (keys are run options in camelCase)"
    return f"unknown key {key!r}{hint}"


def one_value(key: str, value: Any, action: argparse.Action, spec_dir: Path) -> Any:
    """A value for one option (``key`` names it in messages), checked as the
    command line checks it; paths are taken relative to ``spec_dir``."""
    if action.nargs == 0:  # a flag
        if not isinstance(value, bool):
            raise WrongType(f"{key!r} is true or false, not {_brief(value)}")
        # A key names the option's destination, so its value is the setting
        # itself (``checkMode: false`` for ``--no-check-mode``).
        return value
    if isinstance(action, argparse._AppendAction):
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise WrongType(f"{key!r} is a list of strings (or one string)")
        return [_one(key, v, action, spec_dir) for v in values]
    if value is None:
        return None
    return _one(key, value, action, spec_dir)


def _one(key: str, value: Any, action: argparse.Action, spec_dir: Path) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise WrongType(f"{key!r} must be a string or a number, not {_brief(value)}")
    text = value if isinstance(value, str) else json.dumps(value)
    # Every value may end up as a path, an argument or a variable (a label
    # names the run to a desktop notifier), and all end up in result.json.
    problem = text_problem(text)
    if problem is not None:
        raise SpecError(f"{key!r} {problem}")
    if action.dest in PATH_OPTIONS and text and text != "-":
        text = str(spec_dir / text)
    converted: Any = text
    if callable(action.type):
        try:
            converted = action.type(text)
        except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
            raise SpecError(f"{key!r}: {exc or 'not a valid value'}") from None
    if action.choices is not None and converted not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise SpecError(f"{key!r} must be one of {choices}, not {value!r}")
    return converted


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (I from 1) as a pair, or ``SpecError`` saying what is wrong."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is None:
        raise SpecError(f"--shard {text!r}: give I/N, e.g. 1/4 for the first of four shards")
    index, count = int(match[1]), int(match[2])
    if count < 1 or not 1 <= index <= count:
        raise SpecError(f"--shard {text}: I must be between 1 and N (N at least 1)")
    return index, count


def shard(runs: Sequence[SpecRun], index: int, count: int) -> list[SpecRun]:
    """The runs of shard ``index`` of ``count``: those whose place modulo
    ``count`` is ``index - 1``, so that the shards split the spec exactly."""
    return [run for run in runs if run.index % count == index - 1]


class Places:
    """The files and folders the runs of a batch write, each claimed by one
    line: two runs writing one directory or one result.json would each
    clear and overwrite what the other wrote.

    Paths are compared where they really are, not as they are spelled:
    ``x``, ``y/../x``, ``x/`` and a symlink to ``x`` are one directory, and a
    line's ``runDir`` may be another line's automatic ``RUNS_DIR/LABEL``.
    """

    def __init__(self, reserved: Mapping[Path, str] | None = None) -> None:
        #: Where each folder really is, by its spelling: the runs of a spec
        #: mostly share a few parents, each resolved once.
        self._folders: dict[str, str] = {}
        #: Where each claimed path really is -> whose it is ("line 3's", ...).
        self._holders: dict[str, str] = {
            self._real(path): holder for path, holder in (reserved or {}).items()
        }

    def claim(self, line: int, *paths: Path) -> None:
        """Give ``paths`` to ``line``, or ``SpecError`` naming whose one of them is."""
        mine: dict[str, Path] = {}
        for path in paths:
            where = self._real(path)
            holder = self._holders.get(where)
            if holder is not None:
                same = "" if str(path) == where else f" (that is {where})"
                raise SpecError(
                    f"{path}{same} is {holder} too: every run needs a directory "
                    "and a result.json of its own"
                )
            mine.setdefault(where, path)
        for where in mine:
            self._holders[where] = f"line {line}'s"

    def _real(self, path: Path | str) -> str:
        """``real_place(path)``, each parent resolved once for all its children.
        A name that is not a symlink (or not there yet) adds nothing to
        resolve, so the place is the real parent's with that name."""
        text = os.fspath(path)
        parent, name = os.path.split(text)
        if name in ("", ".", "..") or not parent or not os.path.isabs(text):
            return real_place(Path(text))
        try:
            linked = os.path.islink(text)
        except (OSError, ValueError):
            linked = True
        if linked:
            return real_place(Path(text))
        real = self._folders.get(parent)
        if real is None:
            real = self._folders[parent] = self._real(parent)
        return os.path.join(real, name)


def planned_places(run: SpecRun, automatic: Path) -> tuple[Path, ...]:
    """The run directory and result path ``run`` will have (``automatic``:
    its folder when its line names none), without preparing it: for the
    lines another shard runs, which must not collide with this shard's either."""
    run_dir = (run.cwd / run.options.run_dir).absolute() if run.options.run_dir else automatic
    result = run.options.result
    return (run_dir, (run.cwd / result).absolute() if result else run_dir / "result.json")


def real_place(path: Path) -> str:
    """Where ``path`` really is: the symlinks of the part that exists resolved,
    the rest (what the run will create) made normal, ``..`` included."""
    # realpath resolves each existing component as it goes, so a ``..`` after
    # a symlink leaves the symlink's target as the system would.
    return os.path.realpath(path)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def folder_names(runs: Sequence[SpecRun]) -> list[str]:
    """A run-directory name for each run: its label made safe (letters,
    digits, ``.``, ``_``, ``-``), else its line number; unique in the batch
    (``name-2``, ``name-3`` for repeats, compared without case)."""
    # The batch's own report sits beside the runs' folders.
    taken: set[str] = {"batch.json"}
    # Per name, the next suffix worth trying: a spec of thousands of lines
    # with one label must not try every suffix already given for each line.
    next_suffix: dict[str, int] = {}
    names = []
    for run in runs:
        base = _UNSAFE.sub("-", run.label or "").strip(".-")[:MAX_FOLDER] or str(run.line)
        key = base.lower()
        name = base
        if key in taken:
            n = next_suffix.get(key, 2)
            while f"{key}-{n}" in taken:
                n += 1
            next_suffix[key] = n + 1
            name = f"{base}-{n}"
        taken.add(name.lower())
        names.append(name)
    return names
