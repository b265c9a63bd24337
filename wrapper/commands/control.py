"""The small subcommands around a running wrapper: ``signal`` (from inside the
agent's session), ``reply`` and ``status`` (for a person). Exit 0 on
success, 1 on failure, 2 on usage errors."""

from __future__ import annotations

import os
import secrets
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from wrapper.core import environment
from wrapper.core.jsonout import dumps
from wrapper.core.limits import REPLY_POLL, REPLY_VERDICT_TIMEOUT
from wrapper.files import mailbox, rundir
from wrapper.process.invocation import wrapper_command

PROG = "agent-wrapper"


def _fail(command: str, message: str, status: int = 1) -> int:
    print(f"{PROG} {command}: {message}", file=sys.stderr)
    return status


def _warner(command: str) -> mailbox.Warn:
    return lambda message: print(f"{PROG} {command}: warning: {message}", file=sys.stderr)


def signal_main(kind: str, message: str | None, run_dir: str | None) -> int:
    """``agent-wrapper signal complete|escalate|continue [--message TEXT]``."""
    folder = run_dir or os.environ.get(environment.RUN_DIR)
    if not folder:
        return _fail(
            "signal",
            "not inside a wrapped run (AGENT_WRAPPER_RUN_DIR is not set); "
            "give --run-dir to signal a run from outside",
        )
    # Inside the agent's session the wrapper's environment names the run;
    # from outside, the run directory does.
    run_id = (None if run_dir else os.environ.get(environment.RUN_ID)) or mailbox.run_id_in(
        Path(folder)
    )
    if run_id is None:
        return _fail(
            "signal",
            f"{folder} holds no agent-wrapper run (no status.json or run marker names one); "
            "give the --run-dir of a running wrapper",
        )
    status = rundir.read_status(Path(folder), _warner("signal"))
    if status and status.get("runId") == run_id and status.get("state") == "finished":
        return _fail(
            "signal",
            f"run {run_id} is over (outcome {status.get('outcome')}): nobody reads a signal now",
        )
    try:
        attempt = int(os.environ.get(environment.ATTEMPT, "0")) or _current_attempt(Path(folder))
        mailbox.send_signal(Path(folder), kind, message, attempt, run_id)
    except (OSError, ValueError, mailbox.MailboxError) as exc:
        return _fail("signal", str(exc))
    print(f"signalled {kind} to run {Path(folder).name} (attempt {attempt})")
    return 0


def _current_attempt(run_dir: Path) -> int:
    status = rundir.read_status(run_dir, _warner("signal"))
    attempt = status.get("attempt") if status else None
    if not isinstance(attempt, int):
        raise ValueError(f"{run_dir}: no status.json says which attempt is running")
    return attempt


def reply_main(
    run_dir: str, text: str | None, *, go_on: bool, stop: bool, escalation: str | None = None
) -> int:
    """``agent-wrapper reply RUN_DIR TEXT | --continue | --stop [--escalation ID]``."""
    if sum((text is not None, go_on, stop)) != 1:
        return _fail("reply", "give exactly one of TEXT, --continue or --stop", 2)
    folder = Path(run_dir)
    warn = _warner("reply")
    status = rundir.read_status(folder, warn)
    run_id = status.get("runId") if status else None
    if status is None or not isinstance(run_id, str):
        return _fail("reply", f"{folder} is not the directory of a wrapped run (no status.json)")
    target = escalation or mailbox.latest_escalation(folder, warn)
    if target is None:
        return _fail("reply", f"no question has been asked in {folder}")
    if (
        "/" in target
        or target.startswith(".")
        or mailbox.read_json(folder / "escalations" / target / "question.json", warn) is None
    ):
        return _fail("reply", f"{folder} has no escalation {target!r}")
    earlier = mailbox.answer_of(folder, target, run_id, warn)
    if earlier is None and not rundir.wrapper_alive(status.get("wrapperPid")):
        return _fail(
            "reply",
            f"the wrapper of this run (pid {status.get('wrapperPid')}) is gone: "
            f"nobody is waiting for an answer to {target}",
        )
    kind = "text" if text is not None else "continue" if go_on else "stop"
    nonce = secrets.token_hex(16)
    try:
        first = earlier is None and mailbox.answer(folder, target, kind, run_id, text, nonce=nonce)
    except (OSError, mailbox.MailboxError) as exc:
        return _fail("reply", str(exc))
    if not first:
        return _fail(
            "reply", _answered(target, earlier or mailbox.answer_of(folder, target, None, warn))
        )
    # A stop is given to nobody as a prompt: no handler refuses it.
    refused = _verdict(folder, target, nonce, status.get("wrapperPid")) if kind != "stop" else None
    if refused is not None:
        return _fail("reply", f"{target}: the answer was not taken: {refused}")
    print(f"answered {target} ({kind})")
    return 0


def _verdict(folder: Path, escalation: str, nonce: str, wrapper_pid: object) -> str | None:
    """Wait for the run to take the answer sent with ``nonce`` (its prompt
    handlers may refuse a reply the agent would be given): None when it
    did, else why not."""
    deadline = time.monotonic() + REPLY_VERDICT_TIMEOUT
    while True:
        verdict = mailbox.verdict_of(folder, escalation, nonce)
        if verdict is not None:
            refused = verdict.get("refused")
            if refused is None:
                return None
            return f"{refused}; the question is still open: answer it again"
        if not rundir.wrapper_alive(wrapper_pid):
            return f"the wrapper of this run (pid {wrapper_pid}) ended before it read the answer"
        if time.monotonic() > deadline:
            return (
                f"the run did not say within {REPLY_VERDICT_TIMEOUT:g}s whether it took it "
                "(its prompt handlers still run?); see its status"
            )
        time.sleep(REPLY_POLL)


def _answered(escalation: str, earlier: dict[str, object] | None) -> str:
    """Why a reply to ``escalation`` came too late, from the answer that won."""
    kind = earlier.get("kind") if earlier else None
    if kind == "timeout":
        return (
            f"{escalation} was already answered: nobody replied within the escalation "
            "timeout, so the agent was allowed to stop"
        )
    if kind == "closed":
        return f"{escalation} was already answered: the run ended while it was waiting"
    return f"{escalation} was already answered ({kind})"


def status_main(run_dir: str, as_json: bool) -> int:
    """``agent-wrapper status RUN_DIR [--json]``."""
    folder = Path(run_dir)
    warn = _warner("status")
    status = rundir.read_status(folder, warn)
    if status is None:
        return _fail("status", f"{folder} has no readable status.json: not a run directory?")
    result = rundir.read_result(folder, status, warn) if status.get("state") == "finished" else None
    wrapper_gone = status.get("state") != "finished" and not rundir.wrapper_alive(
        status.get("wrapperPid")
    )
    error = result.get("error") if result else None
    wrapper_killed = wrapper_gone or (
        isinstance(error, dict) and error.get("kind") == "wrapper_killed"
    )
    # A runner polling this must tell a failed run from one still going or
    # done well without parsing the text: a run that ended not ok, or that
    # its wrapper did not live to finish, exits 1.
    exit_status = 1 if wrapper_killed or not _ended_well(status, result) else 0
    if as_json:
        out = {"status": status, "result": result}
        sys.stdout.buffer.write(dumps(out, option=orjson.OPT_INDENT_2) + b"\n")
        return exit_status
    name = status.get("runId", folder.name)
    if status.get("label"):
        name = f"{name} ({status['label']})"
    state = status.get("state")
    if wrapper_killed and not wrapper_gone:
        lines = [
            f"{name}: ended because the wrapper (pid {status.get('wrapperPid')}) was killed; "
            "what remained of it ended the run's processes and wrote the result (outcome "
            f"{result.get('outcome') if result else status.get('outcome')})"
        ]
        if isinstance(error, dict) and error.get("message"):
            lines.append(f"  {error['message']}")
    elif state == "finished":
        outcome = result.get("outcome") if result else status.get("outcome")
        success = "success" if result and result.get("success") else "not a success"
        lines = [f"{name}: finished, outcome {outcome} ({success})"]
        if result and result.get("error"):
            lines.append(f"  {result['error']['message']}")
    elif wrapper_gone:
        lines = [
            f"{name}: ended without finishing ({state}, attempt {status.get('attempt')}): "
            f"the wrapper (pid {status.get('wrapperPid')}) is gone and wrote no result"
        ]
    elif state == "waiting":
        escalation = status.get("escalationId")
        # A command a person pastes: quoted, and naming the question it answers.
        reply = f"{wrapper_command()} reply {shlex.quote(str(folder))}"
        if isinstance(escalation, str):
            reply += f" --escalation {shlex.quote(escalation)}"
        lines = [
            f"{name}: waiting for a person (escalation {escalation})",
            f"  question: {status.get('question') or '(none given)'}",
            f"  answer with: {reply} 'your answer'   (or --continue, or --stop)",
        ]
    else:
        tool = f", running tool {status['currentTool']}" if status.get("currentTool") else ""
        agent = f", agent pid {status['pid']}" if status.get("pid") else ""
        lines = [f"{name}: {state}, attempt {status.get('attempt')}{agent}{tool}"]
    pending = status.get("pendingSteers") if state != "finished" else None
    if isinstance(pending, list) and pending:
        ids = ", ".join(f"{p.get('id')} ({p.get('when')})" for p in pending if isinstance(p, dict))
        lines.append(f"  steers waiting to be delivered: {ids}")
    print("\n".join(lines))
    return exit_status


def _ended_well(status: dict[str, Any], result: dict[str, Any] | None) -> bool:
    """Whether the run is still going, or finished as a success (result.json's
    ``success``, else status.json's outcome when the result is unreadable; a
    run with neither is not said to have failed)."""
    if status.get("state") != "finished":
        return True
    if result is not None:
        return result.get("success") is True
    return status.get("outcome") in (None, "ok")
