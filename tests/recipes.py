"""The README's recipes, read from the README itself, so that a test runs
them as written: each is the first code block after a line
``<!-- recipe: NAME -->``."""

from __future__ import annotations

import re

from tests.conftest import ROOT

_MARKED = re.compile(r"<!-- recipe: (?P<name>[^>]+?) -->\s*```[a-z]*\n(?P<body>.*?)```", re.S)


def recipe(name: str) -> str:
    """The code of the README's recipe ``name``; KeyError when there is none."""
    found = {m["name"]: m["body"] for m in _MARKED.finditer((ROOT / "README.md").read_text())}
    return found[name]
