"""The search index of a database: its setting, its DDL, filling it, erasing from it.

Every message row carries ``search_text`` (:func:`store.search.indexable_text`,
written with the row by every append, import and summary; None for a tombstone or a
recall result). The index over that column is a property of the whole database,
``search`` in ``chatledger_settings``:

* SQLite: the FTS5 table ``chatledger_search`` (``unicode61``, no diacritics folding:
  the text is folded already) with the messages table as its external content, kept in
  step by three triggers on ``chatledger_messages`` (insert, delete, update of
  ``search_text``), so that every write path, a moved row included, keeps it current in
  the same transaction. Where the SQLite library has FTS5's ``secure-delete`` (3.44),
  a deleted text leaves the index's pages at once; otherwise :func:`erase_from_index`
  merges the index (``optimize``) after an erasure, so its old pages are freed and, with
  ``secure_delete``, zeroed.
* PostgreSQL: the table ``chatledger_search_vectors``, one row a searchable message
  (its key and ``to_tsvector('simple', search_text)``, stored so that ranking reads it
  instead of parsing every matching text again: 13 times faster on a query matching
  14% of 100,000 messages), and the GIN index ``chatledger_search_vectors_gin`` on it;
  no extension. Three triggers on ``chatledger_messages`` keep it in step in the same
  transaction: a statement's inserted rows and deleted rows (each one statement over
  the statement's transition table, so that an import's batch is indexed in one
  ``INSERT ... SELECT``), and a row whose key or ``search_text`` an update names (a
  moved row, a redaction). The vectors live beside the rows, not in them, so that an
  update the index does not care about (a compaction excluding rows, which changes an
  indexed column of the messages table and so rewrites every index entry of the row)
  leaves the GIN index alone: with the vector in the row, excluding 300 messages took
  337 ms instead of 2. A deleted or redacted row's entries go when ``VACUUM`` reclaims
  the dead vector row, which frees but never zeroes it.

Turning search off drops the index (the column stays, so turning it on again builds
the index from it without reading a message).
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Final

from sqlalchemy import and_, func, select, tuple_, update
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store.errors import InvalidInput
from store.search.text import search_text_of
from store.sql import dialect
from store.sql.mapping import message_columns, original_message
from store.sql.schema import MESSAGES, SETTINGS, TENANT_KEYS

__all__ = [
    "FTS_TABLE",
    "GIN_INDEX",
    "INDEX_OBJECTS",
    "SEARCH_OFF",
    "VECTOR_TABLE",
    "create_index",
    "cursor_key",
    "drop_index",
    "ensure_cursor_key",
    "erase_from_index",
    "fill_search_text",
    "index_missing",
    "search_setting",
    "set_search",
    "switch_search",
]

log = logging.getLogger("chatledger.search")

FTS_TABLE: Final = "chatledger_search"
VECTOR_TABLE: Final = "chatledger_search_vectors"
GIN_INDEX: Final = "chatledger_search_vectors_gin"
INDEX_OBJECTS: Final = (FTS_TABLE, VECTOR_TABLE, GIN_INDEX)
"""Names of the index's objects, which the schema's metadata does not hold (the drift
check leaves them, and FTS5's own tables, alone)."""
FILL_BATCH: Final = 2000
SEARCH_OFF: Final = "search is off in this database: `chatledger db search on` builds its index"


def index_missing(error: BaseException) -> bool:
    """Whether a database error says that the index is not there (search turned off
    by another process since this one read the setting)."""
    text = str(getattr(error, "orig", error))
    return FTS_TABLE in text


_FTS5_DDL: Final = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(search_text, "
    "content='chatledger_messages', tokenize='unicode61 remove_diacritics 0')",
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_inserted AFTER INSERT ON chatledger_messages "
    f"WHEN new.search_text IS NOT NULL BEGIN INSERT INTO {FTS_TABLE}(rowid, search_text) "
    "VALUES (new.rowid, new.search_text); END",
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_deleted AFTER DELETE ON chatledger_messages "
    f"WHEN old.search_text IS NOT NULL BEGIN INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, "
    "search_text) VALUES ('delete', old.rowid, old.search_text); END",
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_updated AFTER UPDATE OF search_text ON "
    f"chatledger_messages BEGIN INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, search_text) "
    "SELECT 'delete', old.rowid, old.search_text WHERE old.search_text IS NOT NULL; "
    f"INSERT INTO {FTS_TABLE}(rowid, search_text) SELECT new.rowid, new.search_text "
    "WHERE new.search_text IS NOT NULL; END",
)
_FTS5_DROP: Final = (
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_inserted",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_deleted",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_updated",
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
)
_KEY_MATCH: Final = "v.tenant = {r}.tenant AND v.session_id = {r}.session_id AND v.seq = {r}.seq"
_VECTOR_OF: Final = "to_tsvector('simple'::regconfig, {r}.search_text)"
_GIN_DDL: Final = (
    f"CREATE TABLE IF NOT EXISTS {VECTOR_TABLE} (tenant varchar(255) NOT NULL, "
    "session_id varchar(255) NOT NULL, seq bigint NOT NULL, vector tsvector NOT NULL, "
    f"CONSTRAINT {VECTOR_TABLE}_pkey PRIMARY KEY (tenant, session_id, seq))",
    f"INSERT INTO {VECTOR_TABLE} (tenant, session_id, seq, vector) "
    f"SELECT m.tenant, m.session_id, m.seq, {_VECTOR_OF.format(r='m')} "
    "FROM chatledger_messages m WHERE m.search_text IS NOT NULL "
    f"AND NOT EXISTS (SELECT 1 FROM {VECTOR_TABLE} v WHERE {_KEY_MATCH.format(r='m')})",
    f"CREATE INDEX IF NOT EXISTS {GIN_INDEX} ON {VECTOR_TABLE} USING gin (vector)",
    f"CREATE OR REPLACE FUNCTION {VECTOR_TABLE}_inserted() RETURNS trigger "
    f"LANGUAGE plpgsql AS $$ BEGIN INSERT INTO {VECTOR_TABLE} (tenant, session_id, seq, "
    f"vector) SELECT r.tenant, r.session_id, r.seq, {_VECTOR_OF.format(r='r')} "
    "FROM inserted_rows r WHERE r.search_text IS NOT NULL; RETURN NULL; END $$",
    f"CREATE OR REPLACE FUNCTION {VECTOR_TABLE}_deleted() RETURNS trigger "
    f"LANGUAGE plpgsql AS $$ BEGIN DELETE FROM {VECTOR_TABLE} v USING deleted_rows r "
    f"WHERE {_KEY_MATCH.format(r='r')} AND r.search_text IS NOT NULL; RETURN NULL; END $$",
    f"CREATE OR REPLACE FUNCTION {VECTOR_TABLE}_updated() RETURNS trigger "
    f"LANGUAGE plpgsql AS $$ BEGIN DELETE FROM {VECTOR_TABLE} v WHERE "
    f"{_KEY_MATCH.format(r='OLD')}; IF NEW.search_text IS NOT NULL THEN INSERT INTO "
    f"{VECTOR_TABLE} (tenant, session_id, seq, vector) VALUES (NEW.tenant, "
    f"NEW.session_id, NEW.seq, {_VECTOR_OF.format(r='NEW')}); END IF; RETURN NULL; END $$",
    f"DROP TRIGGER IF EXISTS {VECTOR_TABLE}_inserted ON chatledger_messages",
    f"CREATE TRIGGER {VECTOR_TABLE}_inserted AFTER INSERT ON chatledger_messages "
    "REFERENCING NEW TABLE AS inserted_rows FOR EACH STATEMENT "
    f"EXECUTE FUNCTION {VECTOR_TABLE}_inserted()",
    f"DROP TRIGGER IF EXISTS {VECTOR_TABLE}_deleted ON chatledger_messages",
    f"CREATE TRIGGER {VECTOR_TABLE}_deleted AFTER DELETE ON chatledger_messages "
    "REFERENCING OLD TABLE AS deleted_rows FOR EACH STATEMENT "
    f"EXECUTE FUNCTION {VECTOR_TABLE}_deleted()",
    f"DROP TRIGGER IF EXISTS {VECTOR_TABLE}_updated ON chatledger_messages",
    f"CREATE TRIGGER {VECTOR_TABLE}_updated AFTER UPDATE OF tenant, session_id, seq, "
    "search_text ON chatledger_messages FOR EACH ROW WHEN (OLD.search_text IS DISTINCT "
    "FROM NEW.search_text OR OLD.tenant <> NEW.tenant OR OLD.session_id <> NEW.session_id "
    f"OR OLD.seq <> NEW.seq) EXECUTE FUNCTION {VECTOR_TABLE}_updated()",
)
"""The vectors' table filled from the rows (those it lacks), its GIN index built after
the fill (faster than entry by entry), then the functions and triggers that keep it in
step. A row's update is handled row by row: PostgreSQL checks the messages' key as
each row changes, so no moved row's new key can still be another row's in the vectors'
table when its trigger runs."""
_GIN_DROP: Final = (
    *(
        f"DROP TRIGGER IF EXISTS {VECTOR_TABLE}_{what} ON chatledger_messages"
        for what in ("inserted", "deleted", "updated")
    ),
    *(
        f"DROP FUNCTION IF EXISTS {VECTOR_TABLE}_{what}()"
        for what in ("inserted", "deleted", "updated")
    ),
    f"DROP TABLE IF EXISTS {VECTOR_TABLE}",
)


def _secure_delete(conn: Connection) -> bool:
    """Whether this SQLite library's FTS5 has ``secure-delete`` (3.44 and later)."""
    version = conn.exec_driver_sql("SELECT sqlite_version()").scalar_one()
    return tuple(int(p) for p in str(version).split(".")[:2]) >= (3, 44)


def create_index(conn: Connection) -> None:
    """Create the index over the rows' ``search_text`` (nothing when it exists)."""
    caps = dialect.capabilities(conn.dialect)
    if caps.full_text == "tsvector":
        for statement in _GIN_DDL:
            conn.exec_driver_sql(statement)
        return
    exists = conn.exec_driver_sql(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (FTS_TABLE,)
    ).scalar_one()
    for statement in _FTS5_DDL:
        conn.exec_driver_sql(statement)
    if not exists:
        if _secure_delete(conn):
            conn.exec_driver_sql(
                f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rank) VALUES ('secure-delete', 1)"
            )
        conn.exec_driver_sql(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")


def drop_index(conn: Connection) -> None:
    """Drop the index (the rows keep their ``search_text``)."""
    caps = dialect.capabilities(conn.dialect)
    for statement in _GIN_DROP if caps.full_text == "tsvector" else _FTS5_DROP:
        conn.exec_driver_sql(statement)


def _setting(conn: Connection, name: str) -> str | None:
    found = conn.execute(select(SETTINGS.c.value).where(SETTINGS.c.name == name)).scalar()
    return None if found is None else str(found)


def _put(conn: Connection, name: str, value: str) -> None:
    if _setting(conn, name) is None:
        conn.execute(SETTINGS.insert().values(name=name, value=value))
    else:
        conn.execute(update(SETTINGS).where(SETTINGS.c.name == name).values(value=value))


def search_setting(conn: Connection) -> bool:
    """Whether search is on in this database."""
    return _setting(conn, "search") != "off"


def set_search(conn: Connection, on: bool) -> None:
    """Turn search on (the index built) or off (the index dropped)."""
    if on:
        create_index(conn)
    else:
        drop_index(conn)
    _put(conn, "search", "on" if on else "off")


def ensure_cursor_key(conn: Connection) -> None:
    """Give the database its cursor key when it has none."""
    if _setting(conn, "cursor_key") is None:
        _put(conn, "cursor_key", secrets.token_hex(32))


async def cursor_key(conn: AsyncConnection) -> bytes:
    """The key that signs this database's search cursors; refuses when search is off."""
    found = await conn.execute(select(SETTINGS.c.name, SETTINGS.c.value))
    rows = {str(name): str(value) for name, value in found}
    if rows.get("search") == "off":
        raise InvalidInput(SEARCH_OFF)
    key = rows.get("cursor_key")
    if key is None:
        raise InvalidInput("this database has no search index yet: run `chatledger db upgrade`")
    return bytes.fromhex(key)


def fill_search_text(
    conn: Connection, *, batch: int = FILL_BATCH, encrypted_tenants: bool = True
) -> int:
    """Fill ``search_text`` of the rows that have none (written before search, or by an
    earlier release), ``batch`` rows a statement, logging progress; the rows filled.
    An encrypted tenant's rows keep none (``encrypted_tenants``: the database may have
    some, false before revision 0014 made them possible)."""
    m = MESSAGES.c
    key = (m.tenant, m.session_id, m.seq)
    unfilled: Any = m.search_text.is_(None)
    if encrypted_tenants:
        unfilled = and_(unfilled, m.tenant.not_in(select(TENANT_KEYS.c.tenant)))
    total = conn.execute(select(func.count()).where(unfilled)).scalar_one()
    done = filled = 0
    last: tuple[str, str, int] | None = None
    while True:
        query = select(*key, *message_columns()).where(unfilled).order_by(*key).limit(batch)
        if last is not None:
            query = query.where(tuple_(*key) > tuple_(*last))
        rows = conn.execute(query).all()
        if not rows:
            break
        for tenant, session_id, seq, *columns in rows:
            message = original_message(columns, tenant=tenant, session_id=session_id)
            text = search_text_of(message)
            if text is not None:
                where = (m.tenant == tenant, m.session_id == session_id, m.seq == seq)
                conn.execute(update(MESSAGES).where(*where).values(search_text=text))
                filled += 1
        done += len(rows)
        last = (rows[-1][0], rows[-1][1], int(rows[-1][2]))
        log.info("search index: %s of %s messages read", f"{done:,}", f"{total:,}")
    return filled


def erase_from_index(conn: Connection) -> None:
    """After an erasure (redaction, purge) on SQLite without FTS5's ``secure-delete``:
    merge the index so the pages that held the erased words are freed (and, with
    ``secure_delete``, zeroed). Nothing on PostgreSQL, or without an index."""
    caps = dialect.capabilities(conn.dialect)
    if caps.full_text != "fts5" or _secure_delete(conn):
        return
    exists = conn.exec_driver_sql(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (FTS_TABLE,)
    ).scalar_one()
    if exists:
        conn.exec_driver_sql(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")


async def switch_search(engine: AsyncEngine, on: bool) -> int:
    """Turn search on (rows without ``search_text`` filled, the index built) or off (the
    index dropped), in one transaction; the rows filled."""
    async with engine.begin() as conn:

        def step(sync: Connection) -> int:
            filled = fill_search_text(sync) if on else 0
            set_search(sync, on)
            return filled

        return await conn.run_sync(step)
