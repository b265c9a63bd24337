"""Which MCP client keeps a tool call open past its tool timeout while the
server sends progress: each real client CLI as the parent (as in
test_conformance_mcp.py) calls ``wait`` for longer than the tool timeout it
was configured with, on a subagent busy in a 150 s command. The server
sends ``notifications/progress`` every ``MCP_WAIT_PROGRESS_EVERY`` seconds
when the call carries a progress token.

    AGENT_WRAPPER_CLIS=~/.cache/agent-wrapper/clis .venv/bin/python -m tests.real.mcp_progress

Prints, per client: the tool timeout, the wait asked for, how long the call
was open, whether the call carried a progress token (the server's stdin is
recorded), and what the model was given. ``client:0:steer`` calls
``steer`` on a subagent busy in its command instead: a call that lasts
until the command ends (or the server stops waiting) with no progress,
which shows the client's default tool timeout.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.real.harness import Mock, mock_server_running
from tests.real.test_conformance_mcp import (
    CLAUDE,
    CODEX,
    GEMINI,
    OPENCODE,
    PARENT_LIMIT,
    Client,
    parent_requests,
    parent_setup,
    run_parent,
    tool_results_seen,
)

CLIENTS = {c.cli: c for c in (CLAUDE, CODEX, GEMINI, OPENCODE)}


def measure(client: Client, timeout: int | None, wait: str, mock: Mock, base: Path) -> str:
    """One call (``wait`` of that many seconds, or ``steer`` on a busy
    subagent, a call without progress) under the client's tool timeout."""
    tool = "steer" if wait == "steer" else "wait"
    scenario = "mcp_steer_busy" if tool == "steer" else f"mcp_progress_{wait}"
    # The server's stdin recorded on the way: did the call carry a progress token?
    stdin_log = base / "server-stdin.jsonl"
    parent = parent_setup(
        scenario, base, mock, client, tool_timeout=timeout, record_stdin=stdin_log
    )
    # A parent that hangs is stopped a minute after its longest call.
    run_parent(parent, None, limit=PARENT_LIMIT + (0 if tool == "steer" else int(wait)))
    requests = parent_requests(mock, parent)
    asked = next(
        (
            r["ts"]
            for r in requests
            if ((r.get("reply") or {}).get("tool") or [""])[0] == client.tool(tool)
        ),
        None,
    )
    if asked is None:
        return f"{client.cli} {client.version}: no {tool} call; the parent said {parent.answer!r}"
    answered = min((r["ts"] for r in requests if r["ts"] > asked), default=None)
    token = any(
        "progressToken" in json.dumps(message.get("params", {}))
        for message in _messages(stdin_log)
        if message.get("method") == "tools/call" and f'"{tool}"' in json.dumps(message)
    )
    seen = [s for s in tool_results_seen(mock, parent) if s.tool == tool]
    got = json.dumps(seen[-1].raw)[:300] if seen else parent.answer
    open_for = f"{answered - asked:.1f} s" if answered is not None else "no answer"
    return (
        f"{client.cli} {client.version}: tool timeout {timeout or 'default'} s, {tool} {wait}: "
        f"the call was open {open_for}; progress token sent: {token}; the model got {got}"
    )


def _messages(path: Path) -> list[dict[str, Any]]:
    found = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "clients",
        nargs="*",
        default=list(CLIENTS),
        help="client:timeout:wait ... (timeout 0: the client's default; wait 'steer': a "
        "steer on a busy subagent instead, a call without progress)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mcp-progress-") as tmp:
        root = Path(tmp)
        with mock_server_running(root / "requests.jsonl") as mock:
            for n, spec in enumerate(args.clients):
                name, _, rest = spec.partition(":")
                timeout_text, _, wait_text = rest.partition(":")
                timeout = int(timeout_text) if timeout_text else 8
                wait = wait_text or "14"
                line = measure(CLIENTS[name], timeout or None, wait, mock, root / str(n))
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
