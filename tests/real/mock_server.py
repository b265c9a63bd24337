"""A scripted model server for the real-CLI conformance tier.

One process, one port on 127.0.0.1, every streaming wire format the agent
CLIs speak: Anthropic Messages (``/v1/messages``, SSE or JSON), OpenAI
Responses (``/responses``), OpenAI Chat Completions (``/chat/completions``)
and Gemini (``:streamGenerateContent?alt=sse``, ``:generateContent``).

The answer is chosen by what the request contains, never by the order of
requests: CLIs make side requests (titles, classifiers, quota checks) and
repeat requests when they retry. The prompt carries a marker
``[scenario:NAME:NONCE]``; the conversation in the request (tool results,
the hook's steering reason) says which step of the scenario comes next.
A request without tools is a side request and gets a harmless answer.
A text answer ends with ``SAW:WORD`` for each ``[inject:WORD]`` the request
carries (messages written into a running agent: which request they reached).

Every request is appended to a JSONL log (``--log``) so a test can assert
what the CLI sent. Run it as ``python -m tests.real.mock_server --log FILE``;
it prints ``PORT <n>`` on stdout once it listens.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MARKER = re.compile(r"\[scenario:([a-z0-9_]+):([A-Za-z0-9]+)\]")
#: A word a client wrote into a running agent (a later user message); every
#: scripted text answer ends with ``SAW:<words>`` for those the request carries,
#: so the agent's own output shows which request the message reached.
INJECT = re.compile(r"\[inject:([A-Za-z0-9_-]+)\]")
#: What the Stop hook of the steering scenarios says; the mock looks for it
#: in the resumed request.
STEER_REASON = "STEER-REASON: also say STEERED."
#: Words of the scripted answers, asserted by the tests through finalText.
FIRST_ANSWER = "FIRST-ANSWER"
PLAIN_ANSWER = "PLAIN-OK"
TOOL_ANSWER = "TOOL-DONE"
STEERED_ANSWER = "STEERED-OK"
LOST_CONTEXT = "LOST-CONTEXT"
LENGTH_TEXT = "This answer is cut short because it ran out of output tok"
#: Files the scripted shell commands write in the agent's working directory.
TOOL_FILE = "tool-out.txt"
SLOW_FILE = "slow-out.txt"
STEER_FILE = "steer-out.txt"
#: How long the slow scenario's command runs (the tests pass a shorter --grace).
SLOW_SECONDS = 3
#: How long the long scenario's command runs: time to interrupt it.
LONG_SECONDS = 20
LONG_FILE = "long-out.txt"
#: How long the hold scenario's command runs: longer than any client's
#: default tool timeout a parent's wait is measured against (Codex 60 s).
HOLD_SECONDS = 150
#: How long the think scenario's model request takes before it answers.
THINK_SECONDS = 4

#: Between a Responses namespace and a tool's name in the names the mock
#: uses (a tool's own name has no dot).
NAMESPACE_SEP = "."

#: Names of the CLIs' own shell tools, in order of preference.
SHELL_TOOL_NAMES = ("bash", "Bash", "run_shell_command", "shell", "exec_command", "shell_command")


@dataclass(slots=True)
class Request:
    """One model request, reduced to what the scenarios decide on."""

    wire: str
    scenario: str | None
    nonce: str | None
    tools: dict[str, Any]
    #: Tool results in the conversation, before and after the steering reason.
    tool_results: int
    tool_results_after_steer: int
    steered: bool
    text: str
    stream: bool
    model: str
    #: The tool calls in the conversation, each with the result the CLI sent back.
    calls: list[Call] = field(default_factory=list)


@dataclass(slots=True)
class Call:
    """One tool call in a request's conversation and what the model was
    given as its result (``None`` while it has none)."""

    name: str
    args: dict[str, Any]
    #: The result as text, the way the CLI put it in the request.
    result: str | None = None
    #: The result's part of the request as the CLI wrote it.
    raw: Any = None


@dataclass(slots=True)
class Reply:
    """What to answer: an HTTP error, or text and/or a tool call with a stop kind."""

    status: int = 200
    text: str = ""
    tool: tuple[str, dict[str, Any]] | None = None
    #: ``stop``, ``tool`` or ``length``.
    stop: str = "stop"
    error_kind: str = ""
    delay: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class State:
    """Counts of requests already seen, for the scenarios that fail once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, int] = {}

    def count(self, key: str) -> int:
        with self.lock:
            self.seen[key] = self.seen.get(key, 0) + 1
            return self.seen[key]


# ---------------------------------------------------------------------------
# Reading requests


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """The request's parts in document order: ``("text", s)`` for strings,
    ``("result", obj)`` for a tool result."""
    if isinstance(value, dict):
        if (
            value.get("type") in ("tool_result", "function_call_output", "custom_tool_call_output")
            or value.get("role") == "tool"
            or "functionResponse" in value
        ):
            yield ("result", value)
        for key, item in value.items():
            if key in ("tools", "functionDeclarations"):
                continue
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, str):
        yield ("text", value)


def _tools(body: dict[str, Any]) -> dict[str, Any]:
    """Tool name -> its parameter schema, whatever the wire format."""
    found: dict[str, Any] = {}
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        for decl in tool.get("functionDeclarations") or []:
            found[decl.get("name", "")] = (
                decl.get("parameters") or decl.get("parametersJsonSchema") or {}
            )
        if tool.get("type") == "namespace":
            # Codex groups an MCP server's tools in a Responses namespace
            # (``mcp__agent_wrapper``); a call names the namespace and the tool.
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and "name" in inner:
                    found[f"{tool.get('name')}{NAMESPACE_SEP}{inner['name']}"] = (
                        inner.get("parameters") or {}
                    )
            continue
        function = tool.get("function")
        if isinstance(function, dict):
            found[function.get("name", "")] = function.get("parameters") or {}
        elif "name" in tool:
            found[tool["name"]] = tool.get("input_schema") or tool.get("parameters") or {}
    return found


def read_request(wire: str, body: dict[str, Any], model: str, stream: bool) -> Request:
    scenario = nonce = None
    results = after = 0
    steered = False
    texts: list[str] = []
    for kind, value in _walk({k: v for k, v in body.items() if k != "tools"}):
        if kind == "result":
            results += 1
            if steered:
                after += 1
            continue
        texts.append(value)
        if scenario is None and (match := MARKER.search(value)):
            scenario, nonce = match.group(1), match.group(2)
        if STEER_REASON in value:
            steered = True
    return Request(
        wire=wire,
        scenario=scenario,
        nonce=nonce,
        tools=_tools(body),
        tool_results=results,
        tool_results_after_steer=after,
        steered=steered,
        text="\n".join(texts),
        stream=stream,
        model=model,
        calls=conversation_calls({k: v for k, v in body.items() if k != "tools"}),
    )


def _text_of(content: Any) -> str:
    """A tool result's content as text: strings as they are, text blocks
    joined, anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            item["text"]
            if isinstance(item, dict) and isinstance(item.get("text"), str)
            else _text_of(item)
            for item in content
        )
    return json.dumps(content)


def _args(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = json.loads(value or "{}")
    return value if isinstance(value, dict) else {}


def conversation_calls(body: Any) -> list[Call]:
    """The tool calls of a request's conversation in order, each with its
    result, whatever the wire format (Anthropic ``tool_use`` and
    ``tool_result``, Responses ``function_call`` and its output, Chat
    Completions ``tool_calls`` and ``role: tool``, Gemini ``functionCall``
    and ``functionResponse``)."""
    calls: list[Call] = []
    by_id: dict[str, Call] = {}
    unanswered: list[Call] = []

    def answered(call: Call | None, content: Any, raw: Any) -> None:
        if call is not None:
            call.result, call.raw = _text_of(content), raw

    def visit(value: Any) -> None:
        if isinstance(value, list):
            for item in value:
                visit(item)
            return
        if not isinstance(value, dict):
            return
        kind = value.get("type")
        if kind == "tool_use":
            call = Call(str(value.get("name")), _args(value.get("input")))
            calls.append(call)
            by_id[str(value.get("id"))] = call
        elif kind == "tool_result":
            answered(by_id.get(str(value.get("tool_use_id"))), value.get("content"), value)
        elif kind == "function_call":
            name = str(value.get("name"))
            if value.get("namespace"):
                name = f"{value['namespace']}{NAMESPACE_SEP}{name}"
            call = Call(name, _args(value.get("arguments")))
            calls.append(call)
            by_id[str(value.get("call_id"))] = call
        elif kind == "function_call_output":
            answered(by_id.get(str(value.get("call_id"))), value.get("output"), value)
        elif isinstance(value.get("functionCall"), dict):
            spec = value["functionCall"]
            call = Call(str(spec.get("name")), _args(spec.get("args")))
            calls.append(call)
            unanswered.append(call)
        elif isinstance(value.get("functionResponse"), dict):
            spec = value["functionResponse"]
            match = next((c for c in unanswered if c.name == spec.get("name")), None)
            if match is not None:
                unanswered.remove(match)
            response = spec.get("response")
            if isinstance(response, dict) and list(response) == ["output"]:
                # Gemini CLI's wrapping of a tool's text.
                response = response["output"]
            answered(match, response, spec)
        elif value.get("role") == "tool":
            answered(by_id.get(str(value.get("tool_call_id"))), value.get("content"), value)
        if value.get("role") == "assistant" and isinstance(value.get("tool_calls"), list):
            for item in value["tool_calls"]:
                function = item.get("function") if isinstance(item, dict) else None
                if isinstance(function, dict):
                    call = Call(str(function.get("name")), _args(function.get("arguments")))
                    calls.append(call)
                    by_id[str(item.get("id"))] = call
        for key, item in value.items():
            if key not in ("tools", "functionDeclarations", "tool_calls"):
                visit(item)

    visit(body)
    return calls


# ---------------------------------------------------------------------------
# Scenarios


def shell_call(tools: dict[str, Any], command: str) -> tuple[str, dict[str, Any]] | None:
    """A call of the CLI's own shell tool running ``command``, its arguments
    built from the tool's schema."""
    name = next((n for n in SHELL_TOOL_NAMES if n in tools), None)
    if name is None:
        return None
    schema = tools[name] if isinstance(tools[name], dict) else {}
    props = schema.get("properties") or {}
    args: dict[str, Any] = {}
    key = next((k for k in ("command", "cmd") if k in props), "command")
    kind = (props.get(key) or {}).get("type")
    args[key] = ["bash", "-c", command] if kind == "array" else command
    for required in schema.get("required") or []:
        if required in args:
            continue
        spec = props.get(required) or {}
        if spec.get("type") == "string":
            args[required] = "run the scripted command"
        elif spec.get("type") in ("integer", "number"):
            args[required] = 60000
        elif spec.get("type") == "boolean":
            args[required] = False
    return name, args


def decide(req: Request, state: State) -> Reply:
    """The next step of the request's scenario, with the injected words it saw."""
    reply = _decide(req, state)
    seen = list(dict.fromkeys(INJECT.findall(req.text)))
    parent = (req.scenario or "").startswith(PARENT_PREFIX)
    if seen and reply.status == 200 and reply.text and req.scenario and req.tools and not parent:
        reply.text += " SAW:" + ",".join(seen)
    return reply


def _decide(req: Request, state: State) -> Reply:
    if req.scenario is None or not req.tools:
        return side_reply(req)
    name = req.scenario
    if name.startswith(PARENT_PREFIX):
        return parent_reply(req)
    if name == "auth":
        return Reply(status=401, error_kind="auth")
    if name == "overload":
        key = f"{req.nonce}:{req.tool_results}"
        if state.count(key) == 1:
            return Reply(status=529 if req.wire == "anthropic" else 500, error_kind="server")
        return Reply(text=PLAIN_ANSWER)
    if name == "plain":
        return Reply(text=PLAIN_ANSWER)
    if name == "think":
        # A slow model: time to write to the agent while its request is open.
        return Reply(text=PLAIN_ANSWER, delay=THINK_SECONDS)
    if name == "length":
        return Reply(text=LENGTH_TEXT, stop="length")
    if name == "escalate":
        # The tool scenario's command, asked to run outside the sandbox
        # where the shell tool offers that (Codex: it asks for approval).
        if req.tool_results == 0:
            reply = tool_reply(req, f"printf tool-ok > {TOOL_FILE}")
            offered = str(req.tools.get(reply.tool[0])) if reply.tool is not None else ""
            if reply.tool is not None and "sandbox_permissions" in offered:
                reply.tool[1].update(
                    sandbox_permissions="require_escalated", justification="write the file?"
                )
            return reply
        return Reply(text=TOOL_ANSWER)
    if name in ("tool", "slow", "long", "hold"):
        if req.tool_results == 0:
            if name == "tool":
                command = f"printf tool-ok > {TOOL_FILE}"
            elif name == "slow":
                # Not starting with sleep: Qwen Code refuses a command that
                # does ("run blocking commands in the background").
                command = f"true && sleep {SLOW_SECONDS} && printf slow-ok > {SLOW_FILE}"
            elif name == "long":
                command = f"true && sleep {LONG_SECONDS} && printf long-ok > {LONG_FILE}"
            else:
                command = f"true && sleep {HOLD_SECONDS}"
            return tool_reply(req, command)
        return Reply(text=TOOL_ANSWER)
    if name in ("steer", "steer_tool"):
        if not req.steered:
            return Reply(text=FIRST_ANSWER)
        if FIRST_ANSWER not in req.text:
            return Reply(text=LOST_CONTEXT)
        if name == "steer_tool" and req.tool_results_after_steer == 0:
            return tool_reply(req, f"printf steer-ok > {STEER_FILE}")
        return Reply(text=STEERED_ANSWER)
    return Reply(text=f"unknown scenario {name}")


# ---------------------------------------------------------------------------
# A parent agent delegating through agent-wrapper's MCP server

#: Scenarios of a parent agent whose tools include agent-wrapper's MCP tools.
PARENT_PREFIX = "mcp_"
#: The server's tools; a CLI shows them to its model under its own prefix
#: (Claude Code ``mcp__agent-wrapper__start``).
MCP_TOOLS = ("start", "wait", "status", "events", "steer", "reply", "abort", "result", "list")
#: One of them under a client's prefix (``mcp__agent-wrapper__start``,
#: ``mcp__agent_wrapper.start``, ``agent-wrapper_start``, ...).
OUR_TOOL = re.compile(r"(?:__|_|\.)(" + "|".join(MCP_TOOLS) + r")$")
#: What the parent steers its subagent with, and what it aborts the other for.
PARENT_STEER = "Also say who steered you. [inject:PARENT]"
ABORT_REASON = "the parent needs only one"
#: How often the parent asks a run's status while it waits for its tool,
#: and how many times before it gives up (a hang shows as GAVE-UP).
STATUS_PACE = 0.2
STATUS_POLLS = 100
#: A run id no server has: the parent's call with it is refused.
UNKNOWN_RUN = "no-such-run"
#: The parent's wait, in seconds, and how many it makes before it gives up.
PARENT_WAIT = 30
PARENT_WAITS = 8


def mcp_tool_names(tools: dict[str, Any]) -> dict[str, str]:
    """Our tool's name -> the name the CLI gave it."""
    found: dict[str, str] = {}
    for name in tools:
        match = OUR_TOOL.search(name)
        if match and "wrapper" in name.lower():
            found[match.group(1)] = name
    return found


def find_answer(text: str | None, key: str) -> dict[str, Any] | None:
    """The first JSON object holding ``key`` in a tool result as the model
    got it, however the CLI wrapped it (a summary line before the JSON, the
    structured content, the text again as a JSON string)."""
    if not text:
        return None
    decoder = json.JSONDecoder()

    def search(value: Any, depth: int) -> dict[str, Any] | None:
        if isinstance(value, dict):
            if key in value:
                return value
            children: Any = list(value.values())
        elif isinstance(value, list):
            children = value
        elif isinstance(value, str) and depth < 4:
            return scan(value, depth + 1)
        else:
            return None
        for child in children:
            if (found := search(child, depth)) is not None:
                return found
        return None

    def scan(source: str, depth: int) -> dict[str, Any] | None:
        at = source.find("{")
        while at >= 0:
            try:
                value, end = decoder.raw_decode(source, at)
            except ValueError:
                at = source.find("{", at + 1)
                continue
            if (found := search(value, depth)) is not None:
                return found
            at = source.find("{", end)
        return None

    return scan(text, 0)


#: Claude Code's tool that waits for its MCP servers still connecting.
WAIT_FOR_SERVERS = "WaitForMcpServers"


def subagent_task(scenario: str, nonce: str) -> str:
    return f"[scenario:{scenario}:{nonce}] Do the scripted task."


def parent_reply(req: Request) -> Reply:
    """The parent's next step: which of our tools it calls with what, or
    its answer, from the calls and results its conversation holds."""
    names = mcp_tool_names(req.tools)
    waited = [c for c in req.calls if c.name == WAIT_FOR_SERVERS]
    if "start" not in names and WAIT_FOR_SERVERS in req.tools and len(waited) < 2:
        # A server still starting: Claude Code offers a tool to wait for it
        # (as a model would, the parent waits before it gives up).
        return Reply(tool=(WAIT_FOR_SERVERS, {}), stop="tool", extra={"salt": len(req.calls)})
    if "start" not in names:
        return Reply(text=f"NO-MCP-TOOLS among {sorted(req.tools)}")
    assert req.scenario is not None
    assert req.nonce is not None
    calls = [c for c in req.calls if c.name in names.values()]
    short = {full: mine for mine, full in names.items()}

    def call(tool: str, **args: Any) -> Reply:
        # Two calls with the same arguments (status polls) still need ids of their own.
        return Reply(
            tool=(names[tool], args),
            stop="tool",
            extra={"salt": len(req.calls)},
            delay=STATUS_PACE if tool == "status" else 0.0,
        )

    def of(tool: str) -> list[Call]:
        return [c for c in calls if short[c.name] == tool]

    def run_id(label: str) -> str | None:
        for c in of("start"):
            if c.args.get("label") == label and (found := find_answer(c.result, "run_id")):
                return str(found["run_id"])
        return None

    def started(label: str, scenario: str) -> Reply | None:
        if any(c.args.get("label") == label for c in of("start")):
            return None
        task = subagent_task(scenario, f"{req.nonce}{label}")
        return call("start", agent="pi", task=task, label=label)

    def in_tool(rid: str) -> Reply | None:
        """None once the run's status shows it in a tool; else another status call."""
        polls = [c for c in of("status") if c.args.get("run_id") == rid]
        answer = find_answer(polls[-1].result, "current_tool") if polls else None
        if answer and (answer.get("current_tool") or answer.get("state") == "finished"):
            return None
        if len(polls) >= STATUS_POLLS:
            return Reply(text=f"GAVE-UP waiting for {rid} to run its tool")
        return call("status", run_id=rid)

    def finished(rid: str) -> Reply | None:
        """None once a wait says the run ended; else another wait."""
        waits = [c for c in of("wait") if rid in (c.args.get("run_ids") or [])]
        answer = find_answer(waits[-1].result, "ended") if waits else None
        if answer and any(run.get("run_id") == rid for run in answer["ended"]):
            return None
        if len(waits) >= PARENT_WAITS:
            return Reply(text=f"GAVE-UP waiting for {rid} to end")
        return call("wait", run_ids=[rid], timeout=PARENT_WAIT)

    def final_text(rid: str) -> Reply:
        results = [c for c in of("result") if c.args.get("run_id") == rid]
        if not results:
            return call("result", run_id=rid)
        answer = find_answer(results[-1].result, "final_text") or {}
        return Reply(text=str(answer.get("final_text")))

    name = req.scenario
    if name == "mcp_delegate":
        # A call the server refuses (how a tool error reaches the model),
        # then start, wait, result, and the subagent's final text as the answer.
        if not of("status"):
            return call("status", run_id=UNKNOWN_RUN)
        if (step := started("d", "plain")) is not None:
            return step
        rid = run_id("d")
        if rid is None:
            return Reply(text=f"START-FAILED {of('start')[-1].result!r:.500}")
        return finished(rid) or final_text(rid)
    if name == "mcp_steer":
        # Two subagents in their shell tools: the slow one is steered, the
        # long one aborted; the answer is the steered one's final text.
        for step in (started("s", "slow"), started("a", "long")):
            if step is not None:
                return step
        steered, aborted = run_id("s"), run_id("a")
        if steered is None or aborted is None:
            return Reply(text=f"START-FAILED {[c.result for c in of('start')]!r:.500}")
        if not of("steer"):
            return in_tool(steered) or call("steer", run_id=steered, text=PARENT_STEER)
        if not of("abort"):
            return in_tool(aborted) or call("abort", run_id=aborted, reason=ABORT_REASON)
        return finished(steered) or final_text(steered)
    if name == "mcp_kill":
        # A subagent in its long tool, and the parent waiting for it (the
        # test kills the parent during the wait).
        if (step := started("k", "long")) is not None:
            return step
        rid = run_id("k")
        if rid is None:
            return Reply(text=f"START-FAILED {of('start')[-1].result!r:.500}")
        if not of("wait"):
            return in_tool(rid) or call("wait", run_ids=[rid], timeout=PARENT_WAIT)
        return Reply(text="WAIT-RETURNED")
    if name == "mcp_steer_busy":
        # A steer on a subagent in its 150 s command: the call lasts until
        # the steer is delivered or the server stops waiting, with no
        # progress; the answer is what the model got.
        if (step := started("b", "hold")) is not None:
            return step
        rid = run_id("b")
        if rid is None:
            return Reply(text=f"START-FAILED {of('start')[-1].result!r:.500}")
        if not of("steer"):
            return in_tool(rid) or call("steer", run_id=rid, text=PARENT_STEER)
        return Reply(text=f"STEER-ANSWER {of('steer')[-1].result!r:.300}")
    if match := re.fullmatch(r"mcp_progress_(\d+)", name):
        # One wait longer than the client's tool timeout: does the call
        # stay open while the server sends progress? The answer is the
        # wait's result as the model got it.
        if (step := started("p", "hold")) is not None:
            return step
        rid = run_id("p")
        if rid is None:
            return Reply(text=f"START-FAILED {of('start')[-1].result!r:.500}")
        waits = of("wait")
        if not waits:
            return call("wait", run_ids=[rid], timeout=int(match.group(1)))
        return Reply(text=f"WAIT-ANSWER {waits[-1].result!r:.300}")
    return Reply(text=f"unknown scenario {name}")


def tool_reply(req: Request, command: str) -> Reply:
    call = shell_call(req.tools, command)
    if call is None:
        return Reply(text=f"NO-SHELL-TOOL among {sorted(req.tools)}")
    return Reply(text="Running it.", tool=call, stop="tool")


def side_reply(req: Request) -> Reply:
    """Answers to requests that are not the scenario's turn (titles, routing)."""
    if "model_choice" in req.text or "complexity" in req.text.lower():
        # Gemini's model router asks for a JSON verdict.
        return Reply(text=json.dumps({"reasoning": "simple", "model_choice": "flash"}))
    if "isNewTopic" in req.text or "title" in req.text.lower():
        return Reply(text=json.dumps({"isNewTopic": False, "title": "Scripted task"}))
    return Reply(text="ok")


# ---------------------------------------------------------------------------
# Writing responses


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


def _tool_id(reply: Reply) -> str:
    assert reply.tool is not None
    key: Any = reply.tool if "salt" not in reply.extra else [reply.tool, reply.extra["salt"]]
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return digest[:12]


USAGE = {"input": 20, "output": 10}


def anthropic_events(req: Request, reply: Reply) -> Iterator[bytes]:
    stop = {"stop": "end_turn", "tool": "tool_use", "length": "max_tokens"}[reply.stop]
    message: dict[str, Any] = {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": USAGE["input"], "output_tokens": 1},
    }
    yield _sse("message_start", {"type": "message_start", "message": message})
    index = 0
    if reply.text:
        block: dict[str, Any] = {"type": "text", "text": ""}
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        delta = {"type": "text_delta", "text": reply.text}
        yield _sse(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        index = 1
    if reply.tool:
        name, args = reply.tool
        tool_block = {
            "type": "tool_use",
            "id": f"toolu_{_tool_id(reply)}",
            "name": name,
            "input": {},
        }
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": tool_block},
        )
        delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
        yield _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": delta},
        )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": USAGE["output"]},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def anthropic_json(req: Request, reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    if reply.tool:
        name, args = reply.tool
        content.append(
            {"type": "tool_use", "id": f"toolu_{_tool_id(reply)}", "name": name, "input": args}
        )
    return {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": content,
        "stop_reason": {"stop": "end_turn", "tool": "tool_use", "length": "max_tokens"}[reply.stop],
        "stop_sequence": None,
        "usage": {"input_tokens": USAGE["input"], "output_tokens": USAGE["output"]},
    }


def responses_events(req: Request, reply: Reply) -> Iterator[bytes]:
    created = int(time.time())
    base = {"id": "resp_mock", "object": "response", "created_at": created, "model": req.model}
    yield _sse(
        "response.created",
        {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}},
    )
    output: list[dict[str, Any]] = []
    if reply.text:
        item = {
            "type": "message",
            "id": "msg_mock",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        yield _sse(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        )
        yield _sse(
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "item_id": "msg_mock",
                "output_index": 0,
                "content_index": 0,
                "delta": reply.text,
            },
        )
        done = {
            **item,
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
        output.append(done)
        yield _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": done},
        )
    if reply.tool:
        name, args = reply.tool
        namespace, _, name = name.rpartition(NAMESPACE_SEP)
        call = {
            "type": "function_call",
            "id": f"fc_{_tool_id(reply)}",
            "call_id": f"call_{_tool_id(reply)}",
            **({"namespace": namespace} if namespace else {}),
            "name": name,
            "arguments": json.dumps(args),
            "status": "completed",
        }
        yield _sse(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": len(output), "item": call},
        )
        yield _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": len(output), "item": call},
        )
        output.append(call)
    usage = {
        "input_tokens": USAGE["input"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": USAGE["output"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": USAGE["input"] + USAGE["output"],
    }
    if reply.stop == "length":
        final = {
            **base,
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": output,
            "usage": usage,
        }
        yield _sse("response.incomplete", {"type": "response.incomplete", "response": final})
        return
    final = {**base, "status": "completed", "output": output, "usage": usage}
    yield _sse("response.completed", {"type": "response.completed", "response": final})


def chat_events(req: Request, reply: Reply) -> Iterator[bytes]:
    base = {
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": req.model,
    }

    def chunk(delta: dict[str, Any], finish: str | None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse(None, {**base, "choices": [choice], **extra})

    yield chunk({"role": "assistant", "content": ""}, None)
    if reply.text:
        yield chunk({"content": reply.text}, None)
    if reply.tool:
        name, args = reply.tool
        call = {
            "index": 0,
            "id": f"call_{_tool_id(reply)}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        yield chunk({"tool_calls": [call]}, None)
    finish = {"stop": "stop", "tool": "tool_calls", "length": "length"}[reply.stop]
    usage = {
        "prompt_tokens": USAGE["input"],
        "completion_tokens": USAGE["output"],
        "total_tokens": USAGE["input"] + USAGE["output"],
    }
    yield chunk({}, finish)
    yield _sse(None, {**base, "choices": [], "usage": usage})
    yield _sse(None, "[DONE]")


def gemini_payload(req: Request, reply: Reply) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if reply.text:
        parts.append({"text": reply.text})
    if reply.tool:
        name, args = reply.tool
        parts.append({"functionCall": {"name": name, "args": args}})
    finish = {"stop": "STOP", "tool": "STOP", "length": "MAX_TOKENS"}[reply.stop]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": USAGE["input"],
            "candidatesTokenCount": USAGE["output"],
            "totalTokenCount": USAGE["input"] + USAGE["output"],
        },
        "modelVersion": req.model,
    }


def error_body(wire: str, reply: Reply) -> dict[str, Any]:
    auth = reply.error_kind == "auth"
    if wire == "anthropic":
        kind = "authentication_error" if auth else "overloaded_error"
        message = "invalid x-api-key" if auth else "Overloaded"
        return {"type": "error", "error": {"type": kind, "message": message}}
    if wire == "gemini":
        status = "UNAUTHENTICATED" if auth else "INTERNAL"
        message = "API key not valid. Please pass a valid API key." if auth else "Internal error"
        return {"error": {"code": reply.status, "message": message, "status": status}}
    return {
        "error": {
            "message": "Incorrect API key provided" if auth else "The server had an error",
            "type": "invalid_request_error" if auth else "server_error",
            "code": "invalid_api_key" if auth else None,
        }
    }


# ---------------------------------------------------------------------------
# HTTP


class Handler(BaseHTTPRequestHandler):
    server: MockServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            return self.rfile.read(length)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return b""

    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        if status == 401:
            # What the real APIs say: retrying cannot help.
            self.send_header("x-should-retry", "false")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, chunks: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for data in chunks:
            self.wfile.write(data)
            self.wfile.flush()

    def do_GET(self) -> None:
        self.server.log_request_line("GET", self.path, None, None)
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "mock-model"}]})
            return
        self._send_json(200, {})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        raw = self._read_body()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        path = self.path.split("?")[0]
        wire, model, stream = self._wire(path, body)
        if wire is None:
            self.server.log_request_line("POST", self.path, body, None)
            if path.endswith("/count_tokens"):
                self._send_json(200, {"input_tokens": 100})
            else:
                self._send_json(404, {"error": {"message": f"mock: no route {path}"}})
            return
        req = read_request(wire, body, model, stream)
        reply = decide(req, self.server.state)
        self.server.log_request_line("POST", self.path, body, req, reply)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self._send_json(reply.status, error_body(wire, reply))
            return
        if wire == "anthropic":
            if stream:
                self._send_sse(anthropic_events(req, reply))
            else:
                self._send_json(200, anthropic_json(req, reply))
        elif wire == "responses":
            self._send_sse(responses_events(req, reply))
        elif wire == "chat":
            self._send_sse(chat_events(req, reply))
        elif stream:
            self._send_sse(iter([_sse(None, gemini_payload(req, reply))]))
        else:
            self._send_json(200, gemini_payload(req, reply))

    @staticmethod
    def _wire(path: str, body: dict[str, Any]) -> tuple[str | None, str, bool]:
        model = str(body.get("model") or "mock-model")
        if path.endswith("/messages"):
            return "anthropic", model, bool(body.get("stream"))
        if path.endswith("/responses"):
            return "responses", model, True
        if path.endswith("/chat/completions"):
            return "chat", model, True
        if ":streamGenerateContent" in path or ":generateContent" in path:
            name = path.rsplit("/", 1)[-1].split(":", maxsplit=1)[0]
            return "gemini", name, ":streamGenerateContent" in path
        return None, model, False


class MockServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, log_path: str | None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = State()
        self.log_path = log_path
        self.log_lock = threading.Lock()

    def log_request_line(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        req: Request | None,
        reply: Reply | None = None,
    ) -> None:
        if not self.log_path:
            return
        entry: dict[str, Any] = {"ts": time.time(), "method": method, "path": path, "body": body}
        if req is not None:
            entry["wire"] = req.wire
            entry["scenario"] = req.scenario
            entry["nonce"] = req.nonce
            entry["tools"] = sorted(req.tools)
            entry["toolResults"] = req.tool_results
            entry["steered"] = req.steered
        if reply is not None:
            entry["reply"] = {
                "status": reply.status,
                "text": reply.text,
                "tool": reply.tool,
                "stop": reply.stop,
            }
        with self.log_lock, open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--log", help="append every request to this JSONL file")
    args = parser.parse_args(argv)
    server = MockServer(args.log)
    sys.stdout.write(f"PORT {server.server_address[1]}\n")
    sys.stdout.flush()
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
