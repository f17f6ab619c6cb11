"""A compaction planned on the store's cache, without a read, where the store wrote or
read the session last (PostgreSQL, where the write is one statement gated on the
session's revision).

The cache may be behind the database: another writer may have written since. Each case
here makes one write so, and checks that the compaction does what one planned on a read
does: a plan that writes is gated and, when the gate does not hold, made good from a
read; a plan that writes nothing, a dry run, is confirmed by a read and made again on
it; a compaction request is honoured.
"""

from __future__ import annotations

from typing import Any

import pytest

from store import HistoryStore
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conformance.toy_strategies import ExcludeGroup, ExcludeOldest
from tests.groups.conversations import assistant, user
from tests.store.test_round_trips import _counting, sent_statements

pytestmark = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)]
)


def _turn(prefix: str) -> list[Message]:
    return [user(f"{prefix}u", f"question {prefix}"), assistant(f"{prefix}a", f"answer {prefix}")]


def _sent(seen: list[str]) -> list[str]:
    """The statements of ``seen``, each by its first words."""
    return [" ".join(e.split()[:3]) for e in sent_statements(seen)]


async def _compacted(store: HistoryStore, strategy: Any) -> tuple[Any, list[str]]:
    with _counting(store) as seen:
        event = await store.compact("s", strategy, phase="after_run")
    return event, _sent(seen)


async def _same_as_a_fresh_store(db_url: str, context: list[str]) -> None:
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as fresh:
        assert [m.message_id for m in await fresh.context("s")] == context
        assert (await fresh.doctor("s")).findings == ()


async def _held(store: HistoryStore) -> None:
    """Two turns, a view between them: the store's cache holds the session whole, its
    row as the second append wrote it."""
    await store.append("s", _turn("t0"))
    await store.context("s")
    await store.append("s", _turn("t1"))


def _stores(db_url: str) -> tuple[Any, Any]:
    tokenizer = CharacterEstimatorTokenizer()
    return (
        HistoryStore.open(db_url, tokenizer=tokenizer),
        HistoryStore.open(db_url, tokenizer=tokenizer),
    )


async def test_a_plan_on_the_cache_is_one_statement(db_url: str) -> None:
    mine, _ = _stores(db_url)
    async with mine as store:
        await _held(store)
        event, sent = await _compacted(store, ExcludeOldest(1))
        assert event is not None and event.excluded == ("group_t0u",)
        assert sent == ["bind_execute: WITH written_session"], sent
        context = [m.message_id for m in await store.context("s")]
    assert context == ["t0a", "t1u", "t1a"]
    await _same_as_a_fresh_store(db_url, context)


async def test_a_plan_on_a_cache_another_writer_moved_lands_after_it(db_url: str) -> None:
    mine, theirs = _stores(db_url)
    async with mine as store, theirs as other:
        await _held(store)
        await other.append("s", _turn("o1"))  # the cache is one revision behind
        event, sent = await _compacted(store, ExcludeOldest(1))
        # the other's append is of the write chain and wrote no group the plan reads:
        # the statement planned on the cache lands after it
        assert sent == ["bind_execute: WITH written_session"], sent
        assert event is not None and event.excluded == ("group_t0u",)
        context = [m.message_id for m in await store.context("s")]
    assert context == ["t0a", "t1u", "t1a", "o1u", "o1a"]
    await _same_as_a_fresh_store(db_url, context)


async def test_a_plan_on_the_cache_another_writer_carried_out_is_read_done(
    db_url: str,
) -> None:
    mine, theirs = _stores(db_url)
    async with mine as store, theirs as other:
        await _held(store)
        assert await other.compact("s", ExcludeOldest(1)) is not None  # the same plan
        event, sent = await _compacted(store, ExcludeOldest(1))
        # the statement planned on the cache writes nothing (a group it reads was written
        # since); the read without a lock finds the plan carried out: nothing written
        assert event is None, sent
        assert sent[0] == "bind_execute: WITH written_session", sent
        assert sent[1].startswith("bind_execute: SELECT"), sent
        assert "bind_execute: WITH written_session" not in sent[1:], sent
        assert [e.outcome for e in await store.audit("s")] == ["applied"]  # the other's
        context = [m.message_id for m in await store.context("s")]
    assert context == ["t0a", "t1u", "t1a"]
    await _same_as_a_fresh_store(db_url, context)


async def test_a_plan_that_writes_nothing_is_confirmed_by_a_read(db_url: str) -> None:
    mine, theirs = _stores(db_url)
    async with mine as store, theirs as other:
        await _held(store)
        # nothing to exclude in what the cache holds: the read that confirms it finds
        # the other's append, and the plan made again on that read excludes its group
        await other.append("s", _turn("o1"))
        event, sent = await _compacted(store, ExcludeGroup("group_o1u"))
        assert event is not None and event.excluded == ("group_o1u",), sent
        assert sent[0].startswith("bind_execute: SELECT"), sent
        # nothing to exclude, confirmed: one read, nothing written
        event, sent = await _compacted(store, ExcludeGroup("group_gone"))
        assert event is None and len(sent) == 1 and sent[0].startswith("bind_execute: SELECT")
        context = [m.message_id for m in await store.context("s")]
    assert context == ["t0u", "t0a", "t1u", "t1a", "o1a"]
    await _same_as_a_fresh_store(db_url, context)


async def test_a_dry_run_plans_on_what_is_stored(db_url: str) -> None:
    mine, theirs = _stores(db_url)
    async with mine as store, theirs as other:
        await _held(store)
        await other.append("s", _turn("o1"))
        planned = await store.compact("s", ExcludeGroup("group_o1u"), dry_run=True)
        assert isinstance(planned, ChangeSet)
        assert [e.group_id for e in planned.exclusions] == ["group_o1u"]


async def test_a_request_another_store_made_is_honoured(db_url: str) -> None:
    chat = [m for n in range(6) for m in _turn(f"t{n}")]
    mine, theirs = _stores(db_url)
    async with mine as store, theirs as other:
        await store.append("s", chat)
        await store.context("s")
        await store.append("s", _turn("t6"))
        fake = FakeSummarizer()
        quiet = SummarizationStrategy(client=fake, target_count=4, threshold=100)
        # the request leaves the session's revision as it was: the cache's row lacks
        # it, the plan on the cache writes nothing, and the read that confirms it has it
        await other.request_compaction("s", reason="model_requested")
        event = await store.compact("s", quiet, phase="after_run")
        assert event is not None and event.reason == "model_requested"
        # consumed: the row the cache holds is not the one with the request
        assert await store.compact("s", quiet, phase="after_run") is None
        await store.append("s", [m for n in range(7, 10) for m in _turn(f"t{n}")])
        assert await store.compact("s", quiet, phase="after_run") is None  # no trigger
        await store.request_compaction("s", reason="again")  # this store's own request
        event = await store.compact("s", quiet, phase="after_run")
        assert event is not None and event.reason == "again"
        assert await store.compact("s", quiet, phase="after_run") is None
