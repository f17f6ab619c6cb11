"""Read queries: history pages and session listings (always filtered by tenant).

JSON columns are read as text and decoded while mapping each row, so that a row
holding invalid JSON is reported as a :class:`~store.errors.CorruptRowError` naming its
``seq`` rather than failing somewhere inside the driver.

Rows are mapped from plain tuples: the contents are validated straight from their JSON
text (:data:`~strategies.messages.CONTENTS_ADAPTER`), then the message and the stored
message are validated as usual, so a corrupt row still raises. A row holding a reduced
version takes the general mapping (:func:`store.models.message_from_row`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from pydantic import ValidationError
from sqlalchemy import Table, Text, select
from sqlalchemy import cast as sql_cast
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Select

from store._rows import chunks
from store.errors import CorruptRowError
from store.models import SessionInfo, StoredMessage, message_from_row, session_from_row
from store.schema import GroupRow, MessageRow, SessionRow
from strategies.messages import CONTENTS_ADAPTER, Message

__all__ = ["message_columns", "read_history", "read_sessions", "row_message", "stored_message"]

MESSAGES = cast(Table, MessageRow.__table__)
GROUPS = cast(Table, GroupRow.__table__)
SESSIONS = cast(Table, SessionRow.__table__)

_JSON_COLUMNS = ("contents", "metadata", "reduced_contents")


_CONTEXT = {"allow_custom_roles": True}
_MAPPED = (ValidationError, KeyError, TypeError, ValueError)


def message_columns() -> list[Any]:
    """Every column of the messages table, JSON ones as text, in table order."""
    columns: list[Any] = []
    for column in MESSAGES.c:
        if column.key in _JSON_COLUMNS:
            columns.append(sql_cast(column, Text).label(column.key))
        else:
            columns.append(column)
    return columns


COLUMN_INDEX: dict[str, int] = {c.key: i for i, c in enumerate(MESSAGES.c)}
"""Position of each column in a row selected with :func:`message_columns`."""
_I = COLUMN_INDEX


_STORED_FIELDS = (
    "seq",
    "anchor",
    "slot",
    "group_id",
    "token_count",
    "excluded",
    "excluded_reason",
    "excluded_event_id",
    "reduced_token_count",
    "reduced_event_id",
    "stored_at",
    "source_system",
    "source_id",
    "imported_at",
)
_STORED_INDEX = tuple((key, _I[key]) for key in _STORED_FIELDS)


def _corrupt(error: Exception, row: Sequence[Any], tenant: str, session_id: str) -> CorruptRowError:
    seq = row[_I["seq"]] if isinstance(row[_I["seq"]], int) else None
    return CorruptRowError(str(error), tenant=tenant, session_id=session_id, seq=seq)


def _as_mapping(row: Sequence[Any], kind: str | None) -> dict[str, Any]:
    return {**{key: row[index] for key, index in _I.items()}, "kind": kind}


_ROLE, _CONTENTS, _ID = _I["role"], _I["contents"], _I["message_id"]
_AUTHOR, _CREATED, _METADATA = _I["author_name"], _I["created_at"], _I["metadata"]


def _message(row: Sequence[Any]) -> Message:
    metadata = row[_METADATA]
    return Message.model_validate(
        {
            "role": row[_ROLE],
            "contents": CONTENTS_ADAPTER.validate_json(row[_CONTENTS]),
            "message_id": row[_ID],
            "author_name": row[_AUTHOR],
            "created_at": row[_CREATED],
            "metadata": json.loads(metadata) if metadata is not None else {},
        },
        context=_CONTEXT,
    )


def row_message(row: Sequence[Any], *, tenant: str, session_id: str) -> Message:
    """The message a projection shows for a row of :func:`message_columns` (reduction
    applied); :class:`~store.errors.CorruptRowError` when the row does not validate."""
    if row[_I["reduced_contents"]] is not None:
        stored = message_from_row(_as_mapping(row, "user"), tenant=tenant, session_id=session_id)
        return stored.reduced if stored.reduced is not None else stored.message
    try:
        return _message(row)
    except _MAPPED as error:
        raise _corrupt(error, row, tenant, session_id) from error


def stored_message(
    row: Sequence[Any], kind: str | None, *, tenant: str, session_id: str
) -> StoredMessage:
    """A :class:`StoredMessage` from a row of :func:`message_columns` and its group's kind."""
    if row[_I["reduced_contents"]] is not None:
        return message_from_row(_as_mapping(row, kind), tenant=tenant, session_id=session_id)
    try:
        return StoredMessage.model_validate(
            {
                "session_id": session_id,
                "tenant": tenant,
                "message": _message(row),
                "kind": kind,
                **{key: row[index] for key, index in _STORED_INDEX},
            }
        )
    except _MAPPED as error:
        raise _corrupt(error, row, tenant, session_id) from error


def history_query(
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool,
    limit: int | None,
    before: int | None,
    after: int | None,
) -> Select[Any]:
    """The query for one page of a session's history, by ``seq``."""
    query = select(*message_columns()).where(
        MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == session_id
    )
    if not include_excluded:
        query = query.where(MESSAGES.c.excluded.is_(False))
    if after is not None:
        query = query.where(MESSAGES.c.seq > after)
    if before is not None:
        query = query.where(MESSAGES.c.seq < before)
        if limit is not None:
            # the newest ``limit`` messages before ``before``, returned oldest first
            return query.order_by(MESSAGES.c.seq.desc()).limit(limit)
    query = query.order_by(MESSAGES.c.seq)
    if limit is not None:
        query = query.limit(limit)
    return query


async def group_kinds(
    conn: AsyncConnection, tenant: str, session_id: str, group_ids: Iterable[str]
) -> dict[str, str]:
    """The kind of each of ``group_ids`` (looked up by primary key, never by a join)."""
    kinds: dict[str, str] = {}
    for part in chunks(sorted(group_ids)):
        query = select(GROUPS.c.group_id, GROUPS.c.kind).where(
            GROUPS.c.tenant == tenant,
            GROUPS.c.session_id == session_id,
            GROUPS.c.group_id.in_(part),
        )
        kinds.update((row[0], row[1]) for row in await conn.execute(query))
    return kinds


async def read_history(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool = False,
    limit: int | None = None,
    before: int | None = None,
    after: int | None = None,
) -> list[StoredMessage]:
    """One page of history, oldest first."""
    query = history_query(
        tenant,
        session_id,
        include_excluded=include_excluded,
        limit=limit,
        before=before,
        after=after,
    )
    rows = (await conn.execute(query)).all()
    group_index = _I["group_id"]
    kinds = await group_kinds(conn, tenant, session_id, {row[group_index] for row in rows})
    out = [
        stored_message(row, kinds.get(row[group_index]), tenant=tenant, session_id=session_id)
        for row in rows
    ]
    out.sort(key=lambda m: m.seq)
    return out


async def read_sessions(
    conn: AsyncConnection,
    tenant: str,
    *,
    limit: int | None = None,
    after: str | None = None,
    updated_since: datetime | None = None,
) -> list[SessionInfo]:
    """Sessions of ``tenant`` ordered by id, after the ``after`` id."""
    query = select(SESSIONS).where(SESSIONS.c.tenant == tenant)
    if after is not None:
        query = query.where(SESSIONS.c.session_id > after)
    if updated_since is not None:
        query = query.where(SESSIONS.c.updated_at >= updated_since)
    query = query.order_by(SESSIONS.c.session_id)
    if limit is not None:
        query = query.limit(limit)
    rows = (await conn.execute(query)).mappings().all()
    return [session_from_row(row) for row in rows]
