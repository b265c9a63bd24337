"""Modules a wrapper process may import without loading them.

A run's worker imports trio, and trio imports, at its top, modules for what
it offers beyond a run's needs: ``ssl`` (TLS streams: OpenSSL's libraries,
their start-up and Python's wrappers), ``hmac`` and through it ``hashlib``
(DTLS cookies: OpenSSL again), ``idna`` (host-name tables), and through
``ctypes.util`` ``tempfile`` (to find a library where ``ldconfig`` cannot)
and ``shutil``, which imports ``bz2`` and ``lzma`` to learn whether it can
make such archives. ``pathlib`` imports ``urllib.parse``, which imports
``ipaddress`` for URLs with a bracketed host; ``linecache`` imports
``tokenize`` to read a source file for a traceback. ``dataclasses``, attrs and
trio import ``inspect`` (and with it ``ast`` and ``dis``, about 0.8 MB a
run) for what a run does not do, but for two small functions; trio imports
``logging`` (0.3 MB) for three loggers it uses only for errors it cannot
raise (what a run uses of these, the stand-in answers: ``ANSWERED``). A
run uses none of them, yet each would stay in the memory of every idle
run for its whole life, and take its share of the start-up.
``defer_unused_imports`` keeps them out until they are really used.

How: a stand-in module (``Deferred``) is put in ``sys.modules`` under the
module's name. ``import ssl`` then binds the stand-in and loads nothing
(an import finds what ``sys.modules`` holds). The first name looked up on
the stand-in loads the real module, which takes its place in
``sys.modules``; the stand-in answers that lookup and every later one from
it. So code that only imports the module at its top and uses it inside
functions (what trio and urllib.parse do with these) works unchanged, and
the real module is loaded once: ``ssl.SSLError`` is the same class whether
reached through the stand-in or through a later ``import ssl``. ``from ssl
import X`` looks ``X`` up, so it loads the module at once: a module used
that way at import time is no candidate, unless its stand-in answers ``X``
itself (``ANSWERED``). What else would load ``inspect`` at import:
``dataclasses`` makes a docstring for a class without one from its
signature (the wrapper's dataclasses all have one), and attrs asks for the
signature of a converter of its own (``loading_trio``).

The list below is held by ``tests/test_deferral.py``: a whole run loads
none of these modules, and each still works through its stand-in. Should a
new trio use one of them at import time, the module is simply loaded then
(correct, only no longer saved) and that test fails, naming it.
"""

from __future__ import annotations

import _thread
import sys
from contextlib import contextmanager
from types import CoroutineType, ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Imported by trio or by the standard library a run uses, never used by a run
#: (beyond what ``ANSWERED`` gives of it).
UNUSED_BY_A_RUN = (
    *("ssl", "hmac", "idna", "ipaddress", "tempfile", "bz2", "lzma"),
    *("inspect", "logging", "tokenize"),
)


def _cleandoc(doc: str) -> str:
    """A docstring without its indentation, as ``inspect.cleandoc`` makes it:
    the first line's leading whitespace gone, the indentation the later
    lines share removed, tabs expanded, and no empty line at either end."""
    first, *rest = doc.expandtabs().split("\n")
    indents = [len(line) - len(line.lstrip()) for line in rest if line.lstrip()]
    margin = min(indents, default=0)
    lines = [first.lstrip(), *(line[margin:] for line in rest)]
    start, end = 0, len(lines)
    while end > start and not lines[end - 1]:
        end -= 1
    while start < end and not lines[start]:
        start += 1
    return "\n".join(lines[start:end])


def _iscoroutine(value: object) -> bool:
    """Whether ``value`` is a coroutine, as ``inspect.iscoroutine`` says."""
    return isinstance(value, CoroutineType)


class _Logger:
    """Stands in for the logger ``logging.getLogger(name)`` gives, until it
    is first used: then loads ``logging`` and answers from that logger."""

    __slots__ = ("_name",)

    def __init__(self, name: str | None) -> None:
        self._name = name

    def _logger(self) -> object:
        logging = sys.modules.get("logging")
        if isinstance(logging, Deferred):
            logging = logging.load()
        elif logging is None:
            logging = __import__("logging")
        return logging.getLogger(self._name)

    def __getattr__(self, attribute: str) -> object:
        return getattr(self._logger(), attribute)

    def __setattr__(self, attribute: str, value: object) -> None:
        if attribute in _Logger.__slots__:
            object.__setattr__(self, attribute, value)
        else:  # ``logger.propagate = False``, say: the logger's own
            setattr(self._logger(), attribute, value)


def _get_logger(name: str | None = None) -> object:
    """``logging.getLogger(name)``: the logger itself once ``logging`` is
    loaded, until then a stand-in that loads it when first used."""
    logging = sys.modules.get("logging")
    if logging is None or isinstance(logging, Deferred):
        return _Logger(name)
    return logging.getLogger(name)


#: What a stand-in answers itself, without loading its module: what a run
#: uses of it, each the same as the module's own (``tests/test_deferral.py``).
#: trio cleans the docstrings of its ``Path`` methods at import, asks whether
#: what it ran in a thread returned a coroutine, and gets a logger for errors
#: it can only log (in an instrument, an async generator's finalizer).
ANSWERED: dict[str, dict[str, object]] = {
    "inspect": {"cleandoc": _cleandoc, "iscoroutine": _iscoroutine},
    "logging": {"getLogger": _get_logger},
}
#: Modules of ``ANSWERED`` that are no package: ``from inspect import
#: cleandoc`` first asks whether the module has a ``__path__``, which would
#: load it, to import a submodule of that name. A package's stand-in loads it.
_NOT_PACKAGES = ("inspect",)

#: Held while a stand-in hands its place in ``sys.modules`` to the real module.
_swap = _thread.allocate_lock()


class Deferred(ModuleType):
    """Stands in for a module in ``sys.modules`` until one of its names is
    first used; then loads it and answers from it."""

    def __getattr__(self, name: str) -> object:
        # Only names the stand-in does not have come here: once loaded, each
        # name is copied onto it, and later lookups find it directly.
        if name == "__path__" and self.__name__ in _NOT_PACKAGES:
            raise AttributeError(name)
        value = getattr(self.load(), name)
        setattr(self, name, value)
        return value

    def load(self) -> ModuleType:
        """The real module, loaded now if it is not yet."""
        with _swap:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
        # Loads the module, or finds it loaded (by another thread meanwhile
        # too: the import system makes that one load). As an import statement
        # would: ``-X importtime`` and audit hooks see it.
        __import__(self.__name__)
        return sys.modules[self.__name__]


def defer_import(name: str) -> None:
    """Let ``import name`` succeed without loading the module until a name of
    it is used. Does nothing if the module is imported already."""
    if name not in sys.modules:
        stand_in = Deferred(name)
        for answered, value in ANSWERED.get(name, {}).items():
            setattr(stand_in, answered, value)
        sys.modules[name] = stand_in


def defer_unused_imports() -> None:
    """Defer the modules a run never uses (``UNUSED_BY_A_RUN``). For the
    command line's process only, before it imports pathlib or trio: it
    changes ``sys.modules``, which belongs to the whole process."""
    for name in UNUSED_BY_A_RUN:
        defer_import(name)


def _no_signature(_callable: object) -> object:
    raise TypeError("no signature while trio is loaded")


@contextmanager
def loading_trio() -> Iterator[None]:
    """Around ``import trio``: attrs, which trio imports, asks ``inspect``
    for the signature of a converter of one of attrs' own classes, to copy
    its annotations (it has none). Meanwhile the stand-in of ``inspect``
    answers that there is no signature to be had (``TypeError``, which
    ``inspect.signature`` raises for what it does not support, and attrs
    takes as no annotations): the classes come out the same, and
    ``inspect`` is not loaded for it. Does nothing where ``inspect`` is not
    deferred."""
    stand_in = sys.modules.get("inspect")
    if not isinstance(stand_in, Deferred) or "signature" in vars(stand_in):
        yield
        return
    vars(stand_in)["signature"] = _no_signature
    try:
        yield
    finally:
        # Later lookups get the real function (loading the module).
        del vars(stand_in)["signature"]
