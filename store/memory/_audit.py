"""Audit reads over in-memory sessions: events, excluded groups, why, stats."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from store.audit_models import CompactionEvent, ExcludedGroup, Phase, Stats, WhyResult
from store.errors import InvalidInput
from store.memory._state import SessionData

__all__ = ["excluded_groups", "filter_events", "stats", "why"]


def filter_events(
    sessions: Iterable[SessionData],
    *,
    since: datetime | None,
    strategy: str | None,
    phase: Phase | None,
    limit: int | None,
) -> list[CompactionEvent]:
    """Events of ``sessions`` matching the filters, newest first, at most ``limit``."""
    found = [
        (event, number)
        for session in sessions
        for number, event in enumerate(session.events, start=1)
        if (since is None or event.created_at >= since)
        and (strategy is None or event.strategy == strategy)
        and (phase is None or event.phase == phase)
    ]
    found.sort(key=lambda item: (item[0].created_at, item[0].session_id, item[1]), reverse=True)
    events = [event for event, _ in found]
    return events if limit is None else events[: max(limit, 0)]


def excluded_groups(session: SessionData) -> list[ExcludedGroup]:
    """The session's excluded groups, in projection order."""
    out = []
    for group in sorted(session.groups.values(), key=lambda g: g.order_key):
        if not group.excluded:
            continue
        out.append(
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
        )
    return out


def why(session: SessionData, message_id: str) -> WhyResult:
    """Whether ``message_id`` is in the context built without a strategy, and why."""
    row = session.rows.get(message_id)
    if row is None:
        raise InvalidInput(
            f"message {message_id!r} is not stored in session {session.session_id!r}"
        )
    group = session.groups[row.group_id]
    base = {"message_id": message_id, "group_id": group.group_id}
    if group.excluded:
        summary = group.summarized_by
        text = f"its group {group.group_id} was excluded ({group.reason}) by event {group.event_id}"
        if summary is not None:
            text += f"; summary {summary} replaces it"
        return WhyResult(
            **base,
            in_context=False,
            reason=group.reason,
            event_id=group.event_id,
            summary_group_id=summary,
            explanation=text,
        )
    sendable = {g.group_id for g in session.view().sendable()}
    if group.group_id not in sendable:
        reason = "orphan_result" if group.orphan else "stale_pending_call"
        text = (
            "it is a tool result that answers no stored call"
            if group.orphan
            else "its group holds a call that was never answered before a later user message"
        )
        return WhyResult(**base, in_context=False, reason=reason, explanation=text)
    if row.reduced is not None:
        return WhyResult(
            **base,
            in_context=True,
            reason="reduced",
            event_id=row.reduced_event,
            explanation=f"it is sent in the reduced form set by event {row.reduced_event}",
        )
    return WhyResult(**base, in_context=True, explanation="it is sent as stored")


def stats(tenant: str, session_id: str | None, sessions: list[SessionData]) -> Stats:
    """Stored versus active counts over ``sessions``."""
    stored_messages = stored_groups = stored_tokens = 0
    active_messages = active_groups = active_tokens = events = 0
    for session in sessions:
        stored_messages += len(session.rows)
        stored_groups += len(session.groups)
        stored_tokens += sum(r.tokens for r in session.rows.values())
        totals = session.totals()
        active_messages += totals.messages
        active_groups += totals.groups
        active_tokens += totals.tokens
        events += len(session.events)
    return Stats(
        tenant=tenant,
        session_id=session_id,
        sessions=len(sessions),
        stored_messages=stored_messages,
        stored_groups=stored_groups,
        stored_tokens=stored_tokens,
        active_messages=active_messages,
        active_groups=active_groups,
        active_tokens=active_tokens,
        events=events,
    )
