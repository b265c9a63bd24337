"""Hook matchers, pure: which tools a matcher group's handlers are for.

Claude Code's rules (empty or ``*``: every tool; ``A|B``: a list of exact
names; anything else a regular expression on the whole name), and the
wrapper's tool kinds: in a list, ``@execute`` names what a tool does
whatever the agent calls it (each dialect says which of its tools is which:
``Dialect.tool_kind``).
"""

from __future__ import annotations

import re

from wrapper.core.spelling import closest

MATCHER_LIST = re.compile(r"@?[A-Za-z0-9_.-]+(?:\|@?[A-Za-z0-9_.-]+)*")
#: What a tool does, as a matcher may name it (``@execute``): ACP's tool
#: kinds, those of them a policy tells apart (ACP's ``delete`` and ``move``
#: are ``edit``; its ``think`` and ``switch_mode`` are ``other``). Each
#: dialect says which of its tools is which (``Dialect.tool_kind``).
TOOL_KINDS = ("execute", "edit", "read", "search", "fetch", "other")
#: The kind of a tool a dialect does not know (an MCP server's, a new one).
OTHER_KIND = "other"
#: A kind in a matcher is written with this mark before it.
KIND_MARK = "@"
#: An unknown kind this close to a known one (edits, ignoring case) gets a suggestion.
KIND_NEAR_MISS_EDITS = 2


class MatcherError(ValueError):
    """A matcher cannot be used; the message says why (the caller adds where)."""


def takes(pattern: str | None, tool: str | None, kind: str | None = None) -> bool:
    """Whether the matcher ``pattern`` takes the tool ``tool``, of ``kind``:
    Claude's rules (empty or ``*`` match everything, ``A|B`` is a list of
    exact names, anything else is a regular expression on the whole tool
    name) and the wrapper's: a list may name a tool's kind (``@execute|Read``)."""
    if not pattern or pattern == "*" or tool is None:
        return True
    if MATCHER_LIST.fullmatch(pattern):
        names = pattern.split("|")
        return tool in names or (kind is not None and KIND_MARK + kind in names)
    return re.fullmatch(pattern, tool) is not None


def check_kinds(matcher: str) -> None:
    """A matcher that names tool kinds names known ones, in a list of names
    (else ``MatcherError``)."""
    if not MATCHER_LIST.fullmatch(matcher):
        raise MatcherError(
            f"a tool kind ({KIND_MARK}execute, ...) goes in a list of names "
            f"such as {KIND_MARK}execute|Read, not in a regular expression: {matcher!r}"
        )
    for name in matcher.split("|"):
        if name.startswith(KIND_MARK) and name[1:] not in TOOL_KINDS:
            meant = closest(name[1:], TOOL_KINDS, KIND_NEAR_MISS_EDITS)
            hint = f'; did you mean "{KIND_MARK}{meant}"?' if meant is not None else ""
            kinds = ", ".join(KIND_MARK + kind for kind in TOOL_KINDS)
            raise MatcherError(f'unknown tool kind "{name}"{hint} (the kinds: {kinds})')


def valid_matcher(matcher: str | None) -> bool:
    if not matcher or matcher == "*" or MATCHER_LIST.fullmatch(matcher):
        return True
    try:
        re.compile(matcher)
    except re.error:
        return False
    return True
