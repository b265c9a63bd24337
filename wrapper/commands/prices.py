"""``agent-wrapper prices MODEL...``: what the price table says a model costs.

The one module that imports the price table (``genai-prices``, the
``cost`` extra). It runs as a process of its own: a run that needs a price
starts it (with a timeout) and reads its JSON answer, so the run's own
process never loads the table (about 28 MB and 0.4 s, measured with 0.2.3),
and its start-up, idle memory and per-event path stay as they are. Each
answer is also kept in the price cache (``wrapper.files.prices``), per model
and table version, so a model is looked up once per table.

The record holds the prices in force when it is looked up (the table is
historical; a run is priced at its own time, which is now). A name is looked
up without its provider prefix (``anthropic/claude-sonnet-4-5``), and the
record says which model of the table it matched (``gpt-5-codex`` is priced
as ``gpt-5``).

Exit status: 0 when every model has a price; 1 when one has none or the
table is not installed; 2 on usage errors.
"""

from __future__ import annotations

import os
import sys
from decimal import Decimal
from typing import Any

import orjson

from wrapper.core.cost import Price, PriceRecord, Tiered, model_key
from wrapper.files.prices import (
    INSTALL_LINE,
    NotInTable,
    cache_root,
    read_price,
    table_version,
    write_price,
)


def look_up(models: list[str]) -> dict[str, PriceRecord | NotInTable] | str:
    """Each model's price record (or the table's word that it has none), by
    the model's key; or why there is no table at all."""
    try:
        import genai_prices  # noqa: PLC0415
    except ImportError:
        return f"the price table is not installed ({INSTALL_LINE})"
    table = genai_prices.__version__
    found: dict[str, PriceRecord | NotInTable] = {}
    for model in models:
        key = model_key(model)
        if key is None:
            continue
        try:
            calc = genai_prices.calc_price(genai_prices.Usage(input_tokens=1, output_tokens=1), key)
        except LookupError as exc:
            found[key] = NotInTable(f"not in the price table {table}: {exc}")
            continue
        except Exception as exc:  # the table's own failure is a price not known
            found[key] = NotInTable(f"the price table {table} failed on it: {exc}")
            continue
        prices = calc.model_price
        found[key] = PriceRecord(
            requested=key,
            matched=calc.model.id,
            provider=calc.provider.id,
            table=table,
            input=_price(getattr(prices, "input_mtok", None)) or 0.0,
            output=_price(getattr(prices, "output_mtok", None)) or 0.0,
            cache_read=_price(getattr(prices, "cache_read_mtok", None)),
            cache_write=_price(getattr(prices, "cache_write_mtok", None)),
        )
    return found


def _price(value: Any) -> Price | None:
    if isinstance(value, Decimal):
        return float(value)
    base, tiers = getattr(value, "base", None), getattr(value, "tiers", None)
    if isinstance(base, Decimal) and isinstance(tiers, list):
        return Tiered(float(base), tuple((int(t.start), float(t.price)) for t in tiers))
    return None


def main(models: list[str], *, as_json: bool, cached: bool = True) -> int:
    """Print each model's price (one JSON object with ``--json``: ``table``,
    ``prices`` by model key, a record or null, ``reasons`` for the nulls)."""
    root = cache_root(os.environ)
    version = table_version()
    answers: dict[str, PriceRecord | NotInTable] = {}
    wanted = [key for key in dict.fromkeys(map(model_key, models)) if key is not None]
    if cached and version is not None:
        for key in wanted:
            hit = read_price(root, version, key)
            if hit is not None:
                answers[key] = hit
    missing = [key for key in wanted if key not in answers]
    if missing:
        found = look_up(missing)
        if isinstance(found, str):
            return _no_table(found, wanted, as_json)
        for key, answer in found.items():
            answers[key] = answer
            table = answer.table if isinstance(answer, PriceRecord) else version
            if table is not None:
                try:
                    write_price(root, table, key, answer)
                except OSError as exc:
                    print(f"agent-wrapper prices: cannot cache {key}: {exc}", file=sys.stderr)
    known = all(isinstance(answers.get(key), PriceRecord) for key in wanted)
    if as_json:
        out = {
            "table": version,
            "prices": {
                key: answer.to_json() if isinstance(answer, PriceRecord) else None
                for key, answer in answers.items()
            },
            "reasons": {
                key: answer.reason
                for key, answer in answers.items()
                if isinstance(answer, NotInTable)
            },
        }
        sys.stdout.buffer.write(orjson.dumps(out) + b"\n")
    else:
        for key in wanted:
            answer = answers[key]
            if isinstance(answer, NotInTable):
                print(f"{key}: unknown ({answer.reason})")
            else:
                print(f"{key}: {_describe(answer)}")
    return 0 if known else 1


def _no_table(why: str, wanted: list[str], as_json: bool) -> int:
    if as_json:
        out = {
            "table": None,
            "prices": dict.fromkeys(wanted),
            "reasons": dict.fromkeys(wanted, why),
        }
        sys.stdout.buffer.write(orjson.dumps(out) + b"\n")
    else:
        print(f"agent-wrapper prices: {why}", file=sys.stderr)
    return 1


def _describe(record: PriceRecord) -> str:
    def show(price: Price | None) -> str:
        if price is None:
            return "as input"
        if isinstance(price, Tiered):
            tiers = ", ".join(f"${p:g} above {s:,} input tokens" for s, p in price.tiers)
            return f"${price.base:g}" + (f" ({tiers})" if tiers else "")
        return f"${price:g}"

    provider = f" ({record.provider})" if record.provider else ""
    return (
        f"priced as {record.matched}{provider}, per million tokens: input {show(record.input)}, "
        f"output {show(record.output)}, cache read {show(record.cache_read)}, "
        f"cache write {show(record.cache_write)} (genai-prices {record.table})"
    )
