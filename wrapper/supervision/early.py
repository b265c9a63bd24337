"""The run's start, done once: the run directory prepared, status.json
saying ``starting`` and config.json written, by the command line before
the wrapper imports trio (``early_start``, which then starts the agent so
that its start-up overlaps the wrapper's), or by the run itself when nothing
was started early (``begin_run``, which ``Run`` calls then).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wrapper.core.config import RunConfig, child_depth, child_env
from wrapper.files.artifacts import ArtifactErrors, atomic_write, dump_json, prepare_run_dir
from wrapper.process.guardian import wrapper_pid
from wrapper.process.invocation import LAUNCHER, launcher_script
from wrapper.process.spawn import spawn


def begin_run(config: RunConfig, errors: ArtifactErrors, started_at: float) -> bool:
    """Prepare the run directory and write the run's first status.json and
    its config.json; returns whether the directory is usable. Runners
    polling status.json see the run from its first moment; config.json tells
    the guardian what the run was, should the wrapper die before it is up.
    A failed write is recorded in ``errors``: the status writer then writes
    no more."""
    dir_ok = prepare_run_dir(config.run_dir, config.runs_root, errors, config.run_id)
    if not dir_ok:
        return False
    status_path = config.run_dir / "status.json"
    try:
        status = config.starting_status(started_at, wrapper_pid())
        atomic_write(status_path, dump_json(status), durable=False)
    except OSError as exc:
        errors.record("status", status_path, exc)
    config_path = config.run_dir / "config.json"
    try:
        atomic_write(config_path, dump_json(config.to_json()), durable=False)
    except OSError as exc:
        errors.record("config", config_path, exc)
    launcher = config.run_dir / LAUNCHER
    if config.wrapper_bin == str(launcher):
        # No single executable starts this wrapper (a zipapp, a package run
        # without its console script): the agent gets one here.
        try:
            launcher.parent.mkdir(exist_ok=True)
            atomic_write(launcher, launcher_script().encode(), durable=False)
            launcher.chmod(0o755)
        except OSError as exc:
            errors.record("launcher", launcher, exc)
    return True


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
    has to happen first (a refusal for nesting depth, prompt and session hooks
    that may change or refuse the task). None when the run must start the usual way.
    ``early_signals`` holds the stop signals received so far, and those to come
    until the run is up (``guardian.record_stop_signals``)."""
    settings = config.settings
    if (
        child_depth(environ) > config.max_depth
        or settings.handlers("UserPromptSubmit")
        or settings.handlers("SessionStart")
        or (config.subagent and settings.handlers("SubagentStart"))
    ):
        return None
    started_at = time.time()
    errors = ArtifactErrors()
    dir_ok = begin_run(config, errors, started_at)
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
