"""Each agent gets its own default grace: long enough for the real CLI's own
shutdown after its final event (figures in docs/dialects/index.md), so that an agent
exiting by itself is never signalled, while a pi that says it is settled and
lingers is still ended at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HANG_LIMIT, ROOT, agent_env, read_result, write_scenario
from tests.dialect_support import LAUNCHERS
from tests.test_dialects_e2e import END, final, run_in
from wrapper.dialects import DIALECTS
from wrapper.dialects.claude import QWEN_GRACE

pytestmark = pytest.mark.usefixtures("no_leaks")

#: dialect -> (grace, settle grace) a user gets without the flags, pinned
#: for the agents whose figures were measured on the real CLI.
EXPECTED_DEFAULTS = {
    "pi": (3.0, 0.2),
    "claude": (2.0, 2.0),
    "codex": (2.0, 2.0),
    "gemini": (30.0, 30.0),
    "opencode": (5.0, 5.0),
    "amp": (2.0, 2.0),
    "cursor": (2.0, 2.0),
}


@pytest.mark.parametrize("dialect", sorted(EXPECTED_DEFAULTS))
def test_the_measured_defaults_stay(dialect: str) -> None:
    cls = DIALECTS[dialect]
    assert (cls.default_grace, cls.default_settle_grace) == EXPECTED_DEFAULTS[dialect]


@pytest.mark.parametrize("dialect", sorted(LAUNCHERS))
def test_run_uses_the_agents_default_grace(dialect: str, tmp_path: Path) -> None:
    code, result, _ = run_in(dialect, tmp_path, [final("Done."), *END])
    assert code == 0, result["error"]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    cls = DIALECTS[dialect]
    assert (config["grace"], config["settleGrace"]) == (
        cls.default_grace,
        cls.default_settle_grace,
    )
    assert result["signalsSent"] == []


def test_flags_override_the_agents_defaults(tmp_path: Path) -> None:
    steps = [final("Done."), *END, {"linger": {"seconds": 60}}]
    options = ("--grace", "0.5", "--settle-grace", "0.3")
    code, result, events = run_in("gemini", tmp_path, steps, options=options)
    assert code == 0, result["error"]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["grace"], config["settleGrace"]) == (0.5, 0.3)
    assert [e["seconds"] for e in events if e["type"] == "grace_started"][-1] == 0.3
    assert result["forcedCleanup"] is True


def test_settled_pi_that_lingers_is_ended_quickly(tmp_path: Path) -> None:
    steps = [final("Done."), *END, {"linger": {"seconds": 60}}]
    code, result, events = run_in("pi", tmp_path, steps)
    assert code == 0, result["error"]
    assert [e["seconds"] for e in events if e["type"] == "grace_started"][-1] == 0.2
    assert result["forcedCleanup"] is True
    assert result["signalsSent"][0]["signal"] == "SIGTERM"


def test_qwen_code_in_claudes_format_gets_its_own_grace(tmp_path: Path) -> None:
    # Qwen Code writes Claude Code's stream but takes longer to exit after
    # its result line: the fake, as `qwen`, exits 3 s after it.
    agent = tmp_path / "bin" / "qwen"
    agent.parent.mkdir()
    agent.symlink_to(ROOT / "fixtures" / "fake_agent" / "fake-agent")
    scenario = write_scenario(tmp_path, [final("Fixed it."), *END, {"sleep": 3}])
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "wrapper", "run", "--output", "quiet"),
            *("--run-dir", str(run_dir), "--task", "Fix the parser", "--", str(agent)),
            *("--dialect", "claude", "-o", "stream-json", "--scenario", str(scenario)),
        ],
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = read_result(run_dir / "result.json")
    config = json.loads((run_dir / "config.json").read_text())
    assert (result["dialect"], result["agent"]) == ("claude", "qwen")
    assert (config["grace"], config["settleGrace"]) == (QWEN_GRACE, QWEN_GRACE)
    assert result["signalsSent"] == [], "an agent exiting by itself is not signalled"
    assert DIALECTS["claude"].graces(["claude", "-p"]) == (2.0, 2.0)
