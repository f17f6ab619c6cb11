"""The encoding a text that does not decode looks like, as a refusal names it."""

from __future__ import annotations

import pytest

from store.importing.source import guess_encoding

WINDOWS_TEXT = "caf\u00e9 \u201cquoted\u201d \u2013 50 \u20ac"


@pytest.mark.parametrize(
    ("data", "guess"),
    [
        (WINDOWS_TEXT.encode("cp1252"), "cp1252"),
        (bytes([0x81, 0xE9, 0x20]), "latin-1"),
        ('{"role": "user"}'.encode("utf-16-le"), "utf-16-le"),
        ('{"role": "user"}'.encode("utf-16-be"), "utf-16-be"),
    ],
)
def test_the_guess_of_an_encoding(data: bytes, guess: str) -> None:
    assert guess_encoding(data) == guess
