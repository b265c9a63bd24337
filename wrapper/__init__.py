"""agent-wrapper: supervise coding-agent CLIs running in their JSON modes.

The public names below are imported on first use, so that a command that
needs none of them (``--version``, the guardian) starts fast.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers see of the lazy names below
    from wrapper.api import RunResult, run, run_async
    from wrapper.completion import CompletionTracker, Limits, SendSignal
    from wrapper.events import TERMINAL_STOP_REASONS, StopReason, canonical_stop_reason, is_terminal
    from wrapper.framing import LineFramer
    from wrapper.outcome import ErrorKind, Outcome, RunFacts, Verdict, decide
    from wrapper.prepare import RunUsageError
    from wrapper.transcript import last_assistant_message

__version__ = "0.1.0"

_EXPORTS = {
    "TERMINAL_STOP_REASONS": "wrapper.events",
    "StopReason": "wrapper.events",
    "canonical_stop_reason": "wrapper.events",
    "is_terminal": "wrapper.events",
    "CompletionTracker": "wrapper.completion",
    "Limits": "wrapper.completion",
    "SendSignal": "wrapper.completion",
    "LineFramer": "wrapper.framing",
    "ErrorKind": "wrapper.outcome",
    "Outcome": "wrapper.outcome",
    "RunFacts": "wrapper.outcome",
    "Verdict": "wrapper.outcome",
    "decide": "wrapper.outcome",
    "last_assistant_message": "wrapper.transcript",
    "run": "wrapper.api",
    "run_async": "wrapper.api",
    "RunResult": "wrapper.api",
    "RunUsageError": "wrapper.prepare",
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
    "RunUsageError",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'wrapper' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
