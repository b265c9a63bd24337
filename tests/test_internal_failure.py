"""A bug in the wrapper itself still ends in a cleaned-up child and an honest result.json."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAKE_PI, agent_env, read_result, write_scenario
from wrapper.core.config import OutputMode, RunConfig
from wrapper.core.events import Event
from wrapper.dialects.pi import PiDialect
from wrapper.fleet.owner import execute


class ExplodingDialect(PiDialect):
    def parse(self, line: bytes) -> list[Event]:
        if b"message_end" in line:
            raise RuntimeError("simulated bug in a dialect")
        return super().parse(line)


@pytest.mark.usefixtures("no_leaks")
async def test_a_crash_inside_the_wrapper_still_writes_result_and_reaps_the_child(
    tmp_path: Path,
) -> None:
    steps: list[dict[str, Any]] = [
        {"spawn": {"seconds": 60}},
        {"assistant": {"text": "Done.", "stopReason": "stop"}},
        {"linger": {"seconds": 60}},
    ]
    scenario = write_scenario(tmp_path, steps)
    config = RunConfig(
        command=(str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)),
        task="hi",
        run_id="crash-test",
        run_dir=tmp_path / "run",
        result_path=tmp_path / "run" / "result.json",
        cwd=tmp_path,
        output=OutputMode.QUIET,
    )
    env = agent_env(tmp_path)
    env["PATH"] = os.environ["PATH"]
    dialect = ExplodingDialect()
    launch = dialect.launch(config.command, config.task, config.run_dir)
    status = await execute(config, dialect, launch, env)
    assert status == 1
    result = read_result(tmp_path / "run" / "result.json")
    assert result["outcome"] == "error"
    assert result["error"]["kind"] == "internal"
    assert "simulated bug in a dialect" in result["error"]["message"]
    assert result["exitSignal"] == "SIGKILL"
    assert result["pid"] is not None
