"""The in-memory backend: :class:`InMemoryHistoryStore`, the whole contract in plain Python.

The records live in a :class:`MemoryDatabase` that several stores (one per tenant) may
share, as stores on one database would. Every rule comes from :mod:`store.rules`, the
same rules the SQL backend follows; this backend holds whole sessions of records and
applies them directly. Simple rather than fast: use it in tests, in demos, and as the
plain model a stateful test compares the SQL backend against.
"""

from __future__ import annotations

import functools
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, Self, TypeVar, overload

from pydantic import JsonValue

from store import telemetry
from store.contract import DEFAULT_TENANT, DEFAULT_TOKENIZER, PAGE_SIZE
from store.errors import InvalidInput, SessionNotFound, StoreClosed, strategy_errors
from store.models import (
    CompactionEvent,
    EventOutcome,
    ExcludedGroup,
    ImportResult,
    Phase,
    Provenance,
    PurgeReport,
    RedactReport,
    SessionInfo,
    SessionOrder,
    Stats,
    StoredMessage,
    WhyResult,
)
from store.rules.changes import (
    Attempt,
    Outcome,
    apply_changes,
    check_groups,
    check_restorable,
    event_label,
    new_event_id,
    restore,
    undo_event,
)
from store.rules.checks import (
    check_bound,
    check_limit,
    check_message,
    check_metadata,
    check_outcome,
    check_page_size,
    check_phase,
    check_provenance,
    check_restore_target,
    check_session_id,
    check_session_order,
    check_since,
    check_tenant,
    check_text,
    check_tokenizer,
    checked_ids,
    checked_messages,
    resolve_strategy,
    resolve_tokenizer,
)
from store.rules.conflicts import (
    CONFLICT,
    Compaction,
    Conflict,
    GroupState,
    changed_under,
    plan_and_apply,
)
from store.rules.erasure import check_redaction, purge_cutoff, redact_records
from store.rules.imported import import_changes, plan_import, source_ids
from store.rules.limits import DEFAULT_LIMITS, Limits
from store.rules.pending import PENDING_CACHE_SIZE, PendingCounts
from store.rules.records import SessionRecord, now
from store.rules.retract import (
    RETRACT_STRATEGY,
    apply_retraction,
    check_retractable,
    plan_retraction,
)
from store.rules.why import GroupFacts, explain, not_stored
from store.telemetry.names import SPAN_APPEND, SPAN_CONTEXT, SPAN_IMPORT
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.tokenizers import (
    DEFAULT_POLICY,
    TiktokenTokenizer,
    TokenCountPolicy,
    Tokenizer,
    count_message_tokens,
)
from strategies.view import View

if TYPE_CHECKING:
    from store.contract import HistoryBackend

__all__ = ["InMemoryHistoryStore", "MemoryDatabase"]

T = TypeVar("T")
P = ParamSpec("P")


def _open(
    method: Callable[Concatenate[InMemoryHistoryStore, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[InMemoryHistoryStore, P], Coroutine[Any, Any, T]]:
    """A public method: refused once the store is closed."""

    @functools.wraps(method)
    async def wrapper(store: InMemoryHistoryStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        store._check_usable()
        return await method(store, *args, **kwargs)

    return wrapper


@dataclass
class MemoryDatabase:
    """What a database would hold: every tenant's sessions, by ``(tenant, session_id)``."""

    sessions: dict[tuple[str, str], SessionRecord] = field(default_factory=dict)


@dataclass(frozen=True)
class _Snapshot:
    """A plan's snapshot: the view, the session's revision and each group's fingerprint."""

    view: View
    revision: int
    fingerprints: dict[str, Hashable]


class InMemoryHistoryStore:
    """The whole store contract (:class:`store.contract.HistoryBackend`) in memory.

    Same API and same rules as the SQL store; simple rather than fast. Stores made with
    :meth:`for_tenant` (or given the same :class:`MemoryDatabase`) share the records,
    as two stores on one database would::

        store = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())
        await store.append("s", messages)
        event = await store.compact("s", TruncationStrategy(max_n=20, compact_to=10))
        context = await store.context("s", pending=in_flight)

    A message joins its group's state: a late result (or a call after reasoning) joining
    a group that compaction excluded is excluded with it, so that a group is always sent
    whole or not at all.
    """

    def __init__(
        self,
        database: MemoryDatabase | None = None,
        *,
        tenant: str = DEFAULT_TENANT,
        tokenizer: Tokenizer | None = None,
        policy: TokenCountPolicy = DEFAULT_POLICY,
        pending_cache_size: int = PENDING_CACHE_SIZE,
        limits: Limits | None = None,
    ) -> None:
        """A store for ``tenant`` over ``database`` (a fresh, empty one when None).

        The default tokenizer is tiktoken's ``o200k_base``, as the SQL store's; ``limits``
        are what it accepts, as the SQL store's (:class:`~store.rules.limits.Limits`).
        """
        if database is not None and not isinstance(database, MemoryDatabase):
            raise InvalidInput(
                f"InMemoryHistoryStore() takes a MemoryDatabase (or nothing), got "
                f"{type(database).__name__}; for a database URL use `await HistoryStore.open(url)`"
            )
        check_tenant(tenant)
        if limits is not None and not isinstance(limits, Limits):
            raise InvalidInput(f"limits must be a Limits, got {type(limits).__name__}")
        tokenizer = resolve_tokenizer(tokenizer)
        self._limits = limits or DEFAULT_LIMITS
        self._closed = False
        self._db = database if database is not None else MemoryDatabase()
        self._tenant = tenant
        self._tokenizer: Tokenizer | None = tokenizer
        self._tokenizer_name = tokenizer.name if tokenizer is not None else DEFAULT_TOKENIZER
        self._policy = policy
        self._pending = PendingCounts(
            self.count_tokens, lambda: (self.tokenizer, self._policy), size=pending_cache_size
        )

    def for_tenant(self, tenant: str) -> Self:
        """A store for another tenant over the same database (same tokenizer and policy)."""
        return type(self)(self._db, tenant=tenant, tokenizer=self.tokenizer, policy=self._policy)

    async def aclose(self) -> None:
        """Close the store: every later call raises :class:`~store.errors.StoreClosed`
        (the database's records stay, for other stores on it)."""
        self._closed = True

    def _check_usable(self) -> None:
        if self._closed:
            raise StoreClosed("the store was closed (aclose): open a new one")

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
        """The records, shared by every store made with :meth:`for_tenant`."""
        return self._db

    @property
    def tenant(self) -> str:
        """The tenant every call of this store is limited to."""
        return self._tenant

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer new messages are counted with (the default one is loaded on first
        use)."""
        if self._tokenizer is None:
            self._tokenizer = TiktokenTokenizer(self._tokenizer_name)
        return self._tokenizer

    @property
    def policy(self) -> TokenCountPolicy:
        """The token-count policy new messages are counted with."""
        return self._policy

    @property
    def limits(self) -> Limits:
        """The largest values the store accepts (:class:`~store.rules.limits.Limits`)."""
        return self._limits

    def count_tokens(self, message: Message) -> int:
        """Count ``message`` the way this store counts what it stores."""
        return count_message_tokens(message, self.tokenizer, policy=self._policy)

    # -- records ----------------------------------------------------------------------

    def _find(self, session_id: str) -> SessionRecord | None:
        return self._db.sessions.get((self._tenant, session_id))

    def _get(self, session_id: str) -> SessionRecord:
        session = self._find(session_id)
        if session is None:
            raise SessionNotFound(session_id, tenant=self._tenant)
        return session

    def _counted(self, session_id: str) -> SessionRecord:
        """The session, refusing one counted with another tokenizer."""
        session = self._get(session_id)
        check_tokenizer(session.tokenizer, self._tokenizer_name, session_id)
        return session

    def _blank(self, session_id: str) -> SessionRecord:
        stamp = now()
        return SessionRecord(self._tenant, session_id, self._tokenizer_name, stamp, stamp)

    def _get_or_create(self, session_id: str) -> SessionRecord:
        session = self._find(session_id)
        if session is None:
            session = self._blank(session_id)
            self._db.sessions[(self._tenant, session_id)] = session
        return session

    def _all(self) -> list[SessionRecord]:
        return sorted(
            (s for (t, _), s in self._db.sessions.items() if t == self._tenant),
            key=lambda s: s.session_id,
        )

    def _view_of(self, session: SessionRecord) -> View:
        return session.view(tokenizer=self.tokenizer, policy=self._policy)

    # -- messages ---------------------------------------------------------------------

    @_open
    async def append(
        self,
        session_id: str,
        messages: Message | Iterable[Message],
        *,
        provenance: Provenance | None = None,
    ) -> list[str]:
        """Append ``messages`` (the session is created on first use); see the contract."""
        check_session_id(session_id, self._limits)
        check_provenance(provenance)
        batch = checked_messages(messages)
        for message in batch:
            check_message(message, self._limits)
        if not batch:
            return []
        existing = self._find(session_id)
        if existing is not None:
            check_tokenizer(existing.tokenizer, self._tokenizer_name, session_id)
        fresh = (existing or self._blank(session_id)).new_messages(batch)
        session = self._get_or_create(session_id)
        stamp = now()
        source = None
        if provenance is not None:
            stamp = provenance.imported_at or stamp
            source = (provenance.system, dict(provenance.source_ids))
        count = self._pending.counter(self._tenant, session_id, keep=False)
        with telemetry.operation(SPAN_APPEND, self._tenant, session_id) as traced:
            session.append(fresh, count, stamp, source=source)
            traced.stored(len(fresh), sum(session.rows[m.message_id].tokens for m in fresh))
        return [m.message_id for m in batch]

    @_open
    async def history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        limit: int | None = None,
        before: int | None = None,
        after: int | None = None,
    ) -> list[StoredMessage]:
        """Stored messages, oldest first by ``seq``; ``after``/``before`` are exclusive."""
        check_session_id(session_id, self._limits)
        check_limit(limit)
        check_bound(before, "before")
        check_bound(after, "after")
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
        self._check_usable()
        check_session_id(session_id, self._limits)
        check_bound(before, "before")
        check_bound(after, "after")
        check_page_size(page_size)
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

    @_open
    async def retract_last(self, session_id: str) -> StoredMessage | None:
        """Take back the newest appended message for good (see the contract)."""
        check_session_id(session_id, self._limits)
        session = self._get(session_id)
        appended = sorted((r for r in session.rows.values() if r.slot == 0), key=lambda r: r.seq)
        if not appended:
            return None
        row = appended[-1]
        group = session.groups[row.group_id]
        check_retractable(
            session_id,
            row.message.message_id,
            excluded=group.excluded,
            reason=group.reason,
            reduced=row.reduced is not None,
        )
        plan = plan_retraction(
            session_id, [r.message for r in appended], [r.group_id for r in appended]
        )
        stored = session.stored_message(row)
        out = Outcome(event_id=new_event_id(), now=now(), before=session.totals())
        apply_retraction(session, plan, row.seq)
        params = plan.params(row.seq, row.message.role)
        out.record(session, phase="manual", strategy=RETRACT_STRATEGY, params=params)
        return stored

    # -- sessions ---------------------------------------------------------------------

    @_open
    async def sessions(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        updated_since: datetime | None = None,
        order: SessionOrder = "id",
    ) -> list[SessionInfo]:
        """The tenant's sessions by id or newest update first; page with ``after``."""
        check_limit(limit)
        check_session_order(order)
        check_text(after, "after", optional=True)
        check_since(updated_since)
        found = [s for s in self._all() if updated_since is None or s.updated_at >= updated_since]
        if order == "updated":
            found.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
            if after is not None:
                last = self._find(after)
                if last is None:
                    raise InvalidInput(f"cannot page after session {after!r}: it does not exist")
                key = (last.updated_at, last.session_id)
                found = [s for s in found if (s.updated_at, s.session_id) < key]
        elif after is not None:
            found = [s for s in found if s.session_id > after]
        return [s.info() for s in (found if limit is None else found[:limit])]

    @_open
    async def session(self, session_id: str) -> SessionInfo:
        """One session's info; :class:`~store.errors.SessionNotFound` when absent."""
        check_session_id(session_id, self._limits)
        return self._get(session_id).info()

    @_open
    async def get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        """The session's metadata."""
        check_session_id(session_id, self._limits)
        return dict(self._get(session_id).metadata)

    @_open
    async def set_metadata(self, session_id: str, metadata: Mapping[str, JsonValue]) -> None:
        """Replace the session's metadata (creating the session when absent)."""
        check_session_id(session_id, self._limits)
        value = check_metadata(metadata, self._limits)
        session = self._get_or_create(session_id)
        session.metadata = value
        session.touch(now())

    @_open
    async def delete_session(self, session_id: str) -> None:
        """Delete the session and everything stored for it."""
        check_session_id(session_id, self._limits)
        self._get(session_id)
        del self._db.sessions[(self._tenant, session_id)]
        self._pending.forget(self._tenant, session_id)

    @_open
    async def recount(self, session_id: str) -> SessionInfo:
        """Recount every message of the session with this store's tokenizer and policy."""
        check_session_id(session_id, self._limits)
        session = self._get(session_id)
        for row in session.rows.values():
            row.tokens = self.count_tokens(row.message)
            if row.reduced is not None:
                row.reduced_tokens = self.count_tokens(row.reduced)
        session.tokenizer = self._tokenizer_name
        session.touch(now())
        return session.info()

    # -- projection -------------------------------------------------------------------

    @_open
    async def view(self, session_id: str) -> View:
        """The active view of the session: what a strategy plans on."""
        check_session_id(session_id, self._limits)
        return self._view_of(self._counted(session_id))

    @_open
    async def context(
        self,
        session_id: str,
        *,
        strategy: CompactionStrategy | str | None = None,
        pending: Sequence[Message] = (),
    ) -> list[Message]:
        """The messages to send: active groups plus ``pending``, through ``strategy``."""
        check_session_id(session_id, self._limits)
        chosen = resolve_strategy(strategy) if strategy is not None else None
        batch = checked_messages(pending)
        session = self._find(session_id)
        if session is None:
            session = self._blank(session_id)
        else:
            check_tokenizer(session.tokenizer, self._tokenizer_name, session_id)
            session = session.clone()
        fresh = session.new_messages(batch)
        session.append(fresh, self._pending.counter(self._tenant, session_id, keep=True), now())
        with telemetry.operation(SPAN_CONTEXT, self._tenant, session_id) as traced:
            view = self._view_of(session)
            if chosen is not None:
                with strategy_errors():
                    view = view.apply(await chosen.plan(view))
            traced.sent(view)
            return await view.project()

    # -- compaction -------------------------------------------------------------------

    @overload
    async def compact(
        self,
        /,
        session_id: str,
        strategy: CompactionStrategy | str,
        *,
        phase: Phase = ...,
        dry_run: Literal[False] = ...,
    ) -> CompactionEvent | None: ...

    @overload
    async def compact(
        self,
        /,
        session_id: str,
        strategy: CompactionStrategy | str,
        *,
        phase: Phase = ...,
        dry_run: Literal[True],
    ) -> ChangeSet: ...

    @_open
    async def compact(
        self,
        session_id: str,
        strategy: CompactionStrategy | str,
        *,
        phase: Phase = "manual",
        dry_run: bool = False,
    ) -> CompactionEvent | ChangeSet | None:
        """Plan ``strategy`` on a snapshot of the active view and apply it if still valid."""
        check_session_id(session_id, self._limits)
        check_phase(phase)
        strategy = resolve_strategy(strategy)

        async def snapshot() -> _Snapshot:
            session = self._counted(session_id)
            view = self._view_of(session)
            fingerprints: dict[str, Hashable] = {
                g.group_id: session.fingerprint(session.groups[g.group_id]) for g in view.groups
            }
            return _Snapshot(view=view, revision=session.revision, fingerprints=fingerprints)

        async def apply(
            snapshot: _Snapshot, changes: ChangeSet, attempt: Attempt
        ) -> CompactionEvent | Conflict | None:
            session = self._counted(session_id)
            if session.revision != snapshot.revision:
                current = {
                    gid: GroupState(group.excluded, session.fingerprint(group))
                    for gid in changes.touched_group_ids
                    if (group := session.groups.get(gid)) is not None
                }
                if changed_under(changes.touched_group_ids, snapshot.fingerprints, current):
                    return CONFLICT
            return self._apply(session, changes, phase, strategy, attempt)

        async def record(
            changes: ChangeSet, attempt: Attempt, outcome: EventOutcome
        ) -> CompactionEvent:
            session = self._counted(session_id)
            out = Outcome(
                event_id=new_event_id(),
                now=now(),
                before=session.totals(),
                result=outcome,
                attempt=attempt,
                changes=changes,
            )
            name, params = event_label(changes, strategy)
            return out.record(session, phase=phase, strategy=name, params=params)

        compaction = Compaction(snapshot=snapshot, apply=apply, record=record)
        return await plan_and_apply(
            session_id, strategy, compaction, tenant=self._tenant, phase=phase, dry_run=dry_run
        )

    def _apply(
        self,
        session: SessionRecord,
        changes: ChangeSet,
        phase: Phase,
        strategy: CompactionStrategy | None,
        attempt: Attempt | None = None,
    ) -> CompactionEvent | None:
        out = Outcome(
            event_id=new_event_id(),
            now=now(),
            before=session.totals(),
            attempt=attempt,
            changes=changes,
        )
        count = self._pending.counter(self._tenant, session.session_id, keep=False)
        apply_changes(session, changes, count, out)
        if not out.changed:
            return None
        name, params = event_label(changes, strategy)
        return out.record(session, phase=phase, strategy=name, params=params)

    # -- audit ------------------------------------------------------------------------

    @_open
    async def audit(
        self,
        session_id: str | None = None,
        *,
        since: datetime | None = None,
        strategy: str | None = None,
        phase: Phase | None = None,
        limit: int | None = None,
        outcome: EventOutcome | None = None,
    ) -> list[CompactionEvent]:
        """Compaction events, newest first, of one session or of the whole tenant."""
        if session_id is not None:
            check_session_id(session_id, self._limits)
        check_limit(limit)
        check_since(since)
        check_text(strategy, "strategy", optional=True)
        if phase is not None:
            check_phase(phase)
        if outcome is not None:
            check_outcome(outcome)
        sessions = [self._get(session_id)] if session_id is not None else self._all()
        found = [
            (event, number)
            for session in sessions
            for number, event in enumerate(session.events, start=1)
            if (since is None or event.created_at >= since)
            and (strategy is None or event.strategy == strategy)
            and (phase is None or event.phase == phase)
            and (outcome is None or event.outcome == outcome)
        ]
        found.sort(key=lambda item: (item[0].created_at, item[0].session_id, item[1]), reverse=True)
        events = [event for event, _ in found]
        return events if limit is None else events[:limit]

    @_open
    async def excluded(self, session_id: str) -> list[ExcludedGroup]:
        """The session's excluded groups in order, with reason, event and summary."""
        check_session_id(session_id, self._limits)
        session = self._get(session_id)
        return [
            ExcludedGroup(
                group_id=group.group_id,
                kind=group.kind,
                message_count=len(group.message_ids),
                tokens=session.group_tokens(group),
                reason=group.reason,
                event_id=group.event_id,
                summary_group_id=group.summarized_by,
                excluded_at=group.excluded_at,
            )
            for group in sorted(session.groups.values(), key=lambda g: g.order_key)
            if group.excluded
        ]

    @_open
    async def why(self, session_id: str, message_id: str) -> WhyResult:
        """Whether a stored message is in the context (built without a strategy), and why."""
        check_session_id(session_id, self._limits)
        check_text(message_id, "message_id")
        session = self._get(session_id)
        row = session.rows.get(message_id)
        if row is None:
            raise not_stored(message_id, session_id)
        group = session.groups[row.group_id]
        unsent = not group.excluded and group.group_id not in {
            g.group_id for g in session.view().sendable()
        }
        facts = GroupFacts(
            group_id=group.group_id,
            excluded=group.excluded,
            reason=group.reason,
            event_id=group.event_id,
            summarized_by=group.summarized_by,
            orphan=group.orphan,
            stale=unsent and not group.orphan,
        )
        return explain(message_id, facts, reduced_by=row.reduced_event)

    @_open
    async def stats(self, session_id: str | None = None) -> Stats:
        """Stored versus active messages, groups and tokens (one session or the tenant)."""
        if session_id is not None:
            check_session_id(session_id, self._limits)
        sessions = [self._get(session_id)] if session_id is not None else self._all()
        infos = [s.info() for s in sessions]
        return Stats(
            tenant=self._tenant,
            session_id=session_id,
            sessions=len(sessions),
            stored_messages=sum(i.stored_messages for i in infos),
            stored_groups=sum(i.stored_groups for i in infos),
            stored_tokens=sum(i.stored_tokens for i in infos),
            active_messages=sum(i.active_messages for i in infos),
            active_groups=sum(i.active_groups for i in infos),
            active_tokens=sum(i.active_tokens for i in infos),
            events=sum(len(s.events) for s in sessions),
        )

    # -- restore and pin --------------------------------------------------------------

    @_open
    async def restore(
        self,
        session_id: str,
        *,
        group_ids: Iterable[str] | None = None,
        event_id: str | None = None,
    ) -> CompactionEvent | None:
        """Re-include groups (pinning them), or undo one event; audited as ``restore``."""
        check_session_id(session_id, self._limits)
        ids = check_restore_target(group_ids, event_id)
        session = self._get(session_id)
        out = Outcome(event_id=new_event_id(), now=now(), before=session.totals())
        if ids is not None:
            check_groups(session, ids)
            restore(session, out, group_ids=ids)
            params: dict[str, object] = {"group_ids": ids}
        else:
            event = next((e for e in session.events if e.id == event_id), None)
            if event is None:
                raise InvalidInput(f"no event {event_id!r} in session {session_id!r}")
            check_restorable(event)
            undo_event(session, out, event)
            params = {"event_id": event.id}
        if not out.changed:
            return None
        return out.record(session, phase="restore", strategy="restore", params=params)

    @_open
    async def pin(self, session_id: str, group_ids: Iterable[str]) -> list[str]:
        """Pin groups: strategies never exclude them. Returns the ids that changed."""
        check_session_id(session_id, self._limits)
        return self._set_pinned(session_id, group_ids, pinned=True)

    @_open
    async def unpin(self, session_id: str, group_ids: Iterable[str]) -> list[str]:
        """Unpin groups. Returns the ids that changed."""
        check_session_id(session_id, self._limits)
        return self._set_pinned(session_id, group_ids, pinned=False)

    def _set_pinned(self, session_id: str, group_ids: Iterable[str], *, pinned: bool) -> list[str]:
        session = self._get(session_id)
        ids = list(dict.fromkeys(checked_ids(group_ids, "group_ids")))
        check_groups(session, ids)
        changed = [g for g in ids if session.groups[g].pinned != pinned]
        for group_id in changed:
            session.groups[group_id].pinned = pinned
        if changed:
            session.touch(now())
        return changed

    # -- import -----------------------------------------------------------------------

    @_open
    async def import_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        source: str = "agent_framework",
    ) -> ImportResult:
        """Append messages that another system may have compacted already (see the
        contract)."""
        check_session_id(session_id, self._limits)
        check_text(source, "source")
        check_text(source, "source")
        batch = checked_messages(messages)
        for message in batch:
            check_message(message, self._limits)
        with telemetry.operation(SPAN_IMPORT, self._tenant, session_id) as traced:
            result = await self._import(session_id, batch, source)
            traced.event(result.event)
            return result

    async def _import(self, session_id: str, batch: list[Message], source: str) -> ImportResult:
        plan = plan_import(self._find(session_id), batch)
        provenance = Provenance(system=source, source_ids=source_ids(batch))
        await self.append(session_id, plan.append, provenance=provenance)
        session = self._find(session_id)
        if session is None:
            return ImportResult(message_ids=())
        changes = import_changes(session, batch, plan, source)
        event = None if changes.is_empty else self._apply(session, changes, "import", None)
        if event is not None:
            for message in (m for m, _ in plan.summaries):
                row = session.rows.get(message.message_id)
                if row is not None and row.source_system is None:
                    row.source_system = source
                    row.source_id = provenance.source_ids.get(message.message_id)
                    row.imported_at = row.stored_at
        return ImportResult(message_ids=tuple(m.message_id for m in batch), event=event)

    # -- retention and erasure --------------------------------------------------------

    @_open
    async def purge(
        self, *, older_than: datetime | timedelta, dry_run: bool = False
    ) -> PurgeReport:
        """Remove the tenant's sessions last updated before ``older_than`` (see the
        contract)."""
        cutoff = purge_cutoff(older_than, now())
        if not isinstance(dry_run, bool):
            raise InvalidInput(f"dry_run must be a bool, got {type(dry_run).__name__}")
        doomed = [s for s in self._all() if s.updated_at < cutoff]
        if not dry_run:
            for session in doomed:
                del self._db.sessions[(self._tenant, session.session_id)]
                self._pending.forget(self._tenant, session.session_id)
        return PurgeReport(
            tenant=self._tenant,
            older_than=cutoff,
            dry_run=dry_run,
            sessions=tuple(s.session_id for s in doomed),
            messages=sum(len(s.rows) for s in doomed),
            groups=sum(len(s.groups) for s in doomed),
            events=sum(len(s.events) for s in doomed),
        )

    @_open
    async def redact(
        self, session_id: str, message_ids: Iterable[str], *, reason: str
    ) -> RedactReport:
        """Replace the messages by tombstones (see the contract)."""
        check_session_id(session_id, self._limits)
        ids = check_redaction(message_ids, reason, self._limits)
        session = self._counted(session_id)
        unknown = [m for m in ids if m not in session.rows]
        if unknown:
            raise InvalidInput(f"unknown message ids in session {session_id!r}: {unknown}")
        tokens_before = session.info().stored_tokens
        out = Outcome(event_id=new_event_id(), now=now(), before=session.totals())
        redacted, summaries, cleared = redact_records(
            session, ids, reason=reason, event_id=out.event_id, count=self.count_tokens
        )
        event = None
        if redacted or summaries:
            params: dict[str, object] = {
                "reason": reason,
                "message_ids": redacted,
                "summaries": summaries,
                "reductions_cleared": cleared,
            }
            event = out.record(session, phase="manual", strategy="redact", params=params)
        return RedactReport(
            session_id=session_id,
            tenant=self._tenant,
            reason=reason,
            redacted=tuple(redacted),
            summaries=tuple(summaries),
            reductions_cleared=tuple(cleared),
            tokens_before=tokens_before,
            tokens_after=session.info().stored_tokens,
            event=event,
        )


if TYPE_CHECKING:

    def _conforms(store: InMemoryHistoryStore) -> HistoryBackend:
        return store  # mypy checks that InMemoryHistoryStore implements the whole contract
