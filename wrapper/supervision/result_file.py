"""Writing result.json: where it was asked for, else in the run directory,
else as JSON on stderr, so that a run never ends without its result; and
what a person reading stderr is told once it is written."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from wrapper.core.config import RunConfig
from wrapper.core.jsonout import dumps
from wrapper.core.outcome import EXIT_NO_RESULT
from wrapper.files.artifacts import ArtifactErrors, atomic_write, dump_json, ensure_dir

#: Warnings repeated on stderr when the run ends, whatever the output mode: a
#: quality gate that broke or a settings problem must show in a CI log even
#: when nothing else is printed.
WARNINGS_AT_END = frozenset(
    {
        "settings_note",
        "hook_failed",
        "max_steers_reached",
        "steer_prompt_blocked",
        "hook_observers_cut",
        "hook_observers_dropped",
        "hook_context_dropped",
        "hook_context_cut",
        "silent_agent",
        "pre_tool_use_not_asked",
        "mcp_sdk_missing",
        "updated_input_refused",
    }
)


def write_result(
    config: RunConfig,
    render: Callable[[], dict[str, Any]],
    errors: ArtifactErrors,
    artifacts: dict[str, str | None],
) -> str | None:
    """Write result.json at --result, else in the run directory, else to stderr.

    Returns the path written, or None when only stderr was left. ``render``
    is called again after each failure so that the copy that lands records
    the failures before it. A person reading stderr is told, in one line,
    when result.json is not where it was asked for.
    """
    candidates = [config.result_path]
    fallback = config.run_dir / "result.json"
    if fallback != config.result_path:
        candidates.append(fallback)
    failed: list[str] = []
    for path in candidates:
        artifacts["result"] = str(path)
        try:
            ensure_dir(path.parent)
            atomic_write(path, dump_json(render()))
        except OSError as exc:
            errors.record(f"result:{path}", path, exc)
            failed.append(f"{path}: {exc.strerror or exc}")
            continue
        if failed:
            _say(f"could not write result.json at {'; '.join(failed)}; wrote it to {path} instead")
        return str(path)
    artifacts["result"] = None
    result = render()
    # What this JSON says must match what the wrapper exits with.
    result["exitStatus"] = EXIT_NO_RESULT
    result["success"] = False
    _say(
        f"result.json could not be written anywhere ({'; '.join(failed)}); "
        f"the result follows as JSON on the next line (exit status {EXIT_NO_RESULT}). "
        "Give a writable --result or --run-dir."
    )
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.buffer.write(dumps(result) + b"\n")
        sys.stderr.buffer.flush()
    return None


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"agent-wrapper: {line}", file=sys.stderr, flush=True)


def say_at_end(
    warnings: list[dict[str, Any]], outcome: str, error: dict[str, Any] | None, written: str | None
) -> None:
    """On stderr, where no live view showed them: the warnings of
    ``WARNINGS_AT_END``, and a failed run's error with where its result is
    (a CI job's log, a runner's capture get one line)."""
    for warning in warnings:
        if warning["code"] in WARNINGS_AT_END:
            text = " ".join(str(warning["message"]).split())
            _say(f"warning: {text}")
    if error is not None and written is not None:
        _say(f"{outcome}: {error['message']} (result: {written})")
