"""One real ACP agent run through ``agent-wrapper run --dialect acp`` against
the tier's mock model server, by hand (the groundwork of the ACP conformance
cases). Run it inside a network namespace with only loopback up:

    unshare -n sh -c 'ip link set lo up && exec "$@"' sh \\
        .venv/bin/python -m tests.real.acp_run gemini tool

SCENARIO is one of the mock's (``plain``, ``tool``, ``slow``, ``length``, ...),
or ``overflow`` (a 5 MB prompt given with ``--task-file``); with ``slow`` the
wrapper gets SIGTERM while the tool runs. Prints result.json's main fields,
the attempts and the files the agent left in its working directory; the run
directory is kept under /tmp/acp-run-SCENARIO.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.real.acp_probe import acp_setup
from tests.real.harness import cache_dir, mock_server_running

FIELDS = (
    "outcome",
    "stopReason",
    "rawStopReason",
    "finalText",
    "toolsUsed",
    "forcedCleanup",
    "error",
)


def interrupt_mid_tool(cmd: list[str], cwd: Path, env: dict[str, str], run_dir: Path) -> None:
    """Run ``cmd`` and send it SIGTERM half a second into the first tool."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stderr=subprocess.PIPE)
    started = time.monotonic()
    while time.monotonic() - started < 60:
        try:
            status: dict[str, Any] = json.loads((run_dir / "status.json").read_text())
        except (OSError, ValueError):
            status = {}
        if status.get("currentTool"):
            break
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    print("exit", proc.returncode, err.decode()[-1500:])


def main(argv: list[str]) -> int:
    agent, scenario = argv
    with tempfile.TemporaryDirectory(prefix="acp-run-") as tmp:
        base = Path(tmp)
        home, work = base / "home", base / "work"
        home.mkdir()
        work.mkdir()
        with mock_server_running(base / "mock.jsonl") as mock:
            agent_env, command = acp_setup(agent, home, mock.url, cache_dir())
            nonce = secrets.token_hex(6)
            run_dir = Path(tempfile.gettempdir()) / f"acp-run-{scenario}"
            subprocess.run(["rm", "-rf", str(run_dir)], check=True)
            if scenario == "overflow":
                task_file = base / "task.txt"
                task_file.write_text(
                    f"[scenario:plain:{nonce}] Summarize: " + "lorem ipsum " * 416_666
                )
                task = ["--task-file", str(task_file)]
            else:
                task = ["--task", f"[scenario:{scenario}:{nonce}] Do the scripted task."]
            cmd = [sys.executable, "-m", "wrapper", "run", "--dialect", "acp", "--output", "quiet"]
            cmd += ["--run-dir", str(run_dir), *task, "--", *command]
            env = {**os.environ, **agent_env}
            if scenario == "slow":
                interrupt_mid_tool(cmd, work, env, run_dir)
            else:
                done = subprocess.run(
                    cmd, cwd=work, env=env, capture_output=True, timeout=180, check=False
                )
                print("exit", done.returncode, done.stderr.decode()[-2000:])
            result = json.loads((run_dir / "result.json").read_text())
            print(json.dumps({key: result.get(key) for key in FIELDS}, indent=1))
            for attempt in result["attempts"]:
                print(attempt)
            print("workdir:", sorted(p.name for p in work.iterdir()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
