"""Ids shortened the way git shortens hashes: to the shortest start that no other id
of the same kind shares, and never shorter than :data:`MIN_ID` characters.

Pure: a table uses :func:`unique_lengths` to shorten an id column on a terminal, and the
commands use :func:`matching` to read back what a person copied from it.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MIN_ID", "matching", "unique_lengths"]

MIN_ID = 8
"""The fewest characters a shortened id keeps (``m-d6cf1e``, ``evt_b2d8``)."""


def _common(a: str, b: str) -> int:
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return size


def unique_lengths(ids: Iterable[str], among: Iterable[str] = ()) -> dict[str, int]:
    """For each of ``ids``, how many of its first characters no other id of ``ids`` or
    ``among`` starts with (at least :data:`MIN_ID`, at most the whole id; an id that is
    the start of another stays whole, which a command reads as that id itself)."""
    wanted = set(ids)
    ordered = sorted(wanted | set(among))
    lengths: dict[str, int] = {}
    for index, value in enumerate(ordered):
        if value not in wanted:
            continue
        shared = 0
        if index > 0:
            shared = _common(value, ordered[index - 1])
        if index + 1 < len(ordered):
            shared = max(shared, _common(value, ordered[index + 1]))
        lengths[value] = min(len(value), max(MIN_ID, shared + 1))
    return lengths


def matching(typed: str, ids: Iterable[str]) -> list[str]:
    """The ids ``typed`` names: itself when it is one of them, else every id it starts
    (sorted; more than one means the prefix is ambiguous)."""
    known = set(ids)
    if typed in known:
        return [typed]
    return sorted(i for i in known if i.startswith(typed)) if typed else []
