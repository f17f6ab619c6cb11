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

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Text, delete, func, null, select, text, type_coerce
from sqlalchemy import cast as sql_cast
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store.errors import InvalidInput
from store.models import PurgeReport, RedactReport
from store.rules.checks import check_tokenizer
from store.rules.erasure import REDACTED_TEXT, covering_summaries, tombstone
from store.rules.identity import REDACTED_HASH, is_tombstone
from store.search.recall import RECALL_KEY, quoting
from store.sql import dialect
from store.sql.audit import record_event
from store.sql.branches.deleting import collect, count_kept, keep_for_forks, owners_read_by
from store.sql.codec import (
    ENCODED,
    decode_event_params,
    encode_contents,
    encode_event_params,
    encode_metadata,
)
from store.sql.drivers.poolers import schema_of
from store.sql.history import group_kinds
from store.sql.mapping import COLUMN_INDEX, message_columns, original_message, stored_message
from store.sql.schema import (
    EVENTS,
    GROUPS,
    MESSAGES,
    SESSION_CHILD_TABLES,
    SESSIONS,
    USAGE,
)
from store.sql.search.index import erase_from_index
from store.sql.sessions import lock_session
from store.sql.statements import CHUNK, chunks
from store.sql.upkeep.recount import rebuild_totals
from strategies.messages import Message

__all__ = [
    "FILE_ERASED_KEY",
    "PURGE_BATCH",
    "QUARANTINE_COPIES_KEY",
    "Redaction",
    "confirm_file_erasure",
    "erase_step",
    "erase_words",
    "finish_redaction",
    "forget_hashes",
    "leftover_copies",
    "leftover_hashes",
    "pending_file_erasures",
    "purge_sessions",
    "redact_messages",
    "scrub_copies",
    "vacuum",
    "write_tombstone",
]

_log = logging.getLogger("store.sql.upkeep.erasure")

PURGE_BATCH = CHUNK
"""Sessions a purge removes per transaction."""


async def erase_step(conn: AsyncConnection) -> None:
    """Make the current write transaction zero what it frees, where the database can."""
    if dialect.of(conn).secure_delete:
        await conn.execute(text("PRAGMA secure_delete = ON"))


async def erase_words(conn: AsyncConnection) -> None:
    """At the end of an erasing transaction: the erased words leave the search index's
    pages too (:func:`~store.sql.search.index.erase_from_index`)."""
    await conn.run_sync(erase_from_index)


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
        # named in the engine's schema: outside a transaction, a connection behind a
        # transaction pooler has no search_path of its own
        schema = schema_of(engine.dialect)
        prefix = "" if schema is None else preparer.quote_schema(schema) + "."
        for table in (*SESSION_CHILD_TABLES, SESSIONS):
            await _outside_transactions(engine, f"VACUUM {prefix}{preparer.format_table(table)}")
    else:
        await _outside_transactions(engine, "VACUUM")
    await checkpoint(engine)


# --- purge ---------------------------------------------------------------------------


async def _counts(
    conn: AsyncConnection, tenant: str, ids: Sequence[str]
) -> tuple[int, int, int, int]:
    found = []
    for table in (MESSAGES, GROUPS, EVENTS, USAGE):
        query = select(func.count()).where(table.c.tenant == tenant, table.c.session_id.in_(ids))
        found.append(int((await conn.execute(query)).scalar_one()))
    return found[0], found[1], found[2], found[3]


def _doomed(tenant: str, cutoff: datetime, after: str | None, *, lock: bool) -> Any:
    query = select(SESSIONS.c.session_id).where(
        SESSIONS.c.tenant == tenant,
        SESSIONS.c.updated_at < cutoff,
        SESSIONS.c.branch.is_distinct_from("kept"),  # held for forks: goes with the last
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
    kept: int = 0
    usage: int = 0

    def add(self, ids: Sequence[str], counts: tuple[int, int, int, int]) -> None:
        self.sessions.extend(ids)
        self.messages += counts[0]
        self.groups += counts[1]
        self.events += counts[2]
        self.usage += counts[3]

    def report(self, tenant: str, cutoff: datetime, *, dry_run: bool) -> PurgeReport:
        return PurgeReport(
            tenant=tenant,
            older_than=cutoff,
            dry_run=dry_run,
            sessions=tuple(self.sessions),
            messages=self.messages - self.kept,
            groups=self.groups,
            events=self.events,
            kept_messages=self.kept,
            usage_calls=self.usage,
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
    if dry_run:
        tally.kept += await count_kept(conn, tenant, ids)
    else:
        await erase_step(conn)
        owners = await owners_read_by(conn, tenant, ids)
        tally.kept += await keep_for_forks(conn, tenant, ids)
        for table in (*SESSION_CHILD_TABLES, SESSIONS):
            await conn.execute(
                delete(table).where(table.c.tenant == tenant, table.c.session_id.in_(ids))
            )
        await collect(conn, tenant, owners - set(ids))
        await erase_words(conn)
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

    first = True

    async def batch(conn: AsyncConnection) -> bool:
        # the calls of sessions never stored go in each batch's transaction (a purge of
        # one batch is one commit); counted once without deleting on a dry run
        nonlocal first
        if first or not dry_run:
            tally.usage += await purge_orphan_usage(conn, tenant, cutoff, dry_run=dry_run)
            first = False
        return await purge_batch(conn, tenant, cutoff, tally, dry_run=dry_run)

    while await run(batch):
        pass
    return tally.report(tenant, cutoff, dry_run=dry_run)


async def purge_orphan_usage(
    conn: AsyncConnection, tenant: str, cutoff: datetime, *, dry_run: bool
) -> int:
    """Remove (or count) the usage rows of sessions never stored whose calls were all
    recorded before ``cutoff``; how many."""
    stored = (
        select(SESSIONS.c.session_id)
        .where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == USAGE.c.session_id)
        .exists()
    )
    orphans = (
        select(USAGE.c.session_id)
        .where(USAGE.c.tenant == tenant, ~stored)
        .group_by(USAGE.c.session_id)
        .having(func.max(USAGE.c.recorded_at) < cutoff)
    )
    mine = (USAGE.c.tenant == tenant) & USAGE.c.session_id.in_(orphans)
    if dry_run:
        return int((await conn.execute(select(func.count()).where(mine))).scalar_one())
    return int((await conn.execute(delete(USAGE).where(mine))).rowcount or 0)


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


FILE_ERASED_KEY = "file_erased"
"""The key, in a redaction event's parameters, of whether the redacted text has left the
database's files: recorded False where a write-ahead log keeps the old pages until a
checkpoint (SQLite), set True once a checkpoint has truncated the log since; absent
elsewhere. ``doctor`` reports a redaction left False (``erasure_pending``)."""

QUARANTINE_COPIES_KEY = "quarantined"
"""The key, in a ``doctor`` event's parameters, of the rows it kept verbatim."""


async def _events(
    conn: AsyncConnection, tenant: str, session_id: str, strategy: str
) -> list[tuple[str, dict[str, Any]]]:
    """The session's events of ``strategy``, oldest first, with their parameters."""
    query = (
        select(EVENTS.c.event_id, sql_cast(EVENTS.c.params, Text))
        .where(EVENTS.c.tenant == tenant, EVENTS.c.session_id == session_id)
        .where(EVENTS.c.strategy == strategy)
        .order_by(EVENTS.c.number)
    )
    return [
        (row[0], decode_event_params(tenant, session_id, row[0], row[1]))
        for row in await conn.execute(query)
    ]


async def _set_params(
    conn: AsyncConnection, tenant: str, session_id: str, event_id: str, params: dict[str, Any]
) -> None:
    encoded = encode_event_params(tenant, session_id, event_id, params)
    await conn.execute(
        EVENTS.update()
        .where(EVENTS.c.tenant == tenant, EVENTS.c.session_id == session_id)
        .where(EVENTS.c.event_id == event_id)
        .values(params=type_coerce(encoded, ENCODED))
    )


def _copies(params: dict[str, Any], wanted: dict[str, str]) -> list[dict[str, Any]]:
    """The quarantine copies in a ``doctor`` event's ``params`` of the rows whose id
    (as the copy keeps it: JSON-escaped) is a key of ``wanted``, still holding more than
    the id."""
    kept = params.get(QUARANTINE_COPIES_KEY)
    if not isinstance(kept, list):
        return []
    return [
        entry
        for entry in kept
        if isinstance(entry, dict)
        and isinstance(columns := entry.get("columns"), dict)
        and columns.get("message_id") in wanted
        and (len(columns) > 1 or entry.get("error") != REDACTED_TEXT)
    ]


def _escaped(message_ids: Sequence[str]) -> dict[str, str]:
    """Each id as a quarantine copy keeps it (JSON text), to the id."""
    return {json.dumps(m): m for m in message_ids}


async def leftover_copies(
    conn: AsyncConnection, tenant: str, session_id: str, message_ids: Sequence[str]
) -> dict[str, list[str]]:
    """The ``doctor`` events that still keep a quarantine copy of any of
    ``message_ids``, each with the ids it keeps."""
    wanted = _escaped(message_ids)
    found: dict[str, list[str]] = {}
    for event_id, params in await _events(conn, tenant, session_id, "doctor"):
        copies = _copies(params, wanted)
        if copies:
            found[event_id] = [wanted[c["columns"]["message_id"]] for c in copies]
    return found


async def scrub_copies(
    conn: AsyncConnection, tenant: str, session_id: str, message_ids: Sequence[str], by: str
) -> list[str]:
    """Erase the quarantine copies of ``message_ids`` that ``doctor`` events keep (only
    the id stays, with ``redacted_by``: the event ``by``); the ids whose copies went."""
    wanted = _escaped(message_ids)
    erased: list[str] = []
    for event_id, params in await _events(conn, tenant, session_id, "doctor"):
        copies = _copies(params, wanted)
        for entry in copies:
            escaped = entry["columns"]["message_id"]
            entry["columns"] = {"message_id": escaped}
            entry["error"] = REDACTED_TEXT
            entry["redacted_by"] = by
            erased.append(wanted[escaped])
        if copies:
            await _set_params(conn, tenant, session_id, event_id, params)
    return list(dict.fromkeys(erased))


async def leftover_hashes(
    conn: AsyncConnection, tenant: str, session_id: str, message_ids: Sequence[str]
) -> list[str]:
    """The ids among ``message_ids`` (tombstones) whose row still keeps a content hash
    (an older release kept the hash of the message a tombstone replaced)."""
    found: list[str] = []
    for part in chunks(sorted(message_ids)):
        query = select(MESSAGES.c.message_id).where(
            MESSAGES.c.tenant == tenant,
            MESSAGES.c.session_id == session_id,
            MESSAGES.c.message_id.in_(part),
            MESSAGES.c.content_hash != REDACTED_HASH,
        )
        found.extend((await conn.execute(query)).scalars())
    return found


async def forget_hashes(
    conn: AsyncConnection, tenant: str, session_id: str, message_ids: Sequence[str]
) -> None:
    """Replace the content hash the rows of ``message_ids`` (tombstones) keep by
    :data:`~store.rules.identity.REDACTED_HASH`."""
    for part in chunks(sorted(message_ids)):
        await conn.execute(
            MESSAGES.update()
            .where(MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == session_id)
            .where(MESSAGES.c.message_id.in_(part))
            .values(content_hash=REDACTED_HASH)
        )


async def pending_file_erasures(conn: AsyncConnection, tenant: str, session_id: str) -> list[str]:
    """The session's redaction events whose text may still be in the write-ahead log
    (:data:`FILE_ERASED_KEY` False)."""
    return [
        event_id
        for event_id, params in await _events(conn, tenant, session_id, "redact")
        if params.get(FILE_ERASED_KEY) is False
    ]


async def confirm_file_erasure(
    conn: AsyncConnection, tenant: str, session_id: str, event_ids: Sequence[str]
) -> None:
    """Record that the redactions ``event_ids`` have left the database's files."""
    wanted = set(event_ids)
    for event_id, params in await _events(conn, tenant, session_id, "redact"):
        if event_id in wanted and params.get(FILE_ERASED_KEY) is False:
            await _set_params(conn, tenant, session_id, event_id, {**params, FILE_ERASED_KEY: True})


async def finish_redaction(
    engine: AsyncEngine,
    run: Callable[[Callable[[AsyncConnection], Any]], Any],
    tenant: str,
    session_id: str,
) -> bool:
    """Checkpoint and truncate the write-ahead log, where there is one, and record the
    session's redactions as erased from the files when it was truncated (``run`` runs a
    write transaction: the store's write loop); False when a reader kept the log."""
    if not dialect.capabilities(engine.dialect).wal_checkpoint:
        return True
    async with engine.connect() as conn:
        pending = await pending_file_erasures(conn, tenant, session_id)
    done = await checkpoint(engine)
    if done and pending:

        async def confirm(conn: AsyncConnection) -> None:
            await confirm_file_erasure(conn, tenant, session_id, pending)

        await run(confirm)
    return done


async def recall_results_quoting(
    conn: AsyncConnection, tenant: str, session_id: str, message_ids: Sequence[str]
) -> list[str]:
    """The session's own messages holding a recall result that quotes one of
    ``message_ids`` (redacted with them)."""
    m = MESSAGES.c
    marked = sql_cast(m.contents, Text).like(f"%{RECALL_KEY}%")
    query = select(m.session_id, *message_columns()).where(
        m.tenant == tenant, m.session_id == session_id, marked
    )
    messages = [
        original_message(row[1:], tenant=tenant, session_id=session_id)
        for row in await conn.execute(query)
    ]
    return [m for m in quoting(messages, message_ids) if m not in message_ids]


async def write_tombstone(conn: AsyncConnection, r: Redaction, seq: int, message: Message) -> None:
    """Write ``message``, a tombstone, into the row ``seq`` of ``r``'s session."""
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
            content_hash=REDACTED_HASH,
            token_count=r.count(message),
            search_text=None,
            reduced_contents=null(),  # SQL NULL, not JSON null
            reduced_token_count=None,
            reduced_event_id=None,
        )
    )


async def _tombstone_rows(
    conn: AsyncConnection,
    r: Redaction,
    rows: Sequence[Sequence[Any]],
    buried: list[str],
    *,
    summary: bool,
) -> tuple[list[str], list[str]]:
    group_ids = {x[COLUMN_INDEX["group_id"]] for x in rows}
    kinds = await group_kinds(conn, r.tenant, r.session_id, group_ids)
    redacted: list[str] = []
    cleared: list[str] = []
    for row in rows:
        kind = kinds.get(row[COLUMN_INDEX["group_id"]])
        stored = stored_message(row, kind, tenant=r.tenant, session_id=r.session_id)
        if is_tombstone(stored.message):
            buried.append(stored.message_id)
            continue
        grave = tombstone(stored.message, reason=r.reason, event_id=r.event_id, summary=summary)
        await write_tombstone(conn, r, stored.seq, grave)
        redacted.append(stored.message_id)
        if stored.reduced is not None or stored.reduced_token_count is not None:
            cleared.append(stored.message_id)
    return redacted, cleared


async def _erase_leftovers(conn: AsyncConnection, r: Redaction, buried: Sequence[str]) -> list[str]:
    """Erase what an earlier redaction of ``buried`` (messages already redacted) left: a
    content hash (kept by older releases) and ``doctor``'s quarantine copies; the ids
    whose leftovers went."""
    hashed = await leftover_hashes(conn, r.tenant, r.session_id, buried)
    if hashed:
        await forget_hashes(conn, r.tenant, r.session_id, hashed)
    copied = await scrub_copies(conn, r.tenant, r.session_id, buried, r.event_id)
    return sorted({*hashed, *copied})


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
    buried: list[str] = []
    redacted, cleared = await _tombstone_rows(conn, r, rows, buried, summary=False)
    groups = {row[COLUMN_INDEX["group_id"]] for row in rows}
    covering = covering_summaries(await _summaries(conn, r), groups)
    summaries: list[str] = []
    if covering:
        summary_rows = await _rows(conn, r, MESSAGES.c.group_id, covering)
        summaries, more = await _tombstone_rows(conn, r, summary_rows, buried, summary=True)
        cleared.extend(more)
    leftovers = await _erase_leftovers(conn, r, buried)
    copies = await scrub_copies(conn, r.tenant, r.session_id, redacted, r.event_id)
    event = None
    if redacted or summaries or leftovers:
        await rebuild_totals(conn, r.tenant, r.session_id)
        params: dict[str, Any] = {
            "reason": r.reason,
            "message_ids": redacted,
            "summaries": summaries,
            "reductions_cleared": cleared,
        }
        if leftovers:
            params["leftovers"] = leftovers
        if copies:
            params["quarantine_copies"] = copies
        if dialect.of(conn).wal_checkpoint:
            params[FILE_ERASED_KEY] = False
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
        leftovers=tuple(leftovers),
        tokens_before=session["stored_tokens"],
        tokens_after=after["stored_tokens"],
        event=event,
    )
