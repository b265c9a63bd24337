"""JSON for the wrapper's own files and streams, whatever the OS handed it.

Command-line arguments, environment values and paths that are not valid
UTF-8 reach Python as lone surrogates (``surrogateescape``); JSON cannot
carry them and orjson refuses them. The agent still gets the exact bytes;
the records show U+FFFD in their place rather than losing the whole file.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any, option: int = 0) -> bytes:
    """``orjson.dumps``, with any lone surrogate in a string (key or value)
    replaced by U+FFFD instead of raising."""
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        return orjson.dumps(_scrub(value), option=option)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrub(key): _scrub(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(item) for item in value]
    return value
