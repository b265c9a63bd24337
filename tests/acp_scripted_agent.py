"""A small ACP agent that plays a script of raw messages, for the misbehaviours
the fake agent's scenarios do not express (messages after a turn's answer,
floods, an output closed early, requests that come all at once).

``python tests/acp_scripted_agent.py SCRIPT.json``. The script is a JSON
object; every key is optional:

- ``authMethods``: what ``initialize`` offers (default: none);
- ``sessionNew``: a JSON-RPC error object ``session/new`` is answered with
  (default: a session ``s``);
- ``stderr``: written to stderr at the start;
- ``slowStart``: seconds ``initialize`` takes to be answered (as Qwen Code
  and Kilo CLI take 1-4 s);
- ``turn``: the steps played on each ``session/prompt`` before its answer;
- ``turns``: instead, the steps of each prompt in turn (the last repeats);
- ``stopReason``: the answer's (default ``end_turn``);
- ``after``: the steps played right after the answer;
- ``atClose``: the steps played when stdin ends, before the exit (status 0).

A step is a message to write as it is (``session/update`` params get the
session id when they have none), or one of: ``{"$sleep": S}``;
``{"$refuse": ERROR}`` (the prompt is answered with that JSON-RPC error
object at once, the rest of its steps left out);
``{"$flood": {"count": N, "method": M}}`` (N requests, without reading
stdin); ``{"$permissions": N}`` (N permission requests at once, then their
answers read: each tool is reported completed when allowed);
``{"$ask": N}`` (the same requests, their answers left unread);
``{"$closeStdout": S}`` (close stdout, then stay alive S seconds without
reading stdin); ``{"$untilCancel": S}`` (read stdin for up to S seconds: a
``session/cancel`` ends the turn there, answered ``cancelled``);
``{"$untilFile": [PATH, S]}`` (wait until PATH exists, for up to S seconds:
a turn as long as its test needs, rather than a fixed time to sit out).
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from typing import Any

SESSION = "s"


def write(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def update(body: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, **body}}


#: What was read of stdin and not yet taken as a line; whether it ended.
_pending = bytearray()
_ended = False


def read_line(timeout: float | None = None) -> bytes | None:
    """The next line of stdin (unbuffered by Python, so that ``select`` sees
    what is left); None at its end or once ``timeout`` seconds passed."""
    global _ended
    deadline = None if timeout is None else time.monotonic() + timeout
    while b"\n" not in _pending:
        if _ended:
            line = bytes(_pending)
            _pending.clear()
            return line or None
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([0], [], [], wait)
        if not ready:
            return None
        data = os.read(0, 65536)
        _ended = not data
        _pending.extend(data)
    line, _, rest = bytes(_pending).partition(b"\n")
    _pending[:] = rest
    return line


def read(timeout: float | None = None) -> dict[str, Any] | None:
    line = read_line(timeout)
    while line is not None and not line.strip():
        line = read_line(timeout)
    if line is None:
        return None
    loaded: dict[str, Any] = json.loads(line)
    return loaded


class Cancelled(Exception):
    """The client cancelled the turn being played."""


class Refused(Exception):
    """The prompt is answered with a JSON-RPC error (``$refuse``)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error)
        self.error = error


def until_cancel(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (message := read(max(0.0, deadline - time.monotonic()))) is not None:
        if message.get("method") == "session/cancel":
            raise Cancelled


def until_file(path: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


def play(steps: list[dict[str, Any]]) -> None:
    for step in steps:
        if "$untilCancel" in step:
            until_cancel(step["$untilCancel"])
        elif "$sleep" in step:
            time.sleep(step["$sleep"])
        elif "$untilFile" in step:
            until_file(*step["$untilFile"])
        elif "$refuse" in step:
            raise Refused(step["$refuse"])
        elif "$flood" in step:
            flood = step["$flood"]
            for n in range(flood["count"]):
                write({"jsonrpc": "2.0", "id": f"f{n}", "method": flood["method"], "params": {}})
        elif "$permissions" in step:
            permissions(step["$permissions"])
        elif "$ask" in step:
            permissions(step["$ask"], wait=False)
        elif "$closeStdout" in step:
            sys.stdout.flush()
            os.close(1)
            time.sleep(step["$closeStdout"])
            os._exit(0)
        elif step.get("method") == "session/update" and "sessionId" not in step.get("params", {}):
            write(update(step["params"]))
        else:
            write(step)


def permissions(count: int, *, wait: bool = True) -> None:
    for n in range(count):
        call = {"toolCallId": f"t{n}", "title": f"echo {n}", "kind": "execute", "status": "pending"}
        options = [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        params = {"sessionId": SESSION, "toolCall": call, "options": options}
        write(
            {
                "jsonrpc": "2.0",
                "id": f"p{n}",
                "method": "session/request_permission",
                "params": params,
            }
        )
    waiting = {f"p{n}" for n in range(count)} if wait else set()
    while waiting:
        message = read()
        if message is None:
            return
        if message.get("id") in waiting and "result" in message:
            waiting.discard(message["id"])
            outcome = message["result"]["outcome"]
            allowed = outcome.get("optionId") == "allow"
            call_id = "t" + str(message["id"])[1:]
            status = "completed" if allowed else "failed"
            write(
                update(
                    {
                        "update": {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": call_id,
                            "status": status,
                        }
                    }
                )
            )


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as file:
        script: dict[str, Any] = json.load(file)
    if "stderr" in script:
        sys.stderr.write(script["stderr"] + "\n")
        sys.stderr.flush()
    prompts = 0
    while (message := read()) is not None:
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            time.sleep(script.get("slowStart", 0))
            methods = script.get("authMethods", [])
            write(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {"protocolVersion": 1, "authMethods": methods},
                }
            )
        elif method == "session/new" and "sessionNew" in script:
            write({"jsonrpc": "2.0", "id": request_id, "error": script["sessionNew"]})
        elif method == "session/new":
            write({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": SESSION}})
        elif method == "session/prompt":
            stop = script.get("stopReason", "end_turn")
            turns = script.get("turns") or [script.get("turn", [])]
            prompts += 1
            try:
                play(turns[min(prompts, len(turns)) - 1])
            except Cancelled:
                stop = "cancelled"
            except Refused as refused:
                write({"jsonrpc": "2.0", "id": request_id, "error": refused.error})
                continue
            write({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": stop}})
            play(script.get("after", []))
    play(script.get("atClose", []))


if __name__ == "__main__":
    main()
