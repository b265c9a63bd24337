"""A small Agent Client Protocol client that records what an ACP agent does.

Groundwork for the wrapper's ACP dialect: it starts an agent command (its own
process group, a given env and cwd), speaks JSON-RPC 2.0 over newline-delimited
stdin/stdout (``initialize``, ``session/new``, one or more ``session/prompt``),
answers ``session/request_permission`` as told, can send ``session/cancel`` or
SIGTERM the agent's process group mid-turn, closes stdin at the end and records
both directions, the agent's stderr and its own actions as JSONL::

    {"t": <monotonic seconds since start>, "dir": "out"|"in"|"stderr"|"probe", "msg": ...}

Every wait has a timeout. Two ways to run it::

    # any ACP command
    python -m tests.real.acp_probe run --out FILE [--prompt TEXT ...] -- COMMAND...
    # a tier CLI against the mock model server, configured like tests/real/clis.py
    python -m tests.real.acp_probe capture gemini tool_allow --out FILE

``capture`` runs the mock server itself and appends a summary of every model
request of the case (``dir: "mock"``). Run it inside a network namespace with
only loopback (``--netns`` does that with ``unshare -n`` where allowed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

PROTOCOL_VERSION = 1
CLIENT_INFO = {"name": "agent-wrapper-acp-probe", "version": "0.1.0"}

#: How long each step may take before the probe gives up on it.
INIT_TIMEOUT = 60.0
NEW_TIMEOUT = 60.0
PROMPT_TIMEOUT = 180.0
EXIT_TIMEOUT = float(os.environ.get("ACP_PROBE_EXIT_TIMEOUT", "20"))
#: How long one line may take to go into the agent's stdin.
WRITE_TIMEOUT = 30.0
#: After SIGTERM, how long before the probe SIGKILLs the group.
TERM_GRACE = 10.0


class ProbeTimeout(Exception):
    pass


@dataclass
class Options:
    #: ``allow``, ``reject`` or ``hold`` (answer only when cancelling, with ``cancelled``).
    permission: str = "allow"
    #: Seconds after a prompt is sent: send ``session/cancel`` (first prompt only).
    cancel_after: float | None = None
    #: Seconds after a prompt is sent: SIGTERM the agent's process group.
    sigterm_after: float | None = None
    #: Count those seconds from the first permission request instead.
    after_permission: bool = False
    #: SIGTERM only the process the probe started, not its whole group.
    term_leader_only: bool = False
    #: Raw lines written after ``initialize`` and before ``session/new``.
    bad_lines: list[str] = field(default_factory=list)
    #: Send a ``session/prompt`` with an unknown sessionId before ``session/new``.
    prompt_before_new: bool = False
    prompt_timeout: float = PROMPT_TIMEOUT
    close_stdin: bool = True


class Recorder:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.start = time.monotonic()

    def now(self) -> float:
        return round(time.monotonic() - self.start, 4)

    def record(self, direction: str, msg: Any) -> float:
        with self.lock:
            t = self.now()
            self.out.write(json.dumps({"t": t, "dir": direction, "msg": msg}) + "\n")
            self.out.flush()
            return t


class Probe:
    """One agent process and the client side of its ACP connection."""

    def __init__(
        self, argv: list[str], env: dict[str, str], cwd: Path, rec: Recorder, opts: Options
    ) -> None:
        self.rec = rec
        self.opts = opts
        self.cwd = cwd
        self.next_id = 1
        self.inbox: queue.Queue[tuple[float, dict[str, Any] | None]] = queue.Queue()
        self.write_lock = threading.Lock()
        #: Permission requests not answered yet (``hold`` mode): id -> request.
        self.held: dict[Any, dict[str, Any]] = {}
        #: When the first permission request arrived (monotonic).
        self.permission_at: float | None = None
        self.session_id: str | None = None
        #: A write never finished: stdin cannot be closed (its lock is held).
        self.write_blocked = False
        self.summary: dict[str, Any] = {"prompts": []}
        rec.record("probe", {"event": "start", "argv": argv, "cwd": str(cwd)})
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.pgid = self.proc.pid
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # -- plumbing ---------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                self.rec.record("in", {"unparsed": line})
                continue
            t = self.rec.record("in", msg)
            if isinstance(msg, dict):
                self.inbox.put((t, msg))
        self.inbox.put((self.rec.now(), None))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.rec.record("stderr", raw.decode(errors="replace").rstrip("\n"))

    def _write(self, data: bytes) -> None:
        """Writes one line; an agent that stops reading cannot block the probe."""
        stdin = self.proc.stdin
        assert stdin is not None
        done = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            try:
                stdin.write(data)
                stdin.flush()
            except (OSError, ValueError) as exc:
                failed.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, daemon=True).start()
        if not done.wait(WRITE_TIMEOUT):
            self.write_blocked = True
            self.rec.record("probe", {"event": "write_blocked"})
            raise ProbeTimeout(f"the agent read nothing for {WRITE_TIMEOUT:.0f} s")
        if failed:
            self.rec.record("probe", {"event": "write_failed", "error": repr(failed[0])})

    def write_raw(self, line: str) -> float:
        with self.write_lock:
            t = self.rec.record("out", {"raw": line})
            self._write(line.encode() + b"\n")
            return t

    def send(self, msg: dict[str, Any]) -> float:
        with self.write_lock:
            t = self.rec.record("out", msg)
            self._write(json.dumps(msg).encode() + b"\n")
            return t

    def request(self, method: str, params: dict[str, Any]) -> tuple[Any, float]:
        rid = self.next_id
        self.next_id += 1
        t = self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid, t

    def notify(self, method: str, params: dict[str, Any]) -> float:
        return self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_response(
        self, rid: Any, timeout: float, on_tick: Any = None
    ) -> tuple[float, dict[str, Any]]:
        """Handles the agent's requests and notifications until the response
        to ``rid`` arrives; ``on_tick(now)`` runs about every 50 ms."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProbeTimeout(f"no response to id {rid} in {timeout:.0f} s")
            if on_tick is not None:
                on_tick()
            try:
                t, msg = self.inbox.get(timeout=min(left, 0.05))
            except queue.Empty:
                continue
            if msg is None:
                raise ProbeTimeout(f"agent closed stdout before answering id {rid}")
            if "method" in msg and "id" in msg:
                self._answer(msg)
            elif "method" not in msg and msg.get("id") == rid:
                return t, msg

    def _answer(self, msg: dict[str, Any]) -> None:
        method = msg["method"]
        if method == "session/request_permission":
            if self.permission_at is None:
                self.permission_at = time.monotonic()
            options = msg.get("params", {}).get("options") or []
            if self.opts.permission == "hold":
                self.held[msg["id"]] = msg
                return
            choice = pick_option(options, self.opts.permission)
            if choice is None:
                outcome: dict[str, Any] = {"outcome": "cancelled"}
            else:
                outcome = {"outcome": "selected", "optionId": choice}
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": {"outcome": outcome}})
            return
        error = {"code": -32601, "message": f"method not found: {method}"}
        self.send({"jsonrpc": "2.0", "id": msg["id"], "error": error})

    def release_held(self) -> None:
        for rid in list(self.held):
            result = {"outcome": {"outcome": "cancelled"}}
            self.send({"jsonrpc": "2.0", "id": rid, "result": result})
            del self.held[rid]

    # -- the conversation -------------------------------------------------

    def initialize(self) -> dict[str, Any]:
        caps = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": caps,
            "clientInfo": CLIENT_INFO,
        }
        rid, sent = self.request("initialize", params)
        t, msg = self.wait_response(rid, INIT_TIMEOUT)
        self.summary["initializeSeconds"] = round(t - sent, 3)
        return msg

    def new_session(self) -> dict[str, Any]:
        rid, sent = self.request("session/new", {"cwd": str(self.cwd), "mcpServers": []})
        t, msg = self.wait_response(rid, NEW_TIMEOUT)
        self.summary["sessionNewSeconds"] = round(t - sent, 3)
        self.session_id = (msg.get("result") or {}).get("sessionId")
        return msg

    def prompt(self, text: str, *, first: bool) -> dict[str, Any]:
        params = {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
        rid, sent = self.request("session/prompt", params)
        start = time.monotonic()
        done = {"cancel": False, "term": False}
        info: dict[str, Any] = {}

        def tick() -> None:
            if self.opts.after_permission:
                if self.permission_at is None:
                    return
                elapsed = time.monotonic() - self.permission_at
            else:
                elapsed = time.monotonic() - start
            after = self.opts.cancel_after
            if first and after is not None and not done["cancel"] and elapsed >= after:
                done["cancel"] = True
                info["cancelSentAt"] = self.notify("session/cancel", {"sessionId": self.session_id})
                self.release_held()
            after = self.opts.sigterm_after
            if first and after is not None and not done["term"] and elapsed >= after:
                done["term"] = True
                info["sigtermAt"] = self.signal_group(
                    signal.SIGTERM, leader_only=self.opts.term_leader_only
                )
                self.summary["sigtermAt"] = info["sigtermAt"]
            if done["term"] and self.rec.now() - info["sigtermAt"] > TERM_GRACE:
                raise ProbeTimeout("no answer to the prompt within the grace after SIGTERM")

        try:
            t, msg = self.wait_response(rid, self.opts.prompt_timeout, tick)
        except ProbeTimeout as exc:
            info["timeout"] = str(exc)
            self.summary["prompts"].append(info)
            raise
        info["seconds"] = round(t - sent, 3)
        info["stopReason"] = (msg.get("result") or {}).get("stopReason")
        info["error"] = msg.get("error")
        if "cancelSentAt" in info:
            info["cancelLatency"] = round(t - info["cancelSentAt"], 3)
        self.summary["prompts"].append(info)
        return msg

    def prompt_unknown_session(self) -> None:
        params = {"sessionId": "no-such-session", "prompt": [{"type": "text", "text": "hello"}]}
        rid, sent = self.request("session/prompt", params)
        try:
            t, msg = self.wait_response(rid, 15.0)
            self.summary["promptBeforeNew"] = {"seconds": round(t - sent, 3), "reply": msg}
        except ProbeTimeout as exc:
            self.summary["promptBeforeNew"] = {"timeout": str(exc)}

    def drain(self, seconds: float) -> None:
        """Answers the agent's requests for a while (used after bad lines)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                _, msg = self.inbox.get(timeout=min(left, 0.05))
            except queue.Empty:
                continue
            if msg is None:
                return
            if "method" in msg and "id" in msg:
                self._answer(msg)

    # -- ending -----------------------------------------------------------

    def signal_group(self, sig: int, *, leader_only: bool = False) -> float:
        event = {
            "event": "signal",
            "signal": signal.Signals(sig).name,
            "to": "leader" if leader_only else "group",
            "group": leftover_in_group(self.pgid),
        }
        t = self.rec.record("probe", event)
        with contextlib.suppress(ProcessLookupError):
            if leader_only:
                os.kill(self.proc.pid, sig)
            else:
                os.killpg(self.pgid, sig)
        return t

    def finish(self) -> None:
        """Closes stdin (if asked), waits for the exit, then TERM/KILL."""
        closed = None
        if self.write_blocked:
            # Closing would wait for the blocked write: straight to the signals.
            self.summary["stdinBlocked"] = True
            self.signal_group(signal.SIGTERM)
        elif self.opts.close_stdin and self.proc.poll() is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            closed = self.rec.record("probe", {"event": "stdin_closed"})
        try:
            self.proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.summary["exitTimeout"] = True
            self.signal_group(signal.SIGTERM)
            try:
                self.proc.wait(TERM_GRACE)
            except subprocess.TimeoutExpired:
                self.summary["killed"] = True
                self.signal_group(signal.SIGKILL)
                self.proc.wait(10)
        t = self.rec.now()
        self.summary["exitCode"] = self.proc.returncode
        if closed is not None:
            self.summary["exitAfterStdinClose"] = round(t - closed, 3)
        self.summary["leftover"] = leftover_in_group(self.pgid)
        if self.summary["leftover"]:
            self.signal_group(signal.SIGKILL)
        self.rec.record("probe", {"event": "exit", **self.summary})

    def after_signal(self) -> None:
        """Waits for the exit after a SIGTERM; SIGKILLs the group when it lingers."""
        sent = self.summary.get("sigtermAt", self.rec.now())
        try:
            self.proc.wait(TERM_GRACE)
            self.summary["exitAfterSigterm"] = round(self.rec.now() - sent, 3)
        except subprocess.TimeoutExpired:
            self.summary["ignoredSigterm"] = True
            self.signal_group(signal.SIGKILL)
            self.proc.wait(10)
        self.summary["exitCode"] = self.proc.returncode
        self.summary["leftover"] = leftover_in_group(self.pgid)
        if self.summary["leftover"]:
            self.signal_group(signal.SIGKILL)
        self.rec.record("probe", {"event": "exit", **self.summary})


def pick_option(options: list[dict[str, Any]], want: str) -> str | None:
    """The optionId to answer with: a one-time allow or reject, else any of that kind."""
    prefix = "allow" if want == "allow" else "reject"
    for kind in (f"{prefix}_once", f"{prefix}_always"):
        for option in options:
            if option.get("kind") == kind:
                return str(option.get("optionId"))
    return None


def leftover_in_group(pgid: int) -> list[str]:
    """Processes still alive in the agent's process group (zombies aside)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    found.append(f"{entry} {stat.split('(', 1)[1].rsplit(')', 1)[0]}")
    return found


def converse(probe: Probe, prompts: list[str]) -> None:
    """The whole exchange; any timeout is recorded and ends it early."""
    opts = probe.opts
    try:
        probe.initialize()
        if opts.bad_lines:
            for line in opts.bad_lines:
                probe.write_raw(line)
            probe.drain(3.0)
        if opts.prompt_before_new:
            probe.prompt_unknown_session()
        probe.new_session()
        for index, text in enumerate(prompts):
            if probe.proc.poll() is not None:
                break
            probe.prompt(text, first=index == 0)
    except ProbeTimeout as exc:
        probe.rec.record("probe", {"event": "timeout", "error": str(exc)})
    if "sigtermAt" in probe.summary:
        probe.after_signal()
    else:
        probe.finish()


# ---------------------------------------------------------------------------
# Captures of the tier's CLIs against the mock model server

#: Scenario name -> (mock scenarios of the prompts, options).
SCENARIOS: dict[str, tuple[list[str], dict[str, Any]]] = {
    "plain": (["plain"], {}),
    "tool_allow": (["tool"], {"permission": "allow"}),
    "tool_reject": (["tool"], {"permission": "reject"}),
    "second_prompt": (["plain", "plain"], {}),
    "length": (["length"], {}),
    "auth": (["auth"], {}),
    "overload": (["overload"], {}),
    "overflow": (["overflow"], {}),
    # One second into the slow command (it runs 3 s), or into a pending permission request.
    "cancel_tool": (["slow"], {"permission": "allow", "cancel_after": 1, "after_permission": True}),
    "cancel_permission": (
        ["tool"],
        {"permission": "hold", "cancel_after": 1, "after_permission": True},
    ),
    # A plain prompt on the same session after a turn cancelled mid-tool.
    "cancel_then_prompt": (
        ["slow", "plain"],
        {"permission": "allow", "cancel_after": 1, "after_permission": True},
    ),
    "sigterm": (["slow"], {"permission": "allow", "sigterm_after": 1, "after_permission": True}),
    "sigterm_leader": (
        ["slow"],
        {
            "permission": "allow",
            "sigterm_after": 1,
            "after_permission": True,
            "term_leader_only": True,
        },
    ),
    "bad_input": (
        ["plain"],
        {"bad_lines": ["this is not json", '{"jsonrpc":"2.0","id":77}'], "prompt_before_new": True},
    ),
}
#: Characters of filler in the ``overflow`` prompt: more than a 1M-token window.
OVERFLOW_CHARS = 5_000_000


def acp_setup(agent: str, home: Path, base: str, cache: Path) -> tuple[dict[str, str], list[str]]:
    """The env and ACP command of one agent, its configuration taken from clis.py."""
    from tests.real.clis import CLIS, MOCK_MODEL, base_env

    if agent in ("gemini", "gemini-yolo", "opencode", "opencode-ask", "qwen", "kilo", "kilo-ask"):
        cli = CLIS[agent.removesuffix("-ask").removesuffix("-yolo")]
        setup = cli.configure(home, base, str(cli.executable(cache)))
        exe = setup.argv[0]
        if agent in ("opencode-ask", "kilo-ask"):
            # opencode (and Kilo, its fork) runs its shell tool without asking
            # unless told to ask.
            path = Path(setup.env["OPENCODE_CONFIG" if agent == "opencode-ask" else "KILO_CONFIG"])
            config = json.loads(path.read_text())
            config["permission"] = {"bash": "ask", "edit": "ask"}
            path.write_text(json.dumps(config, indent=2))
        argv = [exe, "acp"]
        if agent.startswith("gemini"):
            argv = [exe, "--acp", "--skip-trust", "-m", "gemini-2.5-flash"]
            argv += ["--yolo"] if agent == "gemini-yolo" else []
        if agent == "qwen":
            # Asks before its shell tool (session/request_permission).
            argv = [exe, "--acp", "--approval-mode", "default", "-m", MOCK_MODEL]
        return base_env(home) | setup.env, argv
    if agent == "claude-acp":
        setup = CLIS["claude"].configure(home, base, "claude")
        bin_dir = cache / "zed-industries+claude-code-acp@0.16.2" / "node_modules" / ".bin"
        env = base_env(home) | setup.env | {"ANTHROPIC_MODEL": "claude-sonnet-4-5"}
        return env, [str(bin_dir / "claude-code-acp")]
    if agent in ("codex-acp", "codex-acp-ask"):
        setup = CLIS["codex"].configure(home, base, "codex")
        if agent == "codex-acp-ask":
            # No sandbox (bubblewrap is not on this machine), approval for every command.
            path = Path(setup.env["CODEX_HOME"]) / "config.toml"
            text = path.read_text()
            policy = 'approval_policy = "untrusted"\nsandbox_mode = "danger-full-access"\n'
            path.write_text(policy + text)
        bin_dir = cache / "zed-industries+codex-acp@0.16.0" / "node_modules" / ".bin"
        return base_env(home) | setup.env, [str(bin_dir / "codex-acp")]
    raise SystemExit(f"unknown agent {agent}")


def mock_summary(entry: dict[str, Any]) -> dict[str, Any]:
    """What a capture keeps of one model request: enough to tell what the model saw."""
    from tests.real import mock_server

    body = entry.get("body") or {}
    turns = body.get("contents") or body.get("messages") or body.get("input") or []
    text = json.dumps(body)
    seen = [
        word
        for word in (mock_server.PLAIN_ANSWER, mock_server.TOOL_ANSWER, "Running it.")
        if word in text
    ]
    results = [json.dumps(obj)[:600] for kind, obj in mock_server._walk(body) if kind == "result"]
    shape = []
    for turn in turns if isinstance(turns, list) else []:
        if not isinstance(turn, dict):
            continue
        parts = turn.get("parts") or turn.get("content") or []
        kinds = sorted(
            {str(p.get("type") or next(iter(p), "")) for p in parts if isinstance(p, dict)}
            if isinstance(parts, list)
            else {"text"}
        )
        shape.append(f"{turn.get('role') or turn.get('type')}:{'+'.join(kinds)}")
    return {
        "path": entry.get("path"),
        "shape": shape,
        "scenario": entry.get("scenario"),
        "nonce": entry.get("nonce"),
        "markers": sorted(set(mock_server.MARKER.findall(text))),
        "turns": len(turns) if isinstance(turns, list) else None,
        "bodyChars": len(text),
        "tools": entry.get("tools"),
        "toolResults": entry.get("toolResults"),
        "toolResultsSeen": results,
        "answersSeen": seen,
        "reply": entry.get("reply"),
    }


def capture(
    agent: str, scenario: str, out: Path, cache: Path, drop_env: tuple[str, ...] = ()
) -> dict[str, Any]:
    from tests.real.harness import mock_server_running

    kinds, raw_opts = SCENARIOS[scenario]
    opts = Options(**raw_opts)
    with tempfile.TemporaryDirectory(prefix=f"acp-{agent}-") as tmp:
        base = Path(tmp)
        home, work = base / "home", base / "work"
        home.mkdir()
        work.mkdir()
        log = base / "mock.jsonl"
        with mock_server_running(log) as mock:
            env, argv = acp_setup(agent, home, mock.url, cache)
            env = {k: v for k, v in env.items() if k not in drop_env}
            prompts = []
            for kind in kinds:
                nonce = secrets.token_hex(6)
                if kind == "overflow":
                    filler = "lorem ipsum " * (OVERFLOW_CHARS // 12)
                    prompts.append(f"[scenario:plain:{nonce}] Summarize: {filler}")
                else:
                    prompts.append(f"[scenario:{kind}:{nonce}] Do the scripted task.")
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("w") as handle:
                rec = Recorder(handle)
                shown = {k: v for k, v in env.items() if k not in os.environ or k == "HOME"}
                rec.record("probe", {"event": "setup", "agent": agent, "env": shown})
                probe = Probe(argv, env, work, rec, opts)
                converse(probe, prompts)
                entries = []
                if log.exists():
                    entries = [json.loads(x) for x in log.read_text().splitlines() if x]
                for entry in entries:
                    if entry.get("method") == "POST":
                        rec.record("mock", mock_summary(entry))
                files = sorted(p.name for p in work.iterdir() if not p.name.startswith("."))
                rec.record("probe", {"event": "workdir", "files": files})
                return probe.summary


def shrink(path: Path, limit: int = 4000) -> None:
    """Cuts huge strings (the overflow prompt) in a capture so it stays small."""

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > limit:
            return value[:200] + f"...<{len(value)} chars>..." + value[-200:]
        if isinstance(value, dict):
            return {k: cut(v) for k, v in value.items()}
        if isinstance(value, list):
            return [cut(v) for v in value]
        return value

    lines = [json.dumps(cut(json.loads(x))) for x in path.read_text().splitlines() if x]
    path.write_text("\n".join(lines) + "\n")


def outline(path: Path) -> list[str]:
    """One short line per recorded message: the sequence a capture shows."""
    lines = []
    for raw in path.read_text().splitlines():
        entry = json.loads(raw)
        t, way, msg = entry["t"], entry["dir"], entry["msg"]
        if way == "stderr":
            text = f"stderr {msg[:100]}"
        elif way in ("probe", "mock"):
            keep = ("event", "path", "shape", "toolResults", "answersSeen", "reply", "files")
            text = f"{way} " + json.dumps({k: v for k, v in msg.items() if k in keep})[:300]
        elif "raw" in msg or "unparsed" in msg:
            text = f"{way} raw {str(msg.get('raw') or msg.get('unparsed'))[:100]}"
        elif "method" in msg:
            params = msg.get("params") or {}
            extra = ""
            if msg["method"] == "session/update":
                update = params.get("update") or {}
                extra = update.get("sessionUpdate", "")
                for key in ("status", "kind", "title", "toolCallId"):
                    if key in update:
                        extra += f" {key}={update[key]!r}"[:80]
                content = update.get("content")
                if isinstance(content, dict) and "text" in content:
                    extra += f" text={content['text'][:60]!r}"
            elif msg["method"] == "session/request_permission":
                options = params.get("options") or []
                extra = " ".join(f"{o.get('optionId')}:{o.get('kind')}" for o in options)
            ident = f" id={msg['id']!r}" if "id" in msg else ""
            text = f"{way} {msg['method']}{ident} {extra}"
        else:
            body = msg.get("result") if "result" in msg else {"error": msg.get("error")}
            text = f"{way} response id={msg.get('id')!r} {json.dumps(body)[:200]}"
        lines.append(f"{t:8.3f} {text}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="mode", required=True)
    run = sub.add_parser("run", help="probe any ACP command")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--cwd", type=Path, default=Path.cwd())
    run.add_argument("--env", action="append", default=[], help="KEY=VALUE added to the env")
    run.add_argument("--prompt", action="append", default=[])
    run.add_argument("--permission", choices=("allow", "reject", "hold"), default="allow")
    run.add_argument("--cancel-after", type=float)
    run.add_argument("--sigterm-after", type=float)
    run.add_argument("--after-permission", action="store_true", help="count from it")
    run.add_argument("--bad-line", action="append", default=[])
    run.add_argument("--prompt-before-new", action="store_true")
    run.add_argument("--keep-stdin", action="store_true", help="do not close stdin at the end")
    run.add_argument("command", nargs="+")
    cap = sub.add_parser("capture", help="a tier CLI against the mock model server")
    agents = ["gemini", "gemini-yolo", "opencode", "opencode-ask", "qwen", "kilo", "kilo-ask"]
    agents += ["claude-acp", "codex-acp", "codex-acp-ask"]
    cap.add_argument("agent", choices=agents)
    cap.add_argument("scenario", choices=sorted(SCENARIOS))
    cap.add_argument("--out", type=Path, required=True)
    cap.add_argument("--netns", action="store_true", help="re-run inside unshare -n")
    cap.add_argument("--drop-env", action="append", default=[], help="a variable to leave out")
    show = sub.add_parser("show", help="outline a capture")
    show.add_argument("capture", type=Path)
    args = parser.parse_args(argv)
    if args.mode == "show":
        print("\n".join(outline(args.capture)))
        return 0
    if args.mode == "run":
        env = dict(os.environ) | dict(item.split("=", 1) for item in args.env)
        opts = Options(
            permission=args.permission,
            cancel_after=args.cancel_after,
            sigterm_after=args.sigterm_after,
            after_permission=args.after_permission,
            bad_lines=args.bad_line,
            prompt_before_new=args.prompt_before_new,
            close_stdin=not args.keep_stdin,
        )
        with args.out.open("w") as handle:
            probe = Probe(args.command, env, args.cwd, Recorder(handle), opts)
            converse(probe, args.prompt)
        print(json.dumps(probe.summary))
        return 0
    if args.netns and shutil.which("ip") and shutil.which("unshare"):
        inner = [sys.executable, "-m", "tests.real.acp_probe", *sys.argv[1:]]
        inner.remove("--netns")
        script = 'ip link set lo up && exec "$@"'
        return subprocess.call(["unshare", "-n", "sh", "-c", script, "sh", *inner])
    from tests.real.harness import cache_dir

    summary = capture(args.agent, args.scenario, args.out, cache_dir(), tuple(args.drop_env))
    shrink(args.out)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
