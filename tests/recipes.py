"""The documents' recipes, read from the pages themselves (README.md and
docs/), so that a test runs them as written: each is the first code block
after a line ``<!-- recipe: NAME -->``."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

_MARKED = re.compile(r"<!-- recipe: (?P<name>[^>]+?) -->\s*```[a-z]*\n(?P<body>.*?)```", re.S)


def recipe(name: str) -> str:
    """The code of the recipe ``name``; KeyError when there is none."""
    found = {
        m["name"]: m["body"] for path in documents() for m in _MARKED.finditer(path.read_text())
    }
    return found[name]


def documents() -> list[Path]:
    """The README and the pages of the documentation site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
