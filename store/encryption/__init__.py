"""Encryption at rest (``docs/encryption.md``): a tenant's texts sealed with AES-GCM under
its data key, which a :class:`KeyProvider` wraps, each bound to its place::

    from store.encryption import KeyRing
    from store.encryption.local import LocalKeyProvider

    keys = KeyRing(LocalKeyProvider.from_file("chatledger.keys"))
    async with HistoryStore.open(url, tenant="acme", encryption=keys) as store:
        ...

and the jobs on a database's keys and rows (``chatledger encrypt`` and ``chatledger keys
rotate``), each resumable and recorded as a :class:`KeyEvent`: :func:`encrypt_tenant`,
:func:`rotate_tenant_key`, :func:`rotate_kek`, :func:`key_events`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from store.encryption.provider import KeyProvider
from store.encryption.sealing import KeyRing

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from store.sql.upkeep.encryption import KeyEvent

__all__ = [
    "KeyEvent",
    "KeyProvider",
    "KeyRing",
    "encrypt_tenant",
    "key_events",
    "rotate_kek",
    "rotate_tenant_key",
]

Progress = Callable[[int, int], None]


def __getattr__(name: str) -> object:
    if name == "KeyEvent":  # the model lives with the jobs, which load SQLAlchemy
        from store.sql.upkeep.encryption import KeyEvent

        return KeyEvent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@asynccontextmanager
async def _database(url: str | None) -> AsyncIterator[AsyncEngine]:
    """An engine on an existing, current chatledger database (nothing created)."""
    from store.sql.drivers.engine import create_engine, normalize_url, sqlite_file
    from store.sql.errors import translate_errors
    from store.sql.migrations import check_sqlite_file, ensure_schema

    with translate_errors():
        target = normalize_url(url)
        path = sqlite_file(target)
        if path is not None:
            check_sqlite_file(path, create=False)
        engine = create_engine(target)
    try:
        with translate_errors():
            await ensure_schema(engine, create=False)
            yield engine
    finally:
        await engine.dispose()


def _ring(encryption: object) -> KeyRing:
    if not isinstance(encryption, KeyRing):
        from store.errors import InvalidInput

        raise InvalidInput(f"encryption must be a KeyRing, got {type(encryption).__name__}")
    return encryption


async def encrypt_tenant(
    url: str | None,
    *,
    tenant: str,
    encryption: KeyRing,
    batch_size: int = 500,
    progress: Progress | None = None,
) -> KeyEvent:
    """Seal every text ``tenant`` holds at ``url``, in place, ``batch_size`` rows a
    transaction; run again after an interruption, it continues
    (:mod:`store.sql.upkeep.encryption`)."""
    from store.rules.checks import check_tenant
    from store.sql.upkeep import encryption as jobs

    check_tenant(tenant)
    ring = _ring(encryption)
    async with _database(url) as engine:
        return await jobs.encrypt_tenant(
            engine, tenant=tenant, encryption=ring, batch_size=batch_size, progress=progress
        )


async def rotate_tenant_key(
    url: str | None,
    *,
    tenant: str,
    encryption: KeyRing,
    batch_size: int = 500,
    progress: Progress | None = None,
) -> KeyEvent:
    """Give ``tenant`` a new data key and seal its texts again under it, in batches; reads
    keep working throughout, and run again after an interruption, it continues."""
    from store.rules.checks import check_tenant
    from store.sql.upkeep import encryption as jobs

    check_tenant(tenant)
    ring = _ring(encryption)
    async with _database(url) as engine:
        return await jobs.rotate_tenant_key(
            engine, tenant=tenant, encryption=ring, batch_size=batch_size, progress=progress
        )


async def rotate_kek(
    url: str | None, *, encryption: KeyRing, progress: Progress | None = None
) -> KeyEvent:
    """Rewrap every tenant's keys at ``url`` under the provider's current key."""
    from store.sql.upkeep import encryption as jobs

    ring = _ring(encryption)
    async with _database(url) as engine:
        return await jobs.rotate_kek(engine, encryption=ring, progress=progress)


async def key_events(url: str | None, *, tenant: str | None = None) -> list[KeyEvent]:
    """The key events at ``url`` (of ``tenant`` and of the provider's key), oldest first."""
    from store.sql.upkeep import encryption as jobs

    async with _database(url) as engine:
        return await jobs.key_events(engine, tenant=tenant)
