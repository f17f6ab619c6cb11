"""The store with the library's own strategies: truncation, summarization under writers."""

from __future__ import annotations

import asyncio

from store.contract import HistoryBackend
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.truncation import TruncationStrategy
from tests.strategies.conversations import say, turns
from tests.strategies.invariants import assert_invariants, assert_projection_invariants


async def test_truncation_applies_what_the_view_would(store: HistoryBackend) -> None:
    await store.append("s", turns(5))
    strategy = TruncationStrategy(max_n=6, compact_to=3)
    view = await store.view("s")
    planned = await strategy.plan(view)
    expected = await assert_invariants(view, planned, strategy=strategy)
    event = await store.compact("s", strategy, phase="after_run")
    assert event is not None and event.strategy == "TruncationStrategy"
    assert set(event.excluded) == {e.group_id for e in planned.exclusions}
    assert await store.context("s") == await expected.project()
    assert await store.compact("s", strategy) is None  # idempotent on the stored result


async def test_slow_summarizer_never_excludes_concurrent_appends(
    store: HistoryBackend,
) -> None:
    await store.append("s", turns(6))
    summarizer = FakeSummarizer(delay=0.01)
    strategy = SummarizationStrategy(client=summarizer, target_count=4, threshold=0)

    async def writer(n: int) -> list[str]:
        ids = []
        for i in range(5):
            batch = [say("user", f"w{n}u{i}"), say("assistant", f"w{n}a{i}")]
            ids += await store.append("s", batch)
            await asyncio.sleep(0)
        return ids

    event, *written = await asyncio.gather(
        store.compact("s", strategy, phase="after_run"), *(writer(n) for n in range(4))
    )
    assert event is not None and event.summarized
    stored = {m.message_id: m for m in await store.history("s", include_excluded=True)}
    new_ids = [i for ids in written for i in ids]
    assert len(stored) == len(turns(6)) + len(new_ids) + len(event.summarized)
    assert not [i for i in new_ids if stored[i].excluded]
    assert [m.seq for m in stored.values()] == list(range(1, len(stored) + 1))
    assert_projection_invariants(await store.context("s"))
