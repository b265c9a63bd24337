"""The ids of a run's first spans, chosen before anything of OpenTelemetry is
imported (``sinks.telemetry`` loads it only for a run that exports): the
command line starts the agent while the SDK is still loading, and the agent
must already be given its attempt's span as ``TRACEPARENT``. Pure, but for
the random ids.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PlannedIds:
    """The ids a run's first spans will have, chosen before anything of
    OpenTelemetry is imported: the command line starts the agent while it is
    still loading, and the agent must already be given its attempt's span."""

    #: The new trace's id, when the run has no caller's trace to join.
    trace_id: int
    run_span_id: int
    attempt_span_id: int
    #: What the first attempt's agent gets as TRACEPARENT.
    traceparent: str


#: The samplers whose decision for a run is known beforehand: sampled, unless
#: the caller's TRACEPARENT says its trace is not.
_PREDICTABLE_SAMPLERS = ("", "parentbased_always_on")


def plan_ids(environ: Mapping[str, str]) -> PlannedIds | None:
    """Ids for a run started with ``environ``; None when the sampler set in
    it makes the agent's TRACEPARENT unknowable before the SDK is loaded."""
    if environ.get("OTEL_TRACES_SAMPLER", "").strip().lower() not in _PREDICTABLE_SAMPLERS:
        return None
    caller = _parse_traceparent(environ.get("TRACEPARENT", ""))
    trace_id, flags = caller if caller is not None else (_random_id(16), "01")
    attempt = _random_id(8)
    return PlannedIds(
        trace_id=trace_id,
        run_span_id=_random_id(8),
        attempt_span_id=attempt,
        traceparent=f"00-{trace_id:032x}-{attempt:016x}-{flags}",
    )


def _random_id(size: int) -> int:
    while True:
        value = int.from_bytes(secrets.token_bytes(size), "big")
        if value:
            return value


def _parse_traceparent(value: str) -> tuple[int, str] | None:
    """The trace id and flags of a W3C ``traceparent`` header, if it is valid."""
    parts = value.strip().split("-")
    if len(parts) < 4 or [len(part) for part in parts[:4]] != [2, 32, 16, 2]:
        return None
    version, trace, span, flags = parts[:4]
    try:
        numbers = [int(part, 16) for part in (version, trace, span, flags)]
    except ValueError:
        return None
    if version.lower() == "ff" or (version == "00" and len(parts) != 4):
        return None
    if not numbers[1] or not numbers[2]:
        return None
    return numbers[1], "01" if numbers[3] & 1 else "00"
