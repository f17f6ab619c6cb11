"""Deferred after-run compaction: the turn returns once stored, compaction follows.

With ``compaction="deferred"`` a slow summarizer never delays ``save_turn``; the
compaction still happens (flushed by ``aclose``), one at a time a session, and a
failure is kept and logged rather than raised into a later turn.
"""

from __future__ import annotations

import asyncio

import pytest

from store.deferred import DeferredCompactions
from store.memory import InMemoryHistoryStore
from store.models import CompactionEvent
from store.provider import TwoPhaseProvider
from strategies.messages import Message
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.tokenizers import CharacterEstimatorTokenizer


def _turn(i: int) -> list[Message]:
    return [
        Message.text_message("user", f"question {i} " + "word " * 40),
        Message.text_message("assistant", f"answer {i} " + "word " * 40),
    ]


def _provider(
    store: InMemoryHistoryStore, summarizer: FakeSummarizer, **kwargs: object
) -> TwoPhaseProvider:
    strategy = SummarizationStrategy(
        client=summarizer, target_count=2, threshold=0, tokenizer=store.tokenizer
    )
    return TwoPhaseProvider(store, after_strategy=strategy, **kwargs)  # type: ignore[arg-type]


async def test_a_deferred_turn_returns_before_its_compaction_and_aclose_finishes_it() -> None:
    for mode in ("inline", "deferred"):
        store = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())
        summarizer = FakeSummarizer(delay=0.05)
        provider = _provider(store, summarizer, compaction=mode)
        for i in range(3):
            result = await provider.save_turn("s", _turn(i), end_of_turn=True)
            assert result.deferred is (mode == "deferred")
            after_save = len(await store.audit("s"))
            if mode == "inline":
                assert (result.compaction is not None) == (after_save > 0)
            else:  # the summarizer is still waiting when save_turn returns
                assert result.compaction is None
        await provider.aclose()
        assert len(await store.audit("s")) > 0, mode  # it ran in both modes
        assert [m.kind for m in await store.history("s")].count("summary") > 0


async def test_one_session_is_compacted_one_at_a_time_and_asked_again_when_busy() -> None:
    running: set[str] = set()
    overlaps = 0
    done: list[str] = []

    async def compact(session_id: str) -> CompactionEvent | None:
        nonlocal overlaps
        if session_id in running:
            overlaps += 1
        running.add(session_id)
        await asyncio.sleep(0.01)
        running.discard(session_id)
        done.append(session_id)
        return None

    queue = DeferredCompactions(compact, workers=3)
    for _ in range(5):
        await queue.request("a")
        await queue.request("b")
        await asyncio.sleep(0.003)
    await queue.aclose()
    assert overlaps == 0
    assert set(done) == {"a", "b"}
    assert done.count("a") < 5  # requests while queued are one request
    assert queue.pending == 0


async def test_a_failing_compaction_is_kept_and_never_raised() -> None:
    async def compact(session_id: str) -> CompactionEvent | None:
        raise RuntimeError(f"model down for {session_id}")

    queue = DeferredCompactions(compact)
    await queue.request("s")
    await queue.flush()
    assert [(s, str(e)) for s, e in queue.errors] == [("s", "model down for s")]
    await queue.aclose()


async def test_the_queue_is_bounded() -> None:
    release = asyncio.Event()

    async def compact(session_id: str) -> CompactionEvent | None:
        await release.wait()
        return None

    queue = DeferredCompactions(compact, max_pending=2, workers=1)
    await queue.request("a")  # taken by the worker
    await asyncio.sleep(0)
    await queue.request("b")
    await queue.request("c")
    waiting = asyncio.create_task(queue.request("d"))  # no room: waits
    await asyncio.sleep(0.01)
    assert not waiting.done()
    release.set()
    await waiting
    await queue.aclose()


def test_bad_settings_are_refused() -> None:
    store = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())
    with pytest.raises(ValueError, match="inline"):
        _provider(store, FakeSummarizer(), compaction="later")
