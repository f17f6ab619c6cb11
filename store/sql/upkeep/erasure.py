"""Retention and erasure in SQL: purging old sessions, redacting messages, and making
sure what they removed leaves the database file.

The rules (what a tombstone keeps, which summaries a redaction reaches, the purge
cutoff) are :mod:`store.rules.erasure`; this module reads and writes the rows.

Erasure in the bytes: where the database can zero what a write frees
(:attr:`~store.sql.dialect.Capabilities.secure_delete`, SQLite's ``PRAGMA
secure_delete``) the erasing transaction turns it on, and where a write-ahead log keeps
the old pages (:attr:`~store.sql.dialect.Capabilities.wal_checkpoint`) the log is
checkpointed and truncated after the commit. :func:`vacuum` also rebuilds the file
(SQLite) or reclaims the dead row versions (PostgreSQL's ``VACUUM``, which marks their
space reusable but neither zeroes it nor touches the write-ahead log, replicas or
backups: see ``docs/retention.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, delete, func, null, select, text, type_coerce
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store.errors import InvalidInput
from store.models import PurgeReport, RedactReport
from store.rules.checks import check_tokenizer
from store.rules.erasure import covering_summaries, tombstone
from store.rules.identity import is_tombstone
from store.sql import dialect
from store.sql.audit import record_event
from store.sql.codec import ENCODED, encode_contents, encode_metadata
from store.sql.history import group_kinds
from store.sql.mapping import COLUMN_INDEX, message_columns, stored_message
from store.sql.schema import EVENT_GROUPS, EVENTS, GROUPS, MESSAGES, OPEN_CALLS, SESSIONS
from store.sql.sessions import lock_session
from store.sql.statements import CHUNK, chunks
from store.sql.upkeep.recount import rebuild_totals
from strategies.messages import Message

__all__ = ["PURGE_BATCH", "Redaction", "erase_step", "purge_sessions", "redact_messages", "vacuum"]

_log = logging.getLogger("store.sql.upkeep.erasure")

PURGE_BATCH = CHUNK
"""Sessions a purge removes per transaction."""

_CHILD_TABLES: tuple[Table, ...] = (EVENT_GROUPS, EVENTS, OPEN_CALLS, MESSAGES, GROUPS)


async def erase_step(conn: AsyncConnection) -> None:
    """Make the current write transaction zero what it frees, where the database can."""
    if dialect.of(conn).secure_delete:
        await conn.execute(text("PRAGMA secure_delete = ON"))


async def _outside_transactions(engine: AsyncEngine, statement: str) -> Any:
    """Run ``statement`` on a connection outside any transaction and return its first
    row: through the driver on SQLite (whose connections begin a transaction for every
    statement SQLAlchemy sends), in autocommit elsewhere."""
    async with engine.connect() as conn:
        if dialect.of(conn).wal_checkpoint:
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection
            cursor = await driver.execute(statement)
            try:
                return await cursor.fetchone()
            finally:
                await cursor.close()
        plain = await conn.execution_options(isolation_level="AUTOCOMMIT")
        result = await plain.execute(text(statement))
        return result.first() if result.returns_rows else None


async def checkpoint(engine: AsyncEngine) -> bool:
    """Copy the write-ahead log into the file and truncate it, where there is one;
    False when a reader still held old pages (the log then keeps them until the next
    checkpoint)."""
    if not dialect.capabilities(engine.dialect).wal_checkpoint:
        return True
    busy = await _outside_transactions(engine, "PRAGMA wal_checkpoint(TRUNCATE)")
    done = busy is None or not busy[0]
    if not done:
        _log.warning("the write-ahead log is still read by another connection: not truncated")
    return done


async def vacuum(engine: AsyncEngine) -> None:
    """Rebuild the database file (SQLite) or reclaim the dead row versions of the
    chatledger tables (PostgreSQL), outside any transaction."""
    caps = dialect.capabilities(engine.dialect)
    if caps.vacuum_tables:
        preparer = engine.dialect.identifier_preparer
        for table in (*_CHILD_TABLES, SESSIONS):
            await _outside_transactions(engine, f"VACUUM {preparer.format_table(table)}")
    else:
        await _outside_transactions(engine, "VACUUM")
    await checkpoint(engine)


# --- purge ---------------------------------------------------------------------------


async def _counts(conn: AsyncConnection, tenant: str, ids: Sequence[str]) -> tuple[int, int, int]:
    found = []
    for table in (MESSAGES, GROUPS, EVENTS):
        query = select(func.count()).where(table.c.tenant == tenant, table.c.session_id.in_(ids))
        found.append(int((await conn.execute(query)).scalar_one()))
    return found[0], found[1], found[2]


def _doomed(tenant: str, cutoff: datetime, after: str | None, *, lock: bool) -> Any:
    query = select(SESSIONS.c.session_id).where(
        SESSIONS.c.tenant == tenant, SESSIONS.c.updated_at < cutoff
    )
    if after is not None:
        query = query.where(SESSIONS.c.session_id > after)
    query = query.order_by(SESSIONS.c.session_id).limit(PURGE_BATCH)
    return query.with_for_update() if lock else query


@dataclass
class _Tally:
    sessions: list[str]
    messages: int = 0
    groups: int = 0
    events: int = 0

    def add(self, ids: Sequence[str], counts: tuple[int, int, int]) -> None:
        self.sessions.extend(ids)
        self.messages += counts[0]
        self.groups += counts[1]
        self.events += counts[2]

    def report(self, tenant: str, cutoff: datetime, *, dry_run: bool) -> PurgeReport:
        return PurgeReport(
            tenant=tenant,
            older_than=cutoff,
            dry_run=dry_run,
            sessions=tuple(self.sessions),
            messages=self.messages,
            groups=self.groups,
            events=self.events,
        )


async def purge_batch(
    conn: AsyncConnection, tenant: str, cutoff: datetime, tally: _Tally, *, dry_run: bool
) -> bool:
    """Remove (or count, with ``dry_run``) the next batch of sessions last updated before
    ``cutoff``, in id order after those ``tally`` holds; False when none was left."""
    after = tally.sessions[-1] if tally.sessions and dry_run else None
    lock = not dry_run and dialect.of(conn).row_locks
    ids = list((await conn.execute(_doomed(tenant, cutoff, after, lock=lock))).scalars())
    if not ids:
        return False
    tally.add(ids, await _counts(conn, tenant, ids))
    if not dry_run:
        await erase_step(conn)
        for table in (*_CHILD_TABLES, SESSIONS):
            await conn.execute(
                delete(table).where(table.c.tenant == tenant, table.c.session_id.in_(ids))
            )
    return len(ids) == PURGE_BATCH


async def purge_sessions(
    run: Callable[[Callable[[AsyncConnection], Any]], Any],
    tenant: str,
    cutoff: datetime,
    *,
    dry_run: bool,
) -> PurgeReport:
    """Purge the tenant's sessions last updated before ``cutoff``, one transaction per
    :data:`PURGE_BATCH` sessions (``run`` runs one: the store's write loop)."""
    tally = _Tally(sessions=[])

    async def batch(conn: AsyncConnection) -> bool:
        return await purge_batch(conn, tenant, cutoff, tally, dry_run=dry_run)

    while await run(batch):
        pass
    return tally.report(tenant, cutoff, dry_run=dry_run)


# --- redaction -----------------------------------------------------------------------


@dataclass(frozen=True)
class Redaction:
    """One redaction's request: which messages, why, under which event id."""

    tenant: str
    session_id: str
    message_ids: tuple[str, ...]
    reason: str
    event_id: str
    now: datetime
    count: Callable[[Message], int]
    tokenizer: str
    """The name of the tokenizer ``count`` counts with (the session's must match)."""


async def _rows(
    conn: AsyncConnection, r: Redaction, column: Any, keys: Sequence[str]
) -> list[Sequence[Any]]:
    rows: list[Sequence[Any]] = []
    for part in chunks(sorted(keys)):
        query = (
            select(*message_columns())
            .where(MESSAGES.c.tenant == r.tenant, MESSAGES.c.session_id == r.session_id)
            .where(column.in_(part))
            .order_by(MESSAGES.c.seq)
        )
        rows.extend(await conn.execute(query))
    return rows


async def _summaries(conn: AsyncConnection, r: Redaction) -> dict[str, list[str]]:
    query = select(GROUPS.c.group_id, GROUPS.c.summary_of).where(
        GROUPS.c.tenant == r.tenant, GROUPS.c.session_id == r.session_id, GROUPS.c.kind == "summary"
    )
    return {row[0]: list(row[1] or ()) for row in await conn.execute(query)}


async def _write_tombstone(conn: AsyncConnection, r: Redaction, seq: int, message: Message) -> None:
    contents = encode_contents(r.tenant, r.session_id, seq, message.contents)
    metadata = encode_metadata(r.tenant, r.session_id, seq, message.metadata)
    await conn.execute(
        MESSAGES.update()
        .where(
            MESSAGES.c.tenant == r.tenant,
            MESSAGES.c.session_id == r.session_id,
            MESSAGES.c.seq == seq,
        )
        .values(
            contents=type_coerce(contents, ENCODED),
            author_name=None,
            metadata=type_coerce(metadata, ENCODED),
            token_count=r.count(message),
            reduced_contents=null(),  # SQL NULL, not JSON null
            reduced_token_count=None,
            reduced_event_id=None,
        )
    )


async def _tombstone_rows(
    conn: AsyncConnection, r: Redaction, rows: Sequence[Sequence[Any]], *, summary: bool
) -> tuple[list[str], list[str]]:
    group_ids = {x[COLUMN_INDEX["group_id"]] for x in rows}
    kinds = await group_kinds(conn, r.tenant, r.session_id, group_ids)
    redacted: list[str] = []
    cleared: list[str] = []
    for row in rows:
        kind = kinds.get(row[COLUMN_INDEX["group_id"]])
        stored = stored_message(row, kind, tenant=r.tenant, session_id=r.session_id)
        if is_tombstone(stored.message):
            continue
        grave = tombstone(stored.message, reason=r.reason, event_id=r.event_id, summary=summary)
        await _write_tombstone(conn, r, stored.seq, grave)
        redacted.append(stored.message_id)
        if stored.reduced is not None or stored.reduced_token_count is not None:
            cleared.append(stored.message_id)
    return redacted, cleared


async def redact_messages(conn: AsyncConnection, r: Redaction) -> RedactReport:
    """Replace the messages by their tombstones, and the summaries covering them; clear
    their reductions, rebuild the totals and audit it (in the caller's transaction)."""
    session: RowMapping = await lock_session(conn, r.tenant, r.session_id)
    check_tokenizer(session["tokenizer"], r.tokenizer, r.session_id)
    rows = await _rows(conn, r, MESSAGES.c.message_id, r.message_ids)
    found = {row[COLUMN_INDEX["message_id"]] for row in rows}
    unknown = [m for m in r.message_ids if m not in found]
    if unknown:
        raise InvalidInput(f"unknown message ids in session {r.session_id!r}: {unknown}")
    await erase_step(conn)
    redacted, cleared = await _tombstone_rows(conn, r, rows, summary=False)
    groups = {row[COLUMN_INDEX["group_id"]] for row in rows}
    covering = covering_summaries(await _summaries(conn, r), groups)
    summaries: list[str] = []
    if covering:
        summary_rows = await _rows(conn, r, MESSAGES.c.group_id, covering)
        summaries, more = await _tombstone_rows(conn, r, summary_rows, summary=True)
        cleared.extend(more)
    event = None
    if redacted or summaries:
        await rebuild_totals(conn, r.tenant, r.session_id)
        params: dict[str, Any] = {
            "reason": r.reason,
            "message_ids": redacted,
            "summaries": summaries,
            "reductions_cleared": cleared,
        }
        event = await record_event(
            conn,
            r.tenant,
            r.session_id,
            session,
            event_id=r.event_id,
            strategy="redact",
            params=params,
            now=r.now,
        )
    after = await lock_session(conn, r.tenant, r.session_id)
    return RedactReport(
        session_id=r.session_id,
        tenant=r.tenant,
        reason=r.reason,
        redacted=tuple(redacted),
        summaries=tuple(summaries),
        reductions_cleared=tuple(cleared),
        tokens_before=session["stored_tokens"],
        tokens_after=after["stored_tokens"],
        event=event,
    )
