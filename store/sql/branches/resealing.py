"""Sealed texts follow the rows that move between sessions.

A sealed text is bound to the session its row is stored under
(:mod:`store.encryption.sealing`). A few branch operations move rows: a rewind sets a
tail aside in a session of its own and takes it back, and deleting a session that forks
read moves the rows they read to a holder (:mod:`store.sql.branches.rewind`,
:mod:`store.sql.branches.deleting`); the branch rows that name such an owner follow it.
After such a move, :func:`reseal_moved` opens each moved text at its old place and seals
it at the new one, so that the row reads where it now is, and nowhere else. Where
nothing seals it does nothing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, Text, select, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.ext.asyncio import AsyncConnection

from store.sql.codec import ENCODED, sealing_now
from store.sql.schema import BRANCH_ROWS, MESSAGES

__all__ = ["reseal_moved"]

_TEXTS = {
    "messages": ("contents", "metadata", "reduced_contents", "author_name"),
    "branch_rows": ("reduced_contents",),
}
"""The sealed columns of each table whose rows move."""


async def reseal_moved(
    conn: AsyncConnection, tenant: str, table: Table, where: Any, old: str, new: str
) -> int:
    """Seal again for session ``new`` the texts of ``table``'s rows matching ``where``
    (already moved there) that were sealed for ``old``; how many rows changed. For
    ``chatledger_branch_rows`` ``new`` is the rows' new owner."""
    sealing = sealing_now()
    if sealing is None:
        return 0
    name = "messages" if table is MESSAGES else "branch_rows"
    if table is not MESSAGES and table is not BRANCH_ROWS:  # pragma: no cover - misuse
        raise ValueError(f"{table.name} holds no moved texts")
    keys = list(table.primary_key.columns)
    texts = [table.c[column] for column in _TEXTS[name]]
    query = select(*keys, *(sql_cast(c, Text).label(c.key) for c in texts)).where(
        table.c.tenant == tenant, where
    )
    changed = 0
    for row in (await conn.execute(query)).mappings().all():
        values: dict[str, Any] = {}
        for column in texts:
            text = row[column.key]
            if text is None or sealing.owner_of(text) != old:
                continue
            plain = sealing.open(text, "messages", old, row["seq"], column.key)
            values[column.key] = sealing.seal(plain, "messages", new, row["seq"], column.key)
        if not values:
            continue
        bound = {
            key: (value if key == "author_name" else _encoded(value))
            for key, value in values.items()
        }
        await conn.execute(update(table).where(*(k == row[k.key] for k in keys)).values(**bound))
        changed += 1
    return changed


def _encoded(text: str) -> Any:
    from sqlalchemy import type_coerce

    return type_coerce(text, ENCODED)
