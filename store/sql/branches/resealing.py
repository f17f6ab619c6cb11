"""Sealed texts follow the rows they land in.

A sealed text is bound to a session (:mod:`store.encryption.sealing`): a message row's
texts to the session the row is stored under, a branch row's reduction to the branch
that reads it (``chatledger_branch_rows.session_id``). A few branch operations move or
copy texts in SQL: a rewind sets a tail aside in a session of its own and takes it
back (with the tail's reductions), deleting a session that forks read moves the rows
they read to a holder, a fork copies its source's branch rows, and a session that
changes rows its forks read first copies their state to the forks
(:mod:`store.sql.branches.rewind`, :mod:`~store.sql.branches.deleting`,
:mod:`~store.sql.branches.fork`, :mod:`~store.sql.branches.sharing`). After each,
:func:`reseal_in_place` opens every text of the rows it touched that was sealed for
another session, where it was sealed, and seals it for the row's own, in the same
transaction; :func:`resealed` does it for one text before it is written. Where
nothing seals they do nothing.
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import Table, Text, select, type_coerce, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.ext.asyncio import AsyncConnection

from store.sql.codec import ENCODED, sealing_now
from store.sql.schema import BRANCH_ROWS, MESSAGES

__all__ = ["reseal_in_place", "resealed"]

_TEXTS: Final = {
    "chatledger_messages": ("contents", "metadata", "reduced_contents", "author_name"),
    "chatledger_branch_rows": ("reduced_contents",),
}
"""The sealed columns of each table whose rows move or are copied."""
_JSON: Final = frozenset({"contents", "metadata", "reduced_contents"})
"""Those bound as JSON (the author's name is plain text)."""


def resealed(text: Any, session_id: str, seq: int, column: str) -> Any:
    """``text`` sealed for session ``session_id`` (row ``seq``, ``column``) when another
    session's sealing it holds; as it is otherwise (and where nothing seals)."""
    sealing = sealing_now()
    if sealing is None or not isinstance(text, str):
        return text
    owner = sealing.owner_of(text)
    if owner is None or owner == session_id:
        return text
    plain = sealing.open(text, "messages", owner, seq, column)
    return sealing.seal(plain, "messages", session_id, seq, column)


async def reseal_in_place(conn: AsyncConnection, tenant: str, table: Table, where: Any) -> int:
    """Seal for each row's own session the texts of ``table``'s rows matching ``where``
    that another session's sealing holds; how many rows changed."""
    if sealing_now() is None:
        return 0
    if table is not MESSAGES and table is not BRANCH_ROWS:  # pragma: no cover - misuse
        raise ValueError(f"{table.name} holds no texts that move")
    keys = list(table.primary_key.columns)
    names = _TEXTS[table.name]
    texts = [sql_cast(table.c[name], Text).label(name) for name in names]
    query = select(*keys, *texts).where(table.c.tenant == tenant, where)
    changed = 0
    for row in (await conn.execute(query)).mappings().all():
        values: dict[str, Any] = {}
        for name in names:
            text = row[name]
            new = resealed(text, row["session_id"], row["seq"], name)
            if new is not text:
                values[name] = type_coerce(new, ENCODED) if name in _JSON else new
        if values:
            await conn.execute(
                update(table).where(*(key == row[key.key] for key in keys)).values(**values)
            )
            changed += 1
    return changed
