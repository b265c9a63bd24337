"""What the dialect tests share: JSON lines, the shared captures, replaying a stream."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from wrapper.core.events import AssistantMessage, Event, SessionStarted, is_terminal
from wrapper.core.registry import BY_NAME
from wrapper.dialects import DIALECTS
from wrapper.dialects.base import Dialect

#: The fake agent's one launcher; a link to it named like a CLI plays that CLI.
FAKE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "fake_agent"
_LINKS = Path(tempfile.mkdtemp(prefix="fake-agent-launchers-"))


def fake_launcher(dialect: str) -> Path:
    """The fake agent's launcher for a dialect: the one in its folder where
    there is one, else a link named like the CLI (a new agent needs no
    launcher file of its own)."""
    exe = BY_NAME[dialect].executables[0]
    committed = FAKE_DIR / exe
    if committed.exists():
        return committed
    link = _LINKS / exe
    if not link.exists():
        link.symlink_to(FAKE_DIR / "fake-agent")
    return link


def mode_args(dialect: str) -> list[str]:
    """The option that puts a dialect's CLI in the mode whose stream the
    wrapper reads, as one word (the fake agent takes a bare word as its task)."""
    mode = BY_NAME[dialect].mode
    return [mode[0]] if mode else []


#: Dialects whose agent is driven over its stdin (ACP): the shared runs
#: below start their agent with a task alone, so they are tested apart.
TWO_WAY = frozenset({"acp"})

#: dialect -> the fake agent's launcher for it, for every one-way dialect.
LAUNCHERS = {name: fake_launcher(name) for name in BY_NAME if name not in TWO_WAY}

#: Real agent streams, kept next to the repository (see its README).
STREAMS = Path(__file__).parents[2] / "shared" / "streams"


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


def capture(name: str) -> list[bytes]:
    """The lines of one shared capture; the test is skipped when it is absent."""
    path = STREAMS / name
    if not path.is_file():
        pytest.skip(f"shared capture {path} is absent (the streams folder sits next to the repo)")
    return [raw for raw in path.read_bytes().splitlines() if raw.strip()]


def replay(dialect: Dialect, lines: Iterable[bytes], exit_code: int | None = 0) -> list[Event]:
    """Everything ``dialect`` makes of ``lines`` and the process's exit."""
    events: list[Event] = []
    for raw in lines:
        events.extend(dialect.parse(raw))
    events.extend(dialect.on_exit(exit_code, None))
    return events


def messages(events: Iterable[Event]) -> list[AssistantMessage]:
    return [event for event in events if isinstance(event, AssistantMessage)]


def final(events: Iterable[Event]) -> AssistantMessage:
    """The last terminal assistant message: what the run would end on."""
    terminal = [message for message in messages(events) if is_terminal(message.stop_reason)]
    assert terminal, "no terminal assistant message"
    return terminal[-1]


def session_id(events: Iterable[Event]) -> str | None:
    ids = [event.session_id for event in events if isinstance(event, SessionStarted)]
    return ids[-1] if ids else None


def first_object(lines: list[bytes]) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(lines[0])
    return obj


def recognisers(obj: dict[str, Any]) -> list[str]:
    """The names of every registered dialect that claims ``obj``."""
    return [name for name, cls in DIALECTS.items() if cls.recognises(obj)]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=8,
)


def objects(types: Sequence[str], keys: Sequence[str]) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects of the given types whose fields hold anything at all."""
    return st.builds(
        lambda kind, fields: {**fields, "type": kind},
        st.sampled_from(types),
        st.dictionaries(st.sampled_from(keys), json_values, max_size=6),
    )
