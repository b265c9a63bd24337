"""http hook handlers against a real HTTP server on 127.0.0.1: the hook input
POSTed with its headers, the answer read as a command handler's stdout, and
every way a server can go wrong (slow, failing, redirecting, huge, not JSON,
not there) reported without changing the run, or failing it when hooks fail
closed."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import agent_env, invoke, run_wrapper, wrapper_argv, write_scenario
from tests.test_hooks import answer, records, run_cli, run_with, stop_hooks

pytestmark = pytest.mark.usefixtures("no_leaks")


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    #: Wait for the test to end before answering (a server that hangs).
    hang: bool = False


@dataclass
class Server:
    url: str
    #: What each request was: its path, headers and decoded JSON body.
    requests: list[dict[str, Any]]
    answers: dict[str, Callable[[int], Answer]]

    def answer(self, path: str, make: Answer | Callable[[int], Answer]) -> str:
        """Serve ``make`` at ``path`` (a callable gets the request's number); its URL."""
        if isinstance(make, Answer):
            fixed = make

            def always(_n: int) -> Answer:
                return fixed

            make = always
        self.answers[path] = make
        return self.url + path

    def seen(self, path: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].split("?")[0] == path]


@pytest.fixture
def server() -> Iterator[Server]:
    requests: list[dict[str, Any]] = []
    answers: dict[str, Callable[[int], Answer]] = {}
    released = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            path = self.path.split("?")[0]
            requests.append(
                {"path": self.path, "headers": dict(self.headers), "body": json.loads(raw)}
            )
            number = len([r for r in requests if r["path"].split("?")[0] == path])
            make = answers.get(path)
            reply = make(number) if make is not None else Answer(404, b"no such hook")
            if reply.hang:
                released.wait(120)
                return
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield Server(f"http://127.0.0.1:{httpd.server_address[1]}", requests, answers)
    finally:
        released.set()
        httpd.shutdown()
        httpd.server_close()


def http(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "http", "url": url, **extra}


def block_first(n: int) -> Answer:
    if n == 1:
        return Answer(body=json.dumps({"decision": "block", "reason": "Run the tests."}).encode())
    return Answer()


def failures(result: dict[str, Any]) -> list[str]:
    return [w["message"] for w in result["warnings"] if w["code"] == "hook_failed"]


def test_an_http_stop_handler_gets_the_hook_input_and_its_block_steers(
    tmp_path: Path, server: Server
) -> None:
    url = server.answer("/gate", block_first)
    run = run_with(tmp_path, stop_hooks(http(url)), answer("Fixed."), resumes=[answer("Tested.")])
    assert run.result["success"] is True
    assert run.result["finalText"] == "Tested."
    (steer,) = run.result["steers"]
    assert steer["reason"] == "Run the tests."
    assert steer["handler"] == f"http {url}"
    first, second = server.seen("/gate")
    assert first["headers"]["Content-Type"] == "application/json"
    assert first["body"]["hook_event_name"] == "Stop"
    assert first["body"]["last_assistant_message"] == "Fixed."
    assert (first["body"]["stop_hook_active"], second["body"]["stop_hook_active"]) == (False, True)
    decisions = [e for e in run.events if e["type"] == "hook_decision"]
    assert [d["decision"] for d in decisions] == ["block", "allow"]


def test_headers_interpolate_only_the_variables_allowed(tmp_path: Path, server: Server) -> None:
    url = server.answer("/gate", Answer())
    handler = http(
        url,
        headers={"Authorization": "Bearer $HOOK_TOKEN", "X-Other": "[${SECRET_TOKEN}]"},
        allowedEnvVars=["HOOK_TOKEN"],
    )
    env = {**agent_env(tmp_path), "HOOK_TOKEN": "t0ken", "SECRET_TOKEN": "do-not-send"}
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps(stop_hooks(handler)))
    run = run_wrapper(tmp_path, answer("Done."), options=["--settings", str(settings)], env=env)
    assert run.result["success"] is True
    (request,) = server.seen("/gate")
    assert request["headers"]["Authorization"] == "Bearer t0ken"
    assert request["headers"]["X-Other"] == "[]"


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (Answer(500, b"database down"), "answered HTTP 500: database down"),
        (Answer(403), "answered HTTP 403"),
        (
            Answer(302, headers={"Location": "http://127.0.0.1:9/elsewhere"}),
            "answered with a redirect (HTTP 302) to http://127.0.0.1:9/elsewhere; "
            "redirects are not followed",
        ),
        (Answer(body=b"x" * (1024 * 1024 + 1)), "answered with more than 1 MiB"),
        (Answer(body=b'{"decision": "block", '), "answered malformed JSON"),
        (Answer(body=b"[1, 2]"), ""),
    ],
    ids=["500", "403", "redirect", "huge", "malformed", "not-an-object"],
)
def test_a_failing_server_fails_open_with_a_warning_that_says_what_happened(
    tmp_path: Path, server: Server, reply: Answer, said: str
) -> None:
    url = server.answer("/gate", reply)
    run = run_with(tmp_path, stop_hooks(http(url)), answer("Done."), options=("--output", "quiet"))
    assert run.returncode == 0
    assert run.result["success"] is True
    assert run.result["steers"] == []
    if not said:  # a body that is not an object is plain text: no answer, no failure
        assert failures(run.result) == []
        return
    (message,) = failures(run.result)
    assert message.startswith(f"Stop handler http {url} ")
    assert said in message
    assert message.endswith("the stop was allowed")
    assert f"agent-wrapper: warning: {message}" in run.stderr.splitlines()


def test_a_redirect_is_not_followed(tmp_path: Path, server: Server) -> None:
    target = server.answer("/target", Answer(body=b'{"decision": "block", "reason": "x"}'))
    url = server.answer("/gate", Answer(307, headers={"Location": target}))
    run = run_with(tmp_path, stop_hooks(http(url)), answer("Done."))
    assert run.result["success"] is True
    assert server.seen("/target") == []
    assert any("redirects are not followed" in m for m in failures(run.result))


def test_a_server_that_does_not_answer_is_cut_at_the_handler_timeout(
    tmp_path: Path, server: Server
) -> None:
    url = server.answer("/gate", Answer(hang=True))
    run = run_with(tmp_path, stop_hooks(http(url, timeout=1)), answer("Done."))
    assert run.result["success"] is True
    (message,) = failures(run.result)
    assert "did not answer within 1s" in message
    # generous: the point is that the run did not wait for the server's 120 s
    assert run.elapsed < 60


def test_a_server_that_is_not_there_fails_open(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/gate"
    run = run_with(tmp_path, stop_hooks(http(url)), answer("Done."))
    assert run.result["success"] is True
    (message,) = failures(run.result)
    assert f"could not be reached at {url}: " in message
    assert "refused" in message.lower()


def test_a_failing_server_fails_the_run_when_hooks_fail_closed(
    tmp_path: Path, server: Server
) -> None:
    url = server.answer("/gate", Answer(502, b"bad gateway"))
    run = run_with(
        tmp_path, stop_hooks(http(url)), answer("Done."), options=("--hooks-fail-closed",)
    )
    assert run.returncode == 1
    assert run.result["error"]["kind"] == "hook_failed"
    assert "answered HTTP 502: bad gateway" in run.result["error"]["message"]


def test_context_from_a_prompt_handler_is_added_to_the_task(tmp_path: Path, server: Server) -> None:
    context = {"hookSpecificOutput": {"additionalContext": "Use the staging database."}}
    url = server.answer("/context", Answer(body=json.dumps(context).encode()))
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [http(url)]}]}}
    run = run_with(tmp_path, settings, answer("Done."))
    assert run.result["success"] is True
    (request,) = server.seen("/context")
    assert request["body"]["prompt"] == "Fix the parser"
    assert records(tmp_path)[0]["prompt"] == "Fix the parser\n\nUse the staging database."


def test_the_handler_name_hides_the_query_and_credentials(tmp_path: Path, server: Server) -> None:
    url = server.answer("/gate", Answer())
    secret = url.replace("http://", "http://user:pw@") + "?token=abc"
    run = run_with(tmp_path, stop_hooks(http(secret)), answer("Done."))
    (decision,) = [e for e in run.events if e["type"] == "hook_decision"]
    assert decision["handler"] == f"http {url}"
    assert "abc" not in json.dumps(run.result)
    assert "pw" not in decision["handler"]
    (request,) = server.seen("/gate")
    assert request["path"] == "/gate?token=abc"


def everything_written(run: Any) -> str:
    """What a failure warning reaches: result.json, events.jsonl and stderr."""
    return "\n".join(
        [
            (run.run_dir / "result.json").read_text(),
            (run.run_dir / "events.jsonl").read_text(),
            run.stderr,
        ]
    )


def test_a_failure_never_shows_the_urls_credentials_or_query(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://hookuser:pa55word@127.0.0.1:{port}/gate?key=k3y-value#frag"
    run = run_with(tmp_path, stop_hooks(http(url)), answer("Done."))
    (message,) = failures(run.result)
    assert f"could not be reached at http://127.0.0.1:{port}/gate: " in message
    written = everything_written(run)
    assert message in written
    for secret in ("hookuser", "pa55word", "k3y-value", "frag"):
        assert secret not in written


def test_a_header_value_that_cannot_be_sent_is_never_quoted(tmp_path: Path, server: Server) -> None:
    url = server.answer("/gate", Answer(body=b'{"decision": "block", "reason": "x"}'))
    handler = http(
        url + "?sig=qu3ry-secret",
        headers={"Authorization": "Bearer $HOOK_TOKEN"},
        allowedEnvVars=["HOOK_TOKEN"],
    )
    # A token read from a file with its trailing newline.
    env = {**agent_env(tmp_path), "HOOK_TOKEN": "t0ken-s3cret\n"}
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps(stop_hooks(handler)))
    run = run_wrapper(tmp_path, answer("Done."), options=["--settings", str(settings)], env=env)
    assert run.result["success"] is True
    assert server.seen("/gate") == []
    (message,) = failures(run.result)
    assert f"could not send header Authorization to {url}: " in message
    assert "line break" in message
    written = everything_written(run)
    assert f"agent-wrapper: warning: {message}" in run.stderr.splitlines()
    assert "t0ken-s3cret" not in written
    assert "qu3ry-secret" not in written


def test_a_redirect_is_told_without_the_targets_credentials_or_query(
    tmp_path: Path, server: Server
) -> None:
    target = "http://someone:s3cret@127.0.0.1:9/elsewhere?token=qu3ry"
    url = server.answer("/gate", Answer(302, headers={"Location": target}))
    run = run_with(tmp_path, stop_hooks(http(url)), answer("Done."))
    (message,) = failures(run.result)
    assert "redirect (HTTP 302) to http://127.0.0.1:9/elsewhere;" in message
    written = everything_written(run)
    assert "s3cret" not in written
    assert "qu3ry" not in written


@pytest.mark.parametrize(
    ("handler", "said"),
    [
        ({"type": "http"}, 'needs a "url" string'),
        ({"type": "http", "url": "ftp://x/y"}, "expected an http:// or https:// URL"),
        ({"type": "http", "url": "http://h/", "headers": {"A": 1}}, "headers: expected"),
        ({"type": "http", "url": "http://h/", "headers": {"A": "x\ny"}}, "on one line"),
        ({"type": "http", "url": "http://h/", "allowedEnvVars": "X"}, "allowedEnvVars"),
        ({"type": "websocket", "url": "ws://h/"}, "(command, http, prompt, agent"),
    ],
)
def test_a_malformed_http_handler_is_a_settings_error(
    tmp_path: Path, handler: dict[str, Any], said: str
) -> None:
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps(stop_hooks(handler)))
    scenario = write_scenario(tmp_path, answer("Done."))
    argv = wrapper_argv(tmp_path / "run", scenario, options=["--settings", str(settings)])
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 2
    assert said in proc.stderr.decode()


def test_hook_test_runs_an_http_handler(tmp_path: Path, server: Server) -> None:
    url = server.answer("/gate", block_first)
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps(stop_hooks(http(url))))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"hook_event_name": "Stop", "stop_hook_active": False}))
    argv = ["hook-test", "--settings", str(settings), "--event", str(event)]
    proc = run_cli(tmp_path, *argv)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["decision"], report["reason"]) == ("block", "Run the tests.")
    assert report["handler"] == f"http {url}"
    (request,) = server.seen("/gate")
    assert request["body"]["stop_hook_active"] is False

    server.answer("/gate", Answer(500, b"down"))
    proc = run_cli(tmp_path, *argv)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["decision"] == "allow"
    assert "answered HTTP 500: down; taken as allow" in proc.stderr
