"""Telling a misspelt name: the known name closest to it, within a few edits."""

from __future__ import annotations

from collections.abc import Iterable


def closest(name: str, known: Iterable[str], max_edits: int) -> str | None:
    """The name of ``known`` that ``name`` is most likely a misspelling of
    (ignoring case, at most ``max_edits`` edits away), if any."""
    folded = name.casefold()
    best: tuple[int, str] | None = None
    for candidate in sorted(known):
        distance = edit_distance(folded, candidate.casefold())
        if distance <= max_edits and (best is None or distance < best[0]):
            best = (distance, candidate)
    return best[1] if best is not None else None


def edit_distance(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of neighbours that turn
    ``a`` into ``b`` (optimal string alignment distance)."""
    older: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], older[j - 2] + 1)
        older, prev = prev, row
    return prev[len(b)]
