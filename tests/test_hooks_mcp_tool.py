"""mcp_tool hook handlers against a real MCP server written with the SDK
(``tests/mcp_hook_server.py``), on stdio and over HTTP on 127.0.0.1: the
hook input reaches the tool through the handler's ``input``, the tool's
text is the decision (a Stop blocked, a prompt given context, a PreToolUse
denied over ACP), and every way a server can go wrong (slow, crashing, a
tool error, a tool it does not have, no SDK) fails open with a warning
that says what happened; a server no settings file configures is refused."""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    agent_env,
    invoke,
    run_wrapper,
    wait_until,
    wrapper_argv,
    write_scenario,
)
from tests.test_acp_e2e import HANG, permission_answers, result_of, start, tool_ends
from tests.test_hooks import answer, records, run_cli, run_with, settings_file, stop_hooks
from tests.test_hooks_native import given_settings, run_claude

pytestmark = pytest.mark.usefixtures("no_leaks")

SERVER = Path(__file__).resolve().parent / "mcp_hook_server.py"


def gate_server(tmp_path: Path) -> dict[str, Any]:
    """The test server on stdio, as ``mcpServers`` names it; run from the
    test's directory, so a server left behind is a leak the fixture sees."""
    script = tmp_path / "gate_server.py"
    shutil.copy(SERVER, script)
    return {
        "command": sys.executable,
        "args": [str(script)],
        "env": {"MCP_HOOK_LOG": str(tmp_path / "calls.jsonl")},
    }


def mcp_tool(tool: str, server: str = "gate", **extra: Any) -> dict[str, Any]:
    return {"type": "mcp_tool", "server": server, "tool": tool, **extra}


def with_servers(settings: dict[str, Any], **servers: dict[str, Any]) -> dict[str, Any]:
    return {**settings, "mcpServers": servers}


def calls(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def failures(result: dict[str, Any]) -> list[str]:
    return [w["message"] for w in result["warnings"] if w["code"] == "hook_failed"]


BLOCK_STOP = mcp_tool(
    "block_stop", input={"active": "${stop_hook_active}", "last": "${last_assistant_message}"}
)


def test_a_stop_blocked_by_a_tool_on_stdio_steers_the_agent(tmp_path: Path) -> None:
    settings = with_servers(stop_hooks(BLOCK_STOP), gate=gate_server(tmp_path))
    run = run_with(tmp_path, settings, answer("Fixed."), resumes=[answer("Tested.")])
    assert run.returncode == 0, run.stderr
    assert run.result["finalText"] == "Tested."
    (steer,) = run.result["steers"]
    assert (steer["reason"], steer["handler"]) == (
        "Run the tests first.",
        "mcp_tool gate/block_stop",
    )
    # The hook input reached the tool: a whole placeholder keeps its type.
    assert calls(tmp_path) == [
        {"tool": "block_stop", "active": False, "last": "Fixed."},
        {"tool": "block_stop", "active": True, "last": "Tested."},
    ]
    decisions = [e for e in run.events if e["type"] == "hook_decision"]
    assert [d["decision"] for d in decisions] == ["block", "allow"]
    assert not failures(run.result)


def test_a_tool_adds_context_to_the_task(tmp_path: Path) -> None:
    handler = mcp_tool("add_context", input={"prompt": "${prompt}", "source": "${source}"})
    settings = with_servers(
        {"hooks": {"UserPromptSubmit": [{"hooks": [handler]}]}}, gate=gate_server(tmp_path)
    )
    run = run_with(tmp_path, settings, answer("Done."))
    assert run.returncode == 0, run.stderr
    assert records(tmp_path)[0]["prompt"] == "Fix the parser\n\nUse the staging database."
    assert calls(tmp_path) == [
        {"tool": "add_context", "prompt": "Fix the parser", "source": "task"}
    ]


RM_RUN: list[dict[str, Any]] = [
    {
        "assistant": {
            "text": "Cleaning up.",
            "stopReason": "toolUse",
            "toolCalls": [{"name": "bash", "arguments": {"command": "rm -rf build"}}],
        }
    },
    {"tool": {"name": "bash", "result": "ok", "duration": 0.1}},
    {"assistant": {"text": "Done.", "stopReason": "stop"}},
]


def test_a_tool_denies_a_command_over_acp(tmp_path: Path) -> None:
    handler = mcp_tool(
        "check_command", input={"name": "${tool_name}", "command": "${tool_input.command}"}
    )
    settings_path = tmp_path / "settings.json"
    settings = {"hooks": {"PreToolUse": [{"matcher": "@execute", "hooks": [handler]}]}}
    settings_path.write_text(json.dumps(with_servers(settings, gate=gate_server(tmp_path))))
    proc = start(tmp_path, RM_RUN, "--task", "Clean", "--settings", str(settings_path))
    _, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert permission_answers(tmp_path) == [{"outcome": "selected", "optionId": "cancel"}]
    (end,) = tool_ends(tmp_path)
    assert end["isError"] is True
    assert calls(tmp_path) == [
        {"tool": "check_command", "name": "execute", "command": "rm -rf build"}
    ]
    assert not failures(result_of(tmp_path))


@pytest.mark.parametrize(
    ("handler", "said"),
    [
        (
            mcp_tool("crash"),
            "MCPError: Connection closed; the server exited with status 3; "
            "its stderr: dying on purpose",
        ),
        (mcp_tool("fail"), "answered with a tool error: Error executing tool fail"),
        (
            mcp_tool("huge", input={"mib": 5}),
            "the server wrote a message longer than 4 MiB, more than any answer",
        ),
        (
            mcp_tool("nope"),
            "names a tool the server \"gate\" does not have: 'nope' (its tools: add_context, ",
        ),
    ],
)
def test_a_server_that_goes_wrong_fails_open_saying_how(
    tmp_path: Path, handler: dict[str, Any], said: str
) -> None:
    settings = with_servers(stop_hooks(handler), gate=gate_server(tmp_path))
    run = run_with(tmp_path, settings, answer("Done."))
    assert run.returncode == 0, run.stderr
    (message,) = failures(run.result)
    assert message.startswith(f"Stop handler mcp_tool gate/{handler['tool']} ")
    assert said in message


def test_a_server_that_does_not_answer_is_cut_at_the_handler_timeout(tmp_path: Path) -> None:
    handler = mcp_tool("slow", input={"seconds": 120}, timeout=2)
    settings = with_servers(stop_hooks(handler), gate=gate_server(tmp_path))
    run = run_with(tmp_path, settings, answer("Done."))
    assert run.returncode == 0, run.stderr
    (message,) = failures(run.result)
    assert 'did not answer within 2s (the MCP server "gate"' in message
    # generous: the point is that the run did not wait for the tool's 120 s
    assert run.elapsed < 60
    # and the server is gone with its call (no_leaks holds it)


def test_a_stdio_server_whose_program_is_missing_is_refused_before_the_run(
    tmp_path: Path,
) -> None:
    # As a command handler's program: at run time it would fail open at every call.
    server = {"command": str(tmp_path / "no-such-server")}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(with_servers(stop_hooks(BLOCK_STOP), gate=server)))
    scenario = write_scenario(tmp_path, answer("Done."))
    argv = wrapper_argv(tmp_path / "run", scenario, options=["--settings", str(path)])
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 2
    said = proc.stderr.decode()
    assert "mcpServers.gate: the MCP server of mcp_tool gate/block_stop: " in said
    assert "no-such-server does not exist" in said
    # A script the interpreter would not find, likewise.
    script = {"command": sys.executable, "args": ["missing_server.py"]}
    path.write_text(json.dumps(with_servers(stop_hooks(BLOCK_STOP), gate=script)))
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 2
    assert "its script missing_server.py does not exist" in proc.stderr.decode()


def test_a_failing_tool_fails_the_run_when_hooks_fail_closed(tmp_path: Path) -> None:
    settings = with_servers(stop_hooks(mcp_tool("fail")), gate=gate_server(tmp_path))
    run = run_with(tmp_path, settings, answer("Done."), options=("--hooks-fail-closed",))
    assert run.returncode == 1
    assert run.result["error"]["kind"] == "hook_failed"
    assert "answered with a tool error" in run.result["error"]["message"]


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        (
            with_servers(stop_hooks(mcp_tool("check", server="linter")), gate={"command": "x"}),
            'no MCP server "linter" in the settings\' "mcpServers" (known: gate)',
        ),
        (stop_hooks(mcp_tool("check")), '"mcpServers" (known: none is configured)'),
        (stop_hooks({"type": "mcp_tool", "server": "gate"}), 'needs a "tool" string'),
        (stop_hooks(mcp_tool("check", input=["x"])), ".input: expected an object"),
        (with_servers({}, gate={"args": ["x"]}), 'a stdio server needs a "command"'),
        (with_servers({}, gate={"type": "sse", "url": "http://h/"}), "'sse' is not a transport"),
        (with_servers({}, gate={"type": "http", "url": "ftp://h/"}), 'needs an http(s) "url"'),
    ],
)
def test_a_handler_or_server_that_cannot_be_used_is_a_settings_error(
    tmp_path: Path, settings: dict[str, Any], said: str
) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(settings))
    scenario = write_scenario(tmp_path, answer("Done."))
    proc = invoke(
        wrapper_argv(tmp_path / "run", scenario, options=["--settings", str(path)]), tmp_path
    )
    assert proc.returncode == 2
    assert said in proc.stderr.decode()


def test_a_later_file_replaces_a_server_of_the_same_name(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(with_servers(stop_hooks(BLOCK_STOP), gate={"command": "absent"})))
    second.write_text(json.dumps(with_servers({}, gate=gate_server(tmp_path))))
    options = ("--settings", str(first), "--settings", str(second))
    run = run_wrapper(
        tmp_path, answer("Fixed."), options=options, scenario_extra={"resumes": [answer("Tested.")]}
    )
    assert run.returncode == 0, run.stderr
    assert [s["reason"] for s in run.result["steers"]] == ["Run the tests first."]


NO_SDK = """
import sys
sys.modules["mcp"] = None  # as if the extra were not installed
"""


def test_without_the_sdk_the_run_says_so_once_and_goes_on(tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(NO_SDK)
    handlers = stop_hooks(BLOCK_STOP, mcp_tool("add_context"))
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps(with_servers(handlers, gate=gate_server(tmp_path))))
    env = {**agent_env(tmp_path), "PYTHONPATH": str(tmp_path / "site")}
    run = run_wrapper(tmp_path, answer("Done."), options=["--settings", str(settings)], env=env)
    assert run.returncode == 0, run.stderr
    (said,) = [w["message"] for w in run.result["warnings"] if w["code"] == "mcp_sdk_missing"]
    assert "pip install 'agent-wrapper[mcp]'" in said
    # Said once on stderr at the end, as a CI log shows it, whatever the output.
    assert run.stderr.count("mcp_tool hook handlers need the MCP SDK") == 1, run.stderr
    assert len(failures(run.result)) == 2
    assert all("needs the MCP SDK" in m for m in failures(run.result))
    assert calls(tmp_path) == []


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """The test server over streamable HTTP on 127.0.0.1; its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = tmp_path / "gate_server.py"
    shutil.copy(SERVER, script)
    env = {**agent_env(tmp_path), "MCP_HOOK_LOG": str(tmp_path / "calls.jsonl")}
    proc = subprocess.Popen(
        [sys.executable, str(script), "http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def test_a_stop_blocked_by_a_tool_over_http(tmp_path: Path, http_server: str) -> None:
    server = {"type": "http", "url": http_server, "headers": {"X-Token": "t-${GATE_TOKEN}"}}
    settings = settings_file(tmp_path, with_servers(stop_hooks(BLOCK_STOP), gate=server))
    env = {**agent_env(tmp_path), "GATE_TOKEN": "s3cret"}
    run = run_wrapper(
        tmp_path,
        answer("Fixed."),
        options=["--settings", str(settings)],
        env=env,
        scenario_extra={"resumes": [answer("Tested.")]},
    )
    assert run.returncode == 0, run.stderr
    assert [s["reason"] for s in run.result["steers"]] == ["Run the tests first."]
    # The headers went with the call, their variables expanded.
    assert [(c["active"], c.get("token")) for c in calls(tmp_path)] == [
        (False, "t-s3cret"),
        (True, "t-s3cret"),
    ]


def test_a_server_not_listening_fails_open(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://user:hunter2@127.0.0.1:{port}/mcp?key=qs3cr3t"
    server = {"type": "http", "url": url, "headers": {"Authorization": "Bearer tok3n"}}
    run = run_with(tmp_path, with_servers(stop_hooks(BLOCK_STOP), gate=server), answer("Done."))
    assert run.returncode == 0, run.stderr
    (message,) = failures(run.result)
    assert f'the MCP server "gate" at http://127.0.0.1:{port}/mcp' in message
    assert "connect" in message.lower()
    # Never a credential, the query or a header's value, anywhere it is said.
    for secret in ("hunter2", "qs3cr3t", "tok3n"):
        assert secret not in json.dumps(run.result), secret
        assert secret not in run.stderr, secret


def test_a_token_a_variable_puts_in_the_url_is_never_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("GATE_TOKEN", "pathS3cret")
    monkeypatch.setenv("GATE_KEY", "hdrS3cret")
    url = f"http://127.0.0.1:{port}/mcp/${{GATE_TOKEN}}"
    server = {"type": "http", "url": url, "headers": {"X-Api-Key": "${GATE_KEY}"}}
    run = run_with(tmp_path, with_servers(stop_hooks(BLOCK_STOP), gate=server), answer("Done."))
    assert run.returncode == 0, run.stderr
    (message,) = failures(run.result)
    # The server is named as configured: which variable, never its value.
    assert f'the MCP server "gate" at http://127.0.0.1:{port}/mcp/${{GATE_TOKEN}}' in message
    for secret in ("pathS3cret", "hdrS3cret"):
        assert secret not in (tmp_path / "run" / "events.jsonl").read_text(), secret
        assert secret not in json.dumps(run.result), secret
        assert secret not in run.stderr, secret


def test_hook_test_runs_an_mcp_tool_handler(tmp_path: Path) -> None:
    settings = tmp_path / "s.json"
    settings.write_text(
        json.dumps(with_servers(stop_hooks(BLOCK_STOP), gate=gate_server(tmp_path)))
    )
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"hook_event_name": "Stop", "stop_hook_active": False}))
    proc = run_cli(tmp_path, "hook-test", "--settings", str(settings), "--event", str(event))
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["decision"], report["reason"]) == ("block", "Run the tests first.")
    assert report["handler"] == "mcp_tool gate/block_stop"


def test_claude_code_relays_a_pre_tool_use_mcp_tool_handler(tmp_path: Path) -> None:
    handler = mcp_tool(
        "check_command", input={"name": "${tool_name}", "command": "${tool_input.command}"}
    )
    settings = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [handler]}]}}
    proc, _ = run_claude(tmp_path, with_servers(settings, gate=gate_server(tmp_path)))
    assert proc.returncode == 0, proc.stderr.decode()
    _, given = given_settings(tmp_path)
    assert given is not None
    (hook,) = given["hooks"]["PreToolUse"][0]["hooks"]
    event = {
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm -r x"},
    }
    env = {**agent_env(tmp_path), "AGENT_WRAPPER_RUN_DIR": str(tmp_path / "run")}
    relayed = subprocess.run(
        ["/bin/sh", "-c", hook["command"]],
        input=json.dumps(event).encode(),
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=HANG,
        check=False,
    )
    assert relayed.returncode == 0, relayed.stderr.decode()
    answer_given = json.loads(relayed.stdout)["hookSpecificOutput"]
    assert (answer_given["permissionDecision"], answer_given["permissionDecisionReason"]) == (
        "deny",
        "No deleting files.",
    )
    assert calls(tmp_path) == [{"tool": "check_command", "name": "Bash", "command": "rm -r x"}]


def test_a_run_stopped_during_a_call_ends_the_server_with_it(tmp_path: Path) -> None:
    # A server too busy to see its input end: only the kill of its group ends it.
    handler = mcp_tool("stuck", input={"seconds": 120})
    path = tmp_path / "s.json"
    path.write_text(json.dumps(with_servers(stop_hooks(handler), gate=gate_server(tmp_path))))
    scenario = write_scenario(tmp_path, answer("Done."))
    argv = wrapper_argv(tmp_path / "run", scenario, options=["--settings", str(path)])
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=agent_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_until(lambda: bool(calls(tmp_path)), HANG), "the tool was never called"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=HANG)
    finally:
        proc.kill()
    assert proc.returncode == 143, stderr.decode()
    assert json.loads((tmp_path / "run" / "result.json").read_text())["outcome"] == "aborted"
    # the server, mid-call, went with the run (no_leaks holds it)


def test_a_relay_the_agent_stops_during_a_call_ends_the_server_and_says_so(
    tmp_path: Path,
) -> None:
    # An agent gives up on its hook (its own time limit) with SIGTERM: the
    # relay's MCP server, too busy to see its input end and in a group of its
    # own, would run on after the relay.
    handler = mcp_tool("stuck", input={"seconds": 120})
    settings = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [handler]}]}}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(with_servers(settings, gate=gate_server(tmp_path))))
    argv = [sys.executable, "-m", "wrapper", "hook-relay", "--agent", "claude"]
    argv += ["--handler", "*", "*", "PreToolUse", "--settings", str(path)]
    event = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}
    run_dir = tmp_path / "run"
    env = {**agent_env(tmp_path), "AGENT_WRAPPER_RUN_DIR": str(run_dir)}
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(event).encode())
        proc.stdin.close()
        assert wait_until(lambda: bool(calls(tmp_path)), HANG), "the tool was never called"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=HANG)
    finally:
        proc.kill()
    assert proc.stdout is not None
    assert proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    assert (proc.returncode, out) == (0, b""), err.decode()
    (recorded,) = [
        json.loads(line)
        for line in (run_dir / "hooks" / "native-decisions.jsonl").read_text().splitlines()
    ]
    assert recorded["warning"] == "was stopped by a signal (the agent's) before it answered"
    # and the server is gone with the relay (no_leaks holds it)


class _EndlessAnswer(http.server.BaseHTTPRequestHandler):
    """Answers every request with a JSON body that never ends."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b'{"jsonrpc": "2.0", "x": "' + b"A" * 65536
        with contextlib.suppress(OSError):
            while True:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                chunk = b"A" * 65536

    def log_message(self, *_args: Any) -> None:
        return None


def test_an_http_answer_that_never_ends_is_cut_not_held_in_memory(tmp_path: Path) -> None:
    # Read whole, it grew the wrapper by more than 1 GB in 8 s on loopback.
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EndlessAnswer)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
        handler = mcp_tool("block_stop", timeout=5)
        settings = with_servers(stop_hooks(handler), gate={"type": "http", "url": url})
        run = run_with(tmp_path, settings, answer("Done."))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert run.returncode == 0, run.stderr
    (message,) = failures(run.result)
    assert "the server's answer was longer than 4 MiB" in message
    assert "did not answer" not in message, "cut as it passed the bound, not at the timeout"
