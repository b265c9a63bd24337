"""Running hook handlers: command, http (the input POSTed to a URL), prompt
(an evaluator judges) and agent (a verifier agent run through the wrapper
itself).

Each handler but ``http`` is a subprocess in its own process group, given
its JSON input on stdin, bounded in time (killed with its group when the
time is up or the run is cancelled) and in the output kept from it. An
``http`` handler's request runs in a worker thread with the same bound; its
response body is read as a command handler's stdout. Nothing here decides
what an answer means beyond the protocol; the caller decides what to do
with it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import trio

from wrapper.core.events import Event, HookDecision, HookStarted, WarningEvent
from wrapper.core.hook_protocol import (
    STDERR_QUOTE_CHARS,
    Decision,
    HandlerResult,
    interpret_command,
    interpret_verdict,
)
from wrapper.core.jsonout import dumps
from wrapper.core.limits import (
    HANDLER_DRAIN_TIMEOUT,
    HANDLER_OUTPUT_BYTES,
    HTTP_RESPONSE_BYTES,
    VERIFIER_MARGIN,
)
from wrapper.core.settings import Handler
from wrapper.core.shellwords import ShellSyntax, split_command
from wrapper.core.urls import url_without_secrets
from wrapper.files.artifacts import RESULT_MAX_BYTES, UnreadableFile, read_run_file
from wrapper.process import proctree
from wrapper.process.invocation import wrapper_argv
from wrapper.process.spawn import Child

#: The judge's prompt carries the hook input; beyond this it is cut.
PROMPT_INPUT_CHARS = 100_000
#: What cannot go into a header value on the wire: a line break would start
#: a new header (http.client refuses it, quoting the value), and control or
#: non-Latin-1 characters are not sent as they are.
_UNSENDABLE_HEADER_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|[^\x00-\xff]")
#: ``$NAME`` or ``${NAME}`` in an http handler's header values.
_HEADER_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclass(slots=True)
class ProcessResult:
    """What a handler's process did: its exit status and output."""

    exit_code: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    #: Why it could not be started.
    error: str | None = None


@dataclass(slots=True, kw_only=True)
class HookContext:
    """What handlers need from the run."""

    cwd: Path
    #: The handlers' environment: the wrapper's own plus the run's identity
    #: and ``CLAUDE_PROJECT_DIR``.
    env: dict[str, str]
    #: Where verifier agents keep their run directories.
    run_dir: Path
    #: The agent a verifier runs when its handler names none: the run's own.
    agent_command: tuple[str, ...]
    evaluator: tuple[str, ...] | None
    emit: Callable[[Event], None]
    _verifiers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: What the run has said once and will not repeat (a missing extra).
    said: set[str] = field(default_factory=set)


async def run_chain(
    handlers: Sequence[Handler],
    event: str,
    payload: dict[str, Any],
    ctx: HookContext,
    *,
    blocking: bool,
    stop_at_failure: bool = False,
) -> list[HandlerResult]:
    """Run ``handlers`` in order. With ``blocking`` the first block or end wins
    and the rest are skipped, so the outcome does not depend on timing; with
    ``stop_at_failure`` so does the first handler that failed."""
    results = []
    for handler in handlers:
        ctx.emit(HookStarted(event=event, handler=handler.name))
        started = time.monotonic()
        result = await run_handler(handler, payload, ctx, plain_text_is_context=not blocking)
        ctx.emit(
            HookDecision(
                event=event,
                handler=handler.name,
                decision=str(result.decision),
                reason=result.reason,
                warning=result.warning,
                exit_code=result.exit_code,
                duration_ms=round((time.monotonic() - started) * 1000),
            )
        )
        results.append(result)
        if blocking and result.decision is not Decision.ALLOW:
            break
        if stop_at_failure and result.warning is not None:
            break
    return results


async def run_handler(
    handler: Handler, payload: dict[str, Any], ctx: HookContext, *, plain_text_is_context: bool
) -> HandlerResult:
    if handler.type == "command":
        return await _command(handler, payload, ctx, plain_text_is_context)
    if handler.type == "http":
        return await _http(handler, payload, ctx, plain_text_is_context)
    if handler.type == "prompt":
        return await _prompt(handler, payload, ctx)
    if handler.type == "mcp_tool":
        # Loaded when such a handler runs, never otherwise: it loads the MCP SDK.
        from wrapper.hooks.mcp_handler import call_tool  # noqa: PLC0415

        return await call_tool(handler, payload, ctx, plain_text_is_context)
    return await _agent(handler, payload, ctx)


async def _command(
    handler: Handler, payload: dict[str, Any], ctx: HookContext, plain_text_is_context: bool
) -> HandlerResult:
    if handler.args is not None:
        argv = list(handler.args)
    elif handler.shell:
        argv = ["/bin/sh", "-c", handler.command or ""]
    else:
        try:
            argv = split_command(handler.command or "", ctx.env)
        except ShellSyntax as exc:  # settings validation makes this unreachable
            return _failed(f"cannot run it: {exc}")
    done = await run_process(argv, dumps(payload), ctx.env, ctx.cwd, handler.timeout)
    if done.error is not None:
        return _failed(f"could not be started: {done.error}")
    if done.timed_out:
        return _failed(f"timed out after {handler.timeout:g}s and was killed")
    return interpret_command(
        exit_code=done.exit_code,
        stdout=done.stdout,
        stderr=done.stderr,
        plain_text_is_context=plain_text_is_context,
    )


async def _http(
    handler: Handler, payload: dict[str, Any], ctx: HookContext, plain_text_is_context: bool
) -> HandlerResult:
    """POST the hook input to the handler's URL; a 2xx answer's body is read
    as a command handler's stdout, anything else fails open (or closed, where
    the caller says so) with a warning that says what happened."""
    request = functools.partial(
        post_json,
        handler.url or "",
        dumps(payload),
        header_values(handler, ctx.env),
        handler.timeout,
    )
    with trio.move_on_after(handler.timeout) as limit:
        # The thread's socket has the same timeout, so an abandoned request
        # ends soon after; cancelling the run does not wait for it.
        answer = await trio.to_thread.run_sync(request, abandon_on_cancel=True)
    if limit.cancelled_caught:
        return _failed(f"did not answer within {handler.timeout:g}s")
    if isinstance(answer, str):
        return _failed(answer)
    status, body = answer
    if not 200 <= status < 300:
        excerpt = body.decode("utf-8", "replace").strip()[:STDERR_QUOTE_CHARS]
        return _failed(f"answered HTTP {status}{': ' + excerpt if excerpt else ''}")
    result = interpret_command(
        exit_code=0, stdout=body, stderr=b"", plain_text_is_context=plain_text_is_context
    )
    if result.warning is not None:
        return _failed(f"answered {result.warning.removeprefix('printed ')}")
    return dataclasses.replace(result, exit_code=None)


def header_values(handler: Handler, env: Mapping[str, str]) -> dict[str, str]:
    """The handler's headers with ``$NAME``/``${NAME}`` replaced, as Claude
    Code does: by the variable's value if ``allowedEnvVars`` lists it, else
    by nothing (a header never carries a variable it was not allowed)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return env.get(name, "") if name in handler.allowed_env_vars else ""

    return {key: _HEADER_VARIABLE.sub(value, text) for key, text in handler.headers}


def post_json(
    url: str, body: bytes, headers: Mapping[str, str], timeout: float
) -> tuple[int, bytes] | str:
    """POST ``body`` to ``url`` (blocking; run it in a thread). Returns the
    status and the body, or what went wrong as a sentence. A redirect is not
    followed: where it points is told instead. A body over
    ``HTTP_RESPONSE_BYTES`` is a failure, not cut."""
    # Loaded by a run that has http handlers only: it weighs on every run.
    import http.client  # noqa: PLC0415

    parts = urlsplit(url)
    shown = url_without_secrets(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    for name, value in headers.items():
        if _UNSENDABLE_HEADER_VALUE.search(value):
            # The value is never quoted: it is most often a token.
            return (
                f"could not send header {name} to {shown}: its value, once its variables "
                "were expanded, holds a line break, a control character or a character "
                "outside Latin-1 (a token read from a file often ends in a newline); "
                "the value is not shown"
            )
    secrets = [value for value in headers.values() if value]
    secrets += [s for s in (parts.query, parts.fragment, parts.username, parts.password) if s]
    deadline = time.monotonic() + timeout
    try:
        connection = kind(parts.hostname or "", parts.port, timeout=timeout)
    except ValueError as exc:
        return f"could not be reached at {shown}: {_without(str(exc), secrets)}"
    try:
        connection.request(
            "POST",
            path,
            body=body,
            headers={**headers, "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        data = bytearray()
        while len(data) <= HTTP_RESPONSE_BYTES:
            if time.monotonic() > deadline:
                return f"did not answer within {timeout:g}s"
            chunk = response.read1(65536)
            if not chunk:
                break
            data += chunk
        if len(data) > HTTP_RESPONSE_BYTES:
            return (
                f"answered with more than {HTTP_RESPONSE_BYTES // (1024 * 1024)} MiB; "
                "an answer must be a small JSON object"
            )
        if 300 <= response.status < 400:
            location = response.getheader("Location")
            where = url_without_secrets(location) if location else "nowhere (no Location header)"
            return (
                f"answered with a redirect (HTTP {response.status}) to {where}; "
                "redirects are not followed: give the final address as the url"
            )
        return response.status, bytes(data)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return (
            f"could not be reached at {shown}: {_without(why, secrets) or type(exc).__name__} "
            "(is the server up?)"
        )
    finally:
        connection.close()


def _without(text: str, secrets: Sequence[str]) -> str:
    """``text`` (an error from the HTTP library, which may quote the request)
    with every secret in it, plain or escaped as ``repr`` writes it, cut out."""
    for secret in secrets:
        for form in (secret, repr(secret)[1:-1]):
            text = text.replace(form, "…")
    return text


async def _prompt(handler: Handler, payload: dict[str, Any], ctx: HookContext) -> HandlerResult:
    if ctx.evaluator is None:  # settings validation makes this unreachable
        return _failed('no "evaluator" command is configured')
    argv = [*ctx.evaluator, judge_prompt(handler.prompt or "", payload)]
    done = await run_process(argv, dumps(payload), ctx.env, ctx.cwd, handler.timeout)
    if done.error is not None:
        return _failed(f"the evaluator could not be started: {done.error}")
    if done.timed_out:
        return _failed(f"the evaluator timed out after {handler.timeout:g}s and was killed")
    if done.exit_code != 0:
        return _failed(f"the evaluator exited with status {done.exit_code}")
    return _judged(interpret_verdict(done.stdout.decode("utf-8", "replace")), "the evaluator")


async def _agent(handler: Handler, payload: dict[str, Any], ctx: HookContext) -> HandlerResult:
    run_dir = ctx.run_dir / "hooks" / f"verifier-{next(ctx._verifiers)}"
    command = handler.agent_command or ctx.agent_command
    if not command:
        return _failed('has no agent to run: give the handler a "command"')
    argv = [
        *wrapper_argv(),
        "run",
        "--output",
        "quiet",
        "--label",
        "verifier",
        "--run-dir",
        str(run_dir),
        "--timeout",
        f"{handler.timeout:g}",
        "--task-file",
        "-",
        "--",
        *command,
    ]
    prompt = judge_prompt(handler.prompt or "", payload).encode()
    limit = handler.timeout + VERIFIER_MARGIN
    done = await run_process(argv, prompt, ctx.env, ctx.cwd, limit)
    if done.error is not None or done.timed_out:
        return _failed(f"the verifier agent could not be run: {done.error or 'timed out'}")
    try:
        result = orjson.loads(read_run_file(run_dir / "result.json", RESULT_MAX_BYTES) or b"")
    except (UnreadableFile, orjson.JSONDecodeError) as exc:
        return _failed(f"the verifier agent left no readable result.json ({exc})")
    text = result.get("finalText") if isinstance(result, dict) else None
    if not isinstance(text, str):
        return _failed("the verifier agent gave no final answer")
    return _judged(interpret_verdict(text), "the verifier agent")


def failure_warnings(
    event: str, handlers: Sequence[Handler], results: Sequence[HandlerResult], then: str = ""
) -> list[WarningEvent]:
    """One ``hook_failed`` warning per handler of ``event`` that failed; ``then``
    says what the wrapper did about it."""
    suffix = f"; {then}" if then else ""
    return [
        WarningEvent(
            code="hook_failed", message=f"{event} handler {handler.name} {result.warning}{suffix}"
        )
        for handler, result in zip(handlers, results, strict=False)
        if result.warning is not None
    ]


def _judged(result: HandlerResult, who: str) -> HandlerResult:
    if result.warning is None:
        return result
    return _failed(f"{who} {result.warning}")


def judge_prompt(prompt: str, payload: dict[str, Any]) -> str:
    """The prompt with the hook input in place of ``$ARGUMENTS``, or after it."""
    data = dumps(payload, option=orjson.OPT_INDENT_2).decode()
    if len(data) > PROMPT_INPUT_CHARS:
        data = data[:PROMPT_INPUT_CHARS] + "\n… [cut]"
    if "$ARGUMENTS" in prompt:
        return prompt.replace("$ARGUMENTS", data)
    return f"{prompt}\n\nHook input (JSON):\n{data}"


def _failed(why: str) -> HandlerResult:
    return HandlerResult(decision=Decision.ALLOW, warning=why)


async def run_process(
    argv: Sequence[str], stdin: bytes, env: Mapping[str, str], cwd: Path, timeout: float
) -> ProcessResult:
    """Run ``argv`` with ``stdin`` as its input, keeping a bounded part of its
    output; on timeout or cancellation its whole process group is killed."""
    result = ProcessResult()
    try:
        # The orphan reaper must not take its exit status before it is known
        # as the wrapper's own.
        with proctree.spawning():
            proc = _start_helper(argv, env, cwd)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in an argument
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        result.error = f"{argv[0]}: {reason}"
        return result
    out, err = bytearray(), bytearray()
    try:
        with trio.move_on_after(timeout) as limit:
            async with trio.open_nursery() as pipes:
                pipes.start_soon(_feed, proc.stdin, stdin)
                pipes.start_soon(_collect, proc.stdout, out)
                pipes.start_soon(_collect, proc.stderr, err)
                await proc.wait()
                pipes.cancel_scope.deadline = trio.current_time() + HANDLER_DRAIN_TIMEOUT
        result.timed_out = limit.cancelled_caught
    finally:
        with trio.CancelScope(shield=True):
            # Whatever it left in its group goes with it.
            proctree.signal_group(proc.pid, signal.SIGKILL)
            with trio.move_on_after(HANDLER_DRAIN_TIMEOUT):
                await proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    await stream.aclose()
            proctree.OWN_HELPERS.discard(proc.pid)
    result.exit_code = proc.returncode if not result.timed_out else None
    result.stdout, result.stderr = bytes(out), bytes(err)
    return result


class _Helper(Child):
    """A started handler: the agent's ``Child``, with a stream to its stdin
    (``Child`` makes one of a piped stdin)."""


def _start_helper(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> _Helper:
    """Start a handler and mark it as the wrapper's own before anything else
    can run: started in a worker thread, it would exist for a while unmarked,
    and the sweep for the agent's leftovers (in this thread) would kill it."""
    popen = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=dict(env),
        cwd=cwd,
    )
    proctree.register_helper(popen.pid)
    return _Helper(popen)


async def _feed(stream: trio.abc.SendStream | None, data: bytes) -> None:
    if stream is None:
        return
    try:
        await stream.send_all(data)
        await stream.aclose()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the handler does not read its input; that is its right


async def _collect(stream: trio.abc.ReceiveStream | None, into: bytearray) -> None:
    if stream is None:
        return
    while data := await stream.receive_some(65536):
        room = HANDLER_OUTPUT_BYTES - len(into)
        if room > 0:
            into += data[:room]
