"""The guardian's guarantees under each way the package can be installed.

The guardian cleans up (and, where its compiled waiter was not built,
waits) in a fresh interpreter started with ``-I -S``, which
leaves out site and with it what an install may rely on to make the
package importable: the site-packages directories, and the import hooks
``.pth`` files install (a plain ``pip install -e``, with setuptools 64 or
later, makes the package importable through such a finder only). A zipapp
has no file on disk for the waiter at all. The project's own ``.venv`` is
an editable install of the older kind (a path entry), which would hide all
of this, so each case here is a real install in a virtual environment of
its own:

- ``regular``: ``pip install`` of a copy of the repository;
- ``editable``: ``pip install -e`` of a copy, in the default (import hook)
  mode, checked to be found through a finder and through no path entry;
- ``zipapp``: the ``wrapper`` package in a zip archive run by the Python of
  an environment holding only the runtime dependencies.

The regular and the editable install build the compiled waiter (where a C
compiler is); the zipapp cannot run one from its archive. Under each: a
SIGKILLed wrapper (or worker) still ends the agent and leaves result.json,
a SIGTERM while a batch starts ends it as a SIGTERM, with no import error,
and a hook's nested run starts the same wrapper. The environments are built
once for the module (about 15 s with the pip cache warm); a case that
cannot be installed for want of the package registry is skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import zipapp
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import (
    FAKE_PI,
    HANG_LIMIT,
    ROOT,
    agent_env,
    read_result,
    wait_until,
    wrapper_argv,
    write_scenario,
)
from tests.test_hardening import LONG_RUN, _assert_wrapper_killed_result, marked
from tests.test_hooks import answer, judge_command, settings_file, stop_hooks
from wrapper.process import guardian
from wrapper.process import guardian_waiter as waiter

pytestmark = pytest.mark.usefixtures("no_leaks")

INSTALLS = ("regular", "editable", "zipapp")

#: Bound on building one environment: only there to catch a hang.
INSTALL_LIMIT = 300.0

#: What pip says when the package registry cannot be reached (or lacks what
#: is asked for): the one reason to skip rather than fail.
NO_REGISTRY = (
    "No matching distribution found",
    "Could not find a version that satisfies",
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ProxyError",
)

#: Run by an environment's Python from a neutral directory: where ``wrapper``
#: comes from, and whether a plain path entry (rather than a finder) has it.
WHERE_FROM = (
    "import importlib.machinery, importlib.util, sys\n"
    "on_path = importlib.machinery.PathFinder.find_spec('wrapper', sys.path) is not None\n"
    "spec = importlib.util.find_spec('wrapper')\n"
    "print(on_path, spec.origin if spec else None)\n"
)


@dataclass(frozen=True)
class Install:
    name: str
    #: The ``agent-wrapper`` command of this install.
    command: list[str]


def _copy_source(destination: Path) -> Path:
    """What a build of the package reads, without the repository's virtual
    environment, caches or build leftovers."""
    destination.mkdir(parents=True)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, destination / name)
    shutil.copytree(
        ROOT / "wrapper",
        destination / "wrapper",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    return destination


def _runtime_requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements: list[str] = project["dependencies"]
    return requirements


def _pip(python: Path, *args: str) -> subprocess.Popen[str]:
    """pip (the test's own, run for ``python``) installing into ``python``'s
    environment, its cache shared with every other install."""
    return subprocess.Popen(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _where_from(python: Path, cwd: Path) -> tuple[bool, str | None]:
    shown = subprocess.run(
        [str(python), "-c", WHERE_FROM],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_clean_env(),
        timeout=HANG_LIMIT,
        check=True,
    )
    on_path, origin = shown.stdout.split()
    return on_path == "True", None if origin == "None" else origin


def _clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: the test's) without what would make the repository's
    own package importable."""
    env = dict(os.environ) if env is None else env
    return {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def installs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Install | str]:
    """Each install by name, or why it could not be made (for a skip)."""
    base = tmp_path_factory.mktemp("installs")
    pythons = {}
    for name in INSTALLS:
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(base / f"venv-{name}")],
            check=True,
            timeout=INSTALL_LIMIT,
        )
        pythons[name] = base / f"venv-{name}" / "bin" / "python"
    editable = _copy_source(base / "src-editable")
    bundle = base / "zipapp-src"
    shutil.copytree(
        ROOT / "wrapper", bundle / "wrapper", ignore=shutil.ignore_patterns("__pycache__")
    )
    (bundle / "__main__.py").write_text("from wrapper.entry import main\n\nmain()\n")
    archive = base / "agent-wrapper.pyz"
    zipapp.create_archive(bundle, archive)
    # All three at once: most of the time is spent waiting for the network.
    pips = {
        "regular": _pip(pythons["regular"], str(_copy_source(base / "src-regular"))),
        "editable": _pip(pythons["editable"], "--editable", str(editable)),
        "zipapp": _pip(pythons["zipapp"], *_runtime_requirements()),
    }
    made: dict[str, Install | str] = {}
    for name, pip in pips.items():
        output, _ = pip.communicate(timeout=INSTALL_LIMIT)
        if pip.returncode == 0:
            continue
        said = "\n".join(line for line in output.splitlines() if "is ignored" not in line)
        if any(sign in said for sign in NO_REGISTRY):
            made[name] = f"{name} install not possible without the package registry: {said[-600:]}"
        else:
            pytest.fail(f"pip failed to make the {name} install:\n{said}")
    neutral = base / "neutral"
    neutral.mkdir()
    bin_of = {name: python.parent for name, python in pythons.items()}
    if "regular" not in made:
        on_path, origin = _where_from(pythons["regular"], neutral)
        assert on_path, "a regular install is on a path entry (site-packages)"
        assert origin is not None
        assert Path(origin).is_relative_to(pythons["regular"].parent.parent / "lib"), origin
        _assert_compiled_waiter(Path(origin).parent)
        made["regular"] = Install("regular", [str(bin_of["regular"] / "agent-wrapper")])
    if "editable" not in made:
        on_path, origin = _where_from(pythons["editable"], neutral)
        # What the brief is about: found through the install's finder alone.
        assert not on_path, "the editable install is a path entry, not an import hook"
        assert origin == str(editable / "wrapper" / "__init__.py"), origin
        _assert_compiled_waiter(editable / "wrapper")
        made["editable"] = Install("editable", [str(bin_of["editable"] / "agent-wrapper")])
    if "zipapp" not in made:
        assert _where_from(pythons["zipapp"], neutral) == (False, None), "no wrapper installed"
        made["zipapp"] = Install("zipapp", [str(pythons["zipapp"]), str(archive)])
    return made


def _assert_compiled_waiter(package: Path) -> None:
    """The build made the guardian's compiled waiter in the installed package
    (beside the source for an editable install), wherever a C compiler is."""
    if shutil.which("cc") or shutil.which("gcc") or os.environ.get("CC"):
        program = package / "process" / guardian.WAITER_PROGRAM
        assert os.access(program, os.X_OK), f"the install has no compiled waiter at {program}"


@pytest.fixture(params=INSTALLS)
def install(request: pytest.FixtureRequest, installs: dict[str, Install | str]) -> Install:
    made = installs[request.param]
    if isinstance(made, str):
        pytest.skip(made)
    return made


def _children_of(pid: int) -> list[int]:
    try:
        return [
            int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        ]
    except OSError:
        return []


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The wrappers a test starts, killed should the test end first."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("victim", ["wrapper", "worker"])
def test_a_sigkill_ends_the_agent_and_leaves_a_result(
    install: Install, tmp_path: Path, started: list[subprocess.Popen[bytes]], victim: str
) -> None:
    scenario = write_scenario(tmp_path, LONG_RUN)
    run_dir = tmp_path / "run"
    # The test's own argv with this install's command in place of ``python -m wrapper``.
    argv = [*install.command, *wrapper_argv(run_dir, scenario)[3:]]
    wrapper = subprocess.Popen(
        argv,
        env=_clean_env(agent_env(tmp_path)),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    started.append(wrapper)
    assert wait_until(lambda: len(marked(tmp_path)) == 3, timeout=30), "the agent's children"
    time.sleep(0.5)  # time for the third child to start ignoring SIGTERM
    if victim == "wrapper":
        # The runner's kill -9: the worker, left alone, ends the run.
        wrapper.kill()
    else:
        # Out of memory, a crash: the guardian ends the run.
        [worker] = _children_of(wrapper.pid)
        os.kill(worker, signal.SIGKILL)
    code = wrapper.wait(timeout=HANG_LIMIT)
    assert code == (-signal.SIGKILL if victim == "wrapper" else 128 + signal.SIGKILL)
    assert wait_until(lambda: not marked(tmp_path), timeout=20), marked(tmp_path)
    result = _assert_wrapper_killed_result(run_dir / "result.json", run_dir)
    assert "SIGKILL" in {sent["signal"] for sent in result["signalsSent"]}
    assert wrapper.stderr is not None
    assert "Traceback" not in wrapper.stderr.read().decode(errors="replace")


@pytest.mark.parametrize("when", ["worker forked", "runs starting"])
def test_a_sigterm_while_a_batch_starts_ends_it_as_a_sigterm(
    install: Install, tmp_path: Path, started: list[subprocess.Popen[bytes]], when: str
) -> None:
    slow = write_scenario(tmp_path, [{"sleep": 60}])
    line = (
        f'{{"command": ["{FAKE_PI}", "--mode", "json", "-p", "--scenario", "{slow}"], '
        '"task": "Do the task"}\n'
    )
    spec = tmp_path / "spec.jsonl"
    spec.write_text(line * 2)
    batch = subprocess.Popen(
        [
            *install.command,
            "batch",
            str(spec),
            "--jobs",
            "2",
            "--runs-dir",
            "runs",
            "--output",
            "quiet",
        ],
        env=_clean_env(agent_env(tmp_path)),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    started.append(batch)
    deadline = time.monotonic() + 30
    if when == "worker forked":
        # The guardian waits in its fresh interpreter (the waiter), the worker
        # still imports: the worker dies of the signal the guardian passes
        # on, and the guardian has to import its cleanup to follow it.
        while not (_children_of(batch.pid) and b"waiter" in _command_line(batch.pid)):
            assert time.monotonic() < deadline, "the batch's guardian never started waiting"
            time.sleep(0.001)
    else:
        # An agent runs (it records its start), the worker may still be importing.
        while not (tmp_path / "record.jsonl").exists():
            assert time.monotonic() < deadline, "the batch started no agent"
            time.sleep(0.005)
    batch.send_signal(signal.SIGTERM)
    code = batch.wait(timeout=HANG_LIMIT)
    assert batch.stderr is not None
    stderr = batch.stderr.read().decode(errors="replace")
    assert "Traceback" not in stderr
    assert "ModuleNotFoundError" not in stderr
    # 143 from the wrapper's own handling, or the signal itself when it came
    # before the worker could handle it (a shell shows both as 143).
    assert code in (128 + signal.SIGTERM, -signal.SIGTERM), (code, stderr)
    if when == "runs starting":
        assert code == 128 + signal.SIGTERM, stderr
        results = sorted((tmp_path / "runs").glob("*/result.json"))
        assert results, "each started run has its result"
        for path in results:
            assert read_result(path)["outcome"] == "aborted"


def test_a_verifier_hook_runs_a_nested_wrapper_of_the_same_install(
    install: Install, tmp_path: Path
) -> None:
    # The nested run is started the way this wrapper was: from a zipapp,
    # ``python -m wrapper`` would find no package.
    verifier = judge_command(
        tmp_path,
        "verifier",
        answer('Checked.\n```json\n{"ok": false, "reason": "Add a regression test."}\n```'),
    )
    settings = settings_file(
        tmp_path, stop_hooks({"type": "agent", "prompt": "Verify the work.", "command": verifier})
    )
    scenario = write_scenario(tmp_path, answer("Done."))
    run_dir = tmp_path / "run"
    options = ["--settings", str(settings), "--max-steers", "1"]
    proc = subprocess.run(
        [*install.command, *wrapper_argv(run_dir, scenario, options=options)[3:]],
        env=_clean_env(agent_env(tmp_path)),
        cwd=tmp_path,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=HANG_LIMIT,
        check=False,
    )
    assert (run_dir / "result.json").exists(), proc.stderr.decode(errors="replace")
    result = read_result(run_dir / "result.json")
    assert [w for w in result["warnings"] if w["code"] == "hook_failed"] == [], proc.stderr
    assert [s["reason"] for s in result["steers"]] == ["Add a regression test."]
    nested = read_result(run_dir / "hooks" / "verifier-1" / "result.json")
    assert (nested["label"], nested["outcome"]) == ("verifier", "ok")


def test_the_agent_signals_through_the_wrapper_bin_of_each_install(
    install: Install, tmp_path: Path
) -> None:
    # No wrapper on the agent's PATH: only its environment names one.
    signal = 'test -x "$AGENT_WRAPPER_BIN" && "$AGENT_WRAPPER_BIN" signal complete --message bin'
    steps = [{"run": {"argv": ["/bin/sh", "-c", signal]}}, *answer("Done.")]
    run_dir = tmp_path / "run"
    argv = wrapper_argv(run_dir, write_scenario(tmp_path, steps), options=["--on-stop", "signal"])
    proc = subprocess.run(
        [*install.command, *argv[3:]],
        env={**_clean_env(agent_env(tmp_path)), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=HANG_LIMIT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = read_result(run_dir / "result.json")
    assert result["completionSignal"]["message"] == "bin"


def test_the_waiter_is_handed_every_import_path_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    # Paths may hold the path separator, or a newline: each goes as one argument.
    odd = ["/opt/a:b", "/opt/c\nd", ""]
    monkeypatch.setattr(sys, "path", [*odd, *sys.path])
    command = guardian.waiter_command()
    assert command is not None
    assert command[1:4] == ["-I", "-S", "-c"]
    path, roots, rest = waiter._take_imports([*command[6:], "123", "4", "run"])
    assert path[:3] == odd
    assert roots["wrapper"] == str(ROOT)
    assert set(roots) == set(guardian.CLEANUP_PACKAGES)
    assert rest == ["123", "4", "run"]
