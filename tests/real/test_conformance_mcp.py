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

#: The parent: the Claude Code release whose MCP client this was written on.
PARENT_VERSION = "2.1.332"
#: The server's name in the client's configuration; Claude Code shows its
#: tools to the model as ``mcp__agent-wrapper__<tool>``.
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


@dataclass
class Parent:
    """One parent case: where it runs and what it left."""

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
    def final(self) -> dict[str, Any]:
        """Claude Code's closing ``result`` line."""
        found = [e for e in self.events if e.get("type") == "result"]
        assert found, f"no result line from the parent:\n{self.stdout[-2000:]}\n{self.stderr}"
        return found[-1]

    def runs(self) -> dict[str, dict[str, Any]]:
        """Each subagent's result.json by its label."""
        found = {}
        for result in sorted(self.runs_dir.glob("*/result.json")):
            data = json.loads(result.read_text())
            found[str(data.get("label"))] = data
        return found

    def where(self) -> str:
        return f"parent exit {self.returncode}; stderr:\n{self.stderr[-2000:]}"


def parent_setup(scenario: str, base: Path, mock: Mock) -> Parent:
    """Claude Code as the parent with our server in its ``--mcp-config``:
    the server's environment finds pi on PATH and points pi at the mock (its
    ``defaultProvider``), so ``start`` with ``agent: pi`` runs offline."""
    check_installed("claude", PARENT_VERSION)
    check_installed("pi", CLIS["pi"].version)
    home, work, runs_dir = base / "home", base / "work", base / "runs"
    for folder in (home, work):
        folder.mkdir(parents=True, exist_ok=True)
    claude = CLIS["claude"]
    exe = claude.executable(cache_dir(), PARENT_VERSION)
    setup = claude.configure(home, mock.url, str(exe))
    pi = CLIS["pi"].configure(home, mock.url, "pi")
    pi_settings = Path(pi.env["PI_CODING_AGENT_DIR"]) / "settings.json"
    pi_settings.write_text(
        json.dumps(
            {"enableInstallTelemetry": False, "defaultProvider": "mock", "defaultModel": MOCK_MODEL}
        )
    )
    pi_bin = CLIS["pi"].executable(cache_dir()).parent
    server_env = pi.env | {
        "PATH": f"{pi_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    }
    config = {
        "mcpServers": {
            SERVER: {
                "command": sys.executable,
                "args": ["-m", "wrapper", "mcp", "--runs-dir", str(runs_dir)],
                "env": server_env,
            }
        }
    }
    (base / "mcp.json").write_text(json.dumps(config, indent=2))
    env = base_env(home) | setup.env
    # Else Claude Code 2.1.332 offers MCP tools through its ToolSearch tool
    # and the model would have to search for them first.
    env["ENABLE_TOOL_SEARCH"] = "false"
    nonce = secrets.token_hex(6)
    argv = [
        str(exe),
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        "claude-sonnet-4-5",
        "--mcp-config",
        str(base / "mcp.json"),
        # The server's every tool runs unasked; nothing else is allowed.
        "--allowedTools",
        f"mcp__{SERVER}",
        "--",
        f"[scenario:{scenario}:{nonce}] Delegate the scripted task.",
    ]
    return Parent(base, work, runs_dir, nonce, argv, env)


def run_parent(parent: Parent, during: Callable[[subprocess.Popen[bytes]], None] | None) -> None:
    """The parent to its end; ``during``, when given, acts on it meanwhile."""
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
            child.wait(PARENT_LIMIT)
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


def tool_results_seen(mock: Mock, parent: Parent) -> list[dict[str, Any]]:
    """What the parent's model was given for each of our tools, from the
    last model request (it holds the whole conversation): the tool, its
    arguments and the result block as Claude Code wrote it."""
    last = parent_requests(mock, parent)[-1]["body"]
    req = m.read_request("anthropic", last, "", stream=True)
    ours = [c for c in req.calls if c.name.startswith(f"mcp__{SERVER}__")]
    return [
        {"tool": c.name.removeprefix(f"mcp__{SERVER}__"), "args": c.args, "result": c.raw}
        for c in ours
    ]


#: What Claude Code appends to each tool result (the context left).
REMINDER = re.compile(r"\n*<system-reminder>.*?</system-reminder>\s*$", re.DOTALL)


def model_saw(block: dict[str, Any]) -> Any:
    """A tool result's content as the model read it, less the reminder
    Claude Code appends, decoded when it is JSON."""
    content = block["content"]
    assert isinstance(content, str), f"a tool result that is not one text: {block}"
    text = REMINDER.sub("", content)
    try:
        return json.loads(text)
    except ValueError:
        return text


def save_capture(name: str, parent: Parent, seen: list[dict[str, Any]]) -> None:
    """The tool results the model got, with this run's ids and paths made
    stable, for tests/data/real/mcp/ (AGENT_WRAPPER_TIER_CAPTURE)."""
    capture = os.environ.get(CAPTURE_ENV)
    if not capture:
        return
    text = json.dumps(seen, indent=2)
    text = text.replace(str(parent.runs_dir), "RUNS_DIR")
    text = re.sub(r"\d{8}T\d{6}Z-[0-9a-f]{6}", "RUN_ID", text)
    text = re.sub(r"\d+ tokens left", "N tokens left", text)
    text = re.sub(r"toolu_[0-9a-f]+", "toolu_ID", text)
    text = re.sub(r"(\[scenario:[a-z_]+:)[0-9a-f]+", r"\1NONCE", text)
    target = Path(capture) / CAPTURE_DIR / f"claude-{PARENT_VERSION}-{name}.json"
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
    full = f"mcp__{SERVER}__{tool}"
    return any(
        ((r.get("reply") or {}).get("tool") or [None])[0] == full
        for r in parent_requests(mock, parent)
    )


def report(what: str) -> None:
    """A measured fact, printed for tests/real/README.md (pytest -s)."""
    sys.stdout.write(f"\n[claude-{PARENT_VERSION} parent] {what}\n")


def test_the_parent_delegates_and_answers_with_the_subagents_final_text(
    mock: Mock, tmp_path: Path
) -> None:
    parent = parent_setup("mcp_delegate", tmp_path, mock)
    run_parent(parent, None)
    where = parent.where()
    assert parent.returncode == 0, where
    runs = parent.runs()
    assert list(runs) == ["d"], where
    sub = runs["d"]
    jsonschema.validate(sub, SCHEMA)
    assert (sub["outcome"], sub["finalText"]) == ("ok", m.PLAIN_ANSWER), where
    # The parent's answer is the subagent's final text, read with result.
    assert parent.final["result"] == sub["finalText"], where
    assert parent.final["is_error"] is False, where

    seen = tool_results_seen(mock, parent)
    assert [s["tool"] for s in seen] == ["status", "start", "wait", "result"], seen
    # A refused call: the model gets the server's sentence as an error.
    refused = seen[0]["result"]
    assert refused.get("is_error") is True, refused
    assert f"no run '{m.UNKNOWN_RUN}'" in model_saw(refused), refused
    # What the model reads of each answer: the structured content as compact
    # JSON, not the server's text content (whose first line is a summary),
    # followed by Claude Code's own reminder.
    start, wait, result = (model_saw(s["result"]) for s in seen[1:])
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
    raw = seen[3]["result"]["content"]
    assert raw.startswith('{"run_id":'), raw
    assert "ended ok" not in raw, "the model got the text content's summary line"
    save_capture("delegate", parent, seen)

    assert _processes_of(sub["runId"]) == [], where
    # Claude Code ends its server as it exits; nothing of it is left.
    assert wait_until(lambda: servers_of(parent) == [], 10), where
    report(f"delegate: parent took {parent.elapsed:.1f} s, {len(seen)} tool calls")


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
    assert parent.final["result"] == steered["finalText"], where
    # The other was aborted mid-tool, with the parent's reason.
    assert aborted["outcome"] == "aborted", aborted
    assert (aborted["error"] or {}).get("kind") == "abort_requested", aborted
    assert m.ABORT_REASON in aborted["error"]["message"], aborted
    assert not (parent.work / m.LONG_FILE).exists(), where

    seen = tool_results_seen(mock, parent)
    by_tool = {s["tool"]: model_saw(s["result"]) for s in seen}
    assert by_tool["steer"]["state"] == "delivered", by_tool["steer"]
    assert (by_tool["abort"]["state"], by_tool["abort"]["outcome"]) == ("ended", "aborted"), (
        by_tool["abort"]
    )
    # The status polls showed the subagent in its shell tool.
    polls = [model_saw(s["result"]) for s in seen if s["tool"] == "status"]
    assert any(p.get("current_tool") for p in polls), polls
    save_capture("steer-abort", parent, seen)

    for sub in (steered, aborted):
        assert _processes_of(sub["runId"]) == [], where
    assert processes_in(parent.work) == [], where
    assert wait_until(lambda: servers_of(parent) == [], 10), where
    report(
        f"steer and abort: parent took {parent.elapsed:.1f} s; steer receipt "
        f"{by_tool['steer']}; abort receipt {by_tool['abort']}"
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
    # The server sees its stdin close and aborts the run: result.json written.
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
        f"parent {signame}: exit {parent.returncode}; the subagent's result.json "
        f"{ended:.1f} s after (outcome {sub['outcome']}, error {sub['error']}); "
        f"server gone {gone:.1f} s after"
    )
