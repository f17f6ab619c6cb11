"""The in-memory store's cache of pending messages' token counts holds at most its size."""

from __future__ import annotations

from store.memory import InMemoryHistoryStore
from strategies.tokenizers import CharacterEstimatorTokenizer, CountingTokenizer
from tests.groups.conversations import user


async def test_cache_is_bounded() -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    store = InMemoryHistoryStore(tokenizer=counting, pending_cache_size=2)
    pending = [user(f"u{i}", f"text {i}") for i in range(4)]
    await store.context("s", pending=pending)
    counting.reset()
    await store.append("s", pending)
    assert counting.calls == 2  # the two oldest counts were evicted
