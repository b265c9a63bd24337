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
"""

from __future__ import annotations

from wrapper.core.config import RunConfig
from wrapper.core.cost import Caps
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
        record = await self.gate.ask_person(question)
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
