"""Reading an event log back: one ``events.jsonl`` line (the ``envelope``
of ``wrapper.core.events``) into the same ``Event`` the encoder was given,
so that a reader renders a file as a run renders its events.

The inverse of ``events.envelope``, kept beside it; a change to one is a
change to both (``tests/test_watch.py`` round-trips every event type).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from wrapper.core.events import (
    _FIGURES,
    Event,
    ToolCall,
    Usage,
    _camel,
    event_types,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Stamped:
    """An event read back from a log with the envelope the sink gave it
    (``None`` where the line did not carry it)."""

    event: Event
    seq: int | None = None
    ts: str | None = None
    attempt: int | None = None


#: What each JSON type of a payload value may stand for, by the annotation's
#: words: a line written by another version, or edited by hand, must not hand
#: the renderer a number where it expects text.
_ACCEPTS: Mapping[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "Usage": (dict,),
    "Mapping[str, Any]": (dict,),
}


def _accepts(annotation: str, value: Any) -> bool:
    for word in (part.strip() for part in annotation.split("|")):
        if word == "Any":
            return True
        if word == "None" and value is None:
            return True
        if word.startswith("tuple[") and isinstance(value, list):
            return True
        kinds = _ACCEPTS.get(word, ())
        if isinstance(value, bool) and bool not in kinds:
            continue
        if isinstance(value, kinds):
            return True
    return False


def _usage_of(value: Mapping[str, Any]) -> Usage:
    figures: dict[str, Any] = {}
    for name in _FIGURES:
        figure = value.get(_camel(name))
        if isinstance(figure, bool):
            continue
        if name == "cost_usd" and isinstance(figure, int | float):
            figures[name] = float(figure)
        elif isinstance(figure, int):
            figures[name] = figure
    return Usage(**figures)


def _value_of(name: str, annotation: str, value: Any) -> Any:
    if name == "usage" and isinstance(value, dict):
        return _usage_of(value)
    if name == "tool_calls" and isinstance(value, list):
        return tuple(
            ToolCall(
                name=str(item.get("name")),
                id=item.get("id") if isinstance(item.get("id"), str) else None,
                summary=item.get("summary") if isinstance(item.get("summary"), str) else None,
            )
            for item in value
            if isinstance(item, dict) and isinstance(item.get("name"), str)
        )
    if isinstance(value, list):
        if "tuple[int" in annotation:
            return tuple(v for v in value if isinstance(v, int) and not isinstance(v, bool))
        return tuple(str(v) for v in value)
    return value


def _by_type() -> dict[tuple[str, str], type[Event]]:
    # A slotted dataclass is a new class: the one it replaced may linger
    # among ``__subclasses__`` until collected, so only the class its
    # module names is taken.
    return {
        (cls.TYPE, cls.SOURCE): cls
        for cls in event_types()
        if getattr(sys.modules.get(cls.__module__), cls.__name__, None) is cls
    }


_DECODERS: dict[tuple[str, str], type[Event]] = {}


def decode_event(line: Mapping[str, Any]) -> Stamped | None:
    """The event one ``envelope`` line stands for, the inverse of the
    encoding: ``decode_event(envelope(e, n))`` gives back ``e`` (the fields
    the log leaves out at their defaults).

    None for a line that is no event of this vocabulary (an unknown type, a
    required field missing); a field of the wrong type is taken as absent.
    Never raises on a JSON object, whatever it holds.
    """
    if not _DECODERS:
        _DECODERS.update(_by_type())
    kind, source = line.get("type"), line.get("source", "agent")
    if not isinstance(kind, str) or not isinstance(source, str):
        return None
    cls = _DECODERS.get((kind, source))
    if cls is None:
        return None
    given: dict[str, Any] = {}
    for spec in fields(cls):
        if not spec.metadata.get("payload", True):
            continue
        value = line.get(_camel(spec.name))
        if _camel(spec.name) in line and _accepts(str(spec.type), value):
            given[spec.name] = _value_of(spec.name, str(spec.type), value)
    try:
        event = cls(**given)
    except (TypeError, ValueError):
        return None
    seq, ts, attempt = line.get("seq"), line.get("ts"), line.get("attempt")
    return Stamped(
        event=event,
        seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        ts=ts if isinstance(ts, str) else None,
        attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
    )
