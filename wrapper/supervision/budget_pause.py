"""Pausing a run at its cap (``--on-budget escalate``) instead of stopping it.

At the cap the agent's turn is interrupted as a steer from outside
interrupts it (once its running tool ended, within ``--steer-timeout``),
then a person is asked through the run's escalation (status.json's
``question`` and ``escalationId``, ``agent-wrapper reply``, the MCP
server's ``reply``), as ``--on-stop escalate`` asks:

- ``reply --continue``: every cap is raised by its first amount and the
  agent is steered back to work in the same session;
- ``reply TEXT``: the same, with TEXT as the steer;
- ``reply --stop``, or no answer within ``--escalation-timeout``: the run
  ends as the cap ends it without asking (``budget_exceeded``).

The steer a reply becomes passes the ``UserPromptSubmit`` handlers when the
reply comes (``source``: ``budget_resume``): a block refuses the reply as it
refuses any reply (``reply`` exits 1 with the reason, the question stays
open), and the context they add goes with the steer.
"""

from __future__ import annotations

from typing import Any

from wrapper.core.config import RunConfig
from wrapper.core.cost import Caps
from wrapper.core.events import WarningEvent
from wrapper.hooks.stop_gate import StopGate
from wrapper.supervision.attempt import AttemptSupervisor
from wrapper.supervision.spending import Spending

#: Who steers the agent back to work after a person let it go on (the
#: ``handler`` of its ``steer`` event and result.json's ``steers``).
BUDGET_HANDLER = "onBudget"
#: The steer a plain ``reply --continue`` sends (with the caps as raised).
GO_ON = "Your budget was raised to {caps}: continue with the task where you left off."


class BudgetPause:
    """The run's pause at a cap: ``why`` is the cap reached while a person
    has not been asked yet; ``stopped`` why the run ends for it, once a
    person said stop (or nobody answered)."""

    def __init__(self, config: RunConfig, spending: Spending, gate: StopGate) -> None:
        self.config = config
        self.spending = spending
        self.gate = gate
        self.why: str | None = None
        self.stopped = ""
        #: What the prompt handlers added to the reply the agent goes on with.
        self.contexts: list[str] = []

    @property
    def wanted(self) -> bool:
        return self.config.on_budget == "escalate"

    def reached(self, why: str, supervisor: AttemptSupervisor | None) -> None:
        """The run reached a cap (``why``: its spend and the cap): the
        running turn is ended as for a steer; the person is asked once it
        has (``ask``)."""
        self.why = why
        if supervisor is not None:
            supervisor.steer(self.config.steer_timeout)

    async def ask(self) -> str | None:
        """Ask a person whether the run may go on: the steer to go on with
        (the caps raised), or None when it must end (``stopped`` says why)."""
        why, self.why = self.why or "the run reached its cap", None
        first = Caps(self.config.max_cost, self.config.max_tokens)
        question = (
            f"{why}. Reply --continue to raise the cap by {first.said()} and let the agent "
            "go on (or reply with a message to steer it with), --stop to end the run."
        )
        self.contexts = []
        record = await self.gate.ask_person(question, check=self._check_reply)
        if record.answer not in ("continue", "text"):
            how = (
                "a person answered stop"
                if record.answer == "stop"
                else f"nobody answered within --escalation-timeout "
                f"({self.config.escalation_timeout:g}s)"
            )
            self.stopped = f"{why} ({how})"
            return None
        raised = self.spending.raise_caps()
        if record.answer == "text" and record.text:
            return record.text
        return GO_ON.format(caps=raised)

    def _steer_for(self, kind: object, text: object) -> str | None:
        """The steer a person's answer lets the run go on with (the caps as
        they will be raised), or None (the answer ends the run)."""
        if kind == "text" and isinstance(text, str) and text:
            return text
        if kind not in ("continue", "text"):
            return None
        first = Caps(self.config.max_cost, self.config.max_tokens)
        return GO_ON.format(caps=self.spending.caps.raised_by(first).said())

    async def _check_reply(self, escalation: str, answer: dict[str, Any]) -> str | None:
        """The prompt handlers on the steer a reply becomes: why the reply
        is refused (the question stays open), or None."""
        prompt = self._steer_for(answer.get("kind"), answer.get("text"))
        self.contexts = []
        if prompt is None:
            return None
        contexts, refused = await self.gate.check_prompt(prompt, "budget_resume")
        if refused is None:
            self.contexts = contexts
            return None
        self.gate.stream.emit(
            WarningEvent(
                code="reply_refused",
                message=f"a reply to {escalation} was refused: the prompt {refused}; "
                "the question stays open",
            )
        )
        return f"the prompt {refused}"
