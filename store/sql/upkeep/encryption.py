"""Encrypting a tenant in place, rotating its keys, and the audit of both.

Each job is a key event (``chatledger_key_events``): started ``running``, its progress
and resume point (``cursor``) written in the same transaction as each batch of rows it
rewrites, ``done`` at the end. Killed at any point, the job is continued by running it
again: the running event is found and its cursor followed, and a row is rewritten only
where it still needs it (a text is sealed once, and sealed again under the new data key
only where another key sealed it), so nothing is done twice and nothing is missed.

* :func:`encrypt_tenant` marks the tenant ``encrypting`` (from then on a store without
  the key refuses it, and one with the key too, until the end), seals every text of its
  rows, replaces its content hashes by keyed ones, drops what it kept searchable and
  the digests of its usage ledger, then checks that no text is left in clear (rows a
  process opened before the mark wrote meanwhile are sealed in another pass) and marks
  it ``encrypted``. On SQLite its transactions zero what they free, the search index is
  merged and the write-ahead log checkpointed, as an erasure's are
  (:mod:`store.sql.upkeep.erasure`): no clear text is left in the file's pages. Run
  on a tenant encrypted already, it makes the same pass, as an event of its own, and
  seals what a process opened without the key before the mark wrote since.
* :func:`rotate_tenant_key` makes a new data key current at once (new texts are sealed
  with it; reads of the others keep working, each text naming its key), then seals again
  under it every text another key sealed. The older keys stay in the database: a process
  still sealing with one (opened before the rotation) writes rows that stay readable,
  and the next rotation seals them again.
* :func:`rotate_kek` rewraps every data key and hash key under the provider's current
  key: no row is rewritten.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Table, Text, func, select, tuple_, type_coerce, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store.encryption.sealing import KeyRing, Sealing, is_sealed
from store.errors import CorruptRowError, InvalidInput
from store.rules.identity import keyed_hashing, stored_hash
from store.rules.records import now
from store.sql.codec import ENCODED
from store.sql.drivers.engine import write_connection
from store.sql.keys import (
    ENCRYPTED,
    ENCRYPTING,
    add_key,
    mark_tenant,
    read_keys,
    read_mark,
    sealing_of,
)
from store.sql.mapping import message_columns, original_message
from store.sql.schema import (
    BRANCH_ROWS,
    EVENTS,
    KEY_EVENTS,
    KEYS,
    MESSAGES,
    SESSIONS,
    TENANT_KEYS,
    USAGE,
)
from store.sql.upkeep.erasure import checkpoint, erase_step, erase_words

__all__ = [
    "KeyEvent",
    "encrypt_tenant",
    "key_events",
    "rotate_kek",
    "rotate_tenant_key",
]

Progress = Callable[[int, int], None]
"""``progress(done, total)``: rows rewritten so far of those to look at."""

KeyEventKind = Literal["encrypt", "rotate_kek", "rotate_data_key"]


class KeyEvent(BaseModel):
    """A job on a tenant's keys and rows (``chatledger keys events``)."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    tenant: str | None
    """None for a rotation of the provider's key (every tenant's keys)."""
    kind: KeyEventKind
    state: Literal["running", "done"]
    started_at: datetime
    finished_at: datetime | None
    rows: int
    """Rows (or keys, for ``rotate_kek``) rewritten so far."""
    total: int | None
    """The rows (or keys) there were to look at when the job started, when known."""
    key_id: str | None
    """The provider's key (KEK) the job wrapped under."""
    data_key_id: str | None
    """The data key the job sealed under (``encrypt``, ``rotate_data_key``)."""


# --- the events ---------------------------------------------------------------------


def _event(row: Any) -> KeyEvent:
    return KeyEvent(
        event_id=row.event_id,
        tenant=row.tenant,
        kind=row.kind,
        state=row.state,
        started_at=row.started_at,
        finished_at=row.finished_at,
        rows=int(row.rows),
        total=None if row.total is None else int(row.total),
        key_id=row.kek_id,
        data_key_id=row.data_key_id,
    )


async def _running(conn: AsyncConnection, tenant: str | None, kind: str) -> Any:
    e = KEY_EVENTS.c
    owner = e.tenant.is_(None) if tenant is None else e.tenant == tenant
    query = select(KEY_EVENTS).where(owner, e.kind == kind, e.state == "running")
    return (await conn.execute(query.order_by(e.started_at.desc()))).first()


async def _start(
    conn: AsyncConnection,
    tenant: str | None,
    kind: str,
    *,
    total: int | None,
    kek_id: str | None,
    data_key_id: str | None,
) -> str:
    event_id = f"key-{secrets.token_hex(8)}"
    await conn.execute(
        KEY_EVENTS.insert().values(
            event_id=event_id,
            tenant=tenant,
            kind=kind,
            state="running",
            started_at=now(),
            rows=0,
            total=total,
            kek_id=kek_id,
            data_key_id=data_key_id,
        )
    )
    return event_id


async def _advance(
    conn: AsyncConnection, event_id: str, rows: int, cursor: dict[str, Any] | None
) -> None:
    e = KEY_EVENTS.c
    await conn.execute(
        update(KEY_EVENTS)
        .where(e.event_id == event_id)
        .values(rows=e.rows + rows, cursor=None if cursor is None else json.dumps(cursor))
    )


async def _finish(conn: AsyncConnection, event_id: str) -> None:
    await conn.execute(
        update(KEY_EVENTS)
        .where(KEY_EVENTS.c.event_id == event_id)
        .values(state="done", finished_at=now(), cursor=None)
    )


async def _job(
    conn: AsyncConnection,
    tenant: str,
    kind: str,
    encryption: KeyRing,
    data_key_id: str | None,
) -> tuple[str, int, dict[str, Any] | None, int]:
    """The tenant's running job of ``kind`` (an interrupted one: its event, total, resume
    point and rows rewritten), or a new one started from the first row."""
    running = await _running(conn, tenant, kind)
    if running is not None:
        cursor = None if running.cursor is None else json.loads(running.cursor)
        return str(running.event_id), int(running.total or 0), cursor, int(running.rows)
    total = await _count(conn, tenant)
    event_id = await _start(
        conn, tenant, kind, total=total, kek_id=encryption.key_id, data_key_id=data_key_id
    )
    return event_id, total, None, 0


async def _read_event(engine: AsyncEngine, event_id: str) -> KeyEvent:
    async with engine.connect() as conn:
        query = select(KEY_EVENTS).where(KEY_EVENTS.c.event_id == event_id)
        return _event((await conn.execute(query)).one())


async def key_events(engine: AsyncEngine, *, tenant: str | None = None) -> list[KeyEvent]:
    """The database's key events (of ``tenant``, and the rotations of the provider's key
    that covered every tenant), oldest first."""
    e = KEY_EVENTS.c
    query = select(KEY_EVENTS).order_by(e.started_at, e.event_id)
    if tenant is not None:
        query = query.where((e.tenant == tenant) | e.tenant.is_(None))
    async with engine.connect() as conn:
        return [_event(row) for row in await conn.execute(query)]


# --- the tables' texts --------------------------------------------------------------

_Place = Callable[[Any], tuple[str, str, object]]
"""A row's place: its table's name in the associated data, the session, the row."""


class _Texts:
    """The sealed columns of one table, its key, and each row's place."""

    def __init__(
        self, table: Table, name: str, columns: Sequence[str], place: _Place, raw: Sequence[str]
    ) -> None:
        self.table, self.name, self.columns, self.place = table, name, columns, place
        self.raw = frozenset(raw)
        """Text columns bound as they are (not through the JSON type)."""
        self.keys = list(table.primary_key.columns)


_TABLES: Final = (
    _Texts(
        MESSAGES,
        "messages",
        ("contents", "metadata", "reduced_contents", "author_name"),
        lambda row: ("messages", row.session_id, row.seq),
        ("author_name",),
    ),
    _Texts(
        BRANCH_ROWS,
        "branch_rows",
        ("reduced_contents",),
        lambda row: ("messages", row.session_id, row.seq),
        (),
    ),
    _Texts(
        SESSIONS,
        "sessions",
        ("metadata", "title", "compaction_request"),
        lambda row: ("sessions", row.session_id, ""),
        ("title", "compaction_request"),
    ),
    _Texts(
        EVENTS,
        "events",
        ("params", "note"),
        lambda row: ("events", row.session_id, row.event_id),
        ("note",),
    ),
)


async def _count(conn: AsyncConnection, tenant: str) -> int:
    """The rows a pass over the tenant looks at."""
    total = 0
    for texts in _TABLES:
        table = texts.table
        count = select(func.count()).select_from(table).where(table.c.tenant == tenant)
        total += int((await conn.execute(count)).scalar_one())
    return total


_JSON_COLUMNS: Final = frozenset({"contents", "metadata", "reduced_contents", "params"})
"""The sealed columns of JSON type (bound as the codec's texts); the others are text."""


def _bound(column: str, value: str | None) -> Any:
    if value is None or column not in _JSON_COLUMNS:
        return value
    return type_coerce(value, ENCODED)


Rewrite = Callable[[_Texts, Any], dict[str, Any]]
"""What a job changes in a row (column to value), nothing when the row needs nothing."""


async def _pass(
    engine: AsyncEngine,
    tenant: str,
    event_id: str,
    rewrite: Rewrite,
    *,
    batch_size: int,
    progress: Progress | None,
    done: int,
    total: int,
    cursor: dict[str, Any] | None,
) -> tuple[int, int]:
    """Rewrite the tenant's rows table by table, ``batch_size`` rows a transaction, from
    ``cursor`` (an interrupted pass's); the rows changed and the rows looked at."""
    changed = 0
    start = 0
    if cursor is not None:
        start = [t.name for t in _TABLES].index(cursor["table"])
    for index in range(start, len(_TABLES)):
        texts = _TABLES[index]
        after = cursor["after"] if cursor is not None and index == start else None
        while True:
            columns = [*texts.keys, *(_text_column(texts, c) for c in texts.columns)]
            if texts.table is MESSAGES:
                columns += [c.label(f"m_{i}") for i, c in enumerate(message_columns())]
            query = select(*columns).where(texts.table.c.tenant == tenant)
            if after is not None:
                query = query.where(tuple_(*texts.keys[1:]) > tuple_(*after))
            query = query.order_by(*texts.keys[1:]).limit(batch_size)
            async with write_connection(engine) as conn:
                await erase_step(conn)  # SQLite zeroes the clear texts the batch frees
                rows = (await conn.execute(query)).all()
                if not rows:
                    break
                rewritten = 0
                for row in rows:
                    values = rewrite(texts, row)
                    if values:
                        bound = {k: _bound(k, v) for k, v in values.items()}
                        where = [key == getattr(row, key.key) for key in texts.keys]
                        await conn.execute(update(texts.table).where(*where).values(**bound))
                        rewritten += 1
                last = rows[-1]
                after = [_plain(getattr(last, key.key)) for key in texts.keys[1:]]
                await _advance(conn, event_id, rewritten, {"table": texts.name, "after": after})
            changed += rewritten
            done += len(rows)
            if progress is not None:
                progress(done, max(total, done))
    return changed, done


def _plain(value: Any) -> Any:
    return value if isinstance(value, int | str) else str(value)


def _text_column(texts: _Texts, name: str) -> Any:
    column = texts.table.c[name]
    if name in texts.raw:
        return column
    return sql_cast(column, Text).label(name)


def _sealer(tenant: str, sealing: Sealing) -> Rewrite:
    """The rewrite of ``encrypt``: every text in clear sealed at its place, a message's
    content hash keyed, its searchable text dropped."""

    def rewrite(texts: _Texts, row: Any) -> dict[str, Any]:
        table, session_id, place = texts.place(row)
        values: dict[str, Any] = {}
        for column in texts.columns:
            text = getattr(row, column)
            here = text is not None and _sealed_here(
                sealing, text, table, session_id, place, column
            )
            if text is not None and not here:
                values[column] = sealing.seal(text, table, session_id, place, column)
        if texts.table is MESSAGES and "contents" in values:
            message_row = [getattr(row, f"m_{i}") for i in range(len(message_columns()))]
            message = original_message(message_row, tenant=tenant, session_id=session_id)
            with keyed_hashing(sealing.hash_key):
                values["content_hash"] = stored_hash(message)
            values["search_text"] = None
        return values

    return rewrite


_FREE_TEXT: Final = frozenset({"title", "author_name"})
"""Columns whose text in clear may start as a sealed text does (a JSON text cannot)."""


def _sealed_here(
    sealing: Sealing, text: str, table: str, session_id: str, place: object, column: str
) -> bool:
    """Whether ``text`` is sealed already: it looks sealed and, in a column of free
    text, opens at its place (else it is a title or a name in clear that looks so)."""
    if not is_sealed(text):
        return False
    if column not in _FREE_TEXT:
        return True  # a damaged sealed text stays for the reader to report
    try:
        sealing.open(text, table, sealing.owner_of(text) or session_id, place, column)
    except CorruptRowError:
        return False
    return True


def _resealer(sealing: Sealing) -> Rewrite:
    """The rewrite of a data key's rotation: every text another key sealed, sealed again
    under the current one at the same place (the session it was sealed for)."""

    def rewrite(texts: _Texts, row: Any) -> dict[str, Any]:
        table, _, place = texts.place(row)
        values: dict[str, Any] = {}
        for column in texts.columns:
            text = getattr(row, column)
            if text is None or sealing.key_of(text) in (None, sealing.current):
                continue
            owner = sealing.owner_of(text)
            if owner is None:
                continue  # not whole: left for the reader to report
            plain = sealing.open(text, table, owner, place, column)
            values[column] = sealing.seal(plain, table, owner, place, column)
        return values

    return rewrite


# --- the jobs -----------------------------------------------------------------------


async def encrypt_tenant(
    engine: AsyncEngine,
    *,
    tenant: str,
    encryption: KeyRing,
    batch_size: int = 500,
    progress: Progress | None = None,
) -> KeyEvent:
    """Seal every text of ``tenant`` in place (see the module docstring)."""
    _check_batch(batch_size)
    async with write_connection(engine) as conn:
        mark = await read_mark(conn, tenant)
        if mark is None:
            await mark_tenant(conn, tenant, encryption, ENCRYPTING)
            mark = await read_mark(conn, tenant)
        assert mark is not None
        sealing = await sealing_of(conn, tenant, encryption, mark)
        job = await _job(conn, tenant, "encrypt", encryption, sealing.current)
    event_id, total, cursor, done = job
    rewrite, shown = _sealer(tenant, sealing), progress
    while True:  # until a whole pass finds nothing in clear (the last one shows nothing)
        changed, done = await _pass(
            engine,
            tenant,
            event_id,
            rewrite,
            batch_size=batch_size,
            progress=shown,
            done=done,
            total=total,
            cursor=cursor,
        )
        if changed == 0 and cursor is None:
            break
        cursor, shown = None, None
    async with write_connection(engine) as conn:
        await erase_step(conn)
        await conn.execute(
            update(USAGE).where(USAGE.c.tenant == tenant).values(context_digest=None)
        )
        await erase_words(conn)  # the words leave the search index's pages too
        await conn.execute(
            update(TENANT_KEYS)
            .where(TENANT_KEYS.c.tenant == tenant)
            .values(state=ENCRYPTED, updated_at=now())
        )
        await _finish(conn, event_id)
    await checkpoint(engine)  # the old pages leave SQLite's write-ahead log
    return await _read_event(engine, event_id)


async def rotate_tenant_key(
    engine: AsyncEngine,
    *,
    tenant: str,
    encryption: KeyRing,
    batch_size: int = 500,
    progress: Progress | None = None,
) -> KeyEvent:
    """Give ``tenant`` a new data key and seal its texts again under it (see the module
    docstring)."""
    _check_batch(batch_size)
    async with write_connection(engine) as conn:
        mark = await read_mark(conn, tenant)
        if mark is None or mark["state"] != ENCRYPTED:
            raise InvalidInput(
                f"tenant {tenant!r} is not encrypted: `chatledger encrypt --tenant {tenant}` first"
            )
        if await _running(conn, tenant, "rotate_data_key") is None:
            data, _ = await encryption.new_key("data")
            await add_key(conn, tenant, data)
            await conn.execute(
                update(TENANT_KEYS)
                .where(TENANT_KEYS.c.tenant == tenant)
                .values(current_key=data.key_id, updated_at=now())
            )
            current: str | None = data.key_id
        else:
            current = None  # the running rotation's key is the tenant's current one
        event_id, total, cursor, done = await _job(
            conn, tenant, "rotate_data_key", encryption, current
        )
        mark = await read_mark(conn, tenant)
        assert mark is not None
        sealing = await sealing_of(conn, tenant, encryption, mark)
    await _pass(
        engine,
        tenant,
        event_id,
        _resealer(sealing),
        batch_size=batch_size,
        progress=progress,
        done=done,
        total=total,
        cursor=cursor,
    )
    async with write_connection(engine) as conn:
        await _finish(conn, event_id)
    return await _read_event(engine, event_id)


async def rotate_kek(
    engine: AsyncEngine, *, encryption: KeyRing, progress: Progress | None = None
) -> KeyEvent:
    """Rewrap every tenant's keys under the provider's current key (no row rewritten)."""
    k = KEYS.c
    async with write_connection(engine) as conn:
        running = await _running(conn, None, "rotate_kek")
        stale = select(k.tenant, k.key_id).where(k.kek_id != encryption.key_id)
        total = len((await conn.execute(stale)).all())
        if running is None:
            event_id = await _start(
                conn, None, "rotate_kek", total=total, kek_id=encryption.key_id, data_key_id=None
            )
            done = 0
        else:
            event_id, done = str(running.event_id), int(running.rows)
            total += done
    while True:  # until no key is left under another KEK (a process may wrap meanwhile)
        async with engine.connect() as conn:
            query = select(k.tenant).where(k.kek_id != encryption.key_id).distinct()
            tenants = [str(t) for (t,) in await conn.execute(query)]
        if not tenants:
            break
        done = await _rewrap(engine, encryption, tenants, event_id, done, total, progress)
    async with write_connection(engine) as conn:
        await _finish(conn, event_id)
    return await _read_event(engine, event_id)


async def _rewrap(
    engine: AsyncEngine,
    encryption: KeyRing,
    tenants: list[str],
    event_id: str,
    done: int,
    total: int,
    progress: Progress | None,
) -> int:
    """Rewrap the keys of ``tenants`` not under the provider's current key, a tenant a
    transaction; the keys rewrapped so far."""
    k = KEYS.c
    for tenant in tenants:
        async with write_connection(engine) as conn:
            rewrapped = 0
            for key in await read_keys(conn, tenant):
                if key.kek_id == encryption.key_id:
                    continue
                plain = await encryption.unwrap(key)
                wrapped = await encryption.wrap(plain)
                await conn.execute(
                    update(KEYS)
                    .where(k.tenant == tenant, k.key_id == key.key_id)
                    .values(kek_id=wrapped.kek_id, wrapped=_b64(wrapped.wrapped))
                )
                rewrapped += 1
            await _advance(conn, event_id, rewrapped, None)
        done += rewrapped
        if progress is not None:
            progress(done, max(total, done))
    return done


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _check_batch(batch_size: int) -> None:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InvalidInput(f"batch_size must be a positive number of rows, got {batch_size!r}")
