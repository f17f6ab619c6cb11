"""In-memory stores share records through a :class:`~store.memory.MemoryDatabase`, as two
SQL stores share a database: :meth:`for_tenant`, or the same database given again."""

from __future__ import annotations

import pytest

from store.errors import SessionNotFound
from store.memory import InMemoryHistoryStore
from tests.conformance.toy_strategies import TOKENIZER
from tests.groups.conversations import user


async def test_a_store_for_another_tenant_shares_the_database() -> None:
    store = InMemoryHistoryStore(tokenizer=TOKENIZER)
    other = store.for_tenant("acme")
    assert other.database is store.database and other.tenant == "acme"
    assert other.tokenizer is store.tokenizer and other.policy == store.policy
    await other.append("s", [user("x", "hi")])
    again = InMemoryHistoryStore(store.database, tenant="acme", tokenizer=TOKENIZER)
    assert [m.message_id for m in await again.history("s")] == ["x"]
    with pytest.raises(SessionNotFound):
        await store.history("s")
