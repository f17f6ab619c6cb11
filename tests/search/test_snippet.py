"""Snippets: bounded, around the matches, highlighted through the folding."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import InvalidInput
from store.search import make_snippet, matches, normalize, parse_query
from tests.search.strategies import queries, texts

LONG = "Some intro. " * 30 + "La Météo  de\n\nPARIS: le temps est beau. " + "Filler words. " * 30


def _marked(text: str, query: str, max_chars: int = 80) -> tuple[str, list[str]]:
    snippet = make_snippet(text, parse_query(query), max_chars=max_chars)
    return snippet.text, [snippet.text[s:e] for s, e in snippet.highlights]


def test_meteo_highlights_meteo_with_accents() -> None:
    text, marked = _marked(LONG, "meteo")
    assert marked == ["Météo"]
    assert text.startswith("…") and text.endswith("…") and len(text) <= 80


def test_whitespace_collapses_and_phrases_highlight_whole() -> None:
    text, marked = _marked(LONG, '"de paris" "le temps"')
    assert marked == ["de PARIS", "le temps"]
    assert "\n" not in text and "  " not in text


def test_the_window_holds_the_most_terms() -> None:
    text = "beau " + "x " * 100 + "paris est beau"
    assert _marked(text, "paris beau", 40)[1] == ["paris", "beau"]


def test_cjk_substrings_are_highlighted() -> None:
    text = "今日は東京の天気です"
    assert _marked(text, "東京 天気") == (text, ["東京", "天気"])


def test_without_a_match_the_snippet_is_the_start() -> None:
    assert _marked(LONG, "absent", 30) == ("Some intro. Some intro. Some…", [])


def test_short_text_is_whole() -> None:
    assert _marked("short Météo", "METEO") == ("short Météo", ["Météo"])


def test_max_chars_has_a_floor() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        make_snippet("x", parse_query("x"), max_chars=3)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(texts, max_size=30).map(" ".join),
    queries(),
    st.integers(min_value=16, max_value=120),
)
def test_snippets_are_bounded_and_highlights_match(text: str, query: str, size: int) -> None:
    try:
        parsed = parse_query(query)
    except InvalidInput:
        return
    snippet = make_snippet(text, parsed, max_chars=size)
    assert len(snippet.text) <= size
    previous = 0
    for start, end in snippet.highlights:
        assert previous <= start < end <= len(snippet.text)
        assert normalize(snippet.text[start:end])
        previous = end
    if matches(parsed, normalize(text)):
        assert snippet.highlights


def _collapsed_one_by_one(text: str, start: int, end: int) -> tuple[str, list[int]]:
    """The rule of ``_collapsed``, a character at a time."""
    out: list[str] = []
    where: list[int] = []
    for char in text[start:end]:
        where.append(len(out))
        if not char.isspace():
            out.append(char)
        elif out and out[-1] != " ":
            out.append(" ")
    where.append(len(out))
    return "".join(out), where


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("ab \t\n\u00a0\u3000\u2028\x1c"), max_size=40),
    st.integers(0, 40),
    st.integers(0, 40),
)
def test_whitespace_collapses_as_one_character_at_a_time(text: str, a: int, b: int) -> None:
    from store.search.snippet import _collapsed

    start, end = sorted((min(a, len(text)), min(b, len(text))))
    body, where = _collapsed(text, start, end)
    assert (body, list(where)) == _collapsed_one_by_one(text, start, end)
