"""The outcome table: every row."""

from __future__ import annotations

import signal

import pytest

from wrapper.core.events import AssistantMessage
from wrapper.core.outcome import ErrorKind, Outcome, ProcessExit, RunError, RunFacts, decide


def final(stop: str, error_message: str | None = None) -> AssistantMessage:
    return AssistantMessage(
        stop_reason=stop, raw_stop_reason=stop, text="t", error_message=error_message
    )


CLEAN = ProcessExit(0, None)


@pytest.mark.parametrize(
    ("facts", "outcome", "exit_status", "kind"),
    [
        (RunFacts(final=final("stop"), exit=CLEAN), Outcome.OK, 0, None),
        (RunFacts(final=final("length"), exit=CLEAN), Outcome.OK, 0, None),
        # Lingered and was cleaned up by the wrapper: still a success.
        (
            RunFacts(final=final("stop"), exit=ProcessExit(None, signal.SIGTERM), signalled=True),
            Outcome.OK,
            0,
            None,
        ),
        (
            RunFacts(final=final("stop"), exit=ProcessExit(143, None), signalled=True),
            Outcome.OK,
            0,
            None,
        ),
        (
            RunFacts(final=final("error", "overloaded"), exit=CLEAN),
            Outcome.ERROR,
            1,
            ErrorKind.AGENT_ERROR,
        ),
        (RunFacts(final=final("aborted"), exit=CLEAN), Outcome.ERROR, 1, ErrorKind.AGENT_ABORTED),
        (RunFacts(exit=CLEAN), Outcome.ERROR, 1, ErrorKind.EXITED_EARLY),
        (RunFacts(exit=ProcessExit(2, None)), Outcome.ERROR, 1, ErrorKind.EXITED_EARLY),
        (
            RunFacts(exit=ProcessExit(None, signal.SIGSEGV)),
            Outcome.ERROR,
            1,
            ErrorKind.KILLED_BY_SIGNAL,
        ),
        (
            RunFacts(final=final("stop"), exit=ProcessExit(None, signal.SIGKILL)),
            Outcome.ERROR,
            1,
            ErrorKind.KILLED_BY_SIGNAL,
        ),
        (
            RunFacts(final=final("stop"), exit=ProcessExit(3, None)),
            Outcome.ERROR,
            1,
            ErrorKind.NONZERO_EXIT,
        ),
        (
            RunFacts(
                exit=ProcessExit(None, signal.SIGTERM), signalled=True, timed_out=True, timeout=5
            ),
            Outcome.TIMEOUT,
            124,
            ErrorKind.TIMEOUT,
        ),
        (
            RunFacts(
                final=final("stop"), exit=CLEAN, signalled=True, interrupted_by=signal.SIGTERM
            ),
            Outcome.ABORTED,
            143,
            ErrorKind.INTERRUPTED,
        ),
        (
            RunFacts(interrupted_by=signal.SIGHUP, signalled=True),
            Outcome.ABORTED,
            129,
            ErrorKind.INTERRUPTED,
        ),
        (RunFacts(interrupted_by=signal.SIGINT), Outcome.ABORTED, 130, ErrorKind.INTERRUPTED),
        (
            RunFacts(spawn_error="nope: No such file or directory"),
            Outcome.SPAWN_FAILED,
            127,
            ErrorKind.SPAWN_FAILED,
        ),
        (
            RunFacts(refusal=RunError(ErrorKind.MAX_DEPTH, "too deep")),
            Outcome.REFUSED,
            1,
            ErrorKind.MAX_DEPTH,
        ),
    ],
)
def test_outcome_table(
    facts: RunFacts, outcome: Outcome, exit_status: int, kind: ErrorKind | None
) -> None:
    verdict = decide(facts)
    assert verdict.outcome is outcome
    assert verdict.exit_status == exit_status
    assert verdict.success is (outcome is Outcome.OK)
    if kind is None:
        assert verdict.error is None
    else:
        assert verdict.error is not None
        assert verdict.error.kind is kind
        assert verdict.error.message


def test_agent_error_message_names_the_agents_reason() -> None:
    verdict = decide(RunFacts(final=final("error", "529 overloaded"), exit=CLEAN))
    assert verdict.error is not None
    assert "529 overloaded" in verdict.error.message


TAIL = "Error: model 'gpt-9' not found"


@pytest.mark.parametrize(
    "facts",
    [
        RunFacts(exit=ProcessExit(1, None), stderr_tail=TAIL),
        RunFacts(exit=ProcessExit(None, signal.SIGSEGV), stderr_tail=TAIL),
        RunFacts(final=final("error"), exit=ProcessExit(1, None), stderr_tail=TAIL),
        RunFacts(final=final("stop"), exit=ProcessExit(2, None), stderr_tail=TAIL),
    ],
)
def test_a_failing_exit_quotes_the_end_of_the_agents_stderr(facts: RunFacts) -> None:
    verdict = decide(facts)
    assert verdict.error is not None
    assert verdict.error.message.endswith(f"(its stderr ends: {TAIL})")


def test_a_failing_exit_after_a_cut_answer_gives_the_agents_reason_not_stderr() -> None:
    # Claude Code and Codex end an answer cut at the output limit with exit 1,
    # saying why in their stream; stderr holds whatever else they printed.
    reason = "Incomplete response returned, reason: max_output_tokens"
    facts = RunFacts(final=final("length", reason), exit=ProcessExit(1, None), stderr_tail=TAIL)
    verdict = decide(facts)
    assert verdict.error is not None
    assert (verdict.outcome, verdict.error.kind) == (Outcome.ERROR, ErrorKind.NONZERO_EXIT)
    assert verdict.error.message == (
        f"the agent exited with status 1 after its final message: {reason}"
    )


def test_without_a_reason_of_the_agents_a_failing_exit_still_quotes_stderr() -> None:
    verdict = decide(RunFacts(final=final("length"), exit=ProcessExit(1, None), stderr_tail=TAIL))
    assert verdict.error is not None
    assert verdict.error.message.endswith(f"(its stderr ends: {TAIL})")


@pytest.mark.parametrize(
    "facts",
    [
        # A success keeps no error, whatever stderr said.
        RunFacts(final=final("stop"), exit=CLEAN, stderr_tail=TAIL),
        # A failure the agent reported with a clean exit: stderr is not the cause.
        RunFacts(final=final("error", "529 overloaded"), exit=CLEAN, stderr_tail=TAIL),
        # The wrapper's own signal ended the agent.
        RunFacts(exit=ProcessExit(None, signal.SIGTERM), signalled=True, stderr_tail=TAIL),
    ],
)
def test_stderr_is_quoted_only_when_the_agents_own_exit_failed(facts: RunFacts) -> None:
    verdict = decide(facts)
    assert verdict.error is None or TAIL not in verdict.error.message
