"""Helpers several dialects share that ``base.py`` does not (yet) offer.

Placing the task on a command line and reading meaning into an exit status
are the same problem for every agent that takes its prompt as an argument;
the dialect modules keep only what differs.
"""

from __future__ import annotations

from wrapper.dialects.base import MAX_ARG_BYTES, UsageError
from wrapper.events import AssistantMessage, StopReason, Usage

#: Exit statuses of a process that handled SIGINT or SIGTERM and exited as
#: ``128 + N``: the agent was interrupted, not broken.
INTERRUPTED_EXITS = frozenset({130, 143})


def prompt_argument(agent: str, text: str, *, guard_dash: bool = False) -> str:
    """``text`` as one argv element for ``agent``, or ``UsageError`` when it cannot be one.

    With ``guard_dash`` a text starting with ``-`` gets a leading space, for
    option parsers that would otherwise read it as a flag and that the
    dialect cannot end with ``--``.
    """
    if "\x00" in text:
        raise UsageError(
            f"the task contains a NUL byte, which cannot be passed to {agent} "
            "as a command-line argument"
        )
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_ARG_BYTES:
        raise UsageError(
            f"the task is {size} bytes, more than one command-line argument may hold "
            f"({MAX_ARG_BYTES}), and {agent} cannot read its prompt from a file: "
            "shorten the task or point it at a file the agent should read"
        )
    return " " + text if guard_dash and text.startswith("-") else text


def exit_message(
    exit_code: int | None,
    *,
    text: str = "",
    usage: Usage | None = None,
    model: str | None = None,
    error_message: str | None = None,
) -> AssistantMessage | None:
    """The final message an exit status implies when the stream gave none.

    An interrupted exit (130, 143) is ``aborted``, any other non-zero exit
    ``error``; exit 0 and death by a signal imply nothing (the supervisor
    reports a signal itself). The raw reason says which status it was.
    """
    if not exit_code:
        return None
    reason = StopReason.ABORTED if exit_code in INTERRUPTED_EXITS else StopReason.ERROR
    return AssistantMessage(
        stop_reason=str(reason),
        raw_stop_reason=f"exit {exit_code}",
        text=text,
        usage=usage,
        model=model,
        error_message=error_message
        or f"the agent exited with status {exit_code} before it reported the end of its run",
    )
