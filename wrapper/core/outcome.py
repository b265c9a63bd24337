"""How a run ended: outcome, success, error and the wrapper's exit status.

This is the one place where the outcome table lives:

================================================  ==============  =======  ======
situation                                         outcome         success  exit
================================================  ==============  =======  ======
agent finished on ``stop``/``length``             ``ok``          true     0
(lingering, then cleaned up, included)
agent's own terminal ``error`` or ``aborted``,    ``error``       false    1
exit before a terminal stop, death by a signal
the wrapper did not send, non-zero exit after a
terminal stop
``--timeout``, ``--attempt-timeout`` or           ``timeout``     false    124
``--idle-timeout`` expired
an ACP agent closed its output mid-turn and   ``error``       false    1
did not exit (``stopped_answering``)
a blocked stop could not be carried out            ``error``       false    1
(``steer_failed``, ``prompt_blocked``)
a Stop handler failed under fail-closed hooks      ``error``       false    1
(``hook_failed``)
the wrapper received SIGTERM/SIGINT/SIGHUP/       ``aborted``     false    128+N
SIGQUIT (N of the first)
the command could not be started                  ``spawn_failed`` false   127
refused before starting (nesting, prompt blocked) ``refused``     false    1
the wrapper itself failed (a bug)                 ``error``       false    1
usage error                                       no run          --       2
result.json could not be written anywhere         any             any      3
================================================  ==============  =======  ======
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass, replace
from typing import Any

from wrapper.core.events import SESSION_FAILED, AssistantMessage, StopReason

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_RESULT = 3
EXIT_TIMEOUT = 124
EXIT_SPAWN_FAILED = 127
EXIT_SIGNAL_BASE = 128


class Outcome(enum.StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    ABORTED = "aborted"
    SPAWN_FAILED = "spawn_failed"
    REFUSED = "refused"


class ErrorKind(enum.StrEnum):
    """The closed list of ``error.kind`` values."""

    AGENT_ERROR = "agent_error"
    AGENT_ABORTED = "agent_aborted"
    EXITED_EARLY = "exited_early"
    KILLED_BY_SIGNAL = "killed_by_signal"
    NONZERO_EXIT = "nonzero_exit"
    SPAWN_FAILED = "spawn_failed"
    TIMEOUT = "timeout"
    ATTEMPT_TIMEOUT = "attempt_timeout"
    IDLE_TIMEOUT = "idle_timeout"
    INTERRUPTED = "interrupted"
    #: ``agent-wrapper abort`` (or ``wrapper.abort``) ended the run.
    ABORT_REQUESTED = "abort_requested"
    #: The run reached its ``--max-cost`` or ``--max-tokens`` cap and was stopped.
    BUDGET_EXCEEDED = "budget_exceeded"
    MAX_DEPTH = "max_depth"
    PROMPT_BLOCKED = "prompt_blocked"
    STEER_FAILED = "steer_failed"
    NO_COMPLETION_SIGNAL = "no_completion_signal"
    IDLE_FAILED = "idle_failed"
    #: A live session's agent closed its output mid-turn and did not exit.
    STOPPED_ANSWERING = "stopped_answering"
    HOOK_FAILED = "hook_failed"
    #: The Stop handlers still blocked when the steer limit was reached, and
    #: the run was asked to fail for it (``--fail-on-max-steers``).
    GATE_NOT_PASSED = "gate_not_passed"
    INTERNAL = "internal"
    #: Written by the guardian when the wrapper died without finishing; never
    #: decided here, since a wrapper that decides is alive.
    WRAPPER_KILLED = "wrapper_killed"


@dataclass(frozen=True, slots=True)
class RunError:
    """What went wrong with a run: its kind and a message for people."""

    kind: ErrorKind
    message: str
    #: The provider's HTTP status, when the agent's failed API call reported one.
    api_status: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "message": self.message, "apiStatus": self.api_status}


@dataclass(frozen=True, slots=True)
class ProcessExit:
    """How the child ended: an exit code, or the signal that killed it."""

    code: int | None
    signal: signal.Signals | None

    @classmethod
    def from_returncode(cls, returncode: int) -> ProcessExit:
        if returncode < 0:
            return cls(None, signal_or_none(-returncode))
        return cls(returncode, None)

    @property
    def signal_name(self) -> str | None:
        return self.signal.name if self.signal is not None else None

    def describe(self) -> str:
        if self.signal is not None:
            return f"was killed by {self.signal.name}"
        return f"exited with status {self.code}"


def signal_or_none(number: int) -> signal.Signals | None:
    try:
        return signal.Signals(number)
    except ValueError:
        return None


#: Why a run ended that its caller cancelled: a person reading the result of
#: a cancelled call must not look for a signal nobody sent.
CANCELLED_BY_CALLER = "the run's caller cancelled it"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFacts:
    """What is known of a run when it ends, for ``decide``."""

    final: AssistantMessage | None = None
    exit: ProcessExit | None = None
    #: The wrapper signalled the child (cleanup, timeout, interruption).
    signalled: bool = False
    timed_out: bool = False
    interrupted_by: signal.Signals | None = None
    #: The interruption was the run's caller cancelling it (the Python API's
    #: cancel scope), not a signal to the wrapper.
    cancelled: bool = False
    #: The interruption was an abort asked through the run's control socket:
    #: its reason ("" when none was given).
    abort_reason: str | None = None
    #: The interruption was the run reaching a cap: the spend and the cap.
    budget_exceeded: str | None = None
    spawn_error: str | None = None
    refusal: RunError | None = None
    timeout: float | None = None
    #: The attempt's own limit expired (and the Stop hooks allowed the stop).
    attempt_timed_out: bool = False
    attempt_timeout: float | None = None
    #: The agent was silent for longer than --idle-timeout.
    idle_timed_out: bool = False
    idle_timeout: float | None = None
    #: The agent closed its output while it owed an answer and did not exit
    #: within the drain timeout (then it was terminated).
    stopped_answering: bool = False
    drain_timeout: float | None = None
    #: A stop was blocked but could not be carried out.
    steer_failure: RunError | None = None
    #: The wrapper itself failed (a bug); the child was still cleaned up.
    internal_error: str | None = None
    #: The end of the agent's stderr, quoted when its own failing exit ends the run.
    stderr_tail: str | None = None
    #: Why the agent's output held no line its dialect recognised (the
    #: likely cause), when it held none; said when the run ends without a
    #: final message.
    unrecognised_output: str | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """A run's outcome, whether it succeeded, its exit status and error."""

    outcome: Outcome
    success: bool
    exit_status: int
    error: RunError | None


def decide(facts: RunFacts) -> Verdict:
    if facts.refusal is not None:
        return Verdict(Outcome.REFUSED, False, EXIT_FAILED, facts.refusal)
    if facts.internal_error is not None:
        return _failed(ErrorKind.INTERNAL, facts.internal_error)
    if facts.spawn_error is not None:
        error = RunError(ErrorKind.SPAWN_FAILED, facts.spawn_error)
        return Verdict(Outcome.SPAWN_FAILED, False, EXIT_SPAWN_FAILED, error)
    if facts.interrupted_by is not None and facts.budget_exceeded is not None:
        return _failed(ErrorKind.BUDGET_EXCEEDED, f"{facts.budget_exceeded}; the agent was stopped")
    if facts.interrupted_by is not None and facts.abort_reason is not None:
        why = f": {facts.abort_reason}" if facts.abort_reason else " (no reason given)"
        error = RunError(ErrorKind.ABORT_REQUESTED, f"the run was aborted on request{why}")
        return Verdict(Outcome.ABORTED, False, EXIT_SIGNAL_BASE + int(signal.SIGTERM), error)
    if facts.interrupted_by is not None:
        name = facts.interrupted_by.name
        said = CANCELLED_BY_CALLER if facts.cancelled else f"the wrapper received {name}"
        error = RunError(ErrorKind.INTERRUPTED, f"{said} and stopped the agent")
        return Verdict(Outcome.ABORTED, False, EXIT_SIGNAL_BASE + int(facts.interrupted_by), error)
    if facts.timed_out:
        limit = f" ({facts.timeout:g}s)" if facts.timeout is not None else ""
        error = RunError(ErrorKind.TIMEOUT, f"the run's --timeout{limit} expired")
        return Verdict(Outcome.TIMEOUT, False, EXIT_TIMEOUT, error)
    if facts.idle_timed_out:
        limit = f"{facts.idle_timeout:g}s" if facts.idle_timeout is not None else "too long"
        error = RunError(
            ErrorKind.IDLE_TIMEOUT,
            f"the agent wrote nothing for {limit} while no tool was running (--idle-timeout)",
        )
        return Verdict(Outcome.TIMEOUT, False, EXIT_TIMEOUT, error)
    if facts.stopped_answering:
        within = f" within {facts.drain_timeout:g}s" if facts.drain_timeout is not None else ""
        return _failed(
            ErrorKind.STOPPED_ANSWERING,
            "the agent stopped answering: it closed its output in the middle of a turn "
            f"and did not exit{within} (--drain-timeout), so it was terminated",
        )
    if facts.steer_failure is not None:
        return Verdict(Outcome.ERROR, False, EXIT_FAILED, facts.steer_failure)
    if facts.attempt_timed_out:
        limit = f" ({facts.attempt_timeout:g}s)" if facts.attempt_timeout is not None else ""
        error = RunError(
            ErrorKind.ATTEMPT_TIMEOUT, f"the attempt's --attempt-timeout{limit} expired"
        )
        return Verdict(Outcome.TIMEOUT, False, EXIT_TIMEOUT, error)
    return _agent_verdict(facts)


def _failed(kind: ErrorKind, message: str) -> Verdict:
    return Verdict(Outcome.ERROR, False, EXIT_FAILED, RunError(kind, message))


def _agent_verdict(facts: RunFacts) -> Verdict:
    verdict = _agent_verdict_alone(facts)
    if verdict.error is not None and facts.final is not None and facts.unrecognised_output:
        # A final message that only the exit status implied: why the stream said nothing.
        message = f"{verdict.error.message} ({facts.unrecognised_output})"
        verdict = replace(verdict, error=replace(verdict.error, message=message))
    exit_ = facts.exit
    failed_exit = exit_ is not None and (exit_.code or exit_.signal is not None)
    # A session that could not go on ends with the wrapper closing the
    # agent's input (and maybe signalling it): whatever its exit, the agent
    # said why on its stderr, if anywhere.
    session_failed = facts.final is not None and facts.final.raw_stop_reason == SESSION_FAILED
    quoted = session_failed or (failed_exit and not facts.signalled)
    if verdict.error is None or not facts.stderr_tail or not quoted:
        return verdict
    own_reason = facts.final is not None and facts.final.error_message
    if verdict.error.kind is ErrorKind.NONZERO_EXIT and own_reason:
        return verdict  # the agent gave its own reason for the exit
    message = quoting_stderr(verdict.error.message, facts.stderr_tail)
    return replace(verdict, error=replace(verdict.error, message=message))


def quoting_stderr(message: str, tail: str | None) -> str:
    """``message`` followed by the end of the agent's stderr, when it said anything."""
    return f"{message} (its stderr ends: {tail})" if tail else message


def _agent_verdict_alone(facts: RunFacts) -> Verdict:
    final, exit_ = facts.final, facts.exit
    own_exit = exit_ is not None and not facts.signalled
    if final is None:
        if exit_ is not None and exit_.signal is not None and own_exit:
            return _failed(
                ErrorKind.KILLED_BY_SIGNAL,
                f"the agent was killed by {exit_.signal.name} before it finished",
            )
        how = exit_.describe() if exit_ is not None else "ended"
        why = (
            f": {facts.unrecognised_output}"
            if facts.unrecognised_output
            else " (no terminal stop reason)"
        )
        return _failed(ErrorKind.EXITED_EARLY, f"the agent {how} without a final message{why}")
    if final.stop_reason == StopReason.ERROR:
        detail = final.error_message or final.raw_stop_reason or "error"
        error = RunError(
            ErrorKind.AGENT_ERROR, f"the agent's last turn failed: {detail}", final.api_status
        )
        return Verdict(Outcome.ERROR, False, EXIT_FAILED, error)
    if final.stop_reason == StopReason.ABORTED:
        detail = final.error_message or "the agent reported its turn as aborted"
        return _failed(ErrorKind.AGENT_ABORTED, detail)
    if exit_ is not None and own_exit:
        if exit_.signal is not None:
            return _failed(
                ErrorKind.KILLED_BY_SIGNAL,
                f"the agent was killed by {exit_.signal.name} after its final message",
            )
        if exit_.code:
            message = f"the agent exited with status {exit_.code} after its final message"
            if final.error_message:
                # The agent's own reason (an answer cut at the output limit,
                # which some CLIs report as a failure) says more than stderr.
                message = f"{message}: {final.error_message}"
            return _failed(ErrorKind.NONZERO_EXIT, message)
    return Verdict(Outcome.OK, True, EXIT_OK, None)
