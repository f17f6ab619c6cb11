"""The in-memory store's first half: sessions, appends, reads, views and projections.

Mirrors :class:`store.history.HistoryStore` (issue #4) without a database: the rows live
in a :class:`MemoryDatabase` that several stores (one per tenant) may share.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Self

from pydantic import JsonValue

from store._append import check_tokenizer
from store.errors import InvalidInput, SessionNotFound, check_session_id, translate_errors
from store.memory._state import SessionData, utcnow
from store.models import Provenance, SessionInfo, StoredMessage, content_hash
from strategies.base import CompactionStrategy
from strategies.messages import Message
from strategies.tokenizers import (
    DEFAULT_POLICY,
    TiktokenTokenizer,
    TokenCountPolicy,
    Tokenizer,
    count_message_tokens,
)
from strategies.view import View

__all__ = ["DEFAULT_TENANT", "PAGE_SIZE", "MemoryDatabase", "MemoryStoreBase"]

logger = logging.getLogger("chatledger.store")

DEFAULT_TENANT = "default"
PAGE_SIZE = 500
PENDING_CACHE_SIZE = 4096


@dataclass
class MemoryDatabase:
    """What a database would hold: every tenant's sessions, by ``(tenant, session_id)``."""

    sessions: dict[tuple[str, str], SessionData] = field(default_factory=dict)


class MemoryStoreBase:
    """Sessions, appends, history and projections, in memory."""

    def __init__(
        self,
        database: MemoryDatabase | None = None,
        *,
        tenant: str = DEFAULT_TENANT,
        tokenizer: Tokenizer | None = None,
        policy: TokenCountPolicy = DEFAULT_POLICY,
        pending_cache_size: int = PENDING_CACHE_SIZE,
    ) -> None:
        """A store for ``tenant`` over ``database`` (a fresh, empty one when None).

        The default tokenizer is tiktoken's ``o200k_base``, as the SQL store's.
        """
        if not isinstance(tenant, str) or not tenant:
            raise InvalidInput("tenant must be a non-empty string")
        if tokenizer is None:
            tokenizer = TiktokenTokenizer("o200k_base")
        self._db = database if database is not None else MemoryDatabase()
        self._tenant = tenant
        self._tokenizer = tokenizer
        self._policy = policy
        self._pending: OrderedDict[tuple[str, str, str], tuple[str, int]] = OrderedDict()
        self._pending_size = pending_cache_size

    def for_tenant(self, tenant: str) -> Self:
        """A store for another tenant over the same database (same tokenizer and policy)."""
        return type(self)(self._db, tenant=tenant, tokenizer=self._tokenizer, policy=self._policy)

    async def aclose(self) -> None:
        """Nothing to release; kept for parity with the SQL store."""

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
    def database(self) -> MemoryDatabase:
        """The rows, shared by every store made with :meth:`for_tenant`."""
        return self._db

    @property
    def tenant(self) -> str:
        """The tenant every call of this store is limited to."""
        return self._tenant

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer new messages are counted with."""
        return self._tokenizer

    @property
    def policy(self) -> TokenCountPolicy:
        """The token-count policy new messages are counted with."""
        return self._policy

    # -- rows -------------------------------------------------------------------------

    def _find(self, session_id: str) -> SessionData | None:
        return self._db.sessions.get((self._tenant, session_id))

    def _get(self, session_id: str) -> SessionData:
        session = self._find(session_id)
        if session is None:
            raise SessionNotFound(session_id, tenant=self._tenant)
        return session

    def _counted(self, session_id: str) -> SessionData:
        """The session, refusing one counted with another tokenizer."""
        session = self._get(session_id)
        check_tokenizer(session.tokenizer, self._tokenizer, session_id)
        return session

    def _blank(self, session_id: str) -> SessionData:
        now = utcnow()
        return SessionData(self._tenant, session_id, self._tokenizer.name, now, now)

    def _get_or_create(self, session_id: str) -> SessionData:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidInput("session_id must be a non-empty string")
        session = self._find(session_id)
        if session is None:
            session = self._blank(session_id)
            self._db.sessions[(self._tenant, session_id)] = session
        return session

    def _count_for(self, session_id: str) -> _Count:
        return _Count(self, session_id)

    # -- messages ---------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        messages: Iterable[Message],
        *,
        provenance: Provenance | None = None,
    ) -> list[str]:
        """Append ``messages`` (the session is created on first use); returns their ids.

        A message whose id is already stored with the same content is skipped; with
        different content it raises :class:`~store.errors.InvalidInput` and nothing of
        the batch is stored. An empty batch does nothing (and creates no session).
        """
        check_session_id(session_id)
        batch = _checked(messages)
        if not batch:
            return []
        existing = self._find(session_id)
        if existing is not None:
            check_tokenizer(existing.tokenizer, self._tokenizer, session_id)
        probe = existing or self._blank(session_id)
        fresh = probe.new_messages(batch)
        session = self._get_or_create(session_id)
        now = utcnow()
        source = None
        if provenance is not None:
            now = provenance.imported_at or now
            source = (provenance.system, dict(provenance.source_ids))
        session.append(fresh, self._count_for(session.session_id), now, source=source)
        return [m.message_id for m in batch]

    async def history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        limit: int | None = None,
        before: int | None = None,
        after: int | None = None,
    ) -> list[StoredMessage]:
        """Stored messages, oldest first by ``seq``; ``after``/``before`` are exclusive.

        With ``before`` and ``limit``, the newest ``limit`` messages before ``before``.
        Messages of excluded groups are left out unless ``include_excluded``.
        """
        check_session_id(session_id)
        if limit is not None and limit < 0:
            raise InvalidInput("limit must be >= 0")
        session = self._get(session_id)
        rows = [
            r
            for r in session.rows.values()
            if (include_excluded or not session.groups[r.group_id].excluded)
            and (after is None or r.seq > after)
            and (before is None or r.seq < before)
        ]
        rows.sort(key=lambda r: r.seq)
        if limit is not None:
            rows = rows[-limit:] if before is not None and limit else rows[:limit]
        return [session.stored_message(r) for r in rows]

    async def aiter_history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        after: int | None = None,
        before: int | None = None,
        page_size: int = PAGE_SIZE,
    ) -> AsyncIterator[StoredMessage]:
        """Stream the session's history in pages of ``page_size``, oldest first."""
        check_session_id(session_id)
        cursor = after
        while True:
            page = await self.history(
                session_id, include_excluded=include_excluded, limit=page_size, after=cursor
            )
            for stored in page:
                if before is not None and stored.seq >= before:
                    return
                yield stored
            if len(page) < page_size:
                return
            cursor = page[-1].seq

    # -- sessions ---------------------------------------------------------------------

    async def sessions(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        updated_since: datetime | None = None,
    ) -> list[SessionInfo]:
        """The tenant's sessions ordered by id; page with ``after`` (the last id seen)."""
        if limit is not None and limit < 0:
            raise InvalidInput("limit must be >= 0")
        found = sorted(
            (
                s
                for (tenant, sid), s in self._db.sessions.items()
                if tenant == self._tenant
                and (after is None or sid > after)
                and (updated_since is None or s.updated_at >= updated_since)
            ),
            key=lambda s: s.session_id,
        )
        return [s.info() for s in (found if limit is None else found[:limit])]

    async def session(self, session_id: str) -> SessionInfo:
        """One session's info; :class:`~store.errors.SessionNotFound` when absent."""
        check_session_id(session_id)
        return self._get(session_id).info()

    async def get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        """The session's metadata."""
        check_session_id(session_id)
        return dict(self._get(session_id).metadata)

    async def set_metadata(self, session_id: str, metadata: Mapping[str, JsonValue]) -> None:
        """Replace the session's metadata (creating the session when absent)."""
        check_session_id(session_id)
        session = self._get_or_create(session_id)
        session.metadata = dict(metadata)
        session.touch(utcnow())

    async def delete_session(self, session_id: str) -> None:
        """Delete the session and everything stored for it."""
        check_session_id(session_id)
        self._get(session_id)
        del self._db.sessions[(self._tenant, session_id)]
        for key in [k for k in self._pending if k[:2] == (self._tenant, session_id)]:
            del self._pending[key]

    async def recount(self, session_id: str) -> SessionInfo:
        """Recount every message of the session with this store's tokenizer and policy."""
        check_session_id(session_id)
        session = self._get(session_id)
        for row in session.rows.values():
            row.tokens = count_message_tokens(row.message, self._tokenizer, policy=self._policy)
            if row.reduced is not None:
                row.reduced_tokens = count_message_tokens(
                    row.reduced, self._tokenizer, policy=self._policy
                )
        for group in session.groups.values():
            group.version += 1
        session.tokenizer = self._tokenizer.name
        session.touch(utcnow())
        return session.info()

    # -- projection -------------------------------------------------------------------

    async def view(self, session_id: str) -> View:
        """The active view of the session: what a strategy plans on."""
        check_session_id(session_id)
        return self._view_of(self._counted(session_id))

    def _view_of(self, session: SessionData) -> View:
        return session.view(tokenizer=self._tokenizer, policy=self._policy)

    async def context(
        self,
        session_id: str,
        *,
        strategy: CompactionStrategy | None = None,
        pending: Sequence[Message] = (),
    ) -> list[Message]:
        """The messages to send: active groups plus ``pending``, through ``strategy``.

        ``pending`` are the in-flight messages of the current run, not stored yet; they
        are annotated after the stored ones (a pending result joins its stored call) and
        their token counts are cached, so that appending them later does not count them
        again. Nothing is persisted. A session that does not exist reads as empty.
        """
        check_session_id(session_id)
        batch = _checked(pending)
        session = self._find(session_id)
        if session is None:
            session = self._blank(session_id)
        else:
            check_tokenizer(session.tokenizer, self._tokenizer, session_id)
            session = session.clone()
        fresh = session.new_messages(batch)
        session.append(fresh, _Count(self, session_id, keep=True), utcnow())
        view = self._view_of(session)
        if strategy is not None:
            with translate_errors():  # a strategy's TokenizerMismatch, as in SQL
                view = view.apply(await strategy.plan(view))
        return await view.project()

    # -- token counts -----------------------------------------------------------------

    def _count(self, session_id: str, message: Message, *, keep: bool) -> int:
        key = (self._tenant, session_id, message.message_id)
        digest = content_hash(message)
        cached = self._pending.get(key)
        if cached is not None and cached[0] == digest:
            if keep:
                self._pending.move_to_end(key)
            else:
                del self._pending[key]
            return cached[1]
        tokens = count_message_tokens(message, self._tokenizer, policy=self._policy)
        if keep:
            self._pending[key] = (digest, tokens)
            while len(self._pending) > self._pending_size:
                self._pending.popitem(last=False)
        return tokens


@dataclass(frozen=True)
class _Count:
    """Counts messages of one session for the store, through its pending-count cache."""

    store: MemoryStoreBase
    session_id: str
    keep: bool = False
    """Cache the count (pending messages) rather than consume a cached one (appends)."""

    def __call__(self, message: Message) -> int:
        return self.store._count(self.session_id, message, keep=self.keep)


def _checked(messages: Iterable[Message]) -> list[Message]:
    batch = list(messages)
    for message in batch:
        if not isinstance(message, Message):
            raise InvalidInput(f"expected Message, got {type(message).__name__}")
    return batch
