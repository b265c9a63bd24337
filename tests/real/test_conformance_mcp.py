"""A real agent CLI as the parent of agent-wrapper's MCP server (``agent-wrapper
mcp``): Claude Code 2.1.332 with ``--mcp-config``, offline against the mock
model, whose model (the mock, scenarios ``mcp_*``) calls the server's tools
on real pi subagents, offline too. Asserted as a user sees it: the parent's
answer is the subagent's final text, each subagent's result.json, what the
parent's model was given as each tool's result, a steer and an abort through
the parent, the parent killed mid-run (its subagents aborted, each with its
result.json, nothing left running). Runs only when ``AGENT_WRAPPER_CLIS``
names the install cache; see tests/real/README.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest

from tests.real import mock_server as m
from tests.real.clis import CLIS, MOCK_MODEL, base_env
from tests.real.harness import CAPTURE_ENV, ROOT, Mock, _processes_of, cache_dir
from tests.real.test_conformance_steer import SCHEMA, check_installed, mock, processes_in

__all__ = ["mock"]  # the module's fixture, shared

#: The Claude Code release whose MCP client the parent cases were written on.
PARENT_VERSION = "2.1.332"
#: The server's name in each client's configuration. Claude Code shows its
#: tools to the model as ``mcp__agent-wrapper__<tool>``; Codex as the tools
#: of a Responses namespace ``mcp__agent_wrapper``.
SERVER = "agent-wrapper"
#: A parent case normally takes 5-20 s; this only catches a hang.
PARENT_LIMIT = 120.0
#: How long the test waits for the parent's model to reach a step.
STEP_WAIT = 60.0
#: How long the subagents may take to end once their parent is gone: the
#: server's own abort of each (its kill bounds) with room for a loaded machine.
ORPHAN_WAIT = 30.0
#: Where the captured tool results go (under AGENT_WRAPPER_TIER_CAPTURE).
CAPTURE_DIR = "mcp"

#: What Claude Code appends to each tool result (the context left).
REMINDER = re.compile(r"\n*<system-reminder>.*?</system-reminder>\s*$", re.DOTALL)
#: What Codex puts before each MCP tool's result.
WALL_TIME = re.compile(r"^Wall time: [0-9.]+ seconds\nOutput:\n?")


@dataclass(frozen=True, slots=True)
class Client:
    """A real MCP client CLI as the parent: how its model names our tools,
    and what it wraps around a tool's result before the model reads it."""

    cli: str
    version: str
    #: Our tool's name as the mock sees the model call it, less the tool.
    prefix: str
    #: The additions the client makes to a result's text.
    wrapping: re.Pattern[str]
    #: Claude Code only: the server added with ``claude mcp add`` (user
    #: scope) rather than given with ``--mcp-config``.
    mcp_add: bool = False

    def tool(self, name: str) -> str:
        return self.prefix + name


CLAUDE = Client("claude", PARENT_VERSION, f"mcp__{SERVER}__", REMINDER)
CLAUDE_ADDED = Client("claude", PARENT_VERSION, f"mcp__{SERVER}__", REMINDER, mcp_add=True)
CODEX = Client("codex", CLIS["codex"].version, f"mcp__{SERVER.replace('-', '_')}.", WALL_TIME)
#: What Gemini CLI puts around each MCP tool's result.
UNTRUSTED = re.compile(r"^<untrusted_context>\n|\n</untrusted_context>$")
GEMINI = Client("gemini", CLIS["gemini"].version, f"mcp_{SERVER}_", UNTRUSTED)
#: opencode gives the model a tool's text as it is.
NOTHING = re.compile(r"(?!)")
OPENCODE = Client("opencode", CLIS["opencode"].version, f"{SERVER}_", NOTHING)


@dataclass
class Parent:
    """One parent case: where it runs and what it left."""

    client: Client
    base: Path
    work: Path
    runs_dir: Path
    nonce: str
    argv: list[str]
    env: dict[str, str]
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    elapsed: float = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def answer(self) -> str | None:
        """The parent's final answer, as its JSON stream says it."""
        if self.client.cli == "claude":
            found = [e for e in self.events if e.get("type") == "result"]
            return str(found[-1].get("result")) if found else None
        if self.client.cli == "gemini":
            # The assistant's text after its last tool call.
            text = ""
            for e in self.events:
                if e.get("type") in ("tool_use", "tool_result"):
                    text = ""
                elif e.get("type") == "message" and e.get("role") == "assistant":
                    text += str(e.get("content") or "")
            return text or None
        if self.client.cli == "opencode":
            texts = [
                str(e["part"].get("text"))
                for e in self.events
                if e.get("type") == "text" and isinstance(e.get("part"), dict)
            ]
            return texts[-1] if texts else None
        said = [
            e["item"].get("text")
            for e in self.events
            if e.get("type") == "item.completed"
            and (e.get("item") or {}).get("type") == "agent_message"
        ]
        return said[-1] if said else None

    def runs(self) -> dict[str, dict[str, Any]]:
        """Each subagent's result.json by its label."""
        found = {}
        for result in sorted(self.runs_dir.glob("*/result.json")):
            data = json.loads(result.read_text())
            found[str(data.get("label"))] = data
        return found

    def where(self) -> str:
        return (
            f"{self.client.cli} parent exit {self.returncode}; stdout:\n{self.stdout[-1500:]}\n"
            f"stderr:\n{self.stderr[-1500:]}"
        )


def server_entry(
    home: Path, mock: Mock, runs_dir: Path, record_stdin: Path | None = None
) -> dict[str, Any]:
    """Our server as an MCP client starts it: its environment finds pi on
    PATH and points pi at the mock (its ``defaultProvider``), so ``start``
    with ``agent: pi`` runs offline. The whole environment is given, since
    Codex passes a server only a few variables of its own. ``record_stdin``:
    a file the client's messages to the server are copied to on the way."""
    pi = CLIS["pi"].configure(home, mock.url, "pi")
    pi_settings = Path(pi.env["PI_CODING_AGENT_DIR"]) / "settings.json"
    pi_settings.write_text(
        json.dumps(
            {"enableInstallTelemetry": False, "defaultProvider": "mock", "defaultModel": MOCK_MODEL}
        )
    )
    pi_bin = CLIS["pi"].executable(cache_dir()).parent
    env = pi.env | {
        "HOME": str(home),
        "PATH": f"{pi_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    }
    args = ["-m", "wrapper", "mcp", "--runs-dir", str(runs_dir)]
    if record_stdin is not None:
        server = shlex.join([sys.executable, *args])
        tee = f"tee {shlex.quote(str(record_stdin))} | exec {server}"
        return {"command": "/bin/sh", "args": ["-c", tee], "env": env}
    return {"command": sys.executable, "args": args, "env": env}


def parent_setup(
    scenario: str,
    base: Path,
    mock: Mock,
    client: Client = CLAUDE,
    *,
    tool_timeout: int | None = None,
    record_stdin: Path | None = None,
) -> Parent:
    """``client`` as the parent with our server in its configuration, its
    every tool allowed to run unasked; ``tool_timeout`` (seconds) is the
    client's own timeout of a tool call, set as each client sets it."""
    check_installed(client.cli, client.version)
    check_installed("pi", CLIS["pi"].version)
    home, work, runs_dir = base / "home", base / "work", base / "runs"
    for folder in (home, work):
        folder.mkdir(parents=True, exist_ok=True)
    cli = CLIS[client.cli]
    exe = cli.executable(cache_dir(), client.version)
    setup = cli.configure(home, mock.url, str(exe))
    entry = server_entry(home, mock, runs_dir, record_stdin)
    env = base_env(home) | setup.env
    nonce = secrets.token_hex(6)
    prompt = f"[scenario:{scenario}:{nonce}] Delegate the scripted task."
    if client.cli == "claude":
        if tool_timeout is not None:
            env["MCP_TOOL_TIMEOUT"] = str(tool_timeout * 1000)
        config_args = ["--mcp-config", str(base / "mcp.json")]
        if client.mcp_add:
            # What a user types once: the server in the user's configuration.
            env_args = [
                word for key, value in entry["env"].items() for word in ("-e", f"{key}={value}")
            ]
            added = subprocess.run(
                [
                    str(exe),
                    "mcp",
                    "add",
                    "--scope",
                    "user",
                    SERVER,
                    *env_args,
                    "--",
                    entry["command"],
                    *entry["args"],
                ],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=STEP_WAIT,
                check=False,
            )
            assert added.returncode == 0, f"claude mcp add: {added.stdout} {added.stderr}"
            config_args = []
        else:
            servers = {"mcpServers": {SERVER: entry}}
            (base / "mcp.json").write_text(json.dumps(servers, indent=2))
        # Else Claude Code 2.1.332 offers MCP tools through its ToolSearch
        # tool and the model would have to search for them first.
        env["ENABLE_TOOL_SEARCH"] = "false"
        argv = [
            str(exe),
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "claude-sonnet-4-5",
            *config_args,
            # The server's every tool runs unasked; nothing else is allowed.
            "--allowedTools",
            f"mcp__{SERVER}",
            "--",
            prompt,
        ]
    elif client.cli == "gemini":
        settings_path = home / ".gemini" / "settings.json"
        settings = json.loads(settings_path.read_text())
        # trust: its tools run unasked. Without it (and without --yolo)
        # Gemini CLI offers the model none of them in a non-interactive run.
        server = dict(entry, trust=True)
        if tool_timeout is not None:
            server["timeout"] = tool_timeout * 1000
        settings["mcpServers"] = {SERVER: server}
        settings_path.write_text(json.dumps(settings, indent=2))
        argv = [*(word for word in setup.argv if word != "--yolo"), "-p", prompt]
    elif client.cli == "opencode":
        config_path = Path(setup.env["OPENCODE_CONFIG"])
        config = json.loads(config_path.read_text())
        server = {
            "type": "local",
            "command": [entry["command"], *entry["args"]],
            "environment": entry["env"],
            "enabled": True,
        }
        if tool_timeout is not None:
            server["timeout"] = tool_timeout * 1000
        config["mcp"] = {SERVER: server}
        config_path.write_text(json.dumps(config, indent=2))
        argv = [*setup.argv, prompt]
    else:
        config = Path(setup.env["CODEX_HOME"]) / "config.toml"
        table = [
            "",
            f"[mcp_servers.{SERVER}]",
            f"command = {json.dumps(entry['command'])}",
            f"args = {json.dumps(entry['args'])}",
            # Else codex exec 0.169.0 sends its first model request without
            # waiting for the server to start, and the model has no such
            # tools (seen 2 times in 6 warm; every time with a 3 s start).
            "required = true",
            # exec's approval policy is never: a tool call that needs an
            # approval is refused ("MCP tool call requires approval, but
            # approval policy is never"); this server's tools need none.
            'default_tools_approval_mode = "approve"',
        ]
        if tool_timeout is not None:
            table.append(f"tool_timeout_sec = {tool_timeout}")
        table += ["", f"[mcp_servers.{SERVER}.env]"]
        table += [f"{key} = {json.dumps(value)}" for key, value in entry["env"].items()]
        config.write_text(config.read_text() + "\n".join(table) + "\n")
        bypass = "--dangerously-bypass-approvals-and-sandbox"
        argv = [*(word for word in setup.argv if word != bypass), prompt]
    return Parent(client, base, work, runs_dir, nonce, argv, env)


def run_parent(
    parent: Parent,
    during: Callable[[subprocess.Popen[bytes]], None] | None,
    limit: float = PARENT_LIMIT,
) -> None:
    """The parent to its end (killed past ``limit`` seconds); ``during``,
    when given, acts on it meanwhile."""
    out, err = parent.base / "parent.stdout", parent.base / "parent.stderr"
    started = time.monotonic()
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        child = subprocess.Popen(
            parent.argv,
            cwd=parent.work,
            env=parent.env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
        try:
            if during is not None:
                during(child)
            child.wait(limit)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    parent.elapsed = time.monotonic() - started
    parent.returncode = child.returncode
    parent.stdout = out.read_text(errors="replace")
    parent.stderr = err.read_text(errors="replace")
    for line in parent.stdout.splitlines():
        with contextlib.suppress(ValueError):
            parent.events.append(json.loads(line))


def parent_requests(mock: Mock, parent: Parent) -> list[dict[str, Any]]:
    return mock.requests(parent.nonce)


@dataclass(frozen=True, slots=True)
class Seen:
    """One call of our tools and what the parent's model was given for it."""

    tool: str
    args: dict[str, Any]
    #: The result as the client wrote it into the model request.
    raw: Any
    #: Its text, less the client's own additions, decoded when it is JSON.
    content: Any

    @property
    def is_error(self) -> bool:
        """Whether the client told its model the call failed, besides the text."""
        if not isinstance(self.raw, dict):
            return False
        response = self.raw.get("response")
        return self.raw.get("is_error") is True or (
            isinstance(response, dict) and "error" in response
        )


def tool_results_seen(mock: Mock, parent: Parent) -> list[Seen]:
    """What the parent's model was given for each call of our tools, from
    the last model request (it holds the whole conversation)."""
    last = parent_requests(mock, parent)[-1]
    req = m.read_request(last["wire"], last["body"], "", stream=True)
    found = []
    for call in req.calls:
        if not call.name.startswith(parent.client.prefix):
            continue
        text = parent.client.wrapping.sub("", call.result or "")
        content: Any = text
        # The structured content alone, or the server's text content: a
        # summary line, then the same JSON.
        for candidate in (text, text.partition("\n")[2]):
            with contextlib.suppress(ValueError):
                content = json.loads(candidate)
                break
        tool = call.name.removeprefix(parent.client.prefix)
        found.append(Seen(tool, call.args, call.raw, content))
    return found


def save_capture(name: str, parent: Parent, seen: list[Seen]) -> None:
    """The tool results the model got, with this run's ids, paths and
    timings made stable, for tests/data/real/mcp/ (AGENT_WRAPPER_TIER_CAPTURE)."""
    capture = os.environ.get(CAPTURE_ENV)
    if not capture:
        return
    entries = [{"tool": s.tool, "args": s.args, "result": s.raw} for s in seen]
    text = json.dumps(entries, indent=2)
    text = text.replace(str(parent.runs_dir), "RUNS_DIR")
    text = re.sub(r"\d{8}T\d{6}Z-[0-9a-f]{6}", "RUN_ID", text)
    text = re.sub(r"\d+ tokens left", "N tokens left", text)
    text = re.sub(r"Wall time: [0-9.]+ seconds", "Wall time: T seconds", text)
    text = re.sub(r"(toolu|call|fco)_[0-9a-f-]+", r"\1_ID", text)
    text = re.sub(r"(\[scenario:[a-z_]+:)[0-9a-f]+", r"\1NONCE", text)
    text = re.sub(r"_\d{13}_(\d+)(?=\")", r"_TIME_\1", text)
    client = parent.client
    target = Path(capture) / CAPTURE_DIR / f"{client.cli}-{client.version}-{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + "\n")


def servers_of(parent: Parent) -> list[psutil.Process]:
    """Our MCP server processes of this case (their command line names its runs dir)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            cmdline = proc.info["cmdline"] or []
            if "mcp" in cmdline and str(parent.runs_dir) in cmdline:
                found.append(proc)
    return found


def wait_until(predicate: Callable[[], bool], limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def replied_with(mock: Mock, parent: Parent, tool: str) -> bool:
    """Whether the parent's model has called ``tool`` (the mock answered so)."""
    full = parent.client.tool(tool)
    return any(
        ((r.get("reply") or {}).get("tool") or [None])[0] == full
        for r in parent_requests(mock, parent)
    )


def report(parent: Parent, what: str) -> None:
    """A measured fact, printed for tests/real/README.md (pytest -s)."""
    sys.stdout.write(f"\n[{parent.client.cli}-{parent.client.version} parent] {what}\n")


#: The parents of the delegation case: Claude Code, and one more real MCP client.
DELEGATING = [CLAUDE, CLAUDE_ADDED, CODEX, GEMINI, OPENCODE]
DELEGATING_IDS = [f"{c.cli}-{c.version}" + ("-mcp-add" if c.mcp_add else "") for c in DELEGATING]


@pytest.mark.parametrize("client", DELEGATING, ids=DELEGATING_IDS)
def test_the_parent_delegates_and_answers_with_the_subagents_final_text(
    client: Client, mock: Mock, tmp_path: Path
) -> None:
    parent = parent_setup("mcp_delegate", tmp_path, mock, client)
    run_parent(parent, None)
    where = parent.where()
    assert parent.returncode == 0, where
    runs = parent.runs()
    assert list(runs) == ["d"], where
    sub = runs["d"]
    jsonschema.validate(sub, SCHEMA)
    assert (sub["outcome"], sub["finalText"]) == ("ok", m.PLAIN_ANSWER), where
    # The parent's answer is the subagent's final text, read with result.
    assert parent.answer == sub["finalText"], where

    seen = tool_results_seen(mock, parent)
    assert [s.tool for s in seen] == ["status", "start", "wait", "result"], seen
    # A refused call: the model gets the server's sentence (Claude Code and
    # Gemini CLI mark it an error; Codex and opencode give the text alone).
    refused = seen[0]
    said = refused.content if isinstance(refused.content, str) else json.dumps(refused.content)
    assert f"no run '{m.UNKNOWN_RUN}'" in said, refused
    assert refused.is_error is (client.cli in ("claude", "gemini")), refused
    # What the model reads of each answer: Claude Code and Codex give it
    # the structured content as compact JSON, Gemini CLI and opencode the
    # server's text content (a summary line, then the same JSON); inside
    # what the client adds (Claude Code a reminder after it, Codex the
    # call's wall time before it, Gemini CLI an <untrusted_context> tag).
    start, wait, result = (s.content for s in seen[1:])
    assert start == {
        "run_id": sub["runId"],
        "run_dir": str(parent.runs_dir / sub["runId"]),
        "state": start["state"],
    }, start
    assert start["state"] in ("starting", "running"), start
    assert [r["run_id"] for r in wait["ended"]] == [sub["runId"]], wait
    assert wait["ended"][0]["outcome"] == "ok", wait
    assert result["final_text"] == m.PLAIN_ANSWER, result
    assert (result["outcome"], result["final_text_truncated"]) == ("ok", False), result
    summary = f"run {sub['runId']} ended ok"
    assert (summary in str(seen[3].raw)) is (client.cli in ("gemini", "opencode")), seen[3].raw
    if not client.mcp_add:
        save_capture("delegate", parent, seen)

    assert _processes_of(sub["runId"]) == [], where
    # The client ends its server as it exits; nothing of it is left.
    assert wait_until(lambda: servers_of(parent) == [], 10), where
    report(parent, f"delegate: parent took {parent.elapsed:.1f} s, {len(seen)} tool calls")


def test_the_parent_steers_one_subagent_and_aborts_another(mock: Mock, tmp_path: Path) -> None:
    parent = parent_setup("mcp_steer", tmp_path, mock)
    run_parent(parent, None)
    where = parent.where()
    assert parent.returncode == 0, where
    runs = parent.runs()
    assert sorted(runs) == ["a", "s"], where
    steered, aborted = runs["s"], runs["a"]
    for sub in (steered, aborted):
        jsonschema.validate(sub, SCHEMA)
    # The steer reached the subagent's model (its answer ends SAW:PARENT),
    # and the parent answered with that final text.
    assert steered["outcome"] == "ok", where
    assert steered["finalText"].endswith("SAW:PARENT"), steered["finalText"]
    assert steered["externalSteerCount"] == 1, steered
    assert parent.answer == steered["finalText"], where
    # The other was aborted mid-tool, with the parent's reason.
    assert aborted["outcome"] == "aborted", aborted
    assert (aborted["error"] or {}).get("kind") == "abort_requested", aborted
    assert m.ABORT_REASON in aborted["error"]["message"], aborted
    assert not (parent.work / m.LONG_FILE).exists(), where

    seen = tool_results_seen(mock, parent)
    by_tool = {s.tool: s.content for s in seen}
    assert by_tool["steer"]["state"] == "delivered", by_tool["steer"]
    assert (by_tool["abort"]["state"], by_tool["abort"]["outcome"]) == ("ended", "aborted"), (
        by_tool["abort"]
    )
    # The status polls showed the subagent in its shell tool.
    polls = [s.content for s in seen if s.tool == "status"]
    assert any(p.get("current_tool") for p in polls), polls
    save_capture("steer-abort", parent, seen)

    for sub in (steered, aborted):
        assert _processes_of(sub["runId"]) == [], where
    assert processes_in(parent.work) == [], where
    assert wait_until(lambda: servers_of(parent) == [], 10), where
    report(
        parent,
        f"steer and abort: parent took {parent.elapsed:.1f} s; steer receipt "
        f"{by_tool['steer']}; abort receipt {by_tool['abort']}",
    )


#: How the server hears of its parent's end, by the signal the parent got:
#: killed, its stdin closes (the server aborts every run, "the server that
#: started it is closing"); terminated, Claude Code sends its server SIGINT
#: (every run then ends as a run interrupted by SIGINT does).
KILLED = {"SIGKILL": "abort_requested", "SIGTERM": "interrupted"}


@pytest.mark.parametrize("signame", list(KILLED))
def test_the_parent_killed_mid_run_leaves_its_subagents_aborted_with_results(
    signame: str, mock: Mock, tmp_path: Path
) -> None:
    parent = parent_setup("mcp_kill", tmp_path, mock)
    seen: dict[str, Any] = {}

    def kill_during_the_wait(child: subprocess.Popen[bytes]) -> None:
        assert wait_until(lambda: replied_with(mock, parent, "wait"), STEP_WAIT), (
            "the parent never called wait"
        )
        time.sleep(0.5)  # the wait is open in the server
        seen["servers"] = [p.pid for p in servers_of(parent)]
        seen["tool"] = [p for p in processes_in(parent.work) if "sleep" in p]
        seen["at"] = time.monotonic()
        child.send_signal(getattr(signal, signame))
        child.wait(PARENT_LIMIT)

    run_parent(parent, kill_during_the_wait)
    # The server, and the guardian it forked (the same command line).
    assert seen["servers"], seen
    assert seen["tool"], "the subagent's tool was not running when the parent was killed"
    # The server aborts the run: its result.json is written.
    assert wait_until(lambda: "k" in parent.runs(), ORPHAN_WAIT), "no result.json"
    ended = time.monotonic() - seen["at"]
    sub = parent.runs()["k"]
    jsonschema.validate(sub, SCHEMA)
    assert sub["outcome"] == "aborted", sub
    assert (sub["error"] or {}).get("kind") == KILLED[signame], sub
    assert wait_until(lambda: servers_of(parent) == [], ORPHAN_WAIT), "the server outlived it"
    gone = time.monotonic() - seen["at"]
    assert _processes_of(sub["runId"]) == [], sub
    assert processes_in(parent.work) == [], "the subagent's tool outlived it"
    assert not (parent.work / m.LONG_FILE).exists()
    report(
        parent,
        f"parent {signame}: exit {parent.returncode}; the subagent's result.json "
        f"{ended:.1f} s after (outcome {sub['outcome']}, error {sub['error']}); "
        f"server gone {gone:.1f} s after",
    )
