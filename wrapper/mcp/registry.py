"""The runs one server owns: started in one nursery, each a ``Run`` like
``agent-wrapper run``'s (its directory, result.json, its control), with what
belongs to the process around them set up once, as a batch does it: the
stop signals (each reaches every run going on), reaping the orphans a
subreaper adopts, the guardian (told of each run as it starts). Runs write
no live output: the server's stdout is its protocol.

Before a run starts the registry checks what the server allows (programs,
working directory, settings files, how many runs at once, nesting depth)
and refuses with a ``ToolError`` that says which option allows it.
Closing the registry aborts every run still going; each ends within its
kill bounds and writes its result.json.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from wrapper.core.config import DEFAULT_MAX_DEPTH, child_depth
from wrapper.core.environment import DEPTH
from wrapper.core.limits import MCP_CLOSE_WAIT, MCP_DEFAULT_MAX_RUNS
from wrapper.core.registry import AGENTS
from wrapper.core.signals import STOP_SIGNALS
from wrapper.fleet.owner import reap_orphans_on_sigchld, relay_signals
from wrapper.process import guardian, proctree
from wrapper.supervision.prepare import PreparedRun, RunUsageError, new_run_id, prepare_run
from wrapper.supervision.run import Run


class ToolError(Exception):
    """A tool call that cannot be done; the message says what to do instead."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


#: Turns run options (snake_case names, as the API takes them) into the run
#: parser's namespace, checked as the command line checks them; raises
#: ``TypeError`` or ``RunUsageError``. The front door hands it in
#: (``wrapper.options.options_from``): the layers do not import it.
OptionsFrom = Callable[[Mapping[str, Any], Path], argparse.Namespace]

#: Every program name the registry knows as an agent's (its dialects'
#: executables, the adapters and the other programs that write a format).
KNOWN_PROGRAMS: frozenset[str] = frozenset(
    name
    for agent in AGENTS
    for name in (
        *agent.executables,
        *agent.adapters,
        *(program for names, _ in agent.also for program in names),
    )
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """What a server allows, fixed when it starts."""

    #: Where each run's directory goes (``RUNS_DIR/RUN_ID``).
    runs_dir: Path
    #: The server's working directory: a run's default, and where a run's
    #: cwd must be unless ``allow_cwd`` says otherwise.
    cwd: Path
    #: The server's environment, the runs' base one.
    environ: Mapping[str, str]
    max_runs: int = MCP_DEFAULT_MAX_RUNS
    #: Programs allowed besides the agents the registry knows (a name or a path).
    allow: tuple[str, ...] = ()
    allow_any_command: bool = False
    #: Directories a run's cwd may be in besides the server's.
    allow_cwd: tuple[Path, ...] = ()
    #: Directories a settings file may come from (none: no settings).
    allow_settings: tuple[Path, ...] = ()
    #: Run options every run starts from (snake_case, as ``options_from`` takes).
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class Entry:
    """One run of the server."""

    run_id: str
    label: str | None
    prepared: PreparedRun
    run: Run
    #: Wall-clock start (for ``list``) and trio's (for elapsed times).
    started_at: float
    started: float
    ended_event: trio.Event = field(default_factory=trio.Event)
    result: dict[str, Any] | None = None
    #: What went wrong in the wrapper itself, when the run raised.
    failure: str | None = None
    #: Where the last ``events`` call stopped reading events.jsonl: the seq
    #: of the last event read and the offset of the line after it.
    events_cursor: tuple[int, int] = (0, 0)
    #: final.txt once this server wrote it (the run's whole final text).
    final_written: Path | None = None

    @property
    def run_dir(self) -> Path:
        return self.prepared.config.run_dir

    @property
    def ended(self) -> bool:
        return self.ended_event.is_set()


class Runs:
    """The registry: open it with ``open_runs``; ``start`` a run, find one
    by id with ``get``; closing it aborts what is still going."""

    def __init__(self, policy: Policy, options_from: OptionsFrom, nursery: trio.Nursery) -> None:
        self.policy = policy
        self.options_from = options_from
        self._nursery = nursery
        self.entries: dict[str, Entry] = {}
        #: Set once the registry is closing (or a stop signal came): no more starts.
        self.closing: str | None = None
        #: The first stop signal the process received, and when it came.
        self.stopped_by: signal.Signals | None = None
        self.stopped = trio.Event()

    # -- finding runs -------------------------------------------------------------

    def get(self, run_id: object) -> Entry:
        if not isinstance(run_id, str) or not run_id:
            raise ToolError("run_id is missing: give the run_id that start returned")
        entry = self.entries.get(run_id)
        if entry is None:
            known = ", ".join(list(self.entries)[-5:]) or "none yet"
            raise ToolError(
                f"no run {run_id!r} in this server (its runs: {known}); "
                "call list to see every run_id"
            )
        return entry

    def going(self) -> list[Entry]:
        return [entry for entry in self.entries.values() if not entry.ended]

    # -- starting one -------------------------------------------------------------

    def start(
        self,
        command: Sequence[str],
        *,
        task: str,
        label: str | None = None,
        cwd: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Entry:
        """Check ``command`` and the run's options against the policy, then
        start the run in the registry's nursery; returns at once. Raises
        ``ToolError`` for anything refused, before anything is started."""
        if self.closing is not None:
            raise ToolError(f"the server {self.closing}: it starts no more runs")
        going = len(self.going())
        if going >= self.policy.max_runs:
            raise ToolError(
                f"{going} runs are going on, the most this server runs at once "
                f"(--max-runs {self.policy.max_runs}): wait for one to end (wait), "
                "or abort one, then start again"
            )
        self._check_depth(options or {})
        self._check_program(command)
        where = self._check_cwd(cwd)
        settings = self._check_settings((options or {}).get("settings"), where)
        values: dict[str, Any] = {
            **self.policy.defaults,
            **(options or {}),
            "task": task,
            "label": label,
            "output": "quiet",
        }
        if settings is not None:
            values["settings"] = settings
        run_id = new_run_id()
        while run_id in self.entries:
            run_id = new_run_id()
        try:
            namespace = self.options_from(values, where)
            prepared = prepare_run(
                namespace,
                list(command),
                cwd=where,
                environ=self.policy.environ,
                run_id=run_id,
                run_dir=self.policy.runs_dir / run_id,
                say_notes=False,
            )
        except (TypeError, RunUsageError) as exc:
            raise ToolError(f"cannot start the run: {str(exc).removeprefix('run: ')}") from None
        config = prepared.config
        # The guardian knows of the run before anything of it exists.
        guardian.announce(config.run_id, config.run_dir, config.result_path, more=True)
        run = Run(
            config,
            prepared.dialect,
            prepared.launch,
            self.policy.environ,
            claim=proctree.RunClaim(config.run_id),
            # The caller asks for the result: nothing on the server's stderr.
            say_at_end=False,
            trace_of_its_own=True,
        )
        entry = Entry(
            run_id=run_id,
            label=label,
            prepared=prepared,
            run=run,
            started_at=time.time(),
            started=trio.current_time(),
        )
        self.entries[run_id] = entry
        if self.stopped_by is not None:
            run.interrupt(self.stopped_by)
        self._nursery.start_soon(self._execute, entry)
        return entry

    async def _execute(self, entry: Entry) -> None:
        try:
            await entry.run.execute()
        except Exception as exc:  # a bug in one run must not end the others
            entry.failure = f"the wrapper failed (please report it): {type(exc).__name__}: {exc}"
        finally:
            entry.result = entry.run.result
            entry.ended_event.set()

    def _check_depth(self, options: Mapping[str, Any]) -> None:
        given = options.get("max_depth", self.policy.defaults.get("max_depth"))
        max_depth = given if isinstance(given, int) else DEFAULT_MAX_DEPTH
        depth = child_depth(self.policy.environ)
        if depth > max_depth:
            raise ToolError(
                f"a run started here would be nested {depth} deep ({DEPTH} of this server "
                f"is {depth - 1}), past the most allowed, {max_depth} (--max-depth): do the "
                "work yourself instead of delegating it further"
            )

    def _check_program(self, command: Sequence[str]) -> None:
        if not command or not all(isinstance(arg, str) for arg in command) or not command[0]:
            raise ToolError("command must be a non-empty list of strings (the agent's argv)")
        if self.policy.allow_any_command:
            return
        program = command[0]
        if program in self.policy.allow:
            return
        path = self.policy.environ.get("PATH", os.defpath)
        found = shutil.which(program, path=path) if os.sep not in program else program
        if found is not None:
            real = os.path.realpath(found)
            for allowed in self.policy.allow:
                other = shutil.which(allowed, path=path) if os.sep not in allowed else allowed
                if other is not None and os.path.realpath(other) == real:
                    return
        if os.sep not in program and program in KNOWN_PROGRAMS:
            if found is None:
                raise ToolError(
                    f"{program} is not installed where this server looks (not found on its "
                    "PATH): start another agent, or ask the user to install it"
                )
            return
        known = ", ".join(sorted(KNOWN_PROGRAMS))
        raise ToolError(
            f"{program} is not a program this server may start: it starts the agents it "
            f"knows by their bare name ({known}) and the programs its --allow names; "
            "use the agent parameter for a preset, or ask the user to restart the server "
            f"with --allow {program} (or --allow-any-command)"
        )

    def _check_cwd(self, cwd: str | None) -> Path:
        base = self.policy.cwd
        if cwd is None:
            return base
        if not isinstance(cwd, str) or not cwd or "\0" in cwd:
            raise ToolError("cwd must be a directory's path (absolute, or from the server's)")
        where = (base / cwd).absolute()
        if not where.is_dir():
            raise ToolError(f"cwd {where} is not a directory: give an existing one")
        real = Path(os.path.realpath(where))
        roots = (base, *self.policy.allow_cwd)
        if not any(real.is_relative_to(os.path.realpath(root)) for root in roots):
            raise ToolError(
                f"cwd {where} is outside the server's working directory {base}: give one "
                "inside it, or ask the user to restart the server with "
                f"--allow-cwd {where}"
            )
        return where

    def _check_settings(self, settings: object, cwd: Path) -> list[str] | None:
        if settings is None:
            return None
        files = [settings] if isinstance(settings, str) else settings
        if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
            raise ToolError("settings must be a settings file's path, or a list of them")
        checked = []
        for name in files:
            path = (cwd / name).absolute()
            real = Path(os.path.realpath(path))
            if not any(
                real.is_relative_to(os.path.realpath(d)) for d in self.policy.allow_settings
            ):
                allowed = ", ".join(str(d) for d in self.policy.allow_settings) or "none"
                raise ToolError(
                    f"settings {path} is not under a directory this server takes settings "
                    f"from ({allowed}): a settings file's hooks run programs, so only those "
                    "the user allowed are taken; start without settings, or ask the user "
                    "to restart the server with --allow-settings DIR"
                )
            checked.append(str(path))
        return checked

    # -- the process's duties -----------------------------------------------------

    def stop(self, sig: signal.Signals) -> list[Run]:
        """A stop signal the process received: every run going on is told of
        it (and ends ``aborted``); no run starts from now on."""
        if self.stopped_by is None:
            self.stopped_by = sig
            self.closing = f"was stopped by {sig.name}"
            self.stopped.set()
        return [entry.run for entry in self.going()]

    async def close(self) -> None:
        """Abort every run still going and wait for each to end (bounded:
        past ``MCP_CLOSE_WAIT`` they are cancelled, which ends them too)."""
        self.closing = self.closing or "is closing"
        for entry in self.going():
            entry.run.abort(f"the server that started it {self.closing}")
        with trio.move_on_after(MCP_CLOSE_WAIT):
            for entry in list(self.entries.values()):
                await entry.ended_event.wait()


@asynccontextmanager
async def open_runs(
    policy: Policy, options_from: OptionsFrom, *, signals: bool = True
) -> AsyncIterator[Runs]:
    """The registry, for the ``async with`` block; at its end every run still
    going is aborted and has written its result.json. ``signals``: relay the
    process's stop signals to the runs (the server owns the process; off
    for a registry inside a program that handles its own)."""
    with contextlib.ExitStack() as stack:
        relay = stack.enter_context(trio.open_signal_receiver(*STOP_SIGNALS)) if signals else None
        async with trio.open_nursery() as outer:
            async with trio.open_nursery() as nursery:
                runs = Runs(policy, options_from, nursery)
                if relay is not None:
                    outer.start_soon(relay_signals, relay, runs.stop)
                if proctree.owns_process():
                    outer.start_soon(reap_orphans_on_sigchld)
                try:
                    yield runs
                finally:
                    with trio.CancelScope(shield=True):
                        await runs.close()
                    # Past the wait: cancelled, each still ends its agent's
                    # tree and writes its result.json.
                    nursery.cancel_scope.cancel()
            guardian.close_announcements()
            outer.cancel_scope.cancel()
