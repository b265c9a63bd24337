"""Live steering of the real CLIs driven on their stdin, pi 0.73.1 in its
RPC mode (``pi --mode rpc``), Claude Code (2.1.197, 2.1.332) with
``--input-format stream-json`` and Codex 0.169.0's ``app-server``, against
the mock model server: a steer from outside
while a slow tool runs reaches the model in the same process and the same
turn (no signal, one agent process), with the history before it; a Stop
handler's block is the next prompt on that process; an abort ends the run
and its tool. Runs only when ``AGENT_WRAPPER_CLIS`` names the install
cache; see tests/real/README.md.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.real import mock_server as m
from tests.real.clis import CLIS
from tests.real.harness import Case, Mock, cli_versions, run_case
from tests.real.test_conformance_steer import (
    SCHEMA,
    STEER_TEXT,
    STEER_WAIT,
    TOOL_WAIT,
    WORD,
    check_installed,
    mock,
    processes_in,
    report,
    tool_called,
    ts,
    wait_until,
    wrapper_cli,
)

__all__ = ["mock"]  # the module's fixture, shared

#: Each CLI's words of its JSON mode on the tier's command line, and those of
#: its two-way mode instead.
MODES = {
    "pi": (["--mode", "json", "-p"], ["--mode", "rpc"]),
    "claude": (["-p"], ["-p", "--input-format", "stream-json"]),
    # The tier lets Codex run unasked, as the exec tier does: with the
    # app-server's own options, since the wrapper chooses none for it.
    "codex": (
        ["exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"],
        ["app-server", "-c", "approval_policy=never", "-c", "sandbox_mode=danger-full-access"],
    ),
}
CASES = [(cli, version) for cli in MODES for version in cli_versions(CLIS[cli])]
IDS = [f"{cli}-{version}" for cli, version in CASES]


def one_process(case: Case, where: str) -> None:
    assert len(case.of_type("spawned")) == 1, f"{where}\nmore than one agent process"
    assert not case.of_type("signal_sent"), f"{where}\na live delivery sent a signal"


@pytest.mark.parametrize(("cli", "version"), CASES, ids=IDS)
def test_a_steer_during_a_tool_reaches_the_model_in_the_same_turn(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    check_installed(cli, version)
    sent: dict[str, Any] = {}

    def steer(run_dir: Path, nonce: str) -> None:
        assert wait_until(lambda: tool_called(mock, nonce), TOOL_WAIT), "no shell call"
        time.sleep(1.0)  # the 3 s command is running
        sent["at"] = time.time()
        sent["proc"] = wrapper_cli(
            "steer", str(run_dir), "--text", STEER_TEXT, "--wait", str(STEER_WAIT), "--json"
        )
        sent["took"] = time.time() - sent["at"]

    case = run_case(cli, "slow", tmp_path, mock, version=version, during=steer, mode=MODES[cli])
    result = case.result
    where = f"{cli} {version} {MODES[cli][1]}: stderr:\n{case.stderr[-3000:]}"
    steered = sent["proc"]
    assert steered.returncode == 0, f"{where}\nsteer: {steered.stdout} {steered.stderr}"
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 1), where
    jsonschema.validate(result, SCHEMA)
    assert (result["outcome"], case.returncode) == ("ok", 0), where
    assert len(result["attempts"]) == 1, where
    assert result["attempts"][0]["exitCode"] == 0, where
    one_process(case, where)
    carrying = [r for r in case.requests if f"[inject:{WORD}]" in json.dumps(r["body"])]
    assert carrying, f"{where}\nno model request carried the steer"
    assert m.SLOW_FILE in json.dumps(carrying[0]["body"]), f"{where}\nthe tool call was lost"
    assert carrying[0]["ts"] > sent["at"]
    assert result["finalText"].endswith(f"SAW:{WORD}"), where
    assert (case.workdir / m.SLOW_FILE).exists(), f"{where}\nthe tool was cut short"
    assert case.leftover == [], where
    assert processes_in(case.workdir) == [], where
    (requested,) = case.of_type("steer_requested")
    # Written into the turn, it is sent; delivered once the agent acknowledged it.
    (written,) = case.of_type("steer_sent")
    (delivered,) = case.of_type("steer_delivered")
    assert ts(requested) <= ts(written) <= ts(delivered), where
    report(
        case,
        f"live steer: sent {ts(written) - ts(requested):.3f} s and acknowledged (delivered) "
        f"{ts(delivered) - ts(requested):.3f} s after it was requested "
        f"(the steer command took {sent['took']:.1f} s)",
    )


@pytest.mark.parametrize(("cli", "version"), CASES, ids=IDS)
def test_a_stop_hook_block_is_the_next_prompt_on_the_same_process(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    check_installed(cli, version)
    case = run_case(cli, "steer", tmp_path, mock, version=version, mode=MODES[cli])
    result = case.result
    where = f"{cli} {version} {MODES[cli][1]}: stderr:\n{case.stderr[-3000:]}"
    jsonschema.validate(result, SCHEMA)
    assert (result["outcome"], case.returncode) == ("ok", 0), where
    assert result["finalText"] == m.STEERED_ANSWER, where
    assert result["steerCount"] == 1, where
    assert len(result["attempts"]) == 2, where
    assert len({attempt["pid"] for attempt in result["attempts"]}) == 1, where
    one_process(case, where)
    carrying = [r for r in case.requests if m.STEER_REASON in json.dumps(r["body"])]
    assert carrying, f"{where}\nno model request carried the hook's reason"
    assert "[scenario:steer:" in json.dumps(carrying[0]["body"]), f"{where}\nthe history was lost"
    assert case.leftover == [], where


@pytest.mark.parametrize(("cli", "version"), CASES, ids=IDS)
def test_an_abort_during_a_tool_ends_the_agent_and_its_tool(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    check_installed(cli, version)
    sent: dict[str, Any] = {}

    def abort(run_dir: Path, nonce: str) -> None:
        assert wait_until(lambda: tool_called(mock, nonce), TOOL_WAIT), "no shell call"
        time.sleep(1.5)  # the 20 s command is running
        sent["before"] = processes_in(run_dir.parent / "work")
        sent["proc"] = wrapper_cli("abort", str(run_dir), "--reason", "tier test")

    case = run_case(cli, "long", tmp_path, mock, version=version, during=abort, mode=MODES[cli])
    result = case.result
    where = f"{cli} {version} {MODES[cli][1]}: stderr:\n{case.stderr[-3000:]}"
    assert sent["proc"].returncode == 0, f"{where}\nabort: {sent['proc'].stdout}"
    assert any("sleep" in p for p in sent["before"]), f"{where}\nthe tool was not running"
    jsonschema.validate(result, SCHEMA)
    assert result["outcome"] == "aborted", where
    assert case.returncode == 143, where
    protocol = (case.run_dir / "protocol.jsonl").read_text().splitlines()
    messages = [json.loads(line)["msg"] for line in protocol]
    kinds = [message.get("type") or message.get("method") for message in messages]
    own = {"pi": "abort", "claude": "control_request", "codex": "turn/interrupt"}[cli]
    assert own in kinds, f"{where}\nthe agent's own abort was not sent"
    assert case.leftover == [], where
    assert processes_in(case.workdir) == [], where
    assert not (case.workdir / m.LONG_FILE).exists(), where


@pytest.mark.parametrize("version", cli_versions(CLIS["codex"]))
def test_an_approval_codex_asks_for_is_declined_with_a_warning(
    version: str, mock: Mock, tmp_path: Path
) -> None:
    check_installed("codex", version)
    json_words, live_words = MODES["codex"]
    asking = [*live_words[:2], "approval_policy=on-request", "-c", "sandbox_mode=read-only"]
    case = run_case("codex", "escalate", tmp_path, mock, version=version, mode=(json_words, asking))
    result = case.result
    where = f"codex {version} {asking}: stderr:\n{case.stderr[-3000:]}"
    jsonschema.validate(result, SCHEMA)
    assert (result["outcome"], case.returncode) == ("ok", 0), where
    declined = [w for w in result["warnings"] if "declined" in w["message"]]
    assert declined, f"{where}\nno approval was declined: {result['warnings']}"
    assert "requestApproval" in declined[0]["message"], where
    protocol = [json.loads(line)["msg"] for line in (case.run_dir / "protocol.jsonl").open()]
    answers = [message for message in protocol if "result" in message]
    assert answers == [{"id": answers[0]["id"], "result": {"decision": "decline"}}], where
    assert not (case.workdir / m.TOOL_FILE).exists(), f"{where}\nthe declined command ran"
    one_process(case, where)
    assert case.leftover == [], where
    report(case, f"approval declined: {declined[0]['message']}")


#: A pi extension with one command, which pi refuses to queue as a steer; run
#: as a prompt, it hands its arguments to the model as a user message.
PROBE_EXTENSION = """
export default function (pi) {
  pi.registerCommand("tier-probe", {
    description: "the tier's probe command",
    handler: async (args) => { pi.sendUserMessage(args); },
  });
}
"""


@pytest.mark.parametrize("version", cli_versions(CLIS["pi"]))
def test_a_steer_pi_refuses_is_not_delivered_but_is_the_next_prompt(
    version: str, mock: Mock, tmp_path: Path
) -> None:
    check_installed("pi", version)
    extension = tmp_path / "probe.ts"
    extension.write_text(PROBE_EXTENSION)
    sent: dict[str, Any] = {}

    def steer(run_dir: Path, nonce: str) -> None:
        assert wait_until(lambda: tool_called(mock, nonce), TOOL_WAIT), "no shell call"
        time.sleep(1.0)  # the 3 s command is running
        sent["at"] = time.time()
        sent["proc"] = wrapper_cli(
            "steer", str(run_dir), "--text", f"/tier-probe {STEER_TEXT}", "--wait",
            str(STEER_WAIT), "--json",
        )  # fmt: skip

    case = run_case(
        "pi",
        "slow",
        tmp_path,
        mock,
        version=version,
        agent_args=["--extension", str(extension)],
        during=steer,
        mode=MODES["pi"],
    )
    result = case.result
    where = f"pi {version} --mode rpc: stderr:\n{case.stderr[-3000:]}"
    steered = sent["proc"]
    assert steered.returncode == 0, f"{where}\nsteer: {steered.stdout} {steered.stderr}"
    receipt = json.loads(steered.stdout)
    # pi refused it in the running turn: the receipt is the next prompt's.
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "live", 2), where
    said = [json.loads(line) for line in (case.run_dir / "stdout.log").open()]
    refusals = [
        line for line in said if line.get("type") == "response" and line.get("command") == "steer"
    ]
    assert [r["success"] for r in refusals] == [False], f"{where}\n{refusals}"
    jsonschema.validate(result, SCHEMA)
    assert (result["outcome"], case.returncode) == ("ok", 0), where
    one_process(case, where)
    (record,) = result["externalSteers"]
    assert (record["outcome"], record["attempt"]) == ("delivered", 2), where
    assert "steer_refused_live" in [w["code"] for w in result["warnings"]], where
    carrying = [r for r in case.requests if f"[inject:{WORD}]" in json.dumps(r["body"])]
    assert carrying, f"{where}\nno model request carried the steer"
    assert carrying[0]["ts"] > sent["at"]
    assert m.SLOW_FILE in json.dumps(carrying[0]["body"]), f"{where}\nthe history was lost"
    report(case, f"steer refused live ({refusals[0].get('error')}), delivered as the next prompt")
