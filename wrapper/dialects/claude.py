"""Claude Code (``claude -p --output-format stream-json --verbose``).

Checked against Claude Code 2.1.3 (the shared capture), a 2.1.2xx capture
with ``--include-partial-messages`` (``terminal_reason``, result
``stop_reason``) and the Agent SDK's documented result fields.

Stream: ``system``/``init`` (session id, cwd, model), then ``assistant``
lines (one per content block, ``stop_reason: null``), ``user`` lines
carrying ``tool_result`` blocks, ``system``/``api_retry`` while the API is
retried, ``system``/``compact_boundary`` after a compaction (followed, in
2.1.332, by a synthetic ``user`` message, ``isSynthetic``, whose text frames
the summary: the compaction's end waits for that line and carries its text,
for PostCompact), with
``--include-partial-messages`` also ``stream_event`` lines (API stream
events); finally one ``result`` line.

End of run: the ``result`` line, and only it. Everything before it is
progress: an ``assistant`` line becomes a non-terminal ``AssistantMessage``
(``toolUse`` when it calls tools, else no stop reason; the line's own
``stop_reason`` stays as the raw one) without usage, so nothing arms the
completion grace early and nothing is counted twice. The ``result`` line
becomes the final message (its ``result`` text, the run's total usage and
cost, the ``api_error_status`` of a failed API call) and an ``AgentEnded``
that says the run is settled. The text of an ``assistant`` line that calls a
tool is interim: when the process ends without a ``result`` line during that
tool, the final text is empty, not that text. A failed run's ``result``
text is the error (it goes to ``error_message``), and so are the
``<synthetic>`` assistant lines Claude Code writes to report it: the final
text is then what the model itself said after its last tool, if anything. Its stop reason is
decided in this order:

1. ``terminal_reason`` ``aborted_*`` (an interrupted turn): ``aborted``;
2. ``is_error: true`` after an assistant line whose ``error`` is
   ``max_output_tokens`` (Claude Code 2.1.197 ends a turn that hit the
   output-token limit with an error result, "Claude's response exceeded the
   32000 output token maximum", and exit 1): ``length``, raw
   ``max_output_tokens``, the result text as the error message (it is why
   the process fails);
3. ``is_error: true``, whatever the subtype (a missing model arrives as
   ``subtype: success, is_error: true``): ``error``, the raw reason being
   ``terminal_reason`` or the subtype (``is_error`` when neither says more);
4. an ``error_*`` subtype: ``error``;
5. ``stop_reason`` (absent before 2.1.2xx) through the table below, else the
   subtype (``success`` is ``stop``).

When the process exits without a ``result`` line, ``on_exit`` reports exit
130/143 (SIGINT/SIGTERM handled) as ``aborted`` and any other non-zero exit
as ``error``.

The task is the last argument, after ``--`` so that neither a task starting
with ``-`` nor a variadic option of the user's (``--allowedTools A B``) can
swallow it; resuming inserts ``--resume SESSION_ID`` before that ``--``.
Qwen Code's ``qwen -o stream-json`` (checked against 0.24.4 in the
conformance tier) writes this stream too; it ignores a task after ``--``, so
for a ``qwen`` program the task follows ``-p`` (a leading space before a
task starting with ``-``) and a resume is ``--resume SESSION_ID -p TASK``. Claude
Code takes the prompt only as an argument or on stdin (which the wrapper
closes), so a task longer than one argument is a usage error.

When the run has PreToolUse handlers, ``claude`` is also given
``--settings RUN_DIR/hooks/claude-settings.json``: a copy of the user's own
``--settings`` (which it replaces) with the handlers added, each behind the
wrapper's relay (see ``wrapper.hooks.native``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from wrapper.core.events import (
    AgentEnded,
    AssistantMessage,
    Compaction,
    Event,
    SessionStarted,
    StopReason,
    TextDelta,
    ToolCall,
    ToolEnded,
    ToolStarted,
    Usage,
    canonical_stop_reason,
    sum_usage,
)
from wrapper.dialects._shared import CommandLineDialect, exit_message
from wrapper.dialects.base import (
    Handler,
    Launch,
    UsageError,
    as_count,
    as_float,
    as_int,
    as_str,
    decode_object,
    retry_started,
    summarize_args,
    tool_result_text,
)
from wrapper.dialects.claude_input import ClaudeInputClient, is_stream_input, with_replay
from wrapper.dialects.deltas import (
    JSON_STRING,
    NATURAL,
    PLAIN_STRING,
    DeltaDialect,
    DeltaLines,
)

#: A session id that is safe in a file pattern (no path parts, no glob magic).
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")

#: The model name of the assistant lines Claude Code makes up to report an error.
_SYNTHETIC = "<synthetic>"

#: ``error`` values of an assistant line that mean the output-token limit.
_LENGTH_ERRORS = frozenset({"max_output_tokens", "max_tokens"})

#: Where an ``api_retry`` line gives its attempt, most attempts and delay.
_RETRY_KEYS = ("attempt", "max_retries", "retry_delay_ms")

#: Content blocks that call a tool (``server_tool_use``: web search and fetch).
_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


# With --include-partial-messages most lines are content-block deltas
# (text, thinking, tool input), each on a ``stream_event`` line of its own in
# this layout; only a main-thread text delta is an event.
_DELTA_PREFIX = b'{"type":"stream_event","event":{"type":"content_block_delta","index":'
_DELTA_LINES = DeltaLines(
    _DELTA_PREFIX,
    head=re.escape(_DELTA_PREFIX) + NATURAL + rb',"delta":\{',
    kind=rb'"type":"[a-z_]{1,32}","[a-z_]{1,32}"',
    tail=rb":("
    + JSON_STRING
    + rb')\}\},"session_id":'
    + PLAIN_STRING
    + rb',"parent_tool_use_id":null,"uuid":'
    + PLAIN_STRING
    + rb"\}",
    text_kinds=frozenset({b'"type":"text_delta","text"'}),
)


#: Claude Code exits 0.05-0.2 s after its ``result`` line (which settles the
#: run); 0.2 s left it no margin on a loaded machine.
GRACE = 2.0
SETTLE_GRACE = 2.0
#: Qwen Code in this format exits 1.2-1.7 s after its ``result`` line when
#: its turn ran a shell tool, and over 2 s on a loaded 2-core machine.
QWEN_GRACE = 5.0


class ClaudeDialect(CommandLineDialect, DeltaDialect):
    name: ClassVar[str] = "claude"
    usage_granularity: ClassVar[str | None] = "message"
    #: What each tool does, for matchers that name a kind (``@execute``): Claude Code's tools, and
    #: Qwen Code's (read by this dialect too); a tool not listed (an MCP server's) is ``other``.
    tool_kinds: ClassVar[Mapping[str, str]] = {
        "Bash": "execute",
        "BashOutput": "execute",
        "KillShell": "execute",
        "KillBash": "execute",
        "run_shell_command": "execute",
        "Read": "read",
        "NotebookRead": "read",
        "read_file": "read",
        "read_many_files": "read",
        "Edit": "edit",
        "MultiEdit": "edit",
        "Write": "edit",
        "NotebookEdit": "edit",
        "write_file": "edit",
        "edit": "edit",
        "replace": "edit",
        "Glob": "search",
        "Grep": "search",
        "LS": "search",
        "glob": "search",
        "grep_search": "search",
        "search_file_content": "search",
        "list_directory": "search",
        "WebFetch": "fetch",
        "WebSearch": "fetch",
        "web_fetch": "fetch",
        "web_search": "fetch",
        "google_web_search": "fetch",
    }
    default_grace: ClassVar[float] = GRACE
    default_settle_grace: ClassVar[float] = SETTLE_GRACE
    stop_reasons: ClassVar[Mapping[str, StopReason]] = {
        # the API's stop reasons, on the result line since 2.1.2xx
        "end_turn": StopReason.STOP,
        "stop_sequence": StopReason.STOP,
        # a refusal is the model's complete (declining) answer
        "refusal": StopReason.STOP,
        "max_tokens": StopReason.LENGTH,
        "model_context_window_exceeded": StopReason.LENGTH,
        "tool_use": StopReason.TOOL_USE,
        "tool_deferred": StopReason.TOOL_USE,
        # result subtypes, for results without a stop_reason
        "success": StopReason.STOP,
        "error": StopReason.ERROR,
        "error_max_turns": StopReason.ERROR,
        "error_during_execution": StopReason.ERROR,
        "error_max_budget_usd": StopReason.ERROR,
        "error_max_structured_output_retries": StopReason.ERROR,
        # terminal_reason values of an interrupted turn
        "aborted_streaming": StopReason.ABORTED,
        "aborted_tools": StopReason.ABORTED,
    }
    #: Raw event type -> handler; subclasses for Claude-compatible streams extend it.
    handlers: ClassVar[Mapping[str, Handler]] = {}
    #: The client of the stream-json session being driven, which echoes go to.
    _client: ClaudeInputClient | None = None
    streaming_command: ClassVar[str] = "claude -p --output-format stream-json --verbose"
    agent_name: ClassVar[str] = "Claude Code"
    no_session_flag: ClassVar[str | None] = "--no-session-persistence"
    permission_mode_options: ClassVar[tuple[str, ...]] = ("--permission-mode",)
    permission_mode_flags: ClassVar[Mapping[str, str]] = {
        "--dangerously-skip-permissions": "bypassPermissions"
    }
    #: Claude Code takes hooks from a settings file named with ``--settings``
    #: (checked on 2.1.197 and 2.1.332: a PreToolUse deny there blocks a tool
    #: even under ``--dangerously-skip-permissions``); Qwen Code has no such option.
    native_hooks_option: ClassVar[str | None] = "--settings"
    native_hooks_programs: ClassVar[frozenset[str]] = frozenset({"claude", "claude-code"})
    #: Qwen Code (``qwen -o stream-json``) writes this stream, but its option
    #: parser drops what follows ``--``: its task goes after ``-p``, as Gemini
    #: CLI's (of which it is a fork), a leading ``-`` guarded.
    task_flags_by_program: ClassVar[Mapping[str, tuple[tuple[str, ...], bool]]] = {
        "qwen": (("-p",), True),
        "qwen-code": (("-p",), True),
    }
    graces_by_program: ClassVar[Mapping[str, tuple[float, float]]] = {
        "qwen": (QWEN_GRACE, QWEN_GRACE),
        "qwen-code": (QWEN_GRACE, QWEN_GRACE),
    }
    #: The variable naming the agent's config directory, and its default under
    #: $HOME, where session transcripts are kept; None when there are none.
    transcript_dir: ClassVar[tuple[str, str] | None] = ("CLAUDE_CONFIG_DIR", ".claude")

    def with_native_hooks(self, command: Sequence[str]) -> tuple[list[str], dict[Path, str]]:
        """``command`` with the run's own settings file in place of the
        user's (the run's is a copy of it, merged), and the file to write."""
        option, files = self.native_hook_words()
        words = list(command)
        given = self.user_native_settings(words) if option else None
        if given is not None:
            del words[given[0] : given[1]]
        return [*words, *option], files

    def input_client(
        self, command: Sequence[str], cwd: str | None = None
    ) -> ClaudeInputClient | None:
        self._client = ClaudeInputClient() if is_stream_input(command) else None
        return self._client

    def launch(
        self, command: Sequence[str], task: str | None, run_dir: Path, *, resumable: bool = False
    ) -> Launch:
        words, files = self.with_native_hooks(command)
        if is_stream_input(command):
            if task is None:
                raise UsageError(
                    "claude --input-format stream-json needs a task (--task or --task-file): "
                    "it takes its prompt on its stdin and waits silently without one"
                )
            # Driven on its stdin: the task is the session's first user message;
            # the echo of each message it takes acknowledges a steer.
            return Launch(with_replay(words), files, prompt=task)
        launch = super().launch(words, task, run_dir, resumable=resumable)
        launch.files.update(files)
        return launch

    def resume(
        self, command: Sequence[str], prompt: str, run_dir: Path, session_id: str | None
    ) -> Launch:
        words, files = self.with_native_hooks(command)
        if is_stream_input(command):
            # The next prompt on the live session: the same process.
            return Launch(with_replay(words), files, prompt=prompt)
        launch = super().resume(words, prompt, run_dir, session_id)
        launch.files.update(files)
        return launch

    def _reset(self) -> None:
        self._model: str | None = None
        self._tools: dict[str, str] = {}
        #: Usage of the progress messages, by message id (Claude Code repeats a
        #: message's usage on each of its content-block lines).
        self._usages: dict[str, Usage] = {}
        self._text = ""
        self._result_seen = False
        #: The ``error`` of the last assistant line (Claude Code's own
        #: synthetic message says why a turn failed, e.g. ``max_output_tokens``).
        self._assistant_error: str | None = None
        #: A compaction's end, until the line after its boundary says its summary.
        self._compacted: Compaction | None = None

    @classmethod
    def recognises(cls, obj: Mapping[str, Any]) -> bool:
        kind = obj.get("type")
        if kind == "stream_event":
            return True
        if kind != "system" or obj.get("subtype") != "init":
            return False
        if "claude_code_version" in obj:
            return True
        session = obj.get("session_id")
        # Amp's thread ids start with "T-"; Cursor's init has apiKeySource but no tools.
        cursor_like = "apiKeySource" in obj and "tools" not in obj
        return isinstance(session, str) and not session.startswith("T-") and not cursor_like

    def transcript_search(
        self, session_id: str | None, env: Mapping[str, str]
    ) -> tuple[Path, str] | None:
        # Claude Code keeps a session as projects/<its cwd, encoded>/<id>.jsonl
        # under its config directory; the encoding varies between versions,
        # the file name does not.
        if self.transcript_dir is None or not session_id or not _SAFE_ID.fullmatch(session_id):
            return None
        configured = env.get(self.transcript_dir[0])
        home = env.get("HOME")
        if configured:
            root = Path(configured)
        elif home:
            root = Path(home) / self.transcript_dir[1]
        else:
            return None
        return root, f"projects/*/{session_id}.jsonl"

    def exit_final(self, exit_code: int | None) -> AssistantMessage | None:
        if self._result_seen:
            return None
        usage = self._progress_usage()
        return exit_message(exit_code, text=self._text, usage=usage, model=self._model)

    # -- handlers ------------------------------------------------------------

    def _system(self, obj: dict[str, Any]) -> list[Event]:
        subtype = obj.get("subtype")
        if subtype == "init":
            self._model = as_str(obj.get("model")) or self._model
            return [
                SessionStarted(session_id=as_str(obj.get("session_id")), cwd=as_str(obj.get("cwd")))
            ]
        if subtype == "api_retry":
            status = as_int(obj.get("error_status"))
            error = as_str(obj.get("error"))
            detail = " ".join(part for part in (str(status) if status else None, error) if part)
            return [retry_started(obj, _RETRY_KEYS, detail or None)]
        if subtype == "compact_boundary":
            metadata = obj.get("compact_metadata")
            trigger = as_str(metadata.get("trigger")) if isinstance(metadata, dict) else None
            # The summary comes on the next line: the end waits for it (``parse``).
            self._compacted = Compaction(phase="end", reason=trigger)
        return []

    def _assistant(self, obj: dict[str, Any]) -> list[Event]:
        message = obj.get("message")
        if not isinstance(message, dict):
            return []
        # Set on the made-up report of a failed request too: it names the cause.
        self._assistant_error = as_str(obj.get("error"))
        if message.get("model") == _SYNTHETIC:
            # Claude Code's own report of a failed request, repeated on the
            # result line: neither the model's words nor its name
            return []
        self._model = as_str(message.get("model")) or self._model
        usage = anthropic_usage(message.get("usage"))
        if usage is not None:
            key = as_str(message.get("id")) or f"#{len(self._usages)}"
            self._usages[key] = usage
        texts: list[str] = []
        calls: list[ToolCall] = []
        starts: list[Event] = []
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind in _TOOL_BLOCKS and isinstance(block.get("name"), str):
                name, call_id, args = block["name"], as_str(block.get("id")), block.get("input")
                summary = summarize_args(args)
                calls.append(ToolCall(name=name, id=call_id, summary=summary))
                starts.append(
                    ToolStarted(tool=name, tool_call_id=call_id, summary=summary, args=args)
                )
                if call_id is not None:
                    self._tools[call_id] = name
        text = "\n".join(texts)
        if not text and not calls:
            return []  # thinking only: nothing a person or the tracker needs
        if calls:
            # the text of a message that hands off to a tool is interim: a
            # run cut short during the tool has no final text
            self._text = ""
        elif text:
            self._text = text
        raw = as_str(message.get("stop_reason"))
        progress = AssistantMessage(
            stop_reason=str(StopReason.TOOL_USE) if calls else None,
            raw_stop_reason=raw,
            text=text,
            model=self._model,
            tool_calls=tuple(calls),
            progress_usage=tuple(self._usages.values()),
        )
        return [progress, *starts]

    def parse(self, line: bytes) -> list[Event]:
        compacted = self._compacted
        if compacted is None:
            return super().parse(line)
        self._compacted = None
        summary = self._compact_summary(line)
        if summary is not None:
            compacted = dataclasses.replace(compacted, summary=tool_result_text(summary))
        return [compacted, *super().parse(line)]

    @staticmethod
    def _compact_summary(line: bytes) -> str | None:
        """The text of the synthetic message Claude Code writes right after a
        compaction (2.1.332: the summary in its framing), else None."""
        obj = decode_object(line)
        if not isinstance(obj, dict) or obj.get("type") != "user" or not obj.get("isSynthetic"):
            return None
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        return content if isinstance(content, str) else None

    def on_exit(self, exit_code: int | None, exit_signal: int | None) -> list[Event]:
        compacted, self._compacted = self._compacted, None
        return [*([compacted] if compacted else []), *super().on_exit(exit_code, exit_signal)]

    def _user(self, obj: dict[str, Any]) -> list[Event]:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and self._client is not None:
            self._client.echoed(content)  # a message written on stdin, taken
        events: list[Event] = []
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call_id = as_str(block.get("tool_use_id"))
                events.append(
                    ToolEnded(
                        tool=self._tools.pop(call_id, "?") if call_id else "?",
                        tool_call_id=call_id,
                        is_error=block.get("is_error") is True,
                        result=tool_result_text(block.get("content")),
                    )
                )
        return events

    def _stream_event(self, obj: dict[str, Any]) -> list[Event]:
        event = obj.get("event")
        if obj.get("parent_tool_use_id") is not None or not isinstance(event, dict):
            return []
        delta = event.get("delta")
        if event.get("type") == "content_block_delta" and isinstance(delta, dict):
            text = delta.get("text")
            if delta.get("type") == "text_delta" and isinstance(text, str) and text:
                return [TextDelta(text=text)]
        return []

    def _result(self, obj: dict[str, Any]) -> list[Event]:
        self._result_seen = True
        stop_reason, raw = self.result_stop_reason(obj)
        text = as_str(obj.get("result"))
        error_message = None
        if stop_reason in (StopReason.ERROR, StopReason.ABORTED):
            error_message = _error_text(obj.get("errors")) or as_str(obj.get("error")) or text
        usage = anthropic_usage(obj.get("usage"), as_float(obj.get("total_cost_usd")))
        # A failed run's result text is the error, not an answer; so is the
        # notice that the answer was cut at the output limit, which is Claude
        # Code's own reason for the failing exit that follows.
        cut = stop_reason == StopReason.LENGTH and obj.get("is_error") is True
        if cut:
            error_message = text or self._assistant_error
        final = AssistantMessage(
            stop_reason=stop_reason,
            raw_stop_reason=raw,
            text=self._text if error_message is not None or cut else self.final_text(text),
            usage=usage if usage is not None else self._progress_usage(),
            model=self._model,
            error_message=error_message,
            api_status=as_int(obj.get("api_error_status")),
        )
        return [final, AgentEnded(will_retry=False, settled=True)]

    def final_text(self, result_text: str | None) -> str:
        """The run's final text, given the ``result`` line's own."""
        return result_text if result_text is not None else self._text

    def result_stop_reason(self, obj: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """(canonical, raw) stop reason of a ``result`` line; see the module docstring."""
        terminal = as_str(obj.get("terminal_reason"))
        subtype = as_str(obj.get("subtype"))
        if terminal is not None and terminal.startswith("aborted"):
            return str(StopReason.ABORTED), terminal
        if obj.get("is_error") is True:
            if self._assistant_error in _LENGTH_ERRORS:
                # The output-token limit, which Claude Code reports as a failed
                # turn ("exceeded the ... output token maximum").
                return str(StopReason.LENGTH), self._assistant_error
            if terminal is not None and terminal != "completed":
                return str(StopReason.ERROR), terminal
            said = subtype if subtype not in (None, "success") else "is_error"
            return str(StopReason.ERROR), said
        if subtype is not None and subtype.startswith("error"):
            return str(StopReason.ERROR), subtype
        raw = as_str(obj.get("stop_reason")) or subtype
        return canonical_stop_reason(raw, self.stop_reasons), raw

    def _progress_usage(self) -> Usage | None:
        return sum_usage(self._usages.values())


def anthropic_usage(raw: Any, cost: float | None = None) -> Usage | None:
    """Anthropic-style usage (snake_case, or Cursor's camelCase), plus a cost."""
    if not isinstance(raw, dict):
        return None if cost is None else Usage(cost_usd=cost)

    def first(*keys: str) -> int | None:
        for key in keys:
            value = as_count(raw.get(key))
            if value is not None:
                return value
        return None

    input_ = first("input_tokens", "inputTokens")
    output = first("output_tokens", "outputTokens")
    cache_read = first("cache_read_input_tokens", "cacheReadTokens")
    cache_write = first("cache_creation_input_tokens", "cacheWriteTokens")
    counts = [count for count in (input_, output, cache_read, cache_write) if count is not None]
    return Usage(
        input=input_,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=sum(counts) if input_ is not None or output is not None else None,
        cost_usd=cost,
    )


def _error_text(errors: Any) -> str | None:
    if isinstance(errors, list):
        texts = [error for error in errors if isinstance(error, str) and error]
        return "; ".join(texts) or None
    return None


ClaudeDialect.handlers = {
    "system": ClaudeDialect._system,
    "assistant": ClaudeDialect._assistant,
    "user": ClaudeDialect._user,
    "stream_event": ClaudeDialect._stream_event,
    "result": ClaudeDialect._result,
}
ClaudeDialect.delta_lines = _DELTA_LINES
