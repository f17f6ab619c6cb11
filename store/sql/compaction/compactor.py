"""Compaction on write in SQL: snapshot, plan outside any write transaction, apply.

1. A snapshot of the active view (one read, through the store's cache) with the
   session's revision and, for each active group, its fingerprint (messages, tokens,
   exclusion, pin, pending calls).
2. The strategy plans on the snapshot, outside any transaction (a summarizer may wait
   on an LLM).
3. A write transaction applies the change set only if the session's revision is
   unchanged, or else what of it still applies to the groups it touches
   (:mod:`store.rules.conflicts`, which also runs the plan-at-most-twice loop). When
   another writer wrote the session since this store last did, the groups are first
   read without a lock (where the database writes in one statement, by that
   statement's own read, :mod:`~store.sql.compaction.one_statement`): a plan another
   writer carried out already, or one that conflicts, ends there, without the write
   lock, and what is left of a plan another writer carried out in part is written in
   one statement where its summaries' ids are free (the read first counted the ids of
   the plan as made). The touched records are loaded into a mirror, the shared rules
   (:mod:`store.rules.changes`) apply the change set to it, and what changed is written
   back with the audit event; the rows the write left go to the cache. Where the
   database writes in one statement and no other writer moved the session since this
   store last read it, the statement is made from the snapshot's rows, without a read
   before it, and gated on the snapshot's revision (:meth:`Snapshot.around`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store.models import CompactionEvent, CompactionRequest, EventOutcome, Phase
from store.rules.changes import (
    Attempt,
    Outcome,
    apply_changes,
    event_label,
    new_event_id,
    summary_id_candidates,
)
from store.rules.checks import check_tokenizer
from store.rules.conflicts import CONFLICT, Compaction, Conflict, GroupState, still_valid
from store.rules.records import now
from store.sql.branches.sharing import refuse_tail
from store.sql.compaction.mirror import (
    Locked,
    Mirror,
    Written,
    add_groups,
    before_totals,
    count_stored,
    load_groups_around,
    load_rows_by_id,
    lock_with_groups,
    mirror_of,
)
from store.sql.compaction.one_statement import Moved, write_back_in_one_statement
from store.sql.compaction.write_back import write_back, write_outcome
from store.sql.drivers.engine import read_connection
from store.sql.projection.cache import Key, SessionCache, session_key
from store.sql.projection.opening import open_view
from store.sql.projection.views import group_view
from store.sql.schema import GROUPS
from store.sql.sessions import compaction_request_of, consume_compaction_request, lock_session
from store.sql.statements import CHUNK, chunks
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.tokenizers import TokenCountPolicy, Tokenizer
from strategies.view import View

__all__ = ["Applied", "Compactor", "Snapshot", "fingerprint"]

Fingerprint = tuple[int, int, bool, bool, int]
Write = Callable[[Callable[[AsyncConnection], Any]], Any]
AtOnce = Callable[[Callable[[AsyncConnection], Any]], Awaitable[Any]]


def fingerprint(row: Mapping[Any, Any]) -> Fingerprint:
    """What must not change in a group between a snapshot and an apply."""
    return (
        row["message_count"],
        row["token_count"],
        row["excluded"],
        row["pinned"],
        row["pending_calls"],
    )


_READS_AGAIN = 2
"""How often a plan whose one statement found a group it read written since is read
again without a lock, before the write transaction takes over."""


def _read_at_once(snapshot: Snapshot, changes: ChangeSet) -> bool:
    """Whether :meth:`Compactor.apply_at_once` reads the touched groups without a lock
    (else it gives the write transaction the plan before any read)."""
    return not changes.reductions and snapshot.next_seq is not None


class Done:
    """What a write in one statement gives when another writer carried the plan out."""


DONE = Done()

Found = CompactionEvent | Done | Moved | Conflict | None
"""What a write in one statement gives (see :meth:`Compactor.apply_at_once`)."""


async def _at_once(
    write_at_once: AtOnce,
    at_once: Callable[..., Awaitable[Found]],
    snapshot: Snapshot,
    changes: ChangeSet,
) -> Found:
    """Write ``changes`` in one statement (``at_once`` on a connection in autocommit):
    without a read first where the snapshot holds what the statement reads
    (:meth:`Snapshot.around`), else, or when its gate did not hold, after a read
    without a lock; read again at most :data:`_READS_AGAIN` times while another
    writer wrote a group the plan read since the read."""
    around = snapshot.around(changes) if _read_at_once(snapshot, changes) else None
    found = None
    if around is not None:
        found = await write_at_once(partial(at_once, around=around))
    if around is None or isinstance(found, Moved):
        found = await write_at_once(at_once)
    for _again in range(_READS_AGAIN):
        if not isinstance(found, Moved):
            break
        # another writer wrote a group the plan read since the read (writers sharing a
        # session plan alike): read again without a lock, which tells what of the plan
        # is left (often nothing), rather than queue for the session's row to find the
        # same
        found = await write_at_once(at_once)
    return found


@dataclass
class Applied:
    """What an apply reports besides its result, for the cache."""

    key: Key | None = None
    """The session's key as the write transaction found it."""
    written: Written | None = None
    """The rows the write left (see :class:`~store.sql.compaction.mirror.Written`)."""


@dataclass(frozen=True)
class Snapshot:
    """The active view a plan was made on, and what it was made from."""

    view: View
    rows: Sequence[Mapping[Any, Any]]
    """The active group rows the view was built from."""
    key: Key
    """The session row's cache key (incarnation, revision) at the snapshot."""
    next_seq: int | None = None
    """The session's next ``seq`` at the snapshot."""
    moved: bool = False
    """Whether another writer wrote the session since this store last did (it is shared:
    the apply looks, without a lock, at what is left of the plan first)."""
    request: CompactionRequest | None = None
    """The compaction asked for and not yet run, as the session row said."""
    session: RowMapping | None = None
    """The session row the snapshot read."""

    @cached_property
    def groups(self) -> dict[str, Fingerprint]:
        """Each active group's fingerprint (needed only when the session moved on)."""
        return {r["group_id"]: fingerprint(r) for r in self.rows}

    def around(self, changes: ChangeSet) -> Sequence[Mapping[Any, Any]] | None:
        """The rows a write of ``changes`` in one statement reads, as this snapshot holds
        them, where it holds them: the session is a root no other writer moved since
        this store last read or wrote it (not :attr:`moved`: writers sharing a session
        read first), and every group ``changes`` touches is active in it. They are the
        touched groups and the active groups at their anchors; an excluded group at one
        of those anchors is not known here (the statement's gate checks that none is
        at or after a summary's place). None: read them."""
        session = self.session
        if session is None or self.moved or session["branch"] is not None:
            return None
        touched = changes.touched_group_ids
        planned = {s.group_id for s in changes.summaries}
        # one pass over the active groups (a few hundred a turn): no fingerprints made
        anchors: set[int] = set()
        found = 0
        for view in self.view.groups:
            group_id = view.group_id
            if group_id in planned:
                return None  # a summary's planned group is stored: the read renames it
            if group_id in touched:
                anchors.add(view.anchor)
                found += 1
        if found < len(touched) or len(anchors) > CHUNK:
            return None
        return [r for r in self.rows if r["anchor"] in anchors]


@dataclass(frozen=True)
class Compactor:
    """Compacts one tenant's sessions for a store."""

    engine: AsyncEngine
    tenant: str
    tokenizer: Tokenizer
    policy: TokenCountPolicy
    write: Write
    """The store's write-retry loop (runs an operation in a write transaction)."""
    counter: Callable[[str], Callable[[Message], int]]
    """The store's counter for a session (consuming the pending cache)."""
    cache: SessionCache | None = None
    at_once: AtOnce | None = None
    """The store's way to write in one statement on a connection in autocommit (gives
    None, having written nothing, when the operation gives None or its statement waited
    too long for a lock); None where the database has none: every apply is a write
    transaction."""

    async def snapshot(self, session_id: str) -> Snapshot:
        """The session's active view, its revision and its groups' fingerprints."""

        def check(session: RowMapping) -> None:
            check_tokenizer(session["tokenizer"], self.tokenizer.name, session_id)

        async with read_connection(self.engine, single=True) as conn:
            opened = await open_view(
                conn,
                self.engine,
                self.cache,
                self.tenant,
                session_id,
                check=check,
                send=False,
                tokenizer=self.tokenizer,
                policy=self.policy,
            )
        session = opened.session
        return Snapshot(
            opened.view,
            opened.rows,
            session_key(session),
            session["next_seq"],
            opened.moved,
            compaction_request_of(session),
            session,
        )

    def compaction(
        self, session_id: str, strategy: CompactionStrategy, phase: Phase
    ) -> Compaction[Snapshot]:
        """How :func:`~store.rules.conflicts.plan_and_apply` snapshots and applies."""

        async def snapshot() -> Snapshot:
            return await self.snapshot(session_id)

        async def apply(
            snapshot: Snapshot, changes: ChangeSet, attempt: Attempt
        ) -> CompactionEvent | Conflict | None:
            return await self._apply(session_id, strategy, phase, snapshot, changes, attempt)

        async def record(
            changes: ChangeSet, attempt: Attempt, outcome: EventOutcome
        ) -> CompactionEvent:
            async def operation(conn: AsyncConnection) -> CompactionEvent:
                return await self.record(
                    conn, session_id, changes, phase, strategy, attempt, outcome
                )

            event: CompactionEvent = await self.write(operation)
            return event

        async def consume(request: CompactionRequest) -> None:
            async def operation(conn: AsyncConnection) -> None:
                await consume_compaction_request(conn, self.tenant, session_id, request)

            await self.write(operation)

        return Compaction(snapshot=snapshot, apply=apply, record=record, consume=consume)

    async def _apply(
        self,
        session_id: str,
        strategy: CompactionStrategy,
        phase: Phase,
        snapshot: Snapshot,
        changes: ChangeSet,
        attempt: Attempt,
    ) -> CompactionEvent | Conflict | None:
        """Apply a plan made on ``snapshot``: in one statement where the store can
        (:meth:`apply_at_once`), else in a write transaction (:meth:`apply`)."""
        write_at_once = self.at_once
        if snapshot.moved and not (write_at_once is not None and _read_at_once(snapshot, changes)):
            # writers sharing a session plan alike: what another already did (or
            # changed) is seen without taking the session's lock for nothing (the one
            # statement's own read tells the same, where it reads)
            async with read_connection(self.engine, single=True) as conn:
                left = await self._still_valid(conn, session_id, snapshot, changes, None)
            if isinstance(left, Conflict):
                return CONFLICT
            if left.is_empty:
                return None
        seen = Applied()

        async def at_once(
            conn: AsyncConnection, around: Sequence[Mapping[Any, Any]] | None = None
        ) -> CompactionEvent | Done | Moved | Conflict | None:
            seen.key = seen.written = None
            return await self.apply_at_once(
                conn, session_id, changes, phase, strategy, snapshot, seen, attempt, around
            )

        async def operation(conn: AsyncConnection) -> CompactionEvent | Conflict | None:
            seen.key = seen.written = None
            return await self.apply(
                conn, session_id, changes, phase, strategy, snapshot, seen, attempt
            )

        found = None
        if write_at_once is not None:
            found = await _at_once(write_at_once, at_once, snapshot, changes)
        if isinstance(found, Done):
            return None
        if isinstance(found, Conflict):
            return CONFLICT
        result: CompactionEvent | Conflict | None = None if isinstance(found, Moved) else found
        if result is None:
            result = await self.write(operation)
        if isinstance(result, CompactionEvent) and seen.key is not None:
            self._advance(session_id, seen, changes, result)
        return result

    async def record(
        self,
        conn: AsyncConnection,
        session_id: str,
        changes: ChangeSet,
        phase: Phase,
        strategy: CompactionStrategy,
        attempt: Attempt,
        outcome: EventOutcome,
    ) -> CompactionEvent:
        """Record the event of a compaction that applied nothing, in the caller's write
        transaction (the session's revision stays: its history did not change)."""
        session = await lock_session(conn, self.tenant, session_id)
        before = before_totals(session)
        out = Outcome(
            event_id=new_event_id(),
            now=now(),
            before=before,
            result=outcome,
            attempt=attempt,
            changes=changes,
        )
        name, params = event_label(changes, strategy)
        return await write_outcome(
            conn, session, out, before, strategy=name, params=params, phase=phase
        )

    def _advance(
        self, session_id: str, applied: Applied, changes: ChangeSet, event: CompactionEvent
    ) -> None:
        """Move the cache past this store's own compaction, with the rows it wrote."""
        if self.cache is None or applied.key is None:
            return
        touched = set(changes.touched_group_ids)
        touched.update(event.excluded, event.restored, event.summarized)
        touched.update(g for replaced in event.summarized.values() for g in replaced)
        before = applied.key
        after = (before[0], before[1] + 1)
        written = applied.written
        if written is None:
            self.cache.advance(session_id, before, after, touched, rows_touched=True)
            return
        views = {g: group_view(r) for g, r in written.groups.items() if not r["excluded"]}
        self.cache.write_rows(session_id, before, after, touched, written, views)

    async def _still_valid(
        self,
        conn: AsyncConnection,
        session_id: str,
        snapshot: Snapshot,
        changes: ChangeSet,
        locked: Locked | None,
    ) -> ChangeSet | Conflict:
        """What of ``changes`` still applies to the groups it touches as they are now (the
        rows ``locked`` with the session row tell, else as read now): see
        :func:`~store.rules.conflicts.still_valid`."""
        touched = sorted(changes.touched_group_ids)
        rows: list[Mapping[Any, Any]] = []
        if locked is not None:
            wanted = set(touched)
            rows = [r for r in locked.groups if r["group_id"] in wanted]
        else:
            for part in chunks(touched):
                query = select(GROUPS).where(
                    GROUPS.c.tenant == self.tenant,
                    GROUPS.c.session_id == session_id,
                    GROUPS.c.group_id.in_(part),
                )
                rows.extend((await conn.execute(query)).mappings())
        current = {r["group_id"]: GroupState(bool(r["excluded"]), fingerprint(r)) for r in rows}
        return still_valid(changes, snapshot.groups, current)

    def _applied(
        self,
        session_id: str,
        mirror: Mirror,
        changes: ChangeSet,
        strategy: CompactionStrategy | None,
        attempt: Attempt | None,
    ) -> tuple[Outcome, str, dict[str, Any]] | None:
        """``changes`` applied to ``mirror`` by the shared rules: the outcome and the
        event's strategy and parameters; None when nothing changed."""
        out = Outcome(
            event_id=new_event_id(),
            now=now(),
            before=before_totals(mirror.row),
            attempt=attempt,
            changes=changes,
        )
        apply_changes(mirror.session, changes, self.counter(session_id), out)
        if not out.changed:
            return None
        name, params = event_label(changes, strategy)
        return out, name, params

    async def apply_at_once(
        self,
        conn: AsyncConnection,
        session_id: str,
        changes: ChangeSet,
        phase: Phase,
        strategy: CompactionStrategy,
        snapshot: Snapshot,
        seen: Applied,
        attempt: Attempt,
        around: Sequence[Mapping[Any, Any]] | None = None,
    ) -> CompactionEvent | Done | Moved | Conflict | None:
        """Apply ``changes`` in one statement on ``conn``, a connection in autocommit
        (:mod:`~store.sql.compaction.one_statement`); the event, :data:`DONE` when
        another writer carried the plan out already (read without a lock, as the write
        transaction would find it under the lock), :data:`CONFLICT` when the plan
        conflicts with another writer's write since the snapshot (it is made again),
        :data:`~store.sql.compaction.one_statement.MOVED` when the statement's gate did
        not hold, or None, having written nothing, when :meth:`apply` in a write
        transaction should: a change set that reduces messages, too many ids for one
        statement, a session deleted and made again, a summary's id taken, a fork's
        summary (its inherited ids are not read here), a change that changes nothing,
        a text too large for one statement, a summary's id stored meanwhile.

        When another writer wrote since the snapshot, what of the plan still applies to
        the groups as this read found them is applied, as :meth:`apply` does under the
        lock; the statement's gate is then the revision this read found.

        With ``around`` (:meth:`Snapshot.around`), nothing is read: the groups are the
        snapshot's, and the statement's gate is the snapshot's revision and, for a
        summary, that no group the snapshot lacks (an excluded one) is at its anchor at
        or after its slot; :data:`MOVED` when it did not hold."""
        if not _read_at_once(snapshot, changes):
            return None
        if around is not None and snapshot.session is not None:
            read = Locked(snapshot.session, around, 0)
        else:
            found = await self._read_for_at_once(conn, session_id, snapshot, changes)
            if not isinstance(found, tuple):
                return found
            read, changes = found
        session, touched = read.session, changes.touched_group_ids
        if changes.summaries and session["branch"] is not None:
            return None  # a fork inherits ids in its owners' rows: the transaction reads them
        check_tokenizer(session["tokenizer"], self.tokenizer.name, session_id)
        refuse_tail(session)
        mirror = mirror_of(session)
        add_groups(mirror, read.groups, set(touched))
        applied = self._applied(session_id, mirror, changes, strategy, attempt)
        if applied is None:
            return None
        out, name, params = applied
        written = await write_back_in_one_statement(
            conn, mirror, out, phase=phase, strategy=name, params=params, unseen=around is not None
        )
        if written is None or isinstance(written, Moved):
            return written
        event, landed_after = written
        if not landed_after:  # else the cache catches up through the write chain
            seen.key, seen.written = session_key(session), mirror.written
        return event

    async def _read_for_at_once(
        self, conn: AsyncConnection, session_id: str, snapshot: Snapshot, changes: ChangeSet
    ) -> tuple[Locked, ChangeSet] | Done | Conflict | None:
        """The read of :meth:`apply_at_once` (without a lock) and what of ``changes`` it
        writes (see :meth:`_left_at_once`)."""
        assert snapshot.next_seq is not None
        touched = changes.touched_group_ids
        taken = summary_id_candidates(changes, snapshot.next_seq)
        read = await lock_with_groups(conn, self.tenant, session_id, touched, taken, lock=False)
        if read is None:
            return None
        left = await self._left_at_once(conn, session_id, snapshot, changes, read)
        return (read, left) if isinstance(left, ChangeSet) else left

    async def _left_at_once(
        self,
        conn: AsyncConnection,
        session_id: str,
        snapshot: Snapshot,
        changes: ChangeSet,
        read: Locked,
    ) -> ChangeSet | Done | Conflict | None:
        """What of ``changes`` :meth:`apply_at_once` writes, given its ``read``: the
        plan, or what of it still applies when another writer wrote since the snapshot;
        :data:`DONE`, :data:`CONFLICT`, or None for the write transaction (a session
        made again, a summary's id stored)."""
        session, taken = read.session, read.taken
        if session_key(session) != snapshot.key:
            if session["incarnation"] != snapshot.key[0]:
                return None
            valid = await self._still_valid(conn, session_id, snapshot, changes, read)
            if isinstance(valid, Conflict):
                return CONFLICT  # planned again, without taking the lock for it
            if valid.is_empty:
                return DONE  # another writer carried the plan out: nothing to write
            if taken and valid != changes:
                # the ids counted were the plan's as made: often another writer's write
                # of the same summaries took them, and what is left has others
                left = summary_id_candidates(valid, session["next_seq"])
                taken = await count_stored(conn, self.tenant, session_id, left)
            changes = valid
        if taken:
            return None  # a summary's id is stored: the write transaction renames it
        return changes

    async def apply(
        self,
        conn: AsyncConnection,
        session_id: str,
        changes: ChangeSet,
        phase: Phase,
        strategy: CompactionStrategy | None,
        snapshot: Snapshot | None = None,
        seen: Applied | None = None,
        attempt: Attempt | None = None,
    ) -> CompactionEvent | Conflict | None:
        """Apply ``changes`` in the caller's write transaction (None when nothing changed).

        ``seen`` receives the session's cache key as the transaction found it, and the
        rows the write left.
        """
        touched = changes.touched_group_ids
        # the ids the summaries may take, as the snapshot's next seq tells them
        guessed = None if snapshot is None else snapshot.next_seq
        taken = [] if guessed is None else summary_id_candidates(changes, guessed)
        locked = await lock_with_groups(conn, self.tenant, session_id, touched, taken)
        # too many ids for one statement: the lock, then the groups in steps
        session = locked.session if locked else await lock_session(conn, self.tenant, session_id)
        if seen is not None:
            seen.key = session_key(session)
        check_tokenizer(session["tokenizer"], self.tokenizer.name, session_id)
        refuse_tail(session)
        if snapshot is not None and session_key(session) != snapshot.key:
            valid = await self._still_valid(conn, session_id, snapshot, changes, locked)
            if isinstance(valid, Conflict):
                return CONFLICT
            changes, touched = valid, valid.touched_group_ids
        mirror = mirror_of(session)
        if locked is None:
            await load_groups_around(conn, mirror, touched)
        else:
            add_groups(mirror, locked.groups, set(touched))
        wanted = [r.message_id for r in changes.reductions]
        # the ids the summaries may take, loaded when one is stored or may be: a fork's
        # inherited messages are its owners' rows, which the locked read does not count
        forked = session["branch"] is not None
        if locked is None or guessed != session["next_seq"] or locked.taken or forked:
            wanted += summary_id_candidates(changes, session["next_seq"])
        await load_rows_by_id(conn, mirror, set(wanted))
        applied = self._applied(session_id, mirror, changes, strategy, attempt)
        if applied is None:
            return None
        out, name, params = applied
        event = await write_back(
            conn,
            mirror,
            out,
            phase=phase,
            strategy=name,
            params=params,
            chained=not changes.reductions,
        )
        if seen is not None:
            seen.written = mirror.written
        return event
