"""The before-call projection: active groups plus pending messages, persisting nothing."""

from __future__ import annotations

import pytest

from store.errors import InvalidInput
from store.memory import InMemoryHistoryStore
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer, CountingTokenizer
from strategies.view import View
from tests.conformance.toy_strategies import ExcludeOldest, SummarizeOldest
from tests.groups.conversations import assistant, call, result, system, tool, user
from tests.strategies.invariants import assert_projection_invariants


def _stored() -> list[Message]:
    return [
        system("sys", "be brief"),
        user("u1", "weather?"),
        assistant("a1", call("c1", "weather")),
    ]


async def test_pending_result_joins_stored_call(store: InMemoryHistoryStore) -> None:
    await store.append("s", _stored())
    pending = [tool("t1", result("c1", "sunny")), assistant("a2", "it is sunny")]
    sent = await store.context("s", pending=pending)
    assert [m.message_id for m in sent] == ["sys", "u1", "a1", "t1", "a2"]
    assert_projection_invariants(sent)
    # nothing persisted
    assert [m.message_id for m in await store.history("s")] == ["sys", "u1", "a1"]
    assert (await store.session("s")).revision == 1


async def test_pending_call_after_last_user_is_sent(store: InMemoryHistoryStore) -> None:
    await store.append("s", _stored()[:2])
    sent = await store.context("s", pending=[assistant("a1", call("c1", "weather"))])
    assert [m.message_id for m in sent] == ["sys", "u1", "a1"]  # the in-flight tail


async def test_context_of_unknown_session_is_the_pending_messages(
    store: InMemoryHistoryStore,
) -> None:
    assert await store.context("nope") == []
    sent = await store.context("nope", pending=[user("u1", "hi")])
    assert [m.message_id for m in sent] == ["u1"]
    assert await store.sessions() == []


async def test_strategy_applies_to_the_projection_only(store: InMemoryHistoryStore) -> None:
    await store.append("s", [*_stored(), tool("t1", result("c1", "x")), user("u2", "next")])
    pending = [assistant("a2", "answer")]
    sent = await store.context("s", strategy=ExcludeOldest(1), pending=pending)
    assert [m.message_id for m in sent] == ["sys", "a1", "t1", "u2", "a2"]
    assert await store.audit("s") == [] and await store.excluded("s") == []
    summarized = await store.context("s", strategy=SummarizeOldest(2))
    assert [m.role for m in summarized] == ["system", "assistant", "user"]


async def test_context_equals_view_projection(store: InMemoryHistoryStore) -> None:
    await store.append("s", [*_stored(), tool("t1", result("c1", "x")), user("u2", "next")])
    await store.compact("s", SummarizeOldest(2))
    view = await store.view("s")
    assert isinstance(view, View)
    assert await store.context("s") == await view.project()


async def test_pending_counts_are_cached_for_the_append() -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    store = InMemoryHistoryStore(tokenizer=counting)
    await store.append("s", _stored())
    pending = [tool("t1", result("c1", "a long result " * 20)), assistant("a2", "done")]
    counting.reset()
    await store.context("s", pending=pending)
    counted = counting.calls
    assert counted > 0
    await store.context("s", pending=pending)  # second model call of the same run
    assert counting.calls == counted
    await store.append("s", pending)
    assert counting.calls == counted  # appended with the cached counts
    changed = assistant("a3", "other")
    await store.context("s", pending=[changed])
    assert counting.calls > counted
    # the counts stored are the tokenizer's counts
    fresh = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())
    await fresh.append("s", [*_stored(), *pending])
    assert [m.token_count for m in await store.history("s")] == [
        m.token_count for m in await fresh.history("s")
    ]


async def test_cache_is_keyed_by_content(store: InMemoryHistoryStore) -> None:
    await store.append("s", _stored())
    await store.context("s", pending=[assistant("a2", "short")])
    await store.append("s", [assistant("a2", "a much longer text than before " * 5)])
    stored = (await store.history("s"))[-1]
    fresh = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())
    await fresh.append("s", [assistant("a2", "a much longer text than before " * 5)])
    assert stored.token_count == (await fresh.history("s"))[0].token_count


async def test_cache_is_bounded() -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    store = InMemoryHistoryStore(tokenizer=counting, pending_cache_size=2)
    pending = [user(f"u{i}", f"text {i}") for i in range(4)]
    await store.context("s", pending=pending)
    counting.reset()
    await store.append("s", pending)
    assert counting.calls == 2  # the two oldest counts were evicted


async def test_pending_with_a_stored_id_and_other_content_raises(
    store: InMemoryHistoryStore,
) -> None:
    await store.append("s", _stored())
    with pytest.raises(InvalidInput):
        await store.context("s", pending=[user("u1", "changed")])
    sent = await store.context("s", pending=[user("u1", "weather?")])  # same: ignored
    assert [m.message_id for m in sent] == ["sys", "u1", "a1"]
