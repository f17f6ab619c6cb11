"""A compaction after another store wrote the session, which this store's view cache
does not know of (PostgreSQL, where the write is one statement gated on the session's
revision): the plan is made on what is stored, and written as one made by the only
writer would be. Checked against a store that opens the session afresh."""

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


async def _two_turns(store: HistoryStore) -> None:
    """Two turns, a view between them: the store's cache holds the session whole, as
    the second append wrote it."""
    await store.append("s", _turn("t0"))
    await store.context("s")
    await store.append("s", _turn("t1"))


def _stores(db_url: str) -> tuple[Any, Any]:
    tokenizer = CharacterEstimatorTokenizer()
    return (
        HistoryStore.open(db_url, tokenizer=tokenizer),
        HistoryStore.open(db_url, tokenizer=tokenizer),
    )


async def test_a_plan_after_another_stores_append_is_made_on_it(db_url: str) -> None:
    mine, theirs = _stores(db_url)
    async with mine as store, theirs as other:
        await _two_turns(store)
        await other.append("s", _turn("o1"))  # the cache is one revision behind
        event, sent = await _compacted(store, ExcludeOldest(1))
        assert sent[-1] == "bind_execute: WITH written_session", sent  # one statement
        assert event is not None and event.excluded == ("group_t0u",)
        context = [m.message_id for m in await store.context("s")]
    assert context == ["t0a", "t1u", "t1a", "o1u", "o1a"]
    await _same_as_a_fresh_store(db_url, context)


async def test_a_plan_after_another_stores_compaction_plans_on_it(
    db_url: str,
) -> None:
    mine, theirs = _stores(db_url)
    async with mine as store, theirs as other:
        await _two_turns(store)
        assert await other.compact("s", ExcludeOldest(1)) is not None  # the same plan
        event, sent = await _compacted(store, ExcludeOldest(1))
        # the snapshot has the other's compaction: the oldest group left is planned
        assert event is not None and event.excluded == ("group_t0a",), sent
        assert [e.outcome for e in await store.audit("s")] == ["applied", "applied"]
        context = [m.message_id for m in await store.context("s")]
    assert context == ["t1u", "t1a"]
    await _same_as_a_fresh_store(db_url, context)


async def test_a_plan_sees_another_stores_append(db_url: str) -> None:
    mine, theirs = _stores(db_url)
    async with mine as store, theirs as other:
        await _two_turns(store)
        # the group is the other's, which this store's cache does not hold
        await other.append("s", _turn("o1"))
        event, sent = await _compacted(store, ExcludeGroup("group_o1u"))
        assert event is not None and event.excluded == ("group_o1u",), sent
        assert sent[0].startswith("bind_execute: SELECT"), sent
        # nothing to exclude: one read, nothing written
        event, sent = await _compacted(store, ExcludeGroup("group_gone"))
        assert event is None and len(sent) == 1 and sent[0].startswith("bind_execute: SELECT")
        context = [m.message_id for m in await store.context("s")]
    assert context == ["t0u", "t0a", "t1u", "t1a", "o1a"]
    await _same_as_a_fresh_store(db_url, context)


async def test_a_dry_run_plans_on_what_is_stored(db_url: str) -> None:
    mine, theirs = _stores(db_url)
    async with mine as store, theirs as other:
        await _two_turns(store)
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
        # a request leaves the session's revision as it was: the snapshot's read has it
        await other.request_compaction("s", reason="model_requested")
        event = await store.compact("s", quiet, phase="after_run")
        assert event is not None and event.reason == "model_requested"
        # consumed
        assert await store.compact("s", quiet, phase="after_run") is None
        await store.append("s", [m for n in range(7, 10) for m in _turn(f"t{n}")])
        assert await store.compact("s", quiet, phase="after_run") is None  # no trigger
        await store.request_compaction("s", reason="again")  # this store's own request
        event = await store.compact("s", quiet, phase="after_run")
        assert event is not None and event.reason == "again"
        assert await store.compact("s", quiet, phase="after_run") is None
