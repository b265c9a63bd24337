"""The fake agent as a package: its launchers, and what a renderer can rely on.

The stream each format prints is held by test_fake_agent.py; here are the
pieces a new format is added with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from wrapper.core.registry import AGENTS, detect
from wrapper.dialects import DIALECTS

ROOT = Path(__file__).resolve().parent.parent
FAKE_DIR = ROOT / "fixtures" / "fake_agent"
SHARED_LAUNCHER = FAKE_DIR / "fake-agent"

sys.path.insert(0, str(FAKE_DIR.parent))
from fake_agent.cli import CommandLine  # noqa: E402
from fake_agent.inbox import Inbox, InvalidLine  # noqa: E402
from fake_agent.main import play  # noqa: E402
from fake_agent.output import JsonObject  # noqa: E402
from fake_agent.player import AssistantSpec, Player, ToolCall  # noqa: E402
from fake_agent.rendering import Renderer  # noqa: E402
from fake_agent.scenario import load_scenario  # noqa: E402


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


def test_every_launcher_in_the_folder_plays_a_format() -> None:
    assert set(launchers().values()) <= {agent.name for agent in AGENTS}


@pytest.mark.parametrize(
    ("name", "exe", "needs"),
    [
        *((agent.name, exe, agent.needs[:1]) for agent in AGENTS for exe in agent.executables),
        *((agent.name, exe, ()) for agent in AGENTS for exe in agent.adapters),
    ],
)
def test_the_shared_launcher_plays_each_format_under_each_name_it_goes_by(
    name: str, exe: str, needs: tuple[str, ...], tmp_path: Path
) -> None:
    # A new format needs no launcher file of its own: a link named like its
    # CLI (as a test or a user makes one) plays it, with the option that
    # chooses the format where one is needed. A two-way format answers the
    # first request of its client.
    link = tmp_path / "bin" / exe
    link.parent.mkdir()
    link.symlink_to(SHARED_LAUNCHER)
    request = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}\n'
    output = run_launcher(link, tmp_path, *needs, steps=ANSWER, stdin=request)
    lines = [json.loads(line) for line in output.splitlines() if line]
    assert any(DIALECTS[name].recognises(obj) for obj in lines if isinstance(obj, dict))


ANSWER = '[{"assistant": {"text": "Done.", "stopReason": "stop"}}, {"agent_end": {}}]'


def run_launcher(
    path: Path, tmp_path: Path, *args: str, steps: str = "[]", stdin: bytes = b""
) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT_")}
    scenario = tmp_path / "s.json"
    scenario.write_text(f'{{"version": 1, "steps": {steps}}}')
    proc = subprocess.run(
        [str(path), "--scenario", str(scenario), *args, "x"],
        check=True,
        cwd=tmp_path,
        env=environ | {"FAKE_AGENT_HOME": str(tmp_path)},
        input=stdin,
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


def test_every_module_of_the_fake_agent_is_of_a_readable_size() -> None:
    # The fake agent is read by whoever adds a format: a CLI whose habits
    # outgrow one module splits them (a two-way mode in a module of its own).
    long = [
        f"{path.relative_to(FAKE_DIR)} ({lines})"
        for path in sorted(FAKE_DIR.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > 600
    ]
    assert not long, f"fake agent modules over 600 lines: {long}"


# ---------------------------------------------------------------------------
# Two-way renderers: requests on stdin


def test_a_request_is_handed_over_once_its_line_is_whole() -> None:
    read, write = os.pipe()
    inbox = Inbox(read)
    try:
        os.write(write, b'{"id": 1')
        assert inbox.next(timeout=0.05) is None
        assert not inbox.closed
        os.write(write, b'}\n\n{"id": 2}\n[1]\n{"id": 3}')
        assert inbox.next(timeout=0) == {"id": 1}
        assert inbox.next(timeout=0) == {"id": 2}
        assert inbox.next(timeout=0) == InvalidLine("[1]")
        # The last line needs no newline once the client has closed stdin.
        assert inbox.next(timeout=0.05) is None
        os.close(write)
        assert inbox.next() == {"id": 3}
        assert inbox.next() is None
        assert inbox.closed
    finally:
        os.close(read)


def test_a_two_way_renderer_plays_a_turn_per_prompt_it_reads(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    read, write = os.pipe()
    os.write(write, b'{"id": 1, "prompt": "one"}\nnot json\n{"id": 2, "prompt": "two"}\n')
    os.close(write)

    class PromptsOnStdin(Renderer):
        """A two-way renderer in miniature: a request per prompt, answered once played."""

        def turns(self, prompt: str) -> Iterator[str]:
            inbox = Inbox(read)
            while (request := inbox.next()) is not None:
                if isinstance(request, InvalidLine):
                    self.emit({"error": request.text})
                    continue
                yield str(request["prompt"])
                self.emit({"answered": request["id"]})

        def preamble(self, prompt: str, message: JsonObject) -> None:
            self.emit({"prompt": prompt})

        def assistant_message(
            self, spec: AssistantSpec, message: JsonObject, calls: list[ToolCall]
        ) -> None:
            self.emit({"text": spec.text})

    scenario_path = tmp_path / "s.json"
    scenario_path.write_text(
        json.dumps(
            {
                "version": 1,
                "steps": [{"assistant": {"text": "first"}}],
                "resumes": [[{"assistant": {"text": "second"}}]],
            }
        )
    )
    player = Player(model="m", session_id="s", cwd=str(tmp_path), session=None)
    player.renderer = PromptsOnStdin(player, CommandLine((), {}, (), ()))
    try:
        status = play(player, load_scenario(scenario_path), "ignored", 0)
    finally:
        os.close(read)
    assert status == 0
    lines = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert lines == [
        {"prompt": "one"},
        {"text": "first"},
        {"answered": 1},
        {"error": "not json"},
        {"prompt": "two"},
        {"text": "second"},
        {"answered": 2},
    ]


def test_a_one_way_format_leaves_stdin_alone(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text('{"version": 1, "steps": [{"assistant": {"text": "hi"}}]}')
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT_")}
    proc = subprocess.Popen(
        [str(FAKE_DIR / "claude"), "-p", "--scenario", str(scenario), "x"],
        cwd=tmp_path,
        env=environ | {"FAKE_AGENT_HOME": str(tmp_path)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    # A request it never reads, and stdin left open: it runs to its end anyway.
    proc.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}\n')
    proc.stdin.flush()
    try:
        assert proc.wait(timeout=30) == 0
        assert b'"text":"hi"' in proc.stdout.read()
    finally:
        proc.stdin.close()
        proc.stdout.close()
