"""The completion tracker on its own: no process, no clock."""

from __future__ import annotations

import math
import signal

from wrapper.core.completion import (
    CancelTurn,
    CheckActivity,
    CompletionTracker,
    Effect,
    Limits,
    Phase,
    SendSignal,
)
from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    Compaction,
    GraceCancelled,
    GraceStarted,
    Retry,
    TextDelta,
    ToolEnded,
    ToolStarted,
    TurnStarted,
)

LIMITS = Limits(grace=1.0, settle_grace=0.2, kill_after=3.0)


def message(stop: str | None, text: str = "") -> AssistantMessage:
    return AssistantMessage(stop_reason=stop, raw_stop_reason=stop, text=text)


def signals(effects: list[Effect]) -> list[signal.Signals]:
    return [e.signal for e in effects if isinstance(e, SendSignal)]


def test_tool_use_turn_does_not_arm_the_grace_timer() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    assert tracker.observe(message("toolUse", "interim"), 1.0) == []
    assert tracker.next_deadline == math.inf
    assert tracker.final is None
    # A tool that runs for an hour is never interrupted.
    tracker.observe(ToolStarted(tool="bash"), 1.0)
    assert tracker.tick(3600.0) == []
    assert tracker.phase is Phase.WORKING


def test_missing_and_unknown_stop_reasons_never_arm_the_timer() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    for stop in (None, "pause_turn", "weird"):
        assert tracker.observe(message(stop), 1.0) == []
    assert tracker.next_deadline == math.inf


def test_terminal_stop_arms_grace_then_sigterm_then_sigkill() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    effects = tracker.observe(message("stop", "done"), 10.0)
    assert effects == [GraceStarted(seconds=1.0, stop_reason="stop", settled=False)]
    assert tracker.next_deadline == 11.0
    assert tracker.tick(10.5) == []
    assert signals(tracker.tick(11.0)) == [signal.SIGTERM]
    assert tracker.forced_cleanup
    assert tracker.next_deadline == 14.0
    assert tracker.tick(13.9) == []
    assert signals(tracker.tick(14.0)) == [signal.SIGKILL]
    assert tracker.phase is Phase.KILLING
    assert tracker.next_deadline == math.inf
    assert tracker.final is not None
    assert tracker.final.text == "done"


def test_exit_during_grace_needs_no_signal() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    tracker.observe(message("stop"), 1.0)
    tracker.process_exited()
    assert tracker.next_deadline == math.inf
    assert tracker.tick(100.0) == []
    assert not tracker.signalled
    assert not tracker.forced_cleanup


def test_settled_agent_gets_the_short_settle_grace() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    tracker.observe(message("stop"), 1.0)
    effects = tracker.observe(AgentEnded(will_retry=False), 1.1)
    assert effects == [GraceStarted(seconds=0.2, stop_reason="stop", settled=True)]
    assert math.isclose(tracker.next_deadline, 1.3)
    # agent_settled afterwards does not push the deadline back.
    assert tracker.observe(AgentEnded(will_retry=False, settled=True), 1.25) == []
    assert math.isclose(tracker.next_deadline, 1.3)


def test_graces_taken_later_apply_to_the_next_grace() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    tracker.use_graces(2.0, 1.5)
    assert tracker.observe(message("stop"), 1.0) == [
        GraceStarted(seconds=2.0, stop_reason="stop", settled=False)
    ]
    assert math.isclose(tracker.next_deadline, 3.0)
    # the settle grace may shorten it, and is the one taken
    tracker.use_graces(2.0, 0.5)
    tracker.observe(AgentEnded(will_retry=False, settled=True), 1.2)
    assert math.isclose(tracker.next_deadline, 1.7)


def test_agent_end_without_a_final_message_arms_nothing() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    assert tracker.observe(AgentEnded(will_retry=False, settled=True), 1.0) == []
    assert tracker.next_deadline == math.inf


def test_new_turn_after_a_terminal_message_cancels_grace_and_forgets_it() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    tracker.observe(message("stop", "early"), 1.0)
    effects = tracker.observe(TurnStarted(), 1.5)
    assert [type(e) for e in effects] == [GraceCancelled]
    assert tracker.final is None
    assert tracker.tick(5.0) == []
    tracker.observe(message("stop", "late"), 6.0)
    assert tracker.final is not None
    assert tracker.final.text == "late"


def test_provider_error_then_retry_survives_and_ends_on_the_later_final() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    tracker.observe(message("error"), 1.0)
    assert tracker.phase is Phase.GRACE
    cancelled = tracker.observe(AgentEnded(will_retry=True), 1.01)
    assert [type(e) for e in cancelled] == [GraceCancelled]
    tracker.observe(Retry(phase="start", retry_attempt=1, delay_ms=5000), 1.02)
    # A long retry delay passes without any signal.
    assert tracker.tick(7.0) == []
    tracker.observe(TurnStarted(), 7.0)
    tracker.observe(message("stop", "recovered"), 9.0)
    assert tracker.final is not None
    assert tracker.final.text == "recovered"
    assert tracker.phase is Phase.GRACE


def test_retry_without_new_turn_rearms_the_grace_when_it_ends() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    tracker.observe(message("error"), 1.0)
    tracker.observe(Retry(phase="start"), 1.1)
    assert tracker.next_deadline == math.inf
    effects = tracker.observe(Retry(phase="end", success=False), 2.0)
    assert [type(e) for e in effects] == [GraceStarted]
    assert tracker.next_deadline == 3.0
    assert tracker.final is not None
    assert tracker.final.stop_reason == "error"


def test_compaction_pauses_the_grace() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    tracker.observe(message("stop"), 1.0)
    tracker.observe(Compaction(phase="start"), 1.5)
    assert tracker.tick(30.0) == []
    tracker.observe(Compaction(phase="end"), 30.0)
    assert tracker.next_deadline == 31.0


def test_deltas_and_tool_ends_do_not_change_anything() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    tracker.observe(message("stop"), 1.0)
    assert tracker.observe(TextDelta(text="x"), 1.1) == []
    assert tracker.observe(ToolEnded(tool="bash"), 1.2) == []
    assert tracker.next_deadline == 2.0


def test_whole_run_timeout_terminates_even_mid_tool() -> None:
    limits = Limits(grace=1, settle_grace=0.2, kill_after=3, run_deadline=160.0)
    tracker = CompletionTracker(limits, 100.0)
    tracker.observe(ToolStarted(tool="bash"), 101.0)
    assert tracker.next_deadline == 160.0
    assert signals(tracker.tick(160.0)) == [signal.SIGTERM]
    assert tracker.timed_out
    assert not tracker.forced_cleanup
    assert signals(tracker.tick(163.0)) == [signal.SIGKILL]


def test_attempt_timeout_counts_from_the_attempt_and_yields_to_the_run_deadline() -> None:
    limits = Limits(grace=1, settle_grace=0.2, kill_after=3, run_deadline=200.0, attempt_timeout=30)
    tracker = CompletionTracker(limits, 100.0)
    assert tracker.next_deadline == 130.0
    assert signals(tracker.tick(130.0)) == [signal.SIGTERM]
    assert tracker.attempt_timed_out
    assert not tracker.timed_out
    assert tracker.next_deadline == 133.0

    late = CompletionTracker(limits, 190.0)
    assert late.next_deadline == 200.0
    late.tick(200.0)
    assert late.timed_out
    assert not late.attempt_timed_out


def test_wrapper_signal_terminates_and_a_second_one_kills() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    assert signals(tracker.interrupt(signal.SIGHUP, 1.0)) == [signal.SIGTERM]
    assert tracker.interrupted_by is signal.SIGHUP
    assert signals(tracker.interrupt(signal.SIGTERM, 1.5)) == [signal.SIGKILL]
    assert tracker.interrupted_by is signal.SIGHUP
    assert tracker.interrupt(signal.SIGTERM, 1.6) == []


def test_signal_after_exit_changes_nothing() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    tracker.process_exited()
    assert tracker.interrupt(signal.SIGTERM, 1.0) == []
    assert tracker.interrupted_by is None


def test_terminal_message_during_termination_does_not_rearm() -> None:
    tracker = CompletionTracker(LIMITS, 0.0)
    tracker.interrupt(signal.SIGTERM, 1.0)
    assert tracker.observe(message("stop"), 1.5) == []
    assert tracker.phase is Phase.TERMINATING


def test_idle_timeout_counts_silence_outside_tools() -> None:
    limits = Limits(grace=1, settle_grace=0.2, kill_after=3, idle_timeout=10)
    tracker = CompletionTracker(limits, 0.0)
    assert tracker.next_deadline == 10.0
    tracker.output_seen(4.0)
    assert tracker.tick(10.0) == [], "output moved the deadline"
    assert tracker.next_deadline == 14.0
    tracker.observe(ToolStarted(tool="bash"), 5.0)
    assert tracker.next_deadline == math.inf, "a running tool may be silent"
    tracker.observe(ToolEnded(tool="bash"), 30.0)
    tracker.output_seen(30.0)
    assert tracker.next_deadline == 40.0
    assert signals(tracker.tick(40.0)) == [signal.SIGTERM]
    assert tracker.idle_timed_out
    assert not tracker.timed_out


def test_a_due_idle_deadline_asks_for_a_look_at_the_tree_first() -> None:
    limits = Limits(
        grace=1, settle_grace=0.2, kill_after=3, idle_timeout=10, idle_looks_at_tree=True
    )
    tracker = CompletionTracker(limits, 0.0)
    tracker.output_seen(2.0)
    assert tracker.tick(12.0) == [CheckActivity(since=2.0)]
    assert tracker.next_deadline == math.inf, "one look per deadline: none while it is taken"
    assert tracker.activity(True, 12.0) == []
    assert tracker.next_deadline == 22.0, "work in the tree counts as output"
    assert tracker.tick(22.0) == [CheckActivity(since=12.0)]
    assert signals(tracker.activity(False, 22.0)) == [signal.SIGTERM]
    assert tracker.idle_timed_out
    assert tracker.activity(True, 23.0) == [], "an answer nobody asked for changes nothing"


def test_idle_timeout_does_not_cut_the_grace() -> None:
    limits = Limits(grace=5, settle_grace=0.2, kill_after=3, idle_timeout=1)
    tracker = CompletionTracker(limits, 0.0)
    tracker.observe(message("stop"), 0.5)
    assert tracker.next_deadline == 5.5
    tracker.tick(5.5)
    assert not tracker.idle_timed_out
    assert tracker.forced_cleanup


def test_a_held_turn_end_starts_no_grace_until_released() -> None:
    limits = Limits(
        grace=1.0,
        settle_grace=0.2,
        kill_after=3.0,
        run_deadline=100.0,
        attempt_timeout=5.0,
        idle_timeout=2.0,
    )
    tracker = CompletionTracker(limits, 0.0)
    tracker.hold()
    assert tracker.observe(message("stop", "done"), 1.0) == []
    # Only the run's deadline counts while the stop is being decided.
    assert tracker.next_deadline == 100.0
    assert tracker.tick(50.0) == []
    assert tracker.phase is Phase.WORKING
    effects = tracker.release(50.0)
    assert effects == [GraceStarted(seconds=1.0, stop_reason="stop", settled=False)]
    assert signals(tracker.tick(51.0)) == [signal.SIGTERM]


def test_a_held_turn_end_still_ends_at_the_run_deadline() -> None:
    tracker = CompletionTracker(
        Limits(grace=1.0, settle_grace=0.2, kill_after=3.0, run_deadline=10.0), 0.0
    )
    tracker.hold()
    tracker.observe(message("stop"), 1.0)
    assert signals(tracker.tick(10.0)) == [signal.SIGTERM]
    assert tracker.timed_out
    assert tracker.release(10.5) == []


def test_a_cancelling_attempt_limit_cancels_the_turn_then_terminates_if_it_goes_on() -> None:
    limits = Limits(
        grace=1.0, settle_grace=0.2, kill_after=3.0, attempt_timeout=5.0, attempt_limit_cancels=True
    )
    tracker = CompletionTracker(limits, 0.0)
    effects = tracker.tick(5.0)
    assert [type(e) for e in effects] == [CancelTurn]
    assert tracker.attempt_timed_out
    assert tracker.phase is Phase.WORKING
    assert signals(tracker.tick(7.9)) == []
    assert signals(tracker.tick(8.0)) == [signal.SIGTERM]


def test_a_cancelled_turn_that_ends_is_gated_not_terminated() -> None:
    limits = Limits(
        grace=1.0, settle_grace=0.2, kill_after=3.0, attempt_timeout=5.0, attempt_limit_cancels=True
    )
    tracker = CompletionTracker(limits, 0.0)
    tracker.tick(5.0)
    tracker.hold()
    assert tracker.observe(message("aborted"), 6.0) == []
    assert signals(tracker.tick(20.0)) == []
    assert tracker.phase is Phase.WORKING


def test_an_agent_whose_output_closed_mid_turn_is_ended_after_the_drain_timeout() -> None:
    tracker = CompletionTracker(
        Limits(grace=1.0, settle_grace=1.0, kill_after=2.0, drain_timeout=3.0), 0.0
    )
    tracker.output_closed(10.0)
    assert tracker.next_deadline == 13.0
    assert tracker.tick(12.9) == []
    (term,) = tracker.tick(13.0)
    assert isinstance(term, SendSignal)
    assert term.signal is signal.SIGTERM
    assert "--drain-timeout" in term.reason
    assert tracker.stopped_answering
    (kill,) = tracker.tick(15.0)
    assert isinstance(kill, SendSignal)
    assert kill.signal is signal.SIGKILL


def test_an_agent_whose_output_closed_and_that_exits_is_not_ended() -> None:
    tracker = CompletionTracker(Limits(grace=1.0, settle_grace=1.0, kill_after=2.0), 0.0)
    tracker.output_closed(10.0)
    tracker.process_exited()
    assert tracker.tick(100.0) == []
    assert not tracker.stopped_answering


def test_the_drain_timeout_default_is_the_command_lines() -> None:
    from wrapper.core.config import DEFAULT_DRAIN_TIMEOUT

    assert (
        Limits(grace=1.0, settle_grace=1.0, kill_after=1.0).drain_timeout == DEFAULT_DRAIN_TIMEOUT
    )


def test_a_turn_cancelled_for_a_steer_says_so_an_attempt_limit_does_not() -> None:
    limits = Limits(
        grace=1.0, settle_grace=0.2, kill_after=3.0, attempt_timeout=5.0, attempt_limit_cancels=True
    )
    steered = CompletionTracker(limits, 0.0)
    (cancel,) = steered.steer(1.0, 60.0)
    assert isinstance(cancel, CancelTurn)
    assert cancel.for_steer
    limited = CompletionTracker(limits, 0.0)
    (cancel,) = limited.tick(5.0)
    assert isinstance(cancel, CancelTurn)
    assert not cancel.for_steer


def test_a_sigterm_that_waits_for_a_cancel_keeps_the_sigkill_after_it() -> None:
    tracker = CompletionTracker(Limits(grace=1.0, settle_grace=0.2, kill_after=3.0), 0.0)
    assert signals(tracker.interrupt(signal.SIGTERM, 10.0)) == [signal.SIGTERM]
    # The shell sends the SIGTERM only once the cancel before it had its moment.
    tracker.term_sent_at(11.0)
    assert tracker.next_deadline == 14.0
    assert signals(tracker.tick(13.9)) == []
    assert signals(tracker.tick(14.0)) == [signal.SIGKILL]
