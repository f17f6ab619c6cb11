"""The compiled queries run on the engines: SQLite FTS5 (``unicode61``) and PostgreSQL
(``to_tsvector('simple', ...)``) find exactly what :func:`matches` finds, and split the
normalized text exactly at its spaces."""

from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.errors import InvalidInput
from store.search import matches, normalize, parse_query, to_fts5, to_tsquery
from store.search.text import fold, tokens
from tests.search.conftest import Fts5, Pg
from tests.search.strategies import queries, texts
from tests.search.test_query import HOSTILE

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _kept_characters() -> list[str]:
    """Every character that stands as a token of its own after normalization."""
    found = []
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if not 0xD800 <= code <= 0xDFFF and fold(char) == char and tokens(char) == [char]:
            found.append(char)
    return found


@pytest.fixture(scope="module")
def kept() -> list[str]:
    return _kept_characters()


def _expected(query_text: str, docs: list[str]) -> set[int] | None:
    try:
        query = parse_query(query_text)
    except InvalidInput:
        return None
    return {i for i, doc in enumerate(docs) if matches(query, normalize(doc))}


def test_fts5_keeps_every_kept_character_as_one_token(fts5: Fts5, kept: list[str]) -> None:
    db = fts5([])
    db.execute("CREATE VIRTUAL TABLE vocab USING fts5vocab(docs, 'instance')")
    db.execute("INSERT INTO docs(rowid, body) VALUES (0, ?)", (" ".join(kept),))
    found = [row[0] for row in db.execute("SELECT term FROM vocab ORDER BY offset")]
    assert found == kept


@pytest.mark.postgres
def test_postgresql_keeps_every_kept_character_as_one_lexeme(pg: Pg, kept: list[str]) -> None:
    rows = pg.fetch(
        "SELECT c FROM unnest($1::text[]) AS c "
        "WHERE to_tsvector('simple', c)::text <> '''' || c || ''':1'",
        kept,
    )
    assert [row[0] for row in rows] == []


@SETTINGS
@given(st.lists(texts, max_size=6), queries())
def test_fts5_finds_what_matches_finds(fts5: Fts5, docs: list[str], query_text: str) -> None:
    expected = _expected(query_text, docs)
    if expected is None:
        return
    db = fts5(docs)
    sql = "SELECT rowid FROM docs WHERE docs MATCH ?"
    found = {row[0] for row in db.execute(sql, (to_fts5(parse_query(query_text)),))}
    assert found == expected


@pytest.mark.postgres
@SETTINGS
@given(st.lists(texts, max_size=6), queries())
def test_postgresql_finds_what_matches_finds(pg: Pg, docs: list[str], query_text: str) -> None:
    expected = _expected(query_text, docs)
    if expected is None:
        return
    rows = pg.fetch(
        "SELECT i - 1 FROM unnest($1::text[]) WITH ORDINALITY AS d(body, i) "
        "WHERE to_tsvector('simple', body) @@ to_tsquery('simple', $2)",
        [normalize(doc) for doc in docs],
        to_tsquery(parse_query(query_text)),
    )
    assert {row[0] for row in rows} == expected


def _hostile() -> list[str]:
    return [text for text in [*HOSTILE, "x" * 999, "a b " * 200] if _expected(text, []) is not None]


@pytest.mark.parametrize("text", _hostile())
def test_fts5_runs_every_accepted_hostile_query(fts5: Fts5, text: str) -> None:
    db = fts5(["a b x foo bar"])
    db.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (to_fts5(parse_query(text)),))


@pytest.mark.postgres
@pytest.mark.parametrize("text", _hostile())
def test_postgresql_runs_every_accepted_hostile_query(pg: Pg, text: str) -> None:
    pg.fetchval("SELECT to_tsquery('simple', $1)::text", to_tsquery(parse_query(text)))


@pytest.mark.postgres
@SETTINGS
@given(st.text(max_size=60))
def test_postgresql_parses_any_accepted_query(pg: Pg, text: str) -> None:
    if _expected(text, []) is not None:
        pg.fetchval("SELECT to_tsquery('simple', $1)::text", to_tsquery(parse_query(text)))


@SETTINGS
@given(st.text(max_size=60))
def test_fts5_parses_any_accepted_query(fts5: Fts5, text: str) -> None:
    if _expected(text, []) is not None:
        db = fts5(["a b"])
        db.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (to_fts5(parse_query(text)),))
