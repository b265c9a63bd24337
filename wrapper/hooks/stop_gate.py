"""The stop gate: what happens when the agent stops, and before each prompt.

At a stop the built-in error retry and the Stop hooks go first; when they
allow it, the ``onStop`` policy decides (escalating to a person if need be).
A block becomes a steer: the agent's session resumed with the reason as its
next prompt. Before every prompt (the task, a Stop hook's steer, a steer
from outside, a person's reply, at a cap too: its ``source``) the ``UserPromptSubmit``
(and for a subagent's task ``SubagentStart``) handlers may add context or
refuse it, and a refusal refuses that prompt only (a refused Stop-hook
steer lets the stop go ahead, as at the steer limit); before the first
prompt of an agent session (the task, each steer that resumes the agent)
``SessionStart`` handlers may add context. A turn that failed on an API
error fires ``StopFailure`` before the Stop handlers, and the run's end
``SessionEnd``: both only observe. The decisions are pure (``steering``,
``policy``, ``protocol``); this class carries them out.

One module, though long: a stop, the steer it becomes, the prompt handlers
that may refuse it and the person who may be asked instead are one story,
told in the order a run lives it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from wrapper.core.config import RunConfig
from wrapper.core.events import Escalated, EscalationAnswered, Steer, WarningEvent
from wrapper.core.hook_protocol import Decision, HandlerResult, stop_failure_error
from wrapper.core.limits import SESSION_END_TIMEOUT
from wrapper.core.outcome import ErrorKind, RunFacts, decide
from wrapper.core.policy import (
    REPLY_HANDLER,
    Allow,
    Escalate,
    EscalationRecord,
    Fail,
    Nudge,
    StopPolicy,
)
from wrapper.core.settings import Handler
from wrapper.core.steering import AllowedBy, Block, Steering, fit_context, with_context
from wrapper.core.summary import RunSummary
from wrapper.dialects import CannotResume, Dialect, Launch, UsageError
from wrapper.files import mailbox
from wrapper.hooks.escalation import AnswerCheck, notify_person, signal_help, wait_for_answer
from wrapper.hooks.native import RECORDS, NativeRecords
from wrapper.hooks.runner import HookContext, failure_warnings, run_chain
from wrapper.sinks.stream import EventStream, StatusWriter


class StopGate:
    def __init__(
        self,
        *,
        config: RunConfig,
        dialect: Dialect,
        summary: RunSummary,
        stream: EventStream,
        status: StatusWriter,
        hook_ctx: HookContext,
        events_path: Path,
        started_at: float,
        transcript: Path | None,
    ) -> None:
        self.config = config
        self.dialect = dialect
        self.summary = summary
        self.stream = stream
        #: Run-directory files already reported as ignored: the reply wait
        #: polls, and one warning per file is enough.
        self._ignored: set[str] = set()
        #: Held while a person is asked something (see ``ask_person``).
        self._asking = trio.Lock()
        self.status = status
        self.hook_ctx = hook_ctx
        self.events_path = events_path
        self.started_at = started_at
        #: The agent's own transcript, when the launch names one.
        self.transcript = transcript
        #: The agent's transcript found where the agent keeps it, by session id.
        self._found_transcript: tuple[str, Path | None] | None = None
        self.steering = Steering(max_steers=config.max_steers)
        #: Makes a block's reason the next prompt, adding the steers from
        #: outside that wait (set by the run); else the reason alone.
        self.with_steers: Callable[[Block], str] | None = None
        self.policy = StopPolicy(on_stop=config.on_stop, idle=config.settings.idle)
        #: The SessionEnd handlers' scope, once they run: a signal cuts them.
        self._ending: trio.CancelScope | None = None
        #: The context the prompt handlers added to the reply being steered with.
        self._reply_context: list[str] = []
        #: What the PreToolUse handlers the agent runs itself decided.
        self._native = NativeRecords(config.run_dir / RECORDS)

    def report_native_decisions(self) -> None:
        """The decisions of PreToolUse handlers the agent ran itself (through
        the relay) since the last call, as the run's events."""
        for event in self._native.read_new():
            self.stream.emit(event)

    def signal_came(self) -> None:
        """The wrapper received a stop signal: SessionEnd handlers running
        (the outcome is decided by then) are cut."""
        if self._ending is not None:
            self._ending.cancel()

    async def at_stop(self, facts: RunFacts, number: int) -> Launch | None:
        """The agent stopped: allow it, or return the launch that steers it back.

        The built-in error retry and the Stop hooks go first; when they allow
        the stop, the ``onStop`` policy decides (a ``continue: false`` from a
        hook ends the run whatever the policy)."""
        await self._stop_failure(facts)
        block = await self._stop_hooks(facts)
        if block is not None:
            return await self._steer(block, number + 1)
        if self.steering.allowed_by in (AllowedBy.HOOK_CONTINUE_FALSE, AllowedBy.HOOK_FAILED):
            return None
        if self.steering.failure_kind == ErrorKind.GATE_NOT_PASSED:
            return None
        return await self._policy(number)

    async def _stop_failure(self, facts: RunFacts) -> None:
        """``StopFailure``: the turn ended on the agent's own error (an API
        call that failed). Its handlers observe; the Stop handlers and the
        error retry run after them as for any stop."""
        handlers = self.config.settings.handlers("StopFailure")
        error = decide(facts).error
        if not handlers or error is None or error.kind != ErrorKind.AGENT_ERROR:
            return
        last = self.summary.last_assistant
        payload = self.hook_input(
            "StopFailure",
            error=stop_failure_error(error.api_status, error.message),
            error_details=(last.error_message if last is not None else None) or error.message,
            last_assistant_message=last.text if last is not None else None,
            api_status=error.api_status,
            stop_reason=facts.final.stop_reason if facts.final else None,
            raw_stop_reason=facts.final.raw_stop_reason if facts.final else None,
        )
        results = await run_chain(handlers, "StopFailure", payload, self.hook_ctx, blocking=False)
        self._warn_failed("StopFailure", handlers, results, "it was skipped")

    async def session_end(self, result: dict[str, Any], *, skip: bool) -> None:
        """``SessionEnd``: the run's outcome is decided (``result``, as
        result.json will say it); its handlers observe, all of them within
        ``SESSION_END_TIMEOUT``, and a signal that comes meanwhile ends them
        (``skip``: a second signal already came, they do not run)."""
        handlers = self.config.settings.handlers("SessionEnd")
        if not handlers:
            return
        cut = self._ending = trio.CancelScope()
        if skip:
            cut.cancel()
        payload = self.hook_input(
            "SessionEnd",
            reason="other",
            outcome=result["outcome"],
            success=result["success"],
            exit_status=result["exitStatus"],
            stop_reason=result["stopReason"],
            raw_stop_reason=result["rawStopReason"],
            error=result["error"],
            last_assistant_message=result["finalText"],
            usage=result["usage"],
            tools_used=result["toolsUsed"],
            steer_count=result["steerCount"],
            steers=result["steers"],
            duration_ms=result["durationMs"],
        )
        results: list[HandlerResult] = []
        with cut, trio.move_on_after(SESSION_END_TIMEOUT) as bound:
            results = await run_chain(
                handlers, "SessionEnd", payload, self.hook_ctx, blocking=False
            )
        self._warn_failed("SessionEnd", handlers, results, "the run's end is unchanged")
        if skip:
            why = "were skipped: a second signal came before they ran"
        elif cut.cancelled_caught:
            why = "were stopped by a signal that came while they ran"
        elif bound.cancelled_caught:
            why = f"were stopped after {SESSION_END_TIMEOUT:g}s, their bound"
        else:
            return
        self.stream.emit(
            WarningEvent(
                code="hook_failed",
                message=f"SessionEnd handlers {why} (each that finished has its "
                "hook_decision event); the run's end is unchanged",
            )
        )

    async def session_start(self, source: str) -> list[str]:
        """``SessionStart``, before the first prompt of an agent session
        (``startup``) or of a resumed one (``resume``): the context its
        handlers add (their plain stdout too, as Claude Code takes it)."""
        handlers = self.config.settings.handlers("SessionStart")
        if not handlers:
            return []
        payload = self.hook_input("SessionStart", source=source)
        results = await run_chain(handlers, "SessionStart", payload, self.hook_ctx, blocking=False)
        self._warn_failed("SessionStart", handlers, results, "it was skipped")
        return [r.context for r in results if r.context]

    async def session_start_without_task(self) -> None:
        """``SessionStart`` for a run whose prompt is on the agent's command
        line: the context its handlers add cannot be given (a warning says so)."""
        if await self.session_start("startup"):
            self.stream.emit(
                WarningEvent(
                    code="hook_context_dropped",
                    message="SessionStart handlers added context, but the run has no --task: "
                    "the wrapper does not own the prompt, so it was not given to the agent; "
                    "pass the task with --task to have it added",
                )
            )

    async def _stop_hooks(self, facts: RunFacts) -> Block | None:
        settings, steering = self.config.settings, self.steering
        event = self.config.stop_event
        handlers = settings.handlers(event)
        if not handlers and not settings.retry_on_error:
            steering.allow(AllowedBy.NO_HANDLERS)
            return None
        at_limit = steering.at_limit
        if at_limit and not handlers:
            steering.allow(AllowedBy.MAX_STEERS)
            self.stream.emit(
                WarningEvent(
                    code="max_steers_reached",
                    message=f"the steer limit ({steering.max_steers}) is reached; "
                    "the stop was allowed without another retry",
                )
            )
            return None
        last = self.summary.last_assistant
        if settings.retry_on_error and last is not None and not at_limit:
            retry = steering.retry_on_error(
                f"{last.text}\n{last.error_message or ''}", settings.max_retries
            )
            if retry is not None:
                return retry
        if not handlers:
            steering.allow(AllowedBy.NO_HANDLERS)
            return None
        self.status.update(trio.current_time(), force=True, state="stopping")
        self.stream.flush()
        verdict = decide(facts)
        payload = self.hook_input(
            event,
            # true at the limit too, as Claude Code has it: a block there can
            # no longer steer, only say that the gate did not pass
            stop_hook_active=steering.hook_active or at_limit,
            last_assistant_message=last.text if last is not None else None,
            outcome=str(verdict.outcome),
            stop_reason=facts.final.stop_reason if facts.final else None,
            raw_stop_reason=facts.final.raw_stop_reason if facts.final else None,
            error=verdict.error.to_json() if verdict.error is not None else None,
            usage=self.summary.usage.to_json() if self.summary.usage else None,
            duration_ms=round((time.time() - self.started_at) * 1000),
            tools_used=self.summary.tools_used,
            steer_count=steering.steer_count,
            max_steers=steering.max_steers,
        )
        fail_closed = self.config.hooks_fail_closed
        results = await run_chain(
            handlers, event, payload, self.hook_ctx, blocking=True, stop_at_failure=fail_closed
        )
        failed = [(h, r.warning) for h, r in zip(handlers, results, strict=False) if r.warning]
        if fail_closed and failed:
            handler, warning = failed[0]
            steering.allow(
                AllowedBy.HOOK_FAILED,
                f"{event} handler {handler.name} {warning}; hooks fail closed "
                "(stop.failClosed, --hooks-fail-closed), so the run ends as an error",
                ErrorKind.HOOK_FAILED,
            )
            return None
        self._warn_failed(event, handlers, results, "the stop was allowed")
        if at_limit:
            names = [h.name for h in handlers]
            self._gate_at_limit(event, steering.decide_at_limit(results, names))
            context = with_context(results, names)
            if context is not None and steering.allowed_by is AllowedBy.HANDLERS:
                steering.allow(AllowedBy.MAX_STEERS)
                self.stream.emit(
                    WarningEvent(
                        code="max_steers_reached",
                        message=f"the steer limit ({steering.max_steers}) is reached: the "
                        f"context {context.handler} added at the stop "
                        f"({_quote(context.reason)}) was not given to the agent, and the "
                        "stop was allowed",
                    )
                )
            return None
        return steering.decide(results, [h.name for h in handlers])

    def _gate_at_limit(self, event: str, block: Block | None) -> None:
        """Say that the gate never passed: a failure with ``failOnMaxSteers``,
        else one warning that also reaches stderr, since the run stays ``ok``."""
        if block is None:
            return
        steering = self.steering
        what = (
            f"the {event} gate never passed: {block.handler} still blocks after "
            f"{steering.steer_count} steer{'s' if steering.steer_count != 1 else ''} "
            f"(the limit): {_quote(block.reason)}"
        )
        if self.config.fail_on_max_steers:
            steering.allow(AllowedBy.MAX_STEERS, what, ErrorKind.GATE_NOT_PASSED)
            return
        self.stream.emit(
            WarningEvent(
                code="max_steers_reached",
                message=f"{what}; this alone does not fail the run "
                "(--fail-on-max-steers or stop.failOnMaxSteers makes it a failure)",
            )
        )

    async def _policy(self, number: int) -> Launch | None:
        """The ``onStop`` policy's part in a stop the hooks allowed."""
        last = self.summary.last_assistant
        last_text = last.text if last is not None else None
        action = self.policy.decide(
            signals=mailbox.signals_of(
                self.config.run_dir, number, self.config.run_id, self._ignored_file
            ),
            at_limit=self.steering.at_limit,
            tool_runs=self.summary.tool_runs,
            signal_help=signal_help(self.config.wrapper_bin),
            last_text=last_text,
        )
        if isinstance(action, Escalate):
            action = await self._escalate(action.question)
        if action is None:
            return None
        if isinstance(action, Allow):
            self.steering.allow(action.by)
            return None
        if isinstance(action, Fail):
            self.steering.allow(action.by, action.message, action.kind)
            return None
        if action.cooldown:
            self.status.update(trio.current_time(), force=True, state="stopping")
            await trio.sleep(action.cooldown)
        source = "reply" if action.handler == REPLY_HANDLER else "stop_hook"
        return await self._steer(Block(action.handler, action.reason), number + 1, source)

    async def _escalate(self, question: str | None) -> Allow | Nudge:
        """Ask a person and wait for the answer (or the escalation timeout)."""
        record = await self.ask_person(question, check=self._check_reply)
        prompt = _reply_prompt(record.answer, record.text)
        if prompt is not None:
            return Nudge(REPLY_HANDLER, prompt)
        if record.answer == "stop":
            return Allow(AllowedBy.REPLY)
        return Allow(AllowedBy.ESCALATION_TIMEOUT)

    async def _check_reply(self, escalation: str, answer: dict[str, Any]) -> str | None:
        """The prompt handlers on a person's reply that becomes the agent's
        prompt: why it was refused (the question stays open), or None."""
        prompt = _reply_prompt(answer.get("kind"), answer.get("text"))
        self._reply_context = []
        if prompt is None:
            return None
        contexts, refused = await self.check_prompt(prompt, "reply")
        if refused is None:
            self._reply_context = contexts
            return None
        self.stream.emit(
            WarningEvent(
                code="reply_refused",
                message=f"a reply to {escalation} was refused: the prompt {refused}; "
                "the question stays open",
            )
        )
        return f"the prompt {refused}"

    async def ask_person(
        self, question: str | None, *, then: str = "stopping", check: AnswerCheck | None = None
    ) -> EscalationRecord:
        """Open an escalation, tell a person and wait for the reply (or the
        escalation timeout); the record holds the answer (None: none came).
        status.json's state is ``then`` once it is answered. ``check``: why
        an answer is refused (the question stays open), or None.

        One question at a time: another one (an ACP agent asking about two
        tools at once) waits until this one is answered, then is asked in
        its turn. status.json and ``reply`` show one question, the run's
        latest; two open at once would leave one unseen to wait out its
        timeout."""
        async with self._asking:
            return await self._ask_person(question, then, check)

    async def _ask_person(
        self, question: str | None, then: str, check: AnswerCheck | None
    ) -> EscalationRecord:
        record = self.policy.open_escalation(question)
        run_dir = self.config.run_dir
        mailbox.open_escalation(run_dir, record.id, question)
        self.status.update(
            trio.current_time(),
            force=True,
            state="waiting",
            question=question,
            escalationId=record.id,
        )
        record.notified = await notify_person(
            record, self.config, self.summary, self.hook_ctx, self.stream.emit
        )
        self.stream.emit(
            Escalated(id=record.id, question=question, notified=tuple(record.notified))
        )
        try:
            answer = await wait_for_answer(
                run_dir,
                record.id,
                self.config.escalation_timeout,
                self.config.run_id,
                self._ignored_file,
                check=check,
            )
        except trio.Cancelled:
            # Nobody needs the answer any more (the question was withdrawn,
            # or the run is ending): status.json no longer shows it.
            self.status.update(
                trio.current_time(), force=True, state=then, question=None, escalationId=None
            )
            raise
        finally:  # also when a signal or the run's deadline ends the wait
            mailbox.close_escalation(run_dir, record.id, self.config.run_id)
        record.answer, record.text = answer.get("kind"), answer.get("text")
        record.answered_at = time.time()
        self.stream.emit(
            EscalationAnswered(id=record.id, answer=str(record.answer), text=record.text)
        )
        self.status.update(
            trio.current_time(), force=True, state=then, question=None, escalationId=None
        )
        return record

    async def steer_back(
        self, handler: str, reason: str, number: int, checked: Sequence[str] | None = None
    ) -> Launch | None:
        """Steer the agent back to work with ``reason`` (attempt ``number``),
        as a Stop handler's block named ``handler`` would; ``checked``: the
        context a person's reply got when it passed the prompt handlers (a
        ``budget_resume``), None for a steer the handlers have not seen."""
        source = "stop_hook" if checked is None else "budget_resume"
        return await self._steer(Block(handler, reason), number, source, checked)

    async def _steer(
        self,
        block: Block,
        number: int,
        source: str = "stop_hook",
        checked: Sequence[str] | None = None,
    ) -> Launch | None:
        """Resume the agent with ``block``'s reason (``source``: a Stop
        hook's or a policy's steer, or a person's reply, which passed the
        prompt handlers when it came), with the steers from outside that
        wait; None when the stop goes ahead after all."""
        config, steering = self.config, self.steering
        blocked_by = f"the stop was blocked by {block.handler} ({_quote(block.reason)})"
        if config.task is None:
            steering.allow(
                AllowedBy.CANNOT_STEER,
                f"{blocked_by}, but the run has no --task: the wrapper does not own "
                "the prompt, so it cannot steer the agent",
            )
            return None
        try:
            launch = self.dialect.resume(
                config.command, block.reason, config.run_dir, self.summary.session_id
            )
        except (CannotResume, UsageError) as exc:
            steering.allow(AllowedBy.CANNOT_STEER, f"{blocked_by}, but it cannot steer: {exc}")
            return None
        # A live session goes on in the same process: no new session starts.
        resumed = "resume" if launch.prompt is None else None
        checked = self._reply_context if source == "reply" else checked
        preamble, contexts, refused = await self.prompt_parts(
            block.reason, first=False, source=source, session=resumed, checked=checked
        )
        if refused is not None:
            self._steer_refused(block, refused)
            return None
        own = Block(block.handler, "\n\n".join([block.reason, *contexts]))
        text = self.with_steers(own) if self.with_steers is not None else own.reason
        prompt = "\n\n".join([*preamble, text])
        if prompt != block.reason:
            try:
                launch = self.dialect.resume(
                    config.command, prompt, config.run_dir, self.summary.session_id
                )
            except UsageError as exc:
                steering.allow(AllowedBy.CANNOT_STEER, f"{blocked_by}, but it cannot steer: {exc}")
                return None
        steering.record(block, number)
        self.stream.emit(Steer(next_attempt=number, handler=block.handler, reason=block.reason))
        return launch

    def _steer_refused(self, block: Block, refused: str) -> None:
        """The prompt handlers refused the steer a stop was blocked with: the
        stop goes ahead, as at the steer limit (the gate did not pass: a
        failure with ``failOnMaxSteers``, else one warning that also reaches
        stderr, since the run stays ``ok``)."""
        what = (
            f"the Stop gate did not pass: {block.handler} blocked the stop "
            f"({_quote(block.reason)}), but the steer prompt {refused}"
        )
        if self.config.fail_on_max_steers:
            self.steering.allow(AllowedBy.PROMPT_BLOCKED, what, ErrorKind.GATE_NOT_PASSED)
            return
        self.steering.allow(AllowedBy.PROMPT_BLOCKED)
        self.stream.emit(
            WarningEvent(
                code="steer_prompt_blocked",
                message=f"{what}; the stop was allowed, and this alone does not fail the run "
                "(--fail-on-max-steers or stop.failOnMaxSteers makes it a failure)",
            )
        )

    async def before_prompt(
        self,
        prompt: str,
        *,
        first: bool,
        source: str = "task",
        session: str | None = None,
        room: int | None = None,
        checked: Sequence[str] | None = None,
    ) -> tuple[str, str | None]:
        """``SessionStart`` (the first prompt of an agent session: ``session``
        says how it starts, ``startup`` for the ``first``), ``SubagentStart``
        (first prompt of a subagent) and ``UserPromptSubmit`` handlers: the
        context of ``SessionStart`` goes before the prompt, that of the others
        after it; a block refuses the prompt. ``source``: what the prompt is
        (``PROMPT_SOURCES``). ``checked``: the prompt already passed the
        ``UserPromptSubmit`` handlers (a steer, when it came), which added
        this context. ``room``: the most bytes the context may add (a steer on
        the agent's command line); what is over is cut, with a
        ``hook_context_cut`` warning."""
        preamble, contexts, refused = await self.prompt_parts(
            prompt, first=first, source=source, session=session, checked=checked
        )
        if refused is not None:
            return prompt, refused
        if room is not None:
            preamble, contexts = self._fit_context(preamble, contexts, room)
        return "\n\n".join([*preamble, prompt, *contexts]), None

    async def prompt_parts(
        self,
        prompt: str,
        *,
        first: bool,
        source: str,
        session: str | None = None,
        checked: Sequence[str] | None = None,
    ) -> tuple[list[str], list[str], str | None]:
        """What ``before_prompt`` adds before and after ``prompt``, or why
        it was refused."""
        settings, contexts = self.config.settings, []
        kind = "startup" if first else session
        preamble = await self.session_start(kind) if kind is not None else []
        if first and self.config.subagent:
            handlers = settings.handlers("SubagentStart")
            payload = self.hook_input("SubagentStart")
            results = await run_chain(
                handlers, "SubagentStart", payload, self.hook_ctx, blocking=False
            )
            self._warn_failed("SubagentStart", handlers, results, "it was skipped")
            contexts += [r.context for r in results if r.context]
        if checked is not None:
            return preamble, [*contexts, *checked], None
        added, refused = await self.check_prompt(prompt, source)
        return preamble, [*contexts, *added], refused

    async def check_prompt(self, prompt: str, source: str) -> tuple[list[str], str | None]:
        """The ``UserPromptSubmit`` handlers on ``prompt`` (``source``: what
        it is): the context they add, or why they refused it."""
        handlers = self.config.settings.handlers("UserPromptSubmit")
        if not handlers:
            return [], None
        payload = self.hook_input("UserPromptSubmit", prompt=prompt, source=source)
        results = await run_chain(
            handlers, "UserPromptSubmit", payload, self.hook_ctx, blocking=True
        )
        self._warn_failed("UserPromptSubmit", handlers, results, "the prompt was sent")
        contexts = []
        for handler, result in zip(handlers, results, strict=False):
            if result.decision is not Decision.ALLOW:
                why = f": {_quote(result.reason)}" if result.reason else ""
                return [], f"was blocked by UserPromptSubmit handler {handler.name}{why}"
            if result.context:
                contexts.append(result.context)
        return contexts, None

    def _fit_context(
        self, before: list[str], after: list[str], room: int
    ) -> tuple[list[str], list[str]]:
        """``fit_context``, the cut said in a warning."""
        before, after, size = fit_context(before, after, room)
        if size is not None:
            self.stream.emit(
                WarningEvent(
                    code="hook_context_cut",
                    message=f"hook context of {size} bytes was cut to {room} bytes: a steer "
                    "delivered on the agent's command line leaves no more room for it",
                )
            )
        return before, after

    def hook_input(self, event: str, **extra: Any) -> dict[str, Any]:
        config = self.config
        transcript = self.transcript
        if transcript is None or not transcript.is_file():
            # a hook written for the agent reads the agent's own transcript;
            # the wrapper's event log stands in only when there is none
            transcript = self._agent_transcript() or self.events_path
        return {
            "session_id": self.summary.session_id,
            "transcript_path": str(transcript),
            "cwd": str(config.cwd),
            "permission_mode": self.dialect.permission_mode(config.command),
            "hook_event_name": event,
            "run_id": config.run_id,
            "agent_id": config.run_id,
            "agent_type": config.label,
            "task": config.task,
            **extra,
        }

    def _agent_transcript(self) -> Path | None:
        """The agent's own transcript of this session, where the agent keeps it."""
        session_id = self.summary.session_id
        if session_id is None:
            return None
        if self._found_transcript is not None and self._found_transcript[0] == session_id:
            found = self._found_transcript[1]
            if found is not None and found.is_file():
                return found
        search = self.dialect.transcript_search(session_id, self.hook_ctx.env)
        if search is None:
            return None
        root, pattern = search
        try:
            matches = [path for path in root.glob(pattern) if path.is_file()]
            newest = max(matches, key=lambda path: path.stat().st_mtime, default=None)
        except OSError:
            newest = None
        if newest is not None:
            self._found_transcript = (session_id, newest)
        return newest

    def _warn_failed(
        self, event: str, handlers: list[Handler], results: list[HandlerResult], then: str
    ) -> None:
        for warning in failure_warnings(event, handlers, results, then):
            self.stream.emit(warning)

    def _ignored_file(self, message: str) -> None:
        if message not in self._ignored:
            self._ignored.add(message)
            self.stream.emit(WarningEvent(code="run_file_ignored", message=message))


#: A blocked stop's reason, quoted in messages, is cut to this length.
QUOTE_CHARS = 200


def _reply_prompt(kind: object, text: object) -> str | None:
    """The prompt a person's answer becomes, or None (it is no prompt)."""
    if kind == "text":
        return f"User answered: {text}"
    if kind == "continue":
        return "User wants you to continue"
    return None


def _quote(text: str | None) -> str:
    text = " ".join((text or "").split())
    return repr(text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…")
