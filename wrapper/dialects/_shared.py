"""Helpers several dialects share that ``base.py`` does not (yet) offer.

Placing the task on a command line and reading meaning into an exit status
are the same problem for every agent that takes its prompt as an argument;
the dialect modules keep only what differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from wrapper.core.events import AssistantMessage, StopReason, Usage
from wrapper.core.registry import program
from wrapper.dialects.base import MAX_ARG_BYTES, CannotResume, Dialect, Launch, UsageError

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


class CommandLineDialect(Dialect):
    """An agent that takes its task as the last argument of its command line
    and continues a session named on it: the argv is declared, not coded.

    ``launch`` appends ``prompt_flag`` and the task; ``resume`` appends
    ``resume_flag``, the session id, then the same as ``launch``.
    """

    #: The CLI's name in messages to the user.
    agent_name: ClassVar[str] = ""
    #: What stands before the task: the flag that takes it, or ``--``.
    prompt_flag: ClassVar[tuple[str, ...]] = ("--",)
    #: Whether a task starting with ``-`` gets a leading space (see ``prompt_argument``).
    guard_dash: ClassVar[bool] = False
    #: What stands before the session id when resuming.
    resume_flag: ClassVar[tuple[str, ...]] = ("--resume",)
    #: A flag in the user's command that means no session is kept.
    no_session_flag: ClassVar[str | None] = None
    #: What the agent calls its session id, and which line of the stream gives it.
    session_source: ClassVar[str] = "session id (no init line was seen)"

    #: Programs that write this dialect's stream but take their task their
    #: own way: program name -> (what stands before the task, guard_dash).
    task_flags_by_program: ClassVar[Mapping[str, tuple[tuple[str, ...], bool]]] = {}

    def launch(
        self, command: Sequence[str], task: str | None, run_dir: Path, *, resumable: bool = False
    ) -> Launch:
        if task is None:
            return Launch(list(command))
        return Launch([*command, *self.task_arguments(command, task)])

    def resume(
        self, command: Sequence[str], prompt: str, run_dir: Path, session_id: str | None
    ) -> Launch:
        session = self.resumable_session(command, session_id)
        arguments = self.task_arguments(command, prompt)
        return Launch([*command, *self.resume_flag, session, *arguments])

    def task_arguments(self, command: Sequence[str], text: str) -> list[str]:
        """The arguments that give ``text`` as the task to the program ``command`` runs."""
        found = program(command)
        flags, guard = self.task_flags_by_program.get(
            found[0] if found else "", (self.prompt_flag, self.guard_dash)
        )
        return [*flags, prompt_argument(self.agent_name, text, guard_dash=guard)]

    def prompt_argument(self, text: str) -> str:
        """``text`` as this agent's prompt argument (see ``prompt_argument``)."""
        return prompt_argument(self.agent_name, text, guard_dash=self.guard_dash)

    def resumable_session(self, command: Sequence[str], session_id: str | None) -> str:
        """The session to resume, or ``CannotResume`` saying why there is none."""
        if session_id is None:
            raise CannotResume(
                f"{self.agent_name} reported no {self.session_source}, "
                "so there is no session to resume"
            )
        if self.no_session_flag is not None and self.no_session_flag in command:
            raise CannotResume(no_session(self.no_session_flag, self.agent_name))
        return session_id


def no_session(flag: str, agent: str) -> str:
    """Why a command with ``flag`` has no session to resume."""
    return f"the command has {flag}, so {agent} keeps no session to resume"
