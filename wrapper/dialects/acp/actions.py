"""What the ACP client core is given and returns: its options, and the
actions the shell must carry out (``Send`` a message, decide a
``PermissionRequested``, run its stop gate at ``TurnEnded``, ...) beside the
normalized events. Values only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wrapper.core.events import AssistantMessage, Event

#: Default seconds for each of ``initialize``, ``authenticate`` and
#: ``session/new`` (a cold ``initialize`` takes seconds; a fresh opencode
#: home up to 9 s on a loaded machine).
DEFAULT_SETUP_TIMEOUT = 30.0


# --- what the shell must do -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    """Write ``message`` (one line) on the agent's stdin."""

    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """What the client knows of one tool call of the turn."""

    tool_call_id: str
    #: The tool's name for ``toolsUsed`` and hook matchers: its ACP ``kind``.
    name: str
    title: str | None
    input: Any


@dataclass(frozen=True, slots=True)
class PermissionRequested:
    """The agent asks before running a tool: the shell decides (PreToolUse
    hooks, then the permission setting) and calls ``decide_permission``."""

    request_id: Any
    tool: ToolInfo
    #: The options offered, as (optionId, kind).
    options: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class PermissionWithdrawn:
    """A ``PermissionRequested`` was answered by the core itself (the turn
    ended or was cancelled first): whatever the shell still does to decide it
    (a hook, a person asked) is moot and may stop."""

    request_id: Any


@dataclass(frozen=True, slots=True)
class StoppedAnswering:
    """The agent's output ended while the session awaited its answer: no
    answer can come any more. ``message`` says so, for a person; the shell
    gives the process the drain timeout to exit, then ends it."""

    message: str


@dataclass(frozen=True, slots=True)
class PromptAnswered:
    """The agent took the prompt the shell sent as ``ticket``
    (``AcpClient.prompt_ticket``): its turn began (a first update, or its
    answer); or it refused it, answering with an error before anything of
    a turn came: ``refused`` says why, in its words."""

    ticket: str
    refused: str | None = None


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """A prompt turn is over (its ``AssistantMessage`` came just before):
    the shell runs its stop gate, then sends ``prompt`` or ``close``."""

    message: AssistantMessage


@dataclass(frozen=True, slots=True)
class Failed:
    """The session cannot go on; ``message`` says why, for a person."""

    message: str


@dataclass(frozen=True, slots=True)
class CloseInput:
    """Close the agent's stdin: the session is over."""


Action = (
    Send
    | PermissionRequested
    | PermissionWithdrawn
    | StoppedAnswering
    | PromptAnswered
    | TurnEnded
    | Failed
    | CloseInput
)
Output = Event | Action


@dataclass(frozen=True, slots=True)
class AcpOptions:
    """How the client opens its session: the task, the directory and the rest."""

    task: str
    cwd: str
    #: The ``authenticate`` method to use when the agent requires one.
    auth_method: str | None = None
    mcp_servers: Sequence[Mapping[str, Any]] = ()
    initialize_timeout: float = DEFAULT_SETUP_TIMEOUT
    authenticate_timeout: float = DEFAULT_SETUP_TIMEOUT
    session_timeout: float = DEFAULT_SETUP_TIMEOUT
    client_name: str = "agent-wrapper"
    client_version: str = "0"
