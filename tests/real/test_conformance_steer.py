"""Steering and aborting the real CLIs from outside (``agent-wrapper steer``
and ``abort`` on a running run), against the mock model server, asserted
as a user sees it: the steer reaches the model in the resumed session,
with the history before it; an abort ends the run, its tool included.
Runs only when ``AGENT_WRAPPER_CLIS`` names the install cache; see
tests/real/README.md.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest

from tests.real import mock_server as m
from tests.real.clis import CLIS
from tests.real.harness import (
    ROOT,
    Case,
    Mock,
    cache_dir,
    cli_versions,
    mock_server_running,
    run_case,
)

SCHEMA = json.loads((ROOT / "wrapper/schemas/result.schema.json").read_text())

#: The CLIs whose JSON mode the wrapper resumes with a steer.
STEER_CLIS = ("pi", "claude", "codex", "opencode")
CASES = [(cli, version) for cli in STEER_CLIS for version in cli_versions(CLIS[cli])]
IDS = [f"{c}-{v}" for c, v in CASES]

#: The word the steer carries; the mock's answer to a request holding it ends SAW:<word>.
WORD = "OUTSIDE"
STEER_TEXT = f"Also say where you ran it. [inject:{WORD}]"
#: Waits of the test itself, only there to catch a hang.
TOOL_WAIT = 60.0
STEER_WAIT = 90.0


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mock]:
    with mock_server_running(tmp_path_factory.mktemp("mock") / "requests.jsonl") as server:
        yield server


def wait_until(predicate: Callable[[], bool], limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def tool_called(mock: Mock, nonce: str) -> bool:
    """Whether the mock has answered this case with its shell call."""
    return any((r.get("reply") or {}).get("tool") for r in mock.requests(nonce))


def wrapper_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wrapper", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        timeout=STEER_WAIT + 30,
        check=False,
    )


def processes_in(workdir: Path) -> list[str]:
    """Processes whose working directory is the case's (the agent's tool,
    whatever environment the CLI gave it)."""
    found = []
    for proc in psutil.process_iter(["pid", "name"]):
        with contextlib.suppress(psutil.Error):
            if Path(proc.cwd()) == workdir:
                found.append(f"{proc.info['pid']} {proc.info['name']} {proc.cmdline()}")
    return found


def ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def tool_results(body: Any) -> list[str]:
    """The tool results a model request carries, as the CLI wrote them."""
    found: list[str] = []
    if isinstance(body, dict):
        if (
            body.get("type") in ("tool_result", "function_call_output")
            or body.get("role") == "tool"
        ):
            found.append(json.dumps(body.get("content", body.get("output"))))
        for value in body.values():
            found += tool_results(value)
    elif isinstance(body, list):
        for item in body:
            found += tool_results(item)
    return found


def exit_after_sigint(case: Case) -> str:
    """How the first attempt ended after the steer's SIGINT, and how soon."""
    sigint = next(e for e in case.of_type("signal_sent") if e["signal"] == "SIGINT")
    exited = next(e for e in case.of_type("exited") if e["attempt"] == 1)
    how = exited["exitSignal"] or f"exit {exited['exitCode']}"
    return f"{how} {ts(exited) - ts(sigint):.2f} s after SIGINT"


def check_installed(cli: str, version: str) -> None:
    exe = CLIS[cli].executable(cache_dir(), version)
    if not exe.exists():
        pytest.fail(f"{cli} {version} is not installed at {exe}: run scripts/conformance")


def report(case: Case, what: str) -> None:
    """A measured fact, printed for tests/real/README.md (pytest -s)."""
    sys.stdout.write(f"\n[{case.cli}-{case.version}] {what}\n")


@pytest.mark.parametrize(("cli", "version"), CASES, ids=IDS)
def test_a_steer_during_a_tool_reaches_the_model_by_resume(
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

    case = run_case(cli, "slow", tmp_path, mock, version=version, during=steer)
    result = case.result
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    steered = sent["proc"]
    assert steered.returncode == 0, f"{where}\nsteer: {steered.stdout} {steered.stderr}"
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "resume", 2), (
        where
    )
    jsonschema.validate(result, SCHEMA)
    assert (result["outcome"], case.returncode) == ("ok", 0), where
    assert len(result["attempts"]) == 2, where
    assert result["externalSteerCount"] == 1, where
    (record,) = result["externalSteers"]
    assert (record["outcome"], record["how"], record["attempt"]) == ("delivered", "resume", 2), (
        where
    )
    (delivered,) = case.of_type("steer_delivered")
    assert delivered["how"] == "resume", where
    # The model request that carried the steer: the same conversation (the
    # first task's marker, which is how the mock files it under this case,
    # and the shell call the model made before the steer), and the steer.
    carrying = [r for r in case.requests if f"[inject:{WORD}]" in json.dumps(r["body"])]
    assert carrying, f"{where}\nno model request carried the steer"
    assert m.SLOW_FILE in json.dumps(carrying[0]["body"]), f"{where}\nthe tool call was lost"
    assert carrying[0]["ts"] > sent["at"]
    assert result["finalText"].endswith(f"SAW:{WORD}"), where
    assert case.leftover == [], where
    assert processes_in(case.workdir) == [], where
    (requested,) = case.of_type("steer_requested")
    signals = [e["signal"] for e in case.of_type("signal_sent")]
    report(
        case,
        f"steer: delivered {ts(delivered) - ts(requested):.1f} s after it was requested "
        f"(the steer command took {sent['took']:.1f} s); first attempt "
        f"{exit_after_sigint(case)}; signals {signals}; the call's result in the resumed "
        f"request {tool_results(carrying[0]['body'])}",
    )


@pytest.mark.parametrize(("cli", "version"), CASES, ids=IDS)
def test_an_abort_during_a_tool_ends_the_run_and_its_tool(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    check_installed(cli, version)
    sent: dict[str, Any] = {}

    def abort(run_dir: Path, nonce: str) -> None:
        assert wait_until(lambda: tool_called(mock, nonce), TOOL_WAIT), "no shell call"
        time.sleep(1.5)  # the 20 s command is running
        sent["before"] = processes_in(run_dir.parent / "work")
        sent["at"] = time.time()
        sent["proc"] = wrapper_cli("abort", str(run_dir), "--reason", "tier test")
        sent["took"] = time.time() - sent["at"]

    case = run_case(cli, "long", tmp_path, mock, version=version, during=abort)
    result = case.result
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    aborted = sent["proc"]
    assert aborted.returncode == 0, f"{where}\nabort: {aborted.stdout} {aborted.stderr}"
    assert any("sleep" in p for p in sent["before"]), f"{where}\nthe tool was not running"
    jsonschema.validate(result, SCHEMA)
    assert result["outcome"] == "aborted", where
    assert (result["error"] or {}).get("kind") == "abort_requested", where
    assert case.returncode == 143 == result["exitStatus"], where
    assert case.leftover == [], where
    assert processes_in(case.workdir) == [], where
    assert not (case.workdir / m.LONG_FILE).exists(), where
    assert case.elapsed < m.LONG_SECONDS + 10, where
    signals = [e["signal"] for e in case.of_type("signal_sent")]
    report(
        case,
        f"abort: run ended {sent['took']:.1f} s after the abort; signals {signals}; "
        f"attempt exit {result['attempts'][-1].get('exitCode')}",
    )


def alive(pids: list[int]) -> list[int]:
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                found.append(pid)
    return found


@pytest.mark.parametrize(("cli", "version"), CASES, ids=IDS)
def test_a_steer_interrupts_a_tool_past_the_steer_timeout(
    cli: str, version: str, mock: Mock, tmp_path: Path
) -> None:
    check_installed(cli, version)
    sent: dict[str, Any] = {}

    def steer(run_dir: Path, nonce: str) -> None:
        assert wait_until(lambda: tool_called(mock, nonce), TOOL_WAIT), "no shell call"
        time.sleep(1.5)  # the 20 s command is running
        work = run_dir.parent / "work"
        sent["tool"] = [int(p.split()[0]) for p in processes_in(work) if "sleep" in p]
        sent["at"] = time.time()
        sent["proc"] = wrapper_cli(
            "steer", str(run_dir), "--text", STEER_TEXT, "--wait", str(STEER_WAIT), "--json"
        )
        sent["took"] = time.time() - sent["at"]
        sent["left"] = alive(sent["tool"])

    case = run_case(
        cli,
        "long",
        tmp_path,
        mock,
        version=version,
        during=steer,
        options=["--steer-timeout", "1"],
    )
    result = case.result
    where = f"{cli} {version}: stderr:\n{case.stderr[-3000:]}"
    steered = sent["proc"]
    assert steered.returncode == 0, f"{where}\nsteer: {steered.stdout} {steered.stderr}"
    assert sent["tool"], f"{where}\nthe tool was not running"
    assert sent["left"] == [], f"{where}\nthe interrupted tool outlived its attempt"
    receipt = json.loads(steered.stdout)
    assert (receipt["state"], receipt["how"], receipt["attempt"]) == ("delivered", "resume", 2), (
        where
    )
    assert (result["outcome"], case.returncode) == ("ok", 0), where
    carrying = [r for r in case.requests if f"[inject:{WORD}]" in json.dumps(r["body"])]
    assert carrying, f"{where}\nno model request carried the steer"
    body = json.dumps(carrying[0]["body"])
    # The wrapper names the call it cut short after the steer's text when it
    # saw the call start (opencode says nothing of a tool until it ended).
    cut = result["attempts"][0]["signalsSent"][0]["reason"]
    note = "was interrupted to deliver this; it did not finish.]"
    assert (note in body) == ("--steer-timeout" in cut), f"{where}\n{cut}"
    assert m.LONG_FILE in body, f"{where}\nthe tool call was lost"
    if not tool_results(carrying[0]["body"]):
        # Claude Code 2.1.197's own race, now and then on a loaded machine:
        # exiting on SIGINT before the call's result is in its session file,
        # it is resumed without the call; the wrapper's note is what says it.
        assert (cli, version) == ("claude", "2.1.197"), f"{where}\nthe tool call was lost"
        assert note in body, f"{where}\nthe lost call is not named"
    assert result["finalText"].endswith(f"SAW:{WORD}"), where
    assert case.leftover == [], where
    assert processes_in(case.workdir) == [], where
    first = result["attempts"][0]
    report(
        case,
        f"mid-tool steer: delivered {sent['took']:.1f} s after it was sent; first attempt "
        f"{exit_after_sigint(case)}, signals {[s['signal'] for s in first['signalsSent']]}; "
        f"tool alive after delivery {sent['left']}; the interrupted call's result in the "
        f"resumed request {tool_results(carrying[0]['body'])}; run took {case.elapsed:.1f} s",
    )
