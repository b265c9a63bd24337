"""What a run knows of how it went so far: the facts its outcome is decided
from (``wrapper.core.outcome.decide``), taken from its attempts, the
wrapper's signals and the stop gate's steering."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from wrapper.core.config import RunConfig
from wrapper.core.outcome import ErrorKind, RunError, quoting_stderr
from wrapper.core.result import AttemptRecord
from wrapper.core.steering import Steering
from wrapper.dialects import Dialect
from wrapper.dialects.base import unrecognised_output
from wrapper.supervision.own_stop import died_of_foreign_stop


def facts_so_far(
    attempts: Sequence[AttemptRecord],
    interrupts: Sequence[signal.Signals],
    steering: Steering,
    config: RunConfig,
    dialect: Dialect,
) -> dict[str, Any]:
    """``RunFacts``' fields as the last attempt that ran left them."""
    ran = [record for record in attempts if record.pid is not None]
    failure = None
    if steering.failure is not None:
        kind = ErrorKind(steering.failure_kind or ErrorKind.STEER_FAILED)
        failure = RunError(kind, steering.failure)
    if not ran:
        return {
            "interrupted_by": interrupts[0] if interrupts else None,
            "steer_failure": failure,
        }
    record = ran[-1]
    tracker = record.tracker
    return {
        "final": tracker.final if tracker else None,
        "exit": record.exit,
        "signalled": bool(tracker and tracker.signalled),
        "timed_out": bool(tracker and tracker.timed_out),
        "attempt_timed_out": bool(tracker and tracker.attempt_timed_out),
        "idle_timed_out": bool(tracker and tracker.idle_timed_out),
        "stopped_answering": bool(tracker and tracker.stopped_answering),
        "drain_timeout": config.drain_timeout,
        "idle_timeout": config.idle_timeout,
        # A death by a stop signal the wrapper did not send, followed by one
        # of its own (a job cancelled as a whole), is an interruption too.
        "interrupted_by": (tracker.interrupted_by if tracker else None)
        or (interrupts[0] if interrupts and died_of_foreign_stop(record) else None),
        "timeout": config.timeout,
        "attempt_timeout": config.attempt_timeout,
        "steer_failure": failure,
        "stderr_tail": record.stderr_excerpt(),
        "unrecognised_output": None
        if record.recognised
        else unrecognised_output(dialect, record.stdout_lines),
    }


def refused_resume(record: AttemptRecord) -> str | None:
    """Why a resumed agent never took the steer: it exited non-zero on its own
    without writing a byte (a session it no longer holds, say); else None."""
    exit_, tracker = record.exit, record.tracker
    if (
        record.stdout_bytes
        or exit_ is None
        or not exit_.code
        or (tracker is not None and tracker.signalled)
    ):
        return None
    return quoting_stderr(
        f"the agent could not be resumed to take the steer: it {exit_.describe()} "
        "without writing anything",
        record.stderr_excerpt(),
    )


def only_keyboard_interrupts(exc: BaseException) -> bool:
    """Whether ``exc`` is a KeyboardInterrupt, or a group of nothing else
    (as it comes out of the nurseries it went through)."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    if isinstance(exc, BaseExceptionGroup):
        matched, rest = exc.split(KeyboardInterrupt)
        return matched is not None and rest is None
    return False


def innermost(exc: BaseException) -> str:
    """The first exception inside ``exc`` and its groups, named, for a message."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


@trio.lowlevel.enable_ki_protection
async def ki_protected(work: Callable[[], Awaitable[None]]) -> None:
    """``work``, where a Ctrl-C is not raised but goes to the loop's main
    task (under a caller's loop, trio raises it wherever code is
    unprotected). Raised here, beside the run rather than in it, it would
    cancel the run halfway, without a result; the main task (``wrapper.api``)
    ends the run as SIGINT ends it instead."""
    await work()
