"""Amp (``amp --stream-json``).

Checked against Amp's streaming-JSON announcement and owner's manual
(ampcode.com/news/streaming-json, manual appendix "Stream JSON output"), the
shared capture, and public error captures (``error_during_execution`` with an
``error`` field). Amp's CLI is closed source and unversioned in those
sources; the format is "Claude Code compatible", so this dialect is Claude's
with these differences:

* the thread id (``T-…``) is the session id;
* ``assistant`` lines carry a real ``stop_reason`` (``end_turn``,
  ``tool_use``); they are still progress, and only the ``result`` line ends
  the run (same rules as Claude's);
* the ``result`` line has no usage or cost, so the final message carries the
  usage summed over the ``assistant`` lines;
* an error result may say why in an ``error`` field (``"terminated"``).

The task goes in as ``-x TASK`` (execute mode). Amp's ``-x`` takes an
optional value, so a task starting with ``-`` is given a leading space rather
than risk it being read as a flag; a task longer than one argument is a usage
error (Amp reads a prompt only from an argument or stdin, which the wrapper
closes).

Resuming uses the ``threads continue`` subcommand, which takes the same
flags: ``amp FLAGS…`` becomes ``amp threads continue THREAD_ID FLAGS… -x
PROMPT``, every flag of the user's command carried over, in order, after the
thread id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from wrapper.dialects.base import Launch
from wrapper.dialects.claude import ClaudeDialect


class AmpDialect(ClaudeDialect):
    name: ClassVar[str] = "amp"
    #: What each tool does, for matchers that name a kind (``@execute``): Amp's tools, beside the
    #: Claude Code names its stream shares; a tool not listed (an MCP server's) is ``other``.
    tool_kinds: ClassVar[Mapping[str, str]] = {
        **ClaudeDialect.tool_kinds,
        "Bash": "execute",
        "Read": "read",
        "edit_file": "edit",
        "create_file": "edit",
        "undo_edit": "edit",
        "Grep": "search",
        "glob": "search",
        "list_directory": "search",
        "finder": "search",
        "read_web_page": "fetch",
        "web_search": "fetch",
    }
    streaming_command: ClassVar[str] = "amp --stream-json"
    agent_name: ClassVar[str] = "Amp"
    prompt_flag: ClassVar[tuple[str, ...]] = ("-x",)
    guard_dash: ClassVar[bool] = True
    no_session_flag: ClassVar[str | None] = None
    # Claude Code's permission options are not Amp's: hooks are told "default".
    permission_mode_options: ClassVar[tuple[str, ...]] = ()
    permission_mode_flags: ClassVar[Mapping[str, str]] = {}
    transcript_dir: ClassVar[tuple[str, str] | None] = None

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        session = obj.get("session_id")
        return (
            obj.get("type") == "system"
            and obj.get("subtype") == "init"
            and isinstance(session, str)
            and session.startswith("T-")
        )

    def resume(
        self, command: Sequence[str], prompt: str, run_dir: Path, session_id: str | None
    ) -> Launch:
        thread = self.resumable_session(command, session_id)
        executable, flags = list(command[:1]), list(command[1:])
        continued = [*executable, "threads", "continue", thread, *flags]
        return Launch([*continued, *self.prompt_flag, self.prompt_argument(prompt)])
