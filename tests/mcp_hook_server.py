"""An MCP server whose tools decide hooks, for the tests of ``mcp_tool``
handlers: on stdio, or with ``http PORT`` over streamable HTTP on 127.0.0.1.

Each call is appended to the file ``MCP_HOOK_LOG`` names (its tool and
arguments), so a test sees what the hook input became.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("hook-gate")


def _log(tool: str, **arguments: Any) -> None:
    path = os.environ.get("MCP_HOOK_LOG")
    if path:
        with open(path, "a") as log:
            log.write(json.dumps({"tool": tool, **arguments}) + "\n")


@server.tool()
def block_stop(ctx: Context, active: bool, last: str = "") -> str:
    """Blocks the first stop (the agent did not run the tests)."""
    token = (ctx.headers or {}).get("x-token")
    _log("block_stop", active=active, last=last, **({"token": token} if token else {}))
    if active:
        return ""
    return json.dumps({"decision": "block", "reason": "Run the tests first."})


@server.tool()
def add_context(prompt: str, source: str = "") -> str:
    """Adds context to a prompt."""
    _log("add_context", prompt=prompt, source=source)
    output = {"hookEventName": "UserPromptSubmit", "additionalContext": "Use the staging database."}
    return json.dumps({"hookSpecificOutput": output})


@server.tool()
def refuse_prompt(prompt: str, source: str = "") -> str:
    """Refuses a prompt that mentions deploying."""
    _log("refuse_prompt", prompt=prompt, source=source)
    if "deploy" in prompt.lower():
        return json.dumps({"decision": "block", "reason": "No deploys from this run."})
    return ""


@server.tool()
def check_command(name: str, command: str = "") -> str:
    """Denies a shell command that removes files."""
    _log("check_command", name=name, command=command)
    if "rm " in command:
        output = {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "No deleting files.",
        }
        return json.dumps({"hookSpecificOutput": output})
    return ""


@server.tool()
def fail() -> str:
    """Answers with a tool error."""
    raise ValueError("the policy store is down")


@server.tool()
def slow(seconds: float) -> str:
    """Answers after ``seconds``."""
    _log("slow", seconds=seconds)
    time.sleep(seconds)
    return ""


@server.tool()
async def stuck(seconds: float) -> str:
    """Blocks the whole server (its event loop too, so it does not even see
    its input end) for ``seconds``."""
    _log("stuck", seconds=seconds)
    time.sleep(seconds)  # blocking on purpose
    return ""


@server.tool()
def huge(mib: int) -> str:
    """Answers with a block longer than any answer is read."""
    return json.dumps({"decision": "block", "reason": "x" * (mib * 1024 * 1024)})


@server.tool()
def crash() -> str:
    """Dies in the middle of the call."""
    sys.stderr.write("dying on purpose\n")
    sys.stderr.flush()
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            stateless_http=True,
            json_response=True,
        )
    else:
        server.run()
