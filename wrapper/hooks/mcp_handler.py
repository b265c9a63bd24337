"""``mcp_tool`` hook handlers: a tool of an MCP server called with the hook
input (the handler's ``input``, its ``${path}`` placeholders filled), its
text content read as a command handler's stdout.

The only module besides the MCP server's that loads the MCP SDK (the ``mcp``
extra), and only when such a handler runs: the rest of the hook machinery,
and every run without one, never pays for it. Without the extra, the run
says so once (a warning with the install line) and the handler fails open.

Each call starts its server and ends it: a stdio server is the wrapper's
own helper process in a group of its own, killed with its group when the
call is done, times out or the run is cancelled; an http server gets one
connection for the call. Keeping a server for the run would save its start
(about a second for a Python server) on the second and later calls, but
the PreToolUse relay is a process per tool call anyway, and a server that
lives as long as the run needs a task that outlives the handler.
Everything that goes wrong fails open with a warning saying what happened.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio

from wrapper.core.hook_protocol import (
    STDERR_QUOTE_CHARS,
    Decision,
    HandlerResult,
    interpret_command,
)
from wrapper.core.limits import (
    HANDLER_OUTPUT_BYTES,
    MCP_HANDLER_LINE_MAX_BYTES,
    MCP_HANDLER_RESPONSE_MAX_BYTES,
    MCP_SERVER_EXIT_GRACE,
)
from wrapper.core.mcp_servers import STDIO, McpServer, tool_arguments
from wrapper.core.settings import Handler
from wrapper.core.urls import url_without_secrets
from wrapper.process import proctree
from wrapper.process.spawn import Child

if TYPE_CHECKING:
    from wrapper.hooks.runner import HookContext

#: What to install for ``mcp_tool`` handlers, said once when it is missing.
INSTALL_LINE = "pip install 'agent-wrapper[mcp]'"
#: The warning's code, and its key in what a run has already said.
SDK_MISSING = "mcp_sdk_missing"
_READ_CHUNK = 65536


async def call_tool(
    handler: Handler, payload: dict[str, Any], ctx: HookContext, plain_text_is_context: bool
) -> HandlerResult:
    """Call the handler's tool with ``payload`` and read its answer as the
    hook's; never raises for what the server does."""
    server = handler.mcp_server
    if server is None:  # settings validation makes this unreachable
        return _failed(f'names no configured MCP server ("{handler.server}")')
    try:
        from mcp import Client  # noqa: PLC0415 - the extra, loaded for this handler alone
    except ImportError:
        if SDK_MISSING not in ctx.said:
            ctx.said.add(SDK_MISSING)
            ctx.emit(_sdk_missing_warning())
        return _failed(f"needs the MCP SDK, which is not installed ({INSTALL_LINE})")
    # Named as configured: a variable in its url is most often a token.
    where = _where(server)
    hidden = server.filled_in(ctx.env)
    server = server.expanded(ctx.env)
    arguments = tool_arguments(handler, payload)
    trace = _Trace()
    outcome: HandlerResult | None = None
    with trio.move_on_after(handler.timeout) as limit:
        try:
            async with (
                _transport(server, ctx, trace) as transport,
                Client(transport) as client,
            ):
                answer = await client.call_tool(handler.tool or "", arguments)
                outcome = _read(answer, plain_text_is_context)
                if outcome.warning is not None and answer.is_error:
                    outcome = await _explained(client, handler, outcome)
        except Exception as exc:  # the SDK raises many kinds: all fail open
            if outcome is None:
                why = _without_secrets(_why(exc, trace), server, hidden)
                outcome = _failed(f"could not call {handler.tool} on {where}: {why}")
    if limit.cancelled_caught:
        return _failed(f"did not answer within {handler.timeout:g}s ({where})")
    return outcome or _failed(f"got no answer from {where}")


def _sdk_missing_warning() -> Any:
    from wrapper.core.events import WarningEvent  # noqa: PLC0415 - only on this path

    return WarningEvent(
        code=SDK_MISSING,
        message=(
            "mcp_tool hook handlers need the MCP SDK (the mcp extra), which is not "
            f"installed; they are skipped (each one allows). Install it: {INSTALL_LINE}"
        ),
    )


def _read(answer: Any, plain_text_is_context: bool) -> HandlerResult:
    """The tool's text content as a command handler's stdout; an error
    result fails open quoting it."""
    texts = [block.text for block in answer.content if getattr(block, "type", None) == "text"]
    text = "\n".join(texts).encode("utf-8", "replace")[:HANDLER_OUTPUT_BYTES]
    if answer.is_error:
        quoted = text.decode("utf-8", "replace").strip()[:STDERR_QUOTE_CHARS]
        return _failed(f"answered with a tool error{': ' + quoted if quoted else ''}")
    result = interpret_command(
        exit_code=0, stdout=text, stderr=b"", plain_text_is_context=plain_text_is_context
    )
    if result.warning is not None:
        return _failed(f"answered {result.warning.removeprefix('printed ')}")
    # Everything the answer said, as any handler's; no exit status to show.
    return dataclasses.replace(result, exit_code=None)


async def _explained(client: Any, handler: Handler, outcome: HandlerResult) -> HandlerResult:
    """An error result, and if the server has no such tool, the tools it has."""
    try:
        listed = await client.list_tools()
    except Exception:  # the error itself is what matters
        return outcome
    names = sorted(tool.name for tool in listed.tools)
    if handler.tool in names:
        return outcome
    return _failed(
        f'names a tool the server "{handler.server}" does not have: {handler.tool!r} '
        f"(its tools: {', '.join(names) or 'none'})"
    )


@asynccontextmanager
async def _transport(server: McpServer, ctx: HookContext, trace: _Trace) -> AsyncIterator[Any]:
    if server.transport == STDIO:
        async with _stdio(server, ctx, trace) as streams:
            yield streams
        return
    import httpx2  # noqa: PLC0415 - the SDK's own HTTP client, with the extra
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

    bounded = {"response": [_bounded_body(httpx2)]}
    async with httpx2.AsyncClient(headers=dict(server.headers), event_hooks=bounded) as http:
        yield streamable_http_client(server.url or "", http_client=http)


def _bounded_body(httpx2: Any) -> Callable[[Any], Awaitable[None]]:
    """A response hook that reads a body up to ``MCP_HANDLER_RESPONSE_MAX_BYTES``,
    then fails it (the SDK then answers the call with an error)."""
    mib = MCP_HANDLER_RESPONSE_MAX_BYTES / 2**20

    class TooLong(httpx2.StreamError):  # type: ignore[misc]
        pass

    class Body(httpx2.AsyncByteStream):  # type: ignore[misc]
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self._inner:
                seen += len(chunk)
                if seen > MCP_HANDLER_RESPONSE_MAX_BYTES:
                    raise TooLong(f"the server's answer was longer than {mib:g} MiB")
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    async def hook(response: Any) -> None:
        response.stream = Body(response.stream)

    return hook


@asynccontextmanager
async def _stdio(server: McpServer, ctx: HookContext, trace: _Trace) -> AsyncIterator[Any]:
    """The server started as one of the wrapper's helpers, and the SDK's
    line transport over its pipes; the server and its group end with it."""
    from mcp.server.stdio import stdio_server  # noqa: PLC0415 - newline-delimited JSON-RPC

    argv = [server.command or "", *server.args]
    env = {**ctx.env, **dict(server.env)}
    # The orphan reaper must not take its exit status, nor the sweep for the
    # agent's leftovers kill it, before it is known as the wrapper's own.
    with proctree.spawning():
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
            cwd=ctx.cwd,
        )
        proctree.register_helper(popen.pid)
    proc = Child(popen)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_collect, proc.stderr, trace.stderr)
            lines, out = _Lines(proc.stdout, trace), _Out(proc.stdin)
            async with stdio_server(stdin=lines, stdout=out) as streams:  # type: ignore[arg-type]
                yield _Ready(streams)
                # The SDK's reader would wait for the server's output to end.
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            trace.exit_code = await _stop(proc)


async def _stop(proc: Child) -> int | None:
    """As the protocol ends a stdio server: its stdin closed, a moment to
    exit, then its whole group killed (a server may leave children)."""
    if proc.stdin is not None:
        await proc.stdin.aclose()
    with trio.move_on_after(MCP_SERVER_EXIT_GRACE):
        await proc.wait()
    exited = proc.returncode
    proctree.signal_group(proc.pid, signal.SIGKILL)
    with trio.move_on_after(MCP_SERVER_EXIT_GRACE):
        await proc.wait()
    for stream in (proc.stdout, proc.stderr):
        await stream.aclose()
    proctree.OWN_HELPERS.discard(proc.pid)
    return exited


@dataclass(slots=True)
class _Trace:
    """What a stdio server left to explain a failure: its stderr, and its
    exit status when it ended by itself (None: it was stopped, or is http)."""

    stderr: bytearray = field(default_factory=bytearray)
    exit_code: int | None = None
    #: It wrote a message longer than any answer is read.
    too_long: bool = False


class _Ready:
    """Streams already open, as the SDK's ``Client`` takes a transport."""

    def __init__(self, streams: Any) -> None:
        self._streams = streams

    async def __aenter__(self) -> Any:
        return self._streams

    async def __aexit__(self, *_exc: object) -> None:
        return None


class _Lines:
    """The server's messages, a line at a time; a line longer than
    ``MCP_HANDLER_LINE_MAX_BYTES`` ends the call (no answer is that long)."""

    def __init__(self, stream: trio.abc.ReceiveStream, trace: _Trace) -> None:
        self._stream = stream
        self._trace = trace
        self._buffer = bytearray()

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line.decode("utf-8", errors="replace")
            if len(self._buffer) > MCP_HANDLER_LINE_MAX_BYTES:
                self._trace.too_long = True
                raise StopAsyncIteration
            chunk = await self._stream.receive_some(_READ_CHUNK)
            if not chunk:
                raise StopAsyncIteration
            self._buffer += chunk


class _Out:
    """Our messages to the server, on its stdin."""

    def __init__(self, stream: trio.abc.SendStream | None) -> None:
        self._stream = stream

    async def write(self, text: str) -> None:
        if self._stream is not None:
            await self._stream.send_all(text.encode("utf-8", errors="replace"))

    async def flush(self) -> None:
        return None


async def _collect(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    try:
        while data := await stream.receive_some(_READ_CHUNK):
            room = HANDLER_OUTPUT_BYTES - len(into)
            if room > 0:
                into += data[:room]
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        pass


def _where(server: McpServer) -> str:
    if server.transport == STDIO:
        return f'the MCP server "{server.name}" ({server.command})'
    return f'the MCP server "{server.name}" at {url_without_secrets(server.url or "")}'


def _without_secrets(text: str, server: McpServer, hidden: Sequence[str] = ()) -> str:
    """``text`` (which the HTTP library may have written with the request's
    URL in it) without the URL's password, query and fragment, nor any
    header's value, nor what a variable put in either (``hidden``): they
    are most often tokens. (A user name is no secret, and a short one would
    cut words of the message.)"""
    if server.url is None:
        return text
    parts = urlsplit(server.url)
    secrets = [s for s in (parts.query, parts.fragment, parts.password) if s]
    secrets += [value for _name, value in server.headers if value]
    secrets += hidden
    text = text.replace(server.url, url_without_secrets(server.url))
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "…")
    return text


def _why(exc: BaseException, trace: _Trace) -> str:
    """What went wrong, from an exception that may be a group of them, with
    how the server ended and the end of its stderr (why it died, most often)."""
    leaves = [e for e in _leaves(exc) if not isinstance(e, trio.Cancelled)]
    text = "; ".join(dict.fromkeys(_one(e) for e in leaves)) or type(exc).__name__
    if trace.too_long:
        mib = MCP_HANDLER_LINE_MAX_BYTES / 2**20
        text += f"; the server wrote a message longer than {mib:g} MiB, more than any answer"
    if trace.exit_code is not None:
        text += f"; the server exited with status {trace.exit_code}"
    said = trace.stderr.decode("utf-8", "replace").strip()[-STDERR_QUOTE_CHARS:]
    return f"{text}{'; its stderr: ' + said if said else ''}"


def _one(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}{': ' + str(exc.filename) if exc.filename else ''}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _leaves(exc: BaseException) -> Sequence[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _failed(why: str) -> HandlerResult:
    return HandlerResult(decision=Decision.ALLOW, warning=why)
