"""Cost and caps against the real CLIs and the mock model server: a CLI
that reports usage with each message (pi) stopped at ``--max-tokens``
within one report, and Codex's cost computed from its token counts and the
model its ``-m`` names. Runs only when ``AGENT_WRAPPER_CLIS`` names the
install cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real.clis import CLIS
from tests.real.harness import Mock, cache_dir, cli_version, mock_server_running, run_case
from tests.real.mock_server import USAGE
from wrapper.files.prices import table_version

#: The tokens the mock reports for each model request (input, output).
PER_REQUEST = USAGE["input"] + USAGE["output"]


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mock]:
    with mock_server_running(tmp_path_factory.mktemp("mock") / "requests.jsonl") as server:
        yield server


def installed(cli: str) -> None:
    exe = CLIS[cli].executable(cache_dir(), cli_version(CLIS[cli]))
    if not exe.exists():
        pytest.fail(f"{cli} is not installed at {exe}: run scripts/conformance")


def test_pi_is_stopped_at_max_tokens_within_one_usage_report(mock: Mock, tmp_path: Path) -> None:
    installed("pi")
    # the tool scenario asks the model twice: the first answer reaches the cap
    case = run_case("pi", "tool", tmp_path, mock, options=["--max-tokens", str(PER_REQUEST)])
    result = case.result
    assert case.returncode == 1, case.stderr
    assert result["error"]["kind"] == "budget_exceeded"
    assert f"--max-tokens cap of {PER_REQUEST}" in result["error"]["message"]
    # the stop goes out on the report that reached the cap; the mock answers
    # at once, so pi may write one more before the signal ends it
    reports = [e["seq"] for e in case.of_type("assistant_message") if e.get("usage")]
    stops = [e["seq"] for e in case.of_type("signal_sent")]
    assert stops
    assert reports[0] < stops[0]
    assert len([seq for seq in reports if seq > stops[0]]) <= 1
    assert result["cost"]["capEnforced"] == "message"
    assert case.leftover == []


@pytest.mark.skipif(table_version() is None, reason="the cost extra is not installed")
def test_codex_cost_is_computed_from_its_tokens_and_its_model_option(
    mock: Mock, tmp_path: Path
) -> None:
    installed("codex")
    case = run_case(
        "codex",
        "plain",
        tmp_path,
        mock,
        agent_args=["-m", "gpt-5-codex"],
    )
    assert case.returncode == 0, case.stderr
    cost = case.result["cost"]
    assert case.result["usage"]["costUsd"] is None
    assert cost["source"] == "computed"
    assert cost["models"][0]["requested"] == "gpt-5-codex"
    assert cost["models"][0]["matched"] == "gpt-5"
    usage = case.result["usage"]
    fresh, cached = usage["input"], usage["cacheRead"] or 0
    expected = (fresh * 1.25 + cached * 0.125 + usage["output"] * 10) / 1e6
    assert cost["usd"] == pytest.approx(expected)
