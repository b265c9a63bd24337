"""The run directory as the wrapper finds it: files it did not create are
never deleted, files planted in it (a FIFO, a symlink, a device, a huge
file) are ignored with a warning instead of hanging or crashing the wrapper,
writes cannot be redirected, and result.json's last resort tells the truth."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    HANG_LIMIT,
    agent_env,
    invoke,
    read_result,
    run_wrapper,
    validate,
    wait_until,
    wrapper_argv,
    write_scenario,
)
from wrapper.files import artifacts, mailbox
from wrapper.files.artifacts import RUN_FILE_MAX_BYTES, RUN_MARKER, atomic_write, write_new
from wrapper.files.settings_file import SETTINGS_MAX_BYTES

END: list[dict[str, Any]] = [{"agent_end": {"willRetry": False}}, {"agent_settled": {}}]
WRAPPER = [sys.executable, "-m", "wrapper"]
#: Generous bound for a planted file to be dealt with: only there to catch hangs.
PROMPT = 30.0


def answer(text: str) -> list[dict[str, Any]]:
    return [{"assistant": {"text": text, "stopReason": "stop"}}, *END]


def shell(script: str) -> dict[str, Any]:
    """A step in which the agent runs ``script`` with the wrapper's environment."""
    return {"run": {"argv": ["sh", "-c", script]}}


def long_tool() -> list[dict[str, Any]]:
    return [{"tool": {"name": "bash", "args": {"command": "sleep 60"}, "duration": 60}}]


# -- planted files of every kind ------------------------------------------------------


def plant_fifo(path: Path, outside: Path) -> None:
    os.mkfifo(path)


def plant_symlink_outside(path: Path, outside: Path) -> None:
    outside.write_text(json.dumps({"kind": "complete", "attempt": 1, "runId": "r", "x": 1}))
    path.symlink_to(outside)


def plant_dev_zero(path: Path, outside: Path) -> None:
    path.symlink_to("/dev/zero")


def plant_directory(path: Path, outside: Path) -> None:
    path.mkdir()


def plant_huge(path: Path, outside: Path) -> None:
    with open(path, "wb") as file:
        file.truncate(RUN_FILE_MAX_BYTES + 1)


PLANTS: dict[str, Callable[[Path, Path], None]] = {
    "fifo": plant_fifo,
    "symlink": plant_symlink_outside,
    "dev-zero": plant_dev_zero,
    "directory": plant_directory,
    "huge": plant_huge,
}


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_a_planted_signal_is_ignored_with_a_warning(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "run" / "signals"
    folder.mkdir(parents=True)
    PLANTS[kind](folder / "00-planted.json", tmp_path / "outside.json")
    mailbox.send_signal(tmp_path / "run", "complete", "real", 1, "r")
    warnings: list[str] = []
    started = time.monotonic()
    found = mailbox.signals_of(tmp_path / "run", 1, "r", warnings.append)
    assert time.monotonic() - started < PROMPT
    assert [s["message"] for s in found] == ["real"], "only the real signal counts"
    assert len(warnings) == 1
    assert "00-planted.json" in warnings[0]


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_a_planted_answer_is_ignored_with_a_warning(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "run" / "escalations" / "esc-1"
    folder.mkdir(parents=True)
    PLANTS[kind](folder / "answer.json", tmp_path / "outside.json")
    warnings: list[str] = []
    assert mailbox.answer_of(tmp_path / "run", "esc-1", "r", warnings.append) is None
    assert len(warnings) == 1
    assert "answer.json" in warnings[0]


def test_a_signals_folder_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    mailbox.send_signal(elsewhere, "complete", None, 1, "r")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "signals").symlink_to(elsewhere / "signals")
    assert mailbox.signals_of(run_dir, 1, "r") == []


def running_status(run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    status = {"runId": "r", "state": "waiting", "wrapperPid": os.getpid(), "attempt": 1}
    (run_dir / "status.json").write_text(json.dumps(status))


@pytest.mark.parametrize("kind", sorted(PLANTS))
@pytest.mark.parametrize("command", ["status", "reply"])
def test_status_and_reply_refuse_a_planted_status_json(
    tmp_path: Path, kind: str, command: str
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    PLANTS[kind](run_dir / "status.json", tmp_path / "outside.json")
    args = [str(run_dir)] if command == "status" else [str(run_dir), "--stop"]
    proc = invoke([*WRAPPER, command, *args], tmp_path)
    stderr = proc.stderr.decode()
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    assert f"warning: ignored {run_dir / 'status.json'}" in stderr
    assert "not a run directory" in stderr or "not the directory of a wrapped run" in stderr


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_reply_ignores_a_planted_question_or_answer(tmp_path: Path, kind: str) -> None:
    run_dir = tmp_path / "run"
    running_status(run_dir)
    mailbox.open_escalation(run_dir, "esc-1", "Which one?")
    PLANTS[kind](run_dir / "escalations" / "esc-1" / "answer.json", tmp_path / "outside.json")
    proc = invoke([*WRAPPER, "reply", str(run_dir), "--stop"], tmp_path)
    stderr = proc.stderr.decode()
    assert "Traceback" not in stderr
    assert "warning: ignored" in stderr
    assert proc.returncode == 1, "the planted file holds the answer's place"


def test_a_planted_result_json_is_not_shown_by_status(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    running_status(run_dir)
    status = json.loads((run_dir / "status.json").read_text())
    (run_dir / "status.json").write_text(json.dumps({**status, "state": "finished"}))
    os.mkfifo(run_dir / "result.json")
    proc = invoke([*WRAPPER, "status", str(run_dir)], tmp_path)
    assert proc.returncode == 0
    assert "warning: ignored" in proc.stderr.decode()
    assert "finished" in proc.stdout.decode()


# -- settings files -------------------------------------------------------------------


def settings_run(tmp_path: Path, settings: Path) -> subprocess.CompletedProcess[bytes]:
    scenario = write_scenario(tmp_path, answer("Done."))
    argv = wrapper_argv(tmp_path / "run", scenario, options=["--settings", str(settings)])
    return invoke(argv, tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "huge"])
def test_a_settings_file_that_is_not_a_regular_file_is_a_usage_error(
    tmp_path: Path, kind: str
) -> None:
    settings = tmp_path / "settings.json"
    if kind == "huge":
        with open(settings, "wb") as file:
            file.truncate(SETTINGS_MAX_BYTES + 1)
    else:
        PLANTS[kind](settings, tmp_path / "outside.json")
    started = time.monotonic()
    proc = settings_run(tmp_path, settings)
    assert time.monotonic() - started < PROMPT
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr
    assert "MemoryError" not in stderr
    assert f"--settings {settings}" in stderr
    assert "give a JSON settings file" in stderr or "cannot read it" in stderr
    assert not (tmp_path / "record.jsonl").exists(), "the agent never started"


def test_settings_through_a_symlink_to_a_regular_file_are_used(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text(json.dumps({"onStop": "allow"}))
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    proc = settings_run(tmp_path, link)
    assert proc.returncode == 0, proc.stderr.decode()


def test_task_file_still_reads_a_pipe(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, answer("Done."))
    argv = wrapper_argv(tmp_path / "run", scenario, task=None, options=["--task-file", "-"])
    proc = subprocess.run(
        argv,
        check=False,
        input=b"Do it",
        capture_output=True,
        timeout=HANG_LIMIT,
        env=agent_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert read_result(tmp_path / "run" / "result.json")["task"] == "Do it"


# -- a FIFO planted by the agent during a run -----------------------------------------

PLANT_SIGNAL_FIFO = shell(
    'mkdir -p "$AGENT_WRAPPER_RUN_DIR/signals" && '
    'mkfifo "$AGENT_WRAPPER_RUN_DIR/signals/00-planted.json"'
)


def test_a_fifo_in_signals_does_not_stop_the_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    run = run_wrapper(
        tmp_path,
        [PLANT_SIGNAL_FIFO, *answer("Done.")],
        options=["--on-stop", "signal", "--timeout", "3"],
        scenario_extra={"resumes": [long_tool()]},
    )
    assert time.monotonic() - started < PROMPT
    assert run.returncode == 124, run.stderr
    assert run.result["outcome"] == "timeout"
    [warning] = [w for w in run.result["warnings"] if w["code"] == "run_file_ignored"]
    assert "00-planted.json is not a regular file" in warning["message"]


def test_a_fifo_in_signals_does_not_stop_sigterm(tmp_path: Path) -> None:
    scenario = write_scenario(
        tmp_path, [PLANT_SIGNAL_FIFO, *answer("Done.")], resumes=[long_tool()]
    )
    proc = subprocess.Popen(
        wrapper_argv(tmp_path / "run", scenario, options=["--on-stop", "signal"]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=agent_env(tmp_path),
    )
    try:
        record = tmp_path / "record.jsonl"
        assert wait_until(lambda: record.exists() and len(record.read_text().splitlines()) >= 2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(PROMPT) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert read_result(tmp_path / "run" / "result.json")["outcome"] == "aborted"


def test_a_fifo_as_the_answer_does_not_stop_the_timeout(tmp_path: Path) -> None:
    plant = shell(
        'mkdir -p "$AGENT_WRAPPER_RUN_DIR/escalations/esc-1" && '
        'mkfifo "$AGENT_WRAPPER_RUN_DIR/escalations/esc-1/answer.json"'
    )
    run = run_wrapper(
        tmp_path,
        [plant, *answer("Which one?")],
        options=["--on-stop", "escalate", "--timeout", "3"],
    )
    assert run.returncode == 124, run.stderr
    assert any(w["code"] == "run_file_ignored" for w in run.result["warnings"])


# -- run ids on signals ---------------------------------------------------------------


def test_a_signal_of_another_run_never_ends_this_one(tmp_path: Path) -> None:
    # As if the agent of an earlier run in this directory signalled late.
    record = {"kind": "complete", "message": None, "attempt": 1, "runId": "earlier", "at": 0}
    plant = shell(
        'mkdir -p "$AGENT_WRAPPER_RUN_DIR/signals" && '
        f"printf '%s' '{json.dumps(record)}' > \"$AGENT_WRAPPER_RUN_DIR/signals/00-old.json\""
    )
    run = run_wrapper(
        tmp_path, [plant, *answer("Done.")], options=["--on-stop", "signal", "--max-steers", "0"]
    )
    assert run.returncode == 1
    assert run.result["error"]["kind"] == "no_completion_signal"


def test_a_signal_planted_before_the_run_never_ends_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "signals").mkdir(parents=True)
    (run_dir / RUN_MARKER).write_text(json.dumps({"runId": "earlier", "version": "0"}))
    stale = {"kind": "complete", "message": None, "attempt": 1, "runId": "earlier", "at": 0}
    (run_dir / "signals" / "00-old.json").write_text(json.dumps(stale))
    run = run_wrapper(
        tmp_path, answer("Done."), options=["--on-stop", "signal", "--max-steers", "0"]
    )
    assert run.result["error"]["kind"] == "no_completion_signal"


def test_signal_from_outside_carries_the_run_id_of_the_run_dir(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    running_status(run_dir)
    proc = invoke([*WRAPPER, "signal", "complete", "--run-dir", str(run_dir)], tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert [s["runId"] for s in mailbox.signals_of(run_dir, 1, "r")] == ["r"]


def test_signal_to_a_directory_without_a_run_fails(tmp_path: Path) -> None:
    proc = invoke([*WRAPPER, "signal", "complete", "--run-dir", str(tmp_path)], tmp_path)
    assert proc.returncode == 1
    assert "holds no agent-wrapper run" in proc.stderr.decode()


# -- reusing a run directory ----------------------------------------------------------


def test_a_directory_that_holds_no_run_is_refused_and_left_alone(tmp_path: Path) -> None:
    run_dir = tmp_path / "project"
    names = ["hooks", "signals", "escalations", "session.jsonl", "prompt.md", "task.md"]
    for name in names[:3]:
        (run_dir / name).mkdir(parents=True)
        (run_dir / name / "keep.txt").write_text("mine")
    for name in [*names[3:], "result.json"]:
        (run_dir / name).write_text("mine")
    before = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*"))
    scenario = write_scenario(tmp_path, answer("Done."))
    proc = invoke(wrapper_argv(run_dir, scenario), tmp_path)
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert (
        f"--run-dir {run_dir} is not empty and holds no agent-wrapper run; "
        "choose an empty or new directory (or remove it)"
    ) in stderr
    assert sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*")) == before
    assert (run_dir / "result.json").read_text() == "mine"


def test_an_empty_run_dir_argument_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("mine")
    scenario = write_scenario(tmp_path, answer("Done."))
    argv = wrapper_argv(None, scenario, options=["--run-dir", ""])
    proc = invoke(argv, tmp_path, cwd=tmp_path)
    assert proc.returncode == 2
    assert "--run-dir is empty" in proc.stderr.decode()
    assert not (tmp_path / "status.json").exists()


def test_reusing_a_run_dir_keeps_what_the_wrapper_did_not_create(tmp_path: Path) -> None:
    first = run_wrapper(tmp_path, answer("First."))
    marker = json.loads((first.run_dir / RUN_MARKER).read_text())
    assert marker["runId"] == first.result["runId"]
    (first.run_dir / "notes.txt").write_text("mine")
    # An ACP session of an earlier run is not this run's.
    (first.run_dir / "protocol.jsonl").write_text('{"t": 0, "dir": "in", "msg": {}}\n')
    (first.run_dir / "data").mkdir()
    (first.run_dir / "data" / "keep.txt").write_text("mine")
    second = run_wrapper(tmp_path, answer("Second."))
    assert second.result["finalText"] == "Second."
    assert second.result["runId"] != first.result["runId"]
    assert json.loads((second.run_dir / RUN_MARKER).read_text())["runId"] == second.result["runId"]
    assert (second.run_dir / "notes.txt").read_text() == "mine"
    assert (second.run_dir / "data" / "keep.txt").read_text() == "mine"
    assert not (second.run_dir / "protocol.jsonl").exists()


def test_a_run_dir_of_an_earlier_version_is_reused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "hooks").mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"runId": "earlier"}))
    (run_dir / "result.json").write_text('{"stale": true}')
    (run_dir / "notes.txt").write_text("mine")
    run = run_wrapper(tmp_path, answer("Done."))
    assert run.returncode == 0, run.stderr
    assert "stale" not in run.result
    assert not (run_dir / "hooks").exists()
    assert (run_dir / "notes.txt").read_text() == "mine"


def test_a_symlinked_own_folder_is_removed_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / RUN_MARKER).write_text(json.dumps({"runId": "earlier", "version": "0"}))
    (run_dir / "hooks").symlink_to(elsewhere)
    errors = artifacts.ArtifactErrors()
    assert artifacts.prepare_run_dir(run_dir, None, errors, "new")
    assert (elsewhere / "keep.txt").read_text() == "mine"
    assert not (run_dir / "hooks").exists()


# -- atomic writes --------------------------------------------------------------------


def test_a_symlink_planted_at_a_temp_name_does_not_redirect_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    folder = tmp_path / "run"
    folder.mkdir()
    # A planted symlink at every name the agent can guess: the name an
    # earlier version used and the next "random" one.
    names = iter(["guessed", "fresh", "fresh2"])
    monkeypatch.setattr(secrets, "token_hex", lambda _n: next(names))
    for name in (f".result.json.{os.getpid()}.tmp", ".result.json.guessed.tmp"):
        (folder / name).symlink_to(outside)
    atomic_write(folder / "result.json", b"new")
    assert outside.read_text() == "untouched"
    assert (folder / "result.json").read_bytes() == b"new"
    assert not (folder / "result.json").is_symlink()
    assert write_new(folder / "answer.json", b"first")
    assert outside.read_text() == "untouched"
    assert (folder / "answer.json").read_bytes() == b"first"


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    (tmp_path / "status.json").symlink_to(outside)
    atomic_write(tmp_path / "status.json", b"{}")
    assert outside.read_text() == "untouched"
    assert (tmp_path / "status.json").read_bytes() == b"{}"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# -- result.json with nowhere to go ---------------------------------------------------


def test_exit_3_says_so_and_its_json_tells_the_truth(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    scenario = write_scenario(tmp_path, answer("Done."))
    argv = wrapper_argv(
        blocker / "run", scenario, options=["--result", str(blocker / "result.json")]
    )
    proc = invoke(argv, tmp_path)
    assert proc.returncode == 3
    lines = proc.stderr.decode().strip().splitlines()
    assert lines[0].startswith("agent-wrapper: result.json could not be written anywhere (")
    assert f"{blocker} is not a directory" in lines[0]
    result = json.loads(lines[-1])
    validate("result", result)
    assert result["exitStatus"] == 3
    assert result["success"] is False
    assert result["finalText"] == "Done."
    for name in ("result", "runDir", "status", "events", "stdout", "stderr", "config"):
        assert result["artifacts"][name] is None, name
    assert "File exists" not in proc.stderr.decode()


def test_an_unwritable_result_falls_back_to_the_run_dir_and_says_so(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    run = run_wrapper(tmp_path, answer("Done."), options=["--result", str(blocker / "r.json")])
    assert run.returncode == 0
    fallback = run.run_dir / "result.json"
    assert run.result["artifacts"]["result"] == str(fallback)
    [line] = [line for line in run.stderr.splitlines() if "could not write result.json" in line]
    assert f"{blocker} is not a directory" in line
    assert line.endswith(f"wrote it to {fallback} instead")


def test_a_symlink_at_the_default_roots_gitignore_is_not_written_through(tmp_path: Path) -> None:
    root = tmp_path / ".agent-wrapper"
    root.mkdir()
    (root / ".gitignore").symlink_to(tmp_path / "planted-target")
    scenario = write_scenario(tmp_path, answer("Done."))
    proc = invoke(wrapper_argv(None, scenario), tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert not (tmp_path / "planted-target").exists()
    [run_dir] = (root / "runs").iterdir()
    assert read_result(run_dir / "result.json")["finalText"] == "Done."
