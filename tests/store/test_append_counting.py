"""A large append counts its new messages in a worker thread: same counts, each once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from sqlalchemy import text

from store import HistoryStore
from store.errors import InvalidInput
from store.sql.append import counting
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
)
from strategies.tokenizers import TiktokenTokenizer, count_message_tokens, message_texts


class SpyTokenizer(TiktokenTokenizer):
    """tiktoken, recording each text counted and the thread that counted it."""

    def __init__(self) -> None:
        super().__init__("o200k_base")
        self.batched: list[str] = []
        self.single: list[str] = []
        self.threads: set[str] = set()

    def count_many(self, texts: Sequence[str]) -> list[int]:
        import threading

        self.threads.add(threading.current_thread().name)
        self.batched += texts
        return super().count_many(texts)

    def count_tokens(self, text: str) -> int:
        self.single.append(text)
        return super().count_tokens(text)

    def reset(self) -> None:
        self.batched.clear()
        self.single.clear()
        self.threads.clear()


def _conversation(prefix: str, turns: int) -> list[Message]:
    messages: list[Message] = []
    for turn in range(turns):
        messages += [
            Message(
                role="user",
                message_id=f"{prefix}-u{turn}",
                contents=[TextContent(text=f"question {turn}: " + "why is the sky blue? " * 30)],
            ),
            Message(
                role="assistant",
                message_id=f"{prefix}-c{turn}",
                contents=[
                    FunctionCallContent(
                        call_id=f"{prefix}-call{turn}",
                        name="search",
                        arguments={"query": f"sky {turn}", "limit": 3},
                    )
                ],
            ),
            Message(
                role="tool",
                message_id=f"{prefix}-r{turn}",
                contents=[
                    FunctionResultContent(
                        call_id=f"{prefix}-call{turn}", result="Rayleigh scattering. " * 60
                    )
                ],
            ),
            Message(
                role="assistant",
                message_id=f"{prefix}-a{turn}",
                author_name="helper",
                contents=[TextContent(text=f"answer {turn}: " + "short light scatters. " * 20)],
            ),
        ]
    return messages


def _texts(messages: Sequence[Message]) -> list[str]:
    return [t for m in messages for t in message_texts(m)[1]]


@pytest.fixture
async def spied(db_url: str) -> AsyncIterator[tuple[HistoryStore, SpyTokenizer]]:
    tokenizer = SpyTokenizer()
    async with HistoryStore.open(db_url, tokenizer=tokenizer) as store:
        yield store, tokenizer


async def _stored_counts(store: HistoryStore, session_id: str) -> dict[str, int]:
    async with store.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT message_id, token_count FROM chatledger_messages "
                "WHERE session_id = :s ORDER BY seq"
            ),
            {"s": session_id},
        )
        return {row[0]: row[1] for row in rows}


async def test_large_append_counts_in_the_worker_thread_each_text_once(
    spied: tuple[HistoryStore, SpyTokenizer],
) -> None:
    store, tokenizer = spied
    messages = _conversation("a", 150)  # 600 messages, several slices
    assert sum(map(len, _texts(messages))) >= counting.THREAD_MIN_CHARS
    await store.append("s", messages)
    assert tokenizer.threads == {"chatledger-tokens_0"}
    assert sorted(tokenizer.batched) == sorted(_texts(messages))
    assert tokenizer.single == []
    reference = TiktokenTokenizer()
    expected = {m.message_id: count_message_tokens(m, reference) for m in messages}
    assert await _stored_counts(store, "s") == expected
    stats = await store.stats("s")
    assert stats.stored_tokens == sum(expected.values())


async def test_small_append_counts_inline(spied: tuple[HistoryStore, SpyTokenizer]) -> None:
    store, tokenizer = spied
    messages = _conversation("b", 2)
    await store.append("s", messages)
    assert tokenizer.batched == []
    assert sorted(tokenizer.single) == sorted(_texts(messages))


async def test_replayed_messages_are_not_counted_again(
    spied: tuple[HistoryStore, SpyTokenizer],
) -> None:
    store, tokenizer = spied
    first, second = _conversation("c", 100), _conversation("d", 100)
    await store.append("s", first)
    tokenizer.reset()
    await store.append("s", [*first, *second, *second[:10]])
    assert sorted(tokenizer.batched + tokenizer.single) == sorted(_texts(second))
    counts = await _stored_counts(store, "s")
    assert len(counts) == len(first) + len(second)


async def test_counts_held_for_pending_messages_are_taken_not_recounted(
    spied: tuple[HistoryStore, SpyTokenizer],
) -> None:
    store, tokenizer = spied
    messages = _conversation("e", 150)
    pending = messages[-4:]
    await store.context("s", pending=pending)
    assert sorted(tokenizer.single) == sorted(_texts(pending))
    tokenizer.reset()
    await store.append("s", messages)
    assert sorted(tokenizer.batched) == sorted(_texts(messages[:-4]))
    assert tokenizer.single == []
    reference = TiktokenTokenizer()
    counts = await _stored_counts(store, "s")
    assert counts == {m.message_id: count_message_tokens(m, reference) for m in messages}


async def test_a_refused_append_stores_nothing_and_leaves_no_error_behind(
    spied: tuple[HistoryStore, SpyTokenizer], caplog: pytest.LogCaptureFixture
) -> None:
    store, _ = spied
    messages = _conversation("f", 150)
    clash = messages[0].model_copy(update={"contents": [TextContent(text="other")]})
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    try:
        with pytest.raises(InvalidInput, match="appears twice"):
            await store.append("s", [*messages, clash])
        await asyncio.sleep(0.2)  # the worker finishes the slices it was given
        import gc

        gc.collect()  # a future whose error was never retrieved reports when collected
    finally:
        loop.set_exception_handler(None)
    assert errors == []
    assert await _stored_counts(store, "s") == {}
    await store.append("s", messages)
    assert len(await _stored_counts(store, "s")) == len(messages)


def test_a_forked_process_gets_its_own_counting_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(counting, "_executor", counting._executor)  # restored after
    first = counting._worker()
    assert counting._worker() is first
    monkeypatch.setattr(counting.os, "getpid", lambda: -1)  # as in a child after fork
    second = counting._worker()
    assert second is not first
    assert second.submit(sum, [1, 2]).result(timeout=10) == 3
    second.shutdown()
