"""The async SQL history store: append and read messages, list and manage sessions.

::

    async with HistoryStore.open("sqlite:///chat.db", tenant="acme") as store:
        await store.append("session-1", [Message.text_message("user", "Hi")])
        for stored in await store.history("session-1"):
            print(stored.seq, stored.message.text)

Every query is filtered by the store's tenant. Writes run in one transaction each
(``BEGIN IMMEDIATE`` on SQLite, the session row locked on PostgreSQL) and are retried
with a bounded, jittered backoff when the database reports a transient conflict;
:class:`~store.errors.ConcurrentWriteError` is raised when the retries run out.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar, cast

from pydantic import JsonValue
from sqlalchemy import Table, delete, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store._api import CompactionMethods, check_message
from store._append import Appended, append_messages
from store._cache import DEFAULT_CACHE_MESSAGES, SessionCache
from store._pending import PendingCounts
from store._read import read_history, read_sessions
from store._recount import recount_session
from store._rows import lock_session, now, read_session
from store._sqlite_driver import short_statements
from store._stream import stream_history
from store.engine import create_engine, write_connection
from store.errors import (
    ConcurrentWriteError,
    InvalidInput,
    check_session_id,
    is_retryable,
    translated,
)
from store.migrations import ensure_schema
from store.models import Provenance, SessionInfo, StoredMessage, session_from_row
from store.schema import EventGroupRow, EventRow, GroupRow, MessageRow, OpenCallRow, SessionRow
from strategies.messages import Message
from strategies.tokenizers import (
    DEFAULT_POLICY,
    TiktokenTokenizer,
    TokenCountPolicy,
    Tokenizer,
    count_message_tokens,
)

__all__ = ["HistoryStore", "StoreOpener"]

T = TypeVar("T")

DEFAULT_TENANT = "default"
PAGE_SIZE = 500
MAX_ATTEMPTS = 12
_CHILD_TABLES = (EventGroupRow, EventRow, OpenCallRow, MessageRow, GroupRow)


class StoreOpener:
    """What :meth:`HistoryStore.open` returns: await it, or use it with ``async with``."""

    def __init__(self, factory: Callable[[], Awaitable[HistoryStore]]) -> None:
        self._factory = factory
        self._store: HistoryStore | None = None

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


class HistoryStore(CompactionMethods):
    """Persistent chat history for one tenant, in SQLite or PostgreSQL."""

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
    ) -> None:
        """Wrap ``engine`` (whose schema must be current: prefer :meth:`open`).

        ``cache_messages`` bounds the parsed messages of active views kept between calls
        (``0`` keeps none); the cache is checked against the session row on every read,
        so writes from other processes are always seen (see :mod:`store._cache`).
        """
        if not isinstance(tenant, str) or not tenant or "\x00" in tenant:
            raise InvalidInput("tenant must be a non-empty string without NUL characters")
        self._engine = engine
        self._tenant = tenant
        self._tokenizer: Tokenizer = tokenizer or TiktokenTokenizer("o200k_base")
        self._policy = policy
        self._owns_engine = owns_engine
        self._max_attempts = max(1, max_attempts)
        self._closed = False
        self._pending = PendingCounts(self.count_tokens)
        self._cache = SessionCache(cache_messages)

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
        schema: str | None = None,
        cache_messages: int = DEFAULT_CACHE_MESSAGES,
    ) -> StoreOpener:
        """Open a store on ``url`` (else ``$CHATLEDGER_URL``, else ``./chatledger.db``).

        An empty database gets the schema; a database whose schema is behind raises
        :class:`~store.errors.MigrationRequired` unless ``upgrade`` is true.
        ``cache_messages`` bounds the store's cache of active views (0 turns it off).
        """

        async def factory() -> HistoryStore:
            engine = create_engine(url, schema=schema)
            try:
                await ensure_schema(engine, upgrade=upgrade, schema=schema)
            except BaseException:
                await engine.dispose()
                raise
            return cls(
                engine,
                tenant=tenant,
                tokenizer=tokenizer,
                policy=policy,
                owns_engine=True,
                cache_messages=cache_messages,
            )

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
        cache_messages: int = DEFAULT_CACHE_MESSAGES,
    ) -> StoreOpener:
        """Open a store on an engine the application owns (never disposed by the store)."""

        async def factory() -> HistoryStore:
            await ensure_schema(engine, upgrade=upgrade)
            return cls(
                engine,
                tenant=tenant,
                tokenizer=tokenizer,
                policy=policy,
                cache_messages=cache_messages,
            )

        return StoreOpener(factory)

    async def aclose(self) -> None:
        """Release the engine (when the store created it). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._owns_engine:
                await self._engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine."""
        return self._engine

    @property
    def tenant(self) -> str:
        """The tenant every query of this store is limited to."""
        return self._tenant

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer new messages are counted with."""
        return self._tokenizer

    @property
    def policy(self) -> TokenCountPolicy:
        """The token-count policy new messages are counted with."""
        return self._policy

    def count_tokens(self, message: Message) -> int:
        """Count ``message`` the way this store counts what it stores."""
        return count_message_tokens(message, self._tokenizer, policy=self._policy)

    # -- transactions ----------------------------------------------------------------

    async def _write(self, operation: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Run ``operation`` in a write transaction, retrying transient conflicts."""
        delay = 0.01
        for attempt in range(self._max_attempts):
            try:
                async with write_connection(self._engine) as conn:
                    return await operation(conn)
            except DBAPIError as error:
                if not is_retryable(error):
                    raise
                if attempt == self._max_attempts - 1:
                    raise ConcurrentWriteError(
                        f"write still conflicting after {self._max_attempts} attempts: {error}"
                    ) from error
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- messages ----------------------------------------------------------------------

    @translated
    async def append(
        self,
        session_id: str,
        messages: Iterable[Message],
        *,
        provenance: Provenance | None = None,
    ) -> list[str]:
        """Append ``messages`` to the session (created on first use), in one transaction.

        Returns the id of each given message. A message whose id is already stored with
        the same content is skipped; with different content it raises
        :class:`~store.errors.InvalidInput` (and nothing of the batch is stored).
        """
        check_session_id(session_id)
        batch = list(messages)
        for message in batch:
            check_message(message)
        if not batch:
            return []
        ctx = self._append_context(session_id, provenance)

        async def operation(conn: AsyncConnection) -> Appended:
            return await append_messages(conn, ctx, batch)

        with short_statements():  # see store._sqlite_driver: what runs on the loop's thread
            appended = await self._write(operation)
        if appended.count:
            before = appended.before
            after = (before[0], before[1] + 1)
            self._cache.advance(session_id, before, after, appended.touched, rows_touched=True)
        return [m.message_id for m in batch]

    @translated
    async def history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        limit: int | None = None,
        before: int | None = None,
        after: int | None = None,
    ) -> list[StoredMessage]:
        """Stored messages of the session, oldest first, paged by ``seq``.

        ``after`` and ``before`` are exclusive ``seq`` bounds; with ``before`` and
        ``limit``, the newest ``limit`` messages before ``before`` are returned.
        Excluded messages are left out unless ``include_excluded``.
        """
        check_session_id(session_id)
        if limit is not None and limit < 0:
            raise InvalidInput("limit must be >= 0")
        async with self._engine.connect() as conn:
            await read_session(conn, self._tenant, session_id)
            return await read_history(
                conn,
                self._tenant,
                session_id,
                include_excluded=include_excluded,
                limit=limit,
                before=before,
                after=after,
            )

    def aiter_history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        after: int | None = None,
        before: int | None = None,
        page_size: int = PAGE_SIZE,
    ) -> AsyncIterator[StoredMessage]:
        """Stream the session's history in pages of ``page_size``, oldest first.

        One connection for the whole stream (see :func:`store._stream.stream_history`):
        on SQLite one snapshot, on PostgreSQL one short transaction per page.
        """
        check_session_id(session_id)
        return stream_history(
            self._engine,
            self._tenant,
            session_id,
            include_excluded=include_excluded,
            after=after,
            before=before,
            page_size=page_size,
        )

    # -- sessions ----------------------------------------------------------------------

    @translated
    async def sessions(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        updated_since: datetime | None = None,
    ) -> list[SessionInfo]:
        """The tenant's sessions ordered by id; page with ``after`` (the last id seen)."""
        async with self._engine.connect() as conn:
            return await read_sessions(
                conn, self._tenant, limit=limit, after=after, updated_since=updated_since
            )

    @translated
    async def session(self, session_id: str) -> SessionInfo:
        """One session's info; :class:`~store.errors.SessionNotFound` when absent."""
        check_session_id(session_id)
        async with self._engine.connect() as conn:
            return session_from_row(await read_session(conn, self._tenant, session_id))

    @translated
    async def get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        """The session's metadata."""
        check_session_id(session_id)
        return dict((await self.session(session_id)).metadata)

    @translated
    async def set_metadata(self, session_id: str, metadata: Mapping[str, JsonValue]) -> None:
        """Replace the session's metadata (creating the session when absent)."""
        check_session_id(session_id)
        value = dict(metadata)
        table = cast(Table, SessionRow.__table__)

        async def operation(conn: AsyncConnection) -> None:
            await lock_session(
                conn, self._tenant, session_id, create_with_tokenizer=self._tokenizer.name
            )
            await conn.execute(
                update(table)
                .where(table.c.tenant == self._tenant, table.c.session_id == session_id)
                .values(metadata=value, updated_at=now(), revision=table.c.revision + 1)
            )

        await self._write(operation)

    @translated
    async def delete_session(self, session_id: str) -> None:
        """Delete the session and everything stored for it."""
        check_session_id(session_id)

        async def operation(conn: AsyncConnection) -> None:
            await lock_session(conn, self._tenant, session_id)
            for model in (*_CHILD_TABLES, SessionRow):
                table = cast(Table, model.__table__)
                await conn.execute(
                    delete(table).where(
                        table.c.tenant == self._tenant, table.c.session_id == session_id
                    )
                )

        await self._write(operation)
        self._pending.forget(self._tenant, session_id)
        self._cache.discard(session_id)

    @translated
    async def recount(self, session_id: str) -> SessionInfo:
        """Recount every message of the session with this store's tokenizer and policy."""
        check_session_id(session_id)

        async def operation(conn: AsyncConnection) -> None:
            await recount_session(
                conn, self._tenant, session_id, tokenizer=self._tokenizer, policy=self._policy
            )

        await self._write(operation)
        return await self.session(session_id)
