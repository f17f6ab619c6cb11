"""The C allocator's free memory, given back to the system after a large read.

glibc's ``malloc`` keeps what it frees for its own reuse, and each thread that
allocates gets an arena of its own, whose free blocks no other thread reuses. A full
history read on SQLite runs on aiosqlite's thread (``store.sql.drivers.sqlite``):
SQLite assembles a tool result of many megabytes in a buffer there and the driver
copies it into a Python string; the buffer, freed, stayed resident in that thread's
arena while the event loop's thread decoded the string into new memory, and the
process peaked at that buffer's size more (``docs/limits.md``, "Memory").

:func:`give_back` returns such free blocks with ``malloc_trim`` (glibc only; elsewhere
it does nothing). It walks every arena, so the store calls it only after fetching a
text of over :data:`LARGE_VALUE` characters, never on an ordinary turn.
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
