"""The in-memory backend: :class:`InMemoryHistoryStore`, the whole contract in plain Python.

The records live in a :class:`MemoryDatabase` that several stores (one per tenant) may
share, as stores on one database would. Its front (argument checks, the closed-store guard, spans)
is :class:`~store.contract.BackendBase`'s, and every rule comes from :mod:`store.rules`,
the same as the SQL backend's; this backend holds whole sessions of records and applies
them directly. Simple rather than fast: use it in tests, in demos, and as the
plain model a stateful test compares the SQL backend against.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import JsonValue

from store.contract import DEFAULT_TENANT, RECORD_KEY, BackendBase, Written
from store.errors import (
    InvalidInput,
    KeyRequired,
    PlaintextRows,
    RecordConflict,
    SessionNotFound,
    WrongKey,
)
from store.models import (
    BranchInfo,
    CompactionEvent,
    CompactionRequest,
    EventOutcome,
    ExcludedGroup,
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
    WhyResult,
)
from store.rules.branching import (
    FORK_STRATEGY,
    REWIND_STRATEGY,
    fork_params,
    new_fork_id,
    new_tail_id,
    rewind_params,
    shared_refusal,
    tail_refusal,
    tail_restore_params,
    tail_source_refusal,
    taken_refusal,
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
from store.rules.checks import check_tokenizer
from store.rules.conflicts import (
    CONFLICT,
    Compaction,
    Conflict,
    GroupState,
    plan_and_apply,
    still_valid,
)
from store.rules.erasure import redact_records
from store.rules.imported import import_changes, plan_import, source_ids
from store.rules.limits import Limits
from store.rules.pending import PENDING_CACHE_SIZE, PendingCounts
from store.rules.prefix import Prefix, cut_prefix
from store.rules.records import MessageRecord, SessionRecord, TailRecord, now
from store.rules.retract import (
    RETRACT_STRATEGY,
    apply_retraction,
    check_retractable,
    plan_retraction,
)
from store.rules.why import GroupFacts, explain, not_stored
from store.search.hits import Candidate, candidate, make_hit, page, score
from store.search.recall import quoting
from store.search.request import SearchRequest
from store.telemetry import Unchanged
from store.usage.ledger import Sent, UsageEntry
from store.usage.models import Usage, UsageCall
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.tokenizers import DEFAULT_POLICY, TokenCountPolicy, Tokenizer
from strategies.view import Totals, View

if TYPE_CHECKING:
    from store.contract import HistoryBackend
    from store.encryption.sealing import KeyRing

__all__ = ["InMemoryHistoryStore", "MemoryDatabase"]


def _by_key(item: tuple[tuple[str, str], SessionRecord]) -> tuple[str, str]:
    return item[0]


def _holder_order(copy: tuple[SessionRecord, MessageRecord]) -> tuple[int, str]:
    """Which copy of a row a tenant-wide search shows: the session that stored it, else
    a superseded tail holding it, else the first branch by id."""
    session, row = copy
    rank = 0 if session.session_id == row.stored_by else 1 if session.tail_of else 2
    return rank, session.session_id


@dataclass
class MemoryDatabase:
    """What a database would hold: every tenant's sessions, by ``(tenant, session_id)``."""

    sessions: dict[tuple[str, str], SessionRecord] = field(default_factory=dict)
    cursor_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    """The key that signs search cursors."""
    usage: dict[tuple[str, str], list[UsageEntry]] = field(default_factory=dict)
    """Recorded model calls, by ``(tenant, session_id)`` (the session need not exist)."""
    encrypted: dict[str, str] = field(default_factory=dict)
    """Encrypted tenants, each with the id of the provider's key that opened it first
    (nothing is at rest here: the marks make the refusals the SQL store makes)."""


@dataclass(frozen=True)
class _Snapshot:
    """A plan's snapshot: the view, the session's revision and each group's fingerprint."""

    view: View
    revision: int
    fingerprints: dict[str, Hashable]
    request: CompactionRequest | None = None


def _check_encryption(db: MemoryDatabase, tenant: str, encryption: object) -> bool:
    """Whether the store of ``tenant`` is encrypted, marking a new tenant, or the refusal
    the SQL store would make (:mod:`store.sql.keys`)."""
    mark = db.encrypted.get(tenant)
    if encryption is None:
        if mark is not None:
            raise KeyRequired(f"tenant {tenant!r} is encrypted: open it with its key")
        return False
    from store.encryption.sealing import KeyRing

    if not isinstance(encryption, KeyRing):
        raise InvalidInput(f"encryption must be a KeyRing, got {type(encryption).__name__}")
    if mark is None:
        if any(key[0] == tenant for key in db.sessions):
            raise PlaintextRows(f"tenant {tenant!r} is stored in clear")
        db.encrypted[tenant] = encryption.key_id
    elif mark not in getattr(encryption.provider, "key_ids", (encryption.key_id,)):
        raise WrongKey(f"tenant {tenant!r} was encrypted under key {mark!r}, not this one")
    return True


class InMemoryHistoryStore(BackendBase):
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
    whole or not at all. Closing a store leaves the database's records to the other
    stores on it.

    Branches (``docs/branches.md``) are plain copies: a fork, and a superseded tail (a
    read-only record under its ``tail-`` id, listed by the session it belongs to), hold
    copies of the rows they share, each keeping the row's
    :attr:`~store.rules.records.MessageRecord.key`; that is how a redaction reaches
    every copy, and how ``retract_last``, ``recount`` and ``purge`` tell a shared row.
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
        encryption: KeyRing | None = None,
    ) -> None:
        """A store for ``tenant`` over ``database`` (a fresh, empty one when None).

        The default tokenizer is tiktoken's ``o200k_base``, as the SQL store's; ``limits``
        are what it accepts, as the SQL store's (:class:`~store.rules.limits.Limits`).
        ``encryption`` is taken as the SQL store takes it, for tests: nothing here is at
        rest, so nothing is sealed, but the tenant is marked and refused as the SQL store
        refuses it (:class:`~store.errors.KeyRequired` without a key,
        :class:`~store.errors.PlaintextRows` for a tenant stored in clear, and
        :class:`~store.errors.WrongKey` for another provider key), and not searched.
        """
        if database is not None and not isinstance(database, MemoryDatabase):
            raise InvalidInput(
                f"InMemoryHistoryStore() takes a MemoryDatabase (or nothing), got "
                f"{type(database).__name__}; for a database URL use `await HistoryStore.open(url)`"
            )
        super().__init__(tenant=tenant, tokenizer=tokenizer, policy=policy, limits=limits)
        self._db = database if database is not None else MemoryDatabase()
        self._encrypted = _check_encryption(self._db, tenant, encryption)
        self._encryption = encryption
        self._pending = PendingCounts(
            self.count_tokens, lambda: (self.tokenizer, self._policy), size=pending_cache_size
        )

    def for_tenant(self, tenant: str) -> Self:
        """A store for another tenant over the same database (same tokenizer and policy)."""
        return type(self)(
            self._db,
            tenant=tenant,
            tokenizer=self.tokenizer,
            policy=self._policy,
            encryption=self._encryption,
        )

    @property
    def database(self) -> MemoryDatabase:
        """The records, shared by every store made with :meth:`for_tenant`."""
        return self._db

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
        """The tenant's sessions (not their superseded tails), in id order."""
        return sorted(
            (
                s
                for (t, _), s in self._db.sessions.items()
                if t == self._tenant and s.tail_of is None
            ),
            key=lambda s: s.session_id,
        )

    def _writable(self, session: SessionRecord) -> SessionRecord:
        """``session``, refusing a superseded tail (read-only)."""
        if session.tail_of is not None:
            owner = self._find(session.tail_of)
            entry = (
                next((t for t in owner.tails if t.session_id == session.session_id), None)
                if owner is not None
                else None
            )
            raise tail_refusal(
                session.session_id, session.tail_of, None if entry is None else entry.event_id
            )
        return session

    def _branch_holding(self, session: SessionRecord, keys: set[int]) -> str | None:
        """Another branch (session or tail of the tenant) holding one of the rows
        ``keys``, the first by id; None when no other branch holds any."""
        for (tenant, other_id), other in sorted(self._db.sessions.items(), key=_by_key):
            if tenant != self._tenant or other is session:
                continue
            if any(row.key in keys for row in other.rows.values()):
                return other_id
        return None

    def _view_of(self, session: SessionRecord) -> View:
        return session.view(tokenizer=self.tokenizer, policy=self._policy)

    # -- messages ---------------------------------------------------------------------

    async def _append(
        self, session_id: str, batch: list[Message], provenance: Provenance | None
    ) -> Written:
        existing = self._find(session_id)
        if existing is not None:
            self._writable(existing)
            check_tokenizer(existing.tokenizer, self._tokenizer_name, session_id)
        fresh = (existing or self._blank(session_id)).new_messages(batch)
        session = self._get_or_create(session_id)
        stamp = now()
        source = None
        if provenance is not None:
            stamp = provenance.imported_at or stamp
            source = (provenance.system, dict(provenance.source_ids))
        count = self._pending.counter(self._tenant, session_id, keep=False)
        session.append(fresh, count, stamp, source=source)
        return Written(len(fresh), sum(session.rows[m.message_id].tokens for m in fresh))

    async def _append_if(
        self, session_id: str, batch: list[Message], record: dict[str, Any], *, expected: str | None
    ) -> Written:
        existing = self._find(session_id)
        stored = None if existing is None else existing.metadata.get(RECORD_KEY)
        found = stored.get("revision") if isinstance(stored, dict) else None
        if existing is not None:
            self._writable(existing)
        if found != expected:
            raise RecordConflict(
                session_id,
                tenant=self._tenant,
                expected=expected,
                found=found if isinstance(found, str) else None,
            )
        written = await self._append(session_id, batch, None) if batch else Written(0, 0)
        session = self._settable(session_id)
        session.metadata = {**session.metadata, RECORD_KEY: record}
        session.touch(now())
        return written

    async def _locate(self, message_id: str) -> str | None:
        holders = [
            (session, session.rows[message_id])
            for (tenant, _), session in self._db.sessions.items()
            if tenant == self._tenant and message_id in session.rows
        ]
        return min(holders, key=_holder_order)[0].session_id if holders else None

    async def _history(
        self,
        session_id: str,
        *,
        include_excluded: bool,
        limit: int | None,
        before: int | None,
        after: int | None,
    ) -> list[StoredMessage]:
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

    async def _aiter_history(
        self,
        session_id: str,
        *,
        include_excluded: bool,
        after: int | None,
        before: int | None,
        page_size: int,
    ) -> AsyncIterator[StoredMessage]:
        """Pages of :meth:`history`, each refused once the store is closed."""
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

    async def _retract_last(self, session_id: str) -> StoredMessage | None:
        session = self._writable(self._get(session_id))
        appended = session.appended()
        if not appended:
            return None
        row = appended[-1]
        other = self._branch_holding(session, {row.key})
        if other is not None:
            raise shared_refusal("retract_last", session_id, row.message.message_id, other)
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

    async def _sessions(
        self,
        *,
        limit: int | None,
        after: str | None,
        updated_since: datetime | None,
        order: SessionOrder,
    ) -> list[SessionInfo]:
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

    async def _session(self, session_id: str) -> SessionInfo:
        return self._get(session_id).info()

    async def _get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        return dict(self._get(session_id).metadata)

    async def _set_metadata(self, session_id: str, metadata: dict[str, Any]) -> None:
        session = self._settable(session_id)
        session.metadata = metadata
        session.touch(now())

    async def _set_title(self, session_id: str, title: str | None) -> None:
        session = self._settable(session_id)
        session.title = title
        session.touch(now())

    def _settable(self, session_id: str) -> SessionRecord:
        """The session whose own values are set (created when absent; a tail refused)."""
        existing = self._find(session_id)
        if existing is not None:
            self._writable(existing)
        return self._get_or_create(session_id)

    async def _delete_session(self, session_id: str) -> None:
        self._remove(self._get(session_id))

    def _remove(self, session: SessionRecord) -> None:
        """Remove a session with its tails (its forks lose their parent), or a tail."""
        if session.tail_of is not None:
            owner = self._find(session.tail_of)
            if owner is not None:
                owner.tails = [t for t in owner.tails if t.session_id != session.session_id]
        for tail in session.tails:
            self._db.sessions.pop((self._tenant, tail.session_id), None)
        del self._db.sessions[(self._tenant, session.session_id)]
        self._db.usage.pop((self._tenant, session.session_id), None)
        self._pending.forget(self._tenant, session.session_id)
        for other in self._all():
            if other.parent_session_id == session.session_id:
                other.parent_session_id = None

    async def _recount(self, session_id: str) -> SessionInfo:
        session = self._writable(self._get(session_id))
        other = self._branch_holding(session, {row.key for row in session.rows.values()})
        if other is not None:
            raise shared_refusal("recount", session_id, None, other)
        for row in session.rows.values():
            row.tokens = self.count_tokens(row.message)
            if row.reduced is not None:
                row.reduced_tokens = self.count_tokens(row.reduced)
        session.tokenizer = self._tokenizer_name
        session.touch(now())
        return session.info()

    # -- projection -------------------------------------------------------------------

    async def _view(self, session_id: str) -> View:
        return self._view_of(self._counted(session_id))

    async def _pending_view(self, session_id: str, batch: list[Message]) -> View:
        """The active view with ``batch`` appended to a copy of the session."""
        session = self._find(session_id)
        if session is None:
            session = self._blank(session_id)
        else:
            check_tokenizer(session.tokenizer, self._tokenizer_name, session_id)
            session = session.clone()
        fresh = session.new_messages(batch)
        session.append(fresh, self._pending.counter(self._tenant, session_id, keep=True), now())
        return self._view_of(session)

    # -- compaction -------------------------------------------------------------------

    async def _compact(
        self, session_id: str, strategy: CompactionStrategy, *, phase: Phase, dry_run: bool
    ) -> CompactionEvent | ChangeSet | Unchanged:
        if not dry_run:
            self._writable(self._get(session_id))

        async def snapshot() -> _Snapshot:
            session = self._counted(session_id)
            view = self._view_of(session)
            fingerprints: dict[str, Hashable] = {
                g.group_id: session.fingerprint(session.groups[g.group_id]) for g in view.groups
            }
            return _Snapshot(
                view=view,
                revision=session.revision,
                fingerprints=fingerprints,
                request=session.request,
            )

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
                valid = still_valid(changes, snapshot.fingerprints, current)
                if isinstance(valid, Conflict):
                    return CONFLICT
                changes = valid
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

        async def consume(request: CompactionRequest) -> None:
            session = self._find(session_id)
            if session is not None and session.request == request:
                session.request = None

        compaction = Compaction(snapshot=snapshot, apply=apply, record=record, consume=consume)
        return await plan_and_apply(session_id, strategy, compaction, dry_run=dry_run)

    async def _request_compaction(self, session_id: str, request: CompactionRequest) -> None:
        session = self._get(session_id)
        self._writable(session)
        session.request = request

    async def _compaction_request(self, session_id: str) -> CompactionRequest | None:
        session = self._find(session_id)
        return None if session is None else session.request

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

    async def _excluded(self, session_id: str) -> list[ExcludedGroup]:
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

    async def _why(self, session_id: str, message_id: str) -> WhyResult:
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

    async def _stats(self, session_id: str | None) -> Stats:
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

    async def _restore(
        self, session_id: str, *, group_ids: list[str] | None, event_id: str | None
    ) -> CompactionEvent | None:
        session = self._writable(self._get(session_id))
        out = Outcome(event_id=new_event_id(), now=now(), before=session.totals())
        if group_ids is not None:
            check_groups(session, group_ids)
            restore(session, out, group_ids=group_ids)
            params: dict[str, object] = {"group_ids": group_ids}
        else:
            event = next((e for e in session.events if e.id == event_id), None)
            if event is None:
                raise InvalidInput(f"no event {event_id!r} in session {session_id!r}")
            check_restorable(event)
            if event.phase in ("rewind", "restore") and "tail_session_id" in event.params:
                return self._bring_back(session, event)
            undo_event(session, out, event)
            params = {"event_id": event.id}
        if not out.changed:
            return None
        return out.record(session, phase="restore", strategy="restore", params=params)

    async def _set_pinned(
        self, session_id: str, group_ids: list[str], *, pinned: bool
    ) -> list[str]:
        session = self._writable(self._get(session_id))
        ids = list(dict.fromkeys(group_ids))
        check_groups(session, ids)
        changed = [g for g in ids if session.groups[g].pinned != pinned]
        for group_id in changed:
            session.groups[group_id].pinned = pinned
        if changed:
            session.touch(now())
        return changed

    # -- import -----------------------------------------------------------------------

    async def _import(
        self, session_id: str, batch: list[Message], source: str
    ) -> tuple[ImportResult, Written]:
        existing = self._find(session_id)
        if existing is not None:
            self._writable(existing)
        plan = plan_import(existing, batch)
        provenance = Provenance(system=source, source_ids=source_ids(batch))
        written = Written(0, 0)
        if plan.append:
            written = await self._append(session_id, plan.append, provenance)
        session = self._find(session_id)
        if session is None:
            return ImportResult(message_ids=()), written
        changes = import_changes(session, batch, plan, source)
        event = None if changes.is_empty else self._apply(session, changes, "import", None)
        if event is not None:
            for message in (m for m, _ in plan.summaries):
                row = session.rows.get(message.message_id)
                if row is not None and row.source_system is None:
                    row.source_system = source
                    row.source_id = provenance.source_ids.get(message.message_id)
                    row.imported_at = row.stored_at
        result = ImportResult(message_ids=tuple(m.message_id for m in batch), event=event)
        return result, written

    # -- retention and erasure --------------------------------------------------------

    async def _purge(self, cutoff: datetime, *, dry_run: bool) -> PurgeReport:
        doomed = [s for s in self._all() if s.updated_at < cutoff]
        gone = {s.session_id for s in doomed}
        gone |= {t.session_id for s in doomed for t in s.tails}
        removed = {
            row.key
            for session_id in gone
            if (record := self._find(session_id)) is not None
            for row in record.rows.values()
        }
        kept = {
            row.key
            for (tenant, session_id), record in self._db.sessions.items()
            if tenant == self._tenant and session_id not in gone
            for row in record.rows.values()
        } & removed
        orphans = [
            key
            for key, entries in self._db.usage.items()
            if key[0] == self._tenant
            and key[1] not in gone
            and self._find(key[1]) is None
            and all(e.call.recorded_at < cutoff for e in entries)
        ]
        calls = sum(
            len(self._db.usage.get((self._tenant, i), ())) for i in gone | {k[1] for k in orphans}
        )
        if not dry_run:
            for session in doomed:
                self._remove(session)
            for key in orphans:
                self._db.usage.pop(key, None)
        return PurgeReport(
            tenant=self._tenant,
            older_than=cutoff,
            dry_run=dry_run,
            sessions=tuple(s.session_id for s in doomed),
            messages=len(removed - kept),
            groups=sum(len(s.groups) for s in doomed),
            events=sum(len(s.events) for s in doomed),
            kept_messages=len(kept),
            usage_calls=calls,
        )

    async def _redact(
        self, session_id: str, message_ids: tuple[str, ...], *, reason: str
    ) -> RedactReport:
        session = self._counted(session_id)
        unknown = [m for m in message_ids if m not in session.rows]
        if unknown:
            raise InvalidInput(f"unknown message ids in session {session_id!r}: {unknown}")
        tokens_before = session.info().stored_tokens
        keys = {session.rows[m].key for m in message_ids}
        redacted, summaries, cleared, event = self._redact_in(session, message_ids, reason)
        for (tenant, _), other in sorted(self._db.sessions.items(), key=_by_key):
            if tenant != self._tenant or other is session:
                continue
            held = [m for m, row in other.rows.items() if row.key in keys]
            if held:
                self._redact_in(other, tuple(held), reason)
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

    def _redact_in(
        self, session: SessionRecord, message_ids: tuple[str, ...], reason: str
    ) -> tuple[list[str], list[str], list[str], CompactionEvent | None]:
        """Redact ``message_ids`` (all stored) in one branch, with its own event, and the
        branch's recall results that quote one of them."""
        quoted = quoting((r.message for r in session.rows.values()), message_ids)
        message_ids = (*message_ids, *(m for m in quoted if m not in message_ids))
        out = Outcome(event_id=new_event_id(), now=now(), before=session.totals())
        redacted, summaries, cleared = redact_records(
            session, message_ids, reason=reason, event_id=out.event_id, count=self.count_tokens
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
        return redacted, summaries, cleared, event

    # -- branches ---------------------------------------------------------------------

    async def _fork(
        self, session_id: str, *, at: str | None, new_session_id: str | None
    ) -> SessionInfo:
        source = self._get(session_id)
        if source.tail_of is not None:
            raise tail_source_refusal(session_id, source.tail_of)
        target = new_fork_id() if new_session_id is None else new_session_id
        if self._find(target) is not None:
            raise taken_refusal(target)
        cut_from = source
        if at is None:
            appended = source.appended()
            at = appended[-1].message.message_id if appended else None
        elif at not in source.rows:
            cut_from = next(
                (
                    tail
                    for entry in reversed(source.tails)
                    if (tail := self._find(entry.session_id)) is not None
                    and (row := tail.rows.get(at)) is not None
                    and row.slot == 0
                ),
                source,
            )
        prefix = cut_prefix(cut_from, at, "fork")
        stamp = now()
        fork = SessionRecord(
            self._tenant,
            target,
            source.tokenizer,
            stamp,
            stamp,
            metadata=dict(source.metadata),
            title=source.title,
            parent_session_id=session_id,
            fork_message_id=at,
        )
        self._take(fork, prefix)
        out = Outcome(event_id=new_event_id(), now=stamp, before=Totals())
        params = fork_params(
            session_id, at, inherited=prefix.inherited(), dropped_summaries=prefix.dropped_summaries
        )
        out.record(fork, phase="fork", strategy=FORK_STRATEGY, params=params)
        self._db.sessions[(self._tenant, target)] = fork
        return fork.info()

    @staticmethod
    def _take(session: SessionRecord, prefix: Prefix) -> None:
        """Make ``prefix`` the records of ``session``."""
        session.rows = prefix.rows
        session.groups = prefix.groups
        session.state = prefix.state
        session.next_seq = prefix.next_seq

    def _set_aside(
        self, session: SessionRecord, to: str | None, event_id: str, messages: int, stamp: datetime
    ) -> str:
        """Keep ``session`` as it is now as a superseded tail of it; the tail's id."""
        tail = session.clone()
        tail.session_id = new_tail_id()
        tail.tail_of = session.session_id
        tail.parent_session_id = session.session_id  # as the SQL backend says of a tail
        tail.fork_message_id = to
        tail.events = []
        tail.tails = []
        self._db.sessions[(self._tenant, tail.session_id)] = tail
        session.tails.append(TailRecord(tail.session_id, to, event_id, messages, stamp))
        return tail.session_id

    async def _rewind(self, session_id: str, *, to: str | None) -> CompactionEvent | None:
        session = self._writable(self._get(session_id))
        prefix = cut_prefix(session, to, "rewind")
        if prefix.set_aside == 0:
            return None
        out = Outcome(event_id=new_event_id(), now=now(), before=session.totals())
        tail_id = self._set_aside(session, to, out.event_id, prefix.set_aside, out.now)
        self._take(session, prefix)
        params = rewind_params(to, tail_id, prefix.set_aside)
        return out.record(session, phase="rewind", strategy=REWIND_STRATEGY, params=params)

    def _bring_back(self, session: SessionRecord, event: CompactionEvent) -> CompactionEvent:
        """Restore the tail ``event`` set aside; what the session holds beyond the cut
        (rows the tail does not hold) becomes a tail in its turn."""
        tail_id = event.params["tail_session_id"]
        entry = next((t for t in session.tails if t.session_id == tail_id), None)
        tail = None if entry is None else self._find(entry.session_id)
        if entry is None or tail is None:
            raise InvalidInput(
                f"cannot restore event {event.id!r} of session {session.session_id!r}: "
                + (
                    "it set no tail aside"
                    if tail_id is None
                    else f"its tail {tail_id!r} was restored or deleted"
                )
            )
        out = Outcome(event_id=new_event_id(), now=now(), before=session.totals())
        held = {row.key for row in tail.rows.values()}
        beyond = [r for r in session.appended() if r.key not in held]
        session.tails.remove(entry)
        del self._db.sessions[(self._tenant, entry.session_id)]
        new_tail = None
        if beyond:
            new_tail = self._set_aside(session, entry.to, out.event_id, len(beyond), out.now)
        session.rows = tail.rows
        session.groups = tail.groups
        session.state = tail.state
        session.next_seq = tail.next_seq
        params = tail_restore_params(event.id, new_tail)
        return out.record(session, phase="restore", strategy="restore", params=params)

    async def _search(self, request: SearchRequest, *, session_id: str | None) -> SearchPage:
        if self._encrypted:
            raise InvalidInput(
                f"search is off for tenant {self._tenant!r}: it is encrypted, and nothing "
                "searchable is kept of its texts (docs/encryption.md)"
            )
        if session_id is not None:
            rows = [(self._get(session_id), r) for r in self._get(session_id).rows.values()]
        else:
            rows = self._tenant_rows()
        found = [c for s, r in rows if (c := self._candidate(request, s, r)) is not None]
        return page(self._db.cursor_key, request, session_id, found)

    def _tenant_rows(self) -> list[tuple[SessionRecord, MessageRecord]]:
        """Every row of the tenant once, under the branch that stored it (a copy's
        session, when that no longer holds it: a superseded tail first, then by id)."""
        held: dict[int, list[tuple[SessionRecord, MessageRecord]]] = {}
        for (tenant, _), session in sorted(self._db.sessions.items(), key=_by_key):
            if tenant == self._tenant:
                for row in session.rows.values():
                    held.setdefault(row.key, []).append((session, row))
        return [min(copies, key=_holder_order) for copies in held.values()]

    @staticmethod
    def _candidate(
        request: SearchRequest, session: SessionRecord, row: MessageRecord
    ) -> Candidate | None:
        """The hit on ``row`` of ``session`` when it passes the request's filters."""
        group = session.groups[row.group_id]
        if not request.include_excluded and group.excluded:
            return None
        if request.excluded_only and not group.excluded:
            return None
        if request.roles is not None and row.message.role not in request.roles:
            return None
        found = score(request.query, row.message)
        if found is None:
            return None
        hit = make_hit(
            request.query,
            row.message,
            session_id=session.session_id,
            seq=row.seq,
            group_id=row.group_id,
            excluded=group.excluded,
            excluded_by=group.event_id,
            score=found,
        )
        return candidate(hit, row.stored_at)

    # -- usage ------------------------------------------------------------------------

    async def _record_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        message_id: str | None,
        call_id: str | None,
        sent: Sent | None,
    ) -> bool:
        entries = self._db.usage.setdefault((self._tenant, session_id), [])
        if call_id is not None and any(e.call.call_id == call_id for e in entries):
            return False
        previous = next((e.context for e in reversed(entries) if e.context is not None), None)
        session = self._find(session_id)
        newest = None if session is None or session.next_seq == 1 else session.next_seq - 1
        entries.append(
            UsageEntry.of(
                session_id,
                len(entries) + 1,
                usage,
                call_id=call_id,
                message_id=message_id,
                after_seq=newest,
                sent=sent,
                previous=previous,
                recorded_at=now(),
            )
        )
        return True

    async def _usage_calls(
        self, session_id: str | None, *, since: datetime | None
    ) -> list[UsageCall]:
        keys = (
            [(self._tenant, session_id)]
            if session_id is not None
            else sorted(k for k in self._db.usage if k[0] == self._tenant)
        )
        return [
            entry.call
            for key in keys
            for entry in self._db.usage.get(key, ())
            if since is None or entry.call.usage.at >= since
        ]

    async def _branches(self, session_id: str) -> list[BranchInfo]:
        session = self._get(session_id)
        found: list[BranchInfo] = []
        parent = (
            None if session.parent_session_id is None else self._find(session.parent_session_id)
        )
        if parent is not None and session.tail_of is None:  # a tail lists no branch
            found.append(self._branch(parent, "parent", session))
        forks = [s for s in self._all() if s.parent_session_id == session_id]
        forks.sort(key=lambda s: (s.created_at, s.session_id))
        found.extend(self._branch(fork, "fork", fork) for fork in forks)
        found.extend(
            BranchInfo(
                session_id=tail.session_id,
                relation="tail",
                fork_message_id=tail.to,
                event_id=tail.event_id,
                messages=tail.messages,
                created_at=tail.created_at,
            )
            for tail in session.tails
        )
        return found

    @staticmethod
    def _branch(
        branch: SessionRecord, relation: Literal["parent", "fork"], fork: SessionRecord
    ) -> BranchInfo:
        """The parent or a fork of a session (``fork`` is the one of the two forked)."""
        return BranchInfo(
            session_id=branch.session_id,
            relation=relation,
            fork_message_id=fork.fork_message_id,
            event_id=next((e.id for e in fork.events if e.phase == "fork"), None),
            messages=len(branch.rows),
            created_at=branch.created_at,
        )


if TYPE_CHECKING:

    def _conforms(store: InMemoryHistoryStore) -> HistoryBackend:
        return store  # mypy checks that InMemoryHistoryStore implements the whole contract
