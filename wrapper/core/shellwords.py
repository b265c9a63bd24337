"""Splitting a hook's command string into words the way a shell would, without one.

Quotes (``'...'``, ``"..."``) and backslashes work as in ``sh``; ``$VAR`` and
``${VAR}`` are expanded from the given environment (outside single quotes),
and their values are never split into further words; a leading ``~/`` is the
home directory. Anything that needs a real shell (pipes, ``&&``, ``;``,
redirections, subshells, command substitution, a ``VAR=value`` prefix) is
refused with ``ShellSyntax``: such a command must opt into ``/bin/sh -c``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_OPERATORS = frozenset("|&;<>()`")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class ShellSyntax(ValueError):
    """The command uses shell syntax that only a shell can run."""


def split_command(text: str, env: Mapping[str, str]) -> list[str]:
    words: list[str] = []
    word: list[str] = []
    in_word = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n":
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            i += 1
            continue
        if c in _OPERATORS:
            raise ShellSyntax(f"it uses shell syntax ({c!r})")
        if c == "#" and not in_word:
            raise ShellSyntax("it contains a shell comment ('#')")
        if not in_word and not words and _ASSIGNMENT.match(text, i):
            raise ShellSyntax("it starts with a VAR=value assignment")
        if c == "~" and not in_word and (i + 1 == n or text[i + 1] in "/ \t\n"):
            word.append(env.get("HOME", "~"))
            in_word, i = True, i + 1
            continue
        in_word = True
        if c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ShellSyntax("it has an unterminated ' quote")
            word.append(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i = _double_quoted(text, i + 1, env, word)
        elif c == "\\":
            if i + 1 < n:
                word.append(text[i + 1])
            i += 2
        elif c == "$":
            i = _expand(text, i, env, word)
        else:
            word.append(c)
            i += 1
    if in_word:
        words.append("".join(word))
    if not words:
        raise ShellSyntax("it is empty")
    return words


def _double_quoted(text: str, i: int, env: Mapping[str, str], word: list[str]) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            return i + 1
        if c == "\\" and i + 1 < n and text[i + 1] in '"\\$`\n':
            word.append(text[i + 1])
            i += 2
        elif c == "`":
            raise ShellSyntax("it uses command substitution ('`')")
        elif c == "$":
            i = _expand(text, i, env, word)
        else:
            word.append(c)
            i += 1
    raise ShellSyntax('it has an unterminated " quote')


def _expand(text: str, i: int, env: Mapping[str, str], word: list[str]) -> int:
    """Expand the ``$`` at ``text[i]``; return the index after it."""
    nxt = text[i + 1 : i + 2]
    if nxt == "(":
        raise ShellSyntax("it uses command substitution ('$(')")
    if nxt == "{":
        end = text.find("}", i + 2)
        name = text[i + 2 : end] if end >= 0 else ""
        if not _NAME.fullmatch(name):
            raise ShellSyntax("it uses a ${...} form other than ${NAME}")
        word.append(env.get(name, ""))
        return end + 1
    match = _NAME.match(text, i + 1)
    if match is None:
        word.append("$")
        return i + 1
    word.append(env.get(match.group(), ""))
    return match.end()
