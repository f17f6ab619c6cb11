"""A tenant's encryption in the database: its mark, its wrapped keys, its key events.

An encrypted tenant has a row in ``chatledger_tenant_keys`` (its mark: ``state`` and
the current data key) and its keys in ``chatledger_keys``, each wrapped by the key
provider (:mod:`store.encryption.sealing`). :func:`open_sealing` is what a store does
when it opens: without a key ring it refuses a marked tenant
(:class:`~store.errors.KeyRequired`); with one, it refuses a tenant whose rows are
still in clear (:class:`~store.errors.PlaintextRows`, until ``chatledger encrypt`` has
sealed them), marks a tenant that holds nothing yet (its first keys made and wrapped),
and returns the tenant's :class:`~store.encryption.sealing.Sealing`.
"""

from __future__ import annotations

import base64
from functools import partial
from typing import TYPE_CHECKING, Final

from sqlalchemy import insert, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store.errors import KeyRequired, PlaintextRows
from store.rules.records import now
from store.sql.drivers.engine import write_connection
from store.sql.schema import EVENTS, KEYS, SESSIONS, TENANT_KEYS

if TYPE_CHECKING:
    from store.encryption.sealing import KeyRing, Sealing, WrappedKey

__all__ = [
    "ENCRYPTED",
    "ENCRYPTING",
    "add_key",
    "holds_rows",
    "mark_tenant",
    "open_sealing",
    "read_keys",
    "read_mark",
    "sealing_of",
]

ENCRYPTED: Final = "encrypted"
"""A tenant whose every text is sealed."""
ENCRYPTING: Final = "encrypting"
"""A tenant ``chatledger encrypt`` is sealing: only that command reads or writes it."""


async def read_mark(conn: AsyncConnection, tenant: str) -> RowMapping | None:
    """The tenant's mark (``state``, ``current_key``), None when it is not encrypted."""
    t = TENANT_KEYS.c
    query = select(t.state, t.current_key).where(t.tenant == tenant)
    return (await conn.execute(query)).mappings().first()


async def read_keys(conn: AsyncConnection, tenant: str) -> list[WrappedKey]:
    """The tenant's wrapped keys."""
    from store.encryption.sealing import WrappedKey

    k = KEYS.c
    query = select(k.key_id, k.purpose, k.kek_id, k.wrapped).where(k.tenant == tenant)
    return [
        WrappedKey(row.key_id, row.purpose, row.kek_id, base64.b64decode(row.wrapped))
        for row in await conn.execute(query)
    ]


async def add_key(conn: AsyncConnection, tenant: str, key: WrappedKey) -> None:
    """Keep ``key`` (wrapped) among the tenant's keys."""
    await conn.execute(
        insert(KEYS).values(
            tenant=tenant,
            key_id=key.key_id,
            purpose=key.purpose,
            kek_id=key.kek_id,
            wrapped=base64.b64encode(key.wrapped).decode("ascii"),
            created_at=now(),
        )
    )


async def holds_rows(conn: AsyncConnection, tenant: str) -> bool:
    """Whether the tenant has any session or event stored (in clear, when unmarked)."""
    for column in (SESSIONS.c.tenant, EVENTS.c.tenant):
        found = await conn.execute(select(column).where(column == tenant).limit(1))
        if found.first() is not None:
            return True
    return False


async def sealing_of(
    conn: AsyncConnection, tenant: str, keyring: KeyRing, mark: RowMapping
) -> Sealing:
    """The tenant's sealing, its keys read and unwrapped."""
    keys = await read_keys(conn, tenant)
    return await keyring.sealing(tenant, keys, str(mark["current_key"]))


async def mark_tenant(conn: AsyncConnection, tenant: str, keyring: KeyRing, state: str) -> None:
    """Mark ``tenant`` (``state``: :data:`ENCRYPTED` for a tenant that holds nothing,
    :data:`ENCRYPTING` for one ``encrypt`` seals), its first data key and hash key made
    and wrapped."""
    data, _ = await keyring.new_key("data")
    hashing, _ = await keyring.new_key("hash")
    stamp = now()
    await conn.execute(
        insert(TENANT_KEYS).values(
            tenant=tenant,
            state=state,
            current_key=data.key_id,
            created_at=stamp,
            updated_at=stamp,
        )
    )
    await add_key(conn, tenant, data)
    await add_key(conn, tenant, hashing)


async def _mark_new(engine: AsyncEngine, tenant: str, keyring: KeyRing) -> None:
    """Mark ``tenant`` encrypted with new keys, unless it holds rows in clear or another
    process marked it first."""
    try:
        async with write_connection(engine) as conn:
            if await read_mark(conn, tenant) is not None:
                return
            if await holds_rows(conn, tenant):
                raise _plaintext(tenant)
            await mark_tenant(conn, tenant, keyring, ENCRYPTED)
    except IntegrityError:  # another process marked it meanwhile: use its keys
        return


def _plaintext(tenant: str) -> PlaintextRows:
    return PlaintextRows(
        f"tenant {tenant!r} is stored in clear: run `chatledger encrypt --tenant {tenant}` "
        "with this key first"
    )


async def open_sealing(engine: AsyncEngine, tenant: str, keyring: KeyRing | None) -> Sealing | None:
    """What a store of ``tenant`` seals with (None: it stores in clear), or the one-line
    refusal of a store that may not open it (see the module docstring)."""
    async with engine.connect() as conn:
        mark = await read_mark(conn, tenant)
    if keyring is None:
        if mark is not None:
            raise KeyRequired(
                f"tenant {tenant!r} is encrypted: open it with its key "
                "(encryption=KeyRing(provider), or --key-file / $CHATLEDGER_KEY_FILE)"
            )
        return None
    if mark is None:
        await _mark_new(engine, tenant, keyring)
        async with engine.connect() as conn:
            mark = await read_mark(conn, tenant)
    if mark is None or mark["state"] != ENCRYPTED:
        if mark is not None:
            raise PlaintextRows(
                f"tenant {tenant!r} is being encrypted and still holds rows in clear: run "
                f"`chatledger encrypt --tenant {tenant}` again to finish"
            )
        raise _plaintext(tenant)  # pragma: no cover - marked just above
    async with engine.connect() as conn:
        sealing = await sealing_of(conn, tenant, keyring, mark)
    sealing.reload = partial(_reload, engine, tenant, keyring, sealing)
    return sealing


async def _reload(engine: AsyncEngine, tenant: str, keyring: KeyRing, sealing: Sealing) -> None:
    """Read the tenant's keys and current key again into ``sealing`` (after a rotation
    another process made: texts sealed under a key this one has not read)."""
    async with engine.connect() as conn:
        mark = await read_mark(conn, tenant)
        if mark is None:
            return
        fresh = await sealing_of(conn, tenant, keyring, mark)
    sealing.learn(fresh.keys, fresh.current)
