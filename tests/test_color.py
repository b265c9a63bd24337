"""Colour in the live views (``run`` and ``batch``): on a terminal unless
``NO_COLOR`` is set, and as ``--color auto|always|never`` says."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAKE_PI, HANG_LIMIT, agent_env, write_scenario
from wrapper.core.config import ColorMode, use_color

pytestmark = pytest.mark.usefixtures("no_leaks")

#: A colour or style (SGR) sequence.
SGR = re.compile(rb"\x1b\[[0-9;]*m")
STEPS: list[dict[str, Any]] = [
    {"assistant": {"text": "Done.", "stopReason": "stop"}},
    {"agent_end": {"willRetry": False}},
    {"agent_settled": {}},
]


@pytest.mark.parametrize(
    ("mode", "no_color", "terminal", "expected"),
    [
        (ColorMode.AUTO, None, True, True),
        (ColorMode.AUTO, None, False, False),
        (ColorMode.AUTO, "1", True, False),
        (ColorMode.AUTO, "", True, True),
        (ColorMode.ALWAYS, "1", False, True),
        (ColorMode.NEVER, None, True, False),
    ],
)
def test_the_flag_beats_no_color_which_beats_the_terminal(
    mode: ColorMode, no_color: str | None, terminal: bool, expected: bool
) -> None:
    environ = {} if no_color is None else {"NO_COLOR": no_color}
    assert use_color(mode, environ, terminal) is expected


def shown(argv: list[str], env: dict[str, str], *, terminal: bool, cwd: Path) -> bytes:
    """What ``argv`` writes on its stdout, a terminal or a pipe."""
    if not terminal:
        done = subprocess.run(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=HANG_LIMIT,
            check=False,
        )
        assert done.returncode == 0
        return done.stdout
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.DEVNULL
    )
    os.close(follower)
    out = b""
    try:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal's other side is closed
                break
            if not data:
                break
            out += data
        assert proc.wait(timeout=HANG_LIMIT) == 0
    finally:
        os.close(leader)
        proc.kill()
        proc.wait()
    return out


def run_argv(tmp_path: Path, *options: str) -> list[str]:
    scenario = write_scenario(tmp_path, STEPS)
    agent = [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)]
    run_dir = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    head = [*WRAPPER, "run", "--output", "pretty", "--run-dir", str(run_dir), *options]
    return [*head, "--task", "hi", "--", *agent]


def batch_argv(tmp_path: Path, *options: str) -> list[str]:
    scenario = write_scenario(tmp_path, STEPS)
    spec = tmp_path / "spec.jsonl"
    line = {"command": [str(FAKE_PI), "--mode", "json", "-p", "--scenario", str(scenario)]}
    spec.write_text(json.dumps({**line, "task": "hi", "label": "one"}) + "\n")
    runs = tmp_path / f"batch-{len(list(tmp_path.glob('batch-*')))}"
    return [*WRAPPER, "batch", str(spec), "--output", "pretty", "--runs-dir", str(runs), *options]


WRAPPER = [sys.executable, "-m", "wrapper"]


@pytest.mark.parametrize("view", [run_argv, batch_argv])
@pytest.mark.parametrize(
    ("options", "no_color", "terminal", "coloured"),
    [
        ((), False, True, True),
        ((), True, True, False),
        (("--color", "never"), False, True, False),
        ((), False, False, False),
        (("--color", "always"), True, False, True),
    ],
)
def test_a_live_view_is_coloured_as_asked(
    tmp_path: Path,
    view: Any,
    options: tuple[str, ...],
    no_color: bool,
    terminal: bool,
    coloured: bool,
) -> None:
    env = agent_env(tmp_path)
    env.pop("NO_COLOR", None)
    if no_color:
        env["NO_COLOR"] = "1"
    out = shown(view(tmp_path, *options), env, terminal=terminal, cwd=tmp_path)
    assert b"hi" in out or b"one" in out, out
    assert bool(SGR.search(out)) is coloured, out
