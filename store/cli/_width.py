"""How many terminal cells text takes: wide characters and emoji count two, combining
marks and joiners none.

A table is laid out by these widths, not by ``len``: a row holding ``✅`` or ``漢字``
takes the cells a terminal gives it, so it never overflows its line.
"""

from __future__ import annotations

import unicodedata

__all__ = ["cut", "width"]

_ZERO = frozenset({"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"})
"""Zero-width space, non-joiner, joiner, word joiner and byte-order mark."""
EMOJI_PRESENTATION = "\ufe0f"
"""The variation selector that asks for an emoji (two cells) instead of text."""


def _char(character: str) -> int:
    if character in _ZERO or "\ufe00" <= character <= "\ufe0f":
        return 0
    if unicodedata.combining(character) or unicodedata.category(character) in ("Mn", "Me"):
        return 0
    return 2 if unicodedata.east_asian_width(character) in ("W", "F") else 1


def _widths(text: str) -> list[int]:
    """The cells of each character of ``text``: a narrow symbol followed by the emoji
    selector takes two."""
    cells = [_char(c) for c in text]
    for index, character in enumerate(text):
        if character == EMOJI_PRESENTATION and index > 0 and cells[index - 1] == 1:
            cells[index - 1] = 2
    return cells


def width(text: str) -> int:
    """The cells ``text`` takes on a terminal."""
    if text.isascii():
        return len(text)
    return sum(_widths(text))


def cut(text: str, cells: int, *, mark: str = "…") -> str:
    """``text`` when it fits in ``cells``, else its longest start that fits with ``mark``
    after it (a wide character is never cut in two)."""
    if width(text) <= cells:
        return text
    room = cells - width(mark)
    if room <= 0:
        return mark[: max(cells, 0)]
    kept = 0
    used = 0
    for size in _widths(text):
        if used + size > room:
            break
        used += size
        kept += 1
    while kept < len(text) and _widths(text[kept])[0] == 0:  # keep marks with their base
        kept += 1
    return text[:kept] + mark
