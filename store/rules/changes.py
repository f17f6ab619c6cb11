"""Applying change sets and restores to a session's records, with their audit events.

The rules every backend follows (the SQL backend runs them on the few records a write
loads, :mod:`store.sql.compaction`):

* Parts apply in the order of :meth:`strategies.view.View.apply`: summaries, then
  exclusions, then reductions. A part that names a group which is not active (already
  excluded, unknown, or replaced by an earlier part) is skipped.
* A summary is stored as a ``summary`` group at the anchor of the first group it replaces,
  with the next free slot there; the replaced groups are excluded with the reason
  ``summarized`` and linked to it. When the planned message id is already stored (a
  deterministic id planned again after a restore and an unpin), the summary is stored
  as ``f"{id}@{seq}"`` (``seq`` being the one it gets), its group as ``group_<that id>``;
  later parts of the same change set that name the planned group or message follow it.
* Pinned groups are never excluded nor summarized by a strategy: such parts are skipped
  (and logged). Reductions of pinned groups are allowed (nothing is left out).
* Restores re-include groups and pin them. Re-including a group replaced by a summary
  re-includes every group of that summary and excludes the summary (and, up the chain,
  any summary that replaced that summary); re-including a summary excludes the groups
  it replaced. A group named explicitly wins over a summary that would hide it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from store.errors import InvalidInput
from store.models import CompactionEvent, EventOutcome, Phase
from store.rules.records import Counter, GroupRecord, SessionRecord, as_stored
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet, Exclusion, Reduction, SummaryInsert
from strategies.messages import Message
from strategies.view import Totals

__all__ = [
    "RESTORED_REASON",
    "SUMMARIZED_REASON",
    "Attempt",
    "Outcome",
    "apply_changes",
    "build_event",
    "check_groups",
    "check_restorable",
    "event_label",
    "log_event",
    "new_event_id",
    "restore",
    "summary_id_candidates",
    "unapplied_outcome",
    "undo_event",
]

logger = logging.getLogger("chatledger.store")

SUMMARIZED_REASON = "summarized"
"""Exclusion reason of a group replaced by a summary."""

RESTORED_REASON = "restored"
"""Exclusion reason of a summary whose groups were restored."""


def new_event_id() -> str:
    """A fresh, random event id: 64 random bits (``evt_`` and 16 hex digits), short enough
    to read and type, unique within a session (the key of an event) and, in practice,
    in the store."""
    return f"evt_{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True, slots=True)
class Attempt:
    """Which attempt of a compaction is being applied or recorded, and when it began."""

    number: int = 1
    """1, or 2 after a conflict."""
    started: float | None = None
    """``time.perf_counter()`` when the compaction began (None: no duration)."""

    def duration(self) -> float | None:
        """Seconds since :attr:`started`."""
        return None if self.started is None else time.perf_counter() - self.started


def unapplied_outcome(changes: ChangeSet) -> EventOutcome | None:
    """The outcome of a compaction whose ``changes`` applied nothing: ``failed`` when a
    step failed, else ``blocked`` when protected groups kept it above its bound, else
    None (nothing to record: a no-change run writes no row)."""
    kinds = {d.kind for d in changes.diagnostics}
    if "failed" in kinds:
        return "failed"
    if "blocked" in kinds:
        return "blocked"
    return None


def _summarizer(changes: ChangeSet | None) -> tuple[str | None, str | None]:
    """The summarizer (and its model) that wrote the summaries of ``changes``, or failed."""
    if changes is None:
        return None, None
    for summary in changes.summaries:
        if summary.summarizer is not None:
            return summary.summarizer, summary.model
    for note in changes.diagnostics:
        if note.summarizer is not None:
            return note.summarizer, note.model
    return None, None


@dataclass
class Outcome:
    """What one change set or restore did, before it becomes an event."""

    event_id: str
    now: datetime
    before: Totals
    result: EventOutcome = "applied"
    """The event's outcome."""
    attempt: Attempt | None = None
    """The compaction's attempt (None for restores and imports)."""
    changes: ChangeSet | None = None
    """The change set (for its diagnostics and summarizer)."""
    excluded: list[str] = field(default_factory=list)
    summarized: dict[str, tuple[str, ...]] = field(default_factory=dict)
    reduced: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    """The exclusion reason of each group the event excluded (summarized ones too)."""

    @property
    def changed(self) -> bool:
        """Whether anything was written."""
        return bool(self.excluded or self.summarized or self.reduced or self.restored)

    def record(
        self, session: SessionRecord, *, phase: Phase, strategy: str, params: dict[str, Any]
    ) -> CompactionEvent:
        """Append the audit event to ``session``, bump its revision (when it applied:
        an outcome that changed nothing leaves the revision as it is), and log it."""
        event = build_event(
            session, self, session.totals(), phase=phase, strategy=strategy, params=params
        )
        session.events.append(event)
        if self.result == "applied":
            session.touch(self.now)
        log_event(event)
        return event


def build_event(
    session: SessionRecord,
    out: Outcome,
    after: Totals,
    *,
    phase: Phase,
    strategy: str,
    params: dict[str, Any],
) -> CompactionEvent:
    """The audit event of what ``out`` did to ``session``."""
    summarizer, model = _summarizer(out.changes)
    return CompactionEvent(
        id=out.event_id,
        session_id=session.session_id,
        tenant=session.tenant,
        phase=phase,
        strategy=strategy,
        params=params,
        messages_before=out.before.messages,
        messages_after=after.messages,
        groups_before=out.before.groups,
        groups_after=after.groups,
        tokens_before=out.before.tokens,
        tokens_after=after.tokens,
        created_at=out.now,
        excluded=tuple(out.excluded),
        summarized=dict(out.summarized),
        reasons=dict(out.reasons),
        reduced=tuple(out.reduced),
        restored=tuple(out.restored),
        outcome=out.result,
        duration_seconds=None if out.attempt is None else out.attempt.duration(),
        attempts=1 if out.attempt is None else out.attempt.number,
        summarizer=summarizer,
        summarizer_model=model,
        diagnostics=() if out.changes is None else out.changes.diagnostics,
    )


def log_event(event: CompactionEvent) -> None:
    """Log an event with its counts before and after (a warning when it did not apply)."""
    if event.outcome != "applied":
        logger.warning(
            "compaction %s on session %r (tenant %r, %s, phase %s, attempts %d): %s",
            event.outcome,
            event.session_id,
            event.tenant,
            event.strategy,
            event.phase,
            event.attempts,
            "; ".join(d.message for d in event.diagnostics) or "nothing applied",
        )
        return
    logger.info(
        "compaction event %s on session %r (tenant %r, %s, phase %s): "
        "messages %d -> %d, groups %d -> %d, tokens %d -> %d",
        event.id,
        event.session_id,
        event.tenant,
        event.strategy,
        event.phase,
        event.messages_before,
        event.messages_after,
        event.groups_before,
        event.groups_after,
        event.tokens_before,
        event.tokens_after,
    )


def exclude(
    group: GroupRecord, reason: str, out: Outcome, *, summarized_by: str | None = None
) -> None:
    """Flag ``group`` excluded by the event of ``out``."""
    group.excluded = True
    group.reason = reason
    group.event_id = out.event_id
    group.excluded_at = out.now
    group.summarized_by = summarized_by
    out.reasons[group.group_id] = reason


def include(group: GroupRecord) -> None:
    """Re-include ``group`` and pin it."""
    group.excluded = False
    group.reason = None
    group.event_id = None
    group.excluded_at = None
    group.summarized_by = None
    group.pinned = True


# --- change sets -------------------------------------------------------------------


def summary_id_candidates(changes: ChangeSet, next_seq: int) -> list[str]:
    """Every message id :func:`apply_changes` may give the summaries of ``changes``.

    A store that holds only part of a session must know which of these are stored.
    """
    ids: list[str] = []
    for summary in changes.summaries:
        planned = summary.message.message_id
        ids.append(planned)
        ids.extend(
            _renamed(planned, seq) for seq in range(next_seq, next_seq + len(changes.summaries))
        )
    return ids


@dataclass
class _Renames:
    """Planned summary group and message ids, and the ids they were stored under."""

    groups: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)

    def group(self, group_id: str) -> str:
        return self.groups.get(group_id, group_id)


def apply_changes(session: SessionRecord, changes: ChangeSet, count: Counter, out: Outcome) -> None:
    """Apply ``changes`` to ``session`` (see the module docstring); ``out`` collects it."""
    renames = _Renames()
    for summary in changes.summaries:
        _apply_summary(session, summary, count, out, renames)
    for exclusion in changes.exclusions:
        _apply_exclusion(session, exclusion, out, renames)
    for reduction in changes.reductions:
        _apply_reduction(session, reduction, count, out, renames)


def _active(session: SessionRecord, group_id: str) -> GroupRecord | None:
    group = session.groups.get(group_id)
    return group if group is not None and not group.excluded else None


def _renamed(message_id: str, seq: int) -> str:
    return f"{message_id}@{seq}"


def _summary_message(session: SessionRecord, message: Message) -> Message:
    """``message``, under a fresh deterministic id when its own is already stored."""
    if message.message_id not in session.rows:
        return message
    fresh = _renamed(message.message_id, session.next_seq)
    if fresh in session.rows:
        raise InvalidInput(
            f"summary message ids {message.message_id!r} and {fresh!r} are both already "
            f"stored in session {session.session_id!r}"
        )
    return message.model_copy(update={"message_id": fresh})


def _apply_summary(
    session: SessionRecord,
    summary: SummaryInsert,
    count: Counter,
    out: Outcome,
    renames: _Renames,
) -> None:
    wanted = [renames.group(gid) for gid in summary.replaces]
    replaced = [g for gid in wanted if (g := _active(session, gid)) is not None]
    pinned = [g.group_id for g in replaced if g.pinned]
    if pinned:
        logger.warning("summary %s skips pinned groups %s", summary.group_id, pinned)
        replaced = [g for g in replaced if not g.pinned]
    if not replaced:
        return
    message = _summary_message(session, summary.message)
    group = session.insert_summary(message, replaced, count, out.now)
    if message.message_id != summary.message.message_id:
        logger.info(
            "summary id %s is already stored: stored as %s",
            summary.message.message_id,
            message.message_id,
        )
        renames.groups[summary.group_id] = group.group_id
        renames.messages[summary.message.message_id] = message.message_id
    for old in replaced:
        exclude(old, SUMMARIZED_REASON, out, summarized_by=group.group_id)
    out.summarized[group.group_id] = group.summary_of


def _apply_exclusion(
    session: SessionRecord, exclusion: Exclusion, out: Outcome, renames: _Renames
) -> None:
    group = _active(session, renames.group(exclusion.group_id))
    if group is None:
        return
    if group.pinned:
        logger.warning("exclusion of pinned group %s skipped", group.group_id)
        return
    exclude(group, exclusion.reason, out)
    out.excluded.append(group.group_id)


def _apply_reduction(
    session: SessionRecord, reduction: Reduction, count: Counter, out: Outcome, renames: _Renames
) -> None:
    group = _active(session, renames.group(reduction.group_id))
    message = reduction.message
    if message.message_id in renames.messages:
        message = message.model_copy(update={"message_id": renames.messages[message.message_id]})
    row = session.rows.get(message.message_id)
    if group is None or row is None or row.group_id != group.group_id:
        return
    row.reduced = as_stored(message)
    row.reduced_tokens = count(message)
    row.reduced_event = out.event_id
    if group.group_id not in out.reduced:
        out.reduced.append(group.group_id)


# --- restore -----------------------------------------------------------------------


def restore(
    session: SessionRecord,
    out: Outcome,
    *,
    group_ids: Iterable[str] = (),
    drop_summaries: Iterable[str] = (),
    drop_reductions_of: str | None = None,
) -> None:
    """Re-include ``group_ids``, exclude ``drop_summaries``, drop an event's reductions."""
    include_ids, exclude_ids, covered = _restore_plan(session, set(group_ids), set(drop_summaries))
    for group_id in sorted(include_ids - exclude_ids, key=lambda g: session.groups[g].order_key):
        group = session.groups[group_id]
        if group.excluded:
            include(group)
            out.restored.append(group_id)
    for group_id in sorted(exclude_ids, key=lambda g: session.groups[g].order_key):
        group = session.groups[group_id]
        by = covered.get(group_id)
        reason = RESTORED_REASON if by is None else SUMMARIZED_REASON
        if not group.excluded:
            exclude(group, reason, out, summarized_by=by)
            group.pinned = False
            out.excluded.append(group_id)
        elif (group.reason, group.summarized_by) != (reason, by) and (
            group.reason == RESTORED_REASON
            or (group.reason == SUMMARIZED_REASON and group.summarized_by in exclude_ids)
        ):
            # hidden before and still hidden, for another reason: the event that hid it
            # stays its event (undoing this one must not bring it back)
            group.reason, group.summarized_by = reason, by
            group.pinned = False
    if drop_reductions_of is not None:
        _drop_reductions(session, drop_reductions_of, out)


def _restore_plan(
    session: SessionRecord, targets: set[str], drop: set[str]
) -> tuple[set[str], set[str], dict[str, str]]:
    """The groups to re-include, those to exclude, and the summary that covers each
    excluded group a returning summary replaced (directly, or through a summary it
    hides). A group a summary names that a merge absorbed since is left out: its
    messages belong to the absorbing group, whose own state stands."""
    include_ids: set[str] = set()
    exclude_ids: set[str] = set()
    work = sorted(targets)

    def hide_summary(summary_id: str) -> None:
        # exclude the summary; restore all that it replaced; go on up the chain
        while summary_id not in exclude_ids:
            exclude_ids.add(summary_id)
            summary = session.groups[summary_id]
            work.extend(summary.summary_of)
            if summary.reason != SUMMARIZED_REASON or summary.summarized_by is None:
                return
            summary_id = summary.summarized_by

    for summary_id in sorted(drop):
        hide_summary(summary_id)
    while work:
        group = session.groups.get(work.pop())  # None: merged away since (see above)
        if group is None or group.group_id in include_ids or not group.excluded:
            continue
        include_ids.add(group.group_id)
        if group.reason == SUMMARIZED_REASON and group.summarized_by is not None:
            hide_summary(group.summarized_by)
    # a summary that comes back hides the groups it replaced, and those the hidden
    # summaries replaced, unless they were asked for
    covered: dict[str, str] = {}
    for group_id in sorted(include_ids - exclude_ids):
        group = session.groups[group_id]
        replaced = [(g, group_id) for g in group.summary_of] if group.kind == "summary" else []
        while replaced:
            hidden, by = replaced.pop()
            if hidden in include_ids | targets | exclude_ids or hidden not in session.groups:
                continue
            exclude_ids.add(hidden)
            covered[hidden] = by
            if session.groups[hidden].kind == "summary":
                replaced.extend((g, hidden) for g in session.groups[hidden].summary_of)
    return include_ids, exclude_ids, covered


def _drop_reductions(session: SessionRecord, event_id: str, out: Outcome) -> None:
    for row in session.rows.values():
        if row.reduced_event != event_id:
            continue
        row.reduced = None
        row.reduced_tokens = None
        row.reduced_event = None
        if row.group_id not in out.restored:
            out.restored.append(row.group_id)


def undo_event(session: SessionRecord, out: Outcome, event: CompactionEvent) -> None:
    """Restore what ``event`` did: re-include the groups it excluded (and those its
    summaries replaced), exclude the summaries it inserted, drop its reductions.

    ``session`` must hold every group the event excluded, and the rows it reduced.
    """
    targets = [g.group_id for g in session.groups.values() if g.excluded and g.event_id == event.id]
    restore(
        session,
        out,
        group_ids=targets,
        drop_summaries=list(event.summarized),
        drop_reductions_of=event.id,
    )


def check_restorable(event: CompactionEvent) -> None:
    """Refuse to restore an event that applied nothing (only ``applied`` ones can be), and
    a fork's first event (what a fork inherited is its history: delete the fork)."""
    if event.phase == "fork":
        raise InvalidInput(
            f"event {event.id!r} made the fork {event.session_id!r}: it cannot be restored "
            f"(delete the fork instead)"
        )
    if event.outcome != "applied":
        raise InvalidInput(
            f"event {event.id!r} is {event.outcome}: it changed nothing, so there is "
            f"nothing to restore"
        )


def check_groups(session: SessionRecord, group_ids: Iterable[str]) -> None:
    """Refuse group ids that ``session`` does not hold."""
    unknown = [g for g in group_ids if g not in session.groups]
    if unknown:
        raise InvalidInput(f"unknown group ids in session {session.session_id!r}: {unknown}")


def event_label(
    changes: ChangeSet, strategy: CompactionStrategy | None
) -> tuple[str, dict[str, Any]]:
    """The strategy name and parameters an event of ``changes`` records: the change
    set's own when it names them (a pipeline's step, an import), else the strategy's."""
    name = changes.strategy or (strategy.name if strategy is not None else "")
    params = changes.params or (strategy.params() if strategy is not None else {})
    return name, dict(params)
