"""Read queries: history pages and session listings (always filtered by tenant).

JSON columns are read as text and decoded while mapping each row, so that a row
holding invalid JSON is reported as a :class:`~store.errors.CorruptRowError` naming its
``seq`` rather than failing somewhere inside the driver. Timestamp columns are read as
the driver returns them (SQLite's ISO text, asyncpg's ``datetime``) and made aware UTC
while mapping, as :class:`~store.schema.UTCDateTime` would, without SQLAlchemy's
per-value result processing.

Rows are mapped from plain tuples: the contents are validated straight from their JSON
text (:data:`~strategies.messages.CONTENTS_ADAPTER`), then the stored message is
validated with its message in one call, so a corrupt row still raises. A row holding a reduced
version takes the general mapping (:func:`store.models.message_from_row`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, cast

from pydantic import ValidationError
from sqlalchemy import String, Table, Text, select, type_coerce
from sqlalchemy import cast as sql_cast
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Select

from store._rows import chunks
from store.errors import CorruptRowError
from store.models import SessionInfo, StoredMessage, message_from_row, session_from_row
from store.schema import GroupRow, MessageRow, SessionRow
from strategies.messages import CONTENTS_ADAPTER, Message

__all__ = [
    "message_columns",
    "read_history",
    "read_page_rows",
    "read_sessions",
    "row_message",
    "stored_message",
    "timestamp",
]

MESSAGES = cast(Table, MessageRow.__table__)
GROUPS = cast(Table, GroupRow.__table__)
SESSIONS = cast(Table, SessionRow.__table__)

_JSON_COLUMNS = ("contents", "metadata", "reduced_contents")
_TIMESTAMP_COLUMNS = ("created_at", "stored_at", "imported_at")
_UNREAD_COLUMNS = ("tenant", "session_id", "content_hash")
"""Not needed to map a row (every query is filtered by tenant and session)."""


_CONTEXT = {"allow_custom_roles": True}
_MAPPED = (ValidationError, KeyError, TypeError, ValueError)


def message_columns() -> list[Any]:
    """The columns a message is mapped from, in table order (see :data:`COLUMN_INDEX`):
    JSON ones as text, timestamps as the driver returns them (see :func:`timestamp`)."""
    columns: list[Any] = []
    for column in MESSAGES.c:
        if column.key in _UNREAD_COLUMNS:
            continue
        if column.key in _JSON_COLUMNS:
            columns.append(sql_cast(column, Text).label(column.key))
        elif column.key in _TIMESTAMP_COLUMNS:
            columns.append(type_coerce(column, String()).label(column.key))
        else:
            columns.append(column)
    return columns


def timestamp(value: Any) -> datetime | None:
    """A timestamp column read raw, as :class:`~store.schema.UTCDateTime` returns it:
    aware UTC (SQLite's ISO text is parsed; a naive value is taken to be UTC)."""
    if value is None:
        return None
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    if not isinstance(parsed, datetime):
        raise TypeError(f"not a timestamp: {value!r}")
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


COLUMN_INDEX: dict[str, int] = {c.key: i for i, c in enumerate(message_columns())}
"""Position of each column in a row selected with :func:`message_columns`."""
_I = COLUMN_INDEX


_PLAIN_FIELDS = (
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
    "source_system",
    "source_id",
)
"""The stored message's fields taken from the row as they are."""
_PLAIN = itemgetter(*(_I[key] for key in _PLAIN_FIELDS))
_SEQ, _GROUP, _REDUCED = _I["seq"], _I["group_id"], _I["reduced_contents"]
_STORED, _IMPORTED = _I["stored_at"], _I["imported_at"]
_ROLE, _CONTENTS, _ID = _I["role"], _I["contents"], _I["message_id"]
_AUTHOR, _CREATED, _METADATA = _I["author_name"], _I["created_at"], _I["metadata"]
_TIMESTAMP_INDEX = tuple((key, _I[key]) for key in _TIMESTAMP_COLUMNS)


def _corrupt(error: Exception, row: Sequence[Any], tenant: str, session_id: str) -> CorruptRowError:
    seq = row[_SEQ] if isinstance(row[_SEQ], int) else None
    return CorruptRowError(str(error), tenant=tenant, session_id=session_id, seq=seq)


def _as_mapping(row: Sequence[Any], kind: str | None) -> dict[str, Any]:
    mapping = {key: row[index] for key, index in _I.items()}
    for key, index in _TIMESTAMP_INDEX:
        mapping[key] = timestamp(row[index])
    mapping["kind"] = kind
    return mapping


def _message_fields(row: Sequence[Any]) -> dict[str, Any]:
    """The message's fields, contents validated straight from their JSON text."""
    metadata = row[_METADATA]
    return {
        "role": row[_ROLE],
        "contents": CONTENTS_ADAPTER.validate_json(row[_CONTENTS]),
        "message_id": row[_ID],
        "author_name": row[_AUTHOR],
        "created_at": timestamp(row[_CREATED]),
        "metadata": {} if metadata is None or metadata == "{}" else json.loads(metadata),
    }


def row_message(row: Sequence[Any], *, tenant: str, session_id: str) -> Message:
    """The message a projection shows for a row of :func:`message_columns` (reduction
    applied); :class:`~store.errors.CorruptRowError` when the row does not validate."""
    try:
        if row[_REDUCED] is not None:
            mapping = _as_mapping(row, "user")
            stored = message_from_row(mapping, tenant=tenant, session_id=session_id)
            return stored.reduced if stored.reduced is not None else stored.message
        return Message.model_validate(_message_fields(row), context=_CONTEXT)
    except _MAPPED as error:
        raise _corrupt(error, row, tenant, session_id) from error


def inserted_message(values: Mapping[str, Any]) -> Message:
    """What :func:`row_message` returns for a row inserted from ``values`` (the columns
    of :func:`store.models.message_to_values`, no reduction): the JSON columns go
    through the text they are stored as, the timestamp is normalized as read."""
    metadata = values["metadata"]
    return Message.model_validate(
        {
            "role": values["role"],
            "contents": CONTENTS_ADAPTER.validate_json(json.dumps(values["contents"])),
            "message_id": values["message_id"],
            "author_name": values["author_name"],
            "created_at": timestamp(values["created_at"]),
            "metadata": json.loads(json.dumps(metadata)) if metadata else {},
        },
        context=_CONTEXT,
    )


def stored_message(
    row: Sequence[Any], kind: str | None, *, tenant: str, session_id: str
) -> StoredMessage:
    """A :class:`StoredMessage` from a row of :func:`message_columns` and its group's kind."""
    try:
        if row[_REDUCED] is not None:
            mapping = _as_mapping(row, kind)
            return message_from_row(mapping, tenant=tenant, session_id=session_id)
        data = dict(zip(_PLAIN_FIELDS, _PLAIN(row), strict=True))
        data["stored_at"] = timestamp(row[_STORED])
        data["imported_at"] = timestamp(row[_IMPORTED])
        data["session_id"] = session_id
        data["tenant"] = tenant
        data["kind"] = kind
        data["message"] = _message_fields(row)
        # one validation for the stored message and its message (the context reaches both)
        return StoredMessage.model_validate(data, context=_CONTEXT)
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
    kinds = await group_kinds(conn, tenant, session_id, {row[_GROUP] for row in rows})
    out = [
        stored_message(row, kinds.get(row[_GROUP]), tenant=tenant, session_id=session_id)
        for row in rows
    ]
    out.sort(key=lambda m: m.seq)
    return out


async def read_page_rows(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool,
    after: int | None,
    before: int | None,
    limit: int,
) -> tuple[Sequence[Any], dict[str, str]]:
    """A keyset page: the first ``limit`` rows between the exclusive ``seq`` bounds,
    oldest first, and the kind of each of their groups (map a row with
    :func:`stored_message`; pass the last ``seq`` seen as ``after`` for the next page)."""
    query = history_query(
        tenant,
        session_id,
        include_excluded=include_excluded,
        limit=None,
        before=before,
        after=after,
    ).limit(limit)
    rows = (await conn.execute(query)).all()
    kinds = await group_kinds(conn, tenant, session_id, {row[_GROUP] for row in rows})
    return rows, kinds


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
