"""Signed page cursors: round trip, and every kind of bad cursor refused in one line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import InvalidInput
from store.search import decode_cursor, encode_cursor

KEY = b"k" * 32
PAYLOAD = {"q": "東京 meteo", "score": -1.5, "created_at": "2026-01-01T00:00:00Z", "id": "m1"}


def test_round_trip() -> None:
    cursor = encode_cursor(KEY, PAYLOAD)
    assert decode_cursor(KEY, cursor) == PAYLOAD
    assert cursor.isascii() and " " not in cursor and "=" not in cursor


def _bad(cursor: str, key: bytes = KEY) -> str:
    with pytest.raises(InvalidInput) as raised:
        decode_cursor(key, cursor)
    assert "\n" not in str(raised.value)
    return str(raised.value)


def test_a_cursor_of_another_key_is_refused() -> None:
    assert "signature" in _bad(encode_cursor(KEY, PAYLOAD), b"j" * 32)


def test_an_edited_payload_is_refused() -> None:
    body, _, tag = encode_cursor(KEY, PAYLOAD).partition(".")
    forged = encode_cursor(b"j" * 32, {**PAYLOAD, "score": 9.0}).partition(".")[0]
    assert "signature" in _bad(f"{forged}.{tag}")
    assert body != forged


@pytest.mark.parametrize("cursor", ["", ".", "x", "x.y", "é.é", "a" * 9000, "\x00.\x00", "..."])
def test_garbled_cursors_are_refused(cursor: str) -> None:
    _bad(cursor)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0), st.integers(min_value=0, max_value=255))
def test_any_changed_byte_is_refused(position: int, value: int) -> None:
    cursor = encode_cursor(KEY, PAYLOAD)
    index = position % len(cursor)
    changed = cursor[:index] + chr(value) + cursor[index + 1 :]
    if changed != cursor:
        _bad(changed)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_a_payload_or_refused(text: str) -> None:
    try:
        decode_cursor(KEY, text)
    except InvalidInput:
        return
    raise AssertionError("an unsigned text passed as a cursor")


def test_bad_keys_and_payloads_are_programming_errors() -> None:
    with pytest.raises(ValueError, match="key"):
        encode_cursor(b"short", PAYLOAD)
    with pytest.raises(ValueError):
        encode_cursor(KEY, {"score": float("nan")})
    with pytest.raises(ValueError, match="too large"):
        encode_cursor(KEY, {"q": "x" * 10_000})
