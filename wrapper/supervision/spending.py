"""What a run spends, and its caps: the run's ``CostLedger`` fed every usage
the agent reports, prices looked up out of process, the caps checked.

When prices are looked up (``agent-wrapper prices``, a process of its own
with ``PRICE_LOOKUP_TIMEOUT``, its answers cached per model and table
version so a model costs one lookup per table):

- at the run's end, for the models of the messages whose cost the agent did
  not report: result.json's ``cost`` needs nothing sooner, and a run without
  a cost cap pays nothing while it runs;
- under ``--max-cost``, as soon as a model is known (the one on the agent's
  command line at the start, a model the stream names when it first does),
  in the background: the agent is not held up, and the messages that came
  before the price are priced when it arrives and the cap checked again.
  A price that cannot be had is said at once: the cap is then not held.

Without the table installed no process is started (its metadata is looked
for on the path): the cost is unknown, and the warning names the model and
the install line.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

import orjson
import trio

from wrapper.core.config import RunConfig
from wrapper.core.cost import Caps, CostLedger, PriceRecord, model_key, model_on_command_line
from wrapper.core.events import AssistantMessage, Usage, WarningEvent
from wrapper.core.limits import CAP_NOTICE_SHARE, PRICE_LOOKUP_TIMEOUT
from wrapper.dialects import Dialect, SniffingDialect, dialect_for_command
from wrapper.files.prices import (
    INSTALL_LINE,
    NotInTable,
    cache_root,
    read_price,
    table_version,
)
from wrapper.hooks.runner import run_process
from wrapper.process.invocation import wrapper_argv
from wrapper.sinks.stream import EventStream

#: Warning codes: a message's cost that could not be known, and a cap that
#: could not be held as asked.
COST_UNKNOWN = "cost_unknown"
CAP_NOT_ENFORCED = "cap_not_enforced"
#: A cap reached by the usage the agent reported last, at its end.
CAP_PASSED = "cap_passed"


def _dialect_class(dialect: Dialect, command: tuple[str, ...]) -> type[Dialect] | None:
    if isinstance(dialect, SniffingDialect):
        return type(dialect.chosen) if dialect.chosen is not None else dialect_for_command(command)
    return type(dialect)


class Spending:
    """A run's spend: fed the agent's messages, it stops the run at a cap
    (``on_over``, given the spend and the cap) and gives result.json its
    ``cost``. ``say_on_stderr``: a cap that cannot be held is said on stderr
    too (where no live view of the run's own shows its warnings)."""

    def __init__(
        self,
        config: RunConfig,
        dialect: Dialect,
        environ: Mapping[str, str],
        stream: EventStream,
        on_over: Callable[[str], None],
        *,
        say_on_stderr: bool,
    ) -> None:
        self.config = config
        self.dialect = dialect
        self.environ = environ
        self.stream = stream
        self.on_over = on_over
        self.say_on_stderr = say_on_stderr
        self.caps = Caps(config.max_cost, config.max_tokens)
        known = _dialect_class(dialect, config.command)
        options = known.model_options if known is not None else ("--model",)
        self.ledger = CostLedger(
            fallback_model=model_on_command_line(config.command, options),
            granularity=known.usage_granularity if known is not None else "turn",
        )
        #: Models looked up (or being looked up), by key, and why those
        #: without a price have none.
        self._asked: set[str] = set()
        self.reasons: dict[str, str] = {}
        self.table: str | None = None
        self.over: str | None = None
        #: The turn under way's progress reports, and its model.
        self._progress: tuple[tuple[Usage, ...], str | None] = ((), None)
        #: The run's agent is done: a cap reached now stops nothing.
        self.ended = False
        self._warned: set[str] = set()
        #: Where lookups run in the background, while the run has one.
        self.nursery: trio.Nursery | None = None
        #: Prices are looked up as the run goes (its own --max-cost, or its
        #: batch's --batch-max-cost), not only at its end.
        self.pricing = config.max_cost is not None
        #: Told whenever what the run spent may have changed (its batch's caps).
        self.on_spent: Callable[[], None] | None = None
        #: Told once per cap when ``CAP_NOTICE_SHARE`` of it is spent (what
        #: was spent, said): the run's ``Notification`` observers.
        self.on_near_cap: Callable[[str], None] | None = None
        #: The caps (``Caps.nearing_each``'s keys) already told.
        self._near_told: set[str] = set()

    # -- while the run goes on ---------------------------------------------------

    def start(self, nursery: trio.Nursery) -> None:
        """The run started: under ``--max-cost``, the command line's model is
        looked up now, in ``nursery``."""
        self.nursery = nursery
        if not self.pricing:
            return
        fallback = model_key(self.ledger.fallback_model)
        if fallback is not None:
            self._look_up_soon([fallback])

    def observe(self, message: AssistantMessage) -> None:
        """A message of the agent's: its usage counted, the caps checked."""
        usage = message.usage
        if usage is None:
            # A turn's progress: counted against the caps until its end.
            self._progress = (message.progress_usage, message.model)
            if self.pricing:
                self._price_soon(message.model)
            self._check()
            return
        self._progress = ((), None)
        self.ledger.add(usage, message.model)
        if self.pricing and usage.cost_usd is None:
            self._price_soon(message.model)
        self._check()

    def _price_soon(self, model: str | None) -> None:
        """Under --max-cost: the price of ``model`` (or the command line's)
        looked up now, or said at once that there is none to look up."""
        key = model_key(model) or model_key(self.ledger.fallback_model)
        if key is None:
            self._cannot_hold(
                "--max-cost cannot be held: the agent named no model and its command "
                "line gives none, so what its messages cost is unknown",
                "no-model",
            )
        elif not self.ledger.priced(key):
            self._look_up_soon([key])

    def raise_caps(self) -> str:
        """A person let the run go on past its cap: each cap is raised by its
        first amount, and the interrupted turn's progress counted for good
        (its final message never came). Returns the new caps, said."""
        usages, model = self._progress
        for usage in usages:
            self.ledger.add(usage, model)
        self._progress = ((), None)
        self.caps = self.caps.raised_by(Caps(self.config.max_cost, self.config.max_tokens))
        self.over = None
        self._near_told = set()
        return self.caps.said()

    def spent(self) -> tuple[int, float | None]:
        """What the run spent so far, the turn under way's progress included:
        its tokens (as ``--max-tokens`` counts them) and cost (None: some of
        it unknown)."""
        tokens, usd = self.ledger.provisional(*self._progress)
        known = self.ledger.usd if self.ledger.reported else 0.0
        return self.ledger.tokens + tokens, None if known is None or usd is None else known + usd

    def _check(self) -> None:
        if self.on_spent is not None:
            self.on_spent()
        if self.over is not None or self.ended or not self.caps:
            return
        # A price that came since is used for the turn's progress too.
        pending = self.ledger.provisional(*self._progress)
        if self.on_near_cap is not None:
            near = self.caps.nearing_each(self.ledger, pending, CAP_NOTICE_SHARE)
            for cap, said in near.items():
                if cap not in self._near_told:
                    self._near_told.add(cap)
                    self.on_near_cap(said)
        over = self.caps.exceeded(self.ledger, pending)
        if over is not None:
            self.over = over
            self.on_over(over)

    def _look_up_soon(self, keys: list[str]) -> None:
        new = [key for key in keys if key not in self._asked]
        if not new or self.nursery is None:
            return
        self._asked.update(new)

        async def look_up() -> None:
            try:
                await self.look_up(new)
            except Exception as exc:  # a lookup's own failure is a price not known
                for key in new:
                    self.reasons[key] = f"the price lookup failed: {exc}"
            for key in new:
                if key in self.reasons:
                    self._cannot_hold(
                        f"--max-cost cannot be held: the price of {key} is unknown "
                        f"({self.reasons[key]})",
                        key,
                    )
            self._check()

        self.nursery.start_soon(look_up)

    def _cannot_hold(self, message: str, key: str) -> None:
        """Said once per cause, at once: events, result.json and stderr."""
        if key in self._warned:
            return
        self._warned.add(key)
        self.stream.emit(WarningEvent(code=CAP_NOT_ENFORCED, message=message))
        if self.say_on_stderr:
            label = f"{self.config.label}: " if self.config.label else ""
            with contextlib.suppress(OSError, ValueError):
                print(f"agent-wrapper: warning: {label}{message}", file=sys.stderr, flush=True)

    # -- prices ---------------------------------------------------------------------

    async def look_up(self, keys: list[str]) -> None:
        """Give the ledger the prices of ``keys``: from the cache, else from
        ``agent-wrapper prices`` (at most ``PRICE_LOOKUP_TIMEOUT``); those
        that cannot be had get their reason in ``reasons``."""
        table = self.table = table_version()
        if table is None:
            for key in keys:
                self.reasons[key] = f"the price table is not installed: {INSTALL_LINE}"
            return
        root = cache_root(self.environ)
        found: dict[str, PriceRecord] = {}
        missing = []
        for key in keys:
            hit = read_price(root, table, key)
            if isinstance(hit, PriceRecord):
                found[key] = hit
            elif isinstance(hit, NotInTable):
                self.reasons[key] = hit.reason
            else:
                missing.append(key)
        if missing:
            answer = await self._ask(missing)
            for key in missing:
                record = PriceRecord.from_json((answer.get("prices") or {}).get(key))
                if record is not None:
                    found[key] = record
                else:
                    why = (answer.get("reasons") or {}).get(key)
                    self.reasons[key] = why if isinstance(why, str) else answer["_failed"]
        self.ledger.price(found)

    async def _ask(self, keys: list[str]) -> dict[str, Any]:
        # A helper of the wrapper's, as a hook's handler is: the sweep for the
        # agent's leftovers leaves it alone.
        argv = [*wrapper_argv(), "prices", "--json", *keys]
        ran = await run_process(argv, b"", self.environ, self.config.cwd, PRICE_LOOKUP_TIMEOUT)
        failed = "the price lookup failed"
        if ran.error is not None:
            return {"_failed": f"{failed}: {ran.error}"}
        if ran.timed_out:
            return {"_failed": f"{failed}: it took longer than {PRICE_LOOKUP_TIMEOUT:g}s"}
        try:
            answer = orjson.loads(ran.stdout)
        except orjson.JSONDecodeError:
            said = ran.stderr.decode(errors="replace").strip().splitlines()
            return {"_failed": f"{failed}: {said[-1] if said else f'exit {ran.exit_code}'}"}
        if not isinstance(answer, dict):
            return {"_failed": failed}
        answer["_failed"] = failed
        return answer

    # -- at the end -----------------------------------------------------------------

    async def settle(self, *, stopped: bool) -> None:
        """Before result.json: the messages still without a cost are priced
        (a lookup, bounded), and what stays unknown is warned of, by model;
        a cap passed when nothing was left to stop (``stopped``: the run
        ended for its cap) is warned of too."""
        self.nursery = None
        # A turn that never reached its final message (stopped at a cap, say)
        # still spent what its progress reported.
        usages, model = self._progress
        for usage in usages:
            self.ledger.add(usage, model)
        self._progress = ((), None)
        # An agent recognised from its stream is known only now.
        known = _dialect_class(self.dialect, self.config.command)
        if known is not None:
            self.ledger.granularity = known.usage_granularity
        waiting = [key for key in self.ledger.unpriced_models() if key is not None]
        fresh = [key for key in waiting if key not in self._asked and key not in self.reasons]
        if fresh:
            self._asked.update(fresh)
            await self.look_up(fresh)
        for key in self.ledger.unpriced_models():
            why = self.reasons.get(key) if key is not None else None
            if key is None:
                text = (
                    "the cost of the agent's messages is unknown: it reported no cost and "
                    "named no model (give the agent's model option, e.g. --model)"
                )
            else:
                text = f"the cost of {key} is unknown: {why or 'no price was found for it'}"
            self.stream.emit(WarningEvent(code=COST_UNKNOWN, message=text))
        over = self.caps.exceeded(self.ledger)
        if over is not None and not stopped:
            self.stream.emit(
                WarningEvent(
                    code=CAP_PASSED,
                    message=f"{over} once the agent had finished: nothing was left to stop",
                )
            )
        if self.caps and not self.ledger.reported:
            self.stream.emit(
                WarningEvent(
                    code=CAP_NOT_ENFORCED,
                    message="the run's caps could not be held: the agent reported no usage",
                )
            )

    def to_json(self) -> dict[str, Any]:
        cost = self.ledger.to_json(
            price_data=f"genai-prices {self.table}" if self.table else None,
            cap_enforced=self.caps.enforced(self.ledger),
        )
        # As they ended: a person may have raised them (``--on-budget escalate``).
        cost["caps"] = (
            {"maxCost": self.caps.max_cost, "maxTokens": self.caps.max_tokens}
            if self.caps
            else None
        )
        return cost
