"""The shell loop of docs/batch.md over machines that share a folder, as written,
with a stand-in for ``ssh`` that runs the command on this machine and the
shared folder in a temporary directory."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import FAKE_PI, HANG_LIMIT, ROOT, agent_env, validate, write_scenario
from tests.recipes import recipe

OK: list[dict[str, Any]] = [{"assistant": {"text": "Done.", "stopReason": "stop"}}]
AGENT = [str(FAKE_PI), "--mode", "json", "-p", "--scenario"]
CRASH: list[dict[str, Any]] = [{"stderr": "fatal"}, {"exit": 3}]


def test_the_shell_loop_runs_every_line_once_and_a_second_loop_only_what_failed(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    # ssh HOST COMMAND: run COMMAND here, as the host would.
    ssh.write_text('#!/bin/sh\nshift\nexec sh -c "$1"\n')
    ssh.chmod(0o755)
    folders = {}
    for name, steps in (("ok", OK), ("crash", CRASH)):
        folders[name] = tmp_path / "scenarios" / name
        folders[name].mkdir(parents=True)
        write_scenario(folders[name], steps)
    kinds = ["ok", "ok", "crash", "ok", "ok", "ok", "ok"]
    spec = [
        {
            "command": [*AGENT, str(folders[kind] / "scenario.json")],
            "task": f"task {n}",
            "label": f"{kind}-{n}",
        }
        for n, kind in enumerate(kinds)
    ]
    (shared / "spec.jsonl").write_text("".join(json.dumps(line) + "\n" for line in spec))
    script = recipe("shell loop").replace("/shared/work", str(shared))
    env = agent_env(tmp_path)
    env["PATH"] = f"{bin_dir}{os.pathsep}{ROOT / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"

    def loop() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", "-e", "-c", script],
            cwd=shared,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_LIMIT,
            check=False,
        )

    first = loop()
    # The merge's exit: complete, one run did not pass.
    assert first.returncode == 1, first.stderr
    report = json.loads((shared / "results" / "batch.json").read_text())
    validate("batch", report)
    assert (report["runs"], report["passed"]) == (7, 6)
    assert sorted(shard["index"] for shard in report["shards"]) == [1, 2, 3]
    assert (shared / "results" / "junit.xml").read_text().count("<testcase ") == 7

    second = loop()
    assert second.returncode == 1, second.stderr
    prompts = [json.loads(text)["prompt"] for text in (tmp_path / "record.jsonl").open()]
    assert sorted(prompts) == sorted([f"task {n}" for n in range(7)] + ["task 2"])
    again = json.loads((shared / "results" / "batch.json").read_text())
    assert again["reused"] == 6
