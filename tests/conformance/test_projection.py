"""The before-call projection: active groups plus pending messages, persisting nothing;
the token counts of pending messages cached for their append."""

from __future__ import annotations

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput
from strategies.messages import Message
from strategies.tokenizers import (
    CharacterEstimatorTokenizer,
    CountingTokenizer,
    count_message_tokens,
)
from strategies.view import View
from tests.conformance.conftest import Stores
from tests.conformance.toy_strategies import TOKENIZER, ExcludeOldest, SummarizeOldest
from tests.groups.conversations import assistant, call, result, system, tool, user
from tests.strategies.invariants import assert_projection_invariants


def _stored() -> list[Message]:
    return [
        system("sys", "be brief"),
        user("u1", "weather?"),
        assistant("a1", call("c1", "weather")),
    ]


async def test_pending_result_joins_stored_call(store: HistoryBackend) -> None:
    await store.append("s", _stored())
    pending = [tool("t1", result("c1", "sunny")), assistant("a2", "it is sunny")]
    sent = await store.context("s", pending=pending)
    assert [m.message_id for m in sent] == ["sys", "u1", "a1", "t1", "a2"]
    assert_projection_invariants(sent)
    # nothing persisted
    assert [m.message_id for m in await store.history("s")] == ["sys", "u1", "a1"]
    assert (await store.session("s")).revision == 1


async def test_pending_call_after_last_user_is_sent(store: HistoryBackend) -> None:
    await store.append("s", _stored()[:2])
    sent = await store.context("s", pending=[assistant("a1", call("c1", "weather"))])
    assert [m.message_id for m in sent] == ["sys", "u1", "a1"]  # the in-flight tail


async def test_context_of_unknown_session_is_the_pending_messages(
    store: HistoryBackend,
) -> None:
    assert await store.context("nope") == []
    sent = await store.context("nope", pending=[user("u1", "hi")])
    assert [m.message_id for m in sent] == ["u1"]
    assert await store.sessions() == []


async def test_strategy_applies_to_the_projection_only(store: HistoryBackend) -> None:
    await store.append("s", [*_stored(), tool("t1", result("c1", "x")), user("u2", "next")])
    pending = [assistant("a2", "answer")]
    sent = await store.context("s", strategy=ExcludeOldest(1), pending=pending)
    assert [m.message_id for m in sent] == ["sys", "a1", "t1", "u2", "a2"]
    assert await store.audit("s") == [] and await store.excluded("s") == []
    summarized = await store.context("s", strategy=SummarizeOldest(2))
    assert [m.role for m in summarized] == ["system", "assistant", "user"]


async def test_context_equals_view_projection(store: HistoryBackend) -> None:
    await store.append("s", [*_stored(), tool("t1", result("c1", "x")), user("u2", "next")])
    await store.compact("s", SummarizeOldest(2))
    view = await store.view("s")
    assert isinstance(view, View)
    assert await store.context("s") == await view.project()


async def test_pending_with_a_stored_id_and_other_content_raises(
    store: HistoryBackend,
) -> None:
    await store.append("s", _stored())
    with pytest.raises(InvalidInput):
        await store.context("s", pending=[user("u1", "changed")])
    sent = await store.context("s", pending=[user("u1", "weather?")])  # same: ignored
    assert [m.message_id for m in sent] == ["sys", "u1", "a1"]


async def test_pending_counts_are_cached_for_the_append(stores: Stores) -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    store = await stores.open(tokenizer=counting)
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
    reference = CharacterEstimatorTokenizer()
    assert [m.token_count for m in await store.history("s")] == [
        count_message_tokens(m, reference) for m in [*_stored(), *pending]
    ]


async def test_pending_messages_in_a_new_session_are_counted_once(stores: Stores) -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    store = await stores.open(tokenizer=counting)
    pending = [user("u1", "hello"), assistant("a1", "hi there")]
    assert await store.context("new", pending=pending) == pending
    counted = counting.calls
    await store.append("new", pending)
    assert counting.calls == counted
    assert [m.message_id for m in await store.history("new")] == ["u1", "a1"]


async def test_cache_is_keyed_by_content(store: HistoryBackend) -> None:
    await store.append("s", _stored())
    await store.context("s", pending=[assistant("a2", "short")])
    longer = assistant("a2", "a much longer text than before " * 5)
    await store.append("s", [longer])
    stored = (await store.history("s"))[-1]
    assert stored.token_count == count_message_tokens(longer, TOKENIZER)


async def test_context_of_a_missing_session_rejects_conflicting_pending(
    store: HistoryBackend,
) -> None:
    with pytest.raises(InvalidInput):
        await store.context("none", pending=[user("u1", "a"), user("u1", "b")])
    with pytest.raises(InvalidInput):
        await store.context("none", pending=[object()])  # type: ignore[list-item]
    assert await store.sessions() == []
