"""The in-memory store's second half: compaction on write, audit, restore, pin, import."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, overload

from store.audit_models import (
    CompactionEvent,
    ExcludedGroup,
    ImportResult,
    Phase,
    Stats,
    WhyResult,
)
from store.errors import InvalidInput, check_session_id, translate_errors
from store.memory import _audit
from store.memory._af_import import import_changes, plan_import, source_ids
from store.memory._base import MemoryStoreBase
from store.memory._compaction import Outcome, apply_changes, new_event_id, restore
from store.memory._state import SessionData, utcnow
from store.models import Provenance
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.view import View

__all__ = ["InMemoryHistoryStore"]

logger = logging.getLogger("chatledger.store")

PHASES: tuple[Phase, ...] = ("after_run", "manual", "import", "restore")


@dataclass(frozen=True)
class _Snapshot:
    view: View
    revision: int
    versions: dict[str, int]


class InMemoryHistoryStore(MemoryStoreBase):
    """The whole store contract (issues #4 and #5) in plain Python, for tests and demos.

    Same API and same rules as the SQL store; simple rather than fast. Stores made with
    :meth:`for_tenant` (or given the same :class:`~store.memory.MemoryDatabase`) share
    the rows, as two stores on one database would::

        store = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())
        await store.append("s", messages)
        event = await store.compact("s", TruncationStrategy(max_n=20, compact_to=10))
        context = await store.context("s", pending=in_flight)

    Reads: :meth:`history`, :meth:`aiter_history`, :meth:`sessions`, :meth:`session`,
    :meth:`get_metadata`, :meth:`view`, :meth:`context`. Writes: :meth:`append`,
    :meth:`set_metadata`, :meth:`delete_session`, :meth:`recount`, :meth:`compact`,
    :meth:`restore`, :meth:`pin`, :meth:`unpin`, :meth:`import_messages`. Audit:
    :meth:`audit`, :meth:`excluded`, :meth:`why`, :meth:`stats`.
    """

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

    async def compact(
        self,
        session_id: str,
        strategy: CompactionStrategy,
        *,
        phase: Phase = "manual",
        dry_run: bool = False,
    ) -> CompactionEvent | ChangeSet | None:
        """Plan ``strategy`` on a snapshot of the active view and apply it if still valid.

        The change set applies only if the groups it touches are unchanged since the
        snapshot; otherwise it is planned again once, and on a second conflict nothing
        is applied and a warning is logged. Returns the event, or None when nothing
        changed; with ``dry_run`` returns the change set and writes nothing.
        """
        check_session_id(session_id)
        if phase not in PHASES:
            raise InvalidInput(f"unknown phase {phase!r}: expected one of {', '.join(PHASES)}")
        for attempt in (1, 2):
            snapshot = self._snapshot(self._counted(session_id))
            with translate_errors():  # a strategy's TokenizerMismatch, as in SQL
                changes = await strategy.plan(snapshot.view)
            if dry_run:
                return changes
            if changes.is_empty:
                return None
            session = self._counted(session_id)
            if not _conflicts(session, snapshot, changes):
                return self._apply(session, changes, phase, strategy)
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

    def _snapshot(self, session: SessionData) -> _Snapshot:
        view = self._view_of(session)
        versions = {g.group_id: session.groups[g.group_id].version for g in view.groups}
        return _Snapshot(view=view, revision=session.revision, versions=versions)

    def _apply(
        self,
        session: SessionData,
        changes: ChangeSet,
        phase: Phase,
        strategy: CompactionStrategy | None,
    ) -> CompactionEvent | None:
        out = Outcome(event_id=new_event_id(), now=utcnow(), before=session.totals())
        apply_changes(session, changes, self._count_for(session.session_id), out)
        if not out.changed:
            return None
        name = changes.strategy or (strategy.name if strategy is not None else "")
        params = changes.params or (strategy.params() if strategy is not None else {})
        return out.record(session, phase=phase, strategy=name, params=params)

    # -- audit ------------------------------------------------------------------------

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
        sessions = [self._get(session_id)] if session_id is not None else self._all()
        return _audit.filter_events(
            sessions, since=since, strategy=strategy, phase=phase, limit=limit
        )

    async def excluded(self, session_id: str) -> list[ExcludedGroup]:
        """The session's excluded groups in order, with reason, event and summary."""
        check_session_id(session_id)
        return _audit.excluded_groups(self._get(session_id))

    async def why(self, session_id: str, message_id: str) -> WhyResult:
        """Whether a stored message is in the context (built without a strategy), and why."""
        check_session_id(session_id)
        return _audit.why(self._get(session_id), message_id)

    async def stats(self, session_id: str | None = None) -> Stats:
        """Stored versus active messages, groups and tokens (one session or the tenant)."""
        if session_id is not None:
            check_session_id(session_id)
        sessions = [self._get(session_id)] if session_id is not None else self._all()
        return _audit.stats(self._tenant, session_id, sessions)

    def _all(self) -> list[SessionData]:
        return sorted(
            (s for (t, _), s in self._db.sessions.items() if t == self._tenant),
            key=lambda s: s.session_id,
        )

    # -- restore and pin --------------------------------------------------------------

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
        session = self._get(session_id)
        out = Outcome(event_id=new_event_id(), now=utcnow(), before=session.totals())
        if group_ids is not None:
            ids = list(group_ids)
            _check_groups(session, ids)
            restore(session, out, group_ids=ids)
            params: dict[str, object] = {"group_ids": ids}
        else:
            event = _find_event(session, str(event_id))
            targets = [
                g.group_id for g in session.groups.values() if g.excluded and g.event_id == event.id
            ]
            restore(
                session,
                out,
                group_ids=targets,
                drop_summaries=list(event.summarized),
                drop_reductions_of=event.id,
            )
            params = {"event_id": event.id}
        if not out.changed:
            return None
        return out.record(session, phase="restore", strategy="restore", params=params)

    async def pin(self, session_id: str, group_ids: Iterable[str]) -> list[str]:
        """Pin groups: strategies never exclude them. Returns the ids that changed."""
        check_session_id(session_id)
        return self._set_pinned(session_id, group_ids, pinned=True)

    async def unpin(self, session_id: str, group_ids: Iterable[str]) -> list[str]:
        """Unpin groups. Returns the ids that changed."""
        check_session_id(session_id)
        return self._set_pinned(session_id, group_ids, pinned=False)

    def _set_pinned(self, session_id: str, group_ids: Iterable[str], *, pinned: bool) -> list[str]:
        session = self._get(session_id)
        ids = list(dict.fromkeys(group_ids))
        _check_groups(session, ids)
        changed = [g for g in ids if session.groups[g].pinned != pinned]
        for group_id in changed:
            session.groups[group_id].pinned = pinned
            session.groups[group_id].version += 1
        if changed:
            session.touch(utcnow())
        return changed

    # -- import -----------------------------------------------------------------------

    async def import_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        source: str = "agent_framework",
    ) -> ImportResult:
        """Append messages that another system may have compacted already.

        Agent Framework's annotations (see :mod:`store.formats.agent_framework`) become
        exclusions and summary groups, recorded as one ``import`` event, so that the
        projection never holds both a summary and what it replaced. Every message is
        recorded with ``source`` as its provenance. Importing the same messages again
        changes nothing.
        """
        check_session_id(session_id)
        batch = list(messages)
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


def _conflicts(session: SessionData, snapshot: _Snapshot, changes: ChangeSet) -> bool:
    """Whether a group the change set touches changed since the snapshot."""
    if session.revision == snapshot.revision:
        return False
    for group_id in changes.touched_group_ids:
        group = session.groups.get(group_id)
        if group_id not in snapshot.versions:
            if group is not None and not group.excluded:
                return True  # appended or restored since: never touched by a stale plan
            continue
        if group is None or group.excluded or group.version != snapshot.versions[group_id]:
            return True
    return False


def _check_groups(session: SessionData, group_ids: list[str]) -> None:
    unknown = [g for g in group_ids if g not in session.groups]
    if unknown:
        raise InvalidInput(f"unknown group ids in session {session.session_id!r}: {unknown}")


def _find_event(session: SessionData, event_id: str) -> CompactionEvent:
    for event in session.events:
        if event.id == event_id:
            return event
    raise InvalidInput(f"no event {event_id!r} in session {session.session_id!r}")
