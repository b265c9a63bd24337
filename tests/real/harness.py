"""Running one scenario of one real CLI through ``agent-wrapper run``.

Shared by the conformance tests and by the exit-latency measurement
(``python -m tests.real.measure``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tests.real import mock_server
from tests.real.clis import CLIS, DEFAULT_CACHE, Cli, base_env

ROOT = Path(__file__).resolve().parents[2]

#: The tier's switch: the cache directory scripts/conformance installed the CLIs into.
CACHE_ENV = "AGENT_WRAPPER_CLIS"
#: Optional JSON object {cli: version} overriding the pinned versions (--latest mode).
VERSIONS_ENV = "AGENT_WRAPPER_CLI_VERSIONS"
#: When set, each case's raw stdout is copied to DIR/<cli>-<version>/<scenario>.jsonl.
CAPTURE_ENV = "AGENT_WRAPPER_TIER_CAPTURE"

#: Only there to catch a hang: a case normally takes a few seconds.
RUN_LIMIT = 120
CASE_LIMIT = RUN_LIMIT + 60.0

#: The Stop hook of the steering scenarios: blocks the first stop, allows the next.
STEER_HOOK = f"""\
import json, sys
event = json.load(sys.stdin)
if not event.get("stop_hook_active"):
    print(json.dumps({{"decision": "block", "reason": {mock_server.STEER_REASON!r}}}))
"""


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def cli_version(cli: Cli) -> str:
    """The version of ``cli`` a single run uses: the pinned one, or --latest's."""
    return cli_versions(cli)[0]


def cli_versions(cli: Cli) -> tuple[str, ...]:
    """Every version of ``cli`` the tier runs: its pins, or --latest's one."""
    override = json.loads(os.environ.get(VERSIONS_ENV) or "{}")
    return (str(override[cli.name]),) if override.get(cli.name) else cli.versions


@dataclass
class Mock:
    url: str
    log: Path
    proc: subprocess.Popen[bytes]

    def requests(self, nonce: str) -> list[dict[str, Any]]:
        """Every logged request of one case (those carrying its nonce)."""
        if not self.log.exists():
            return []
        entries = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [e for e in entries if e.get("nonce") == nonce]


@contextlib.contextmanager
def mock_server_running(log: Path) -> Iterator[Mock]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.real.mock_server", "--log", str(log)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().split()
        if len(line) != 2 or line[0] != "PORT":
            raise RuntimeError(f"mock server did not start: {line}")
        yield Mock(f"http://127.0.0.1:{line[1]}", log, proc)
    finally:
        proc.terminate()
        proc.wait(10)


@dataclass
class Case:
    cli: str
    version: str
    scenario: str
    returncode: int
    result: dict[str, Any]
    events: list[dict[str, Any]]
    stderr: str
    workdir: Path
    run_dir: Path
    #: The directory the wrapper's inherited PWD named; nothing may land there.
    stale_pwd: Path
    requests: list[dict[str, Any]]
    leftover: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def files(self) -> dict[str, str]:
        """Files the agent left in its working directory (its own dot-dirs aside)."""
        return {
            p.name: p.read_text(errors="replace")
            for p in self.workdir.iterdir()
            if p.is_file() and not p.name.startswith(".")
        }


def _processes_of(run_id: str) -> list[str]:
    """Processes still running with this run's id in their environment."""
    found = []
    for proc in psutil.process_iter(["pid", "name"]):
        with contextlib.suppress(psutil.Error):
            if proc.environ().get("AGENT_WRAPPER_RUN_ID") == run_id:
                found.append(f"{proc.info['pid']} {proc.info['name']}")
    return found


def run_case(
    cli_name: str,
    scenario: str,
    base: Path,
    mock: Mock,
    *,
    version: str | None = None,
    options: list[str] | None = None,
    agent_args: list[str] | None = None,
    during: Callable[[Path, str], None] | None = None,
    mode: tuple[list[str], list[str]] | None = None,
    config_content: dict[str, Any] | None = None,
) -> Case:
    """Run one case to its end. ``options`` go to the wrapper, ``agent_args``
    to the CLI (after its own); ``mode``: (its JSON-mode words, the words
    that replace them), to run the CLI in another mode (pi's ``--mode
    rpc``). ``config_content``: for opencode, more configuration that,
    with the case's own file, is given in ``OPENCODE_CONFIG_CONTENT`` instead
    of that file. ``during``, when given, is called with the run directory and
    the case's nonce while the wrapper runs (to steer or abort it from
    outside); the wrapper's output then goes to files, not pipes nobody
    reads."""
    cli = CLIS[cli_name]
    version = version or cli_version(cli)
    exe = cli.executable(cache_dir(), version)
    home = base / "home"
    work = base / "work"
    run_dir = base / "run"
    home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    setup = cli.configure(home, mock.url, str(exe))
    env = base_env(home) | setup.env
    if config_content is not None:
        # Its file goes, so that the content is where the provider comes from.
        own_file = Path(env.pop("OPENCODE_CONFIG"))
        own = json.loads(own_file.read_text())
        own_file.unlink()
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps(own | config_content)
    nonce = secrets.token_hex(6)
    task = f"[scenario:{scenario}:{nonce}] Do the scripted task."
    argv = [sys.executable, "-m", "wrapper", "run", "--output", "jsonl", "--run-dir", str(run_dir)]
    # A hung CLI ends as the wrapper's own timeout, with a result to read.
    argv += ["--dialect", cli.dialect, "--timeout", str(RUN_LIMIT)]
    if scenario.startswith("steer"):
        hook = base / "steer_hook.py"
        hook.write_text(STEER_HOOK)
        handler = {"type": "command", "args": [sys.executable, str(hook)]}
        settings = {"hooks": {"Stop": [{"hooks": [handler]}]}}
        (base / "settings.json").write_text(json.dumps(settings))
        argv += ["--settings", str(base / "settings.json")]
    if scenario == "slow":
        # The tool runs longer than the grace: the wrapper must wait for it.
        argv += ["--grace", "1"]
    argv += options or []
    command = list(setup.argv)
    if mode is not None:
        at = next(i for i in range(len(command)) if command[i : i + len(mode[0])] == mode[0])
        command[at : at + len(mode[0])] = mode[1]
    argv += ["--task", task, "--", *command, *(agent_args or [])]
    # The wrapper runs from the repository with its own interpreter. PWD names
    # another directory on purpose, as when a runner exec()s the wrapper after
    # a chdir: the agent must work in (and write to) its working directory.
    stale = base / "stale-pwd"
    stale.mkdir(exist_ok=True)
    env["PYTHONPATH"] = str(ROOT)
    env["PWD"] = str(stale)
    started = time.monotonic()
    if during is None:
        proc = subprocess.run(
            argv,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CASE_LIMIT,
            check=False,
        )
    else:
        proc = _run_with(argv, work, env, base, lambda: during(run_dir, nonce))
    elapsed = time.monotonic() - started
    try:
        result = json.loads((run_dir / "result.json").read_text())
    except OSError as exc:
        raise AssertionError(
            f"{cli_name} {scenario}: no result.json (exit {proc.returncode}): "
            f"{proc.stderr.decode(errors='replace')[-2000:]}"
        ) from exc
    events = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]
    case = Case(
        cli=cli_name,
        version=version,
        scenario=scenario,
        returncode=proc.returncode,
        result=result,
        events=events,
        stderr=proc.stderr.decode(errors="replace"),
        workdir=work,
        run_dir=run_dir,
        stale_pwd=stale,
        requests=mock.requests(nonce),
        elapsed=elapsed,
    )
    case.leftover = _processes_of(result["runId"])
    capture = os.environ.get(CAPTURE_ENV)
    if capture and (run_dir / "stdout.log").exists():
        target = Path(capture) / f"{cli_name}-{version}" / f"{scenario}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run_dir / "stdout.log", target)
    return case


def _run_with(
    argv: list[str],
    work: Path,
    env: dict[str, str],
    base: Path,
    during: Callable[[], None],
) -> subprocess.CompletedProcess[bytes]:
    """The wrapper in the background while ``during()`` acts on it."""
    out, err = base / "wrapper.stdout", base / "wrapper.stderr"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        child = subprocess.Popen(
            argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr
        )
        try:
            during()
            child.wait(CASE_LIMIT)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    return subprocess.CompletedProcess(argv, child.returncode, out.read_bytes(), err.read_bytes())


def exit_latencies(case: Case) -> list[float]:
    """Per attempt: seconds from the agent's end-of-run event to its exit."""
    from datetime import datetime

    def ts(event: dict[str, Any]) -> float:
        return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()

    found = []
    end: float | None = None
    for event in case.events:
        if event["type"] == "agent_end" or (
            event["type"] == "assistant_message"
            and event.get("stopReason") in ("stop", "length", "error", "aborted")
        ):
            end = ts(event)
        elif event["type"] == "exited" and end is not None:
            found.append(ts(event) - end)
            end = None
    return found
