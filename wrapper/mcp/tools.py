"""What each tool of the server does, as plain async methods over the
registry: JSON-ready dicts in snake_case, each bounded (no answer over
``MCP_ANSWER_MAX_CHARS``), or a ``ToolError`` whose message a model can
act on. The same receipts the command line gets: a steer and an abort go
in process through the run's ``ExternalControl`` (what the run's socket
serves), a reply through the run's mailbox.

One module, though long: the tools side by side, with the checks of their
arguments and the shapes of their answers, so that what a client gets from
each is read in one place.
"""

from __future__ import annotations

import math
import os
import secrets
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio

from wrapper.core.control import AbortRequest, SteerRequest, text_bytes
from wrapper.core.cost import run_cost
from wrapper.core.jsonout import dumps
from wrapper.core.limits import (
    MCP_ABORT_WAIT,
    MCP_ANSWER_MAX_CHARS,
    MCP_EVENTS_MAX,
    MCP_LIST_DEFAULT,
    MCP_LIST_MAX,
    MCP_PREVIEW_CHARS,
    MCP_QUOTE_CHARS,
    MCP_RESULT_DEFAULT_CHARS,
    MCP_RESULT_MAX_CHARS,
    MCP_START_POLL,
    MCP_START_SETTLE,
    MCP_STEER_READY_WAIT,
    MCP_STEER_WAIT,
    MCP_WAIT_DEFAULT,
    MCP_WAIT_MAX,
    MCP_WAIT_PROGRESS_EVERY,
    REPLY_POLL,
    REPLY_VERDICT_TIMEOUT,
    STEER_MAX_BYTES,
)
from wrapper.core.timefmt import iso
from wrapper.files import mailbox
from wrapper.files.artifacts import atomic_write
from wrapper.mcp.presets import PRESETS
from wrapper.mcp.registry import Entry, Runs, ToolError

#: Called while a tool waits (wait, steer, abort, reply): seconds waited so
#: far, and a line saying what for (the SDK's glue sends it as a progress
#: notification).
Progress = Callable[[float, str], Awaitable[None]]

#: The file beside result.json that holds a run's whole final text.
FINAL_TEXT_FILE = "final.txt"

ON_STOP = ("allow", "signal", "idle", "escalate")


def _quote(text: object, limit: int = MCP_QUOTE_CHARS) -> str | None:
    if not isinstance(text, str):
        return None
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more]"


def _number(name: str, value: object, *, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ToolError(f"{name} must be a number of seconds, not {value!r}")
    if not low < value <= high:
        raise ToolError(f"{name} must be more than {low:g} and at most {high:g} seconds")
    return float(value)


def _count(name: str, value: object, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ToolError(f"{name} must be a whole number from {low} to {high}, not {value!r}")
    return value


class Tools:
    """The tools over one registry. ``progress_every``: how often ``wait``
    reports progress (``MCP_WAIT_PROGRESS_EVERY``)."""

    def __init__(self, runs: Runs, *, progress_every: float = MCP_WAIT_PROGRESS_EVERY) -> None:
        self.runs = runs
        self.progress_every = progress_every

    @asynccontextmanager
    async def _reporting(
        self, progress: Progress | None, saying: Callable[[], str]
    ) -> AsyncIterator[None]:
        """While the block waits, ``progress`` every ``progress_every``
        seconds (seconds waited, and what ``saying`` says of it): a client
        that resets its tool timeout on progress keeps the call open."""
        if progress is None:
            yield
            return
        began = trio.current_time()

        async def report() -> None:
            while True:
                await trio.sleep(self.progress_every)
                await progress(trio.current_time() - began, saying())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(report)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()

    # -- start --------------------------------------------------------------------

    async def start(
        self,
        *,
        task: str,
        command: Sequence[str] | None = None,
        agent: str | None = None,
        live: bool = False,
        label: str | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        settings: str | list[str] | None = None,
        max_steers: int | None = None,
        on_stop: str | None = None,
        max_cost: float | None = None,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        """Start a run and return at once: ``{run_id, run_dir, state}``."""
        if not isinstance(task, str) or not task.strip():
            raise ToolError("task is empty: say what the agent should do")
        if (command is None) == (agent is None):
            raise ToolError(
                "give either command (the agent's argv, JSON mode included) or agent "
                f"(one of: {', '.join(PRESETS)}), not both or neither"
            )
        if agent is not None:
            preset = PRESETS.get(agent) if isinstance(agent, str) else None
            if preset is None:
                raise ToolError(f"no agent {agent!r}: the agents are {', '.join(PRESETS)}")
            argv = list(preset.live if live and preset.live is not None else preset.command)
        else:
            if isinstance(command, str) or not isinstance(command, list | tuple):
                raise ToolError("command must be a list of strings (the argv), not one string")
            argv = list(command)
        if label is not None and not isinstance(label, str):
            raise ToolError("label must be a string")
        options: dict[str, Any] = {}
        if timeout is not None:
            options["timeout"] = _number("timeout", timeout, low=0, high=math.inf)
        if max_steers is not None:
            options["max_steers"] = _count("max_steers", max_steers, low=0, high=1000)
        if on_stop is not None:
            if on_stop not in ON_STOP:
                raise ToolError(f"on_stop must be one of {', '.join(ON_STOP)}, not {on_stop!r}")
            options["on_stop"] = on_stop
        if settings is not None:
            options["settings"] = settings
        if max_cost is not None:
            if isinstance(max_cost, bool) or not isinstance(max_cost, int | float):
                raise ToolError(f"max_cost must be a number of US dollars, not {max_cost!r}")
            if not math.isfinite(max_cost) or max_cost <= 0:
                raise ToolError("max_cost must be more than 0 US dollars")
            options["max_cost"] = max_cost
        if max_tokens is not None:
            options["max_tokens"] = _count("max_tokens", max_tokens, low=1, high=2**62)
        entry = self.runs.start(argv, task=task, label=label, cwd=cwd, options=options)
        # Until the agent is spawned (or could not be): a program that will
        # not start is told to the caller now, as a refusal it can act on.
        with trio.move_on_after(MCP_START_SETTLE):
            while entry.run.status.fields.get("pid") is None and not entry.ended:
                await trio.sleep(MCP_START_POLL)
        error = (entry.result or {}).get("error")
        if entry.ended and isinstance(error, Mapping) and error.get("kind") == "spawn_failed":
            raise ToolError(
                f"the agent could not be started ({_quote(error.get('message'))}); its run "
                f"{entry.run_id} ended: check the command, or start another agent"
            )
        return {"run_id": entry.run_id, "run_dir": str(entry.run_dir), "state": _state(entry)}

    # -- wait ---------------------------------------------------------------------

    async def wait(
        self,
        *,
        run_ids: Sequence[str] | None = None,
        mode: str = "any",
        timeout: float = MCP_WAIT_DEFAULT,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Wait until any (or all) of ``run_ids`` (default: every run going
        on) ended, or ``timeout``: ``{ended: [short results], running:
        [states], timed_out}``."""
        if mode not in ("any", "all"):
            raise ToolError(f"mode must be 'any' or 'all', not {mode!r}")
        seconds = _number("timeout", timeout, low=0, high=MCP_WAIT_MAX)
        if run_ids is None:
            entries = self.runs.going()
        else:
            if isinstance(run_ids, str) or not isinstance(run_ids, list | tuple):
                raise ToolError("run_ids must be a list of run ids")
            entries = [self.runs.get(run_id) for run_id in dict.fromkeys(run_ids)]

        def done() -> bool:
            ended = [entry.ended for entry in entries]
            return any(ended) if mode == "any" else all(ended)

        timed_out = False
        if entries and not done():
            changed = trio.Event()

            async def watch(entry: Entry) -> None:
                await entry.ended_event.wait()
                if done():
                    changed.set()

            def going() -> str:
                still = sum(not entry.ended for entry in entries)
                return f"{still} of {len(entries)} runs still going"

            async with self._reporting(progress, going), trio.open_nursery() as nursery:
                for entry in entries:
                    nursery.start_soon(watch, entry)
                with trio.move_on_after(seconds):
                    await changed.wait()
                timed_out = not changed.is_set()
                nursery.cancel_scope.cancel()
        ended = [_short_result(entry) for entry in entries if entry.ended]
        running = [self._state_of(entry) for entry in entries if not entry.ended]
        return _bounded(
            {"ended": ended, "running": running, "timed_out": timed_out}, ("ended", "running")
        )

    # -- status, events, list -----------------------------------------------------

    async def status(self, *, run_id: str | None = None) -> dict[str, Any]:
        """One run's state (``run_id``), or every run's going on."""
        if run_id is None:
            runs = [self._state_of(entry) for entry in self.runs.going()]
            return _bounded({"runs": runs}, ("runs",))
        return self._state_of(self.runs.get(run_id))

    def _state_of(self, entry: Entry) -> dict[str, Any]:
        run = entry.run
        status = run.status.fields
        usage = run.summary.total.to_json() if run.summary.total is not None else None
        result = entry.result or {}
        # A run going on costs what its ledger says so far (the agent's own
        # figures, and those priced already).
        cost = run_cost(entry.result or {"cost": run.spending.to_json()})
        return {
            "run_id": entry.run_id,
            "label": entry.label,
            "state": _state(entry),
            "attempt": status.get("attempt"),
            "current_tool": None if entry.ended else run.summary.current_tool,
            "elapsed_s": round(_elapsed(entry), 1),
            "last_event_at": status.get("lastEventAt"),
            "tokens": None if usage is None else usage.get("totalTokens"),
            "cost_usd": cost.usd,
            "cost_source": cost.source,
            "steers_pending": len(run.external.queued) if not entry.ended else 0,
            "question": _quote(status.get("question")) if _state(entry) == "waiting" else None,
            "escalation_id": status.get("escalationId") if _state(entry) == "waiting" else None,
            "outcome": result.get("outcome"),
            "run_dir": str(entry.run_dir),
        }

    async def events(
        self, *, run_id: str, since: int = 0, limit: int = MCP_EVENTS_MAX
    ) -> dict[str, Any]:
        """The run's normalized events after seq ``since``, text deltas
        merged: ``{events, next_since, more}``."""
        entry = self.runs.get(run_id)
        since = _count("since", since, low=0, high=2**62)
        limit = _count("limit", limit, low=1, high=MCP_EVENTS_MAX)
        path = entry.run_dir / "events.jsonl"
        events, next_since, more, entry.events_cursor = await trio.to_thread.run_sync(
            _read_events, path, since, limit, entry.events_cursor
        )
        return {"run_id": entry.run_id, "events": events, "next_since": next_since, "more": more}

    async def list(self, *, limit: int = MCP_LIST_DEFAULT) -> dict[str, Any]:
        """This server's runs, newest first."""
        limit = _count("limit", limit, low=1, high=MCP_LIST_MAX)
        entries = sorted(self.runs.entries.values(), key=lambda e: e.started, reverse=True)
        runs = [
            {
                "run_id": entry.run_id,
                "label": entry.label,
                "state": _state(entry),
                "outcome": (entry.result or {}).get("outcome"),
                "started_at": iso(entry.started_at),
                "run_dir": str(entry.run_dir),
            }
            for entry in entries[:limit]
        ]
        return _bounded({"runs": runs, "total": len(entries)}, ("runs",))

    # -- steer, abort, reply ------------------------------------------------------

    async def steer(
        self, *, run_id: str, text: str, when: str = "now", progress: Progress | None = None
    ) -> dict[str, Any]:
        """The steer's receipt, as ``agent-wrapper steer --json`` gives it."""
        entry = self.runs.get(run_id)
        if not isinstance(text, str) or not text.strip():
            raise ToolError("text is empty: say what the agent should do instead")
        if when not in ("now", "next-stop"):
            raise ToolError(f"when must be 'now' or 'next-stop', not {when!r}")
        if text_bytes(text) > STEER_MAX_BYTES:
            raise ToolError(
                f"the text is more than the {STEER_MAX_BYTES} bytes a steer may hold; "
                "put it in a file the agent can read and steer it there"
            )
        if entry.ended:
            return _receipt("refused", why=_not_running(entry))
        run = entry.run
        # Right after start the first attempt may not be under way yet.
        with trio.move_on_after(MCP_STEER_READY_WAIT):
            while run.supervisor is None and not entry.ended:
                await trio.sleep(0.02)
        if entry.ended:
            return _receipt("refused", why=_not_running(entry))
        steer = run.external.steer(SteerRequest(text, "now" if when == "now" else "next-stop"))
        said: dict[str, Any] | None = steer.receipt()

        def saying() -> str:
            return f"the steer is {(said or {}).get('state')}"

        with trio.move_on_after(MCP_STEER_WAIT):
            async with self._reporting(progress, saying):
                while said is not None and said["state"] in ("queued", "sent"):
                    last = said
                    said = await run.external.changed(steer, said["state"])
                    if said is None:
                        said = last
                        break
        assert said is not None
        return _receipt(
            said["state"],
            id=said.get("id"),
            how=said.get("how"),
            why=said.get("why"),
            attempt=said.get("attempt"),
        )

    async def abort(
        self, *, run_id: str, reason: str | None = None, progress: Progress | None = None
    ) -> dict[str, Any]:
        """End the run; the receipt (``ended`` with the outcome, ``accepted``
        when still ending at the wait's end, ``refused``)."""
        entry = self.runs.get(run_id)
        if reason is not None and not isinstance(reason, str):
            raise ToolError("reason must be a string")
        if entry.ended:
            return _receipt("refused", why=_not_running(entry))
        refused = entry.run.external.abort(AbortRequest(reason))
        if refused is not None:
            return _receipt("refused", why=refused)
        with trio.move_on_after(MCP_ABORT_WAIT):
            async with self._reporting(progress, lambda: "the run is ending"):
                await entry.ended_event.wait()
        if not entry.ended:
            return _receipt("accepted")
        return _receipt("ended", outcome=(entry.result or {}).get("outcome"))

    async def reply(
        self,
        *,
        run_id: str,
        text: str | None = None,
        go_on: bool = False,
        stop: bool = False,
        escalation_id: str | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Answer the question the run asked (its latest escalation, or
        ``escalation_id``): with ``text``, ``go_on`` (continue) or ``stop``."""
        entry = self.runs.get(run_id)
        if sum((text is not None, bool(go_on), bool(stop))) != 1:
            raise ToolError("give exactly one of text, continue or stop")
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise ToolError("text is empty: say what the agent should be told")
        folder = entry.run_dir
        target = escalation_id or mailbox.latest_escalation(folder)
        if target is None:
            raise ToolError(
                f"run {run_id} asked no question: reply answers a question (status shows "
                "one when the run is waiting); use steer to tell a running agent something"
            )
        if (
            not isinstance(target, str)
            or "/" in target
            or target.startswith(".")
            or mailbox.read_json(folder / "escalations" / target / "question.json") is None
        ):
            raise ToolError(f"run {run_id} has no question {target!r}: see status's escalation_id")
        kind = "text" if text is not None else "continue" if go_on else "stop"
        earlier = mailbox.answer_of(folder, target, entry.run_id)
        if earlier is None and entry.ended:
            raise ToolError(f"{target} can no longer be answered: {_not_running(entry)}")
        nonce = secrets.token_hex(16)
        try:
            first = earlier is None and mailbox.answer(
                folder, target, kind, entry.run_id, text, nonce=nonce
            )
        except (OSError, mailbox.MailboxError) as exc:
            raise ToolError(f"could not write the answer: {exc}") from None
        if not first:
            earlier = earlier or mailbox.answer_of(folder, target, None)
            said = (earlier or {}).get("kind")
            raise ToolError(f"{target} was already answered ({said}): see status")
        # The run's prompt handlers may refuse a reply the agent would be
        # given (a stop is given to nobody: it is taken as it is).
        verdict = None
        with trio.move_on_after(REPLY_VERDICT_TIMEOUT if kind != "stop" else 0):
            async with self._reporting(progress, lambda: "the run is taking the answer"):
                while (verdict := mailbox.verdict_of(folder, target, nonce)) is None:
                    if entry.ended:
                        break
                    await trio.sleep(REPLY_POLL)
        refused = verdict.get("refused") if verdict is not None else None
        if refused is not None:
            raise ToolError(
                f"{target}: the answer was not taken: {refused}; the question is still open"
            )
        return {"run_id": entry.run_id, "escalation_id": target, "answered": kind}

    # -- result -------------------------------------------------------------------

    async def result(
        self, *, run_id: str, max_chars: int = MCP_RESULT_DEFAULT_CHARS
    ) -> dict[str, Any]:
        """What the run came to; a final text over ``max_chars`` is cut, and
        the whole of it is in ``final_text_path``."""
        entry = self.runs.get(run_id)
        max_chars = _count("max_chars", max_chars, low=0, high=MCP_RESULT_MAX_CHARS)
        if not entry.ended:
            raise ToolError(
                f"run {run_id} is still {_state(entry)}: call wait (or status) until it "
                "ended, or abort it"
            )
        result = entry.result
        if result is None:
            raise ToolError(
                f"run {run_id} wrote no result ({entry.failure or 'see its run_dir'}): "
                f"look in {entry.run_dir}"
            )
        final = result.get("finalText")
        path = await self.final_text_file(entry)
        error = result.get("error")
        usage = result.get("usage")
        cost = run_cost(result)
        artifacts = result.get("artifacts") or {}
        return {
            "run_id": entry.run_id,
            "outcome": result.get("outcome"),
            "stop_reason": result.get("stopReason"),
            "exit_status": result.get("exitStatus"),
            "error": None
            if not isinstance(error, Mapping)
            else {"kind": error.get("kind"), "message": _quote(error.get("message"))},
            "final_text": final[:max_chars] if isinstance(final, str) else None,
            "final_text_truncated": isinstance(final, str) and len(final) > max_chars,
            "final_text_chars": len(final) if isinstance(final, str) else 0,
            "final_text_path": None if path is None else str(path),
            "usage": usage,
            "cost_usd": cost.usd,
            "cost_source": cost.source,
            # Every steer the agent was given: its Stop hooks' and policies',
            # and those from outside (this server's steer among them).
            "steers": _count_of(result, "steerCount") + _count_of(result, "externalSteerCount"),
            "result_path": artifacts.get("result") or str(entry.prepared.config.result_path),
        }

    async def final_text_file(self, entry: Entry) -> Path | None:
        """The file that holds the run's whole final text (written the first
        time it is asked for), or None when the run has none (yet)."""
        final = (entry.result or {}).get("finalText")
        if not entry.ended or not isinstance(final, str):
            return None
        path = entry.run_dir / FINAL_TEXT_FILE
        # Written once, by this server: anything else in its place (the
        # agent works in reach of its run directory: a FIFO, a link) is
        # replaced, never read or handed on.
        if not _regular_file(path) or entry.final_written is not path:
            data = final.encode("utf-8", errors="replace")
            try:
                await trio.to_thread.run_sync(atomic_write, path, data)
            except OSError as exc:
                raise ToolError(f"could not write {path}: {exc}") from None
            entry.final_written = path
        return path


def _regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _count_of(result: Mapping[str, Any], key: str) -> int:
    value = result.get(key)
    return value if isinstance(value, int) else 0


def _state(entry: Entry) -> str:
    if entry.ended:
        return "finished"
    status = entry.run.status.fields
    state = status.get("state")
    return state if isinstance(state, str) else "starting"


def _elapsed(entry: Entry) -> float:
    took = (entry.result or {}).get("durationMs")
    if entry.ended and isinstance(took, int):
        return took / 1000
    return trio.current_time() - entry.started


def _not_running(entry: Entry) -> str:
    outcome = (entry.result or {}).get("outcome")
    return f"the run is not running: it ended ({outcome or 'no result'})"


def _receipt(state: str, **fields: Any) -> dict[str, Any]:
    """A receipt in the shape ``agent-wrapper steer --json`` and ``abort --json`` print."""
    base: dict[str, Any] = {
        "state": state,
        "id": None,
        "how": None,
        "why": None,
        "attempt": None,
        "outcome": None,
    }
    base.update(fields)
    if isinstance(base["why"], str):
        base["why"] = _quote(base["why"])
    return base


def _short_result(entry: Entry) -> dict[str, Any]:
    result = entry.result or {}
    cost = run_cost(entry.result)
    error = result.get("error")
    return {
        "run_id": entry.run_id,
        "label": entry.label,
        "outcome": result.get("outcome"),
        "exit_status": result.get("exitStatus"),
        "error": _quote(error.get("message"), MCP_PREVIEW_CHARS)
        if isinstance(error, Mapping)
        else entry.failure,
        "final_text_preview": _quote(result.get("finalText"), MCP_PREVIEW_CHARS),
        "cost_usd": cost.usd,
        "cost_source": cost.source,
    }


def _bounded(answer: dict[str, Any], lists: Sequence[str]) -> dict[str, Any]:
    """``answer`` with its lists cut from the end until it fits the bound;
    ``omitted`` says how many entries were left out."""
    omitted = 0
    while len(dumps(answer)) > MCP_ANSWER_MAX_CHARS:
        longest = max(lists, key=lambda key: len(answer[key]))
        if not answer[longest]:
            break
        answer[longest] = answer[longest][:-1]
        omitted += 1
    if omitted:
        answer["omitted"] = omitted
    return answer


def _read_events(
    path: Path, since: int, limit: int, cursor: tuple[int, int]
) -> tuple[list[dict[str, Any]], int, bool, tuple[int, int]]:
    """Events of ``path`` after seq ``since``: at most ``limit``, text
    deltas merged, the whole within the answer's bound; and where the next
    read may start. ``cursor`` is such a place of an earlier read (a seq
    and the offset of the line after it), so that following a long run
    does not read it from its start at each call."""
    events: list[dict[str, Any]] = []
    size = 0
    last = since
    more = False
    seen, offset = cursor if cursor[0] <= since else (0, 0)
    try:
        file = path.open("rb")
    except OSError:
        return [], since, False, cursor
    with file:
        file.seek(offset)
        for line in file:
            if not line.endswith(b"\n"):
                break  # a line still being written: the next call reads it
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                event = None
            seq = event.get("seq") if isinstance(event, dict) else None
            if not isinstance(event, dict) or not isinstance(seq, int) or seq <= since:
                offset += len(line)
                if isinstance(seq, int):
                    seen = max(seen, seq)
                continue
            previous = events[-1] if events else None
            if (
                event.get("type") == "text_delta"
                and previous is not None
                and previous.get("type") == "text_delta"
                and previous.get("attempt") == event.get("attempt")
            ):
                text = str(event.get("text", ""))
                if size + len(text) > MCP_ANSWER_MAX_CHARS - 2000:
                    more = True
                    break
                previous["text"] = str(previous.get("text", "")) + text
                previous["last_seq"] = seq
                size += len(text)
                last = seen = seq
                offset += len(line)
                continue
            if len(events) >= limit:
                more = True
                break
            for key in ("text", "message", "question"):
                if isinstance(event.get(key), str):
                    event[key] = _quote(event[key])
            length = len(dumps(event))
            if size + length > MCP_ANSWER_MAX_CHARS - 2000:
                more = True
                break
            events.append(event)
            size += length
            last = seen = seq
            offset += len(line)
    return events, last, more, (seen, offset)
