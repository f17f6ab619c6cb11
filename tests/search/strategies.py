"""Hypothesis strategies of texts and queries that often meet: a small alphabet of
Latin letters with and without accents, digits and ``e`` (for ``12e3x``), CJK runs,
punctuation that splits words, and whitespace."""

from __future__ import annotations

from hypothesis import strategies as st

PIECES = [
    "a", "b", "ab", "é", "É", "e", "1", "2", "12e3", "x", "ß", "ﬁ", "météo", "meteo",
    "東", "京", "都", "東京", "今日", "は", "の", "天気", "ガ", "カ", "ｶﾞ", "한국", "서울",
    "-", ".", "@", "'", "_", "🙂", "\u0301", " ", " ", "\n",
]  # fmt: skip

texts = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)
"""Texts made of :data:`PIECES`."""

_WORD_PIECES = [p for p in PIECES if p.strip() and p not in {"'", "-", "\u0301"}]
words = st.lists(st.sampled_from(_WORD_PIECES), min_size=1, max_size=3).map("".join)
"""One query word (no whitespace, quotes or refused syntax)."""


@st.composite
def queries(draw: st.DrawFn) -> str:
    """A query of words, phrases and prefixes built from :data:`PIECES`."""
    terms = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["word", "phrase", "prefix"]))
        if kind == "phrase":
            terms.append('"' + " ".join(draw(st.lists(words, min_size=1, max_size=3))) + '"')
        else:
            terms.append(draw(words) + ("*" if kind == "prefix" else ""))
    return " ".join(terms)
