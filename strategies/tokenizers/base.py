"""The tokenizer contract, and the tokenizers that need no vocabulary.

A :class:`Tokenizer` has a ``name`` (recorded per session, so that counts made with
different tokenizers are never mixed) and ``count_tokens(text)``. A
:class:`BatchTokenizer` also counts many texts in one call, which :func:`count_texts`
uses when it can. The two tokenizers here read no vocabulary:

* :class:`CharacterEstimatorTokenizer`, ``max(1, len(text) // 4)``, the same estimate
  as Agent Framework's. Fast, dependency-free, good for tests.
* :class:`CountingTokenizer`, a wrapper that counts the calls made to another one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol, runtime_checkable

__all__ = [
    "BatchTokenizer",
    "CharacterEstimatorTokenizer",
    "CountingTokenizer",
    "Tokenizer",
    "count_texts",
]


@runtime_checkable
class Tokenizer(Protocol):
    """What the store and the strategies need of a tokenizer."""

    @property
    def name(self) -> str:
        """Stable identifier, recorded per session (counts of two names never mix)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Return the number of tokens of ``text``."""
        ...


@runtime_checkable
class BatchTokenizer(Tokenizer, Protocol):
    """A tokenizer that also counts many texts in one call, from any thread.

    The store counts the new messages of a large append with :meth:`count_many` in a
    worker thread, beside the rest of the append, so the call should spend its time
    outside Python's interpreter lock (as tiktoken's encoder does).
    """

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Return ``count_tokens`` of each text, in order."""
        ...


class CharacterEstimatorTokenizer:
    """Estimates one token per four characters, and at least one (as Agent Framework)."""

    @property
    def name(self) -> str:
        """Always ``"character_estimator"``."""
        return "character_estimator"

    def count_tokens(self, text: str) -> int:
        """Return ``max(1, len(text) // 4)``."""
        return max(1, len(text) // 4)


class CountingTokenizer:
    """Delegates to another tokenizer and counts the calls (for tests and benchmarks)."""

    def __init__(self, inner: Tokenizer, /) -> None:
        self.inner: Final = inner
        """The tokenizer that does the counting."""
        self.calls = 0
        """How many times :meth:`count_tokens` was called."""
        self.chars = 0
        """How many characters were passed to :meth:`count_tokens` in total."""

    @property
    def name(self) -> str:
        """The inner tokenizer's name (the wrapper does not change any count)."""
        return self.inner.name

    def count_tokens(self, text: str) -> int:
        """Count one call, then delegate."""
        self.calls += 1
        self.chars += len(text)
        return self.inner.count_tokens(text)

    def reset(self) -> None:
        """Set :attr:`calls` and :attr:`chars` back to zero."""
        self.calls = 0
        self.chars = 0


def count_texts(texts: Sequence[str], tokenizer: Tokenizer) -> list[int]:
    """``tokenizer.count_tokens`` of each text, in one call when it is a :class:`BatchTokenizer`."""
    if isinstance(tokenizer, BatchTokenizer):
        return tokenizer.count_many(texts)
    return [tokenizer.count_tokens(text) for text in texts]
