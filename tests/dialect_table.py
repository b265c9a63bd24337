"""The table every dialect's shared tests read: one row a dialect.

Each ``tests/test_dialect_<name>.py`` holds its dialect's row (``ROW``: a
command line, the event types to fuzz, sample lines and where its task and
session go) and the real captures it is checked against (``CAPTURES``);
``tests/test_dialect_common.py`` runs the same tests on every row, one for
each dialect in ``wrapper/core/registry.py``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType

from hypothesis import strategies as st

from tests.dialect_support import line, objects
from wrapper.core.events import Usage
from wrapper.core.registry import AGENTS
from wrapper.dialects import DIALECTS, Dialect

#: Nothing beyond the generic lines.
no_lines: st.SearchStrategy[list[bytes]] = st.just([])

#: How the agent's process may end: a status, or none when a signal killed it.
exit_codes = st.none() | st.integers(-1, 255)


@dataclass(frozen=True)
class Samples:
    """Lines of one agent's stream for what every dialect must read alike.

    Each list is a whole run, opening as the real CLI opens its stream.
    """

    #: The session id the lines report.
    session: str
    #: A plain answer whose final text is ``ANSWER``.
    answer: list[bytes]
    #: One call of the tool ``tool`` (id ``tool_id``, run on ``ls``), started and ended.
    tool_call: list[bytes]
    tool: str
    tool_id: str
    #: A run that fails with the message ``FAILURE``.
    error: list[bytes]
    #: A run cut short before its end-of-run line, and the final text an exit
    #: then implies (None: the exit status implies nothing for this agent).
    cut_short: list[bytes]
    cut_short_text: str | None


@dataclass(frozen=True)
class Argv:
    """Where the agent's command line takes the task and the session."""

    #: What follows the command for the task ``Fix it``.
    task: tuple[str, ...]
    #: What follows it for the task ``-v is broken``.
    dashed_task: tuple[str, ...]
    #: The whole argv that resumes session ``S-1`` of ``command`` with ``Go on``
    #: (None: resuming needs more than a session id, see the dialect's own tests).
    resume: tuple[str, ...] | None
    #: How ``CannotResume`` names what the stream did not report.
    missing_session: str | None
    #: The flag of the user's command that means no session is kept.
    no_session_flag: str | None = None


ANSWER = "Done."
FAILURE = "quota gone"
RESUMED = "S-1"


@dataclass(frozen=True)
class Agent:
    """What the shared tests need to know about one agent CLI."""

    name: str
    #: A command line a user would give to run it.
    command: tuple[str, ...]
    #: The event types it writes, and the fields its handlers read.
    types: tuple[str, ...]
    keys: tuple[str, ...]
    samples: Samples
    argv: Argv
    #: Other executables that run it, with the rest of ``command`` as it is.
    aliases: tuple[str, ...] = ()
    #: A line it prints that is not JSON, where one is known.
    noise: bytes | None = None
    #: How a usage error names it; None when every task can be given to it.
    display_name: str | None = None
    #: Lines of its own to fuzz after the generic ones.
    extra_lines: st.SearchStrategy[list[bytes]] = no_lines

    @property
    def dialect(self) -> type[Dialect]:
        return DIALECTS[self.name]

    @property
    def commands(self) -> list[tuple[str, ...]]:
        return [self.command, *((alias, *self.command[1:]) for alias in self.aliases)]

    @cached_property
    def fuzz_lines(self) -> st.SearchStrategy[list[bytes]]:
        """Up to four made-up events of its types, then its own extra lines."""
        events = st.lists(objects(self.types, self.keys), max_size=4)
        return st.builds(lambda objs, extra: [*map(line, objs), *extra], events, self.extra_lines)


LS = {"command": "ls"}


@dataclass(frozen=True)
class Capture:
    """A stream a real CLI wrote (``../shared/streams``) and what its run must come to."""

    file: str
    dialect: str
    #: The final message's canonical and raw stop reason, text and usage.
    stop: tuple[str, str]
    text: str
    usage: Usage
    session: str
    model: str | None = None
    error_message: str | None = None
    #: Every tool started, with the summary of its arguments; each one ends.
    tools: tuple[tuple[str, str], ...] = ()
    exit_code: int = 0


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"tests.test_dialect_{name}")


def rows() -> list[Agent]:
    """Every dialect's row, in the registry's order (a dialect without a
    test module, or one without a ``ROW``, fails here by name)."""
    found = []
    for agent in AGENTS:
        row = getattr(_module(agent.name), "ROW", None)
        assert isinstance(row, Agent), f"tests/test_dialect_{agent.name}.py has no ROW"
        found.append(row)
    return found


def captures() -> list[Capture]:
    """Every dialect's real captures, in the registry's order."""
    return [case for agent in AGENTS for case in getattr(_module(agent.name), "CAPTURES", [])]
