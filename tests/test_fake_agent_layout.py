"""The fake agent as a package: its launchers, and what a renderer can rely on.

The stream each format prints is held by test_fake_agent.py; here are the
pieces a new format is added with.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from wrapper.registry import AGENTS, detect

ROOT = Path(__file__).resolve().parent.parent
FAKE_DIR = ROOT / "fixtures" / "fake_agent"
SHARED_LAUNCHER = FAKE_DIR / "fake-agent"


def launchers() -> dict[str, str]:
    """Launcher name -> the format it plays, for every launcher in the folder."""
    found = {}
    for path in FAKE_DIR.iterdir():
        if path.is_symlink():
            assert os.readlink(path) == SHARED_LAUNCHER.name, path
            agent = detect([path.name])
            assert agent is not None, f"launcher {path.name} names no format"
            found[path.name] = agent.name
    return found


def test_every_format_has_a_launcher_and_every_launcher_a_format() -> None:
    assert sorted(set(launchers().values())) == sorted(agent.name for agent in AGENTS)


def run_launcher(path: Path, tmp_path: Path, *args: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT_")}
    scenario = tmp_path / "s.json"
    scenario.write_text('{"version": 1, "steps": []}')
    proc = subprocess.run(
        [str(path), "--scenario", str(scenario), *args, "x"],
        check=True,
        cwd=tmp_path,
        env=environ | {"FAKE_AGENT_HOME": str(tmp_path)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    return proc.stdout.decode()


def test_a_launcher_linked_under_another_name_keeps_its_format(tmp_path: Path) -> None:
    link = tmp_path / "bin" / "my-agent"
    link.parent.mkdir()
    link.symlink_to(FAKE_DIR / "codex")
    assert '"type":"thread.started"' in run_launcher(link, tmp_path)


def test_the_shared_launcher_under_its_own_name_is_pi(tmp_path: Path) -> None:
    assert '"type":"session"' in run_launcher(SHARED_LAUNCHER, tmp_path)
    gemini = run_launcher(SHARED_LAUNCHER, tmp_path, "--dialect", "gemini")
    assert '"type":"init"' in gemini
