"""What a run's events add up to: session, model, tools, usage. Pure."""

from __future__ import annotations

from collections import deque

from wrapper.core.events import (
    AssistantMessage,
    Event,
    SessionStarted,
    ToolEnded,
    ToolStarted,
    Usage,
    WarningEvent,
)

#: The warning code for usage figures that cannot be written as JSON numbers.
USAGE_UNREPRESENTABLE = "usage_unrepresentable"
_WHY = "an integer beyond 64 bits or a cost that is not a finite number"

#: Recent tool runs kept for a person's notification (``Edit(src/foo.ts)``).
RECENT_TOOLS = 5
#: Recent messages kept for the escalation summarizer.
RECENT_MESSAGES = 15


#: Warnings of one code kept (written out, listed in result.json and the
#: summary); the rest are counted and reported once at the end, so that an
#: agent writing a bad line in a loop fills neither the disk nor the result.
WARNINGS_KEPT_PER_CODE = 20


class WarningCounter:
    """Which warnings are kept: the first ``WARNINGS_KEPT_PER_CODE`` of each code."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def keep(self, code: str) -> bool:
        seen = self._seen[code] = self._seen.get(code, 0) + 1
        return seen <= WARNINGS_KEPT_PER_CODE

    def dropped(self) -> list[WarningEvent]:
        """A warning for each code of which some were not kept (once)."""
        said = []
        for code, seen in self._seen.items():
            if seen > WARNINGS_KEPT_PER_CODE:
                count = seen - WARNINGS_KEPT_PER_CODE
                said.append(
                    WarningEvent(
                        code=code,
                        message=f"{count} more {code} warnings were not recorded "
                        f"(the first {WARNINGS_KEPT_PER_CODE} of each kind are)",
                    )
                )
        self._seen = dict.fromkeys(self._seen, 0)
        return said


class RunSummary:
    __slots__ = (
        "current_tool",
        "last_assistant",
        "model",
        "recent_messages",
        "recent_tools",
        "session_id",
        "tool_runs",
        "tools",
        "total",
    )

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.model: str | None = None
        #: Tool names in first-use order (a dict keeps insertion order).
        self.tools: dict[str, None] = {}
        #: The usage summed so far (kept as it goes: a figure lost to a sum
        #: must be noticed when it happens).
        self.total: Usage | None = None
        self.current_tool: str | None = None
        self.last_assistant: AssistantMessage | None = None
        #: Tools started over the whole run (progress, for the idle policy).
        self.tool_runs = 0
        self.recent_tools: deque[str] = deque(maxlen=RECENT_TOOLS)
        self.recent_messages: deque[dict[str, str]] = deque(maxlen=RECENT_MESSAGES)

    def observe(self, event: Event) -> list[WarningEvent]:
        """Take ``event`` into account; returns warnings to report after it
        (usage that cannot be represented), usually none."""
        warnings: list[WarningEvent] = []
        if isinstance(event, AssistantMessage):
            self.last_assistant = event
            self.current_tool = None
            if event.model:
                self.model = event.model
            if event.usage is not None:
                warnings = self._add_usage(event.usage)
            if event.text:
                self.recent_messages.append({"role": "assistant", "text": event.text})
        elif isinstance(event, ToolStarted):
            self.tools.setdefault(event.tool, None)
            self.current_tool = event.tool
            self.tool_runs += 1
            call = f"{event.tool}({event.summary})" if event.summary else event.tool
            self.recent_tools.append(call)
            self.recent_messages.append({"role": "tool", "text": call})
        elif isinstance(event, ToolEnded):
            self.current_tool = None
        elif isinstance(event, SessionStarted) and event.session_id:
            self.session_id = event.session_id
        return warnings

    def _add_usage(self, usage: Usage) -> list[WarningEvent]:
        before = self.total.unrepresentable if self.total is not None else ()
        self.total = usage if self.total is None else self.total + usage
        # Once a figure is lost it stays null in the total, so each is warned
        # about once per run however many messages repeat it.
        lost = [name for name in self.total.unrepresentable if name not in before]
        reported = [name for name in lost if name in usage.unrepresentable]
        summed = [name for name in lost if name not in usage.unrepresentable]
        warnings = []
        if reported:
            warnings.append(
                WarningEvent(
                    code=USAGE_UNREPRESENTABLE,
                    message=f"the agent reported usage that cannot be represented "
                    f"({', '.join(reported)}: {_WHY}); it is null in that message "
                    "and in the run's total",
                )
            )
        if summed:
            warnings.append(
                WarningEvent(
                    code=USAGE_UNREPRESENTABLE,
                    message=f"the run's summed usage cannot be represented "
                    f"({', '.join(summed)}: {_WHY}); it is null in the run's total",
                )
            )
        return warnings

    @property
    def usage(self) -> Usage | None:
        return self.total

    @property
    def tools_used(self) -> list[str]:
        return list(self.tools)
