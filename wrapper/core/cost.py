"""What a run costs: arithmetic on the usage the agent reported and a price
record. Pure.

Where the agent reports a cost with a message's usage (``Usage.cost_usd``:
pi, Claude Code, opencode), that cost is the message's. Where it does not,
the message is priced from the model's ``PriceRecord`` (read from the price
table out of the run's process, see ``wrapper.files.prices``), and where
there is no record either its cost is unknown. Unknown is a value of its
own: a run with one unknown message has no total (``usd`` is ``None``,
``source`` ``"unknown"``), never a total that counts the message as 0.

Each usage the agent reports is priced alone, never the run's sum: a tiered
price depends on the size of one request (its input tokens, cache reads
and writes included), so pricing a sum would put small requests in a
higher tier. How finely the agent reports (each message, each turn) is the
record's ``granularity``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wrapper.core.events import Usage

#: ``cost.source``: every cost the agent's own, every cost computed, both, or
#: some message's cost is unknown (then there is no total).
AGENT, COMPUTED, MIXED, UNKNOWN = "agent", "computed", "mixed", "unknown"

#: What reaching a cap does: ``stop`` the run, or ``escalate``: pause it and
#: ask a person whether it may spend as much again.
ON_BUDGET = ("stop", "escalate")

#: Prices are per million tokens, as price tables quote them.
PER_TOKENS = 1_000_000


@dataclass(frozen=True, slots=True)
class Tiered:
    """A price that depends on the size of the request: ``base`` until the
    request's input tokens (cached ones included) pass a tier's ``start``,
    then that tier's price for all its tokens (``tiers``: (start, price),
    ascending)."""

    base: float
    tiers: tuple[tuple[int, float], ...] = ()

    def at(self, request_input: int) -> float:
        price = self.base
        for start, tier_price in self.tiers:
            if request_input > start:
                price = tier_price
        return price


Price = float | Tiered


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceRecord:
    """One model's prices in USD per million tokens, as the table matched it.

    ``requested``: the name looked up (a provider prefix split off);
    ``matched``: the table's id for it (``gpt-5-codex`` is priced as
    ``gpt-5``); ``table``: the table's version. A cache price the table does
    not give is the input price, as the table itself counts it."""

    requested: str
    matched: str
    table: str
    provider: str | None = None
    input: Price = 0.0
    output: Price = 0.0
    cache_read: Price | None = None
    cache_write: Price | None = None

    def cost(self, usage: Usage) -> float | None:
        """The USD cost of one request's ``usage``, or None when it has no token count."""
        counts = (usage.input, usage.output, usage.cache_read, usage.cache_write)
        if all(count is None for count in counts):
            return None
        fresh, output, read, write = (count or 0 for count in counts)
        size = fresh + read + write

        def at(price: Price | None) -> float:
            chosen = self.input if price is None else price
            return chosen.at(size) if isinstance(chosen, Tiered) else chosen

        total = (
            fresh * at(self.input)
            + output * at(self.output)
            + read * at(self.cache_read)
            + write * at(self.cache_write)
        )
        return total / PER_TOKENS

    def to_json(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "matched": self.matched,
            "table": self.table,
            "provider": self.provider,
            "prices": {
                "input": _price_json(self.input),
                "output": _price_json(self.output),
                "cacheRead": _price_json(self.cache_read),
                "cacheWrite": _price_json(self.cache_write),
            },
        }

    @classmethod
    def from_json(cls, data: object) -> PriceRecord | None:
        """The record ``to_json`` wrote, or None for anything else (a damaged
        cache file is a price not known, never an error)."""
        if not isinstance(data, Mapping):
            return None
        requested, matched, table = data.get("requested"), data.get("matched"), data.get("table")
        provider, prices = data.get("provider"), data.get("prices")
        if not (isinstance(requested, str) and isinstance(matched, str) and isinstance(table, str)):
            return None
        if not isinstance(prices, Mapping) or not (provider is None or isinstance(provider, str)):
            return None
        read = {name: _price_from(prices.get(name)) for name in ("input", "output")}
        cached = {name: _price_from(prices.get(name)) for name in ("cacheRead", "cacheWrite")}
        if read["input"] is None or read["output"] is None:
            return None
        return cls(
            requested=requested,
            matched=matched,
            table=table,
            provider=provider,
            input=read["input"],
            output=read["output"],
            cache_read=cached["cacheRead"],
            cache_write=cached["cacheWrite"],
        )


def _price_json(price: Price | None) -> Any:
    if isinstance(price, Tiered):
        return {"base": price.base, "tiers": [[start, value] for start, value in price.tiers]}
    return price


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _price_from(value: object) -> Price | None:
    if isinstance(value, Mapping):
        base, tiers = _number(value.get("base")), value.get("tiers")
        if base is None or not isinstance(tiers, list):
            return None
        read: list[tuple[int, float]] = []
        for tier in tiers:
            if not (isinstance(tier, list) and len(tier) == 2):
                return None
            start, price = _number(tier[0]), _number(tier[1])
            if start is None or price is None:
                return None
            read.append((int(start), price))
        return Tiered(base, tuple(sorted(read)))
    return _number(value)


def model_key(name: str | None) -> str | None:
    """The name a price table knows a model by: a provider or route prefix
    split off (``anthropic/claude-sonnet-4-5``, ``models/gemini-2.5-pro``),
    blanks stripped; None for no name."""
    if name is None:
        return None
    key = name.strip().rsplit("/", 1)[-1].strip()
    return key or None


def model_on_command_line(argv: Sequence[str], options: Sequence[str]) -> str | None:
    """The model the agent's own command line asks for with one of
    ``options`` (``-m NAME``, ``--model NAME``, ``--model=NAME``; the last one
    given wins, as the agents read it), else None."""
    found: str | None = None
    words = list(argv[1:])
    for index, word in enumerate(words):
        if word == "--":
            break
        if word in options and index + 1 < len(words):
            found = words[index + 1]
        else:
            for option in options:
                if option.startswith("--") and word.startswith(option + "="):
                    found = word[len(option) + 1 :]
    return found or None


def reported_tokens(usage: Usage) -> int:
    """The tokens a usage counts against ``--max-tokens``: input, output and
    cache writes, as the agent reported them (cache reads are re-reads of
    what was already counted when it was written)."""
    return sum(count or 0 for count in (usage.input, usage.output, usage.cache_write))


@dataclass(slots=True)
class _ModelCost:
    """What one model's messages cost so far."""

    agent: float = 0.0
    computed: float = 0.0
    agent_messages: int = 0
    computed_messages: int = 0
    #: Messages without the agent's cost, waiting for the model's price.
    unpriced: list[Usage] = field(default_factory=list)
    matched: str | None = None


class CostLedger:
    """A run's cost, message by message.

    ``fallback_model``: the model the agent's command line asked for, for
    messages whose stream does not name one; ``granularity``: how often the
    agent reports usage (``message``, ``turn``), or None when it is not
    known to report any."""

    __slots__ = ("_models", "_records", "fallback_model", "granularity", "tokens")

    def __init__(self, *, fallback_model: str | None, granularity: str | None) -> None:
        self.fallback_model = fallback_model
        self.granularity = granularity
        #: By the model's name as the table knows it (None: no name known).
        self._models: dict[str | None, _ModelCost] = {}
        self._records: dict[str, PriceRecord] = {}
        #: Tokens counted against ``--max-tokens`` so far.
        self.tokens = 0

    def add(self, usage: Usage, model: str | None) -> None:
        """Count one usage report, of ``model`` (or the fallback)."""
        self.tokens += reported_tokens(usage)
        key = model_key(model) or model_key(self.fallback_model)
        entry = self._models.setdefault(key, _ModelCost())
        if usage.cost_usd is not None:
            entry.agent += usage.cost_usd
            entry.agent_messages += 1
            return
        record = self._records.get(key) if key is not None else None
        cost = record.cost(usage) if record is not None else None
        if record is not None and cost is not None:
            entry.computed += cost
            entry.computed_messages += 1
            entry.matched = record.matched
        elif record is None and any(
            count for count in (usage.input, usage.output, usage.cache_read, usage.cache_write)
        ):
            entry.unpriced.append(usage)

    def provisional(self, usages: Sequence[Usage], model: str | None) -> tuple[int, float | None]:
        """What the progress reports ``usages`` of a turn not yet over add
        to the run's tokens and cost (None: not known yet), each priced
        alone; they are counted for real by the turn's final message."""
        tokens = sum(reported_tokens(usage) for usage in usages)
        key = model_key(model) or model_key(self.fallback_model)
        record = self._records.get(key) if key is not None else None
        if record is None:
            return tokens, None if usages else 0.0
        costs = [record.cost(usage) for usage in usages]
        return tokens, sum(cost or 0.0 for cost in costs)

    def price(self, records: Mapping[str, PriceRecord]) -> None:
        """Take the prices of ``records`` (by model key); the messages of
        those models that waited for a price are priced now."""
        self._records.update(records)
        for key, entry in self._models.items():
            record = records.get(key) if key is not None else None
            if record is None:
                continue
            entry.matched = record.matched
            waiting, entry.unpriced = entry.unpriced, []
            for usage in waiting:
                cost = record.cost(usage)
                if cost is not None:
                    entry.computed += cost
                    entry.computed_messages += 1

    def unpriced_models(self) -> list[str | None]:
        """The models (keys) some of whose messages have no cost yet."""
        return [key for key, entry in self._models.items() if entry.unpriced]

    def models_to_price(self) -> list[str]:
        """The models a price would be looked up for: those seen with
        unpriced messages, and the fallback before any message."""
        keys = [key for key in self.unpriced_models() if key is not None]
        fallback = model_key(self.fallback_model)
        if fallback is not None and fallback not in self._records and fallback not in keys:
            keys.append(fallback)
        return keys

    def priced(self, key: str | None) -> bool:
        """Whether messages of ``key`` without the agent's cost can be priced."""
        return key is not None and key in self._records

    @property
    def usd(self) -> float | None:
        """The cost so far, or None when some message's cost is unknown (or
        the agent reported no usage at all: nothing known is not 0)."""
        if not self._models or self.unpriced_models():
            return None
        return sum(entry.agent + entry.computed for entry in self._models.values())

    @property
    def reported(self) -> bool:
        """Whether the agent reported any usage."""
        return bool(self._models)

    @property
    def source(self) -> str:
        if not self._models or self.unpriced_models():
            return UNKNOWN
        agent = any(entry.agent_messages for entry in self._models.values())
        computed = any(entry.computed_messages for entry in self._models.values())
        if agent and computed:
            return MIXED
        return COMPUTED if computed else AGENT

    def to_json(self, *, price_data: str | None, cap_enforced: str | bool | None) -> dict[str, Any]:
        """result.json's ``cost``."""
        models = []
        for key, entry in self._models.items():
            usd = None if entry.unpriced else entry.agent + entry.computed
            models.append({"requested": key, "matched": entry.matched, "usd": usd})
        computed = any(entry.computed_messages for entry in self._models.values())
        return {
            "usd": self.usd,
            "source": self.source,
            "models": models,
            "priceData": price_data if computed else None,
            "granularity": self.granularity if self._models else None,
            "capEnforced": cap_enforced,
        }


@dataclass(frozen=True, slots=True)
class Caps:
    """A run's spending caps (None: no cap)."""

    max_cost: float | None = None
    max_tokens: int | None = None

    def __bool__(self) -> bool:
        return self.max_cost is not None or self.max_tokens is not None

    def exceeded(
        self, ledger: CostLedger, pending: tuple[int, float | None] = (0, 0.0)
    ) -> str | None:
        """Why the run must stop now (its spend and the cap), or None;
        ``pending``: the tokens and cost of a turn not yet over (see
        ``CostLedger.provisional``).

        A cost cap is over when the known cost reaches it; an unknown cost
        never stops a run (it is said at once instead, see ``enforced``)."""
        tokens = ledger.tokens + pending[0]
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return (
                f"the run used {tokens:,} tokens (input, output and cache writes), "
                f"which reaches its --max-tokens cap of {self.max_tokens:,}"
            )
        usd = ledger.usd if ledger.reported else 0.0
        usd = None if usd is None or pending[1] is None else usd + pending[1]
        if self.max_cost is not None and usd is not None and usd >= self.max_cost:
            return (
                f"the run cost ${usd:.4f}, which reaches its --max-cost cap of ${self.max_cost:g}"
            )
        return None

    def nearing(
        self, ledger: CostLedger, pending: tuple[int, float | None], share: float
    ) -> str | None:
        """What the run has spent of a cap once it is ``share`` of it or
        more (a person may want to know before the cap stops the run), or
        None; ``pending`` as for ``exceeded``."""
        return next(iter(self.nearing_each(ledger, pending, share).values()), None)

    def nearing_each(
        self, ledger: CostLedger, pending: tuple[int, float | None], share: float
    ) -> dict[str, str]:
        """``nearing`` for each cap on its own (``max_tokens``, ``max_cost``):
        each is told once, whichever comes first."""
        near: dict[str, str] = {}
        tokens = ledger.tokens + pending[0]
        if self.max_tokens is not None and tokens >= share * self.max_tokens:
            near["max_tokens"] = (
                f"the run used {tokens:,} tokens, {tokens / self.max_tokens:.0%} of its "
                f"--max-tokens cap of {self.max_tokens:,}"
            )
        usd = ledger.usd if ledger.reported else 0.0
        usd = None if usd is None or pending[1] is None else usd + pending[1]
        if self.max_cost is not None and usd is not None and usd >= share * self.max_cost:
            near["max_cost"] = (
                f"the run cost ${usd:.4f}, {usd / self.max_cost:.0%} of its --max-cost "
                f"cap of ${self.max_cost:g}"
            )
        return near

    def raised_by(self, first: Caps) -> Caps:
        """These caps, each raised by its ``first`` amount (a person let the
        run go on past one)."""
        return Caps(
            None if self.max_cost is None else self.max_cost + (first.max_cost or 0),
            None if self.max_tokens is None else self.max_tokens + (first.max_tokens or 0),
        )

    def said(self) -> str:
        """The caps as a person reads them: ``$2 and 50,000 tokens``."""
        parts = [f"${self.max_cost:g}"] if self.max_cost is not None else []
        if self.max_tokens is not None:
            parts.append(f"{self.max_tokens:,} tokens")
        return " and ".join(parts) or "no cap"

    def enforced(self, ledger: CostLedger) -> str | bool | None:
        """result.json's ``cost.capEnforced``: how finely the caps were held
        (the agent's usage granularity), False when they could not be (no
        usage reported; a price unknown under --max-cost), None without caps."""
        if not self:
            return None
        if not ledger.reported or ledger.granularity is None:
            return False
        if self.max_cost is not None and ledger.usd is None:
            return False
        return ledger.granularity


def limits_json(
    max_cost: float | None, max_tokens: int | None, on_budget: str | None
) -> dict[str, Any]:
    """The settings' ``limits`` as they were resolved (config.json)."""
    return {"maxCost": max_cost, "maxTokens": max_tokens, "onBudget": on_budget}


def caps_settings(where: str, value: object, *, error: type[Exception]) -> dict[str, Any]:
    """The settings' ``limits`` object (from the file ``where``) as
    ``Settings``' fields; raises ``error`` saying what is wrong."""
    if not isinstance(value, Mapping):
        raise error(f"{where}: limits: expected an object with maxCost and/or maxTokens")
    for key in value:
        if key not in ("maxCost", "maxTokens", "onBudget"):
            raise error(f"{where}: limits.{key}: unknown key (known: maxCost, maxTokens, onBudget)")
    out: dict[str, Any] = {}
    if "onBudget" in value:
        if value["onBudget"] not in ON_BUDGET:
            raise error(f"{where}: limits.onBudget: expected one of {', '.join(ON_BUDGET)}")
        out["on_budget"] = value["onBudget"]
    if "maxCost" in value:
        cost = _number(value["maxCost"])
        if cost is None or cost == 0:
            raise error(f"{where}: limits.maxCost: expected an amount of USD above 0")
        out["max_cost"] = cost
    if "maxTokens" in value:
        tokens = value["maxTokens"]
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise error(f"{where}: limits.maxTokens: expected a whole number >= 1")
        out["max_tokens"] = tokens
    return out


# --- what a run cost, as every view shows it ------------------------------------

#: What ``cost.source`` may say.
SOURCES = (AGENT, COMPUTED, MIXED, UNKNOWN)


@dataclass(frozen=True, slots=True)
class ShownCost:
    """What a run cost as the views show it: ``usd`` None is unknown (never
    0), ``source`` as result.json's ``cost.source`` says it."""

    usd: float | None
    source: str

    @property
    def text(self) -> str:
        return cost_text(self.usd)


def run_cost(record: Mapping[str, Any] | None) -> ShownCost:
    """The cost one run's record shows: result.json, status.json or a batch
    report's entry of the run.

    result.json's ``cost`` when it has one (the agent's figure or one
    computed from the price table); else a batch entry's ``costUsd`` and
    ``costSource``; else ``usage.costUsd``, what the agent reported (an
    older wrapper's result, a status.json while the run goes on); else
    unknown. A ``cost`` whose ``usd`` is null is unknown even where
    ``usage.costUsd`` has a figure: that figure then leaves out the reports
    the agent gave no cost for, and a part is not the run's cost."""
    if not isinstance(record, Mapping):
        return ShownCost(None, UNKNOWN)
    cost = record.get("cost")
    if isinstance(cost, Mapping):
        return _shown(cost.get("usd"), cost.get("source"))
    if isinstance(record.get("costSource"), str):
        return _shown(record.get("costUsd"), record.get("costSource"))
    usage = record.get("usage")
    if isinstance(usage, Mapping):
        return _shown(usage.get("costUsd"), AGENT)
    return ShownCost(None, UNKNOWN)


def _shown(usd: object, source: object) -> ShownCost:
    amount = _number(usd)
    if amount is None:
        return ShownCost(None, UNKNOWN)
    return ShownCost(amount, source if isinstance(source, str) and source in SOURCES else AGENT)


def cost_text(usd: float | None, unknown: str = "unknown") -> str:
    """A cost for a person: ``$1.20``; ``< $0.01`` for less than a cent (a
    run that cost something never reads as nothing); ``$0`` for nothing at
    all; ``unknown`` (or the view's own word for it), never ``$0.00``."""
    if usd is None or not math.isfinite(usd):
        return unknown
    if usd <= 0:
        return "$0"
    if usd < 0.01:
        return "< $0.01"
    return f"${usd:,.2f}"


@dataclass(frozen=True, slots=True)
class CostSum:
    """The runs' costs summed: ``usd`` the sum of the known ones (None when
    none is known), ``unknown`` how many runs' cost is not known, counted
    apart and never as 0."""

    usd: float | None
    unknown: int

    @classmethod
    def of(cls, costs: Iterable[float | None]) -> CostSum:
        known: list[float] = []
        unknown = 0
        for usd in costs:
            if usd is None or not math.isfinite(usd):
                unknown += 1
            else:
                known.append(usd)
        return cls(sum(known) if known else None, unknown)

    @property
    def text(self) -> str:
        """``$1.20``, ``$1.20 + 2 unknown``; ``unknown`` when none is known."""
        if self.usd is None:
            return "unknown"
        shown = cost_text(self.usd)
        return f"{shown} + {self.unknown:,} unknown" if self.unknown else shown

    def to_json(self) -> dict[str, Any]:
        return {"usd": self.usd, "unknown": self.unknown}
