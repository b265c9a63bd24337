"""What a run costs: the arithmetic (pure), the price records, and the
computed cost of captured real streams against the price table."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.acp_replay import CAPTURES, replay
from tests.dialect_support import capture, messages
from tests.dialect_support import replay as replay_lines
from wrapper.core.cost import (
    Caps,
    CostLedger,
    PriceRecord,
    Tiered,
    model_key,
    model_on_command_line,
)
from wrapper.core.events import AssistantMessage, Usage
from wrapper.dialects.codex import CodexDialect
from wrapper.dialects.gemini import GeminiDialect
from wrapper.files.prices import NotInTable, read_price, table_version, write_price

REAL = Path(__file__).parent / "data" / "real"

#: Prices as the table gives them for two models (USD per million tokens).
FLAT = PriceRecord(
    requested="gpt-5-codex",
    matched="gpt-5",
    table="test",
    input=1.25,
    output=10.0,
    cache_read=0.125,
)
TIERED = PriceRecord(
    requested="claude-sonnet-4-5",
    matched="claude-sonnet-4-5",
    table="test",
    input=Tiered(3.0, ((200_000, 6.0),)),
    output=Tiered(15.0, ((200_000, 22.5),)),
    cache_read=Tiered(0.3, ((200_000, 0.6),)),
    cache_write=Tiered(3.75, ((200_000, 7.5),)),
)


def test_a_message_is_priced_with_its_cache_tokens_at_their_own_price() -> None:
    # usage.input excludes cache reads: 4000 fresh, 2000 read, 1000 out
    cost = FLAT.cost(Usage(input=4000, cache_read=2000, output=1000))
    assert cost == pytest.approx((4000 * 1.25 + 2000 * 0.125 + 1000 * 10) / 1e6)
    # no cache-write price: written tokens cost what input costs
    assert FLAT.cost(Usage(input=0, cache_write=1000)) == pytest.approx(1000 * 1.25 / 1e6)


def test_a_tiered_model_is_priced_per_message_never_on_the_sum() -> None:
    small = Usage(input=150_000, output=1000)
    ledger = CostLedger(fallback_model="claude-sonnet-4-5", granularity="message")
    ledger.price({"claude-sonnet-4-5": TIERED})
    ledger.add(small, None)
    ledger.add(small, None)
    each = (150_000 * 3.0 + 1000 * 15.0) / 1e6
    assert ledger.usd == pytest.approx(2 * each)
    # The two as one request would cross the 200k tier: a higher price.
    assert TIERED.cost(small + small) == pytest.approx((300_000 * 6.0 + 2000 * 22.5) / 1e6)
    # cache tokens count towards the request's size
    big = TIERED.cost(Usage(input=100, cache_read=250_000, output=0))
    assert big == pytest.approx((100 * 6.0 + 250_000 * 0.6) / 1e6)


def test_unknown_is_never_zero() -> None:
    ledger = CostLedger(fallback_model=None, granularity="turn")
    silent = ledger.to_json(price_data=None, cap_enforced=None)
    assert (silent["usd"], silent["source"], silent["granularity"]) == (None, "unknown", None)
    ledger.add(Usage(input=10, output=5, cost_usd=0.5), "pi-model")
    ledger.add(Usage(input=1000, output=100), "nosuch-model")
    cost = ledger.to_json(price_data=None, cap_enforced=None)
    assert cost["usd"] is None
    assert cost["source"] == "unknown"
    assert cost["models"] == [
        {"requested": "pi-model", "matched": None, "usd": 0.5},
        {"requested": "nosuch-model", "matched": None, "usd": None},
    ]


def test_sources_agent_computed_and_mixed() -> None:
    ledger = CostLedger(fallback_model="openai/gpt-5-codex", granularity="turn")
    ledger.add(Usage(input=100, output=10, cost_usd=0.25), None)
    assert ledger.source == "agent"
    # a message before its price waits for it, then is priced
    ledger.add(Usage(input=4000, cache_read=2000, output=1000), None)
    assert ledger.source == "unknown"
    assert ledger.usd is None
    ledger.price({"gpt-5-codex": FLAT})
    assert ledger.source == "mixed"
    assert ledger.usd == pytest.approx(0.25 + 0.01525)
    only = CostLedger(fallback_model="gpt-5-codex", granularity="turn")
    only.price({"gpt-5-codex": FLAT})
    only.add(Usage(input=1, output=1), None)
    cost = only.to_json(price_data="genai-prices 0.2.3", cap_enforced="turn")
    assert (cost["source"], cost["priceData"], cost["models"][0]["matched"]) == (
        "computed",
        "genai-prices 0.2.3",
        "gpt-5",
    )


def test_model_names() -> None:
    assert model_key("anthropic/claude-sonnet-4-5") == "claude-sonnet-4-5"
    assert model_key("models/gemini-2.5-pro ") == "gemini-2.5-pro"
    assert model_key("  ") is None
    assert model_key(None) is None
    codex = ("-m", "--model")
    assert model_on_command_line(["codex", "exec", "-m", "gpt-5", "--json"], codex) == "gpt-5"
    assert model_on_command_line(["codex", "exec", "--model=o3"], codex) == "o3"
    assert model_on_command_line(["codex", "exec", "--", "-m", "x"], codex) is None
    assert model_on_command_line(["claude", "-m", "x"], ("--model",)) is None


def test_caps_stop_at_the_cap_with_the_spend_and_the_cap_in_the_message() -> None:
    ledger = CostLedger(fallback_model=None, granularity="message")
    caps = Caps(max_tokens=1000)
    ledger.add(Usage(input=400, output=100, cache_read=10_000), "m")
    assert caps.exceeded(ledger) is None, "cache reads do not count"
    ledger.add(Usage(input=400, output=100), "m")
    said = caps.exceeded(ledger)
    assert said is not None
    assert "1,000 tokens" in said
    assert "--max-tokens cap of 1,000" in said
    assert caps.enforced(ledger) == "message"
    # a cost cap whose price is unknown cannot be held
    cost_cap = Caps(max_cost=1.0)
    assert cost_cap.exceeded(ledger) is None
    assert cost_cap.enforced(ledger) is False
    assert Caps().enforced(ledger) is None
    assert Caps(max_tokens=5).enforced(CostLedger(fallback_model=None, granularity="turn")) is False


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
)


@given(JSON)
def test_any_cached_record_is_read_without_raising(data: Any) -> None:
    read = PriceRecord.from_json(data)
    assert read is None or isinstance(read, PriceRecord)


def test_records_round_trip_through_the_cache(tmp_path: Path) -> None:
    for record in (FLAT, TIERED):
        assert PriceRecord.from_json(record.to_json()) == record
        write_price(tmp_path, "test", record.requested, record)
        assert read_price(tmp_path, "test", record.requested) == record
    write_price(tmp_path, "test", "nosuch", NotInTable("not in the table"))
    said = read_price(tmp_path, "test", "nosuch")
    assert isinstance(said, NotInTable)
    assert said.reason == "not in the table"
    assert read_price(tmp_path, "other", "gpt-5-codex") is None
    (tmp_path / "test" / "bad.json").write_text("{")
    assert read_price(tmp_path, "test", "bad") is None


def test_the_table_version_is_found_without_importing_it(tmp_path: Path) -> None:
    assert table_version([str(tmp_path)]) is None
    (tmp_path / "genai_prices-9.8.7.dist-info").mkdir()
    assert table_version([str(tmp_path / "missing"), str(tmp_path)]) == "9.8.7"


# -- captured real streams, against the table ----------------------------------------------------


def _table_record(model: str) -> PriceRecord:
    if importlib.util.find_spec("genai_prices") is None:
        pytest.skip("the cost extra (genai-prices) is not installed")
    from wrapper.commands.prices import look_up

    found = look_up([model])
    assert not isinstance(found, str)
    record = found[model_key(model) or ""]
    assert isinstance(record, PriceRecord), record
    return record


def _table_cost(usage: Usage, model: str) -> float:
    import genai_prices

    return float(
        genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=(usage.input or 0)
                + (usage.cache_read or 0)
                + (usage.cache_write or 0),
                cache_read_tokens=usage.cache_read or 0,
                cache_write_tokens=usage.cache_write or 0,
                output_tokens=usage.output or 0,
            ),
            model,
        ).total_price
    )


def _computed(found: list[AssistantMessage], fallback: str) -> tuple[CostLedger, list[Usage]]:
    record = _table_record(fallback)
    ledger = CostLedger(fallback_model=fallback, granularity="turn")
    usages = [m.usage for m in found if m.usage is not None]
    for message in found:
        if message.usage is not None:
            ledger.add(message.usage, message.model)
    ledger.price({record.requested: record})
    return ledger, usages


def test_codex_cost_is_computed_from_its_token_counts_and_its_model_option() -> None:
    events = replay_lines(CodexDialect(), capture("codex_tooluse_v0.46.jsonl"))
    argv = ["codex", "exec", "--json", "-m", "gpt-5-codex"]
    model = model_on_command_line(argv, CodexDialect.model_options)
    assert model == "gpt-5-codex"
    ledger, usages = _computed(messages(events), model)
    # Codex counts cached input inside its input: 6040 of which 4992 cached
    assert usages == [Usage(input=1048, output=129, cache_read=4992, total_tokens=6169)]
    cost = ledger.to_json(price_data=None, cap_enforced=None)
    assert cost["source"] == "computed"
    assert cost["models"][0]["matched"] == "gpt-5"
    assert cost["usd"] == pytest.approx(_table_cost(usages[0], "gpt-5-codex"))


def test_gemini_cost_is_computed_for_the_model_its_stream_names() -> None:
    lines = (REAL / "gemini-0.61.0" / "tool.jsonl").read_bytes().splitlines()
    found = messages(replay_lines(GeminiDialect(), [line for line in lines if line.strip()]))
    named = {m.model for m in found if m.usage is not None}
    assert named == {"gemini-2.5-flash"}
    ledger, usages = _computed(found, "gemini-2.5-flash")
    assert ledger.usd is not None
    assert ledger.usd > 0
    assert ledger.usd == pytest.approx(sum(_table_cost(u, "gemini-2.5-flash") for u in usages))


def test_an_acp_agents_turn_usage_is_priced_as_the_model_given() -> None:
    # opencode's ACP prompt response carries usage, but names no model: the
    # model comes from the run (here as if it had been claude-sonnet-4-5)
    found = replay(CAPTURES / "opencode-1.18.33" / "plain.jsonl").events
    ledger, usages = _computed(messages(found), "anthropic/claude-sonnet-4-5")
    assert usages
    assert ledger.source == "computed"
    assert ledger.usd == pytest.approx(sum(_table_cost(u, "claude-sonnet-4-5") for u in usages))


def test_a_turns_progress_counts_against_the_caps_until_its_end() -> None:
    ledger = CostLedger(fallback_model="claude-sonnet-4-5", granularity="message")
    progress = (Usage(input=150_000, output=1000), Usage(input=150_000, output=1000))
    assert ledger.provisional(progress, None) == (302_000, None), "no price yet: unknown"
    ledger.price({"claude-sonnet-4-5": TIERED})
    tokens, usd = ledger.provisional(progress, None)
    assert tokens == 302_000
    assert usd == pytest.approx(2 * (150_000 * 3.0 + 1000 * 15.0) / 1e6), "each priced alone"
    said = Caps(max_cost=0.9).exceeded(ledger, (tokens, usd))
    assert said is not None
    assert "--max-cost cap of $0.9" in said
    assert Caps(max_cost=0.9).exceeded(ledger) is None, "nothing reported for real yet"
