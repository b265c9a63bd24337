"""A UserPromptSubmit handler refusing a steer on a real live session: pi
in its RPC mode, Claude Code's stream-json input and Codex's app-server,
against the mock model server, with the handler a command and an
``mcp_tool`` handler (the test MCP server on stdio). The handler blocks
steers that speak of deploying; ``agent-wrapper steer`` gets
the ``refused`` receipt with the handler's reason (exit 1), nothing reaches
the agent, and the run goes on to end ``ok`` with the agent's answer, the
refusal in result.json's ``externalSteers``. Runs only when
``AGENT_WRAPPER_CLIS`` names the install cache; see tests/real/README.md.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.real import mock_server as m
from tests.real.clis import CLIS
from tests.real.harness import Mock, cli_versions, run_case
from tests.real.test_conformance_live import MODES, one_process
from tests.real.test_conformance_steer import (
    SCHEMA,
    STEER_WAIT,
    TOOL_WAIT,
    check_installed,
    mock,
    processes_in,
    report,
    tool_called,
    wait_until,
    wrapper_cli,
)

__all__ = ["mock"]  # the steer module's fixture, shared

CASES = [(cli, version) for cli in MODES for version in cli_versions(CLIS[cli])]
IDS = [f"{cli}-{version}" for cli, version in CASES]

#: The handler's reason (the test MCP server's refuse_prompt gives the same).
REASON = "No deploys from this run."
MCP_SERVER = Path(__file__).resolve().parent.parent / "mcp_hook_server.py"
#: What the handler refuses, and a word to find it by in the model's requests.
REFUSED_TEXT = "Deploy it to production now. [inject:DEPLOYNOW]"

#: The handler: every input it is given is kept (a line each in the file
#: named by its first argument); a steer that speaks of deploying is blocked.
GATE = f"""
import json, sys
given = json.load(sys.stdin)
with open(sys.argv[1], "a") as log:
    log.write(json.dumps(given) + "\\n")
if given.get("source") == "steer" and "deploy" in given.get("prompt", "").lower():
    print(json.dumps({{"decision": "block", "reason": {REASON!r}}}))
"""


def gate_settings(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """Settings with the refusing handler of ``kind``, and the file where
    what it was given is kept."""
    given = tmp_path / "given.jsonl"
    if kind == "command":
        hook = tmp_path / "gate.py"
        hook.write_text(GATE)
        handler: dict[str, Any] = {"args": [sys.executable, str(hook), str(given)]}
        settings: dict[str, Any] = {}
    else:
        server = tmp_path / "gate_server.py"
        shutil.copy(MCP_SERVER, server)
        handler = {
            "type": "mcp_tool",
            "server": "gate",
            "tool": "refuse_prompt",
            "input": {"prompt": "${prompt}", "source": "${source}"},
        }
        env = {"MCP_HOOK_LOG": str(given)}
        settings = {
            "mcpServers": {"gate": {"command": sys.executable, "args": [str(server)], "env": env}}
        }
    settings["hooks"] = {"UserPromptSubmit": [{"hooks": [handler]}]}
    path = tmp_path / "prompt-settings.json"
    path.write_text(json.dumps(settings))
    return path, given


@pytest.mark.parametrize("kind", ["command", "mcp_tool"])
@pytest.mark.parametrize(("cli", "version"), CASES, ids=IDS)
def test_a_steer_a_prompt_handler_refuses_is_not_sent_and_the_run_goes_on(
    cli: str, version: str, kind: str, mock: Mock, tmp_path: Path
) -> None:
    check_installed(cli, version)
    settings, given = gate_settings(tmp_path, kind)
    sent: dict[str, Any] = {}

    def steer(run_dir: Path, nonce: str) -> None:
        assert wait_until(lambda: tool_called(mock, nonce), TOOL_WAIT), "no shell call"
        time.sleep(1.0)  # the 3 s command is running
        sent["at"] = time.time()
        sent["proc"] = wrapper_cli(
            "steer", str(run_dir), "--text", REFUSED_TEXT, "--wait", str(STEER_WAIT), "--json"
        )
        sent["took"] = time.time() - sent["at"]

    case = run_case(
        cli,
        "slow",
        tmp_path,
        mock,
        version=version,
        options=["--settings", str(settings)],
        during=steer,
        mode=MODES[cli],
    )
    result = case.result
    where = f"{cli} {version} {MODES[cli][1]}: stderr:\n{case.stderr[-3000:]}"
    steered = sent["proc"]
    assert steered.returncode == 1, f"{where}\nsteer: {steered.stdout} {steered.stderr}"
    receipt = json.loads(steered.stdout)
    assert receipt["state"] == "refused", f"{where}\n{receipt}"
    assert REASON in (receipt["why"] or ""), f"{where}\n{receipt}"
    jsonschema.validate(result, SCHEMA)
    assert (result["outcome"], case.returncode) == ("ok", 0), where
    assert result["finalText"] == m.TOOL_ANSWER, where
    (record,) = result["externalSteers"]
    assert record["outcome"] == "refused", where
    assert REASON in record["why"], where
    # Refused before anything was interrupted: one process, no signal, the tool whole.
    one_process(case, where)
    assert not case.of_type("steer_sent"), where
    assert (case.workdir / m.SLOW_FILE).exists(), f"{where}\nthe tool was cut short"
    carrying = [r for r in case.requests if "DEPLOYNOW" in json.dumps(r["body"])]
    assert not carrying, f"{where}\na model request carried the refused steer"
    sources = [json.loads(line)["source"] for line in given.read_text().splitlines()]
    assert sources == ["task", "steer"], where
    assert case.leftover == [], where
    assert processes_in(case.workdir) == [], where
    report(
        case,
        f"steer refused by a UserPromptSubmit {kind} handler in {sent['took']:.2f} s; "
        "the run went on",
    )
