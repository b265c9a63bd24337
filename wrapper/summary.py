"""What a run's events add up to: session, model, tools, usage. Pure."""

from __future__ import annotations

from wrapper.events import (
    AssistantMessage,
    Event,
    SessionStarted,
    ToolEnded,
    ToolStarted,
    Usage,
    sum_usage,
)


class RunSummary:
    __slots__ = ("current_tool", "last_assistant", "model", "session_id", "tools", "usages")

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.model: str | None = None
        #: Tool names in first-use order (a dict keeps insertion order).
        self.tools: dict[str, None] = {}
        self.usages: list[Usage] = []
        self.current_tool: str | None = None
        self.last_assistant: AssistantMessage | None = None

    def observe(self, event: Event) -> None:
        if isinstance(event, AssistantMessage):
            self.last_assistant = event
            self.current_tool = None
            if event.model:
                self.model = event.model
            if event.usage is not None:
                self.usages.append(event.usage)
        elif isinstance(event, ToolStarted):
            self.tools.setdefault(event.tool, None)
            self.current_tool = event.tool
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
