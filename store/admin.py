"""Administration across tenants, outside the store's contract.

A store is opened for one tenant and never sees another's rows. An administrator of a
database sometimes needs the whole picture: :func:`list_tenants` lists every tenant
with its totals, through the SQL backend's administration ability
(:class:`~store.contract.AdminBackend`). It reads only (a database without chatledger's
schema is refused with :class:`~store.errors.MigrationRequired`, and nothing is written
to it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.contract import AdminBackend
from store.models import TenantInfo
from store.sql.store import HistoryStore

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = ["TenantInfo", "list_tenants"]


async def list_tenants(url: str | URL | None = None) -> list[TenantInfo]:
    """Every tenant of the database at ``url`` (as for ``HistoryStore.open``), by name."""
    async with HistoryStore.open(url, create=False) as store:
        admin: AdminBackend = store
        return await admin.tenants()
