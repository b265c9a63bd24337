"""When a run of a batch passed: the one rule the batch's exit status, its
JUnit report, the retry options and ``merge`` all use.

A run passed when its outcome is ``ok``, or, when its line has an
expectation (``"expect": {"outcome": ..., "errorKind": ...}``), when the
run ends as the expectation says, and only then: an expected outcome pins
the outcome, so a scenario meant to crash fails when it ends ``ok``.
``outcome`` may be one outcome or a list of them (any one passes);
``errorKind`` pins the error's kind of a run that ends other than ``ok``;
``errorKind`` alone means a run that ended with that error (outcome
``error`` for every kind but those of a timeout, an abort or a refusal,
which come with their own outcome). Pure: fed result.json as it was read,
it touches nothing.
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

    #: The outcomes that pass, in the line's order; None: any but ``ok``
    #: (only ``errorKind`` was given).
    outcomes: tuple[str, ...] | None = None
    error_kind: str | None = None
    #: Whether the line named its outcomes as a list (kept as written).
    listed: bool = False

    def matches(self, result: Mapping[str, Any]) -> bool:
        outcome = result.get("outcome")
        if self.outcomes is not None:
            if outcome not in self.outcomes:
                return False
        elif outcome == Outcome.OK or self.error_kind is None:
            return False
        # An ok run has no error; the kind is asked of the others only.
        return outcome == Outcome.OK or self.error_kind in (None, error_kind(result))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.outcomes is not None:
            out["outcome"] = list(self.outcomes) if self.listed else self.outcomes[0]
        if self.error_kind is not None:
            out["errorKind"] = self.error_kind
        return out

    def describe(self) -> str:
        """The expectation in words, as a failure's message quotes it."""
        parts = []
        if self.outcomes is not None:
            parts.append("outcome " + " or ".join(self.outcomes))
        if self.error_kind is not None:
            parts.append(f"error kind {self.error_kind}")
        return " with ".join(parts)


def expectation_of(value: Any) -> Expectation | None:
    """An expectation as batch.json records it (``expect``), else None."""
    if not isinstance(value, Mapping):
        return None
    outcome, kind = value.get("outcome"), value.get("errorKind")
    kind = kind if isinstance(kind, str) else None
    if isinstance(outcome, str):
        return Expectation((outcome,), kind)
    if isinstance(outcome, list) and outcome and all(isinstance(o, str) for o in outcome):
        return Expectation(tuple(outcome), kind, listed=True)
    if kind is None:
        return None
    return Expectation(None, kind)


def error_kind(result: Mapping[str, Any] | None) -> str | None:
    error = (result or {}).get("error")
    kind = error.get("kind") if isinstance(error, Mapping) else None
    return kind if isinstance(kind, str) else None


def passed(result: Mapping[str, Any] | None, expect: Expectation | None) -> bool:
    """Whether a run whose result.json is ``result`` (None: it wrote none) passed."""
    if result is None:
        return False
    if expect is not None:
        return expect.matches(result)
    return result.get("outcome") == Outcome.OK


def settled(result: Mapping[str, Any] | None, expect: Expectation | None) -> bool:
    """Whether ``--skip-passed`` keeps the run: it passed, or a person
    aborted it on request."""
    return passed(result, expect) or error_kind(result) == ABORT_REQUESTED


def finished(result: Mapping[str, Any] | None) -> bool:
    """Whether ``--skip-finished`` keeps the run: it wrote its result.json
    itself (a run whose wrapper was killed never ran to its end)."""
    return result is not None and error_kind(result) != WRAPPER_KILLED


def same_run(result: Mapping[str, Any], entry: Mapping[str, Any]) -> bool:
    """Whether a result.json is the run a batch.json entry names: the same
    run id and, where both record it, the same line digest. A run directory
    holds whatever ran there last: a later run of the line replaces it."""
    run_id = result.get("runId")
    if not isinstance(run_id, str) or run_id != entry.get("runId"):
        return False
    batch = result.get("batch")
    digest = batch.get("lineDigest") if isinstance(batch, Mapping) else None
    claimed = entry.get("lineDigest")
    return digest is None or claimed is None or digest == claimed
