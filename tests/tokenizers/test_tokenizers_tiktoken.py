"""The offline tiktoken tokenizer, the character estimator and the counting wrapper."""

from __future__ import annotations

import gzip
import hashlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.load
from tiktoken_ext import openai_public  # type: ignore[import-untyped]

from strategies.tokenizers import (
    EXPECTED_SHA256,
    SUPPORTED_ENCODINGS,
    CharacterEstimatorTokenizer,
    CountingTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    VocabularyIntegrityError,
    bpe,
    encoding_name_for,
    load_encoding,
)

# Expected counts and ids below were derived once by running tiktoken 0.14 on these
# encodings (built both by this module and by tiktoken's own `load_tiktoken_bpe` and
# `tiktoken_ext.openai_public` constructors, which agreed), then written down here.
# "tiktoken is great!" also matches the ids in OpenAI's token-counting cookbook.
CJK = "Hello, 世界\uff01こんにちは、元気ですか\uff1f"  # full-width "!" and "?"

PINNED_COUNTS: dict[str, dict[str, int]] = {
    "o200k_base": {
        "": 0,
        "hello world": 2,
        "tiktoken is great!": 6,
        CJK: 11,
        "我爱北京天安门": 6,
        "🎉🚀 emoji party 👩\u200d👩\u200d👧\u200d👦": 17,
        "<|endoftext|>": 7,
        "def f(x):\n    return x ** 2\n": 11,
        "Ünïcödé façade naïve": 8,
        "1234567890": 4,
    },
    "cl100k_base": {
        "": 0,
        "hello world": 2,
        "tiktoken is great!": 6,
        CJK: 14,
        "我爱北京天安门": 7,
        "🎉🚀 emoji party 👩\u200d👩\u200d👧\u200d👦": 25,
        "<|endoftext|>": 7,
        "def f(x):\n    return x ** 2\n": 11,
        "Ünïcödé façade naïve": 11,
        "1234567890": 4,
    },
}

PINNED_IDS: dict[str, list[int]] = {
    "o200k_base": [83, 8251, 2488, 382, 2212, 0],
    "cl100k_base": [83, 1609, 5963, 374, 2294, 0],
}


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    """Forget the per-process encodings before and after a test that must load them."""
    bpe.cached_encoding.cache_clear()
    yield
    bpe.cached_encoding.cache_clear()


@pytest.mark.parametrize(
    ("encoding", "text", "expected"),
    [(enc, text, n) for enc, counts in PINNED_COUNTS.items() for text, n in counts.items()],
)
def test_pinned_counts(encoding: str, text: str, expected: int) -> None:
    assert TiktokenTokenizer(encoding).count_tokens(text) == expected


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
def test_pinned_token_ids(encoding: str) -> None:
    ids = TiktokenTokenizer(encoding).encoding.encode_ordinary("tiktoken is great!")
    assert ids == PINNED_IDS[encoding]


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
def test_encoding_round_trips_and_has_tiktoken_specials(encoding: str) -> None:
    enc = TiktokenTokenizer(encoding).encoding
    text = "Grüße 🌍 — \uff23\uff2a\uff2b\uff1a漢字かなカナ\r\n\tend"
    assert enc.decode(enc.encode_ordinary(text)) == text
    assert enc.eot_token == {"o200k_base": 199999, "cl100k_base": 100257}[encoding]
    assert "<|endofprompt|>" in enc.special_tokens_set


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
def test_pattern_and_specials_match_tiktoken_constructors(
    encoding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tiktoken's constructors would download the ranks: give them none, keep the rest.
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
    reference = openai_public.ENCODING_CONSTRUCTORS[encoding]()
    ours = TiktokenTokenizer(encoding).encoding
    assert ours._pat_str == reference["pat_str"]
    assert ours._special_tokens == reference["special_tokens"]
    assert ours.n_vocab == max(reference["special_tokens"].values()) + 1


def test_default_is_o200k_base() -> None:
    tokenizer = TiktokenTokenizer()
    assert tokenizer.name == "o200k_base"
    assert repr(tokenizer) == "TiktokenTokenizer('o200k_base')"


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
def test_special_token_text_counts_as_plain_text_without_raising(encoding: str) -> None:
    tokenizer = TiktokenTokenizer(encoding)
    text = "a <|endoftext|> b <|endofprompt|>"
    with pytest.raises(ValueError, match="disallowed special token"):
        tokenizer.encoding.encode(text)  # tiktoken's default refuses it
    ids = tokenizer.encoding.encode(text, disallowed_special=())
    assert tokenizer.encoding.eot_token not in ids
    assert tokenizer.count_tokens(text) == len(ids) > 4


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("o200k_base", "o200k_base"),
        ("cl100k_base", "cl100k_base"),
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-2024-08-06", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4.1-mini", "o200k_base"),
        ("o3", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
    ],
)
def test_model_names_map_to_encodings(name: str, expected: str) -> None:
    assert encoding_name_for(name) == expected
    assert TiktokenTokenizer(name).name == expected


@pytest.mark.parametrize("name", ["gpt2", "text-davinci-003", "p50k_base", "llama-3", ""])
def test_unknown_or_unshipped_names_raise_naming_accepted(name: str) -> None:
    with pytest.raises(ValueError, match="o200k_base, cl100k_base") as info:
        TiktokenTokenizer(name)
    assert repr(name) in str(info.value)


def test_unshipped_tiktoken_encoding_is_named_in_error() -> None:
    with pytest.raises(ValueError, match=r"uses p50k_base, which is not shipped"):
        encoding_name_for("text-davinci-003")


def test_load_encoding_rejects_model_names() -> None:
    with pytest.raises(ValueError, match="unknown encoding 'gpt-4o'"):
        load_encoding("gpt-4o")


def test_encodings_are_cached_per_process() -> None:
    first = TiktokenTokenizer("gpt-4o")
    second = TiktokenTokenizer("o200k_base")
    assert first.encoding is second.encoding
    assert TiktokenTokenizer("cl100k_base").encoding is not first.encoding


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"network or tiktoken download attempted: {args!r}")


def _refused_in_this_thread(original: Any) -> Any:
    """``original``, refusing every call made from the test's own thread (other threads,
    such as the test server's background database clones, keep their network)."""
    here = threading.get_ident()

    def guarded(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == here:
            return _refuse(*args, **kwargs)
        return original(*args, **kwargs)

    return guarded


def test_loads_and_counts_without_network_or_tiktoken_cache(
    fresh_cache: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for owner, name in (
        (socket.socket, "connect"),
        (socket.socket, "connect_ex"),
        (socket, "create_connection"),
        (socket, "getaddrinfo"),
    ):
        monkeypatch.setattr(owner, name, _refused_in_this_thread(getattr(owner, name)))
    monkeypatch.setattr(tiktoken.load, "read_file", _refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", _refuse)
    monkeypatch.setattr(tiktoken.load, "load_tiktoken_bpe", _refuse)
    monkeypatch.setattr(tiktoken, "get_encoding", _refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    for encoding, counts in PINNED_COUNTS.items():
        tokenizer = TiktokenTokenizer(encoding)
        assert tokenizer.count_tokens(CJK) == counts[CJK]
    assert not (tmp_path / "cache").exists()


def test_hash_mismatch_raises_clear_error(
    fresh_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "0" * 64
    monkeypatch.setitem(EXPECTED_SHA256, "o200k_base", wrong)
    with pytest.raises(VocabularyIntegrityError) as info:
        TiktokenTokenizer("gpt-4o")
    message = str(info.value)
    assert "o200k_base" in message
    assert wrong in message
    assert "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d" in message
    assert "reinstall" in message


def _fake_vocab_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, payload: bytes | None
) -> None:
    """Point the loader at a throwaway package whose ``vocab`` holds ``payload``."""
    package = tmp_path / name
    (package / "vocab").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if payload is not None:
        (package / "vocab" / "o200k_base.tiktoken.gz").write_bytes(payload)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(bpe, "_VOCAB_PACKAGE", name)


def test_malformed_line_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"IQ== 0\n\nIg== 1\nnot-base64!! 2\n"
    _fake_vocab_package(tmp_path, monkeypatch, "chatledger_fake_vocab_a", gzip.compress(data))
    monkeypatch.setitem(EXPECTED_SHA256, "o200k_base", hashlib.sha256(data).hexdigest())
    with pytest.raises(VocabularyIntegrityError, match="line 4 of the o200k_base"):
        load_encoding("o200k_base")


@pytest.mark.parametrize("payload", [None, b"this is not gzip"], ids=["missing", "not-gzip"])
def test_unreadable_vocabulary_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload: bytes | None
) -> None:
    _fake_vocab_package(tmp_path, monkeypatch, f"chatledger_fake_vocab_{payload is None}", payload)
    with pytest.raises(VocabularyIntegrityError, match="cannot read the o200k_base vocabulary"):
        load_encoding("o200k_base")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 1), ("abc", 1), ("abcd", 1), ("abcdefgh", 2), ("x" * 4001, 1000), ("世界世界", 1)],
)
def test_character_estimator(text: str, expected: int) -> None:
    tokenizer = CharacterEstimatorTokenizer()
    assert tokenizer.name == "character_estimator"
    assert tokenizer.count_tokens(text) == expected


def test_character_estimator_matches_agent_framework() -> None:
    from agent_framework import CharacterEstimatorTokenizer as AFEstimator

    ours, theirs = CharacterEstimatorTokenizer(), AFEstimator()
    for text in ["", "a", "abcd", "abcde" * 37, "世界" * 9]:
        assert ours.count_tokens(text) == theirs.count_tokens(text)


def test_counting_tokenizer_counts_calls_and_delegates() -> None:
    counting = CountingTokenizer(TiktokenTokenizer("cl100k_base"))
    assert counting.name == "cl100k_base"
    assert counting.calls == 0
    assert counting.count_tokens("hello world") == 2
    assert counting.count_tokens("") == 0
    assert (counting.calls, counting.chars) == (2, 11)
    counting.reset()
    assert (counting.calls, counting.chars) == (0, 0)


@pytest.mark.parametrize(
    "tokenizer",
    [
        CharacterEstimatorTokenizer(),
        TiktokenTokenizer(),
        CountingTokenizer(CharacterEstimatorTokenizer()),
    ],
    ids=["estimator", "tiktoken", "counting"],
)
def test_all_satisfy_the_protocol(tokenizer: Tokenizer) -> None:
    assert isinstance(tokenizer, Tokenizer)
    assert isinstance(tokenizer.name, str)
    assert tokenizer.name


def test_protocol_rejects_objects_without_name() -> None:
    class NoName:
        def count_tokens(self, text: str) -> int:
            return len(text)

    assert not isinstance(NoName(), Tokenizer)


def test_short_texts_counted_from_the_cache_match_the_encoding() -> None:
    """Counts of short texts are kept; each matches the encoding, also after the cache
    starts over, and long texts are never kept."""
    tokenizer = TiktokenTokenizer("o200k_base")
    encode = tokenizer.encoding.encode_ordinary
    texts = [f"tool_{n}" for n in range(9000)] + ["get_weather", "héllo wörld", "", " "]
    for _ in range(2):
        for text in texts:
            assert tokenizer.count_tokens(text) == len(encode(text))
    long = "word " * 20
    assert tokenizer.count_tokens(long) == len(encode(long))
    assert long not in tokenizer._short
    assert len(tokenizer._short) <= 8192
