"""What a run's events add up to: session, model, tools, usage. Pure."""

from __future__ import annotations

from collections import deque

from wrapper.events import (
    AssistantMessage,
    Event,
    SessionStarted,
    ToolEnded,
    ToolStarted,
    Usage,
    sum_usage,
)

#: Recent tool runs kept for a person's notification (``Edit(src/foo.ts)``).
RECENT_TOOLS = 5
#: Recent messages kept for the escalation summarizer.
RECENT_MESSAGES = 15


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
        "usages",
    )

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.model: str | None = None
        #: Tool names in first-use order (a dict keeps insertion order).
        self.tools: dict[str, None] = {}
        self.usages: list[Usage] = []
        self.current_tool: str | None = None
        self.last_assistant: AssistantMessage | None = None
        #: Tools started over the whole run (progress, for the idle policy).
        self.tool_runs = 0
        self.recent_tools: deque[str] = deque(maxlen=RECENT_TOOLS)
        self.recent_messages: deque[dict[str, str]] = deque(maxlen=RECENT_MESSAGES)

    def observe(self, event: Event) -> None:
        if isinstance(event, AssistantMessage):
            self.last_assistant = event
            self.current_tool = None
            if event.model:
                self.model = event.model
            if event.usage is not None:
                self.usages.append(event.usage)
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

    @property
    def usage(self) -> Usage | None:
        return sum_usage(self.usages)

    @property
    def tools_used(self) -> list[str]:
        return list(self.tools)
