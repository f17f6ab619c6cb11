"""The C allocator's free memory, given back to the system around a large read.

glibc's ``malloc`` keeps what it frees for its own reuse, and each thread that
allocates gets an arena of its own, whose free blocks no other thread reuses. A read of
a tool result of many megabytes frees the driver's buffers of it (SQLite's copy of the
value; asyncpg's received chunks and the message it gathered them into) just before
the text is decoded into new memory, and the freed blocks stayed resident while the
decoding allocated more: the process peaked at those buffers' size more
(``docs/limits.md``, "Memory"). Reads of history therefore run on the event loop's
thread on SQLite (:mod:`store.sql.history`): of what aiosqlite's thread freed, the top
of its arena stayed resident, and ``malloc_trim`` does not trim it.

:func:`give_back` returns free blocks with ``malloc_trim`` (glibc only; elsewhere it
does nothing). It walks every arena, so the store calls it only when the rows a read
fetched hold a text of over :data:`LARGE_VALUE` characters (before decoding them, and a
history read again once they are decoded), never on an ordinary turn.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Iterable

__all__ = ["LARGE_VALUE", "any_large", "give_back"]

LARGE_VALUE = 1 << 20
"""Characters (or bytes) of a fetched value from which it is a large one."""


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS,
    Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _malloc_trim()


def any_large(texts: Iterable[str | bytes]) -> bool:
    """Whether any of ``texts`` is over :data:`LARGE_VALUE` (one pass in C: a full read
    asks it of every row)."""
    return max(map(len, texts), default=0) > LARGE_VALUE


def give_back() -> None:
    """Give the allocator's free memory back to the system, in every arena (glibc)."""
    if _TRIM is not None:
        _TRIM(0)
