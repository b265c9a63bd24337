"""The real-CLI conformance tier: every scenario of every CLI through
``agent-wrapper run``, against the mock model server, asserted as a user
sees it. Runs only when ``AGENT_WRAPPER_CLIS`` names the install cache
(``scripts/conformance`` sets it up); see tests/real/README.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from tests.real import mock_server as m
from tests.real.clis import CLIS
from tests.real.expectations import EXPECTED, SCENARIOS, expected
from tests.real.harness import Mock, cache_dir, cli_versions, mock_server_running, run_case

SCHEMA = json.loads((Path(__file__).parents[2] / "wrapper/schemas/result.schema.json").read_text())

#: Every scenario of every pinned version of every CLI in the table.
CASES = [
    (cli, version, scenario)
    for cli in EXPECTED
    for version in cli_versions(CLIS[cli])
    for scenario in SCENARIOS
]


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mock]:
    with mock_server_running(tmp_path_factory.mktemp("mock") / "requests.jsonl") as server:
        yield server


@pytest.mark.parametrize(
    ("cli", "version", "scenario"), CASES, ids=[f"{c}-{v}-{s}" for c, v, s in CASES]
)
def test_scenario(cli: str, version: str, scenario: str, mock: Mock, tmp_path: Path) -> None:
    exe = CLIS[cli].executable(cache_dir(), version)
    if not exe.exists():
        pytest.fail(f"{cli} {version} is not installed at {exe}: run scripts/conformance")
    expect = expected(cli, version)[scenario]
    case = run_case(cli, scenario, tmp_path, mock, version=version)
    result = case.result
    where = f"{cli} {case.version} {scenario}: stderr:\n{case.stderr[-3000:]}"
    jsonschema.validate(result, SCHEMA)
    assert case.requests, f"{where}\nthe CLI never reached the mock"
    assert (result["outcome"], result["stopReason"], result["rawStopReason"]) == (
        expect.outcome,
        expect.stop,
        expect.raw,
    ), where
    assert case.returncode == expect.exit == result["exitStatus"], where
    if expect.final is not None:
        assert result["finalText"] == expect.final, where
    assert result["steerCount"] == expect.steers, where
    assert tuple(result["toolsUsed"]) == expect.tools, where
    assert case.files() == expect.files, where
    assert list(case.stale_pwd.iterdir()) == [], f"{where}\nthe agent wrote where PWD pointed"
    assert case.leftover == [], where
    if not expect.signals:
        sent = [a["signalsSent"] for a in result["attempts"]]
        assert all(s == [] for s in sent), f"{where}\nsignals sent to an agent that exited: {sent}"
        assert result["forcedCleanup"] is False, where
    if scenario.startswith("steer"):
        resumed = [r for r in case.requests if r.get("steered")]
        assert resumed, f"{where}\nno request carried the hook's reason"
        # The mock answers LOST-CONTEXT when the resumed conversation lacks the
        # first answer; finalText above already caught that, this says why.
        assert all(r["reply"]["text"] != m.LOST_CONTEXT for r in resumed), where
