"""agent-wrapper: supervise coding-agent CLIs running in their JSON modes.

The public names below are imported on first use, so that a command that
needs none of them (``--version``, the guardian) starts fast.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers see of the lazy names below
    from wrapper.api import RunErrorInfo, RunOutcome, RunResult, abort, run, run_async, steer
    from wrapper.commands.steer import Receipt
    from wrapper.core.completion import CompletionTracker, Limits, SendSignal
    from wrapper.core.events import (
        TERMINAL_STOP_REASONS,
        StopReason,
        canonical_stop_reason,
        is_terminal,
    )
    from wrapper.core.framing import LineFramer
    from wrapper.core.outcome import ErrorKind, Outcome, RunFacts, Verdict, decide
    from wrapper.core.version import VERSION as __version__
    from wrapper.files.transcript import last_assistant_message
    from wrapper.supervision.prepare import RunUsageError

_EXPORTS = {
    "TERMINAL_STOP_REASONS": "wrapper.core.events",
    "StopReason": "wrapper.core.events",
    "canonical_stop_reason": "wrapper.core.events",
    "is_terminal": "wrapper.core.events",
    "CompletionTracker": "wrapper.core.completion",
    "Limits": "wrapper.core.completion",
    "SendSignal": "wrapper.core.completion",
    "LineFramer": "wrapper.core.framing",
    "ErrorKind": "wrapper.core.outcome",
    "Outcome": "wrapper.core.outcome",
    "RunFacts": "wrapper.core.outcome",
    "Verdict": "wrapper.core.outcome",
    "decide": "wrapper.core.outcome",
    "last_assistant_message": "wrapper.files.transcript",
    "run": "wrapper.api",
    "run_async": "wrapper.api",
    "RunResult": "wrapper.api",
    "RunOutcome": "wrapper.api",
    "RunErrorInfo": "wrapper.api",
    "RunUsageError": "wrapper.supervision.prepare",
    "steer": "wrapper.api",
    "abort": "wrapper.api",
    "Receipt": "wrapper.commands.steer",
}

__all__ = [  # noqa: RUF022 - the version first, then the lazy names as listed above
    "__version__",
    "TERMINAL_STOP_REASONS",
    "StopReason",
    "canonical_stop_reason",
    "is_terminal",
    "CompletionTracker",
    "Limits",
    "SendSignal",
    "LineFramer",
    "ErrorKind",
    "Outcome",
    "RunFacts",
    "Verdict",
    "decide",
    "last_assistant_message",
    "run",
    "run_async",
    "RunResult",
    "RunOutcome",
    "RunErrorInfo",
    "RunUsageError",
    "steer",
    "abort",
    "Receipt",
]


def __getattr__(name: str) -> object:
    if name == "__version__":
        # Lazy too: the fake agent imports the registry with a plain python3,
        # and nothing of the package but the registry is loaded for it.
        from wrapper.core.version import VERSION  # noqa: PLC0415

        globals()[name] = VERSION
        return VERSION
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'wrapper' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
