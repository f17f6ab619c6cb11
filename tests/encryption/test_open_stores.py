"""Stores that stay open while a key job runs, on SQLite and PostgreSQL: a keyed store
opened before a rotation of the data key keeps writing rows that stay readable (and the
next rotation seals them again), and a store opened in clear before ``encrypt_tenant``
may not write texts in clear into the tenant afterwards."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from store import HistoryStore
from store.encryption import KeyRing, encrypt_tenant, rotate_tenant_key
from store.errors import CorruptRowError, KeyRequired
from strategies.messages import Message, TextContent
from tests.encryption.support import TENANT, raw, sealed_texts
from tests.sealing import MemoryKeyProvider


def _open(url: str, ring: KeyRing | None) -> Any:
    return HistoryStore.open(url, tenant=TENANT, encryption=ring)


def _turn(n: int) -> list[Message]:
    return [
        Message(role="user", message_id=f"u{n}", contents=[TextContent(text=f"ask {n}")]),
        Message(role="assistant", message_id=f"a{n}", contents=[TextContent(text=f"say {n}")]),
    ]


async def _current_key(url: str) -> str:
    async with raw(url) as conn:
        query = text("SELECT current_key FROM chatledger_tenant_keys WHERE tenant = :t")
        return str((await conn.execute(query, {"t": TENANT})).scalar_one())


async def _keys_sealing(url: str) -> set[str]:
    return {t.split(".", 2)[1] for t in await sealed_texts(url)}


async def test_a_store_open_across_a_rotation_writes_rows_that_stay_readable(
    db_url: str,
) -> None:
    provider = MemoryKeyProvider()
    async with _open(db_url, KeyRing(provider)) as early:
        await early.append("s", _turn(1))
        first = await _current_key(db_url)
        await rotate_tenant_key(db_url, tenant=TENANT, encryption=KeyRing(provider))
        second = await _current_key(db_url)
        assert second != first
        # the early store reads what the rotation sealed again under a key it had not
        # read: it reads the tenant's keys again, and seals under the new one from then
        assert [m.message_id for m in await early.context("s")] == ["u1", "a1"]
        assert [m.message.message_id for m in await early.history("s")] == ["u1", "a1"]
        await early.append("s", _turn(2))
        await early.set_title("s", "written by the early store")
    async with _open(db_url, KeyRing(provider)) as late:
        history = await late.history("s")
        assert [m.message.message_id for m in history] == ["u1", "a1", "u2", "a2"]
        assert (await late.session("s")).title == "written by the early store"
    assert await _keys_sealing(db_url) <= {first, second}
    await rotate_tenant_key(db_url, tenant=TENANT, encryption=KeyRing(provider))
    third = await _current_key(db_url)
    assert await _keys_sealing(db_url) == {third}
    async with _open(db_url, KeyRing(provider)) as last:
        assert [m.message.message_id for m in await last.history("s")] == [
            "u1",
            "a1",
            "u2",
            "a2",
        ]


async def test_what_a_store_opened_in_clear_writes_after_encrypt_is_sealed_again(
    db_url: str,
) -> None:
    """A store opened without the key before ``encrypt`` reads the mark only when it
    opens (``docs/encryption.md``): its later appends are stored in clear. A store with
    the key refuses such a row (it never reads clear text as sealed), and running
    ``encrypt`` again seals it; then every row reads."""
    ring = KeyRing(MemoryKeyProvider())
    async with _open(db_url, None) as plain:
        await plain.append("s", _turn(1))
        await encrypt_tenant(db_url, tenant=TENANT, encryption=ring)
        with pytest.raises(KeyRequired):
            await plain.history("s")
        await plain.append("s", _turn(2))  # the documented limit: written in clear
    async with _open(db_url, ring) as keyed:
        with pytest.raises(CorruptRowError, match="not sealed, in an encrypted tenant"):
            await keyed.history("s")
    swept = await encrypt_tenant(db_url, tenant=TENANT, encryption=ring)
    assert swept.rows == 2  # the two rows of the second turn
    assert all(t.startswith('"cl1.') for t in await sealed_texts(db_url))
    async with _open(db_url, ring) as keyed:
        ids = [m.message.message_id for m in await keyed.history("s")]
        assert ids == ["u1", "a1", "u2", "a2"]
