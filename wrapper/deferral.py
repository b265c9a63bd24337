"""Modules a wrapper process may import without loading them.

A run's worker imports trio, and trio imports, at its top, modules for what
it offers beyond a run's needs: ``ssl`` (TLS streams: OpenSSL's libraries,
their start-up and Python's wrappers), ``hmac`` and through it ``hashlib``
(DTLS cookies: OpenSSL again), ``idna`` (host-name tables), and through
``ctypes.util`` ``tempfile`` (to find a library where ``ldconfig`` cannot)
and ``shutil``, which imports ``bz2`` and ``lzma`` to learn whether it can
make such archives. ``pathlib`` imports ``urllib.parse``, which imports
``ipaddress`` for URLs with a bracketed host. A run uses none of them, yet
each would stay in the
memory of every idle run for its whole life, and take its share of the
start-up. ``defer_unused_imports`` keeps them out until they are really
used.

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
that way at import time is no candidate.

The list below is held by ``tests/test_deferral.py``: a whole run loads
none of these modules, and each still works through its stand-in. Should a
new trio use one of them at import time, the module is simply loaded then
(correct, only no longer saved) and that test fails, naming it.
"""

from __future__ import annotations

import _thread
import sys
from types import ModuleType

#: Imported by trio or by the standard library a run uses, never used by a run.
UNUSED_BY_A_RUN = ("ssl", "hmac", "idna", "ipaddress", "tempfile", "bz2", "lzma")

#: Held while a stand-in hands its place in ``sys.modules`` to the real module.
_swap = _thread.allocate_lock()


class Deferred(ModuleType):
    """Stands in for a module in ``sys.modules`` until one of its names is
    first used; then loads it and answers from it."""

    def __getattr__(self, name: str) -> object:
        # Only names the stand-in does not have come here: once loaded, each
        # name is copied onto it, and later lookups find it directly.
        with _swap:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
        # Loads the module, or finds it loaded (by another thread meanwhile
        # too: the import system makes that one load). As an import statement
        # would: ``-X importtime`` and audit hooks see it.
        __import__(self.__name__)
        real = sys.modules[self.__name__]
        value = getattr(real, name)
        setattr(self, name, value)
        return value


def defer_import(name: str) -> None:
    """Let ``import name`` succeed without loading the module until a name of
    it is used. Does nothing if the module is imported already."""
    if name not in sys.modules:
        sys.modules[name] = Deferred(name)


def defer_unused_imports() -> None:
    """Defer the modules a run never uses (``UNUSED_BY_A_RUN``). For the
    command line's process only, before it imports pathlib or trio: it
    changes ``sys.modules``, which belongs to the whole process."""
    for name in UNUSED_BY_A_RUN:
        defer_import(name)
