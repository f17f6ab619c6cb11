"""A bounded excerpt of a message around its matches: :func:`make_snippet`.

Matches are found in the original text with the folding of the index
(:func:`~store.search.query.match_spans`): "meteo" highlights "Météo", 東京 is found
inside unspaced text. The excerpt is the window of at most ``max_chars`` characters
that holds matches of the most distinct terms (the earliest such window), opened a
little before its first match; runs of whitespace become one space; ``…`` marks a cut
at either end and counts in ``max_chars``. Without a match, the excerpt is the start of
the text. ``highlights`` are ``(start, end)`` offsets in the excerpt, in order, never
overlapping.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Final

from store.search.query import Query, match_spans

__all__ = ["DEFAULT_SNIPPET_CHARS", "Snippet", "make_snippet"]

DEFAULT_SNIPPET_CHARS: Final = 200
"""The default longest snippet, in characters."""
_SPACES: Final = re.compile(r"\s+")
"""Runs of whitespace (``\\s`` is :meth:`str.isspace` in a ``str`` pattern)."""
_SPACES_TO_FOLD: Final = re.compile(r"\s\s|[^\S ]")
"""What :data:`_SPACES` would change: two whitespace characters, or one that is not a
space."""
_ELLIPSIS: Final = "…"
_MIN_CHARS: Final = 16
_REGION: Final = 1000
"""Characters around the first match a long text's snippet is chosen from (twice)."""
_LEAD_SHARE: Final = 4
"""The share of the window left before its first match: one in four characters."""


@dataclass(frozen=True, slots=True)
class Snippet:
    """An excerpt of a text and where the matches are in it."""

    text: str
    """At most ``max_chars`` characters of the text, whitespace collapsed."""
    highlights: tuple[tuple[int, int], ...]
    """``(start, end)`` offsets of the matches in :attr:`text`, in order."""


Span = tuple[int, int, int]


def _best_start(spans: Sequence[Span], width: int) -> int:
    """The start of the first match of the window holding the most distinct terms (the
    earliest of them: the first window holding every term of the text ends the look)."""
    terms = len({term for _, _, term in spans})
    if terms == 1:  # the first match that fits
        return next((s for s, e, _ in spans if e - s <= width), spans[0][0])
    best, best_count = 0, -1
    for first, (start, _, _) in enumerate(spans):
        inside: set[int] = set()
        for s, e, term in spans[first:]:
            if s - start > width:
                break
            if e - start <= width:
                inside.add(term)
        if len(inside) > best_count:
            best, best_count = start, len(inside)
            if best_count == terms:
                break
    return best


def _window(text: str, spans: Sequence[Span], width: int) -> tuple[int, int]:
    """``(start, end)`` of the window: a quarter of it before the best first match,
    starting after a whitespace when one is there; shifted back at the end of the text."""
    if not spans:
        return 0, min(len(text), width)
    first = _best_start(spans, width)
    start = max(0, first - width // _LEAD_SHARE)
    if start > 0:
        start = next((i + 1 for i in range(start, first) if text[i].isspace()), start)
    end = min(len(text), start + width)
    return max(0, min(start, end - width)), end


def _collapsed(text: str, start: int, end: int) -> tuple[str, Sequence[int]]:
    """``text[start:end]`` with whitespace runs as one space, and for each offset from
    ``start`` to ``end`` (included) its offset in the result (a leading run is dropped;
    a run's first character maps to its space, the others after it): the count of the
    characters kept before it."""
    piece = text[start:end]
    if _SPACES_TO_FOLD.search(piece) is None and not piece[:1].isspace():
        return piece, range(len(piece) + 1)  # nothing to collapse: every offset as it is
    kept = bytearray(b"\x01") * len(piece)
    for run in _SPACES.finditer(piece):
        low, high = run.span()
        kept[low if low == 0 else low + 1 : high] = bytes(high - low - (low != 0))
    body = _SPACES.sub(" ", piece)
    if piece[:1].isspace():
        body = body[1:]
    return body, list(accumulate(kept, initial=0))


def _merged(spans: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        elif end > start:
            merged.append((start, end))
    return tuple(merged)


def _excerpt(text: str, start: int, end: int) -> tuple[str, Sequence[int], tuple[int, int]]:
    """The excerpt's text (ellipses included), each offset of ``text`` from ``start`` to
    ``end`` mapped into it, and the bounds of the text between the ellipses."""
    body, where = _collapsed(text, start, end)
    lead = _ELLIPSIS if start > 0 else ""
    tail = _ELLIPSIS if text[end:].strip() else ""
    shift = len(lead) - (len(body) - len(body.lstrip()))
    inner = (len(lead), len(lead) + len(body.strip()))
    if isinstance(where, range):
        moved: Sequence[int] = range(where.start + shift, where.stop + shift)
    else:
        moved = [offset + shift for offset in where]
    return lead + body.strip() + tail, moved, inner


def _fit(text: str, spans: Sequence[Span], max_chars: int) -> Snippet:
    """The excerpt of ``text`` that fits ``max_chars``, and its highlights (a text
    longer than that is first cut to leave room for two ellipses: one pass, mostly)."""
    width = max_chars if len(text) <= max_chars else max_chars - 2 * len(_ELLIPSIS)
    while True:
        start, end = _window(text, spans, width)
        excerpt, where, (low, high) = _excerpt(text, start, end)
        if len(excerpt) <= max_chars:
            break
        width -= len(excerpt) - max_chars
    inside = [
        (max(low, where[max(s, start) - start]), min(high, where[min(e, end) - start]))
        for s, e, _ in spans
        if s < end and e > start
    ]
    return Snippet(excerpt, _merged(inside))


def _first_words(query: Query) -> re.Pattern[str] | None:
    """A pattern finding the first token of any of the query's phrases in ASCII text
    (None when a phrase is CJK or not ASCII)."""
    firsts = [p.tokens[0] for t in query.terms for p in t.phrases]
    if any(p.cjk for t in query.terms for p in t.phrases) or not all(f.isascii() for f in firsts):
        return None
    words = "|".join(re.escape(f) for f in sorted(set(firsts), key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9])(?:{words})", re.IGNORECASE)


def _at_space(text: str, index: int, step: int) -> int:
    """``index`` moved (by ``step``, at most :data:`_REGION` characters) to a whitespace."""
    for _ in range(_REGION):
        if index <= 0 or index >= len(text) or text[index].isspace():
            break
        index += step
    return max(0, min(len(text), index))


def _region(text: str, query: Query) -> tuple[int, int]:
    """The part of a long ``text`` whose matches the snippet is chosen from: around the
    first word of a phrase in ASCII text, else the start; its bounds at whitespace."""
    if len(text) <= 2 * _REGION:
        return 0, len(text)
    pattern = _first_words(query) if text.isascii() else None
    found = pattern.search(text) if pattern is not None else None
    center = found.start() if found is not None else 0
    start = _at_space(text, max(0, center - _REGION // 2), -1)
    return start, _at_space(text, min(len(text), start + 2 * _REGION), 1)


def make_snippet(text: str, query: Query, *, max_chars: int = DEFAULT_SNIPPET_CHARS) -> Snippet:
    """An excerpt of ``text`` of at most ``max_chars`` characters around the matches of
    ``query``, with their offsets (see the module docstring). In a long text the
    matches are looked for in :data:`_REGION` characters or so around the first word of
    a phrase (the start of a text that is not ASCII)."""
    if max_chars < _MIN_CHARS:
        raise ValueError(f"max_chars must be at least {_MIN_CHARS}, got {max_chars}")
    start, end = _region(text, query)
    spans = [(s + start, e + start, t) for s, e, t in match_spans(query, text[start:end])]
    return _fit(text, spans, max_chars)
