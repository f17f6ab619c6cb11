"""Projections on the SQL store: active groups, pending messages, the token-count cache.

The in-memory store's projection tests run here unchanged against the SQL store.
"""

from __future__ import annotations

from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidInput
from store.memory import InMemoryHistoryStore
from strategies.tokenizers import CharacterEstimatorTokenizer, CountingTokenizer
from tests.conformance.toy_strategies import TOKENIZER, ExcludeOldest
from tests.groups.conversations import assistant, call, reasoning, result, system, tool, user
from tests.memory.test_context import (  # noqa: F401
    _stored,
    test_cache_is_keyed_by_content,
    test_context_equals_view_projection,
    test_context_of_unknown_session_is_the_pending_messages,
    test_pending_call_after_last_user_is_sent,
    test_pending_result_joins_stored_call,
    test_pending_with_a_stored_id_and_other_content_raises,
    test_strategy_applies_to_the_projection_only,
)
from tests.store.parity import observed


async def test_pending_counts_are_cached_for_the_append(db_url: str) -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    async with HistoryStore.open(db_url, tokenizer=counting) as store:
        await store.append("s", _stored())
        pending = [tool("t1", result("c1", "a long result " * 20)), assistant("a2", "done")]
        counting.reset()
        await store.context("s", pending=pending)
        counted = counting.calls
        assert counted > 0
        await store.context("s", pending=pending)  # the run's second model call
        assert counting.calls == counted
        await store.append("s", pending)
        assert counting.calls == counted  # appended with the cached counts
        await store.context("s", pending=[assistant("a3", "other")])
        assert counting.calls > counted
        stored = [m.token_count for m in await store.history("s")]
    fresh = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())
    await fresh.append("s", [*_stored(), *pending])
    assert stored == [m.token_count for m in await fresh.history("s")]


async def test_pending_messages_in_a_new_session_are_counted_once(db_url: str) -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    async with HistoryStore.open(db_url, tokenizer=counting) as store:
        pending = [user("u1", "hello"), assistant("a1", "hi there")]
        assert await store.context("new", pending=pending) == pending
        counted = counting.calls
        await store.append("new", pending)
        assert counting.calls == counted
        assert [m.message_id for m in await store.history("new")] == ["u1", "a1"]


def _merging_chat() -> list[Any]:
    return [
        system("sys", "be brief"),
        user("u1", "two lookups"),
        assistant("r1", reasoning("thinking")),
        assistant("a1", call("c1", "one")),
        assistant("a2", call("c2", "two")),
        user("u2", "next"),
        assistant("b1", "ok"),
    ]


@pytest.mark.parametrize(
    "late",
    [
        [tool("t12", result("c1", "r1"), result("c2", "r2"))],
        [tool("t1", result("c1", "r1")), tool("t2", result("c2", "r2"))],
    ],
)
async def test_pending_and_late_results_with_excluded_groups_match_memory(
    store: HistoryStore, late: list[Any]
) -> None:
    """Late results joining (and merging) excluded and active groups, as memory does."""
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for target in (store, memory):
        await target.append("s", _merging_chat())
        await target.compact("s", ExcludeOldest(2))
    assert await store.context("s", pending=late) == await memory.context("s", pending=late)
    for target in (store, memory):
        await target.append("s", late)
    assert await observed(store, "s") == await observed(memory, "s")


async def test_context_of_a_missing_session_rejects_conflicting_pending(
    store: HistoryStore,
) -> None:
    with pytest.raises(InvalidInput):
        await store.context("none", pending=[user("u1", "a"), user("u1", "b")])
    with pytest.raises(InvalidInput):
        await store.context("none", pending=[object()])  # type: ignore[list-item]
