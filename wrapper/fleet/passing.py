"""When a run of a batch passed: the one rule the batch's exit status, its
JUnit report, the retry options and ``merge`` all use.

A run passed when its outcome is ``ok``, or when its line has an
expectation (``"expect": {"outcome": ..., "errorKind": ...}``) and the run
matches it: a scenario that tests a crash passes when the run ends as that
crash. Pure: fed result.json as it was read, it touches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wrapper.core.outcome import ErrorKind, Outcome

#: The error kind of a run a person aborted on request: settled, so that a
#: retry of its shard does not start it again.
ABORT_REQUESTED = "abort_requested"
#: The error kind of a run whose wrapper was killed: it never ran to its end.
WRAPPER_KILLED = str(ErrorKind.WRAPPER_KILLED)

#: What ``expect.outcome`` may name.
OUTCOMES = tuple(str(outcome) for outcome in Outcome)
#: What ``expect.errorKind`` may name.
ERROR_KINDS = tuple(dict.fromkeys((*(str(kind) for kind in ErrorKind), ABORT_REQUESTED)))


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a line says its run should end with; either part may be left out."""

    outcome: str | None = None
    error_kind: str | None = None

    def matches(self, result: Mapping[str, Any]) -> bool:
        if self.outcome is not None and result.get("outcome") != self.outcome:
            return False
        return self.error_kind is None or error_kind(result) == self.error_kind

    def to_json(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.outcome is not None:
            out["outcome"] = self.outcome
        if self.error_kind is not None:
            out["errorKind"] = self.error_kind
        return out

    def describe(self) -> str:
        """The expectation in words, as a failure's message quotes it."""
        parts = []
        if self.outcome is not None:
            parts.append(f"outcome {self.outcome}")
        if self.error_kind is not None:
            parts.append(f"error kind {self.error_kind}")
        return " with ".join(parts)


def expectation_of(value: Any) -> Expectation | None:
    """An expectation as batch.json records it (``expect``), else None."""
    if not isinstance(value, Mapping):
        return None
    outcome, kind = value.get("outcome"), value.get("errorKind")
    return Expectation(
        outcome if isinstance(outcome, str) else None, kind if isinstance(kind, str) else None
    )


def error_kind(result: Mapping[str, Any] | None) -> str | None:
    error = (result or {}).get("error")
    kind = error.get("kind") if isinstance(error, Mapping) else None
    return kind if isinstance(kind, str) else None


def passed(result: Mapping[str, Any] | None, expect: Expectation | None) -> bool:
    """Whether a run whose result.json is ``result`` (None: it wrote none) passed."""
    if result is None:
        return False
    if result.get("outcome") == Outcome.OK:
        return True
    return expect is not None and expect.matches(result)


def settled(result: Mapping[str, Any] | None, expect: Expectation | None) -> bool:
    """Whether ``--skip-passed`` keeps the run: it passed, or a person
    aborted it on request."""
    return passed(result, expect) or error_kind(result) == ABORT_REQUESTED


def finished(result: Mapping[str, Any] | None) -> bool:
    """Whether ``--skip-finished`` keeps the run: it wrote its result.json
    itself (a run whose wrapper was killed never ran to its end)."""
    return result is not None and error_kind(result) != WRAPPER_KILLED
