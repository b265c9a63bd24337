"""``agent-wrapper mcp`` as an MCP client sees it: the server started as a
client starts it (a process on stdin/stdout), spoken to with the MCP SDK's
own client, and, for its life cycle, with plain JSON-RPC lines (a client
that closes stdin, a signal while stdin is still open)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.mcpbench import LineClient
from tests.conftest import FAKE_PI, ROOT, agent_env, read_result, write_scenario
from wrapper.core.limits import (
    MCP_ANSWER_MAX_CHARS,
    MCP_REQUEST_MAX_BYTES,
    MCP_RESULT_DEFAULT_CHARS,
)

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[mcp]'")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_leaks")

WRAPPER = [sys.executable, "-m", "wrapper"]
END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]


def answer(text: str) -> list[dict[str, Any]]:
    return [{"assistant": {"text": text, "stopReason": "stop"}}, *END]


def long_tool(seconds: float = 60) -> list[dict[str, Any]]:
    return [{"tool": {"name": "bash", "duration": seconds, "result": "built"}}, *answer("Built.")]


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    path = f"{FAKE_PI.parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    return agent_env(tmp_path, HOME=str(home), PATH=path, PYTHONPATH=str(ROOT), **extra)


def pi(
    tmp_path: Path,
    steps: Sequence[dict[str, Any]],
    name: str = "s",
    resumes: Sequence[Sequence[dict[str, Any]]] = (),
) -> list[str]:
    folder = tmp_path / name
    folder.mkdir()
    extra = {"resumes": [list(r) for r in resumes]} if resumes else {}
    scenario = write_scenario(folder, steps, **extra)
    return ["pi", "--mode", "json", "-p", "--scenario", str(scenario)]


@asynccontextmanager
async def client(
    tmp_path: Path, *options: str, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=WRAPPER[0],
        args=[*WRAPPER[1:], "mcp", *options],
        env=env or environment(tmp_path),
        cwd=str(tmp_path),
    )
    with (tmp_path / "server-stderr.txt").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, name: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured answer, checked as a client checks it: against
    the output schema the tool lists, with a text that says the same."""
    result = await session.call_tool(name, arguments)
    assert not result.is_error, result.content
    answer = result.structured_content
    assert isinstance(answer, dict)
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    jsonschema.validate(answer, tools[name].output_schema)
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text.split("\n", 1)[1]) == answer
    assert len(text) <= MCP_ANSWER_MAX_CHARS + 500
    return answer


async def refused(session: ClientSession, name: str, **arguments: Any) -> str:
    result = await session.call_tool(name, arguments)
    assert result.is_error
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


async def test_the_tools_a_client_lists(tmp_path: Path) -> None:
    async with client(tmp_path) as session:
        tools = (await session.list_tools()).tools
        assert [tool.name for tool in tools] == [
            *("start", "wait", "status", "events", "steer", "reply", "abort", "result", "list"),
        ]
        for tool in tools:
            assert len(tool.description or "") > 30
            jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            assert tool.output_schema is not None
            jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        start = next(tool for tool in tools if tool.name == "start")
        assert start.input_schema["required"] == ["task"]
        assert "pi" in start.input_schema["properties"]["agent"]["enum"]


async def test_start_wait_with_progress_result_and_the_resource(tmp_path: Path) -> None:
    big = "".join(f"line {n}: the report goes on\n" for n in range(200_000))  # 5.6 MB
    async with client(tmp_path) as session:
        started = time.monotonic()
        # Two deltas: the fake's pi repeats the message so far in each one.
        steps = [{"assistant": {"text": big, "stopReason": "stop", "deltas": 2}}, *END]
        run = await call(session, "start", command=pi(tmp_path, steps), task="Report")
        assert time.monotonic() - started < 5  # returns at once (the bound only catches hangs)
        assert run["state"] in ("starting", "running")
        ended = await call(session, "wait", run_ids=[run["run_id"]], timeout=60)
        assert not ended["timed_out"]
        assert [r["outcome"] for r in ended["ended"]] == ["ok"]
        result = await call(session, "result", run_id=run["run_id"])
        assert result["outcome"] == "ok"
        assert result["final_text"] == big[:MCP_RESULT_DEFAULT_CHARS]
        assert result["final_text_truncated"]
        assert Path(result["final_text_path"]).read_text() == big
        assert Path(result["result_path"]).is_file()
        uri = f"agent-wrapper://runs/{run['run_id']}/final.txt"
        listed = await session.list_resources()
        assert [str(r.uri) for r in listed.resources] == [uri]
        read = await session.read_resource(uri)
        assert read.contents[0].text == big  # type: ignore[union-attr]


async def test_wait_sends_progress_while_it_waits(tmp_path: Path) -> None:
    seen: list[tuple[float, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with client(tmp_path) as session:
        run = await call(session, "start", command=pi(tmp_path, long_tool(7)), task="Build")
        arguments: dict[str, Any] = {"run_ids": [run["run_id"]], "timeout": 60}
        result = await session.call_tool("wait", arguments, progress_callback=progress)
        assert result.structured_content["ended"][0]["outcome"] == "ok"
    assert seen, "no progress notification during a 7 s wait"
    assert seen[0][1] == "1 of 1 runs still going"
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


async def test_status_events_steer_abort_and_list(tmp_path: Path) -> None:
    async with client(tmp_path, "--steer-timeout", "0.3") as session:
        run = await call(
            session, "start", command=pi(tmp_path, long_tool()), task="Build", label="builder"
        )
        run_id = run["run_id"]
        with trio.fail_after(30):
            while (status := await call(session, "status", run_id=run_id))["current_tool"] is None:
                await trio.sleep(0.1)
        assert status["state"] == "running"
        assert status["label"] == "builder"
        # The run's events reach its events.jsonl within a second, tool under way.
        with trio.fail_after(10):
            while not any(
                event.get("type") == "tool_start"
                for event in (await call(session, "events", run_id=run_id))["events"]
            ):
                await trio.sleep(0.2)
        receipt = await call(session, "steer", run_id=run_id, text="Stop building, ship it")
        assert receipt["state"] in ("delivered", "sent")
        aborted = await call(session, "abort", run_id=run_id, reason="enough")
        assert aborted == {**aborted, "state": "ended", "outcome": "aborted"}
        listed = await call(session, "list")
        assert [(r["run_id"], r["state"]) for r in listed["runs"]] == [(run_id, "finished")]
        result = await call(session, "result", run_id=run_id)
        assert result["outcome"] == "aborted"
        assert result["steers"] == 1


async def test_a_question_the_subagent_asks_is_answered_with_reply(tmp_path: Path) -> None:
    async with client(tmp_path) as session:
        command = pi(tmp_path, answer("Drop the old API too?"), resumes=[answer("Dropped it.")])
        run = await call(session, "start", command=command, task="Refactor", on_stop="escalate")
        run_id = run["run_id"]
        with trio.fail_after(30):
            while (status := await call(session, "status", run_id=run_id))["state"] != "waiting":
                await trio.sleep(0.1)
        assert status["question"] == "Drop the old API too?"
        said = await refused(session, "reply", run_id=run_id, text="Yes", stop=True)
        assert "exactly one of text, continue or stop" in said
        replied = await call(session, "reply", run_id=run_id, text="Yes, drop it")
        assert replied["answered"] == "text"
        with trio.fail_after(30):
            while (await call(session, "status", run_id=run_id))["question"] != "Dropped it.":
                await trio.sleep(0.1)
        assert (await call(session, "reply", run_id=run_id, stop=True))["answered"] == "stop"
        await call(session, "wait", run_ids=[run_id], timeout=60)
        result = await call(session, "result", run_id=run_id)
        assert (result["outcome"], result["final_text"], result["steers"]) == (
            "ok",
            "Dropped it.",
            1,
        )


async def test_refusals_are_tool_errors_a_model_can_act_on(tmp_path: Path) -> None:
    settings = tmp_path / "hooks.json"
    settings.write_text("{}")
    env = environment(tmp_path)
    async with client(tmp_path, "--max-runs", "1", env=env) as session:
        said = await refused(session, "start", command=["rm", "-rf", "/"], task="x")
        assert "--allow rm" in said
        said = await refused(session, "start", agent="nope", task="x")
        assert "the agents are pi, claude" in said
        said = await refused(
            session, "start", command=pi(tmp_path, answer("x")), task="x", settings=str(settings)
        )
        assert "--allow-settings" in said
        said = await refused(session, "start", command=["pi"], task="x", cwd="/")
        assert "--allow-cwd /" in said
        said = await refused(session, "start", task="x", agent="pi", colour="blue")
        assert "start takes no argument 'colour'" in said
        said = await refused(session, "wait", timeout="soon")
        assert "timeout must be number" in said
        said = await refused(session, "result", run_id="no-such-run")
        assert "no-such-run" in said
        await call(session, "start", command=pi(tmp_path, long_tool(), "a"), task="x")
        said = await refused(session, "start", command=pi(tmp_path, answer("x"), "b"), task="x")
        assert "--max-runs 1" in said
        await call(session, "abort", run_id=(await call(session, "list"))["runs"][0]["run_id"])


async def test_a_program_that_cannot_start_is_a_tool_error(tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    async with client(tmp_path, "--allow", str(script)) as session:
        said = await refused(session, "start", command=[str(script)], task="x")
        assert "could not be started" in said


async def test_a_start_past_the_depth_is_refused(tmp_path: Path) -> None:
    env = environment(tmp_path, AGENT_WRAPPER_DEPTH="3")
    async with client(tmp_path, env=env) as session:
        said = await refused(session, "start", command=pi(tmp_path, answer("x")), task="x")
        assert "nested 4 deep" in said


# -- the server's life ----------------------------------------------------------


class RawClient(LineClient):
    """The server as a client starts it, spoken to in JSON-RPC lines."""

    def __init__(self, tmp_path: Path, *options: str) -> None:
        stderr = (tmp_path / "server-stderr.txt").open("w")
        super().__init__([*WRAPPER, "mcp", *options], environment(tmp_path), tmp_path, stderr)

    def start(self, tmp_path: Path, name: str) -> dict[str, Any]:
        return self.tool("start", command=pi(tmp_path, long_tool(), name), task="Build")


def aborted_result(run: dict[str, Any]) -> dict[str, Any]:
    result = read_result(Path(run["run_dir"]) / "result.json")
    assert result["outcome"] == "aborted"
    return result


def test_closing_stdin_aborts_every_run_and_the_server_exits(tmp_path: Path) -> None:
    server = RawClient(tmp_path)
    runs = [server.start(tmp_path, name) for name in ("a", "b")]
    assert server.process.stdin is not None
    server.process.stdin.close()
    # Each run ends within its kill bounds (3 s by default); the bound catches hangs.
    assert server.process.wait(timeout=30) == 0
    for run in runs:
        aborted_result(run)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_with_stdin_open_aborts_every_run(
    tmp_path: Path, sig: signal.Signals
) -> None:
    server = RawClient(tmp_path)
    run = server.start(tmp_path, "a")
    began = time.monotonic()
    server.process.send_signal(sig)
    assert server.process.wait(timeout=30) == 128 + sig
    # Not held up by stdin, which is still open: within the run's kill bounds.
    assert time.monotonic() - began < 15
    result = aborted_result(run)
    assert sig.name in json.dumps(result)


def test_a_sigkilled_server_leaves_each_run_the_guardians_result(tmp_path: Path) -> None:
    server = RawClient(tmp_path)
    runs = [server.start(tmp_path, name) for name in ("a", "b")]
    # The process a client starts is the guardian; the server works below it.
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
    [worker] = [int(pid) for pid in children.read_text().split()]
    os.kill(worker, signal.SIGKILL)
    assert server.process.wait(timeout=30) == 128 + signal.SIGKILL
    for run in runs:
        result = read_result(Path(run["run_dir"]) / "result.json")
        assert (result["outcome"], result["error"]["kind"]) == ("aborted", "wrapper_killed")


@pytest.mark.parametrize("over", [1, MCP_REQUEST_MAX_BYTES])
@pytest.mark.parametrize("id_last", [False, True], ids=["id-first", "id-last"])
def test_a_message_too_long_is_answered_for_its_id_and_the_next_is_read(
    tmp_path: Path, over: int, id_last: bool
) -> None:
    # Just past the bound (its end read with the rest of the line) and far past
    # it (skipped as it comes): either way the client waiting for id 77 is told.
    # The Python SDK writes the id first; the TypeScript SDK (most clients)
    # after the params, where an "id" argument must not be taken for it.
    server = RawClient(tmp_path)
    arguments = {"id": "not-the-request", "run_id": "x" * (MCP_REQUEST_MAX_BYTES + over)}
    params = {"name": "status", "arguments": arguments}
    if id_last:
        server.send({"method": "tools/call", "params": params, "jsonrpc": "2.0", "id": 77})
    else:
        server.send({"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": params})
    assert server.process.stdout is not None
    answer = json.loads(server.process.stdout.readline())
    assert answer["id"] == 77
    assert (
        f"more than this server reads ({MCP_REQUEST_MAX_BYTES} bytes)"
        in (answer["error"]["message"])
    )
    assert "runs" in server.tool("list")
    assert server.close() == 0


@pytest.mark.parametrize(
    ("head", "tail", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"na', b"", 5),
        (b'{"jsonrpc":"2.0","id":"a\\"b","method"', b"", 'a"b'),
        # Only the outermost object's id: not one in the params, nor a value "id".
        (b'{"method":"id","params":{"id":9,"arguments":{"t', b'xx"}},"jsonrpc":"2.0","id":7}\r', 7),
        (b'{"method":"x","params":{"t":"\\"id\\":3', b'x"},"id":"last"} ', "last"),
        # An id cut short by the head's end is not guessed at.
        (b'{"jsonrpc":"2.0","id":12', b'xx"}}}', None),
        (b'{"params":{"id":1,"t":"', b'xx"}}', None),
        (b"", b"", None),
    ],
)
def test_the_request_id_of_a_message_too_long(head: bytes, tail: bytes, expected: Any) -> None:
    from wrapper.mcp.server import request_id_of

    assert request_id_of(head, tail) == expected


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_the_request_id_of_any_bytes_raises_nothing(head: bytes, tail: bytes) -> None:
    from wrapper.mcp.server import request_id_of

    found = request_id_of(head, tail)
    assert found is None or isinstance(found, int | str)


def test_without_the_sdk_the_command_says_how_to_install_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['mcp'] = None; "
        "from wrapper.cli import main; sys.exit(main(['mcp']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=tmp_path,
        env=environment(tmp_path), stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "pip install 'agent-wrapper[mcp]'" in done.stderr


@pytest.mark.parametrize(
    ("option", "why"),
    [
        (["--output", "jsonl"], "stdout is the protocol"),
        (["--run-dir", "x"], "RUNS_DIR/RUN_ID"),
        (["--task", "x"], "each start gives its own task"),
        (["--label", "x"], "each start gives its own label"),
        (["--allow-settings", "no-such-dir"], "not a directory"),
    ],
)
def test_options_a_server_cannot_take_are_usage_errors(
    tmp_path: Path, option: list[str], why: str
) -> None:
    done = subprocess.run(
        [*WRAPPER, "mcp", *option], check=False, capture_output=True, text=True, cwd=tmp_path,
        env=environment(tmp_path), stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert why in done.stderr
