"""Every event type keeps the envelope (type, seq, ts, attempt, source) intact."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson
import pytest

from tests.conftest import validate
from wrapper.core.events import ENVELOPE_KEYS, Event, Retry, Usage, event_types, payload_keys
from wrapper.dialects.codex import CodexDialect
from wrapper.sinks.stream import EventStream

#: A plausible value per field annotation, enough to build any event.
_SAMPLES: dict[str, Any] = {
    "str": "x",
    "str | None": "x",
    "int": 7,
    "int | None": 7,
    "float": 1.5,
    "bool": True,
    "bool | None": True,
    "Usage | None": Usage(input=1, output=2, total_tokens=3),
    "tuple[int, ...]": (1, 2),
    "tuple[str, ...]": ("a", "b"),
    "Any": None,
    "Mapping[str, Any] | None": {"kind": "agent_error", "message": "boom", "apiStatus": 401},
}


def sample(cls: type[Event]) -> Event:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = _SAMPLES[str(f.type)]
        elif str(f.type) in _SAMPLES and f.metadata.get("payload", True):
            # a set value shows a clash that a None default would hide
            values[f.name] = _SAMPLES[str(f.type)]
    if cls.TYPE == "signal_sent":
        values["signal"] = "SIGTERM"
    if cls.TYPE == "hook_decision":
        values["decision"] = "block"
    if cls.TYPE == "steer":
        values["next_attempt"] = 2
    if cls.TYPE == "steer_delivered":
        values |= {"how": "resume", "next_attempt": 2}
    if cls.TYPE == "steer_requested":
        values["when"] = "now"
    if cls.TYPE == "escalation_answered":
        values["answer"] = "text"
    if cls.TYPE == "retry":
        values["phase"] = "start"
    return cls(**values)


class _Log:
    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.lines.append(data)

    def flush(self) -> None:
        pass


def encoded(event: Event, attempt: int) -> dict[str, Any]:
    log = _Log()
    stream = EventStream(log, None)  # type: ignore[arg-type]
    stream.attempt = attempt
    stream.emit(event, now=1_700_000_000.0)
    stream.flush()
    [line] = log.lines
    result: dict[str, Any] = orjson.loads(line)
    return result


@pytest.mark.parametrize("cls", event_types(), ids=lambda cls: cls.TYPE + "/" + cls.__name__)
def test_every_event_type_keeps_the_envelope(cls: type[Event]) -> None:
    event = sample(cls)
    line = encoded(event, attempt=3)
    assert line["type"] == cls.TYPE
    assert line["seq"] == 1
    assert line["attempt"] == 3
    assert line["source"] == cls.SOURCE
    assert line["ts"].startswith("2023-11-14T")
    assert not {key for _, key in payload_keys(cls)} & ENVELOPE_KEYS
    validate("event", line)


def test_every_event_type_is_covered() -> None:
    kinds = {cls.TYPE for cls in event_types()}
    # the schema's closed list of types and the event classes agree
    from tests.conftest import schema

    assert kinds == set(schema("event")["properties"]["type"]["enum"])


def test_a_payload_field_named_like_the_envelope_is_refused() -> None:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Clashing(Event):
        TYPE: ClassVar[str] = "clashing"
        attempt: int | None = None

    with pytest.raises(TypeError, match="attempt"):
        payload_keys(Clashing)


def test_a_codex_reconnect_keeps_the_wrappers_attempt() -> None:
    dialect = CodexDialect()
    [counted] = dialect.parse(b'{"type":"error","message":"Reconnecting... 2/2 (disconnected)"}')
    [bare] = dialect.parse(b'{"type":"error","message":"Reconnecting..."}')
    first, second = encoded(counted, attempt=1), encoded(bare, attempt=1)
    assert (first["attempt"], first["retryAttempt"], first["maxAttempts"]) == (1, 2, 2)
    assert (second["attempt"], second["retryAttempt"]) == (1, None)
    validate("event", first)
    validate("event", second)
    assert isinstance(counted, Retry)
