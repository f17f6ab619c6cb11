"""The tiktoken tokenizer: :class:`TiktokenTokenizer`, one text or many a call.

It counts with an encoding built by :mod:`strategies.tokenizers.bpe` from the
vocabularies shipped with the package, and keeps the counts of short texts. A long text
is counted a segment at a time (:func:`segments`), so that counting it takes memory in
proportion to a segment, not to the text: tiktoken's encoder holds some 40 bytes for
each byte of one piece of its input, and returns a token for each 4 bytes or so.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from strategies.tokenizers.base import CharacterEstimatorTokenizer, Tokenizer
from strategies.tokenizers.bpe import (
    SUPPORTED_ENCODINGS,
    UnknownTokenizer,
    cached_encoding,
    encoding_name_for,
)

if TYPE_CHECKING:
    import tiktoken

__all__ = ["SEGMENT_CHARS", "TiktokenTokenizer", "segments", "tokenizer_named"]

_SHORT_TEXT = 40
"""Texts up to this length have their counts kept (:meth:`TiktokenTokenizer.count_tokens`)."""
_SHORT_ENTRIES = 8192
"""At most this many short texts are kept; the cache starts over when full."""
_NO_SPECIALS: frozenset[str] = frozenset()
"""No special token: their text is encoded as plain text."""
_SEPARATOR = "<|endoftext|>"
"""Joins the texts of one :meth:`TiktokenTokenizer.count_many` call (a special token)."""
_JOINED_CHARS = 1 << 20
"""About this many characters are tokenized per call into tiktoken by ``count_many``."""
SEGMENT_CHARS = 1 << 16
"""Texts longer than this are counted a segment of at most this many characters at a
time (:func:`segments`)."""
_CUT = re.compile(r".*\S(?= )", re.DOTALL)
"""Matches up to the last non-space character followed by a space: where a segment ends."""


def segments(text: str, size: int = SEGMENT_CHARS) -> Iterator[str]:
    """``text`` in consecutive pieces of at most ``size`` characters, for counting.

    A piece ends, where it can, before a space that follows a character other than
    whitespace. The shipped encodings' pre-tokenizers never place such a space inside a
    piece of their own (a space begins a word, a number or punctuation, or belongs to a
    run of whitespace), and encode each of their pieces alone: the counts of the
    segments add up to the count of the text. A stretch of ``size`` characters without
    such a space is cut where the size ends; only there may the sum differ from the
    whole text's count, by about a token a cut.
    """
    start, length = 0, len(text)
    while length - start > size:
        stop = start + size
        found = _CUT.match(text, start, stop + 1)
        cut = found.end() if found is not None else stop
        yield text[start:cut]
        start = cut
    yield text[start:]


class TiktokenTokenizer:
    """Counts tokens with an OpenAI BPE encoding, offline.

    ``encoding_or_model`` is ``"o200k_base"`` (the default), ``"cl100k_base"``, or a
    model name that uses one of them (``"gpt-4o"``, ``"gpt-4.1-mini"``, ``"gpt-4"``...,
    mapped with tiktoken's own tables). The encoding is loaded once per process.

    Raises:
        UnknownTokenizer: the name is not accepted; the message lists the accepted ones.
        VocabularyIntegrityError: the shipped vocabulary fails its hash check.
    """

    def __init__(self, encoding_or_model: str = "o200k_base", /) -> None:
        self._encoding = cached_encoding(encoding_name_for(encoding_or_model))
        self._encode = self._encoding.encode_ordinary
        self._short: dict[str, int] = {}
        """Counts of short texts (tool names, roles, short replies), which recur."""
        specials = self._encoding.special_tokens_set
        self._separator = (
            self._encoding.encode_single_token(_SEPARATOR) if _SEPARATOR in specials else None
        )
        """The separator's token of :meth:`count_many` (None: every text counted alone)."""
        self._separator_bytes = (
            None if self._separator is None else self._separator.to_bytes(4, sys.byteorder)
        )
        """The separator's token as tiktoken's token buffer holds it (a native ``u32``)."""
        self._encode_buffer: Callable[[str, Any], Any] | None = getattr(
            getattr(self._encoding, "_core_bpe", None), "encode_to_tiktoken_buffer", None
        )
        """tiktoken's encoder that returns the tokens as a buffer of ``u32`` (what its
        ``encode_to_numpy`` reads), without a Python int for each token; None in a
        tiktoken without it."""

    @property
    def name(self) -> str:
        """The encoding's name, such as ``"o200k_base"`` (also when built from a model name)."""
        return self._encoding.name

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The underlying tiktoken encoding."""
        return self._encoding

    def count_tokens(self, text: str) -> int:
        """Return the number of tokens of ``text``; special-token text counts as plain text."""
        if len(text) > SEGMENT_CHARS:
            return sum(map(self._count_segment, segments(text, SEGMENT_CHARS)))
        if len(text) > _SHORT_TEXT:
            return len(self._encode(text))
        count = self._short.get(text)
        if count is None:
            count = self._keep(text, len(self._encode(text)))
        return count

    def _count_segment(self, text: str) -> int:
        """The count of one segment of a long text, read from tiktoken's token buffer
        (without a Python int for each token) where there is one."""
        if self._encode_buffer is not None:
            try:
                return memoryview(self._encode_buffer(text, _NO_SPECIALS)).nbytes >> 2
            except UnicodeEncodeError:
                pass  # a lone surrogate: tiktoken's own encode replaces it
        return len(self._encode(text))

    def _keep(self, text: str, count: int) -> int:
        """Keep the count of a short text (the cache starts over when full)."""
        if len(self._short) >= _SHORT_ENTRIES:
            self._short.clear()
        self._short[text] = count
        return count

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Return :meth:`count_tokens` of each text, from few calls into tiktoken.

        The texts are joined with the end-of-text special token between them, and
        tiktoken is asked to honour that token alone: it splits its input at an allowed
        special token and encodes each piece on its own, so each text's count is the
        number of tokens between two separators, as if it were encoded by itself. A text
        holding the separator's own text is counted by itself. Tiktoken encodes outside
        the interpreter lock, so a thread may call this beside other Python work; the
        tokens come back as one buffer, read without a Python int for each token (a
        list of them took the lock for about a fifth of the encoding's time).
        """
        counts = [0] * len(texts)
        cached = self._short.get
        picked: list[int] = []
        short: list[int] = []  # short texts not cached yet, counted in the joined text
        size = 0
        for index, text in enumerate(texts):
            if len(text) <= _SHORT_TEXT and (count := cached(text)) is not None:
                counts[index] = count
            elif len(text) > SEGMENT_CHARS or _SEPARATOR in text or self._separator is None:
                counts[index] = self.count_tokens(text)
            else:
                if len(text) <= _SHORT_TEXT:
                    short.append(index)
                picked.append(index)
                size += len(text)
                if size >= _JOINED_CHARS:
                    self._count_joined(texts, picked, counts)
                    picked, size = [], 0
        if picked:
            self._count_joined(texts, picked, counts)
        for index in short:
            self._keep(texts[index], counts[index])
        return counts

    def _count_joined(self, texts: Sequence[str], picked: list[int], counts: list[int]) -> None:
        joined = _SEPARATOR.join([texts[index] for index in picked])
        if self._encode_buffer is not None and self._separator_bytes is not None:
            try:
                buffer = self._encode_buffer(joined, {_SEPARATOR})
            except UnicodeEncodeError:
                pass  # a lone surrogate: tiktoken's own encode replaces it, as alone
            else:
                _split_buffer(bytes(buffer), self._separator_bytes, picked, counts)
                return
        separator = self._separator
        assert separator is not None
        tokens = self._encoding.encode(joined, allowed_special={_SEPARATOR}, disallowed_special=())
        find = tokens.index
        start = 0
        for index in picked[:-1]:
            end = find(separator, start)
            counts[index] = end - start
            start = end + 1
        counts[picked[-1]] = len(tokens) - start

    def __repr__(self) -> str:
        return f"TiktokenTokenizer({self.name!r})"


def _split_buffer(tokens: bytes, separator: bytes, picked: list[int], counts: list[int]) -> None:
    """Set the count of each of ``picked`` from the tokens of their joined texts, a ``u32``
    each: the tokens between two separators. The separator is found by its bytes, kept
    only where it starts a token (a match across two tokens' bytes is skipped)."""
    find = tokens.find
    start = 0
    for index in picked[:-1]:
        end = find(separator, start)
        while end > 0 and end & 3:
            end = find(separator, end + 1)
        if end < 0:  # pragma: no cover - tiktoken keeps an allowed special token whole
            raise AssertionError("a separator token is missing from tiktoken's tokens")
        counts[index] = (end - start) >> 2
        start = end + 4
    counts[picked[-1]] = (len(tokens) - start) >> 2


def tokenizer_named(name: str, /) -> Tokenizer:
    """The tokenizer a session records as ``name``: ``"character_estimator"``, a shipped
    tiktoken encoding (``"o200k_base"``, ``"cl100k_base"``) or a model name that uses one.

    Raises:
        UnknownTokenizer: no tokenizer of that name ships here; the message lists the known ones.
    """
    estimator = CharacterEstimatorTokenizer()
    if name == estimator.name:
        return estimator
    try:
        return TiktokenTokenizer(name)
    except UnknownTokenizer:
        known = ", ".join([estimator.name, *SUPPORTED_ENCODINGS])
        raise UnknownTokenizer(
            f"unknown tokenizer {name!r}: expected one of {known}, or an OpenAI model name "
            "that uses one of the encodings (such as gpt-4o)"
        ) from None
