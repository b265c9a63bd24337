"""What ``--skip-passed`` and ``--skip-finished`` find of an earlier run of
a line, and whether the line runs again (and why).

A line is known again by its digest (``spec.line_digest``), recorded in the
earlier run's result.json under ``batch``; never by its folder or its place
in the spec, which an edited spec may give another line. A re-run starts
the agent afresh: nothing of the earlier session is resumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from wrapper.files.artifacts import marked_run_id
from wrapper.fleet.passing import Expectation, error_kind, finished, settled


@dataclass(frozen=True, slots=True)
class Earlier:
    """What the run directory holds of an earlier run of the line."""

    #: Its result.json, when there is one that could be read.
    result: Mapping[str, Any] | None
    #: Why there is none to go by (unreadable, half-written), else None.
    problem: str | None
    #: Whether anything of an earlier run is there at all.
    there: bool

    @classmethod
    def read(cls, result_path: Path, run_dir: Path) -> Earlier:
        try:
            data = result_path.read_bytes()
        except FileNotFoundError:
            if marked_run_id(run_dir) is not None:
                return cls(None, "its earlier run left no result.json (it was killed)", True)
            return cls(None, None, False)
        except OSError as exc:
            return cls(None, f"its result.json could not be read ({exc.strerror or exc})", True)
        try:
            result = orjson.loads(data)
        except orjson.JSONDecodeError:
            return cls(None, "its result.json is not JSON (half-written?)", True)
        if not isinstance(result, dict):
            return cls(None, "its result.json is not a JSON object", True)
        return cls(result, None, True)

    def why_again(
        self, digest: str, expect: Expectation | None, *, every_outcome: bool
    ) -> str | None:
        """Why the line runs again, or None when the earlier run is kept
        (``every_outcome``: --skip-finished; else --skip-passed)."""
        if not self.there:
            return "it has not run before"
        if self.result is None:
            return self.problem or "it left no result.json"
        recorded = self.result.get("batch")
        earlier = recorded.get("lineDigest") if isinstance(recorded, Mapping) else None
        if not isinstance(earlier, str):
            return "its result.json records no line digest (not written by a batch)"
        if earlier != digest:
            return "its line changed since that run (another line digest)"
        if every_outcome:
            if finished(self.result):
                return None
            return "its earlier run did not run to its end (its wrapper was killed)"
        if settled(self.result, expect):
            return None
        outcome = self.result.get("outcome")
        kind = error_kind(self.result)
        ended = f"{outcome}, {kind}" if kind else str(outcome)
        return f"its earlier run did not pass ({ended})"
