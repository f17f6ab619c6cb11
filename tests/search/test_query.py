"""The query language: what it accepts, what it refuses, and its compiled forms."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import InvalidInput
from store.search.query import (
    MAX_QUERY_CHARS,
    Phrase,
    match_spans,
    matches,
    parse_query,
    query_tokens,
    scanned_spans,
    to_fts5,
    to_tsquery,
)
from store.search.text import normalize
from tests.search.strategies import queries

TOKEN = r"[^\W_]+"
FTS5_PHRASE = rf'"{TOKEN}(?: {TOKEN})*"(?: \*)?'
FTS5_QUERY = re.compile(rf"{FTS5_PHRASE}(?: {FTS5_PHRASE})*")
LEXEME = rf"'{TOKEN}'(?::\*)?"
TS_PHRASE = rf"(?:{LEXEME}|\({LEXEME}(?: <-> {LEXEME})+\))"
TS_QUERY = re.compile(rf"{TS_PHRASE}(?: & {TS_PHRASE})*")

HOSTILE = [
    'a" OR 1=1 --',
    "'; DROP TABLE messages; --",
    "foo\\' & !bar",
    "x' | 'y",
    "a\\",
    "\\'\\'",
    "!x & (y | z)",
    "<-> foo",
    "a<->b",
    "a&b|c!d",
    "foo:* bar",
    "NEAR/2",
    "col : value",
    "^start",
    "{a b}",
    "a\x00b",
    "\x00",
    "'''",
    '"a""b"',
    "tok' :*",
    "é'*",
]


def _tokens(text: str) -> list[list[str]]:
    return [[*p.tokens] for term in parse_query(text).terms for p in term.phrases]


@pytest.mark.parametrize(
    ("text", "phrases"),
    [
        ("meteo paris", [["meteo"], ["paris"]]),
        ("Météo", [["meteo"]]),
        ('"new york" city', [["new", "york"], ["city"]]),
        ("foo-bar", [["foo", "bar"]]),
        ("a.b@c.com", [["a", "b", "c", "com"]]),
        ("東京", [["東京"]]),
        ("東京都", [["東京", "京都"]]),
        ("東", [["東"]]),
        ("東京tower", [["東京"], ["tower"]]),
        ('"東京 tower"', [["東京"], ["tower"]]),
        ("a 🙂 b", [["a"], ["b"]]),
        ('"" x', [["x"]]),
        ("AND-gate and or", [["and", "gate"], ["and"], ["or"]]),
        ('"AND"', [["and"]]),
        ('"a:b (c)" "-x"', [["a", "b", "c"], ["x"]]),
    ],
)
def test_parse(text: str, phrases: list[list[str]]) -> None:
    assert _tokens(text) == phrases


def test_prefixes() -> None:
    query = parse_query('weath* "new yo"* foo-ba* 東京*')
    assert [p for t in query.terms for p in t.phrases] == [
        Phrase(("weath",), prefix=True),
        Phrase(("new", "yo"), prefix=True),
        Phrase(("foo", "ba"), prefix=True),
        Phrase(("東京",), cjk=True),
    ]
    assert to_fts5(query) == '"weath" * "new yo" * "foo ba" * "東京"'
    assert to_tsquery(query) == "'weath':* & ('new' <-> 'yo':*) & ('foo' <-> 'ba':*) & '東京'"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no word"),
        ("  \n ", "no word"),
        ("🙂 ... '", "no word"),
        ('"abc', "unbalanced quote"),
        ('a "b', "unbalanced quote"),
        ('ab"c"', "quote must open a phrase"),
        ('"ab"c', "followed by a space"),
        ("a AND b", "operators"),
        ("a OR b", "operators"),
        ("NOT a", "operators"),
        ("NEAR(a b)", "parentheses"),
        ("(a b)", "parentheses"),
        ("title:foo", "column filters"),
        ("-x", "negation"),
        ("-", "negation"),
        ("*", "letters or digits before"),
        ("!*", "letters or digits before"),
        ("a*b", "only at the end"),
        ("**", "only at the end"),
        ("a*", "at least 2 characters"),
        ("é*", "at least 2 characters"),
        ("x" * (MAX_QUERY_CHARS + 1), "longer than"),
        (" ".join(["ab"] * 65), "more than 64 tokens"),
    ],
)
def test_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(reason)) as raised:
        parse_query(text)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_queries_are_refused_or_fully_quoted(text: str) -> None:
    _assert_safe(text)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60), queries()))
def test_any_query_is_refused_or_fully_quoted(text: str) -> None:
    _assert_safe(text)


def _assert_safe(text: str) -> None:
    try:
        query = parse_query(text)
    except InvalidInput as error:
        assert "\n" not in str(error)
        return
    assert FTS5_QUERY.fullmatch(to_fts5(query))
    assert TS_QUERY.fullmatch(to_tsquery(query))
    assert all(normalize(token) for token in query_tokens(query))


def test_meteo_matches_meteo_with_accents() -> None:
    assert matches(parse_query("meteo"), normalize("La Météo du jour"))
    assert matches(parse_query("MÉTÉO"), normalize("la meteo"))


def test_cjk_words_are_found_inside_unspaced_text() -> None:
    text = normalize("今日は東京の天気")
    for word in ["東京", "天気", "東", "京の天", "今日は東京の天気"]:
        assert matches(parse_query(word), text), word
    for word in ["京都", "天京", "大阪"]:
        assert not matches(parse_query(word), text), word


def test_phrases_need_their_words_next_to_each_other_in_order() -> None:
    text = normalize("New York is big; york new")
    assert matches(parse_query('"new york"'), text)
    assert matches(parse_query('"york new"'), text)
    assert not matches(parse_query('"new big"'), text)
    assert not matches(parse_query('"big new"'), normalize("big; old new"))


def test_every_word_must_match() -> None:
    assert matches(parse_query("york new"), normalize("New York"))
    assert not matches(parse_query("york boston"), normalize("New York"))


def test_prefixes_match_the_start_of_a_word() -> None:
    text = normalize("the weather in Zürich")
    assert matches(parse_query("weath*"), text)
    assert matches(parse_query("zur*"), text)
    assert matches(parse_query('"the weath"*'), text)
    assert not matches(parse_query("eath*"), text)
    assert not matches(parse_query('"in weath"*'), text)


def test_match_spans_are_offsets_in_the_original_text() -> None:
    text = "Météo: 今日は東京の天気, LE  Temps"
    spans = match_spans(parse_query('meteo 東京 "le temps"'), text)
    assert [(text[s:e], term) for s, e, term in spans] == [
        ("Météo", 0),
        ("東京", 1),
        ("LE  Temps", 2),
    ]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30), queries())
def test_every_term_of_a_matching_text_has_a_span(text: str, query_text: str) -> None:
    try:
        query = parse_query(query_text)
    except InvalidInput:
        return
    found = {term for _, _, term in match_spans(query, text)}
    if matches(query, normalize(text)):
        assert found == set(range(len(query.terms)))


_ASCII_PIECES = ["a", "b", "ab", "A", "1", "12e3", "x", "-", ".", " ", "  ", "\n", "_"]


def _covered(spans: list[tuple[int, int, int]]) -> set[tuple[int, int]]:
    """Which characters each term's matches cover (overlapping occurrences merged)."""
    return {(term, i) for start, end, term in spans for i in range(start, end)}


@settings(max_examples=300)
@given(st.lists(st.sampled_from(_ASCII_PIECES), max_size=20).map("".join), queries())
def test_ascii_text_is_matched_as_the_general_way_matches_it(text: str, query_text: str) -> None:
    """The regular-expression path of plain ASCII (a snippet's speed) finds what the
    folding scan finds."""
    try:
        query = parse_query(query_text)
    except InvalidInput:
        return
    fast = match_spans(query, text)
    general = scanned_spans(query, text)
    assert _covered(fast) == _covered(general)
