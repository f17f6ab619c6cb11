"""The in-memory store takes ``encryption=`` as the SQL store does: nothing is at rest,
so nothing is sealed, but the tenant is marked and refused alike, and not searched."""

from __future__ import annotations

import pytest

from store.encryption import KeyRing
from store.errors import InvalidInput, KeyRequired, PlaintextRows, WrongKey
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.sealing import MemoryKeyProvider

TOKENIZER = CharacterEstimatorTokenizer()


def _store(db: MemoryDatabase, ring: KeyRing | None, tenant: str = "acme") -> InMemoryHistoryStore:
    return InMemoryHistoryStore(db, tenant=tenant, tokenizer=TOKENIZER, encryption=ring)


async def test_a_keyed_store_marks_its_tenant_and_others_are_refused_as_in_sql() -> None:
    db, provider = MemoryDatabase(), MemoryKeyProvider()
    keyed = _store(db, KeyRing(provider))
    await keyed.append("s", [Message.text_message("user", "hello", message_id="m1")])
    assert [m.message.text for m in await _store(db, KeyRing(provider)).history("s")] == ["hello"]
    with pytest.raises(KeyRequired, match="tenant 'acme' is encrypted"):
        _store(db, None)
    with pytest.raises(WrongKey):
        _store(db, KeyRing(provider.rotated()))
    with pytest.raises(InvalidInput, match="encrypted"):
        await keyed.search("hello")
    assert _store(db, None, tenant="other").tenant == "other"  # other tenants stay open


async def test_a_tenant_stored_in_clear_is_refused_with_a_key() -> None:
    db = MemoryDatabase()
    plain = _store(db, None)
    await plain.append("s", [Message.text_message("user", "hello", message_id="m1")])
    with pytest.raises(PlaintextRows, match="stored in clear"):
        _store(db, KeyRing(MemoryKeyProvider()))
    with pytest.raises(InvalidInput, match="KeyRing"):
        _store(db, "not a key ring")  # type: ignore[arg-type]
