"""Deferred after-run compaction: the turn returns once stored, compaction follows.

With ``compaction="deferred"`` a slow summarizer never delays ``save_turn``; the
compaction still happens (flushed by ``aclose``), one at a time a session, and a
failure is kept and logged rather than raised into a later turn.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import weakref

import pytest

from store import HistoryStore
from store.contract import HistoryBackend
from store.deferred import (
    DEFAULT_CLOSE_TIMEOUT,
    DEFAULT_MAX_PENDING,
    DEFAULT_WORKERS,
    KEPT_FAILURES,
    DeferredCompactions,
    Failure,
)
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
    store: HistoryBackend, summarizer: FakeSummarizer, **kwargs: object
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
    assert queue.errors == (Failure("s", "RuntimeError", "model down for s"),)
    assert queue.failures == 1
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


async def test_a_session_asked_again_while_the_queue_is_full_never_deadlocks() -> None:
    """Four busy sessions asked for again, and a full queue behind them: each worker
    finishes its session's second compaction itself instead of waiting for room in the
    queue it alone drains."""
    release = asyncio.Event()
    done: list[str] = []
    busy = [f"busy-{i}" for i in range(DEFAULT_WORKERS)]

    async def compact(session_id: str) -> CompactionEvent | None:
        if session_id in busy:
            await release.wait()
        done.append(session_id)
        return None

    queue = DeferredCompactions(compact)
    for session_id in busy:
        await queue.request(session_id)
    await asyncio.sleep(0)  # every worker has taken a busy session
    for session_id in busy:
        await queue.request(session_id)  # asked again while being compacted
    for i in range(DEFAULT_MAX_PENDING):
        await queue.request(f"waiting-{i}")  # the queue is full
    release.set()
    result = await asyncio.wait_for(queue.flush(), timeout=10)
    assert result.complete and result.pending == ()
    await asyncio.wait_for(queue.request("later"), timeout=10)
    await asyncio.wait_for(queue.aclose(), timeout=10)
    assert all(done.count(session_id) == 2 for session_id in busy)
    assert len(done) == 2 * DEFAULT_WORKERS + DEFAULT_MAX_PENDING + 1


async def _hung(session_id: str) -> CompactionEvent | None:
    if session_id.startswith("stuck"):
        await asyncio.Event().wait()
    return None


async def test_flush_is_bounded_and_names_the_sessions_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = DeferredCompactions(_hung)
    for session_id in ("stuck-b", "quick", "stuck-a"):
        await queue.request(session_id)
    with caplog.at_level(logging.WARNING, logger="chatledger.store"):
        result = await asyncio.wait_for(queue.flush(timeout=0.1), timeout=5)
    assert not result.complete
    assert result.pending == ("stuck-a", "stuck-b")
    assert "stuck-a" in caplog.text and "stuck-b" in caplog.text and "next turn" in caplog.text
    assert queue.pending == 2  # flushing stops nothing
    closed = await asyncio.wait_for(queue.aclose(timeout=0.1), timeout=5)
    assert closed.pending == ("stuck-a", "stuck-b")
    assert queue.pending == 0


async def test_aclose_gives_up_on_a_hung_summarizer_by_default() -> None:
    default = inspect.signature(DeferredCompactions.aclose).parameters["timeout"].default
    assert default == DEFAULT_CLOSE_TIMEOUT and 0 < default < 600
    queue = DeferredCompactions(_hung)
    await queue.request("stuck")
    await asyncio.sleep(0)
    result = await asyncio.wait_for(queue.aclose(timeout=0), timeout=5)
    assert result.pending == ("stuck",)
    await queue.aclose()  # closing twice is harmless, and quick
    await queue.request("again")  # a closed queue starts again when asked
    assert (await asyncio.wait_for(queue.aclose(), timeout=5)).complete


class _ModelDown(Exception):
    pass


async def test_failures_kept_are_bounded() -> None:
    raised: list[weakref.ref[_ModelDown]] = []

    async def compact(session_id: str) -> CompactionEvent | None:
        error = _ModelDown(f"model down for {session_id}")
        raised.append(weakref.ref(error))
        raise error

    queue = DeferredCompactions(compact)
    logging.getLogger("chatledger.store").disabled = True
    try:
        for i in range(5000):
            await queue.request(f"s{i}")
        await queue.flush()
    finally:
        logging.getLogger("chatledger.store").disabled = False
    assert queue.failures == 5000
    assert len(queue.errors) == KEPT_FAILURES
    newest = queue.errors[-1]
    assert newest == Failure(newest.session_id, "_ModelDown", f"model down for {newest.session_id}")
    gc.collect()
    assert sum(ref() is not None for ref in raised) == 0  # no traceback is kept
    await queue.aclose()


def _store() -> InMemoryHistoryStore:
    return InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())


async def test_the_provider_bounds_flush_and_aclose() -> None:
    store = _store()
    provider = _provider(store, FakeSummarizer(delay=3600), compaction="deferred")
    for i in range(3):
        await provider.save_turn("s", _turn(i), end_of_turn=True)
    flushed = await asyncio.wait_for(provider.flush(timeout=0.05), timeout=5)
    assert flushed.pending == ("s",)
    closed = await asyncio.wait_for(provider.aclose(timeout=0.05), timeout=5)
    assert closed.pending == ("s",)
    inline = _provider(store, FakeSummarizer(), compaction="inline")
    assert (await inline.flush(timeout=0)).complete
    assert (await inline.aclose(timeout=0)).complete


async def test_the_agent_framework_provider_bounds_aclose() -> None:
    from store.integrations.agent_framework import ChatledgerHistoryProvider

    store = _store()
    strategy = SummarizationStrategy(
        client=FakeSummarizer(delay=3600), target_count=2, threshold=0, tokenizer=store.tokenizer
    )
    adapter = ChatledgerHistoryProvider(store, after_strategy=strategy, compaction="deferred")
    for i in range(3):
        await adapter.phases.save_turn("s", _turn(i), end_of_turn=True)
    result = await asyncio.wait_for(adapter.aclose(timeout=0.05), timeout=5)
    assert result.pending == ("s",)


async def test_sessions_left_by_aclose_are_compacted_on_their_next_turn(
    store: HistoryStore,
) -> None:
    """What a bounded close leaves undone is what a crash leaves: the next turn's after
    phase compacts the whole active context, the turns left behind included."""
    hung = _provider(store, FakeSummarizer(delay=3600), compaction="deferred")
    for i in range(3):
        await hung.save_turn("s", _turn(i), end_of_turn=True)
    result = await hung.aclose(timeout=0.05)
    assert result.pending == ("s",)
    assert await store.audit("s") == []
    left = [m.message_id for m in await store.history("s")]
    restarted = _provider(store, FakeSummarizer(), compaction="deferred")
    await restarted.save_turn("s", _turn(3), end_of_turn=True)
    assert (await restarted.aclose()).complete
    [event] = await store.audit("s")
    summarized = {g for groups in event.summarized.values() for g in groups}
    stored = {m.message_id: m.group_id for m in await store.history("s", include_excluded=True)}
    assert {stored[m] for m in left} <= summarized
