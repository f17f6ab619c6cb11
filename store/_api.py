"""The second half of :class:`store.history.HistoryStore`: projection, compaction, audit.

Kept apart from ``history.py`` (sessions, appends, reads) to keep modules short;
:class:`HistoryStore` inherits these methods. The rules are those of the in-memory
store (:mod:`store.memory`), which a stateful test compares this store against.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Literal, TypeVar, overload

from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store import _audit
from store._append import AppendContext, append_messages, check_tokenizer
from store._cache import SessionCache, session_key
from store._compact import Compactor
from store._dedupe import dedupe, new_messages, stored_hashes
from store._import import mark_imported, stored_rows
from store._pending import PendingCounts
from store._restore import restore_groups, set_pinned
from store._rows import read_session
from store._sqlite_driver import short_statements
from store._view import SqlSource, read_view, with_pending
from store.audit_models import CompactionEvent, ExcludedGroup, ImportResult, Phase, Stats, WhyResult
from store.errors import (
    InvalidInput,
    SessionNotFound,
    check_session_id,
    translate_errors,
    translated,
)
from store.memory._af_import import import_changes, plan_import, source_ids
from store.models import Provenance
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.tokenizers import TokenCountPolicy, Tokenizer
from strategies.view import MessageSource, View

__all__ = ["CompactionMethods", "check_message"]

T = TypeVar("T")


class CompactionMethods:
    """Projection, compaction on write, audit, restore, pin and import (issue #5)."""

    _engine: AsyncEngine
    _tenant: str
    _tokenizer: Tokenizer
    _policy: TokenCountPolicy
    _pending: PendingCounts
    _cache: SessionCache

    async def _write(self, operation: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        raise NotImplementedError  # pragma: no cover - provided by HistoryStore

    async def append(
        self,
        session_id: str,
        messages: Iterable[Message],
        *,
        provenance: Provenance | None = None,
    ) -> list[str]:
        """Provided by :class:`HistoryStore`."""
        raise NotImplementedError  # pragma: no cover

    def _compactor(self) -> Compactor:
        return Compactor(
            engine=self._engine,
            tenant=self._tenant,
            tokenizer=self._tokenizer,
            policy=self._policy,
            write=self._write,
            counter=lambda sid: self._pending.counter(self._tenant, sid, keep=False),
            cache=self._cache,
        )

    def _append_context(
        self, session_id: str, provenance: Provenance | None = None
    ) -> AppendContext:
        """How this store appends to ``session_id`` (pending counts consumed)."""
        return AppendContext(
            tenant=self._tenant,
            session_id=session_id,
            tokenizer=self._tokenizer,
            policy=self._policy,
            provenance=provenance,
            counter=self._pending.counter(self._tenant, session_id, keep=False),
            holds=partial(self._pending.holds, self._tenant, session_id),
        )

    def _source(self, session_id: str, session: RowMapping) -> SqlSource:
        entry = self._cache.entry(session_id, session_key(session))
        return SqlSource(self._engine, self._tenant, session_id, self._cache, entry)

    # -- projection -------------------------------------------------------------------

    @translated
    async def view(self, session_id: str) -> View:
        """The active view of the session: what a strategy plans on."""
        check_session_id(session_id)
        with short_statements():
            return await self._view(session_id)

    async def _view(self, session_id: str) -> View:
        async with self._engine.connect() as conn:
            session = await read_session(conn, self._tenant, session_id)
            check_tokenizer(session["tokenizer"], self._tokenizer, session_id)
            view, _ = await read_view(
                conn,
                self._source(session_id, session),
                session,
                tokenizer=self._tokenizer,
                policy=self._policy,
            )
        return replace(view, source=_TranslatedSource(view.source))

    @translated
    async def context(
        self,
        session_id: str,
        *,
        strategy: CompactionStrategy | None = None,
        pending: Sequence[Message] = (),
    ) -> list[Message]:
        """The messages to send: active groups plus ``pending``, through ``strategy``.

        ``pending`` are the in-flight messages of the run, not stored yet: annotated after
        the stored ones, their token counts cached so that appending them later does not
        count them again. Nothing is persisted; a missing session reads as empty. Costs
        O(active groups and their messages).
        """
        check_session_id(session_id)
        batch = _checked(pending)
        with short_statements():  # the active view's rows, read once then cached
            view = await self._pending_view(session_id, batch)
        if strategy is not None:
            view = view.apply(await strategy.plan(view))
        return await view.project()

    async def _pending_view(self, session_id: str, batch: list[Message]) -> View:
        count = self._pending.counter(self._tenant, session_id, keep=True)
        ctx = AppendContext(self._tenant, session_id, self._tokenizer, self._policy)
        async with self._engine.connect() as conn:
            try:
                session = await read_session(conn, self._tenant, session_id)
            except SessionNotFound:
                dedupe(ctx, batch, {})
                fresh = new_messages(batch, {})
                # counted through the cache, as for a stored session
                return View.from_messages(
                    fresh, self._tokenizer, policy=self._policy, counter=count
                )
            check_tokenizer(session["tokenizer"], self._tokenizer, session_id)
            source = self._source(session_id, session)
            view, _ = await read_view(
                conn, source, session, tokenizer=self._tokenizer, policy=self._policy
            )
            # the groups a projection sends, read on this connection rather than another
            await source.prefetch(conn, [g.group_id for g in view.sendable()])
            stored = await stored_hashes(conn, ctx, batch)
            dedupe(ctx, batch, stored)
            fresh = new_messages(batch, stored)
            return await with_pending(conn, ctx, session, view, fresh, count)

    # -- compaction -------------------------------------------------------------------

    @overload
    async def compact(
        self,
        session_id: str,
        strategy: CompactionStrategy,
        *,
        phase: Phase = ...,
        dry_run: Literal[False] = ...,
    ) -> CompactionEvent | None: ...

    @overload
    async def compact(
        self,
        session_id: str,
        strategy: CompactionStrategy,
        *,
        phase: Phase = ...,
        dry_run: Literal[True],
    ) -> ChangeSet: ...

    @translated
    async def compact(
        self,
        session_id: str,
        strategy: CompactionStrategy,
        *,
        phase: Phase = "manual",
        dry_run: bool = False,
    ) -> CompactionEvent | ChangeSet | None:
        """Plan ``strategy`` on a snapshot of the active view and apply it if still valid.

        The plan is made outside any write transaction; it applies only if the groups it
        touches are unchanged since the snapshot, else it is planned again once, and on a
        second conflict nothing is applied and a warning is logged. Returns the event, or
        None when nothing changed; with ``dry_run`` the change set, writing nothing.
        """
        check_session_id(session_id)
        return await self._compactor().compact(session_id, strategy, phase=phase, dry_run=dry_run)

    # -- audit ------------------------------------------------------------------------

    @translated
    async def audit(
        self,
        session_id: str | None = None,
        *,
        since: datetime | None = None,
        strategy: str | None = None,
        phase: Phase | None = None,
        limit: int | None = None,
    ) -> list[CompactionEvent]:
        """Compaction events, newest first, of one session or of the whole tenant."""
        if session_id is not None:
            check_session_id(session_id)
        if limit is not None and limit < 0:
            raise InvalidInput("limit must be >= 0")
        async with self._engine.connect() as conn:
            if session_id is not None:
                await read_session(conn, self._tenant, session_id)
            return await _audit.read_events(
                conn,
                self._tenant,
                session_id,
                since=since,
                strategy=strategy,
                phase=phase,
                limit=limit,
            )

    @translated
    async def excluded(self, session_id: str) -> list[ExcludedGroup]:
        """The session's excluded groups in order, with reason, event and summary."""
        check_session_id(session_id)
        async with self._engine.connect() as conn:
            return await _audit.excluded_groups(conn, self._tenant, session_id)

    @translated
    async def why(self, session_id: str, message_id: str) -> WhyResult:
        """Whether a stored message is in the context (built without a strategy), and why."""
        check_session_id(session_id)
        async with self._engine.connect() as conn:
            return await _audit.why(conn, self._tenant, session_id, message_id)

    @translated
    async def stats(self, session_id: str | None = None) -> Stats:
        """Stored versus active messages, groups and tokens (one session or the tenant)."""
        if session_id is not None:
            check_session_id(session_id)
        async with self._engine.connect() as conn:
            return await _audit.stats(conn, self._tenant, session_id)

    # -- restore and pin --------------------------------------------------------------

    @translated
    async def restore(
        self,
        session_id: str,
        *,
        group_ids: Iterable[str] | None = None,
        event_id: str | None = None,
    ) -> CompactionEvent | None:
        """Re-include groups (pinning them), or undo one event; audited as ``restore``.

        Restoring an event re-includes the groups it excluded or summarized, excludes the
        summaries it inserted and drops its reductions. Restoring a group replaced by a
        summary restores every group of that summary and excludes the summary. Returns
        None when nothing changed.
        """
        check_session_id(session_id)
        if (group_ids is None) == (event_id is None):
            raise InvalidInput("pass exactly one of group_ids and event_id")
        ids = list(group_ids) if group_ids is not None else None

        async def operation(conn: AsyncConnection) -> CompactionEvent | None:
            return await restore_groups(
                conn, self._tenant, session_id, group_ids=ids, event_id=event_id
            )

        return await self._write(operation)

    @translated
    async def pin(self, session_id: str, group_ids: Iterable[str]) -> list[str]:
        """Pin groups: strategies never exclude them. Returns the ids that changed."""
        check_session_id(session_id)
        return await self._set_pinned(session_id, group_ids, pinned=True)

    @translated
    async def unpin(self, session_id: str, group_ids: Iterable[str]) -> list[str]:
        """Unpin groups. Returns the ids that changed."""
        check_session_id(session_id)
        return await self._set_pinned(session_id, group_ids, pinned=False)

    async def _set_pinned(
        self, session_id: str, group_ids: Iterable[str], *, pinned: bool
    ) -> list[str]:
        ids = list(group_ids)

        async def operation(conn: AsyncConnection) -> list[str]:
            return await set_pinned(conn, self._tenant, session_id, ids, pinned=pinned)

        return await self._write(operation)

    # -- import -----------------------------------------------------------------------

    @translated
    async def import_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        source: str = "agent_framework",
    ) -> ImportResult:
        """Append messages that another system may have compacted already.

        Agent Framework's annotations become exclusions and summary groups recorded as
        one ``import`` event, so that the projection never holds both a summary and what
        it replaced. Every message is recorded with ``source`` as its provenance.
        Importing the same messages again changes nothing. Reads the session's message
        ids (an import is O(history)).
        """
        check_session_id(session_id)
        batch = _checked(messages)
        for message in batch:
            check_message(message)
        provenance = Provenance(system=source, source_ids=source_ids(batch))
        ctx = self._append_context(session_id, provenance)
        compactor = self._compactor()

        async def operation(conn: AsyncConnection) -> ImportResult:
            # one write transaction: the plan, the appends and the import event
            plan = plan_import(await stored_rows(conn, self._tenant, session_id), batch)
            if plan.append:
                await append_messages(conn, ctx, plan.append)
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

        return await self._write(operation)


def check_message(message: object) -> None:
    """Raise :class:`InvalidInput` unless ``message`` is a Message whose ids hold no NUL."""
    if not isinstance(message, Message):
        raise InvalidInput(f"expected Message, got {type(message).__name__}")
    for name in ("message_id", "role", "author_name"):
        value = getattr(message, name)
        if value is not None and "\x00" in value:
            raise InvalidInput(f"{name} of message {message.message_id!r} holds a NUL character")


@dataclass(frozen=True, slots=True)
class _TranslatedSource:
    """A message source whose loads raise only :class:`~store.errors.ChatledgerError`.

    A :class:`View` returned by the store loads its messages later, outside the call.
    """

    inner: MessageSource

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        """The messages of each group, as the wrapped source loads them."""
        with translate_errors():
            return await self.inner.load(group_ids)


def _checked(messages: Iterable[Message]) -> list[Message]:
    batch = list(messages)
    for message in batch:
        if not isinstance(message, Message):
            raise InvalidInput(f"expected Message, got {type(message).__name__}")
    return batch
