"""The price cache: one small JSON file per model and price-table version,
under the user's cache directory (``$XDG_CACHE_HOME/agent-wrapper/prices/
VERSION/MODEL.json``).

``agent-wrapper prices`` (``wrapper.commands.prices``, the one module that
imports the price table) writes it; a run only reads it, so that no run's
process ever loads the table (about 28 MB and 0.4 s). Which version of the
table is installed is read from its package's metadata directory on the
path, without importing it. A damaged file is a price not known, never an
error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

import orjson

from wrapper.core.cost import PriceRecord
from wrapper.core.limits import PRICE_FILE_MAX_BYTES
from wrapper.files.artifacts import UnreadableFile, atomic_write, dump_json, read_regular_file

#: The distribution that holds the price table (the ``cost`` extra).
TABLE_DISTRIBUTION = "genai_prices"
#: What a user runs to get computed costs.
INSTALL_LINE = "pip install 'agent-wrapper[cost]'"


class NotInTable:
    """A cached answer that the table has no price for the model."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def cache_root(environ: Mapping[str, str]) -> Path:
    """Where price records are kept: ``$XDG_CACHE_HOME/agent-wrapper/prices``,
    ``~/.cache`` standing for an unset or relative ``XDG_CACHE_HOME``."""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(base) / "agent-wrapper" / "prices"


def table_version(path: list[str] | None = None) -> str | None:
    """The installed price table's version, from its metadata directory on
    the import path (the table itself is not imported), or None."""
    prefix = TABLE_DISTRIBUTION + "-"
    for entry in sys.path if path is None else path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(prefix) and name.endswith(".dist-info"):
                return name[len(prefix) : -len(".dist-info")]
    return None


def record_path(root: Path, table: str, model: str) -> Path:
    return root / quote(table, safe="") / (quote(model, safe="") + ".json")


def read_price(root: Path, table: str, model: str) -> PriceRecord | NotInTable | None:
    """The cached price of ``model`` in table ``table``: its record, the
    table's word that it has none, or None when nothing usable is cached."""
    try:
        raw = read_regular_file(record_path(root, table, model), PRICE_FILE_MAX_BYTES)
        data = orjson.loads(raw)
    except (OSError, UnreadableFile, orjson.JSONDecodeError):
        return None
    if isinstance(data, dict) and data.get("notInTable") is True:
        reason = data.get("reason")
        return NotInTable(reason if isinstance(reason, str) else "not in the price table")
    record = PriceRecord.from_json(data)
    return record if record is not None and record.table == table else None


def write_price(root: Path, table: str, model: str, found: PriceRecord | NotInTable) -> None:
    """Keep what the table said of ``model`` (raises OSError)."""
    path = record_path(root, table, model)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(found, NotInTable):
        data = {"requested": model, "table": table, "notInTable": True, "reason": found.reason}
        atomic_write(path, dump_json(data), durable=False)
    else:
        atomic_write(path, dump_json(found.to_json()), durable=False)
