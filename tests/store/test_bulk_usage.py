"""The importer's bulk path of usage (``record_usages``): many sessions' calls in one
write, call ids recorded already (or twice in one batch) skipped, nothing paired."""

from __future__ import annotations

import pytest

from store.contract import is_bulk_usage_backend
from store.errors import InvalidInput
from store.sql.store import HistoryStore
from store.usage import Usage
from tests.groups.conversations import assistant, user


async def test_many_sessions_calls_go_in_one_write(store: HistoryStore) -> None:
    assert is_bulk_usage_backend(store)
    await store.append("a", [user("u1", "hi"), assistant("a1", "hello")])
    await store.record_usage("a", Usage(model="m", input_tokens=1), call_id="live")
    await store.context("a")  # a projection the bulk path must leave unpaired
    recorded = await store.record_usages(
        [
            ("a", Usage(model="m", input_tokens=10), "a1", "import:a1"),
            ("a", Usage(model="m", input_tokens=11), "a1", "live"),  # recorded already
            ("b", Usage(model="n", input_tokens=20, output_tokens=2), None, "import:b1"),
            ("b", Usage(model="n", input_tokens=21), None, "import:b1"),  # twice here
            ("b", Usage(model="n", input_tokens=22), None, None),
        ]
    )
    assert recorded == 3
    a = await store.usage_calls("a")
    assert [(c.seq, c.call_id, c.message_id, c.after_seq, c.local_tokens) for c in a] == [
        (1, "live", None, 2, None),
        (2, "import:a1", "a1", 2, None),
    ]
    b = await store.usage_calls("b")
    assert [(c.seq, c.call_id, c.usage.input_tokens, c.after_seq) for c in b] == [
        (1, "import:b1", 20, None),
        (2, None, 22, None),
    ]
    assert await store.record_usages([]) == 0
    # the projection noted before is still the next live call's
    await store.record_usage("a", Usage(model="m", input_tokens=30))
    assert (await store.usage_calls("a"))[-1].local_tokens is not None


async def test_a_bad_call_refuses_the_whole_batch(store: HistoryStore) -> None:
    with pytest.raises(InvalidInput):
        await store.record_usages(
            [("a", Usage(input_tokens=1), None, None), ("b", "not usage", None, None)]  # type: ignore[list-item]
        )
    assert await store.usage_calls("a") == []
