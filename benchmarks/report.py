"""The results table, as text for the terminal and as BENCHMARKS.md."""

from __future__ import annotations

import enum
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class Verdict(enum.StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    #: A figure without a target, recorded to follow its trend.
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Row:
    section: str
    case: str
    #: The wrapper's median figure.
    measured: str
    #: The reference it is measured against, in the same run.
    reference: str
    #: measured / reference (and the difference, where that is what the target is about).
    versus: str
    target: str
    verdict: Verdict


HEADERS = ("section", "case", "wrapper (median)", "reference (median)", "vs reference", "target")


def _cells(row: Row) -> tuple[str, ...]:
    return (row.section, row.case, row.measured, row.reference, row.versus, row.target)


def render_text(rows: Sequence[Row]) -> str:
    table = [(*HEADERS, "result"), *((*_cells(r), r.verdict.value) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)) for line in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def render_markdown_table(rows: Sequence[Row]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    verdicts = {Verdict.PASS: "**PASS**", Verdict.FAIL: "**FAIL**", Verdict.INFO: "info"}
    out = [line((*HEADERS, "result")), line(["---"] * (len(HEADERS) + 1))]
    out += [line((*_cells(r), verdicts[r.verdict])) for r in rows]
    return "\n".join(out)


def cpu_model() -> str:
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                return text.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> list[tuple[str, str]]:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        ("CPU", cpu_model()),
        ("cores", str(os.cpu_count())),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("kernel", f"{platform.system()} {platform.release()}"),
        ("load average at start (1, 5, 15 min)", load),
    ]
