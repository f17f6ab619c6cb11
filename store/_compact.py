"""Compaction on write in SQL: snapshot, plan outside any write transaction, apply.

1. A snapshot of the active view (one read) with the session's revision and, for each
   active group, its fingerprint (messages, tokens, exclusion, pin, pending calls).
2. The strategy plans on the snapshot, outside any transaction (a summarizer may wait
   on an LLM).
3. A write transaction applies the change set only if the session's revision is
   unchanged, or else if no group it touches changed, vanished, was excluded, or
   (absent from the snapshot) became active. A summary whose message id is stored
   already is stored under a fresh id (see :mod:`store.memory._compaction`).
   On a conflict the plan is made again once; a second conflict applies nothing and
   logs a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store._append import check_tokenizer
from store._cache import Key, SessionCache, session_key
from store._mirror import before_totals, mirror_of, write_back
from store._mirror_load import load_groups, load_rows_by_id
from store._rows import chunks, lock_session, now, read_session
from store._sqlite_driver import short_statements
from store._view import SqlSource, group_view, read_view
from store._written import Written
from store.audit_models import CompactionEvent, Phase
from store.errors import InvalidInput
from store.memory._compaction import (
    Outcome,
    apply_changes,
    new_event_id,
    summary_id_candidates,
)
from store.schema import GroupRow, MessageRow
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.tokenizers import TokenCountPolicy, Tokenizer
from strategies.view import View

__all__ = ["PHASES", "Compactor", "Snapshot", "stored_ids"]

logger = logging.getLogger("chatledger.store")

PHASES: tuple[Phase, ...] = ("after_run", "manual", "import", "restore")
MESSAGES = cast(Table, MessageRow.__table__)
GROUPS = cast(Table, GroupRow.__table__)

Fingerprint = tuple[int, int, bool, bool, int]
Write = Callable[[Callable[[AsyncConnection], Awaitable[Any]]], Awaitable[Any]]


class _Conflict:
    """Returned by an apply that found the session changed under its plan."""


CONFLICT = _Conflict()


def fingerprint(row: Mapping[Any, Any]) -> Fingerprint:
    """What must not change in a group between a snapshot and an apply."""
    return (
        row["message_count"],
        row["token_count"],
        row["excluded"],
        row["pinned"],
        row["pending_calls"],
    )


@dataclass
class Applied:
    """What an apply reports besides its result, for the cache."""

    key: Key | None = None
    """The session's key as the write transaction found it."""
    written: Written | None = None
    """The rows the write left (see :class:`store._written.Written`)."""


@dataclass(frozen=True)
class Snapshot:
    """The active view a plan was made on, and what it was made from."""

    view: View
    revision: int
    rows: Sequence[Mapping[Any, Any]]
    """The active group rows the view was built from."""
    key: Key

    @cached_property
    def groups(self) -> dict[str, Fingerprint]:
        """Each active group's fingerprint (needed only when the session moved on)."""
        return {r["group_id"]: fingerprint(r) for r in self.rows}


async def stored_ids(
    conn: AsyncConnection, tenant: str, session_id: str, message_ids: list[str]
) -> set[str]:
    """Which of ``message_ids`` are stored in the session."""
    found: set[str] = set()
    for part in chunks(sorted(set(message_ids))):
        query = select(MESSAGES.c.message_id).where(
            MESSAGES.c.tenant == tenant,
            MESSAGES.c.session_id == session_id,
            MESSAGES.c.message_id.in_(part),
        )
        found.update(r[0] for r in await conn.execute(query))
    return found


@dataclass(frozen=True)
class Compactor:
    """Compacts one tenant's sessions for a store."""

    engine: AsyncEngine
    tenant: str
    tokenizer: Tokenizer
    policy: TokenCountPolicy
    write: Write
    counter: Callable[[str], Callable[[Message], int]]
    """The store's counter for a session (consuming the pending cache)."""
    cache: SessionCache | None = None

    async def snapshot(self, session_id: str) -> Snapshot:
        """The session's active view, its revision and its groups' fingerprints."""
        async with self.engine.connect() as conn:
            session = await read_session(conn, self.tenant, session_id)
            check_tokenizer(session["tokenizer"], self.tokenizer, session_id)
            key = session_key(session)
            entry = self.cache.entry(session_id, key) if self.cache is not None else None
            source = SqlSource(self.engine, self.tenant, session_id, self.cache, entry)
            view, rows = await read_view(
                conn, source, session, tokenizer=self.tokenizer, policy=self.policy
            )
        return Snapshot(view, session["revision"], rows, key)

    async def compact(
        self, session_id: str, strategy: CompactionStrategy, *, phase: Phase, dry_run: bool
    ) -> CompactionEvent | ChangeSet | None:
        """Plan on a snapshot and apply if still valid (see the module docstring)."""
        if phase not in PHASES:
            raise InvalidInput(f"unknown phase {phase!r}: expected one of {', '.join(PHASES)}")
        with short_statements():
            return await self._compact(session_id, strategy, phase=phase, dry_run=dry_run)

    async def _compact(
        self, session_id: str, strategy: CompactionStrategy, *, phase: Phase, dry_run: bool
    ) -> CompactionEvent | ChangeSet | None:
        for attempt in (1, 2):
            snapshot = await self.snapshot(session_id)
            changes = await strategy.plan(snapshot.view)
            if dry_run:
                return changes
            if changes.is_empty:
                return None

            seen = Applied()

            async def operation(
                conn: AsyncConnection,
                changes: ChangeSet = changes,
                snapshot: Snapshot = snapshot,
                seen: Applied = seen,
            ) -> Any:
                seen.key = seen.written = None
                return await self.apply(conn, session_id, changes, phase, strategy, snapshot, seen)

            result = await self.write(operation)
            if not isinstance(result, _Conflict):
                if result is not None and seen.key is not None and self.cache is not None:
                    self._advance(session_id, seen, changes, result)
                return cast(CompactionEvent | None, result)
            logger.info(
                "compaction of session %r by %s conflicted with a concurrent write (try %d)",
                session_id,
                strategy.name,
                attempt,
            )
        logger.warning(
            "compaction of session %r by %s abandoned: the session kept changing under it",
            session_id,
            strategy.name,
        )
        return None

    def _advance(self, session_id: str, applied: Applied, changes: ChangeSet, event: Any) -> None:
        """Move the cache past this store's own compaction, with the rows it wrote."""
        assert self.cache is not None and applied.key is not None
        touched = set(changes.touched_group_ids)
        if isinstance(event, CompactionEvent):
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

    async def _conflicts(
        self, conn: AsyncConnection, session_id: str, snapshot: Snapshot, changes: ChangeSet
    ) -> bool:
        touched = sorted(changes.touched_group_ids)
        current: dict[str, RowMapping] = {}
        for part in chunks(touched):
            query = select(GROUPS).where(
                GROUPS.c.tenant == self.tenant,
                GROUPS.c.session_id == session_id,
                GROUPS.c.group_id.in_(part),
            )
            current.update((r["group_id"], r) for r in (await conn.execute(query)).mappings())
        for group_id in touched:
            row = current.get(group_id)
            if group_id not in snapshot.groups:
                if row is not None and not row["excluded"]:
                    return True
                continue
            if row is None or row["excluded"] or fingerprint(row) != snapshot.groups[group_id]:
                return True
        return False

    async def apply(
        self,
        conn: AsyncConnection,
        session_id: str,
        changes: ChangeSet,
        phase: Phase,
        strategy: CompactionStrategy | None,
        snapshot: Snapshot | None = None,
        seen: Applied | None = None,
    ) -> CompactionEvent | _Conflict | None:
        """Apply ``changes`` in the caller's write transaction (None when nothing changed).

        ``seen`` receives the session's cache key as the transaction found it, and the
        rows the write left.
        """
        session = await lock_session(conn, self.tenant, session_id)
        if seen is not None:
            seen.key = session_key(session)
        check_tokenizer(session["tokenizer"], self.tokenizer, session_id)
        if (
            snapshot is not None
            and session["revision"] != snapshot.revision
            and await self._conflicts(conn, session_id, snapshot, changes)
        ):
            return CONFLICT
        mirror = mirror_of(session)
        await load_groups(conn, mirror, changes.touched_group_ids)
        anchors = {g.anchor for g in mirror.session.groups.values()}
        await load_groups(conn, mirror, changes.touched_group_ids, anchors=anchors)
        # the stored ones among the ids the summaries may take (see apply_changes)
        wanted = summary_id_candidates(changes, session["next_seq"])
        wanted += [r.message_id for r in changes.reductions]
        await load_rows_by_id(conn, mirror, set(wanted))
        out = Outcome(event_id=new_event_id(), now=now(), before=before_totals(session))
        apply_changes(mirror.session, changes, self.counter(session_id), out)
        if not out.changed:
            return None
        name = changes.strategy or (strategy.name if strategy is not None else "")
        params = changes.params or (strategy.params() if strategy is not None else {})
        event = await write_back(conn, mirror, out, phase=phase, strategy=name, params=params)
        if seen is not None:
            seen.written = mirror.written
        return event
