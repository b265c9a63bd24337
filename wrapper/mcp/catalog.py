"""The server's tools as a client sees them: each one's name, the
description a model reads to choose it, its input and output JSON Schemas,
and the call itself: the arguments checked against the input schema's
names and handed to ``tools.Tools``, the answer returned as the structured
content and a short text for the clients that show a model only text.

Plain data and plain functions: no MCP library here, so what a client is
promised is tested without one (the schemas against real answers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from wrapper.core.jsonout import dumps
from wrapper.core.limits import (
    MCP_EVENTS_MAX,
    MCP_LIST_DEFAULT,
    MCP_LIST_MAX,
    MCP_RESULT_DEFAULT_CHARS,
    MCP_RESULT_MAX_CHARS,
    MCP_WAIT_DEFAULT,
    MCP_WAIT_MAX,
)
from wrapper.mcp.presets import PRESETS
from wrapper.mcp.registry import ToolError
from wrapper.mcp.tools import ON_STOP, Progress, Tools

#: What the server tells a client about itself when it connects.
INSTRUCTIONS = (
    "Delegate work to coding agents (subagents) of any CLI: start one with a task, "
    "wait for it (wait returns at its timeout with the runs still going: call it "
    "again), read its result, steer it while it works, answer its questions (reply), "
    "or abort it. Runs go on between calls; every answer names the run by run_id."
)

_TEXT = {"type": "string"}
_NULLABLE_TEXT = {"type": ["string", "null"]}
_NULLABLE_INT = {"type": ["integer", "null"]}
_NULLABLE_NUMBER = {"type": ["number", "null"]}
_RUN_ID = {"type": "string", "description": "the run_id start returned"}
_COST_USD = {
    "type": ["number", "null"],
    "description": "what the run cost (so far), in USD; null when unknown, never 0",
}
_COST_SOURCE = {
    "type": "string",
    "enum": ["agent", "computed", "mixed", "unknown"],
    "description": "where cost_usd comes from: the agent's own figure, the price table, both",
}


def _obj(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        schema["required"] = list(required)
    return schema


_STATE_FIELDS: dict[str, Any] = {
    "run_id": _TEXT,
    "label": _NULLABLE_TEXT,
    "state": {
        "type": "string",
        "description": "starting, running, grace (its final message came), steering, "
        "waiting (a question for you: answer with reply), terminating, stopping, finished",
    },
    "attempt": _NULLABLE_INT,
    "current_tool": _NULLABLE_TEXT,
    "elapsed_s": {"type": "number"},
    "last_event_at": _NULLABLE_TEXT,
    "tokens": _NULLABLE_INT,
    "cost_usd": _COST_USD,
    "cost_source": _COST_SOURCE,
    "steers_pending": {"type": "integer"},
    "question": _NULLABLE_TEXT,
    "escalation_id": _NULLABLE_TEXT,
    "outcome": _NULLABLE_TEXT,
    "run_dir": _TEXT,
}

_STATE = _obj(_STATE_FIELDS, ("run_id", "state", "run_dir"))

_RECEIPT = {
    "type": "object",
    "properties": {
        "state": {
            "type": "string",
            "description": "delivered, sent (on the agent's input, not yet acknowledged), "
            "queued, refused, failed; for abort: ended, accepted, refused",
        },
        "id": _NULLABLE_TEXT,
        "how": _NULLABLE_TEXT,
        "why": _NULLABLE_TEXT,
        "attempt": _NULLABLE_INT,
        "outcome": _NULLABLE_TEXT,
    },
    "required": ["state"],
}

_SHORT_RESULT = {
    "type": "object",
    "properties": {
        "run_id": _TEXT,
        "label": _NULLABLE_TEXT,
        "outcome": _NULLABLE_TEXT,
        "exit_status": _NULLABLE_INT,
        "error": _NULLABLE_TEXT,
        "final_text_preview": _NULLABLE_TEXT,
        "cost_usd": _COST_USD,
        "cost_source": _COST_SOURCE,
    },
    "required": ["run_id", "outcome"],
}

_OMITTED = {"type": "integer", "description": "entries left out to keep the answer short"}


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: what a client lists, and how a call becomes a method call."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    #: Argument names as the client gives them, to the method's keywords.
    renamed: Mapping[str, str]
    #: The answer in one line, for a client that shows a model only text.
    summary: Callable[[dict[str, Any]], str]


def _start_summary(answer: dict[str, Any]) -> str:
    return f"started run {answer['run_id']} ({answer['state']}); its files: {answer['run_dir']}"


def _wait_summary(answer: dict[str, Any]) -> str:
    ended = ", ".join(f"{run['run_id']} {run['outcome']}" for run in answer["ended"])
    line = f"{len(answer['ended'])} ended ({ended or 'none'}), {len(answer['running'])} going on"
    return line + (" (timed out: call wait again)" if answer["timed_out"] else "")


def _status_summary(answer: dict[str, Any]) -> str:
    if "runs" in answer:
        return f"{len(answer['runs'])} runs going on"
    tool = f", in {answer['current_tool']}" if answer.get("current_tool") else ""
    return f"run {answer['run_id']} is {answer['state']}{tool}"


def _receipt_summary(answer: dict[str, Any]) -> str:
    why = f": {answer['why']}" if answer.get("why") else ""
    outcome = f" ({answer['outcome']})" if answer.get("outcome") else ""
    return f"{answer['state']}{outcome}{why}"


def _result_summary(answer: dict[str, Any]) -> str:
    cut = " (cut: the whole text is in final_text_path)" if answer["final_text_truncated"] else ""
    return f"run {answer['run_id']} ended {answer['outcome']}{cut}"


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            name="start",
            description=(
                "Start a coding agent (a subagent) on a task and return at once with its "
                "run_id; it works on in the background. Give either agent (a preset: "
                + ", ".join(PRESETS)
                + ") or command (the agent's argv in its JSON streaming mode). Nobody "
                "answers the agent's own approval prompts: each preset's posture says what "
                "it may do unasked. Then call wait, and result when it ended."
            ),
            input_schema=_obj(
                {
                    "task": {"type": "string", "description": "what the agent should do"},
                    "agent": {"type": "string", "enum": list(PRESETS)},
                    "command": {"type": "array", "items": _TEXT, "minItems": 1},
                    "live": {
                        "type": "boolean",
                        "description": "run the preset in its live mode, where a steer joins "
                        "the running turn instead of restarting it (default false)",
                    },
                    "label": {"type": "string", "description": "a name for the run"},
                    "cwd": {
                        "type": "string",
                        "description": "its working directory (default: the server's)",
                    },
                    "timeout": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "description": "seconds before the run is stopped (default: none)",
                    },
                    "settings": {
                        "anyOf": [_TEXT, {"type": "array", "items": _TEXT}],
                        "description": "a hooks settings file (only from where the user allowed)",
                    },
                    "max_steers": {"type": "integer", "minimum": 0, "maximum": 1000},
                    "on_stop": {"type": "string", "enum": list(ON_STOP)},
                    "max_cost": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "description": "stop the run once it cost this many US dollars "
                        "(error budget_exceeded)",
                    },
                    "max_tokens": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "stop the run once its tokens reach this",
                    },
                },
                ("task",),
            ),
            output_schema=_obj({"run_id": _TEXT, "run_dir": _TEXT, "state": _TEXT}, ("run_id",)),
            renamed={},
            summary=_start_summary,
        ),
        Tool(
            name="wait",
            description=(
                "Wait until any (or all) of the given runs ended, at most timeout seconds "
                f"(default {MCP_WAIT_DEFAULT:g}, at most {MCP_WAIT_MAX:g}); without run_ids, "
                "the runs going on. Returns the runs that ended (outcome, a preview of the "
                "final text) and those still going; timed_out means call wait again."
            ),
            input_schema=_obj(
                {
                    "run_ids": {"type": "array", "items": _TEXT},
                    "mode": {"type": "string", "enum": ["any", "all"]},
                    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": MCP_WAIT_MAX},
                }
            ),
            output_schema=_obj(
                {
                    "ended": {"type": "array", "items": _SHORT_RESULT},
                    "running": {"type": "array", "items": _STATE},
                    "timed_out": {"type": "boolean"},
                    "omitted": _OMITTED,
                },
                ("ended", "running", "timed_out"),
            ),
            renamed={},
            summary=_wait_summary,
        ),
        Tool(
            name="status",
            description=(
                "A run's state now: running or waiting (it asked a question: answer with "
                "reply), its current tool, elapsed time, tokens, cost, steers pending. "
                "Without run_id, every run going on."
            ),
            input_schema=_obj({"run_id": _RUN_ID}),
            output_schema=_obj(
                {
                    **_STATE_FIELDS,
                    "runs": {"type": "array", "items": _STATE},
                    "omitted": _OMITTED,
                }
            ),
            renamed={},
            summary=_status_summary,
        ),
        Tool(
            name="events",
            description=(
                "What a run did, as normalized events (text deltas merged), from after "
                f"event number since (default 0), at most limit (default {MCP_EVENTS_MAX}); "
                "call again with next_since to follow it."
            ),
            input_schema=_obj(
                {
                    "run_id": _RUN_ID,
                    "since": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MCP_EVENTS_MAX},
                },
                ("run_id",),
            ),
            output_schema=_obj(
                {
                    "run_id": _TEXT,
                    "events": {"type": "array", "items": {"type": "object"}},
                    "next_since": {"type": "integer"},
                    "more": {"type": "boolean"},
                },
                ("run_id", "events", "next_since", "more"),
            ),
            renamed={},
            summary=lambda a: (
                f"{len(a['events'])} events; next_since {a['next_since']}"
                + (" (more to read)" if a["more"] else "")
            ),
        ),
        Tool(
            name="steer",
            description=(
                "Tell a running agent something (a correction, more work) in the same "
                "session: now (interrupts it where it can, else at its next turn) or "
                "next-stop (when it would stop). Returns the receipt: delivered, sent (on "
                "its input, not yet acknowledged), queued or refused with why."
            ),
            input_schema=_obj(
                {
                    "run_id": _RUN_ID,
                    "text": {"type": "string"},
                    "when": {"type": "string", "enum": ["now", "next-stop"]},
                },
                ("run_id", "text"),
            ),
            output_schema=_RECEIPT,
            renamed={},
            summary=_receipt_summary,
        ),
        Tool(
            name="reply",
            description=(
                "Answer the question a run asked (status shows it when the run is "
                "waiting): text (an answer the agent is given), continue (go on working) or "
                "stop (end the run). You are the person it asks."
            ),
            input_schema=_obj(
                {
                    "run_id": _RUN_ID,
                    "text": _TEXT,
                    "continue": {"type": "boolean"},
                    "stop": {"type": "boolean"},
                    "escalation_id": {
                        "type": "string",
                        "description": "which question (default: its latest)",
                    },
                },
                ("run_id",),
            ),
            output_schema=_obj(
                {"run_id": _TEXT, "escalation_id": _TEXT, "answered": _TEXT},
                ("run_id", "escalation_id", "answered"),
            ),
            renamed={"continue": "go_on"},
            summary=lambda a: f"answered {a['escalation_id']} ({a['answered']})",
        ),
        Tool(
            name="abort",
            description="Stop a run now; returns how it ended.",
            input_schema=_obj({"run_id": _RUN_ID, "reason": _TEXT}, ("run_id",)),
            output_schema=_RECEIPT,
            renamed={},
            summary=_receipt_summary,
        ),
        Tool(
            name="result",
            description=(
                "What a run that ended came to: outcome, stop reason, error, its final "
                f"text (cut at max_chars, default {MCP_RESULT_DEFAULT_CHARS}, at most "
                f"{MCP_RESULT_MAX_CHARS}; the whole text is in final_text_path and the "
                "resource agent-wrapper://runs/RUN_ID/final.txt), usage and cost."
            ),
            input_schema=_obj(
                {
                    "run_id": _RUN_ID,
                    "max_chars": {"type": "integer", "minimum": 0, "maximum": MCP_RESULT_MAX_CHARS},
                },
                ("run_id",),
            ),
            output_schema=_obj(
                {
                    "run_id": _TEXT,
                    "outcome": _NULLABLE_TEXT,
                    "stop_reason": _NULLABLE_TEXT,
                    "exit_status": _NULLABLE_INT,
                    "error": {
                        "type": ["object", "null"],
                        "properties": {"kind": _NULLABLE_TEXT, "message": _NULLABLE_TEXT},
                    },
                    "final_text": _NULLABLE_TEXT,
                    "final_text_truncated": {"type": "boolean"},
                    "final_text_chars": {"type": "integer"},
                    "final_text_path": _NULLABLE_TEXT,
                    "usage": {"type": ["object", "null"]},
                    "cost_usd": _COST_USD,
                    "cost_source": _COST_SOURCE,
                    "steers": {
                        "type": "integer",
                        "description": "steers the agent was given: by hooks, stop "
                        "policies and from outside (steer)",
                    },
                    "result_path": _NULLABLE_TEXT,
                },
                ("run_id", "outcome", "final_text", "final_text_truncated"),
            ),
            renamed={},
            summary=_result_summary,
        ),
        Tool(
            name="list",
            description=f"This server's runs, newest first (default {MCP_LIST_DEFAULT}).",
            input_schema=_obj(
                {"limit": {"type": "integer", "minimum": 1, "maximum": MCP_LIST_MAX}}
            ),
            output_schema=_obj(
                {
                    "runs": {
                        "type": "array",
                        "items": _obj(
                            {
                                "run_id": _TEXT,
                                "label": _NULLABLE_TEXT,
                                "state": _TEXT,
                                "outcome": _NULLABLE_TEXT,
                                "started_at": _TEXT,
                                "run_dir": _TEXT,
                            },
                            ("run_id", "state"),
                        ),
                    },
                    "total": {"type": "integer"},
                    "omitted": _OMITTED,
                },
                ("runs", "total"),
            ),
            renamed={},
            summary=lambda a: f"{len(a['runs'])} of {a['total']} runs",
        ),
    )
}


async def call(
    tools: Tools,
    name: str,
    arguments: Mapping[str, Any] | None,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], str]:
    """Call tool ``name``: its structured answer and the text that goes with
    it. Raises ``ToolError`` for an unknown tool or argument and for
    whatever the tool refuses."""
    tool = TOOLS.get(name)
    if tool is None:
        raise ToolError(f"no tool {name!r}: the tools are {', '.join(TOOLS)}")
    given = dict(arguments or {})
    known = tool.input_schema["properties"]
    unknown = [key for key in given if key not in known]
    if unknown:
        raise ToolError(
            f"{name} takes no argument {unknown[0]!r}: it takes {', '.join(known) or 'none'}"
        )
    missing = [key for key in tool.input_schema.get("required", ()) if given.get(key) is None]
    if missing:
        raise ToolError(f"{name} needs {missing[0]}")
    # A client may send null for an argument it leaves out.
    given = {key: value for key, value in given.items() if value is not None}
    for key, value in given.items():
        if not _fits(value, known[key]):
            raise ToolError(f"{name}: {key} must be {_kind(known[key])}, not {value!r:.80}")
    kwargs = {tool.renamed.get(key, key): value for key, value in given.items()}
    if name in ("wait", "steer", "abort", "reply") and progress is not None:
        kwargs["progress"] = progress
    answer: dict[str, Any] = await getattr(tools, name)(**kwargs)
    return answer, tool.summary(answer) + "\n" + dumps(answer).decode()


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _fits(value: object, schema: Mapping[str, Any]) -> bool:
    """Whether ``value`` has the JSON type ``schema`` names (its ranges and
    enums are the tool's to check, with its own sentence)."""
    if "anyOf" in schema:
        return any(_fits(value, option) for option in schema["anyOf"])
    names = schema.get("type")
    names = [names] if isinstance(names, str) else names or list(_JSON_TYPES)
    for type_name in names:
        if isinstance(value, bool) and type_name in ("integer", "number"):
            continue
        if isinstance(value, _JSON_TYPES[type_name]):
            items = schema.get("items")
            return not (
                isinstance(value, list) and items and not all(_fits(v, items) for v in value)
            )
    return False


def _kind(schema: Mapping[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_kind(option) for option in schema["anyOf"])
    names = schema.get("type")
    kind = " or ".join([names] if isinstance(names, str) else names or ["any value"])
    items = schema.get("items")
    return f"{kind} of {_kind(items)}" if kind == "array" and items else kind
