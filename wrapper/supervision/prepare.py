"""From run options to a run: the checks every front end shares.

The command line (``run``), the batch (each line of its spec) and the
Python API all turn the same run options (the ``run`` parser's, as an
``argparse.Namespace``) into the same ``PreparedRun``, or into the same
usage error: one set of messages for a person, whichever way the run was
asked for.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson

from wrapper.core.config import (
    CONTEXT_POLICIES,
    DEFAULT_MAX_EXTERNAL_STEERS,
    DEFAULT_MAX_STEERS,
    DEFAULT_RUNS_ROOT,
    MAX_TASK_BYTES,
    ColorMode,
    OutputMode,
    RunConfig,
    child_depth,
)
from wrapper.core.registry import lacks_mode, program_name
from wrapper.core.settings import Settings, SettingsError
from wrapper.dialects import Dialect, Launch, SniffingDialect, UsageError, resolve_dialect
from wrapper.files.artifacts import run_dir_problem
from wrapper.files.settings_file import check_commands, read_settings_object
from wrapper.files.settings_file import load_settings as load
from wrapper.hooks.native import EXTENSION_FILE, SETTINGS_FILE, agent_settings, pi_extension
from wrapper.hooks.native_agents import (
    OPENCODE_CONFIG_ENV,
    OPENCODE_PLUGIN_FILE,
    NativeHooksError,
    codex_hook_args,
    opencode_config,
    opencode_plugin,
)
from wrapper.process.invocation import LAUNCHER, wrapper_command, wrapper_executable

PROG = "agent-wrapper"


class RunUsageError(ValueError):
    """Run options that cannot make a run; the message is what the command
    line prints after ``agent-wrapper: error:``."""


@dataclass(frozen=True, slots=True)
class PreparedRun:
    """A run ready to start: its configuration, the agent's dialect, and the
    argv (and files) that give the agent its task."""

    config: RunConfig
    dialect: Dialect
    launch: Launch


#: A surrogate code point, which only a lone half of a pair can leave in a str.
_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be given to the system or written as UTF-8 (an
    argument, a path, a variable, a name in result.json), or None."""
    if "\0" in text:
        return "contains a NUL character, which no argument, path or variable can hold"
    if _SURROGATE.search(text):
        return "is not valid Unicode text (it holds a lone surrogate)"
    return None


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + os.urandom(3).hex()


_T = TypeVar("_T")


def _first(*values: _T | None) -> _T:
    return next(value for value in values if value is not None)


def _given(*values: _T | None) -> _T | None:
    """The first of ``values`` given, else None."""
    return next((value for value in values if value is not None), None)


def _on_stop(*choices: str | None) -> str:
    """The flag, else the settings, else the context's policy, else ``allow``."""
    return next((choice for choice in choices if choice), "allow")


def read_task_file(path: str, limit: int = MAX_TASK_BYTES) -> str:
    """The task in ``path`` (``-``: standard input), as UTF-8 text with its
    line ends read as a text file's are; a usage error when it cannot be read or holds
    more than ``limit`` bytes (nothing past the limit is read)."""
    try:
        if path == "-":
            if sys.stdin is None:
                raise RunUsageError(f"--task-file {path}: this process has no standard input")
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(path, "rb") as file:
                data = file.read(limit + 1)
        if len(data) > limit:
            raise RunUsageError(
                f"--task-file {path}: longer than {_size(limit)}, the most a task may be"
            )
        task = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RunUsageError(f"--task-file {path}: cannot read it: {reason}") from None
    # What a shell pipe or here-document adds, not part of the task.
    return task.removesuffix("\n") if path == "-" else task


def _size(count: int) -> str:
    """``count`` bytes for a person: ``64 MiB (67108864 bytes)``."""
    mib = 1024 * 1024
    if count >= mib and count % mib == 0:
        return f"{count // mib} MiB ({count} bytes)"
    return f"{count} bytes"


def load_settings(
    paths: list[str], *, say_notes: bool = True, enforces_pre_tool_use: bool = False
) -> Settings:
    """The settings files merged, or a usage error; their notes go to stderr
    when ``say_notes``. ``enforces_pre_tool_use``: the agent asks the wrapper
    before its tools run (ACP), so PreToolUse handlers are not ignored."""
    try:
        settings = load(paths)
    except SettingsError as exc:
        raise RunUsageError(f"--settings {exc}") from None
    if enforces_pre_tool_use:
        kept = tuple(n for n in settings.notes if n not in settings.pre_tool_use_notes)
        settings = dataclasses.replace(settings, notes=kept)
    if say_notes:
        for note in settings.notes:
            print(f"{PROG}: note: {note}", file=sys.stderr)
    return settings


def _check_hook_commands(settings: Settings, cwd: Path, environ: Mapping[str, str]) -> None:
    """Hook programs and scripts must exist where the handlers will run."""
    try:
        check_commands(settings, {**environ, "CLAUDE_PROJECT_DIR": str(cwd)}, cwd)
    except SettingsError as exc:
        raise RunUsageError(f"--settings {exc}") from None


def _check_mode(command: Sequence[str], dialect: Dialect) -> None:
    """Refuse an agent known by its name but started without its JSON mode:
    its plain output would be recognised only after it had done, and been
    billed for, the whole task."""
    agent = lacks_mode(command)
    if agent is None:
        return
    modes = " or ".join(option.replace("=", " ") for option in agent.mode)
    raise RunUsageError(
        f"run: {program_name(command)} is started without the option of the JSON mode "
        f"the {agent.name} dialect reads ({modes}), so the wrapper could not follow it: "
        f"run it as `{dialect.streaming_command}` (your other options kept), or pass "
        "--no-check-mode to start it as it is"
    )


def _can_hold(run_dir: Path) -> bool:
    """Whether ``run_dir`` is, or can be made as, a directory this user writes."""
    path = run_dir
    while not path.exists():
        if path.parent == path:
            return False
        path = path.parent
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _missing_program(name: str, cwd: Path, environ: Mapping[str, str]) -> str | None:
    """Why ``name`` cannot be started as the run would start it, or None if it can."""
    if os.sep in name:
        path = cwd / name
        if path.is_file() and os.access(path, os.X_OK):
            return None
        return f"{name}: no such executable file"
    if shutil.which(name, path=environ.get("PATH", os.defpath)) is not None:
        return None
    return f"{name}: not found on PATH (install it, or give its path)"


def prepare_run(
    options: argparse.Namespace,
    command: Sequence[str] | None,
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    run_id: str | None = None,
    run_dir: Path | None = None,
    say_notes: bool = True,
    batch: Callable[[str | None], Mapping[str, Any]] | None = None,
) -> PreparedRun:
    """Check run ``options`` (the ``run`` parser's) and ``command`` and make
    the run of them, or raise ``RunUsageError`` with the command line's message.

    ``cwd`` and ``environ`` are the run's (default: this process's);
    ``run_dir``, when ``--run-dir`` is not given, is where the run's files
    go instead of ``./.agent-wrapper/runs/RUN_ID``. ``batch``: given the
    run's task, what its batch records of it in result.json.
    """
    if not command:
        raise RunUsageError(
            "run: no COMMAND: put the agent's command after --, "
            f"e.g. {wrapper_command()} run --task 'Fix it' -- pi --mode json -p"
        )
    cwd = Path.cwd() if cwd is None else cwd
    environ = os.environ if environ is None else environ
    task = options.task if options.task_file is None else read_task_file(options.task_file)
    source = "--task" if options.task_file is None else f"--task-file {options.task_file}"
    problem = None if task is None else text_problem(task)
    if problem is not None:
        # The task reaches the agent as an argument or over a pipe, and result.json.
        raise RunUsageError(f"run: {source}: the task {problem}")
    if task is not None and not task.strip():
        raise RunUsageError(
            f"run: {source} is empty: give the agent something to do, or leave the "
            "task out to run COMMAND as it is"
        )
    # A program that cannot be found is no usage error: it is a run that
    # could not be started (exit 127 with its result.json), whether or not
    # its name says which agent it is (a mistyped one says nothing).
    missing = _missing_program(command[0], cwd, environ)
    unplaced = False
    try:
        dialect = resolve_dialect(options.dialect, list(command), task is not None)
    except UsageError as exc:
        if missing is None:
            raise RunUsageError(f"run: {exc}") from None
        dialect, unplaced = SniffingDialect(), True
    settings = load_settings(
        options.settings,
        say_notes=say_notes,
        enforces_pre_tool_use=dialect.two_way or dialect.takes_native_hooks(command),
    )
    _check_hook_commands(settings, cwd, environ)
    # A program that is not there is said as such when it is started.
    checked = options.dialect == "auto" and options.check_mode
    if checked and missing is None:
        _check_mode(command, dialect)
    run_id = run_id or new_run_id()
    runs_root = None
    if options.run_dir is None and run_dir is None:
        runs_root = cwd / DEFAULT_RUNS_ROOT
        run_dir = runs_root / run_id
    else:
        if options.run_dir is not None:
            if not options.run_dir:
                raise RunUsageError("run: --run-dir is empty: give a directory for the run's files")
            run_dir = (cwd / options.run_dir).absolute()
        assert run_dir is not None
        problem = run_dir_problem(run_dir)
        if problem is not None:
            raise RunUsageError(f"run: --run-dir {problem}")
    result_path = (cwd / options.result).absolute() if options.result else run_dir / "result.json"
    graces = dialect.graces(command)
    config = RunConfig(
        command=tuple(command),
        task=task,
        dialect=options.dialect,
        label=options.label,
        run_id=run_id,
        run_dir=run_dir,
        result_path=result_path,
        runs_root=runs_root,
        cwd=cwd,
        grace=_first(options.grace, graces[0]),
        settle_grace=_first(options.settle_grace, graces[1]),
        grace_is_default=options.grace is None,
        settle_grace_is_default=options.settle_grace is None,
        kill_after=options.kill_after,
        timeout=options.timeout,
        drain_timeout=options.drain_timeout,
        output=OutputMode(options.output),
        color=ColorMode(options.color),
        wrapper_bin=wrapper_executable() or str(run_dir / LAUNCHER),
        max_depth=options.max_depth,
        max_line_bytes=options.max_line_bytes,
        attempt_timeout=options.attempt_timeout,
        idle_timeout=options.idle_timeout,
        settings=settings,
        max_steers=_first(options.max_steers, settings.max_steers, DEFAULT_MAX_STEERS),
        max_external_steers=_first(
            options.max_external_steers, settings.max_external_steers, DEFAULT_MAX_EXTERNAL_STEERS
        ),
        steer_timeout=options.steer_timeout,
        hooks_fail_closed=options.hooks_fail_closed or settings.fail_closed,
        fail_on_max_steers=options.fail_on_max_steers or settings.fail_on_max_steers,
        subagent=options.subagent or child_depth(environ) > 1,
        on_stop=_on_stop(options.on_stop, settings.on_stop, CONTEXT_POLICIES.get(options.context)),
        context=options.context,
        permissions=getattr(options, "permissions", None) or settings.permissions or "allow",
        auth_method=getattr(options, "auth_method", None) or settings.acp_auth_method,
        escalation_timeout=options.escalation_timeout,
        max_cost=_given(getattr(options, "max_cost", None), settings.max_cost),
        max_tokens=_given(getattr(options, "max_tokens", None), settings.max_tokens),
        on_budget=getattr(options, "on_budget", None) or settings.on_budget or "stop",
        batch=batch(task) if batch is not None else None,
    )
    # A session file in a run directory that cannot be made would stop the
    # agent: steers from outside then work only where the agent keeps it.
    from_outside = task is not None and config.max_external_steers > 0 and _can_hold(run_dir)
    config = dataclasses.replace(config, resumable=config.may_steer or from_outside)
    if settings.pre_tool_use and dialect.takes_native_hooks(command):
        if dialect.native_hooks_kind in ("plugin", "config"):
            config = agent_hooks(dialect, config, environ)
        else:
            dialect.native_hooks = native_hooks(dialect, config, environ)
    if unplaced:
        # Nothing to place the task in: starting it fails, as it is said.
        return PreparedRun(config, dialect, Launch(list(config.command)))
    try:
        launch = dialect.launch(config.command, task, run_dir, resumable=config.resumable)
    except UsageError as exc:
        raise RunUsageError(f"run: {exc}") from None
    return PreparedRun(config, dialect, launch)


def agent_hooks(dialect: Dialect, config: RunConfig, environ: Mapping[str, str]) -> RunConfig:
    """``config`` with what hands the run's PreToolUse handlers to opencode
    (its plugin, named in its configuration from the environment) or Codex
    (``-c`` words), which ``dialect`` then gives the agent."""
    wrapper_bin = config.wrapper_bin or str(config.run_dir / LAUNCHER)
    files = [os.path.abspath(path) for path in config.settings.files]
    try:
        if dialect.native_hooks_kind == "config":
            dialect.native_hook_args = tuple(
                codex_hook_args(config.settings, wrapper_bin, files, config.command)
            )
            return config
        plugin = config.run_dir / OPENCODE_PLUGIN_FILE
        content = opencode_config(environ.get(OPENCODE_CONFIG_ENV), plugin)
    except NativeHooksError as exc:
        raise RunUsageError(f"run: {exc}") from None
    dialect.native_hooks = plugin, opencode_plugin(config.settings, wrapper_bin, files)
    env = {**config.agent_env, OPENCODE_CONFIG_ENV: content}
    return dataclasses.replace(config, agent_env=env)


def native_hooks(
    dialect: Dialect, config: RunConfig, environ: Mapping[str, str]
) -> tuple[Path, str] | None:
    """The file that hands the run's PreToolUse handlers to an agent that
    enforces them itself (its path and text: Claude Code's settings, pi's
    extension), or None when the agent already loads them from where they
    are (Claude Code's own settings files).

    A settings option the user's COMMAND already has is read (a file, or
    JSON as Claude Code's ``--settings`` also takes) and copied into it;
    PreToolUse handlers it shares with the run's settings (the same file)
    are the run's, relayed, so none runs twice."""
    settings, cwd = config.settings, config.cwd
    wrapper_bin = config.wrapper_bin or str(config.run_dir / LAUNCHER)
    # as the settings were read: relative to this process's directory
    files = [os.path.abspath(path) for path in settings.files]
    if dialect.native_hooks_kind == "extension":
        return config.run_dir / EXTENSION_FILE, pi_extension(
            settings, wrapper_bin, files, dialect.name
        )
    home = Path(environ.get("CLAUDE_CONFIG_DIR") or Path(environ.get("HOME", "~")) / ".claude")
    own = {cwd / ".claude" / "settings.json", cwd / ".claude" / "settings.local.json"}
    own.add(home.expanduser() / "settings.json")
    if any(os.path.realpath(path) in {os.path.realpath(p) for p in own} for path in files):
        return None
    user: dict[str, Any] = {}
    given = dialect.user_native_settings(config.command)
    if given is not None:
        option, value = dialect.native_hooks_option, given[2]
        shared = False
        try:
            if value.lstrip().startswith("{"):
                user = orjson.loads(value)
            else:
                path = cwd / value
                shared = os.path.realpath(path) in {os.path.realpath(p) for p in files}
                user = read_settings_object(str(path))
        except (SettingsError, orjson.JSONDecodeError) as exc:
            raise RunUsageError(
                f"run: COMMAND's {option}: {exc}; the wrapper adds the PreToolUse handlers "
                "to a copy of it, so it must be a readable JSON object"
            ) from None
        if not isinstance(user, dict):
            raise RunUsageError(f"run: COMMAND's {option} {value}: expected a JSON object")
        if shared and isinstance(user.get("hooks"), dict):
            user["hooks"] = {k: v for k, v in user["hooks"].items() if k != "PreToolUse"}
    merged = agent_settings(user, settings, wrapper_bin, files, dialect.name)
    text = orjson.dumps(merged, option=orjson.OPT_INDENT_2).decode()
    return config.run_dir / SETTINGS_FILE, text
