"""The Python API: one supervised run inside the caller's process.

``run`` blocks (it runs its own trio loop); ``run_async`` runs inside the
caller's trio loop, so that several runs can go on at once. An asyncio
caller runs ``run`` in a thread (``asyncio.to_thread``). Both write the
run directory and result.json exactly as ``agent-wrapper run`` does, and
return a ``RunResult`` that says what result.json says.

In the caller's process the wrapper keeps what belongs to one run: the
agent in its own session and process group, the completion decision, the
cleanup of the agent's group and tree, the Stop hooks, the run directory
and result.json, written whatever happens. It takes nothing that belongs
to the process: it installs no signal handlers, does not make the caller a
subreaper (a process that leaves the agent's session and parent is not
found) and starts no guardian (should the caller die, nobody writes the
result or ends the agent's tree). The command line gives all of those.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast, get_args

import trio

from wrapper.options import options_from, usage_errors
from wrapper.supervision.prepare import RunUsageError, prepare_run

if TYPE_CHECKING:
    from wrapper.commands.steer import Receipt
    from wrapper.supervision.run import Run

__all__ = [
    "RunErrorInfo",
    "RunOutcome",
    "RunResult",
    "RunUsageError",
    "abort",
    "run",
    "run_async",
    "steer",
]

#: Where the API says what it cannot put in a result (a library logs; it
#: never prints). Silent unless the host configures logging.
_LOG = logging.getLogger("wrapper")
_LOG.addHandler(logging.NullHandler())

#: What a run came to (result.json's ``outcome``; ``wrapper.Outcome`` as strings).
RunOutcome = Literal["ok", "error", "timeout", "aborted", "spawn_failed", "refused"]


class RunErrorInfo(TypedDict):
    """result.json's ``error``: why a run did not succeed."""

    #: One of the closed list of ``wrapper.ErrorKind`` values.
    kind: str
    message: str
    #: The provider's HTTP status when the agent reported a failed API call.
    apiStatus: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """What a run came to, as its result.json says (``data`` is all of it)."""

    outcome: RunOutcome
    success: bool
    #: What ``agent-wrapper run`` would have exited with.
    exit_status: int
    #: The canonical stop reason (``stop``, ``length``, ``toolUse``, ``aborted``,
    #: ``error``, or an unknown raw one kept as it was), None when unknown.
    stop_reason: str | None
    raw_stop_reason: str | None
    final_text: str | None
    #: ``{input, output, cacheRead, cacheWrite, totalTokens, costUsd}``, or None.
    usage: Mapping[str, Any] | None
    #: The run's directory, None when it could not be used.
    run_dir: Path | None
    #: Why the run did not succeed; None when it did.
    error: RunErrorInfo | None
    #: The whole result.json.
    data: Mapping[str, Any]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunResult:
        run_dir = (data.get("artifacts") or {}).get("runDir")
        outcome = data["outcome"]
        if outcome not in get_args(RunOutcome):
            raise ValueError(f"not an outcome of a run: {outcome!r}")
        error = data.get("error")
        return cls(
            outcome=outcome,
            success=bool(data["success"]),
            exit_status=int(data["exitStatus"]),
            stop_reason=data.get("stopReason"),
            raw_stop_reason=data.get("rawStopReason"),
            final_text=data.get("finalText"),
            usage=data.get("usage"),
            run_dir=Path(run_dir) if run_dir else None,
            # All of result.json's error, whatever it holds besides.
            error=None if error is None else cast(RunErrorInfo, dict(error)),
            data=data,
        )


def run(
    command: Sequence[str],
    *,
    task: str | None = None,
    dialect: str = "auto",
    run_dir: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> RunResult:
    """Run ``command`` (the agent with its own flags, JSON mode included)
    under supervision and wait for it; see ``run_async``. Called inside a
    trio loop it raises ``RuntimeError`` (use ``run_async`` there); from
    asyncio, run it in a thread (``asyncio.to_thread``).

    Ctrl-C (SIGINT, where the caller left Python's default handler) ends
    the run as a stop signal would: ``aborted``, the agent's tree ended,
    result.json and status.json final; then ``KeyboardInterrupt`` is raised.
    """
    if _in_trio():
        # trio's own refusal speaks of run() inside run(), not of what to call.
        raise RuntimeError(
            "wrapper.run blocks; inside a trio loop, await wrapper.run_async(...) instead"
        )
    result: RunResult = trio.run(
        _run_async_kw,
        command,
        {"task": task, "dialect": dialect, "run_dir": run_dir, "cwd": cwd, "env": env},
        options,
        # Delivered anywhere, the interrupt would tear the run apart mid-step
        # (no result.json); at the loop's main task it stops the run instead.
        restrict_keyboard_interrupt_to_checkpoints=True,
    )
    return result


def _in_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


async def _run_async_kw(
    command: Sequence[str], named: dict[str, Any], options: dict[str, Any]
) -> RunResult:
    return await run_async(command, **named, **options)


@trio.lowlevel.enable_ki_protection
async def run_async(
    command: Sequence[str],
    *,
    task: str | None = None,
    dialect: str = "auto",
    run_dir: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> RunResult:
    """Run ``command`` under supervision inside the caller's trio loop.

    ``options`` are the long options of ``agent-wrapper run`` in snake_case
    (``timeout=60``, ``settings=["hooks.json"]``, ``max_steers=2``, ...),
    checked as the command line checks them; the output is ``quiet`` unless
    ``output`` says otherwise. ``run_dir`` defaults to
    ``CWD/.agent-wrapper/runs/RUN_ID``; relative paths are taken from ``cwd``
    (default: the current directory). ``env`` is added to this process's
    environment for the agent and the hooks.

    Raises ``TypeError`` for an option that does not exist (naming the
    closest one) or a value of the wrong type (an ``env`` value that is not
    a string, a ``command`` given as one string), ``RunUsageError`` (a
    ``ValueError``) where the command line would exit 2 (a NUL character in
    ``command``, ``env``, ``cwd`` or an option included), and
    ``RuntimeError`` when awaited outside trio. Every message names the
    argument as passed here, never a flag. Everything that happens once the
    run starts is in the result. Cancelling the call ends the run as a stop
    signal would (``aborted``, ``interrupted``, its message saying the caller
    cancelled it; the agent's tree ended, result.json written) before the
    cancellation goes on.
    """
    if not _in_trio():
        # Awaited from asyncio (or another loop), trio's own error names
        # nothing the caller can act on.
        raise RuntimeError(
            "wrapper.run_async runs inside a trio loop; from asyncio, use "
            "await asyncio.to_thread(wrapper.run, command, ...) instead"
        )
    from wrapper.fleet.spec import check_command, check_cwd, check_env  # noqa: PLC0415
    from wrapper.supervision.run import Run  # noqa: PLC0415 - trio's part, once a run starts

    if isinstance(command, str):
        # A string is a sequence too: it would be taken one character an argument.
        raise TypeError(
            '"command" must be a list of strings (the argv), not one string: '
            f"pass shlex.split({command!r})"
        )
    with usage_errors():
        argv = check_command("command", command)
        base = Path.cwd() if cwd is None else check_cwd("cwd", cwd, Path.cwd())
        environ = {**os.environ, **check_env("env", {} if env is None else env)}
    try:
        namespace = options_from(
            {
                "task": task,
                "dialect": dialect,
                "run_dir": None if run_dir is None else os.fspath(run_dir),
                "output": "quiet",
                **options,
            },
            base,
        )
        prepared = prepare_run(namespace, argv, cwd=base, environ=environ, say_notes=False)
    except RunUsageError as exc:
        raise RunUsageError(_in_python_terms(str(exc))) from None
    # The caller has the result: nothing on its stderr either.
    the_run = Run(prepared.config, prepared.dialect, prepared.launch, environ, say_at_end=False)
    interrupted = await _execute(the_run)
    telemetry_module = sys.modules.get("wrapper.sinks.telemetry")
    if telemetry_module is not None:
        missing = telemetry_module.unavailable()
        if missing is not None:
            # Once a process, as the command line says it on its stderr.
            _LOG.warning("%s", missing)
    if the_run.telemetry is not None:
        from wrapper.sinks import telemetry  # noqa: PLC0415

        # Bounded: a collector that is down costs the caller that long at most.
        lost = await trio.to_thread.run_sync(telemetry.flush, environ)
        if lost is not None:
            # The caller's stderr is not ours: its logging decides.
            _LOG.warning("%s", lost)
    if interrupted:
        raise KeyboardInterrupt
    assert the_run.result is not None
    return RunResult.from_json(the_run.result)


#: One of the wrapper's own long options in a message of the shared checks,
#: and the value written right after it, if any (``--task-file PATH:``).
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)(?![\w-])(?: (\S+?)(?=: ))?")


def _in_python_terms(message: str) -> str:
    """``message`` of the checks the command line shares, with its options
    named as the caller passed them (``--task-file X`` -> ``task_file='X'``):
    someone calling ``wrapper.run`` has no flags to look for."""
    from wrapper.options import run_parser  # noqa: PLC0415

    actions = {
        flag: action
        for action in run_parser()._actions
        for flag in action.option_strings
        if flag.startswith("--")
    }

    def argument(match: re.Match[str]) -> str:
        action = actions.get(f"--{match[1]}")
        if action is None:  # not the wrapper's: an option of the agent's own
            return match[0]
        if action.const is False:  # a --no-X flag: what passing it sets
            return f"{action.dest}=False"
        return f"{action.dest}={match[2]!r}" if match[2] else f"{action.dest}="

    return _FLAG.sub(argument, message.removeprefix("run: "))


async def _execute(the_run: Run) -> bool:
    """Execute ``the_run`` in a task of its own, while this one waits for it
    where trio delivers a KeyboardInterrupt (to the loop's main task, as it
    waits); returns whether one came. Each is passed to the run as a SIGINT:
    the first stops it, a second hurries its cleanup, as on the command line.
    One that trio raised inside the run's own tasks has ended the run already
    (see ``Run.execute``) and counts the same."""
    from wrapper.supervision.facts import only_keyboard_interrupts  # noqa: PLC0415

    done = trio.Event()
    interrupted = False
    failed: list[Exception] = []

    @trio.lowlevel.enable_ki_protection
    async def execute() -> None:
        nonlocal interrupted
        try:
            await the_run.execute()
        except BaseException as exc:
            # Raised as themselves below, not in the nursery's group.
            if only_keyboard_interrupts(exc):
                # Raised in the run's code: it ended as SIGINT ends it.
                interrupted = True
            elif isinstance(exc, Exception):
                failed.append(exc)
            else:
                raise
        finally:
            done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(execute)
        while not done.is_set():
            try:
                await done.wait()
            except KeyboardInterrupt:
                interrupted = True
                the_run.interrupt(signal.SIGINT)
    if failed:
        raise failed[0]
    return interrupted


def steer(
    run_dir: str | os.PathLike[str],
    text: str,
    *,
    when: Literal["now", "next-stop"] = "now",
    wait: float = 30.0,
) -> Receipt:
    """Send the run in ``run_dir`` a new instruction, as ``agent-wrapper
    steer`` does, and wait up to ``wait`` seconds for its receipt:
    ``state`` is ``delivered`` (the agent acknowledged it or was resumed
    with it; ``how``: ``resume`` or ``live``), ``sent`` (written on a live
    agent's input, not acknowledged yet when the wait ended), ``refused``
    (``why``) or ``queued`` (not delivered yet when the wait ended; it stays
    queued) or ``busy`` (the run took no more requests just now: nothing
    was done, try again). ``when="next-stop"`` gives it when the agent next stops instead
    of ending the run. Callable from any thread or process while the run
    goes on; raises ``ValueError`` for a ``run_dir`` that holds no run, or
    for a text over ``STEER_MAX_BYTES`` (1 MiB) as UTF-8, which no run takes
    (a run whose agent takes its prompt on its command line takes less: its
    receipt is ``refused``, and ``why`` says how much)."""
    from wrapper.commands import steer as outside  # noqa: PLC0415

    if not isinstance(text, str) or not text.strip():
        raise ValueError("text is empty: say what the agent should do instead")
    if when not in ("now", "next-stop"):
        raise ValueError(f"when is 'now' or 'next-stop', not {when!r}")
    return outside.steer(Path(run_dir), text, when, wait)


def abort(
    run_dir: str | os.PathLike[str], reason: str | None = None, *, wait: float = 30.0
) -> Receipt:
    """End the run in ``run_dir`` now, as ``agent-wrapper abort`` does
    (outcome ``aborted``, error kind ``abort_requested``), and wait up to
    ``wait`` seconds for it to end: ``state`` is ``ended`` (with the run's
    ``outcome``), ``accepted`` (still ending when the wait ended) or
    ``refused`` (``why``: the run is not running, or already ending) or
    ``busy`` (try again)."""
    from wrapper.commands import steer as outside  # noqa: PLC0415

    return outside.abort(Path(run_dir), reason, wait)
