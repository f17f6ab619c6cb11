"""Why a stored message is, or is not, in the context built without a strategy.

Each backend gathers the facts of the message's group (:class:`GroupFacts`) its own way;
the decision and the sentences people read are made here, once:

1. an excluded group: its exclusion reason and event, and the summary replacing it;
2. a group no projection sends: an orphan result (it answers no stored call), or a
   stale pending call (a call never answered before a later user message);
3. a reduced message: sent in the reduced form its event set;
4. otherwise: sent as stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.errors import InvalidInput
from store.models import WhyResult

__all__ = ["GroupFacts", "explain", "not_stored"]


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """What :func:`explain` needs to know of a message's group."""

    group_id: str
    excluded: bool
    reason: str | None
    """The exclusion reason, when excluded."""
    event_id: str | None
    """The excluding event, when excluded."""
    summarized_by: str | None
    """The summary group that replaced it, when summarized."""
    orphan: bool
    """A tool result that answers no stored call."""
    stale: bool
    """A pending call with a later user message (never sent again)."""


def explain(message_id: str, group: GroupFacts, *, reduced_by: str | None) -> WhyResult:
    """The :class:`~store.models.WhyResult` of ``message_id`` in ``group``; ``reduced_by``
    is the event whose reduced form of the message is sent, if any."""
    base = {"message_id": message_id, "group_id": group.group_id}
    if group.excluded:
        text = f"its group {group.group_id} was excluded ({group.reason}) by event {group.event_id}"
        if group.summarized_by is not None:
            text += f"; summary {group.summarized_by} replaces it"
        return WhyResult(
            **base,
            in_context=False,
            reason=group.reason,
            event_id=group.event_id,
            summary_group_id=group.summarized_by,
            explanation=text,
        )
    if group.orphan or group.stale:
        reason = "orphan_result" if group.orphan else "stale_pending_call"
        text = (
            "it is a tool result that answers no stored call"
            if group.orphan
            else "its group holds a call that was never answered before a later user message"
        )
        return WhyResult(**base, in_context=False, reason=reason, explanation=text)
    if reduced_by is not None:
        return WhyResult(
            **base,
            in_context=True,
            reason="reduced",
            event_id=reduced_by,
            explanation=f"it is sent in the reduced form set by event {reduced_by}",
        )
    return WhyResult(**base, in_context=True, explanation="it is sent as stored")


def not_stored(message_id: str, session_id: str) -> InvalidInput:
    """The error for a ``why`` of a message the session does not hold."""
    return InvalidInput(f"message {message_id!r} is not stored in session {session_id!r}")
