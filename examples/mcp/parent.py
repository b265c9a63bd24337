"""A parent agent's side of a delegation, in a few lines: what a model does
through the tools of ``agent-wrapper mcp``, here by a script (see docs/mcp.md).

    python examples/mcp/parent.py SCENARIO

starts the server (``agent-wrapper mcp``) as an MCP client does, starts pi
on the fake agent's SCENARIO in its live mode, steers it once it is at work,
waits for it and prints its result. Needs the mcp extra (the SDK's client).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def call(session: ClientSession, name: str, **arguments: object) -> dict[str, object]:
    result = await session.call_tool(name, arguments)
    if result.is_error:
        raise SystemExit(f"{name}: {result.content[0].text}")  # type: ignore[union-attr]
    answer = result.structured_content
    assert isinstance(answer, dict)
    return answer


async def main(scenario: str) -> None:
    # The server installed beside this Python (a virtual environment), else on PATH.
    beside = Path(sys.executable).with_name("agent-wrapper")
    command = str(beside) if beside.exists() else shutil.which("agent-wrapper") or "agent-wrapper"
    server = StdioServerParameters(command=command, args=["mcp"])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        print("tools:", ", ".join(tool.name for tool in tools))
        run = await call(
            session, "start", command=["pi", "--mode", "rpc", "--scenario", scenario],
            task="Build it", label="builder",
        )  # fmt: skip
        run_id = run["run_id"]
        print("start ", run["state"])
        while (status := await call(session, "status", run_id=run_id))["current_tool"] is None:
            await trio.sleep(0.2)
        print("status", status["state"], "in", status["current_tool"])
        steered = await call(session, "steer", run_id=run_id, text="Skip the docs")
        print("steer ", steered["state"], steered["how"])
        while (await call(session, "wait", run_ids=[run_id], timeout=30))["timed_out"]:
            pass
        result = await call(session, "result", run_id=run_id)
        print("result", result["outcome"], repr(result["final_text"]), "steers:", result["steers"])


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
