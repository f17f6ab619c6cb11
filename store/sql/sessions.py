"""The session row: read it, lock it for a write, create it on first use.

Every write transaction begins by locking its session's row (:func:`lock_session`):
``SELECT ... FOR UPDATE`` where the database has row locks, a plain read where the
transaction holds the database's write lock already (SQLite's ``BEGIN IMMEDIATE``).
The row's ``metadata`` is written as :mod:`store.sql.codec` encodes it and read as text
(:data:`SESSION_COLUMNS`), for :func:`~store.sql.mapping.session_from_row` to decode.
The compaction asked for and not yet run waits in the row too
(:func:`compaction_request_of`), read with it by the compaction's snapshot and the
projection, at no extra statement.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Text, bindparam, select, type_coerce, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.selectable import CTE

from store.errors import CorruptRowError, SessionNotFound
from store.models import CompactionRequest
from store.rules.records import now
from store.sql import dialect
from store.sql.codec import (
    ENCODED,
    decode_compaction_request,
    encode_compaction_request,
    encode_session_metadata,
    sealing_now,
)
from store.sql.schema import SESSIONS

__all__ = [
    "KEYS",
    "SESSION_COLUMNS",
    "compaction_request_of",
    "consume_compaction_request",
    "create_session",
    "incarnation",
    "lock_session",
    "lock_sessions",
    "metadata_value",
    "read_session",
    "set_compaction_request",
]

KEYS = (SESSIONS.c.tenant == bindparam("tenant"), SESSIONS.c.session_id == bindparam("session_id"))
"""The session key as bound parameters: prebuilt statements skip most per-call work."""


def incarnation() -> str:
    """A new session row's token: 128 random bits, so two rows never share one (the
    view cache's key, where ``created_at`` repeats within a clock tick)."""
    return secrets.token_hex(16)


SESSION_COLUMNS = tuple(
    sql_cast(column, Text).label(column.key) if column.key == "metadata" else column
    for column in SESSIONS.c
)
"""The session row's columns, its metadata as the stored text."""


def metadata_value(tenant: str, session_id: str, metadata: Mapping[str, Any]) -> Any:
    """The session's ``metadata`` as a statement sets it: the text the codec encodes."""
    return type_coerce(encode_session_metadata(tenant, session_id, metadata), ENCODED)


_READ_SESSION = select(*SESSION_COLUMNS).where(*KEYS)
_LOCK_SESSION = _READ_SESSION.with_for_update()
_LOCKED_SESSION = _LOCK_SESSION.cte("locked_session")


def locked_session_row() -> CTE:
    """The session row, locked ``FOR UPDATE`` (the read of :func:`lock_session`), as a
    ``WITH`` query of its own: a statement that joins other rows to it locks one row
    once. Locked in the join, the row would be locked again for every joined row and,
    after a wait, checked again (PostgreSQL's recheck of an updated row) by running the
    join's other scans again for each: the square of the rows joined, the lock held
    meanwhile."""
    return _LOCKED_SESSION


async def read_session(conn: AsyncConnection, tenant: str, session_id: str) -> RowMapping:
    """The session's row; :class:`SessionNotFound` when absent."""
    params = {"tenant": tenant, "session_id": session_id}
    row = (await conn.execute(_READ_SESSION, params)).mappings().first()
    if row is None:
        raise SessionNotFound(session_id, tenant=tenant)
    return row


async def create_session(
    conn: AsyncConnection, tenant: str, session_id: str, *, tokenizer: str
) -> None:
    """Insert the session's row unless it exists (never fails on a concurrent create),
    with a fresh :func:`incarnation`."""
    values = _new_row(tenant, session_id, tokenizer)
    insert = dialect.of(conn).insert
    await conn.execute(insert(SESSIONS).values(**values).on_conflict_do_nothing())


def _new_row(tenant: str, session_id: str, tokenizer: str) -> dict[str, Any]:
    stamp = now()
    return {
        "tenant": tenant,
        "session_id": session_id,
        "incarnation": incarnation(),
        "created_at": stamp,
        "updated_at": stamp,
        "metadata": metadata_value(tenant, session_id, {}),
        "tokenizer": tokenizer,
    }


_SESSIONS_A_STATEMENT = 500
"""Sessions a statement of :func:`lock_sessions` names (bound parameters stay few)."""
_READ_SESSIONS = (
    select(*SESSION_COLUMNS)
    .where(
        SESSIONS.c.tenant == bindparam("tenant"),
        SESSIONS.c.session_id.in_(bindparam("session_ids", expanding=True)),
    )
    .order_by(SESSIONS.c.session_id)
)
_LOCK_SESSIONS = _READ_SESSIONS.with_for_update()


async def lock_sessions(
    conn: AsyncConnection, tenant: str, session_ids: Sequence[str], *, create_with_tokenizer: str
) -> dict[str, RowMapping]:
    """The rows of ``session_ids``, locked for update as :func:`lock_session` locks one,
    the missing ones created first: two statements a few hundred sessions, whatever
    their number. Rows are locked in ``session_id`` order (two such writes never wait
    on each other in a circle)."""
    insert = dialect.of(conn).insert
    query = _LOCK_SESSIONS if dialect.of(conn).row_locks else _READ_SESSIONS
    found: dict[str, RowMapping] = {}
    ordered = sorted(set(session_ids))
    for start in range(0, len(ordered), _SESSIONS_A_STATEMENT):
        part = ordered[start : start + _SESSIONS_A_STATEMENT]
        rows = [_new_row(tenant, session_id, create_with_tokenizer) for session_id in part]
        await conn.execute(insert(SESSIONS).values(rows).on_conflict_do_nothing())
        params = {"tenant": tenant, "session_ids": part}
        found.update(
            (row["session_id"], row) for row in (await conn.execute(query, params)).mappings()
        )
    return found


async def lock_session(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    create_with_tokenizer: str | None = None,
) -> RowMapping:
    """Read the session's row for update (see the module docstring).

    With ``create_with_tokenizer``, a missing session is created first.
    """
    query = _LOCK_SESSION if dialect.of(conn).row_locks else _READ_SESSION
    params = {"tenant": tenant, "session_id": session_id}
    row = (await conn.execute(query, params)).mappings().first()
    if row is None and create_with_tokenizer is not None:
        await create_session(conn, tenant, session_id, tokenizer=create_with_tokenizer)
        row = (await conn.execute(query, params)).mappings().first()
    if row is None:
        raise SessionNotFound(session_id, tenant=tenant)
    return row


# -- compaction requests -------------------------------------------------------------


def compaction_request_of(session: Mapping[Any, Any]) -> CompactionRequest | None:
    """The compaction the session row says was asked for and not yet run (the one way
    from the ``compaction_request`` column to a value); a value that does not validate is
    a :class:`CorruptRowError`, never skipped."""
    text = decode_compaction_request(
        session["tenant"], session["session_id"], session.get("compaction_request")
    )
    if text is None:
        return None
    try:
        return CompactionRequest.model_validate_json(text)
    except ValueError as error:
        raise CorruptRowError(
            f"compaction_request does not validate: {error}",
            tenant=session["tenant"],
            session_id=session["session_id"],
            seq=None,
        ) from error


def _request_text(tenant: str, session_id: str, request: CompactionRequest) -> str | None:
    return encode_compaction_request(tenant, session_id, request.model_dump_json())


async def set_compaction_request(
    conn: AsyncConnection, tenant: str, session_id: str, request: CompactionRequest
) -> bool:
    """Keep ``request`` in the session's row, replacing one waiting (not a write of the
    session's history: its revision stays); False when no such session is stored."""
    statement = (
        update(SESSIONS)
        .where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id)
        .values(compaction_request=_request_text(tenant, session_id, request))
    )
    return bool((await conn.execute(statement)).rowcount)


async def consume_compaction_request(
    conn: AsyncConnection, tenant: str, session_id: str, request: CompactionRequest
) -> None:
    """Forget ``request``, unless a newer request replaced it since (sealed, the stored
    text is read and compared in clear: each sealing of a text differs)."""
    keys = (SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id)
    if sealing_now() is None:
        stored = SESSIONS.c.compaction_request == _request_text(tenant, session_id, request)
        await conn.execute(update(SESSIONS).where(*keys, stored).values(compaction_request=None))
        return
    query = select(SESSIONS.c.compaction_request).where(*keys)
    text = (await conn.execute(query)).scalar()
    if text is None:
        return
    if decode_compaction_request(tenant, session_id, text) != request.model_dump_json():
        return
    stored = SESSIONS.c.compaction_request == text
    await conn.execute(update(SESSIONS).where(*keys, stored).values(compaction_request=None))
