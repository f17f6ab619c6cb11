"""The SQL backend: :class:`HistoryStore`, one tenant's history in SQLite or PostgreSQL.

::

    async with HistoryStore.open("sqlite:///chat.db", tenant="acme") as store:
        await store.append("session-1", [Message.text_message("user", "Hi")])
        for stored in await store.history("session-1"):
            print(stored.seq, stored.message.text)

The class opens and closes the store, gives it fresh connections in a new process or
event loop, translates driver errors and runs a call once more when the server had
dropped its pooled connection, runs each write in one transaction (``BEGIN IMMEDIATE``
on SQLite, the session row locked on PostgreSQL) retried with a bounded, jittered
backoff when the database reports a transient conflict
(:class:`~store.errors.ConcurrentWriteError` when the retries run out), and keeps its
primitives thin. The contract's front (argument checks, the closed-store guard, spans)
is :class:`~store.contract.BackendBase`'s; the work lives in the modules of
:mod:`store.sql` (appends in :mod:`~store.sql.append`, reads in
:mod:`~store.sql.history`, the projection and its cache in :mod:`~store.sql.projection`,
compaction, restore and import in :mod:`~store.sql.compaction`, the audit in
:mod:`~store.sql.audit`, upkeep in :mod:`~store.sql.upkeep`). The rules it shares with
the in-memory backend are in :mod:`store.rules`; its contract is
:class:`store.contract.HistoryBackend`, and it has the abilities
:class:`~store.contract.BulkImportBackend`, :class:`~store.contract.AdminBackend` and
:class:`~store.contract.UpkeepBackend`. Every query is filtered by the store's tenant,
except the administrator's listing of tenants.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    NoReturn,
    ParamSpec,
    TypeVar,
)

from pydantic import JsonValue
from sqlalchemy import delete, select, update
from sqlalchemy.engine import URL, RowMapping
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store.contract import DEFAULT_TENANT, RECORD_KEY, BackendBase, Written
from store.encryption.sealing import UnknownDataKey
from store.errors import InvalidInput, RecordConflict, SessionNotFound, StoreTimeout
from store.models import (
    BranchInfo,
    CompactionEvent,
    CompactionRequest,
    DoctorReport,
    EventOutcome,
    ExcludedGroup,
    Finding,
    ImportResult,
    Phase,
    Provenance,
    PurgeReport,
    RedactReport,
    SearchPage,
    SessionInfo,
    SessionOrder,
    Stats,
    StoredMessage,
    TenantInfo,
    WhyResult,
)
from store.rules.branching import new_fork_id, tail_refusal
from store.rules.changes import new_event_id
from store.rules.checks import (
    check_flag,
    check_session_id,
    check_text,
    check_tokenizer,
)
from store.rules.conflicts import plan_and_apply
from store.rules.identity import dedupe, keyed_hashing, new_messages
from store.rules.imported import import_changes, plan_import, source_ids
from store.rules.limits import Limits
from store.rules.pending import PendingCounts
from store.rules.records import now
from store.search.request import SearchRequest
from store.sql import audit, dialect
from store.sql import usage as usage_rows
from store.sql.annotation import stored_hashes
from store.sql.append.one_statement import append_in_one_statement
from store.sql.append.retract import retract_last
from store.sql.append.rows import AppendContext
from store.sql.append.writer import Appended, append_messages, append_to_sessions
from store.sql.branches.deleting import KEPT, collect, keep_for_forks, owners_read_by, tails_of
from store.sql.branches.erasure import redact_in_branches
from store.sql.branches.fork import fork_session, resolve_cut
from store.sql.branches.listing import read_branches
from store.sql.branches.rewind import rewind_session
from store.sql.branches.rows import Lineage, lineage_of, read_lineage, stored_hashes_of
from store.sql.branches.sharing import holders_of, refuse_tail
from store.sql.codec import encode_title, sealed
from store.sql.compaction.compactor import Compactor
from store.sql.compaction.imports import mark_imported, stored_rows
from store.sql.compaction.restore import restore_groups, set_pinned
from store.sql.drivers.engine import (
    DEFAULT_TIMEOUT,
    create_engine,
    normalize_url,
    one_statement_writer,
    read_connection,
    sqlite_file,
    write_connection,
)
from store.sql.drivers.sqlite import short_statements
from store.sql.errors import is_retryable, translate_errors
from store.sql.history import read_history, read_sessions, stream_history
from store.sql.keys import open_sealing
from store.sql.mapping import session_from_row
from store.sql.migrations import check_sqlite_file, ensure_schema
from store.sql.projection.cache import DEFAULT_CACHE_MESSAGES, SessionCache, session_key
from store.sql.projection.opening import open_view
from store.sql.projection.pending import with_pending
from store.sql.projection.views import SqlSource, excluded_of, group_view, read_view
from store.sql.schema import (
    MESSAGES,
    SESSION_CHILD_TABLES,
    SESSIONS,
)
from store.sql.search.find import search_page
from store.sql.search.index import SEARCH_OFF, cursor_key, index_missing
from store.sql.sessions import (
    compaction_request_of,
    lock_session,
    metadata_value,
    read_session,
    set_compaction_request,
)
from store.sql.statements import chunks
from store.sql.upkeep import erasure
from store.sql.upkeep.doctor import diagnose, repair, session_ids
from store.sql.upkeep.recount import recount_session
from store.sql.upkeep.statistics import Statistics
from store.sql.upkeep.tenants import read_tenants
from store.telemetry import Unchanged
from store.usage.checks import check_usage
from store.usage.ledger import Sent
from store.usage.models import Usage, UsageCall
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.tokenizers import DEFAULT_POLICY, TokenCountPolicy, Tokenizer
from strategies.view import MessageSource, View

if TYPE_CHECKING:
    from store.contract import HistoryBackend
    from store.encryption.sealing import KeyRing, Sealing

__all__ = ["HistoryStore", "StoreOpener"]

T = TypeVar("T")
P = ParamSpec("P")

MAX_ATTEMPTS = 12

_RECORD_ATTEMPTS = 5
"""How often a recorded call is written again after another writer took its ``seq``."""

Method = Callable[Concatenate["HistoryStore", P], Coroutine[Any, Any, T]]


def _check_encryption(encryption: object) -> None:
    if encryption is not None:
        from store.encryption.sealing import KeyRing

        if not isinstance(encryption, KeyRing):
            raise InvalidInput(
                f"encryption must be a KeyRing, got {type(encryption).__name__}: "
                "encryption=KeyRing(LocalKeyProvider.from_file(path))"
            )


def _connected(method: Method[P, T]) -> Method[P, T]:
    """A primitive of :class:`HistoryStore` (run inside :class:`~store.contract.BackendBase`'s
    front): given fresh connections in a new process or event loop, run with the store's
    sealing (:func:`store.sql.codec.sealed`: an encrypted tenant's texts sealed and
    opened), and run once more when the server had dropped the connection it found in
    the pool."""

    @functools.wraps(method)
    async def wrapper(store: HistoryStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        await store._adopt_connections()
        if not store._sealing_read:  # a store made from an engine, not opened
            store._sealing = await open_sealing(store._engine, store._tenant, None)
            store._sealing_read = True
        with sealed(store._sealing):
            try:
                return await method(store, *args, **kwargs)
            except DBAPIError as error:
                if not error.connection_invalidated:
                    raise
            except UnknownDataKey:  # a rotation made since: read the keys, once more
                if store._sealing is None or store._sealing.reload is None:
                    raise
                await store._sealing.reload()
            return await method(store, *args, **kwargs)  # the pool holds live ones now

    return wrapper


def _call(method: Method[P, T]) -> Method[P, T]:
    """A public method of :class:`HistoryStore` beyond the contract (an ability): refused
    once the store is closed and its driver errors translated, as the contract's are,
    then run as a primitive is (:func:`_connected`)."""
    connected = _connected(method)

    @functools.wraps(method)
    async def wrapper(store: HistoryStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        store._check_open()
        with translate_errors():
            return await connected(store, *args, **kwargs)

    return wrapper


_OPENER_HINT = (
    "HistoryStore.open() is asynchronous: write `store = await HistoryStore.open(...)` "
    "or `async with HistoryStore.open(...) as store:`"
)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _NotOpened(InvalidInput, AttributeError):
    """A store attribute asked of the opener (``hasattr`` still answers False)."""


class StoreOpener:
    """What :meth:`HistoryStore.open` returns: await it, or use it with ``async with``.

    Anything else (a plain ``with``, a forgotten ``await``) raises
    :class:`~store.errors.InvalidInput` naming the fix.
    """

    def __init__(self, factory: Callable[[], Awaitable[HistoryStore]]) -> None:
        self._factory = factory
        self._store: HistoryStore | None = None

    def __getattr__(self, name: str) -> Any:
        raise _NotOpened(f"{_OPENER_HINT} (got the opener, not a store, asking for {name!r})")

    def __enter__(self) -> NoReturn:
        raise InvalidInput(f"{_OPENER_HINT}, not a plain `with`")

    def __exit__(self, *exc: object) -> None:
        """Never reached (:meth:`__enter__` refuses)."""

    def __await__(self) -> Generator[Any, None, HistoryStore]:
        return self._factory().__await__()

    async def __aenter__(self) -> HistoryStore:
        self._store = await self._factory()
        return self._store

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._store is not None:
            await self._store.aclose()


class HistoryStore(BackendBase):
    """Persistent chat history for one tenant, in SQLite or PostgreSQL.

    Implements :class:`store.contract.HistoryBackend` on :class:`~store.contract.BackendBase`,
    where each method is documented; it also has the abilities
    :class:`~store.contract.BulkImportBackend`, :class:`~store.contract.AdminBackend` and
    :class:`~store.contract.UpkeepBackend`.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        tenant: str = DEFAULT_TENANT,
        tokenizer: Tokenizer | None = None,
        policy: TokenCountPolicy = DEFAULT_POLICY,
        owns_engine: bool = False,
        max_attempts: int = MAX_ATTEMPTS,
        cache_messages: int = DEFAULT_CACHE_MESSAGES,
        timeout: float = DEFAULT_TIMEOUT,
        limits: Limits | None = None,
    ) -> None:
        """Wrap ``engine`` (whose schema must be current: prefer :meth:`open`).

        ``cache_messages`` bounds the parsed messages of active views kept between calls
        (``0`` keeps none); the cache is checked against the session row on every read,
        so writes from other processes are always seen (see
        :mod:`store.sql.projection.cache`). ``timeout`` is each call's deadline for its
        lock waits and retries (past it, :class:`~store.errors.StoreTimeout`); an engine
        made by :func:`~store.sql.drivers.engine.create_engine` bounds each single wait by it
        too. ``limits`` are what the store accepts (:class:`~store.rules.limits.Limits`).
        """
        if not isinstance(engine, AsyncEngine):
            raise InvalidInput(
                f"HistoryStore() takes an SQLAlchemy AsyncEngine, got {type(engine).__name__}: "
                "to open a database URL, use `await HistoryStore.open(url)`"
            )
        super().__init__(tenant=tenant, tokenizer=tokenizer, policy=policy, limits=limits)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise InvalidInput(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._engine = engine
        self._timeout = float(timeout)
        self._process = os.getpid()
        # the loop the engine's connections were made in (opening a store makes some)
        self._loop: asyncio.AbstractEventLoop | None = _running_loop()
        self._owns_engine = owns_engine
        self._max_attempts = max(1, max_attempts)
        self._pending = PendingCounts(self.count_tokens, lambda: (self.tokenizer, self._policy))
        self._cache = SessionCache(cache_messages)
        self._statistics = Statistics(engine)
        self._cursor_key: bytes | None = None
        self._sealing: Sealing | None = None
        """The tenant's sealing when the store was opened with encryption (see
        :mod:`store.sql.keys`); None: texts are stored in clear."""
        self._sealing_read = False
        """Whether the tenant's mark was read (by :meth:`open`, else by the first call:
        a store made from an engine refuses an encrypted tenant as an opened one does)."""

    # -- opening and closing -------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str | URL | None = None,
        *,
        tenant: str = DEFAULT_TENANT,
        tokenizer: Tokenizer | None = None,
        policy: TokenCountPolicy = DEFAULT_POLICY,
        upgrade: bool = False,
        create: bool = True,
        schema: str | None = None,
        cache_messages: int = DEFAULT_CACHE_MESSAGES,
        timeout: float = DEFAULT_TIMEOUT,
        limits: Limits | None = None,
        encryption: KeyRing | None = None,
    ) -> StoreOpener:
        """Open a store on ``url`` (else ``$CHATLEDGER_URL``, else ``./chatledger.db``; a
        plain path names a SQLite file).

        An empty database gets the schema, unless ``create`` is false: then a database
        without chatledger's schema (or a SQLite file that does not exist) raises
        :class:`~store.errors.MigrationRequired` and nothing is written to it. A
        database whose schema is behind raises ``MigrationRequired`` unless ``upgrade``
        is true. ``cache_messages`` bounds the store's cache of active views (0 turns it
        off). ``timeout`` (seconds) is each call's deadline for its waits on locks and its
        retries, not for a summarizer's model call: past it the call raises
        :class:`~store.errors.StoreTimeout` having written nothing. ``limits`` are the
        largest values the store accepts (:class:`~store.rules.limits.Limits`).
        ``encryption`` (a :class:`~store.encryption.KeyRing`) seals the tenant's texts at
        rest (``docs/encryption.md``); without it an encrypted tenant is refused
        (:class:`~store.errors.KeyRequired`).
        """
        _check_encryption(encryption)

        async def factory() -> HistoryStore:
            with translate_errors():
                target = normalize_url(url)
                path = sqlite_file(target)
                if path is not None:  # read before SQLite's set-up writes to the file
                    await asyncio.to_thread(check_sqlite_file, path, create=create, timeout=timeout)
                engine = create_engine(target, schema=schema, timeout=timeout)
            try:
                store = cls(
                    engine,
                    tenant=tenant,
                    tokenizer=tokenizer,
                    policy=policy,
                    owns_engine=True,
                    cache_messages=cache_messages,
                    timeout=timeout,
                    limits=limits,
                )
                await ensure_schema(engine, upgrade=upgrade, create=create, schema=schema)
                with translate_errors():
                    store._sealing = await open_sealing(engine, tenant, encryption)
                    store._sealing_read = True
            except BaseException:
                await engine.dispose()
                raise
            return store

        return StoreOpener(factory)

    @classmethod
    def from_engine(
        cls,
        engine: AsyncEngine,
        *,
        tenant: str = DEFAULT_TENANT,
        tokenizer: Tokenizer | None = None,
        policy: TokenCountPolicy = DEFAULT_POLICY,
        upgrade: bool = False,
        create: bool = True,
        cache_messages: int = DEFAULT_CACHE_MESSAGES,
        timeout: float = DEFAULT_TIMEOUT,
        limits: Limits | None = None,
        encryption: KeyRing | None = None,
    ) -> StoreOpener:
        """Open a store on an engine the application owns (never disposed by the store);
        the options as for :meth:`open`."""
        _check_encryption(encryption)

        async def factory() -> HistoryStore:
            store = cls(
                engine,
                tenant=tenant,
                tokenizer=tokenizer,
                policy=policy,
                cache_messages=cache_messages,
                timeout=timeout,
                limits=limits,
            )
            with translate_errors():
                await ensure_schema(engine, upgrade=upgrade, create=create)
                store._sealing = await open_sealing(engine, tenant, encryption)
                store._sealing_read = True
            return store

        return StoreOpener(factory)

    async def _release(self) -> None:
        """Release the engine when the store created it (a new process closes only its own
        connections), and forget the cached views."""
        if self._owns_engine:
            await self._adopt_connections()
        self._cache.clear()
        if self._owns_engine:
            await self._engine.dispose()

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine."""
        return self._engine

    def content_hashing(self) -> AbstractContextManager[None]:
        """Hash contents as this store does within the block (keyed by the tenant's hash
        key when it is encrypted, ``docs/encryption.md``): for ids a caller derives
        from a text before it reaches the store (the importer's, an adapter's)."""
        return keyed_hashing(None if self._sealing is None else self._sealing.hash_key)

    @property
    def timeout(self) -> float:
        """Each call's deadline for its waits, in seconds (``open(..., timeout=...)``);
        an import's queries of a source database are bounded by it too."""
        return self._timeout

    # -- connections, errors and transactions ------------------------------------------

    @contextmanager
    def _translate_errors(self) -> Iterator[None]:
        """Driver errors become :class:`~store.errors.ChatledgerError` subclasses, and a
        strategy's errors :class:`~store.errors.InvalidInput`
        (:func:`store.sql.errors.translate_errors`); the front's own work (the usage
        ledger's digests of what was sent) runs with the store's sealing, as its
        primitives do (:func:`_connected`)."""
        with translate_errors(), sealed(self._sealing):
            yield

    async def _adopt_connections(self) -> None:
        """Give the store fresh connections in a new process (after a ``fork``) or a new
        event loop.

        A child's pool starts empty, leaving the parent's connections to the parent. In
        a new loop of the same process SQLite's old connections are closed first;
        PostgreSQL's belong to the finished loop, which alone could close them: they are
        dropped, and the garbage collector closes their sockets.
        """
        process, loop = os.getpid(), asyncio.get_running_loop()
        if process == self._process and loop is self._loop:
            return
        if process != self._process or (
            self._loop is not None
            and dialect.capabilities(self._engine.dialect).loop_bound_connections
        ):
            self._engine.sync_engine.dispose(close=False)
            self._cache.clear()
        elif self._loop is not None:
            await self._engine.dispose()
            self._cache.clear()
        self._process, self._loop = process, loop

    async def _ready(self) -> None:
        """Refuse a closed store, and adopt the connections (a stream's first step)."""
        self._check_open()
        await self._adopt_connections()

    async def _write(self, operation: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Run ``operation`` in a write transaction, retrying transient conflicts until the
        store's ``timeout`` has passed (then :class:`~store.errors.StoreTimeout`)."""
        deadline = time.monotonic() + self._timeout
        delay = 0.01
        for attempt in range(1, self._max_attempts + 1):
            try:
                async with write_connection(self._engine) as conn:
                    return await operation(conn)
            except DBAPIError as error:
                if not is_retryable(error):
                    raise
                last = error
            wait = delay * random.uniform(0.5, 1.5)
            if attempt == self._max_attempts or time.monotonic() + wait >= deadline:
                raise StoreTimeout(
                    f"gave up after {attempt} attempts in {self._timeout:g} s (the store's "
                    f"timeout): another connection kept the session locked ({last.orig})"
                ) from last
            await asyncio.sleep(wait)
            delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _in_one_statement(
        self, operation: Callable[[AsyncConnection], Awaitable[T | None]]
    ) -> T | None:
        """Run ``operation``, a write made in one statement after reads that lock
        nothing, on a connection in autocommit; None (nothing written) where the
        database has none for it, when ``operation`` gives None, or when its statement
        waited too long for a lock: the caller then writes in a transaction
        (:meth:`_write`), which retries."""
        writer = one_statement_writer(self._engine)
        if writer is None:
            return None
        try:
            async with writer.connect() as conn:
                return await operation(conn)
        except DBAPIError as error:
            if not is_retryable(error):
                raise
            return None

    def _append_context(
        self, session_id: str, provenance: Provenance | None = None
    ) -> AppendContext:
        """How this store appends to ``session_id`` (pending counts consumed)."""
        return AppendContext(
            tenant=self._tenant,
            session_id=session_id,
            tokenizer=self.tokenizer,
            policy=self._policy,
            provenance=provenance,
            counter=self._pending.counter(self._tenant, session_id, keep=False),
            holds=partial(self._pending.holds, self._tenant, session_id),
        )

    def _compactor(self) -> Compactor:
        return Compactor(
            engine=self._engine,
            tenant=self._tenant,
            tokenizer=self.tokenizer,
            policy=self._policy,
            write=self._write,
            counter=lambda sid: self._pending.counter(self._tenant, sid, keep=False),
            cache=self._cache,
            at_once=None if one_statement_writer(self._engine) is None else self._in_one_statement,
        )

    def _source(
        self, session_id: str, session: RowMapping, lineage: Lineage | None = None
    ) -> SqlSource:
        entry = self._cache.entry(session_id, session_key(session))
        return SqlSource(self._engine, self._tenant, session_id, self._cache, entry, lineage)

    # -- messages ----------------------------------------------------------------------

    @_connected
    async def _append(
        self, session_id: str, batch: list[Message], provenance: Provenance | None
    ) -> Written:
        ctx = self._append_context(session_id, provenance)
        known = self._cache.session_row(session_id)

        async def operation(conn: AsyncConnection) -> Appended:
            return await append_messages(conn, ctx, batch)

        async def at_once(conn: AsyncConnection) -> Appended | None:
            return await append_in_one_statement(conn, ctx, batch, known=known)

        with short_statements():  # see store.sql.drivers.sqlite: what runs on the loop's thread
            appended = await self._in_one_statement(at_once)
            if appended is None:
                appended = await self._write(operation)
        if appended.count:
            self._advance(session_id, appended)
            await self._statistics.wrote(appended.count)
        return Written(appended.count, appended.tokens)

    @_connected
    async def _append_if(
        self, session_id: str, batch: list[Message], record: dict[str, Any], *, expected: str | None
    ) -> Written:
        ctx = self._append_context(session_id)

        async def operation(conn: AsyncConnection) -> Appended | None:
            session = await lock_session(
                conn, self._tenant, session_id, create_with_tokenizer=self._tokenizer_name
            )
            refuse_tail(session)
            metadata = dict(session_from_row(session).metadata)
            stored = metadata.get(RECORD_KEY)
            found = stored.get("revision") if isinstance(stored, dict) else None
            if found != expected:
                raise RecordConflict(
                    session_id,
                    tenant=self._tenant,
                    expected=expected,
                    found=found if isinstance(found, str) else None,
                )
            appended = await append_messages(conn, ctx, batch) if batch else None
            metadata[RECORD_KEY] = record
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.tenant == self._tenant, SESSIONS.c.session_id == session_id)
                .values(
                    metadata=metadata_value(self._tenant, session_id, metadata),
                    updated_at=now(),
                    revision=SESSIONS.c.revision + 1,
                )
            )
            return appended

        appended = await self._write(operation)
        self._cache.discard(session_id)
        if appended is None:
            return Written(0, 0)
        if appended.count:
            await self._statistics.wrote(appended.count)
        return Written(appended.count, appended.tokens)

    @_connected
    async def _locate(self, message_id: str) -> str | None:
        m, s = MESSAGES.c, SESSIONS.c
        query = (
            select(m.session_id, m.seq, s.branch)
            .join(SESSIONS, (s.tenant == m.tenant) & (s.session_id == m.session_id))
            .where(m.tenant == self._tenant, m.message_id == message_id)
            .order_by(m.session_id)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
            own = [row.session_id for row in rows if row.branch != KEPT]
            if own:
                return str(own[0])
            for row in rows:
                holders = await holders_of(conn, self._tenant, row.session_id, row.seq)
                if holders:
                    return holders[0]
        return None

    def _advance(self, session_id: str, appended: Appended) -> None:
        """Tell the cache of views what an append wrote."""
        before = appended.before
        if before is None:  # it landed after another writer's: the session is shared
            self._cache.note_moved(session_id, True)
            return
        after = (before[0], before[1] + 1)
        written = appended.written
        if written is not None and appended.touched <= {r["group_id"] for r in written.groups}:
            added = [(row, group_view(row)) for row in written.groups if not row["excluded"]]
            excluded = excluded_of(written.session)
            if self._cache.write_appended(
                session_id, before, after, written.session, added, excluded
            ):
                return
        self._cache.advance(session_id, before, after, appended.touched, rows_touched=True)

    @_connected
    async def _history(
        self,
        session_id: str,
        *,
        include_excluded: bool,
        limit: int | None,
        before: int | None,
        after: int | None,
    ) -> list[StoredMessage]:
        async with self._engine.connect() as conn:
            session = await read_session(conn, self._tenant, session_id)
            lineage = None
            if session["branch"] is not None:
                lineage = await lineage_of(conn, self._tenant, session)
            return await read_history(
                conn,
                self._tenant,
                session_id,
                include_excluded=include_excluded,
                limit=limit,
                before=before,
                after=after,
                lineage=lineage,
            )

    def _aiter_history(
        self,
        session_id: str,
        *,
        include_excluded: bool,
        after: int | None,
        before: int | None,
        page_size: int,
    ) -> AsyncIterator[StoredMessage]:
        """One connection for the whole stream (see :func:`store.sql.history.stream_history`):
        on SQLite one snapshot, on PostgreSQL one short transaction per page."""
        return stream_history(
            self._engine,
            self._tenant,
            session_id,
            include_excluded=include_excluded,
            after=after,
            before=before,
            page_size=page_size,
            prepare=self._ready,
            sealing=self._sealing,
        )

    @_connected
    async def _retract_last(self, session_id: str) -> StoredMessage | None:
        async def operation(
            conn: AsyncConnection,
        ) -> tuple[StoredMessage, CompactionEvent] | None:
            return await retract_last(conn, self._tenant, session_id)

        retracted = await self._write(operation)
        self._cache.discard(session_id)
        return None if retracted is None else retracted[0]

    # -- sessions ----------------------------------------------------------------------

    @_connected
    async def _sessions(
        self,
        *,
        limit: int | None,
        after: str | None,
        updated_since: datetime | None,
        order: SessionOrder,
    ) -> list[SessionInfo]:
        async with self._engine.connect() as conn:
            return await read_sessions(
                conn,
                self._tenant,
                limit=limit,
                after=after,
                updated_since=updated_since,
                order=order,
            )

    @_connected
    async def _session(self, session_id: str) -> SessionInfo:
        return await self._read_info(session_id)

    async def _read_info(self, session_id: str) -> SessionInfo:
        async with self._engine.connect() as conn:
            return session_from_row(await read_session(conn, self._tenant, session_id))

    @_connected
    async def _get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        return dict((await self._read_info(session_id)).metadata)

    @_connected
    async def _set_metadata(self, session_id: str, metadata: dict[str, Any]) -> None:
        value = metadata_value(self._tenant, session_id, metadata)
        await self._set_session_values(session_id, metadata=value)

    @_connected
    async def _set_title(self, session_id: str, title: str | None) -> None:
        await self._set_session_values(
            session_id, title=encode_title(self._tenant, session_id, title)
        )

    async def _set_session_values(self, session_id: str, **values: Any) -> None:
        """Write ``values`` to the session's row (created when absent; a tail refused),
        as a write: its ``revision`` bumped, ``updated_at`` now."""

        async def operation(conn: AsyncConnection) -> None:
            session = await lock_session(
                conn, self._tenant, session_id, create_with_tokenizer=self._tokenizer_name
            )
            refuse_tail(session)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.tenant == self._tenant, SESSIONS.c.session_id == session_id)
                .values(**values, updated_at=now(), revision=SESSIONS.c.revision + 1)
            )

        await self._write(operation)

    @_connected
    async def _delete_session(self, session_id: str) -> None:
        async def operation(conn: AsyncConnection) -> None:
            await lock_session(conn, self._tenant, session_id)
            doomed = [session_id, *await tails_of(conn, self._tenant, session_id)]
            owners = await owners_read_by(conn, self._tenant, doomed)
            await keep_for_forks(conn, self._tenant, doomed)
            for table in (*SESSION_CHILD_TABLES, SESSIONS):
                await conn.execute(
                    delete(table).where(
                        table.c.tenant == self._tenant, table.c.session_id.in_(doomed)
                    )
                )
            await collect(conn, self._tenant, owners)

        await self._write(operation)
        self._pending.forget(self._tenant, session_id)
        self._cache.discard(session_id)

    @_connected
    async def _recount(self, session_id: str) -> SessionInfo:
        async def operation(conn: AsyncConnection) -> None:
            await recount_session(
                conn, self._tenant, session_id, tokenizer=self.tokenizer, policy=self._policy
            )

        await self._write(operation)
        return await self._read_info(session_id)

    # -- projection -------------------------------------------------------------------

    @_connected
    async def _view(self, session_id: str) -> View:
        with short_statements():
            async with read_connection(self._engine) as conn:
                session = await read_session(conn, self._tenant, session_id)
                check_tokenizer(session["tokenizer"], self._tokenizer_name, session_id)
                lineage = None
                if session["branch"] is not None:
                    lineage = await lineage_of(conn, self._tenant, session)
                view, _ = await read_view(
                    conn,
                    self._source(session_id, session, lineage),
                    session,
                    tokenizer=self.tokenizer,
                    policy=self._policy,
                )
        return replace(view, source=_TranslatedSource(view.source, self._sealing))

    @_connected
    async def _pending_view(self, session_id: str, batch: list[Message]) -> View:
        view, _ = await self._pending_view_and_request(session_id, batch)
        return view

    @_connected
    async def _projection_input(
        self, session_id: str, batch: list[Message]
    ) -> tuple[View, CompactionRequest | None]:
        return await self._pending_view_and_request(session_id, batch)

    async def _pending_view_and_request(
        self, session_id: str, batch: list[Message]
    ) -> tuple[View, CompactionRequest | None]:
        """The pending view, and the compaction request the same session row holds."""
        count = self._pending.counter(self._tenant, session_id, keep=True)

        def check(session: RowMapping) -> None:
            check_tokenizer(session["tokenizer"], self._tokenizer_name, session_id)

        # without in-flight messages the read is usually one statement (see open_view);
        # the active view's rows are read once, then cached
        with short_statements():
            async with read_connection(self._engine, single=not batch) as conn:
                try:
                    # the groups a projection sends are read on this connection, with the
                    # session row when the cache knows which are missing
                    opened = await open_view(
                        conn,
                        self._engine,
                        self._cache,
                        self._tenant,
                        session_id,
                        check=check,
                        send=True,
                        tokenizer=self.tokenizer,
                        policy=self._policy,
                    )
                except SessionNotFound:
                    dedupe(session_id, batch, {})
                    fresh = new_messages(batch, {})
                    # counted through the cache, as for a stored session
                    empty = View.from_messages(
                        fresh, self.tokenizer, policy=self._policy, counter=count
                    )
                    return empty, None
                session, view = opened.session, opened.view
                stored = await stored_hashes(conn, self._tenant, session_id, batch, session)
                dedupe(session_id, batch, stored)
                fresh = new_messages(batch, stored)
                pending = await with_pending(
                    conn, self._tenant, session_id, session, view, fresh, count
                )
                return pending, compaction_request_of(session)

    # -- compaction -------------------------------------------------------------------

    @_connected
    async def _request_compaction(self, session_id: str, request: CompactionRequest) -> None:
        async def operation(conn: AsyncConnection) -> None:
            refuse_tail(await lock_session(conn, self._tenant, session_id))
            await set_compaction_request(conn, self._tenant, session_id, request)

        await self._write(operation)

    @_connected
    async def _compaction_request(self, session_id: str) -> CompactionRequest | None:
        async with self._engine.connect() as conn:
            try:
                return compaction_request_of(await read_session(conn, self._tenant, session_id))
            except SessionNotFound:
                return None

    @_connected
    async def _compact(
        self, session_id: str, strategy: CompactionStrategy, *, phase: Phase, dry_run: bool
    ) -> CompactionEvent | ChangeSet | Unchanged:
        compaction = self._compactor().compaction(session_id, strategy, phase)
        with short_statements():
            return await plan_and_apply(session_id, strategy, compaction, dry_run=dry_run)

    # -- audit ------------------------------------------------------------------------

    @_connected
    async def _audit(
        self,
        session_id: str | None,
        *,
        since: datetime | None,
        strategy: str | None,
        phase: Phase | None,
        limit: int | None,
        outcome: EventOutcome | None,
    ) -> list[CompactionEvent]:
        async with self._engine.connect() as conn:
            if session_id is not None:
                await read_session(conn, self._tenant, session_id)
            return await audit.read_events(
                conn,
                self._tenant,
                session_id,
                since=since,
                strategy=strategy,
                phase=phase,
                limit=limit,
                outcome=outcome,
            )

    @_connected
    async def _excluded(self, session_id: str) -> list[ExcludedGroup]:
        async with self._engine.connect() as conn:
            return await audit.excluded_groups(conn, self._tenant, session_id)

    @_connected
    async def _why(self, session_id: str, message_id: str) -> WhyResult:
        async with self._engine.connect() as conn:
            return await audit.why(conn, self._tenant, session_id, message_id)

    @_connected
    async def _stats(self, session_id: str | None) -> Stats:
        async with self._engine.connect() as conn:
            return await audit.stats(conn, self._tenant, session_id)

    # -- restore and pin --------------------------------------------------------------

    @_connected
    async def _restore(
        self, session_id: str, *, group_ids: list[str] | None, event_id: str | None
    ) -> CompactionEvent | None:
        async def operation(conn: AsyncConnection) -> CompactionEvent | None:
            return await restore_groups(
                conn, self._tenant, session_id, group_ids=group_ids, event_id=event_id
            )

        return await self._write(operation)

    @_connected
    async def _set_pinned(
        self, session_id: str, group_ids: list[str], *, pinned: bool
    ) -> list[str]:
        async def operation(conn: AsyncConnection) -> list[str]:
            return await set_pinned(conn, self._tenant, session_id, group_ids, pinned=pinned)

        return await self._write(operation)

    # -- import -----------------------------------------------------------------------

    @_connected
    async def _import(
        self, session_id: str, batch: list[Message], source: str
    ) -> tuple[ImportResult, Written]:
        """One write transaction: the plan, the appends and the import event. Reads the
        session's message ids (an import is O(history))."""
        provenance = Provenance(system=source, source_ids=source_ids(batch))
        ctx = self._append_context(session_id, provenance)
        compactor = self._compactor()
        written = [Written(0, 0)]  # what the import appended, of the attempt that wrote

        async def operation(conn: AsyncConnection) -> ImportResult:
            plan = plan_import(await stored_rows(conn, self._tenant, session_id), batch)
            if plan.append:
                appended = await append_messages(conn, ctx, plan.append)
                written[0] = Written(appended.count, appended.tokens)
            rows = await stored_rows(conn, self._tenant, session_id)
            if rows is None:
                return ImportResult(message_ids=())
            changes = import_changes(rows, batch, plan, source)
            event = None
            if not changes.is_empty:
                applied = await compactor.apply(conn, session_id, changes, "import", None)
                event = applied if isinstance(applied, CompactionEvent) else None
            if event is not None:
                await mark_imported(
                    conn,
                    self._tenant,
                    session_id,
                    [m for m, _ in plan.summaries],
                    source=source,
                    source_ids=dict(provenance.source_ids),
                )
            return ImportResult(message_ids=tuple(m.message_id for m in batch), event=event)

        result: ImportResult = await self._write(operation)
        return result, written[0]

    @_call
    async def stored_hashes(self, session_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """The content hash of each stored message id of each of ``session_ids``, in one
        read (a chunk of ids a statement; a fork's own read: its inherited messages
        too): the importer's check of many sessions.
        Sessions that hold no message are left out (see
        :class:`~store.contract.BulkImportBackend`)."""
        for session_id in session_ids:
            check_session_id(session_id, self._limits)
        found: dict[str, dict[str, str]] = {}
        columns = (MESSAGES.c.session_id, MESSAGES.c.message_id, MESSAGES.c.content_hash)
        async with self._engine.connect() as conn:
            for part in chunks(sorted(set(session_ids))):
                query = select(*columns).where(
                    MESSAGES.c.tenant == self._tenant, MESSAGES.c.session_id.in_(part)
                )
                for session_id, message_id, digest in await conn.execute(query):
                    found.setdefault(session_id, {})[message_id] = digest
                forks = select(SESSIONS.c.session_id).where(
                    SESSIONS.c.tenant == self._tenant,
                    SESSIONS.c.session_id.in_(part),
                    SESSIONS.c.branch == "fork",
                )
                for (fork_id,) in await conn.execute(forks):
                    lineage = await read_lineage(conn, self._tenant, fork_id)
                    held = await stored_hashes_of(conn, self._tenant, lineage, None)
                    if held:
                        found[fork_id] = held
        return found

    @_call
    async def append_sessions(
        self, batches: Sequence[tuple[str, Sequence[Message], Provenance | None]]
    ) -> int:
        """Append to several sessions in one write transaction: the importer's bulk path
        (see :class:`~store.contract.BulkImportBackend`).

        Each ``(session id, messages, provenance)`` is checked and appended as
        :meth:`append` would, in the given order; nothing is stored when one fails.
        Returns the messages stored."""
        prepared: list[tuple[str, AppendContext, list[Message]]] = []
        for session_id, messages, provenance in batches:
            batch = self._checked_batch(session_id, messages, provenance)
            if batch:
                prepared.append((session_id, self._append_context(session_id, provenance), batch))
        if not prepared:
            return 0

        async def operation(conn: AsyncConnection) -> list[tuple[str, Appended]]:
            appended = await append_to_sessions(conn, [(ctx, batch) for _, ctx, batch in prepared])
            return [(sid, one) for (sid, _, _), one in zip(prepared, appended, strict=True)]

        with short_statements():
            done = await self._write(operation)
        stored = 0
        for session_id, appended in done:
            if appended.count:
                self._advance(session_id, appended)
                stored += appended.count
        if stored:
            await self._statistics.wrote(stored)
        return stored

    # -- retention and erasure --------------------------------------------------------

    @_connected
    async def _purge(self, cutoff: datetime, *, dry_run: bool) -> PurgeReport:
        """:data:`~store.sql.upkeep.erasure.PURGE_BATCH` sessions a transaction, with the
        erasure step of :mod:`store.sql.upkeep.erasure`."""

        async def read(operation: Callable[[AsyncConnection], Awaitable[T]]) -> T:
            async with self._engine.connect() as conn:
                return await operation(conn)

        report = await erasure.purge_sessions(
            read if dry_run else self._write, self._tenant, cutoff, dry_run=dry_run
        )
        if not dry_run:
            for session_id in report.sessions:
                self._pending.forget(self._tenant, session_id)
                self._cache.discard(session_id)
            if report.sessions:
                await erasure.checkpoint(self._engine)
        return report

    @_connected
    async def _redact(
        self, session_id: str, message_ids: tuple[str, ...], *, reason: str
    ) -> RedactReport:
        """With the erasure step of :mod:`store.sql.upkeep.erasure`."""
        whole = erasure.Redaction(
            tenant=self._tenant,
            session_id=session_id,
            message_ids=message_ids,
            reason=reason,
            event_id=new_event_id(),
            now=now(),
            count=self.count_tokens,
            tokenizer=self._tokenizer_name,
        )

        async def operation(conn: AsyncConnection) -> RedactReport:
            session = await lock_session(conn, self._tenant, session_id)
            quoting = await erasure.recall_results_quoting(
                conn, self._tenant, session_id, message_ids
            )
            if quoting:
                request = replace(whole, message_ids=(*message_ids, *quoting))
            else:
                request = whole
            if session["branch"] is not None or session["shared"]:
                report = await redact_in_branches(conn, request)
            else:
                report = await erasure.redact_messages(conn, request)
            if report.redacted or report.summaries:
                await erasure.erase_words(conn)
            return report

        report = await self._write(operation)
        self._cache.discard(session_id)
        complete = await erasure.finish_redaction(
            self._engine, self._write, self._tenant, session_id
        )
        if not complete:
            return report.model_copy(update={"complete": False})
        event = report.event
        if event is not None and erasure.FILE_ERASED_KEY in event.params:
            params = {**event.params, erasure.FILE_ERASED_KEY: True}
            return report.model_copy(update={"event": event.model_copy(update={"params": params})})
        return report

    # -- search -----------------------------------------------------------------------

    @_connected
    async def _search(self, request: SearchRequest, *, session_id: str | None) -> SearchPage:
        """One read of the index and the rows it matches (:mod:`store.sql.search`), on a
        read connection that begins no transaction for it (one round trip for a tenant's
        or a root's page); the database's cursor key read once (it never changes), and
        search found off by the missing index when another process turned it off since.
        An encrypted tenant keeps nothing searchable: refused in one line."""
        if self._sealing is not None:
            raise InvalidInput(
                f"search is off for tenant {self._tenant!r}: it is encrypted, and nothing "
                "searchable is kept of its texts (docs/encryption.md)"
            )
        async with read_connection(self._engine, single=True) as conn:
            if self._cursor_key is None:
                self._cursor_key = await cursor_key(conn)
            try:
                return await search_page(conn, self._tenant, request, session_id, self._cursor_key)
            except DBAPIError as error:
                if not index_missing(error):
                    raise
                self._cursor_key = None
                raise InvalidInput(SEARCH_OFF) from None

    # -- branches ---------------------------------------------------------------------

    @_connected
    async def _fork(
        self, session_id: str, *, at: str | None, new_session_id: str | None
    ) -> SessionInfo:
        """One write transaction, the source's row locked (see
        :mod:`store.sql.branches.fork`)."""
        new_id = new_session_id if new_session_id is not None else new_fork_id()

        async def operation(conn: AsyncConnection) -> SessionInfo:
            source = await lock_session(conn, self._tenant, session_id)
            if source["branch"] in ("tail", "kept"):
                raise tail_refusal(
                    session_id, source["parent_session_id"], source["branch_event_id"]
                )
            taken = select(SESSIONS.c.session_id).where(
                SESSIONS.c.tenant == self._tenant, SESSIONS.c.session_id == new_id
            )
            if (await conn.execute(taken)).first() is not None:
                raise InvalidInput(
                    f"cannot fork session {session_id!r} as {new_id!r}: that session exists"
                )
            cut = await resolve_cut(conn, self._tenant, source, at, verb="fork", tails=True)
            return await fork_session(
                conn, self._tenant, source, cut, new_id, event_id=new_event_id(), now=now()
            )

        return await self._write(operation)

    @_connected
    async def _rewind(self, session_id: str, *, to: str | None) -> CompactionEvent | None:
        async def operation(conn: AsyncConnection) -> CompactionEvent | None:
            return await rewind_session(conn, self._tenant, session_id, to, now=now())

        event = await self._write(operation)
        self._cache.discard(session_id)
        return event

    # -- usage ------------------------------------------------------------------------

    @_connected
    async def _record_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        message_id: str | None,
        call_id: str | None,
        sent: Sent | None,
    ) -> bool:
        async def operation(conn: AsyncConnection) -> bool:
            return await usage_rows.record_call(
                conn,
                self._tenant,
                session_id,
                usage,
                message_id=message_id,
                call_id=call_id,
                sent=sent,
            )

        for attempt in range(1, _RECORD_ATTEMPTS + 1):
            try:
                return await self._write(operation)
            except IntegrityError:  # another writer took the same seq: read again
                if attempt == _RECORD_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    @_call
    async def record_usages(
        self, calls: Sequence[tuple[str, Usage, str | None, str | None]]
    ) -> int:
        """Record many calls in one write transaction, none paired (see
        :class:`~store.contract.BulkUsageBackend`). Returns the calls recorded."""
        for session_id, usage, message_id, call_id in calls:
            check_session_id(session_id, self._limits)
            check_usage(usage)
            check_text(message_id, "message_id", optional=True)
            check_text(call_id, "call_id", optional=True)
        if not calls:
            return 0

        async def operation(conn: AsyncConnection) -> int:
            return await usage_rows.record_calls(conn, self._tenant, calls)

        for attempt in range(1, _RECORD_ATTEMPTS + 1):
            try:
                return await self._write(operation)
            except IntegrityError:  # another writer took the same seq: run it again
                if attempt == _RECORD_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    @_connected
    async def _usage_calls(
        self, session_id: str | None, *, since: datetime | None
    ) -> list[UsageCall]:
        async with self._engine.connect() as conn:
            return await usage_rows.read_calls(conn, self._tenant, session_id, since=since)

    @_connected
    async def _paired_calls(
        self, session_id: str, *, model: str | None, limit: int
    ) -> tuple[str | None, list[tuple[int, int]]]:
        async with self._engine.connect() as conn:
            return await usage_rows.paired_points(
                conn, self._tenant, session_id, model=model, limit=limit
            )

    @_connected
    async def _branches(self, session_id: str) -> list[BranchInfo]:
        async with self._engine.connect() as conn:
            return await read_branches(conn, self._tenant, session_id)

    # -- administration and upkeep ----------------------------------------------------

    @_call
    async def tenants(self) -> list[TenantInfo]:
        """Every tenant of the database, by name, with its totals: for administrators,
        the one call that reads across tenants (see :class:`~store.contract.AdminBackend`)."""
        async with self._engine.connect() as conn:
            return await read_tenants(conn)

    @_call
    async def vacuum(self) -> None:
        """Return the space of what was deleted to the system and leave no old page
        behind: ``VACUUM`` of the database file and a truncated write-ahead log (SQLite),
        ``VACUUM`` of the chatledger tables (PostgreSQL; see ``docs/retention.md`` for
        what it does not erase). Takes the whole database's lock on SQLite while it runs
        (see :class:`~store.contract.UpkeepBackend`)."""
        await erasure.vacuum(self._engine)

    @_call
    async def doctor(self, session_id: str | None = None, *, fix: bool = False) -> DoctorReport:
        """Check one session, or every session of the tenant, for what
        :mod:`store.sql.upkeep.doctor` lists; with ``fix``, repair what can be repaired (one
        write transaction per session, each fix audited; see
        :class:`~store.contract.UpkeepBackend`)."""
        if session_id is not None:
            check_session_id(session_id, self._limits)
        check_flag(fix, "fix")
        findings: list[Finding] = []
        checked = 0
        after: str | None = None
        while True:
            if session_id is not None:
                page = [session_id]
            else:
                async with self._engine.connect() as conn:
                    page = await session_ids(conn, self._tenant, after)
            for sid in page:
                try:
                    findings.extend(await self._doctor_session(sid, fix=fix))
                except SessionNotFound:
                    if session_id is not None:
                        raise
                    continue  # deleted since it was listed
                checked += 1
            if session_id is not None or not page:
                break
            after = page[-1]
        return DoctorReport(
            tenant=self._tenant, sessions=checked, fix=fix, findings=tuple(findings)
        )

    async def _doctor_session(self, session_id: str, *, fix: bool) -> list[Finding]:
        async with self._engine.connect() as conn:
            found = await diagnose(conn, self._tenant, session_id, self._limits)
        if not fix or not any(f.fixable for f in found):
            return found

        async def operation(conn: AsyncConnection) -> list[Finding]:
            return await repair(conn, self._tenant, session_id, self.count_tokens, self._limits)

        repaired = await self._write(operation)
        self._cache.discard(session_id)
        if not any(f.check == "erasure_pending" for f in repaired):
            return repaired
        if not await erasure.finish_redaction(self._engine, self._write, self._tenant, session_id):
            return repaired
        return [
            f.model_copy(update={"fixed": True}) if f.check == "erasure_pending" else f
            for f in repaired
        ]


@dataclass(frozen=True, slots=True)
class _TranslatedSource:
    """A message source whose loads raise only :class:`~store.errors.ChatledgerError`.

    A :class:`View` returned by the store loads its messages later, outside the call.
    """

    inner: MessageSource
    sealing: Sealing | None = None

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        """The messages of each group, as the wrapped source loads them."""
        with translate_errors(), sealed(self.sealing):
            return await self.inner.load(group_ids)


if TYPE_CHECKING:

    def _conforms(store: HistoryStore) -> HistoryBackend:
        return store  # mypy checks that HistoryStore implements the whole contract
