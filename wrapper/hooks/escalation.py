"""Escalating to a person: notify once, then wait for a reply through the
run directory (see ``wrapper.files.mailbox``) or for the escalation timeout.

A notifier or summarizer that fails is logged and the rest goes on: the
notification goes out without a summary, the wait goes on without a
notification.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from wrapper.core.config import RunConfig
from wrapper.core.events import Event, WarningEvent
from wrapper.core.jsonout import dumps
from wrapper.core.limits import DESKTOP_TIMEOUT, NOTIFY_TIMEOUT, REPLY_POLL
from wrapper.core.policy import EscalationRecord
from wrapper.core.summary import RunSummary
from wrapper.files import mailbox
from wrapper.hooks.runner import HookContext, run_process
from wrapper.process.invocation import run_command

#: The question in a notification: the end of the last assistant message.
QUESTION_CHARS = 800
#: A summary longer than this is cut.
SUMMARY_CHARS = 2000


def signal_help(wrapper_bin: str | None) -> str:
    """The steer the ``signal`` policy sends: exactly what to run."""
    command = run_command(wrapper_bin)
    return (
        "You have not signalled that the task is complete. If it is, run:\n"
        f"  {command} signal complete --message 'what you did'\n"
        "If you need a person to decide something, run:\n"
        f"  {command} signal escalate --message 'your question'\n"
        "Otherwise continue with the task. Signal when you are done, then end your turn."
    )


async def notify_person(
    record: EscalationRecord,
    config: RunConfig,
    summary: RunSummary,
    ctx: HookContext,
    emit: Callable[[Event], None],
) -> list[str]:
    """Send the escalation's notifications; returns how it was sent."""
    settings = config.settings
    question = (record.question or "")[-QUESTION_CHARS:] or None
    payload: dict[str, Any] = {
        "runId": config.run_id,
        "label": config.label,
        "cwd": str(config.cwd),
        "runDir": str(config.run_dir),
        "escalationId": record.id,
        "question": question,
        "recentTools": ", ".join(summary.recent_tools),
        "summary": await _summary(config, summary, ctx, emit),
        "reply": f"{run_command(config.wrapper_bin)} reply {shlex.quote(str(config.run_dir))} "
        f"--escalation {shlex.quote(record.id)} 'your answer' (or --continue, or --stop)",
    }
    notified = []
    if settings.notify is not None:
        done = await run_process(settings.notify, dumps(payload), ctx.env, ctx.cwd, NOTIFY_TIMEOUT)
        if done.exit_code == 0:
            notified.append("command")
        else:
            why = done.error or ("timed out" if done.timed_out else f"exit {done.exit_code}")
            emit(
                WarningEvent(
                    code="notify_failed",
                    message=f"the notifier failed ({why}); still waiting for a reply",
                )
            )
    desktop = shutil.which("notify-send") if settings.desktop_notify else None
    if desktop is not None:
        title = f"agent-wrapper: {config.label or config.run_id} needs you"
        body = (question or "The agent stopped and waits for an answer.")[-200:]
        done = await run_process([desktop, title, body], b"", ctx.env, ctx.cwd, DESKTOP_TIMEOUT)
        if done.exit_code == 0:
            notified.append("desktop")
    return notified


async def _summary(
    config: RunConfig, summary: RunSummary, ctx: HookContext, emit: Callable[[Event], None]
) -> str | None:
    settings = config.settings
    if settings.summarizer is None:
        return None
    data = dumps({"messages": list(summary.recent_messages)})
    done = await run_process(
        settings.summarizer, data, ctx.env, ctx.cwd, settings.summarizer_timeout
    )
    text = done.stdout.decode("utf-8", "replace").strip()
    if done.exit_code != 0 or not text:
        emit(
            WarningEvent(
                code="summarizer_failed",
                message="the summarizer gave no summary; the notification goes without one",
            )
        )
        return None
    return text[:SUMMARY_CHARS]


#: Why an answer to an escalation is refused (the question stays open), or
#: None to take it: given the escalation's id and the answer.
AnswerCheck = Callable[[str, dict[str, Any]], Awaitable[str | None]]


async def wait_for_answer(
    run_dir: Path,
    escalation: str,
    timeout: float,
    run_id: str,
    warn: mailbox.Warn | None = None,
    *,
    check: AnswerCheck | None = None,
) -> dict[str, Any]:
    """The escalation's answer; at the timeout the wrapper answers ``timeout``
    itself (unless a reply got there first). An answer ``check`` refuses is
    taken back (the question stays open) and its sender told why; every
    answer a sender waits on (``reply``) is told whether it was taken."""
    with trio.move_on_after(timeout):
        while True:
            answer = mailbox.answer_of(run_dir, escalation, run_id, warn)
            if answer is not None:
                why = await check(escalation, answer) if check is not None else None
                if why is None:
                    mailbox.settle_answer(run_dir, escalation, answer, None)
                    return answer
                mailbox.settle_answer(run_dir, escalation, answer, why)
            await trio.sleep(REPLY_POLL)
    with contextlib.suppress(OSError):
        mailbox.answer(run_dir, escalation, "timeout", run_id)
    found = mailbox.answer_of(run_dir, escalation, run_id)
    if found is None or found.get("nonce") is not None:
        # A reply that came as the time ran out was never checked: not taken
        # (``close_escalation`` tells its sender).
        return {"kind": "timeout", "text": None}
    return found
