"""The one list of agents: what picks a dialect from a command line, and what
reading it costs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wrapper.core import registry
from wrapper.core.registry import AGENTS, Agent, detect, program
from wrapper.dialects import DIALECTS, UsageError, resolve_dialect

ROOT = Path(__file__).resolve().parent.parent

#: A dialect that a command line names by an option or a subcommand, as a
#: protocol mode of several CLIs would be.
MODE = Agent(
    "mode", "wrapper.dialects.pi:PiDialect", ("gemini", "opencode"), "pi", ("--mode-x", "serve")
)


@pytest.fixture
def with_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "AGENTS", (*AGENTS, MODE))


def name(command: list[str]) -> str | None:
    agent = detect(command)
    return agent.name if agent is not None else None


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["claude", "-p"], "claude"),
        (["/opt/bin/codex", "exec", "--json"], "codex"),
        (["cursor", "-p"], "cursor"),
        (["env", "FOO=1", "-u", "BAR", "claude", "-p"], "claude"),
        (["npx", "-y", "opencode", "run"], "opencode"),
        (["npx", "--package", "x", "@scope/gemini@1.2.3", "-p"], "gemini"),
        (["bunx", "pi@0.73.1", "--mode", "json"], "pi"),
        (["npx", "-y", "@google/gemini-cli@0.61.0", "-o", "stream-json"], "gemini"),
        (["npx", "@anthropic-ai/claude-code", "-p"], "claude"),
        (["npx", "@mariozechner/pi-coding-agent", "--mode", "json"], "pi"),
        (["npx", "opencode-ai@1.18.33", "run"], "opencode"),
        (["python3", "agent.py"], None),
        (["env", "FOO=1"], None),
        ([], None),
    ],
)
def test_the_program_is_found_through_launchers(command: list[str], expected: str | None) -> None:
    assert name(command) == expected


@pytest.mark.usefixtures("with_mode")
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["gemini", "--mode-x"], "mode"),
        (["gemini", "-y", "--mode-x", "--model", "m"], "mode"),
        (["gemini", "-p", "hi"], "gemini"),
        (["opencode", "serve"], "mode"),
        (["opencode", "run", "serve"], "opencode"),  # a word later on is the task's, not a mode
        (["gemini", "-p", "--", "--mode-x"], "gemini"),  # after --, an argument
        (["claude", "--mode-x"], "claude"),
    ],
)
def test_an_option_or_subcommand_can_name_another_dialect(
    command: list[str], expected: str
) -> None:
    assert name(command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # Qwen Code: its stream-json output is Claude Code's stream; --acp is ACP.
        (["qwen", "-o", "stream-json"], "claude"),
        (["qwen", "--approval-mode", "yolo", "--output-format", "stream-json"], "claude"),
        (["qwen", "--output-format=stream-json", "-m", "m"], "claude"),
        (["npx", "@qwen-code/qwen-code@0.24.4", "-o", "stream-json"], "claude"),
        (["qwen", "--acp", "--approval-mode", "default"], "acp"),
        (["qwen", "-o", "json"], None),  # one JSON document at the end: no stream
        (["qwen", "-p", "hi"], None),
        (["qwen", "-p", "hi", "--", "-o", "stream-json"], None),  # after --, an argument
        # Kilo CLI: its ACP server is a subcommand.
        (["kilo", "acp"], "acp"),
        (["/opt/kilo/bin/kilo", "acp"], "acp"),
        (["kilo", "run", "acp"], None),  # a word later on is the task's
        (["kilo"], None),
    ],
)
def test_qwen_and_kilo_are_known_by_their_modes(command: list[str], expected: str | None) -> None:
    assert name(command) == expected


def test_a_qwen_stream_json_command_gets_its_task_after_p(tmp_path: Path) -> None:
    # Qwen Code drops what follows --; the claude dialect gives it -p TASK.
    command = ["qwen", "-o", "stream-json", "--approval-mode", "yolo"]
    dialect = resolve_dialect("auto", command, has_task=True)
    assert dialect.name == "claude"
    assert dialect.launch(command, "-v is broken", tmp_path).argv == [
        *command,
        "-p",
        " -v is broken",
    ]
    assert dialect.resume(command, "go on", tmp_path, "s-1").argv == [
        *command,
        "--resume",
        "s-1",
        "-p",
        "go on",
    ]
    claude = ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert dialect.launch(claude, "-v", tmp_path).argv == [*claude, "--", "-v"]


def test_resolving_a_launched_agent_places_the_task(tmp_path: Path) -> None:
    dialect = resolve_dialect("auto", ["env", "A=1", "claude", "-p"], has_task=True)
    assert dialect.name == "claude"
    argv = dialect.launch(["env", "A=1", "claude", "-p"], "do it", tmp_path).argv
    assert argv[:4] == ["env", "A=1", "claude", "-p"]
    assert argv[-1] == "do it"


def test_an_unknown_program_with_a_task_is_named_in_the_usage_error() -> None:
    with pytest.raises(UsageError, match=r"'myagent'.*--dialect"):
        resolve_dialect("auto", ["env", "myagent", "--json"], has_task=True)


def test_every_entry_names_its_class_and_no_program_is_claimed_twice() -> None:
    assert list(DIALECTS) == [agent.name for agent in AGENTS]
    for agent in AGENTS:
        assert DIALECTS[agent.name].name == agent.name
    claimed = [(exe, agent.needs) for agent in AGENTS for exe in agent.executables]
    claimed += [(exe, needs) for agent in AGENTS for exes, needs in agent.also for exe in exes]
    assert len(claimed) == len(set(claimed))


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["/tmp/x/mystery-agent", "-o", "stream-json"], "mystery-agent"),
        (["env", "A=1", "npx", "-y", "@qwen-code/qwen-code@0.1", "-o", "json"], "qwen-code"),
        (["claude", "-p"], "claude"),
        (["env", "FOO=1"], None),
    ],
)
def test_the_program_name_is_the_agent_behind_any_launcher(
    command: list[str], expected: str | None
) -> None:
    assert registry.program_name(command) == expected


def test_program_reports_the_arguments_it_gets() -> None:
    assert program(["env", "X=1", "pi", "--mode", "json"]) == ("pi", ["--mode", "json"])


def run_python(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-I", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    loaded: list[str] = json.loads(out)
    return loaded


def test_the_registry_needs_nothing_but_the_standard_library() -> None:
    loaded = run_python(
        "import sys, json; sys.path.insert(0, '.'); import wrapper.core.registry; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in {'wrapper', 'orjson', 'trio', 'psutil'})))"
    )
    # The core package's __init__ is empty: it adds a name, never an import.
    assert loaded == ["wrapper", "wrapper.core", "wrapper.core.registry"]


def test_choosing_a_dialect_imports_that_dialect_alone() -> None:
    loaded = run_python(
        "import sys, json; sys.path.insert(0, '.'); "
        "from wrapper.dialects import resolve_dialect; "
        "resolve_dialect('auto', ['npx', 'codex', 'exec', '--json'], has_task=True); "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('wrapper.dialects.'))))"
    )
    assert loaded == ["wrapper.dialects._shared", "wrapper.dialects.base", "wrapper.dialects.codex"]
