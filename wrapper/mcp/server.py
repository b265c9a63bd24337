"""The MCP server itself: the one module that imports the MCP SDK (the
``mcp`` extra), the glue between its protocol and the tools.

The SDK's low-level server answers the protocol (the handshake, versions
as it negotiates them, listing, calls); this module hands it the catalog's
tools (a call's answer as structured content and text, a refusal as a tool
error, ``wait``'s progress as progress notifications), each finished run's
final text as a resource, and its own stdin and stdout: lines read and
written on trio's file-descriptor streams, which a stop signal can cancel
at once (the SDK's own reads stdin in a worker thread, which nothing can
interrupt: shutting down would wait for the client to close stdin). While
it serves, the process's fd 0 reads the null device and fd 1 writes to
stderr, so nothing else in the process (or a child given them) reaches the
protocol.

``serve`` is the server's life: the registry open, the protocol served
until the client closes stdin or a stop signal comes, then every run still
going aborted, each ending within its kill bounds with its result.json.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from typing import Any, cast

import mcp_types as types
import trio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from wrapper.core.limits import MCP_REQUEST_MAX_BYTES, STEER_MAX_BYTES
from wrapper.core.version import VERSION
from wrapper.mcp import catalog
from wrapper.mcp.registry import OptionsFrom, Policy, Runs, ToolError, open_runs
from wrapper.mcp.tools import FINAL_TEXT_FILE, Tools

#: A finished run's whole final text, as a resource.
FINAL_TEXT_URI = "agent-wrapper://runs/{run_id}/" + FINAL_TEXT_FILE

_READ_CHUNK = 65536
#: How much of each end of a line too long is kept to find its request id.
_HEAD_BYTES = 4096
#: A request id's value: a number or a string.
_ID_VALUE = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
#: In a message's head, the JSON tokens that tell the depth: a string (one
#: cut short by the head's end runs to that end) and the brackets.
_HEAD_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|[{}\[\]]')
#: A string token followed by a colon: a key, and the id's value after it.
_KEY_VALUE = re.compile(rb"\s*:\s*" + _ID_VALUE + rb"\s*[,}]")
#: The id as a message's last member, where the TypeScript SDK writes it
#: (after the method and the params).
_LAST_ID = re.compile(rb'(?<!\\)"id"\s*:\s*' + _ID_VALUE + rb"\s*}\s*\Z")


class _Out:
    """The server's messages to the client, on a file descriptor."""

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self._stream = stream
        self._lock = trio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._stream.send_all(text.encode("utf-8", errors="replace"))

    async def flush(self) -> None:
        return None


class _Lines:
    """The client's messages, a line at a time, from a file descriptor. A
    line past ``MCP_REQUEST_MAX_BYTES`` is not read whole: it is answered
    at once on ``out`` with an error for its request id (the message's own,
    in its head or at its end, where clients put it), so the client waiting
    for that answer is told, and the next line is read."""

    def __init__(self, stream: trio.lowlevel.FdStream, out: _Out) -> None:
        self._stream = stream
        self._out = out
        self._buffer = bytearray()
        #: How far the buffer was searched for a line's end.
        self._searched = 0
        #: The head of a line too long, and the last bytes skipped of it.
        self._dropped: bytes | None = None
        self._dropped_tail = b""
        self._dropped_size = 0

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._buffer.find(b"\n", self._searched)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                self._searched = 0
                if self._dropped is None and len(line) <= MCP_REQUEST_MAX_BYTES:
                    return line.decode("utf-8", errors="replace")
                head = self._dropped if self._dropped is not None else line[:_HEAD_BYTES]
                tail = (self._dropped_tail + line)[-_HEAD_BYTES:]
                await self._too_long(head, tail, self._dropped_size + len(line))
                self._dropped, self._dropped_tail, self._dropped_size = None, b"", 0
                continue
            self._searched = len(self._buffer)
            if len(self._buffer) > MCP_REQUEST_MAX_BYTES:
                if self._dropped is None:
                    self._dropped = bytes(self._buffer[:_HEAD_BYTES])
                self._dropped_tail = bytes(self._buffer[-_HEAD_BYTES:])
                self._dropped_size += len(self._buffer)
                self._buffer.clear()
                self._searched = 0
            chunk = await self._stream.receive_some(_READ_CHUNK)
            if not chunk:
                if self._buffer and self._dropped is None:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return line.decode("utf-8", errors="replace")
                raise StopAsyncIteration
            self._buffer += chunk

    async def _too_long(self, head: bytes, tail: bytes, size: int) -> None:
        request_id = request_id_of(head, tail)
        message = (
            f"the message is {size} bytes, more than this server reads "
            f"({MCP_REQUEST_MAX_BYTES} bytes); it was not read: send a shorter one "
            f"(a steer's text is at most {STEER_MAX_BYTES} bytes)"
        )
        error = {"code": -32600, "message": message}
        answer = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
        await self._out.write(answer + "\n")


def request_id_of(head: bytes, tail: bytes) -> Any:
    """The request id of a message known only by its first and last bytes
    (``head``, ``tail``), or ``None``. Only the message's own id counts, never
    an ``id`` inside its params: a member of the outermost object in the
    head, else the message's last member (its end is always whole)."""
    depth = 0
    for token in _HEAD_TOKEN.finditer(head):
        first = token.group()[:1]
        if first in b"{[":
            depth += 1
        elif first in b"}]":
            depth -= 1
        elif depth == 1 and token.group() == b'"id"':
            value = _KEY_VALUE.match(head, token.end())
            if value is not None:
                return _decoded(value.group(1))
    last = _LAST_ID.search(tail)
    return None if last is None else _decoded(last.group(1))


def _decoded(value: bytes) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return None


@contextlib.contextmanager
def _own_stdio() -> Iterator[tuple[_Lines, _Out]]:
    """The protocol's stdin and stdout on private descriptors; fd 0 reads
    the null device and fd 1 writes to stderr meanwhile. Both are put back
    as they were (blocking or not) at the end."""
    saved = []
    streams = []
    try:
        for fd, diversion in ((0, os.devnull), (1, None)):
            private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            saved.append((fd, private, fcntl.fcntl(private, fcntl.F_GETFL)))
            if diversion is not None:
                target = os.open(diversion, os.O_RDONLY)
                os.dup2(target, fd)
                os.close(target)
            else:
                os.dup2(2, fd)
            streams.append(trio.lowlevel.FdStream(os.dup(private)))
        out = _Out(streams[1])
        yield _Lines(streams[0], out), out
    finally:
        for fd, private, flags in saved:
            # trio's streams made the shared file description non-blocking.
            with contextlib.suppress(OSError):
                fcntl.fcntl(private, fcntl.F_SETFL, flags)
                os.dup2(private, fd)
                os.close(private)


def _server(tools: Tools) -> Server[Any]:
    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    output_schema=tool.output_schema,
                )
                for tool in catalog.TOOLS.values()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        async def progress(elapsed: float, message: str) -> None:
            await ctx.session.report_progress(elapsed, None, message)

        try:
            answer, text = await catalog.call(tools, params.name, params.arguments, progress)
        except ToolError as refused:
            return types.CallToolResult(
                content=[types.TextContent(text=refused.message)], is_error=True
            )
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=answer
        )

    async def list_resources(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        resources = []
        for entry in tools.runs.entries.values():
            final = (entry.result or {}).get("finalText")
            if entry.ended and isinstance(final, str):
                resources.append(
                    types.Resource(
                        uri=FINAL_TEXT_URI.format(run_id=entry.run_id),
                        name=f"{entry.run_id} final text",
                        mime_type="text/plain",
                        size=len(final.encode("utf-8", errors="replace")),
                    )
                )
        return types.ListResourcesResult(resources=resources)

    async def list_templates(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=FINAL_TEXT_URI,
                    name="a run's whole final text",
                    mime_type="text/plain",
                )
            ]
        )

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        prefix, _, rest = uri.partition("agent-wrapper://runs/")
        run_id, _, name = rest.partition("/")
        if prefix or name != FINAL_TEXT_FILE:
            raise _not_found(f"no resource {uri}: this server has {FINAL_TEXT_URI}")
        try:
            entry = tools.runs.get(run_id)
        except ToolError as refused:
            raise _not_found(refused.message) from None
        # The text the run ended with, as the file holds it: read from the
        # result in memory, never from a file in reach of the agent.
        text = (entry.result or {}).get("finalText") if entry.ended else None
        if not isinstance(text, str):
            raise _not_found(f"run {run_id} has no final text")
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
        )

    return Server(
        "agent-wrapper",
        version=VERSION,
        instructions=catalog.INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def _not_found(message: str) -> Exception:
    return MCPError(code=types.INVALID_PARAMS, message=message)


async def serve(policy: Policy, options_from: OptionsFrom) -> int:
    """Serve MCP on stdin and stdout until the client closes stdin (0) or a
    stop signal comes (128 + its number); every run still going is then
    aborted and has written its result.json."""
    async with open_runs(policy, options_from) as runs:
        tools = Tools(runs)
        server = _server(tools)
        with _own_stdio() as (lines, out):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_when_stopped, runs, nursery.cancel_scope)
                async with stdio_server(stdin=cast(Any, lines), stdout=cast(Any, out)) as (
                    read,
                    write,
                ):
                    await server.run(read, write, server.create_initialization_options())
                nursery.cancel_scope.cancel()
    return 0 if runs.stopped_by is None else 128 + runs.stopped_by


async def _cancel_when_stopped(runs: Runs, scope: trio.CancelScope) -> None:
    await runs.stopped.wait()
    scope.cancel()
