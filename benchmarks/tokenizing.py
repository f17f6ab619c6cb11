"""Tokenizers for the harness: the store's tiktoken tokenizer and a counting wrapper."""

from __future__ import annotations

from collections import Counter
from typing import Protocol

__all__ = ["CountingTokenizer", "TokenCounter", "Unavailable", "load_tiktoken"]


class Unavailable(Exception):
    """A system or workload cannot run here; the message says why."""


class TokenCounter(Protocol):
    """Anything with ``count_tokens(text) -> int``."""

    def count_tokens(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        ...


def load_tiktoken(encoding: str = "o200k_base") -> TokenCounter:
    """The store's offline tiktoken tokenizer, or :class:`Unavailable` saying why not."""
    try:
        from strategies.tokenizers import TiktokenTokenizer
    except ImportError as exc:
        raise Unavailable(f"strategies.tokenizers.TiktokenTokenizer not importable: {exc}") from exc
    tokenizer: TokenCounter = TiktokenTokenizer(encoding)
    return tokenizer


class CountingTokenizer:
    """Wraps a tokenizer and records how often each distinct text is tokenized."""

    def __init__(self, inner: TokenCounter) -> None:
        self.inner = inner
        self.calls = 0
        self.by_text: Counter[int] = Counter()

    @property
    def name(self) -> str:
        """The wrapped tokenizer's name, so that a store records the same one."""
        return str(getattr(self.inner, "name", type(self.inner).__name__))

    def count_tokens(self, text: str) -> int:
        """Count tokens with the wrapped tokenizer, recording the call."""
        self.calls += 1
        self.by_text[hash(text)] += 1
        return self.inner.count_tokens(text)

    def max_repeats(self) -> int:
        """The most times any one text was tokenized."""
        return max(self.by_text.values(), default=0)

    def excess_over(self, baseline: CountingTokenizer) -> tuple[int, int]:
        """Calls beyond ``baseline``'s (one pass over the stored messages): how many in
        all, and the most for any one text."""
        excess = [max(0, n - baseline.by_text[text]) for text, n in self.by_text.items()]
        return sum(excess), max(excess, default=0)
