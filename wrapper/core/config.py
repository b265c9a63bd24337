"""The frozen configuration of one run, and every default in one place."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wrapper.core import environment
from wrapper.core.framing import DEFAULT_MAX_LINE_BYTES
from wrapper.core.settings import Settings
from wrapper.core.timefmt import iso

#: After a terminal stop, how long the child may go on running before SIGTERM.
DEFAULT_GRACE = 1.0
#: The same, once the agent has said it is completely done.
DEFAULT_SETTLE_GRACE = 0.2
#: SIGTERM to SIGKILL.
DEFAULT_KILL_AFTER = 3.0
#: Nesting limit for wrappers started inside wrapped agents.
DEFAULT_MAX_DEPTH = 3
#: After the child exits, how long to wait for its pipes to reach EOF; a
#: descendant holding them open must not keep the run from finishing.
DEFAULT_DRAIN_TIMEOUT = 2.0
#: Steers (blocked stops sent back to the agent) a run may take.
DEFAULT_MAX_STEERS = 3
#: Steers from outside the run (``agent-wrapper steer``) it takes.
DEFAULT_MAX_EXTERNAL_STEERS = 20
#: How long a running tool may go on before a steer from outside interrupts it.
DEFAULT_STEER_TIMEOUT = 60.0
#: How long an escalated run waits for a person's reply before it lets the agent stop.
DEFAULT_ESCALATION_TIMEOUT = 30 * 60.0
#: The ``onStop`` policy each ``--context`` implies.
CONTEXT_POLICIES = {"pipeline": "signal", "standalone": "escalate"}
#: Minimum interval between two status.json writes (the last is never held back).
STATUS_INTERVAL = 0.5
#: How long the final flush of stdout output may wait for a slow reader.
OUTPUT_FLUSH_TIMEOUT = 5.0
#: Bytes asked from a pipe per read. Each read sets aside this much before
#: it knows how much is there, and a chunk's lines are all in memory at once:
#: at 1 MiB a run that had streamed a few megabytes kept 3 MB more for the
#: rest of its life (what the allocator does not give back). At 64 KiB the
#: per-read cost is lost in the parsing (a 280 MB stream took 1.7-1.9 s of
#: CPU either way).
READ_CHUNK_BYTES = 64 * 1024
#: Where runs go when --run-dir is not given, relative to the working directory.
DEFAULT_RUNS_ROOT = Path(".agent-wrapper") / "runs"
#: Where a batch's runs go when --runs-dir is not given, relative to the
#: working directory (then ``BATCH_ID`` below it).
DEFAULT_BATCHES_ROOT = Path(".agent-wrapper") / "batches"
#: Longest stderr line turned into one event (the log keeps every byte).
STDERR_LINE_BYTES = 64 * 1024
#: Longest task read from --task-file (a batch's taskFile, the API's
#: task_file): real tasks with whole files pasted in run to a few MB, and far
#: beyond any agent's context; the bound keeps /dev/zero or a runaway pipe
#: from filling the wrapper's memory before anything starts.
MAX_TASK_BYTES = 64 * 1024 * 1024

SCHEMA_VERSION = 1


class OutputMode(enum.StrEnum):
    AUTO = "auto"
    JSONL = "jsonl"
    PRETTY = "pretty"
    QUIET = "quiet"


class ColorMode(enum.StrEnum):
    """Whether a live view colours its lines."""

    #: On a terminal, unless ``NO_COLOR`` is set to anything but ''.
    AUTO = "auto"
    ALWAYS = "always"
    NEVER = "never"


#: The variable by which a person asks every program for no colour (no-color.org).
NO_COLOR = "NO_COLOR"


def use_color(mode: ColorMode, environ: Mapping[str, str], terminal: bool) -> bool:
    """Whether a live view writing to a terminal (or not) colours its lines:
    the flag beats ``NO_COLOR``, which beats the terminal."""
    if mode is ColorMode.AUTO:
        return terminal and not environ.get(NO_COLOR)
    return mode is ColorMode.ALWAYS


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """Everything one run was asked to do, from the command line, the API or a batch line."""

    command: tuple[str, ...]
    task: str | None = None
    dialect: str = "auto"
    label: str | None = None
    run_id: str
    run_dir: Path
    result_path: Path
    #: The default runs root, when --run-dir was not given (gets a .gitignore).
    runs_root: Path | None = None
    cwd: Path
    grace: float = DEFAULT_GRACE
    settle_grace: float = DEFAULT_SETTLE_GRACE
    #: Whether ``grace`` / ``settle_grace`` are only the default of the dialect
    #: chosen before the run (the user gave none): a dialect recognised from
    #: the agent's stream then brings its own.
    grace_is_default: bool = False
    settle_grace_is_default: bool = False
    kill_after: float = DEFAULT_KILL_AFTER
    timeout: float | None = None
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    output: OutputMode = OutputMode.AUTO
    color: ColorMode = ColorMode.AUTO
    #: The wrapper's own command for the agent (``AGENT_WRAPPER_BIN``).
    wrapper_bin: str | None = None
    max_depth: int = DEFAULT_MAX_DEPTH
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    #: Limit on each attempt alone (an expired attempt still goes through the
    #: Stop hooks); ``timeout`` bounds the whole run.
    attempt_timeout: float | None = None
    #: Longest silence from the agent, while no tool runs, before it counts as hung.
    idle_timeout: float | None = None
    settings: Settings = field(default_factory=Settings)
    max_steers: int = DEFAULT_MAX_STEERS
    max_external_steers: int = DEFAULT_MAX_EXTERNAL_STEERS
    steer_timeout: float = DEFAULT_STEER_TIMEOUT
    #: The agent is launched so that its session can be resumed (a steer may
    #: come: from a blocked stop, or from outside when the run directory can
    #: hold the session), as prepared.
    resumable: bool = False
    #: A failing Stop handler ends the run as an error (``hook_failed``)
    #: instead of allowing the stop (resolved: flag or settings).
    hooks_fail_closed: bool = False
    #: Stop handlers that still block at the steer limit end the run as an
    #: error (``gate_not_passed``) instead of a warning (resolved: flag or settings).
    fail_on_max_steers: bool = False
    #: Run as a subagent: Stop handlers are looked up as ``SubagentStop``.
    subagent: bool = False
    #: What a stop the hooks allowed means (resolved: flag, settings, context).
    on_stop: str = "allow"
    #: How a tool the agent asks permission for (ACP) is answered when no
    #: PreToolUse handler decides: ``allow`` (the unattended norm) or ``deny``.
    permissions: str = "allow"
    #: The ``authenticate`` method for an ACP agent that requires one
    #: (resolved: flag, settings), else None.
    auth_method: str | None = None
    context: str | None = None
    escalation_timeout: float = DEFAULT_ESCALATION_TIMEOUT
    #: The run's caps (resolved: flag, settings ``limits``): USD it may
    #: cost, and tokens it may use (input, output and cache writes).
    max_cost: float | None = None
    max_tokens: int | None = None
    #: What reaching a cap does (resolved: flag, settings ``limits.onBudget``):
    #: ``stop`` the run, or ``escalate``: pause and ask a person.
    on_budget: str = "stop"
    #: What a batch says of the run in its result.json (``{"lineDigest"}``), else None.
    batch: Mapping[str, Any] | None = None
    #: Variables the agent is given beyond the wrapper's own (opencode's
    #: configuration with the wrapper's PreToolUse plugin), over the inherited ones.
    agent_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def stop_event(self) -> str:
        """The hook event a stop fires: ``SubagentStop`` for a subagent."""
        return "SubagentStop" if self.subagent else "Stop"

    @property
    def may_steer(self) -> bool:
        """Whether a stop may be blocked and steered (the launch must then be resumable)."""
        settings = self.settings
        return self.task is not None and (
            self.on_stop != "allow"
            or settings.retry_on_error
            or bool(settings.handlers(self.stop_event))
        )

    def starting_status(self, started_at: float, wrapper_pid: int) -> dict[str, Any]:
        """status.json before the agent runs (see ``wrapper/schemas/status.schema.json``)."""
        return {
            "schemaVersion": SCHEMA_VERSION,
            "runId": self.run_id,
            "state": "starting",
            "attempt": 1,
            "pid": None,
            "wrapperPid": wrapper_pid,
            "startedAt": iso(started_at),
            "updatedAt": iso(started_at),
            "lastEventAt": None,
            "currentTool": None,
            "label": self.label,
            "question": None,
            "escalationId": None,
            "outcome": None,
            "control": None,
            "controlUnavailable": None,
            "pendingSteers": [],
            "usage": None,
            "steers": {"hook": 0, "outside": 0},
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schemaVersion": SCHEMA_VERSION,
            "runId": self.run_id,
            "label": self.label,
            "command": list(self.command),
            "task": self.task,
            "dialect": self.dialect,
            "cwd": str(self.cwd),
            "runDir": str(self.run_dir),
            "resultPath": str(self.result_path),
            "grace": self.grace,
            "settleGrace": self.settle_grace,
            "killAfter": self.kill_after,
            "timeout": self.timeout,
            "drainTimeout": self.drain_timeout,
            "output": str(self.output),
            "color": str(self.color),
            "wrapperBin": self.wrapper_bin,
            "maxDepth": self.max_depth,
            "maxLineBytes": self.max_line_bytes,
            "attemptTimeout": self.attempt_timeout,
            "idleTimeout": self.idle_timeout,
            "maxSteers": self.max_steers,
            "maxExternalSteers": self.max_external_steers,
            "steerTimeout": self.steer_timeout,
            "hooksFailClosed": self.hooks_fail_closed,
            "failOnMaxSteers": self.fail_on_max_steers,
            "subagent": self.subagent,
            "onStop": self.on_stop,
            "permissions": self.permissions,
            "authMethod": self.auth_method,
            "context": self.context,
            "escalationTimeout": self.escalation_timeout,
            "maxCost": self.max_cost,
            "maxTokens": self.max_tokens,
            "onBudget": self.on_budget,
            "settings": self.settings.to_json(),
            "batch": dict(self.batch) if self.batch is not None else None,
        }


def child_depth(environ: Mapping[str, str]) -> int:
    """1 for a top-level run, one more for each wrapper the run is nested in."""
    try:
        parent = int(environ.get(environment.DEPTH, "0"))
    except ValueError:
        parent = 0
    return max(parent, 0) + 1


def child_env(config: RunConfig, attempt: int, base: Mapping[str, str]) -> dict[str, str]:
    """The environment for the agent: everything the wrapper has, plus the run's identity."""
    env = {**base, **config.agent_env}
    env.pop(environment.USER_VALUES, None)
    if config.agent_env:
        env[environment.USER_VALUES] = environment.user_values(config.agent_env, base)
    parent = base.get(environment.RUN_ID)
    env.pop(environment.PARENT_RUN_ID, None)
    if parent:
        env[environment.PARENT_RUN_ID] = parent
    env[environment.RUN_ID] = config.run_id
    env[environment.RUN_DIR] = str(config.run_dir)
    env[environment.ATTEMPT] = str(attempt)
    env[environment.DEPTH] = str(child_depth(base))
    # Inherited from an enclosing run it would name that run's wrapper.
    env.pop(environment.BIN, None)
    if config.wrapper_bin is not None:
        env[environment.BIN] = config.wrapper_bin
    # A shell keeps PWD in step with its directory; exec() does not, so the
    # inherited value would name the wrapper's caller's directory, and agents
    # that trust PWD over getcwd() would work (and write files) there.
    env["PWD"] = str(config.cwd)
    return env


def handler_env(config: RunConfig, attempt: int, base: Mapping[str, str]) -> dict[str, str]:
    """The environment for the run's hook handlers: the agent's, without
    what the run gives the agent alone (``RunConfig.agent_env``), the
    user's own values of those restored."""
    return environment.without_agent_env(child_env(config, attempt, base))
