"""A recording driver for the agent CLIs' two-way modes: messages written on
the agent's stdin while it runs.

Groundwork for steering a running agent. It starts one tier CLI in its
two-way mode against the mock model server (configured as in
``tests/real/clis.py``: isolated HOME, fake key, 127.0.0.1 only), writes JSON
lines on its stdin at chosen moments of a scripted session, and records every
line written and read as JSONL::

    {"t": <monotonic seconds since start>, "dir": DIR, "msg": ...}

``DIR`` is ``stdin`` (probe -> agent; ``{"raw": ...}`` for a line sent as
is), ``stdout`` (agent -> probe; ``{"unparsed": ...}`` for a non-JSON line),
``stderr``, ``probe`` (its own actions: ``start``, ``stdin_closed``,
``timeout``, ``exit`` with timings, ``workdir``) and ``mock`` (after the run:
one summary per model request, with the ``[inject:WORD]`` markers it carried).

Messages written mid-run carry ``[inject:WORD]``; the mock ends its scripted
answers with ``SAW:WORD`` when the request it answers carries one, so the
agent's own stream shows which model request a message reached::

    python -m tests.real.twoway_probe capture claude-2.1.332 mid_tool --netns --out FILE
    python -m tests.real.twoway_probe show FILE
    python -m tests.real.twoway_probe list

Every wait has a timeout; the agent's process group is killed at the end if
it is still there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tests.real import mock_server
from tests.real.clis import CLIS, base_env

#: How long a turn may take before the probe gives up on it.
TURN_TIMEOUT = 90.0
#: How long the agent may take to exit after its stdin closes.
EXIT_TIMEOUT = 30.0

Msg = dict[str, Any]
Pred = Callable[[Msg], bool]


class ProbeTimeout(Exception):
    pass


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


class Session:
    """One agent process: its stdin as JSON lines, its stdout read in order."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, rec: Recorder) -> None:
        self.rec = rec
        self.cond = threading.Condition()
        self.lines: list[tuple[float, Msg]] = []
        self.cursor = 0
        self.eof = False
        self.stdin_closed_at: float | None = None
        self.next_id = 1
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
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"unparsed": line}
            if not isinstance(msg, dict):
                msg = {"unparsed": line}
            t = self.rec.record("stdout", msg)
            with self.cond:
                self.lines.append((t, msg))
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.rec.record("stderr", raw.decode(errors="replace").rstrip("\n"))

    def note(self, event: str, **fields: Any) -> float:
        return self.rec.record("probe", {"event": event, **fields})

    def send(self, msg: Msg) -> float:
        return self._write(msg, json.dumps(msg))

    def send_raw(self, line: str) -> float:
        return self._write({"raw": line}, line)

    def _write(self, shown: Msg, line: str) -> float:
        stdin = self.proc.stdin
        assert stdin is not None
        t = self.rec.record("stdin", shown)
        try:
            stdin.write(line.encode() + b"\n")
            stdin.flush()
        except (OSError, ValueError) as exc:
            self.note("write_failed", error=repr(exc))
        return t

    def request_id(self) -> int:
        rid = self.next_id
        self.next_id += 1
        return rid

    def wait_for(self, pred: Pred, timeout: float, what: str) -> Msg:
        """The next stdout message (after the cursor) matching ``pred``."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                while self.cursor < len(self.lines):
                    _, msg = self.lines[self.cursor]
                    self.cursor += 1
                    if pred(msg):
                        return msg
                left = deadline - time.monotonic()
                if self.eof or left <= 0:
                    reason = "stdout closed" if self.eof else f"{timeout:.0f} s"
                    self.note("timeout", waiting_for=what, reason=reason)
                    raise ProbeTimeout(f"{what}: {reason}")
                self.cond.wait(min(left, 0.2))

    def maybe(self, pred: Pred, timeout: float, what: str) -> Msg | None:
        """As ``wait_for``, but a timeout is an answer (recorded), not a failure."""
        try:
            return self.wait_for(pred, timeout, what)
        except ProbeTimeout:
            return None

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        self.stdin_closed_at = time.monotonic()
        self.note("stdin_closed")

    def wait_exit(self, timeout: float = EXIT_TIMEOUT) -> int | None:
        """Waits for the agent to exit by itself; records how long it took."""
        started = time.monotonic()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.note("no_exit", waited=timeout)
            return None
        since_close = (
            round(time.monotonic() - self.stdin_closed_at, 3)
            if self.stdin_closed_at is not None
            else None
        )
        self.note(
            "exit",
            code=code,
            waited=round(time.monotonic() - started, 3),
            afterStdinClosed=since_close,
            groupLeft=leftover_in_group(self.proc.pid),
            toolCommandsLeft=tool_commands(),
        )
        return code

    def stop(self) -> None:
        """Ends the process group if anything of it is left."""
        if self.proc.poll() is None:
            self.note("sigterm_group")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.note("sigkill_group")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            self.note("killed", code=self.proc.returncode)
        left = leftover_in_group(self.proc.pid)
        if left:
            self.note("group_leftover", processes=left)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)


def tool_commands() -> list[str]:
    """The mock's scripted shell commands still running, in any process group."""
    import psutil

    marks = (mock_server.SLOW_FILE, mock_server.LONG_FILE)
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if any(mark in cmdline for mark in marks) and "twoway_probe" not in cmdline:
            found.append(f"{proc.info['pid']} {cmdline[:80]}")
    return found


def leftover_in_group(pgid: int) -> list[str]:
    """Processes still in the agent's process group (zombies aside)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "name", "status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.info["pid"]) == pgid and proc.info["status"] != "zombie":
                found.append(f"{proc.info['pid']} {proc.info['name']}")
    return found


# ---------------------------------------------------------------------------
# Tasks and predicates


def task(scenario: str) -> str:
    return f"[scenario:{scenario}:{secrets.token_hex(6)}] Do the scripted task."


def inject(word: str) -> str:
    return f"[inject:{word}] Also mention this message."


def of_type(*kinds: str) -> Pred:
    return lambda m: m.get("type") in kinds


def response_to(rid: Any) -> Pred:
    return lambda m: "method" not in m and m.get("id") == rid


def method(name: str) -> Pred:
    return lambda m: m.get("method") == name


# ---------------------------------------------------------------------------
# Claude Code: -p --input-format stream-json --output-format stream-json


def claude_user(text: str) -> Msg:
    return {"type": "user", "message": {"role": "user", "content": text}}


def claude_tool_use(m: Msg) -> bool:
    if m.get("type") != "assistant":
        return False
    content = (m.get("message") or {}).get("content") or []
    return any(isinstance(c, dict) and c.get("type") == "tool_use" for c in content)


def claude_eof_after_result(s: Session) -> None:
    s.send(claude_user(task("plain")))
    s.wait_for(of_type("result"), TURN_TIMEOUT, "result")
    # Stdin stays open: does it exit by itself?
    if s.wait_exit(5) is None:
        s.close_stdin()
        s.wait_exit()


def claude_eof_early(s: Session) -> None:
    s.send(claude_user(task("plain")))
    s.close_stdin()
    s.maybe(of_type("result"), TURN_TIMEOUT, "result")
    s.wait_exit()


def claude_mid_tool(s: Session) -> None:
    s.send(claude_user(task("slow")))
    s.wait_for(claude_tool_use, TURN_TIMEOUT, "tool_use")
    time.sleep(0.5)
    s.send(claude_user(inject("MIDTOOL")))
    s.wait_for(of_type("result"), TURN_TIMEOUT, "result")
    # A second result if the message was kept for a turn of its own.
    s.maybe(of_type("result"), 8, "second result")
    s.close_stdin()
    s.wait_exit()


def claude_after_result(s: Session) -> None:
    s.send(claude_user(task("plain")))
    s.wait_for(of_type("result"), TURN_TIMEOUT, "result")
    time.sleep(2)
    s.send(claude_user(inject("SECOND")))
    s.wait_for(of_type("result"), TURN_TIMEOUT, "second result")
    s.close_stdin()
    s.wait_exit()


def claude_interrupt(s: Session) -> None:
    s.send(claude_user(task("long")))
    s.wait_for(claude_tool_use, TURN_TIMEOUT, "tool_use")
    time.sleep(1)
    s.send({"type": "control_request", "request_id": "int-1", "request": {"subtype": "interrupt"}})
    s.maybe(of_type("result"), 30, "result after interrupt")
    s.send(claude_user(inject("AFTER")))
    s.maybe(of_type("result"), TURN_TIMEOUT, "result of the next message")
    s.close_stdin()
    s.wait_exit()


def claude_mid_think(s: Session) -> None:
    """A message written while the model request is open (no tool running)."""
    s.send(claude_user(task("think")))
    time.sleep(1.5)
    s.send(claude_user(inject("MIDTHINK")))
    s.wait_for(of_type("result"), TURN_TIMEOUT, "result")
    s.maybe(of_type("result"), 12, "second result")
    s.close_stdin()
    s.wait_exit()


def claude_interrupt_think(s: Session) -> None:
    s.send(claude_user(task("think")))
    time.sleep(1.5)
    s.send({"type": "control_request", "request_id": "int-1", "request": {"subtype": "interrupt"}})
    s.maybe(of_type("result"), 30, "result after interrupt")
    s.send(claude_user(inject("AFTER")))
    s.maybe(of_type("result"), TURN_TIMEOUT, "result of the next message")
    s.close_stdin()
    s.wait_exit()


def claude_interrupt_queued(s: Session) -> None:
    """Interrupt while a message written mid-request waits for its turn."""
    s.send(claude_user(task("think")))
    time.sleep(1.5)
    s.send(claude_user(inject("QUEUED")))
    time.sleep(0.3)
    s.send({"type": "control_request", "request_id": "int-1", "request": {"subtype": "interrupt"}})
    s.maybe(of_type("result"), 30, "result after interrupt")
    s.maybe(of_type("result"), 12, "another result")
    s.close_stdin()
    s.wait_exit()


def claude_end_session(s: Session) -> None:
    """The end_session control request, stdin left open."""
    s.send(claude_user(task("plain")))
    s.wait_for(of_type("result"), TURN_TIMEOUT, "result")
    request = {"subtype": "end_session", "reason": "done"}
    s.send({"type": "control_request", "request_id": "end-1", "request": request})
    s.maybe(of_type("control_response"), 10, "control_response")
    if s.wait_exit(10) is None:
        s.close_stdin()
        s.wait_exit()


def claude_mid_tool_two(s: Session) -> None:
    s.send(claude_user(task("slow")))
    s.wait_for(claude_tool_use, TURN_TIMEOUT, "tool_use")
    time.sleep(0.5)
    s.send(claude_user(inject("ONE")))
    s.send(claude_user(inject("TWO")))
    s.wait_for(of_type("result"), TURN_TIMEOUT, "result")
    s.maybe(of_type("result"), 8, "second result")
    s.close_stdin()
    s.wait_exit()


def claude_initialize(s: Session) -> None:
    """The initialize control request the SDKs send before their first message."""
    request = {"subtype": "initialize"}
    s.send({"type": "control_request", "request_id": "init-1", "request": request})
    s.maybe(of_type("control_response"), 20, "control_response")
    s.send(claude_user(task("plain")))
    s.maybe(of_type("result"), TURN_TIMEOUT, "result")
    s.close_stdin()
    s.wait_exit()


def claude_not_json(s: Session) -> None:
    s.send_raw("this is not json")
    s.send(claude_user(task("plain")))
    s.maybe(of_type("result"), 30, "result")
    s.close_stdin()
    s.wait_exit()


def claude_odd_lines(s: Session) -> None:
    s.send({"type": "bogus"})
    s.send({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": ""}]}})
    s.send(
        {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": task("plain")}]},
        }
    )
    s.maybe(of_type("result"), 30, "result")
    s.maybe(of_type("result"), 10, "another result")
    s.close_stdin()
    s.wait_exit()


def claude_two_at_once(s: Session) -> None:
    s.send(claude_user(task("plain")))
    s.send(claude_user(inject("SECOND")))
    s.wait_for(of_type("result"), TURN_TIMEOUT, "result")
    s.maybe(of_type("result"), 10, "another result")
    s.close_stdin()
    s.wait_exit()


def claude_interrupt_idle(s: Session) -> None:
    s.send({"type": "control_request", "request_id": "int-1", "request": {"subtype": "interrupt"}})
    s.maybe(of_type("control_response"), 10, "control_response")
    s.send(claude_user(task("plain")))
    s.maybe(of_type("result"), TURN_TIMEOUT, "result")
    s.send({"type": "control_request", "request_id": "int-2", "request": {"subtype": "interrupt"}})
    s.maybe(of_type("control_response"), 10, "control_response")
    s.close_stdin()
    s.wait_exit()


def claude_eof_mid_tool(s: Session) -> None:
    """As ``pi_eof_mid_tool``."""
    s.send(claude_user(task("slow")))
    s.wait_for(claude_tool_use, TURN_TIMEOUT, "tool_use")
    time.sleep(0.5)
    s.close_stdin()
    s.maybe(of_type("result"), 30, "result")
    s.wait_exit()
    time.sleep(4)


# ---------------------------------------------------------------------------
# pi: --mode rpc


def pi_cmd(s: Session, kind: str, **fields: Any) -> str:
    rid = f"{kind}-{s.request_id()}"
    s.send({"id": rid, "type": kind, **fields})
    return rid


def pi_prompt_eof(s: Session) -> None:
    pi_cmd(s, "prompt", message=task("plain"))
    s.wait_for(of_type("agent_end"), TURN_TIMEOUT, "agent_end")
    if s.wait_exit(5) is None:
        s.close_stdin()
        s.wait_exit()


def pi_eof_early(s: Session) -> None:
    pi_cmd(s, "prompt", message=task("plain"))
    s.close_stdin()
    s.maybe(of_type("agent_end"), TURN_TIMEOUT, "agent_end")
    s.wait_exit()


def pi_eof_mid_tool(s: Session) -> None:
    """Stdin closed mid-command; the working directory is listed 4 s later: does
    the command finish after the agent has gone?"""
    pi_cmd(s, "prompt", message=task("slow"))
    s.wait_for(of_type("tool_execution_start"), TURN_TIMEOUT, "tool_execution_start")
    time.sleep(0.5)
    s.close_stdin()
    s.maybe(of_type("agent_end"), 20, "agent_end")
    s.wait_exit()
    time.sleep(4)


def pi_steer(s: Session) -> None:
    pi_cmd(s, "prompt", message=task("slow"))
    s.wait_for(of_type("tool_execution_start"), TURN_TIMEOUT, "tool_execution_start")
    time.sleep(0.5)
    pi_cmd(s, "steer", message=inject("STEER"))
    s.wait_for(of_type("agent_end"), TURN_TIMEOUT, "agent_end")
    s.maybe(of_type("agent_end"), 8, "another agent_end")
    s.close_stdin()
    s.wait_exit()


def pi_steer_think(s: Session) -> None:
    pi_cmd(s, "prompt", message=task("think"))
    time.sleep(1.5)
    pi_cmd(s, "steer", message=inject("STEER"))
    s.wait_for(of_type("agent_end"), TURN_TIMEOUT, "agent_end")
    s.maybe(of_type("agent_end"), 12, "another agent_end")
    s.close_stdin()
    s.wait_exit()


def pi_steer_two(s: Session) -> None:
    pi_cmd(s, "prompt", message=task("slow"))
    s.wait_for(of_type("tool_execution_start"), TURN_TIMEOUT, "tool_execution_start")
    time.sleep(0.5)
    pi_cmd(s, "steer", message=inject("ONE"))
    pi_cmd(s, "steer", message=inject("TWO"))
    s.wait_for(of_type("agent_end"), TURN_TIMEOUT, "agent_end")
    s.maybe(of_type("agent_end"), 8, "another agent_end")
    s.close_stdin()
    s.wait_exit()


def pi_follow_up(s: Session) -> None:
    pi_cmd(s, "prompt", message=task("slow"))
    s.wait_for(of_type("tool_execution_start"), TURN_TIMEOUT, "tool_execution_start")
    time.sleep(0.5)
    pi_cmd(s, "follow_up", message=inject("FOLLOW"))
    s.wait_for(of_type("agent_end"), TURN_TIMEOUT, "agent_end")
    s.maybe(of_type("agent_end"), 15, "another agent_end")
    s.close_stdin()
    s.wait_exit()


def pi_prompt_busy(s: Session) -> None:
    pi_cmd(s, "prompt", message=task("slow"))
    s.wait_for(of_type("tool_execution_start"), TURN_TIMEOUT, "tool_execution_start")
    time.sleep(0.3)
    pi_cmd(s, "prompt", message=inject("BUSY"))
    pi_cmd(s, "prompt", message=inject("BUSYSTEER"), streamingBehavior="steer")
    s.wait_for(of_type("agent_end"), TURN_TIMEOUT, "agent_end")
    s.maybe(of_type("agent_end"), 8, "another agent_end")
    s.close_stdin()
    s.wait_exit()


def pi_after_end(s: Session) -> None:
    pi_cmd(s, "prompt", message=task("plain"))
    s.wait_for(of_type("agent_end"), TURN_TIMEOUT, "agent_end")
    time.sleep(1)
    pi_cmd(s, "prompt", message=inject("SECOND"))
    s.wait_for(of_type("agent_end"), TURN_TIMEOUT, "second agent_end")
    s.close_stdin()
    s.wait_exit()


def pi_steer_after_end(s: Session) -> None:
    """A steer that comes just after the run ended (the wrapper's race): does
    it start a run, wait for the next prompt, or vanish?"""
    pi_cmd(s, "prompt", message=task("plain"))
    s.wait_for(of_type("agent_end"), TURN_TIMEOUT, "agent_end")
    pi_cmd(s, "steer", message=inject("LATE"))
    s.maybe(of_type("agent_end"), 8, "an agent_end of the steer alone")
    pi_cmd(s, "prompt", message=inject("NEXT"))
    s.maybe(of_type("agent_end"), TURN_TIMEOUT, "agent_end of the next prompt")
    s.close_stdin()
    s.wait_exit()


def pi_follow_up_after_end(s: Session) -> None:
    """The same with a follow-up."""
    pi_cmd(s, "prompt", message=task("plain"))
    s.wait_for(of_type("agent_end"), TURN_TIMEOUT, "agent_end")
    pi_cmd(s, "follow_up", message=inject("LATE"))
    s.maybe(of_type("agent_end"), 8, "an agent_end of the follow-up alone")
    pi_cmd(s, "prompt", message=inject("NEXT"))
    s.maybe(of_type("agent_end"), TURN_TIMEOUT, "agent_end of the next prompt")
    s.close_stdin()
    s.wait_exit()


def pi_abort(s: Session) -> None:
    pi_cmd(s, "prompt", message=task("long"))
    s.wait_for(of_type("tool_execution_start"), TURN_TIMEOUT, "tool_execution_start")
    time.sleep(1)
    pi_cmd(s, "abort")
    s.maybe(of_type("agent_end"), 30, "agent_end after abort")
    pi_cmd(s, "prompt", message=inject("AFTER"))
    s.maybe(of_type("agent_end"), TURN_TIMEOUT, "agent_end of the next prompt")
    s.close_stdin()
    s.wait_exit()


def pi_bad_lines(s: Session) -> None:
    s.send_raw("this is not json")
    pi_cmd(s, "no_such_command")
    pi_cmd(s, "get_state")
    s.maybe(of_type("response"), 10, "a response")
    s.close_stdin()
    s.wait_exit()


# ---------------------------------------------------------------------------
# Codex: app-server (JSON-RPC 2.0 without the "jsonrpc" member, one per line)


@dataclass
class Codex:
    s: Session
    thread: str = ""

    def request(self, name: str, params: Msg, timeout: float = 60) -> Msg:
        rid = self.s.request_id()
        self.s.send({"id": rid, "method": name, "params": params})
        return self.s.wait_for(self.answering(response_to(rid)), timeout, f"response {name}")

    def send_request(self, name: str, params: Msg) -> int:
        rid = self.s.request_id()
        self.s.send({"id": rid, "method": name, "params": params})
        return rid

    def answering(self, pred: Pred) -> Pred:
        """``pred``, answering the server's own requests on the way."""

        def check(m: Msg) -> bool:
            if "method" in m and "id" in m:
                if m["method"].endswith("requestApproval"):
                    self.s.send({"id": m["id"], "result": {"decision": "accept"}})
                else:
                    error = {"code": -32601, "message": f"not supported: {m['method']}"}
                    self.s.send({"id": m["id"], "error": error})
                return False
            return pred(m)

        return check

    def wait(self, pred: Pred, timeout: float, what: str) -> Msg:
        return self.s.wait_for(self.answering(pred), timeout, what)

    def maybe(self, pred: Pred, timeout: float, what: str) -> Msg | None:
        return self.s.maybe(self.answering(pred), timeout, what)

    def start(self, cwd: Path) -> None:
        self.request("initialize", {"clientInfo": {"name": "twoway-probe", "version": "0.1.0"}})
        self.s.send({"method": "initialized"})
        params = {"cwd": str(cwd), "approvalPolicy": "never", "sandbox": "danger-full-access"}
        answer = self.request("thread/start", params)
        self.thread = answer["result"]["thread"]["id"]

    def turn(self, text: str) -> str:
        params = {"threadId": self.thread, "input": [{"type": "text", "text": text}]}
        answer = self.request("turn/start", params)
        return str(answer["result"]["turn"]["id"])


def codex_command_started(m: Msg) -> bool:
    item = (m.get("params") or {}).get("item") or {}
    return m.get("method") == "item/started" and item.get("type") == "commandExecution"


def codex_plain_eof(s: Session, cwd: Path) -> None:
    c = Codex(s)
    c.start(cwd)
    c.turn(task("plain"))
    c.wait(method("turn/completed"), TURN_TIMEOUT, "turn/completed")
    if s.wait_exit(5) is None:
        s.close_stdin()
        s.wait_exit()


def codex_eof_early(s: Session, cwd: Path) -> None:
    c = Codex(s)
    c.start(cwd)
    c.turn(task("plain"))
    s.close_stdin()
    s.maybe(method("turn/completed"), 20, "turn/completed")
    s.wait_exit()


def codex_steer(s: Session, cwd: Path) -> None:
    c = Codex(s)
    c.start(cwd)
    turn = c.turn(task("slow"))
    c.wait(codex_command_started, TURN_TIMEOUT, "command started")
    time.sleep(0.5)
    params = {
        "threadId": c.thread,
        "expectedTurnId": turn,
        "input": [{"type": "text", "text": inject("STEER")}],
    }
    rid = c.send_request("turn/steer", params)
    c.wait(response_to(rid), 30, "response turn/steer")
    c.wait(method("turn/completed"), TURN_TIMEOUT, "turn/completed")
    c.maybe(method("turn/started"), 8, "another turn")
    s.close_stdin()
    s.wait_exit()


def codex_steer_think(s: Session, cwd: Path) -> None:
    c = Codex(s)
    c.start(cwd)
    turn = c.turn(task("think"))
    time.sleep(1.5)
    params = {
        "threadId": c.thread,
        "expectedTurnId": turn,
        "input": [{"type": "text", "text": inject("STEER")}],
    }
    rid = c.send_request("turn/steer", params)
    c.wait(response_to(rid), 30, "response turn/steer")
    c.wait(method("turn/completed"), TURN_TIMEOUT, "turn/completed")
    c.maybe(method("turn/started"), 8, "another turn")
    s.close_stdin()
    s.wait_exit()


def codex_interrupt_think(s: Session, cwd: Path) -> None:
    c = Codex(s)
    c.start(cwd)
    turn = c.turn(task("think"))
    time.sleep(1.5)
    rid = c.send_request("turn/interrupt", {"threadId": c.thread, "turnId": turn})
    c.maybe(response_to(rid), 30, "response turn/interrupt")
    c.maybe(method("turn/completed"), 30, "turn/completed after interrupt")
    s.close_stdin()
    s.wait_exit()


def codex_eof_mid_tool(s: Session, cwd: Path) -> None:
    """As ``pi_eof_mid_tool``."""
    c = Codex(s)
    c.start(cwd)
    c.turn(task("slow"))
    c.wait(codex_command_started, TURN_TIMEOUT, "command started")
    s.close_stdin()
    s.maybe(method("turn/completed"), 20, "turn/completed")
    s.wait_exit()
    time.sleep(4)


def codex_busy(s: Session, cwd: Path) -> None:
    """Mid-command: turn/steer with a wrong expectedTurnId, then a second turn/start."""
    c = Codex(s)
    c.start(cwd)
    c.turn(task("slow"))
    c.wait(codex_command_started, TURN_TIMEOUT, "command started")
    params = {
        "threadId": c.thread,
        "expectedTurnId": "no-such-turn",
        "input": [{"type": "text", "text": inject("WRONGID")}],
    }
    rid = c.send_request("turn/steer", params)
    c.maybe(response_to(rid), 15, "response turn/steer")
    text = [{"type": "text", "text": inject("BUSY")}]
    rid = c.send_request("turn/start", {"threadId": c.thread, "input": text})
    c.maybe(response_to(rid), 15, "response turn/start")
    c.maybe(method("turn/completed"), TURN_TIMEOUT, "turn/completed")
    c.maybe(method("turn/completed"), 10, "another turn/completed")
    s.close_stdin()
    s.wait_exit()


def codex_steer_stale(s: Session, cwd: Path) -> None:
    """turn/steer when no turn runs, and with a wrong expectedTurnId."""
    c = Codex(s)
    c.start(cwd)
    turn = c.turn(task("plain"))
    c.wait(method("turn/completed"), TURN_TIMEOUT, "turn/completed")
    for expected in (turn, "no-such-turn"):
        params = {
            "threadId": c.thread,
            "expectedTurnId": expected,
            "input": [{"type": "text", "text": inject("LATE")}],
        }
        rid = c.send_request("turn/steer", params)
        c.maybe(response_to(rid), 15, "response turn/steer")
    s.close_stdin()
    s.wait_exit()


def codex_bad_lines(s: Session, cwd: Path) -> None:
    """A line that is not JSON, an unknown method, then a turn."""
    c = Codex(s)
    c.start(cwd)
    s.send_raw("this is not json")
    rid = c.send_request("no/such/method", {})
    c.maybe(response_to(rid), 10, "response no/such/method")
    c.turn(task("plain"))
    c.maybe(method("turn/completed"), TURN_TIMEOUT, "turn/completed")
    s.close_stdin()
    s.wait_exit()


def codex_after_turn(s: Session, cwd: Path) -> None:
    c = Codex(s)
    c.start(cwd)
    c.turn(task("plain"))
    c.wait(method("turn/completed"), TURN_TIMEOUT, "turn/completed")
    c.turn(inject("SECOND"))
    c.wait(method("turn/completed"), TURN_TIMEOUT, "second turn/completed")
    s.close_stdin()
    s.wait_exit()


def codex_interrupt(s: Session, cwd: Path) -> None:
    c = Codex(s)
    c.start(cwd)
    turn = c.turn(task("long"))
    c.wait(codex_command_started, TURN_TIMEOUT, "command started")
    time.sleep(1)
    rid = c.send_request("turn/interrupt", {"threadId": c.thread, "turnId": turn})
    c.maybe(response_to(rid), 30, "response turn/interrupt")
    c.maybe(method("turn/completed"), 30, "turn/completed after interrupt")
    c.turn(inject("AFTER"))
    c.maybe(method("turn/completed"), TURN_TIMEOUT, "turn/completed of the next turn")
    s.close_stdin()
    s.wait_exit()


# ---------------------------------------------------------------------------
# The CLIs and their scenarios

Script = Callable[[Session, Path], None]


def _plain(script: Callable[[Session], None]) -> Script:
    return lambda s, _cwd: script(s)


CLAUDE_SCENARIOS: dict[str, Script] = {
    "eof_after_result": _plain(claude_eof_after_result),
    "eof_early": _plain(claude_eof_early),
    "mid_tool": _plain(claude_mid_tool),
    "after_result": _plain(claude_after_result),
    "interrupt": _plain(claude_interrupt),
    "not_json": _plain(claude_not_json),
    "odd_lines": _plain(claude_odd_lines),
    "two_at_once": _plain(claude_two_at_once),
    "interrupt_idle": _plain(claude_interrupt_idle),
    "eof_mid_tool": _plain(claude_eof_mid_tool),
    "mid_tool_replay": _plain(claude_mid_tool),
    "mid_think": _plain(claude_mid_think),
    "mid_think_replay": _plain(claude_mid_think),
    "interrupt_think": _plain(claude_interrupt_think),
    "interrupt_queued": _plain(claude_interrupt_queued),
    "mid_tool_two": _plain(claude_mid_tool_two),
    "end_session": _plain(claude_end_session),
    "initialize": _plain(claude_initialize),
}
#: Scenarios that run the CLI with extra arguments.
EXTRA_ARGS = {
    ("claude", "mid_tool_replay"): ["--replay-user-messages"],
    ("claude", "mid_think_replay"): ["--replay-user-messages"],
}
PI_SCENARIOS: dict[str, Script] = {
    "prompt_eof": _plain(pi_prompt_eof),
    "eof_early": _plain(pi_eof_early),
    "eof_mid_tool": _plain(pi_eof_mid_tool),
    "steer": _plain(pi_steer),
    "steer_think": _plain(pi_steer_think),
    "steer_two": _plain(pi_steer_two),
    "follow_up": _plain(pi_follow_up),
    "prompt_busy": _plain(pi_prompt_busy),
    "after_end": _plain(pi_after_end),
    "steer_after_end": _plain(pi_steer_after_end),
    "follow_up_after_end": _plain(pi_follow_up_after_end),
    "abort": _plain(pi_abort),
    "bad_lines": _plain(pi_bad_lines),
}
CODEX_SCENARIOS: dict[str, Script] = {
    "plain_eof": codex_plain_eof,
    "eof_early": codex_eof_early,
    "eof_mid_tool": codex_eof_mid_tool,
    "steer": codex_steer,
    "steer_think": codex_steer_think,
    "interrupt_think": codex_interrupt_think,
    "steer_stale": codex_steer_stale,
    "busy": codex_busy,
    "bad_lines": codex_bad_lines,
    "after_turn": codex_after_turn,
    "interrupt": codex_interrupt,
}
SCENARIOS = {"claude": CLAUDE_SCENARIOS, "pi": PI_SCENARIOS, "codex": CODEX_SCENARIOS}


def twoway_argv(name: str, argv: list[str]) -> list[str]:
    """The tier's COMMAND for ``name`` turned into its two-way mode."""
    exe = argv[0]
    if name == "claude":
        rest = [a for a in argv[1:] if a != "-p"]
        return [exe, "-p", "--input-format", "stream-json", *rest]
    if name == "pi":
        return [exe, "--mode", "rpc", "--provider", "mock", "--model", "mock-model"]
    if name == "codex":
        return [exe, "app-server"]
    raise SystemExit(f"no two-way mode for {name}")


def mock_summary(entry: Msg, wall_start: float) -> Msg:
    """What a capture keeps of one model request: enough to tell what the model saw;
    ``at``: when it arrived, in the capture's seconds."""
    body = entry.get("body") or {}
    text = json.dumps(body)
    turns = body.get("messages") or body.get("input") or []
    tail = []
    last = turns[-3:] if isinstance(turns, list) else []
    for index, turn in enumerate(last):
        if not isinstance(turn, dict):
            continue
        # The last message in full (up to 800 characters): where an injected one lands.
        cut = 800 if index == len(last) - 1 else 120
        content = turn.get("content")
        if isinstance(content, list):
            parts = [
                str(p.get("type")) + ":" + str(p.get("text") or p.get("content") or "")[:cut]
                for p in content
                if isinstance(p, dict)
            ]
        else:
            parts = [str(content or turn.get("output") or turn.get("arguments") or "")[:cut]]
        tail.append({"role": turn.get("role") or turn.get("type"), "parts": parts})
    return {
        "at": round(float(entry.get("ts") or 0) - wall_start, 3),
        "path": entry.get("path"),
        "scenario": entry.get("scenario"),
        "tools": len(entry.get("tools") or []),
        "turns": len(turns) if isinstance(turns, list) else None,
        "toolResults": entry.get("toolResults"),
        "injected": sorted(set(mock_server.INJECT.findall(text))),
        "tail": tail,
        "reply": entry.get("reply"),
    }


def capture(spec: str, scenario: str, out: Path, cache: Path) -> None:
    from tests.real.harness import mock_server_running

    name, _, version = spec.partition("-")
    cli = CLIS[name]
    version = version or cli.version
    script = SCENARIOS[name][scenario]
    with tempfile.TemporaryDirectory(prefix=f"twoway-{name}-") as tmp:
        base = Path(tmp)
        home, work = base / "home", base / "work"
        home.mkdir()
        work.mkdir()
        log = base / "mock.jsonl"
        with mock_server_running(log) as mock:
            setup = cli.configure(home, mock.url, str(cli.executable(cache, version)))
            env = base_env(home) | setup.env
            argv = twoway_argv(name, setup.argv) + EXTRA_ARGS.get((name, scenario), [])
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("w") as handle:
                rec = Recorder(handle)
                wall_start = time.time()
                rec.record("probe", {"event": "setup", "cli": name, "version": version})
                session = Session(argv, env, work, rec)
                try:
                    script(session, work)
                except ProbeTimeout as exc:
                    rec.record("probe", {"event": "gave_up", "error": str(exc)})
                finally:
                    session.stop()
                time.sleep(0.3)
                text = log.read_text() if log.exists() else ""
                entries = [json.loads(x) for x in text.splitlines() if x]
                for entry in entries:
                    if entry.get("method") == "POST":
                        rec.record("mock", mock_summary(entry, wall_start))
                files = sorted(p.name for p in work.iterdir() if not p.name.startswith("."))
                rec.record("probe", {"event": "workdir", "files": files})


def outline(path: Path) -> list[str]:
    """One short line per recorded message."""
    lines = []
    for raw in path.read_text().splitlines():
        entry = json.loads(raw)
        t, way, msg = entry["t"], entry["dir"], entry["msg"]
        if way == "stderr":
            text = str(msg)[:140]
        elif way == "mock":
            keep = ("at", "path", "toolResults", "injected", "reply")
            text = json.dumps({k: v for k, v in msg.items() if k in keep})[:240]
        else:
            text = json.dumps(msg)[:240]
        lines.append(f"{t:8.3f} {way:6} {text}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="mode", required=True)
    cap = sub.add_parser("capture", help="one scripted session of a tier CLI")
    cap.add_argument("cli", help="claude-2.1.197, claude-2.1.332, pi, codex (NAME[-VERSION])")
    cap.add_argument("scenario")
    cap.add_argument("--out", type=Path, required=True)
    cap.add_argument("--netns", action="store_true", help="re-run inside unshare -n")
    show = sub.add_parser("show", help="outline a capture")
    show.add_argument("capture", type=Path)
    sub.add_parser("list", help="the scenarios of each CLI")
    args = parser.parse_args(argv)
    if args.mode == "show":
        print("\n".join(outline(args.capture)))
        return 0
    if args.mode == "list":
        for name, scripts in SCENARIOS.items():
            print(name, " ".join(scripts))
        return 0
    name = args.cli.partition("-")[0]
    if args.scenario not in SCENARIOS.get(name, {}):
        raise SystemExit(f"unknown: {args.cli} {args.scenario}")
    if args.netns and shutil.which("ip") and shutil.which("unshare"):
        inner = [sys.executable, "-m", "tests.real.twoway_probe", *sys.argv[1:]]
        inner.remove("--netns")
        script = 'ip link set lo up && exec "$@"'
        return subprocess.call(["unshare", "-n", "sh", "-c", script, "sh", *inner])
    from tests.real.harness import cache_dir

    capture(args.cli, args.scenario, args.out, cache_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
