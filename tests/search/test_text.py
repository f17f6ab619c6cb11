"""The normalized text: folding, words, CJK runs, and what of a message is indexed."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.search.text import (
    MAX_INDEXED_TOKENS,
    MAX_TOKEN_CHARS,
    cjk_tokens,
    indexable_text,
    is_cjk,
    message_text,
    normalize,
    scan,
    tokens,
)
from strategies.messages import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    TextContent,
)
from tests.search.strategies import texts

TOKEN = re.compile(r"[^\W_]+")
"""A token: letters and digits only (no underscore, no punctuation, no space)."""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Météo à PARIS!", "meteo a paris"),
        ("METEO", "meteo"),
        ("Straße ﬁle", "strasse file"),
        ("İstanbul", "istanbul"),
        ("foo-bar a.b@c.com 1.5 snake_case", "foo bar a b c com 1 5 snake case"),
        ("12e3x 1e5 x1e5y", "12e3 x 1e5 x1e5y"),
        ("東京都", "東 京 都 東京 京都"),
        ("東京tower", "東 京 東京 tower"),
        ("ｶﾞｽ", "ガ ス ガス"),
        ("が", "が"),
        ("か\u3099", "が"),
        ("한국", "한 국 한국"),
        ("\u1112\u1161\u11ab", "한"),
        ("½ 🙂 \x00 \u2170", "1 2 i"),
        ("", ""),
    ],
)
def test_normalize_examples(text: str, expected: str) -> None:
    assert normalize(text) == expected


@settings(max_examples=300, deadline=None)
@given(st.one_of(texts, st.text(max_size=40)))
def test_tokens_are_letters_and_digits_separated_by_single_spaces(text: str) -> None:
    normalized = normalize(text)
    assert normalized == " ".join(normalized.split(" "))
    assert all(TOKEN.fullmatch(token) for token in tokens(text))
    assert all(len(token) <= MAX_TOKEN_CHARS for token in tokens(text))


@settings(max_examples=300, deadline=None)
@given(st.one_of(texts, st.text(max_size=40)))
def test_normalize_is_idempotent_on_every_word(text: str) -> None:
    """A word normalizes to itself; a CJK pair is a run of its own and expands again."""
    for token in tokens(text):
        if is_cjk(token[0]):
            assert tokens(token) == ([token] if len(token) == 1 else [*token, token])
        else:
            assert tokens(token) == [token]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="ascii"), max_size=60))
def test_the_ascii_path_equals_the_general_one(text: str) -> None:
    assert tokens(text) == [word.text for word in scan(text)]


@settings(max_examples=300, deadline=None)
@given(st.one_of(texts, st.text(max_size=40)))
def test_tokens_are_the_tokens_of_the_scanned_words(text: str) -> None:
    scanned = [cjk_tokens(w.text) if w.cjk else [w.text] for w in scan(text)]
    assert tokens(text) == [token for found in scanned for token in found]


@settings(max_examples=200, deadline=None)
@given(st.one_of(texts, st.text(max_size=40)))
def test_words_map_back_to_the_original_text(text: str) -> None:
    for word in scan(text):
        assert 0 <= word.start < word.end <= len(text)
        if not word.cjk:
            assert word.text in tokens(text[word.start : word.end])


def test_long_words_keep_their_first_characters() -> None:
    assert normalize("a" * 500) == "a" * MAX_TOKEN_CHARS
    assert normalize("é" * 500) == "e" * MAX_TOKEN_CHARS


def _message(*contents: object) -> Message:
    return Message.model_validate({"role": "assistant", "contents": list(contents)})


def test_indexable_text_is_what_the_token_counter_reads() -> None:
    message = _message(
        TextContent(text="La Météo"),
        ReasoningContent(text="Thinking of 東京"),
        FunctionCallContent(call_id="c1", name="get_weather", arguments={"city": "Zürich"}),
        FunctionResultContent(call_id="c1", result={"temp": 21}),
        DataContent(data=b"secret-bytes", media_type="image/png"),
    )
    assert message_text(message) == (
        'La Météo\nThinking of 東京\nget_weather\n{"city":"Zürich"}\n{"temp":21}'
    )
    assert indexable_text(message) == (
        "la meteo thinking of 東 京 東京 get weather city zurich temp 21"
    )


def test_indexable_text_stays_within_postgresql_limits() -> None:
    message = _message(TextContent(text="word " * (MAX_INDEXED_TOKENS + 10)))
    assert len(indexable_text(message).split()) == MAX_INDEXED_TOKENS
    wide = _message(TextContent(text=" ".join(f"{i:0127d}" for i in range(10_000))))
    assert len(indexable_text(wide).encode()) <= 512 * 1024


_ASCII_PIECES = ["a", "B", "ab", "1", "12e3", "12E3x", "x", "-", ".", " ", "\n", "y" * 130]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(_ASCII_PIECES), max_size=20).map("".join))
def test_ascii_text_is_indexed_as_the_general_way_normalizes_it(text: str) -> None:
    """The one-pass path of ASCII text (the common case of an append) indexes what
    :func:`normalize` makes of it, exponents and over-long words included."""
    assert indexable_text(Message.text_message("user", text)) == normalize(text)
