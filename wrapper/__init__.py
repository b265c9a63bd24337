"""agent-wrapper: supervise coding-agent CLIs running in their JSON modes."""

from wrapper.completion import CompletionTracker, Limits, SendSignal
from wrapper.events import TERMINAL_STOP_REASONS, StopReason, canonical_stop_reason, is_terminal
from wrapper.framing import LineFramer
from wrapper.outcome import ErrorKind, Outcome, RunFacts, Verdict, decide

__version__ = "0.1.0"

__all__ = [
    "TERMINAL_STOP_REASONS",
    "CompletionTracker",
    "ErrorKind",
    "Limits",
    "LineFramer",
    "Outcome",
    "RunFacts",
    "SendSignal",
    "StopReason",
    "Verdict",
    "__version__",
    "canonical_stop_reason",
    "decide",
    "is_terminal",
]
