"""A real batch on the fake agent in which supervision does everything the
HTML report marks: a steer from outside (``agent-wrapper steer`` while a
tool runs), an abort (``agent-wrapper abort``), a lingering agent that
ignores SIGTERM and needs SIGKILL, an error retry (``stop.retryOnError``: a
new attempt), a crash mid-tool and a label too long for a narrow page."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

from tests.conftest import FAKE_PI, HANG_LIMIT, ROOT, agent_env, wait_until

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]
#: Long enough that only a steer or an abort ends it.
LONG_TOOL = {"tool": {"name": "bash", "duration": 40, "result": "built"}}
LONG_LABEL = "a-label-far-too-long-for-the-narrow-page-it-is-shown-on"
STEER_TEXT = "Stop building, fix the parser"


def answer(text: str) -> list[dict[str, Any]]:
    return [{"assistant": {"text": text, "stopReason": "stop"}}, *END]


def _scenario(folder: Path, name: str, steps: list[Any], resumes: list[Any] | None = None) -> Path:
    path = folder / f"{name}.json"
    body: dict[str, Any] = {"version": 1, "steps": steps}
    if resumes:
        body["resumes"] = resumes
    path.write_text(json.dumps(body))
    return path


def run_batch(work: Path) -> Path:
    """Runs the batch in ``work``, steering and aborting from outside as a
    person would; returns its runs directory."""
    work.mkdir(parents=True, exist_ok=True)
    retry = work / "retry-settings.json"
    retry.write_text(json.dumps({"stop": {"retryOnError": True, "maxRetries": 1}}))
    lines: list[tuple[dict[str, Any], Path]] = [
        (
            {"label": "steered-from-outside", "steerTimeout": 1},
            _scenario(work, "outside", [LONG_TOOL, *answer("Built.")], [answer("Fixed it.")]),
        ),
        ({"label": "aborted"}, _scenario(work, "abort", [LONG_TOOL, *answer("Never.")])),
        (
            {"label": "lingering", "grace": 0.3, "killAfter": 0.5},
            ROOT / "fixtures" / "fake_agent" / "scenarios" / "ignore_sigterm.json",
        ),
        (
            {"label": "retried", "settings": [str(retry)]},
            _scenario(
                work, "retry", answer("The build failed with an exception."), [answer("Done.")]
            ),
        ),
        (
            {"label": "crashed"},
            ROOT / "fixtures" / "fake_agent" / "scenarios" / "crash_mid_tool.json",
        ),
        ({"label": LONG_LABEL}, _scenario(work, "quick", answer("Quick."))),
    ]
    spec = work / "spec.jsonl"
    spec.write_text(
        "".join(
            json.dumps(
                {
                    **line,
                    "task": "Do it",
                    "command": [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(path)],
                }
            )
            + "\n"
            for line, path in lines
        )
    )
    runs = work / "runs"
    env = agent_env(work, HOME=str(work))
    argv = [sys.executable, "-m", "wrapper", "batch", str(spec), "--jobs", str(len(lines))]
    batch = subprocess.Popen(
        [*argv, "--runs-dir", str(runs), "--output", "quiet"],
        env=env,
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        for label in ("steered-from-outside", "aborted"):
            run_dir = runs / label
            assert wait_until(partial(_tool_running, run_dir)), label
        for args in (
            ["steer", str(runs / "steered-from-outside"), "--text", STEER_TEXT],
            ["abort", str(runs / "aborted"), "--reason", "wrong direction"],
        ):
            done = subprocess.run(
                [sys.executable, "-m", "wrapper", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=HANG_LIMIT,
                check=False,
            )
            assert done.returncode == 0, done.stderr
        _, stderr = batch.communicate(timeout=HANG_LIMIT)
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()
    # Two runs do not pass: the abort and the crash.
    assert batch.returncode == 1, stderr
    return runs


def _tool_running(run_dir: Path) -> bool:
    try:
        status = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return False
    return status.get("currentTool") is not None and status.get("control") is not None
