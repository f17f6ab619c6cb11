"""Fixtures of the bounded-results tests: the real ``o200k_base`` tokenizer, offline."""

from __future__ import annotations

import pytest

from strategies.tokenizers import TiktokenTokenizer


@pytest.fixture(scope="session")
def o200k() -> TiktokenTokenizer:
    return TiktokenTokenizer("o200k_base")
