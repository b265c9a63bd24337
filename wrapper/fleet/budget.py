"""A batch's caps (``--batch-max-cost``, ``--batch-max-tokens``): the spend
of the runs this invocation starts, summed as each reports it.

Each run's ``Spending`` tells the batch whenever what it spent may have
changed (a usage report, a price that arrived); the batch sums its runs'
spend then, the turns under way included. At a cap no new line starts, the
runs going on are stopped as a run's own cap stops it (``budget_exceeded``),
and the lines never started are recorded in batch.json as such. Runs kept
from an earlier invocation (``--skip-passed``) are not counted: each
invocation's caps count its own spend.

A run whose cost is not known (a model without a price) adds its tokens
but not its cost; how many such runs there were is said beside the sum.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from wrapper.core.cost import Caps
from wrapper.supervision.spending import Spending

#: batch.json's ``notStarted`` for a line the batch's cap kept from starting.
NOT_STARTED_CAP = "batch_cap"
#: How many unstarted lines the warning names before it says "...".
NAMED_AT_MOST = 10


def not_started_result(why: str) -> dict[str, Any]:
    """What a line never started came to, as its batch.json entry says
    (it has no result.json of its own)."""
    error = {"kind": "budget_exceeded", "message": f"not started: {why}", "apiStatus": None}
    return {"outcome": "error", "success": False, "exitStatus": None, "error": error}


class FleetBudget:
    """The batch's spend and caps; ``on_reached`` is told once, with the
    spend and the cap, when a cap is reached."""

    def __init__(
        self, max_cost: float | None, max_tokens: int | None, on_reached: Callable[[str], None]
    ) -> None:
        self.caps = Caps(max_cost, max_tokens)
        self.on_reached = on_reached
        #: The runs going on; what the ended ones spent, summed once (a
        #: report costs the runs going on, not every run of a long batch).
        self._runs: list[Spending] = []
        self._ended = (0, 0.0, 0)
        #: Why the batch stopped for its cap (the spend and the cap), else None.
        self.reached: str | None = None

    def watch(self, spending: Spending) -> None:
        """Count what a run of this invocation spends, as it reports it."""
        self._runs.append(spending)
        if self.caps.max_cost is not None:
            # Its cost is needed as it goes, not only at its end.
            spending.pricing = True
        spending.on_spent = self.check

    def ended(self, spending: Spending) -> None:
        """A run ended (its cost settled): what it spent is final."""
        if spending in self._runs:
            self._runs.remove(spending)
            tokens, usd = spending.spent()
            was = self._ended
            self._ended = (
                was[0] + tokens,
                was[1] + (usd or 0.0),
                was[2] + (usd is None),
            )

    def spend(self) -> tuple[int, float, int]:
        """Tokens and known cost spent so far, and how many runs' cost is unknown."""
        tokens, usd, unknown = self._ended
        for spending in self._runs:
            run_tokens, run_usd = spending.spent()
            tokens += run_tokens
            if run_usd is None:
                unknown += 1
            else:
                usd += run_usd
        return tokens, usd, unknown

    def check(self) -> None:
        if self.reached is not None or not self.caps:
            return
        tokens, usd, unknown = self.spend()
        caps, why = self.caps, None
        if caps.max_tokens is not None and tokens >= caps.max_tokens:
            why = (
                f"the batch's runs used {tokens:,} tokens (input, output and cache writes), "
                f"which reaches its --batch-max-tokens cap of {caps.max_tokens:,}"
            )
        elif caps.max_cost is not None and usd >= caps.max_cost:
            apart = f" ({unknown} runs' cost unknown, not counted)" if unknown else ""
            why = (
                f"the batch's runs cost ${usd:.4f}{apart}, which reaches its "
                f"--batch-max-cost cap of ${caps.max_cost:g}"
            )
        if why is not None:
            self.reached = why
            self.on_reached(why)

    def not_started_warning(self, names: list[str]) -> dict[str, str]:
        """The batch's warning naming the lines its cap kept from starting."""
        more = ", ..." if len(names) > NAMED_AT_MOST else ""
        return {
            "code": "batch_cap_reached",
            "message": f"{len(names)} line(s) not started ({', '.join(names[:NAMED_AT_MOST])}"
            f"{more}): {self.reached}; --skip-passed on the next batch goes on from there",
        }

    def to_json(self) -> dict[str, Any]:
        """batch.json's ``spend``."""
        tokens, usd, unknown = self.spend()
        return {
            "usd": round(usd, 6),
            "tokens": tokens,
            "unknownCostRuns": unknown,
            "maxCost": self.caps.max_cost,
            "maxTokens": self.caps.max_tokens,
            "capReached": self.reached,
        }


def summed_spend(spends: Iterable[object]) -> dict[str, Any] | None:
    """The spend of several shards' batch.json as one (``merge``): the sums,
    each shard's caps being its own (null here), the first cap reached; None
    when no shard says what it spent."""
    found = [spend for spend in spends if isinstance(spend, Mapping)]
    if not found:
        return None

    def total(key: str) -> Any:
        values = [spend.get(key) for spend in found]
        return sum(v for v in values if isinstance(v, int | float) and not isinstance(v, bool))

    reached = [spend.get("capReached") for spend in found if spend.get("capReached")]
    return {
        "usd": round(float(total("usd")), 6),
        "tokens": int(total("tokens")),
        "unknownCostRuns": int(total("unknownCostRuns")),
        "maxCost": None,
        "maxTokens": None,
        "capReached": reached[0] if reached else None,
    }
