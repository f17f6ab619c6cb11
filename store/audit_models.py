"""Result models of compaction, audit and restore (frozen pydantic models).

* :class:`CompactionEvent`: one audit row, written for every change set the store
  applies (``after_run`` and ``manual`` compactions, ``import`` of compacted history,
  ``restore``), with the counts before and after and the groups it touched.
* :class:`ExcludedGroup`: one group that the projection leaves out, and why.
* :class:`WhyResult`: whether one message is in the request context, and why (not).
* :class:`Stats`: stored versus active messages, groups and tokens.
* :class:`ImportResult`: what an import of already-compacted history did.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CompactionEvent",
    "ExcludedGroup",
    "ImportResult",
    "Phase",
    "Stats",
    "WhyResult",
]

Phase = Literal["after_run", "manual", "import", "restore"]
"""When a compaction event was applied."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class CompactionEvent(BaseModel):
    """One applied change set: who did what to which groups, and what it saved."""

    model_config = _FROZEN

    id: str
    """The event's id, unique in the store."""
    session_id: str
    tenant: str
    phase: Phase
    strategy: str
    """Name of the strategy (``restore`` for restores, ``import:<source>`` for imports)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """The strategy's parameters, JSON-serializable."""
    messages_before: int
    """Active messages before the event."""
    messages_after: int
    groups_before: int
    """Active groups before the event."""
    groups_after: int
    tokens_before: int
    """Active tokens (reductions applied) before the event."""
    tokens_after: int
    created_at: datetime
    excluded: tuple[str, ...] = ()
    """Groups the event excluded (not counting those replaced by its summaries)."""
    summarized: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Summary group inserted by the event, to the ids of the groups it replaced."""
    reduced: tuple[str, ...] = ()
    """Groups whose messages the event reduced."""
    restored: tuple[str, ...] = ()
    """Groups the event re-included, or whose reductions it dropped (``restore`` only)."""

    @property
    def tokens_saved(self) -> int:
        """Active tokens before minus after (negative when a restore adds tokens)."""
        return self.tokens_before - self.tokens_after


class ExcludedGroup(BaseModel):
    """A group the projection leaves out, with the reason and the event that set it."""

    model_config = _FROZEN

    group_id: str
    kind: str
    message_count: int
    tokens: int
    reason: str | None
    event_id: str | None
    summary_group_id: str | None = None
    """The summary that replaced the group, when it was summarized."""
    excluded_at: datetime | None = None
    """When the excluding event was applied."""


class WhyResult(BaseModel):
    """Whether a stored message is sent to the model (without a strategy), and why."""

    model_config = _FROZEN

    message_id: str
    in_context: bool
    reason: str | None = None
    """The group's exclusion reason (``summarized``, ``restored``, ``truncation``...);
    ``orphan_result`` or ``stale_pending_call`` for a message left out of every projection
    without being excluded; ``reduced`` for one sent in its reduced form; ``None`` when the
    message is sent as stored."""
    group_id: str
    event_id: str | None = None
    """The event that excluded (or reduced) the message, if any."""
    summary_group_id: str | None = None
    """The summary that replaced the message's group, if any."""
    explanation: str
    """One sentence for people."""


class Stats(BaseModel):
    """Stored versus active counts, for one session or for the whole tenant."""

    model_config = _FROZEN

    tenant: str
    session_id: str | None = None
    """The session, or ``None`` for the tenant's totals."""
    sessions: int
    stored_messages: int
    """Every stored message, summaries and excluded ones included."""
    stored_groups: int
    stored_tokens: int
    """Token counts of the stored messages as written (reductions not applied)."""
    active_messages: int
    """Messages of the active (not excluded) groups."""
    active_groups: int
    active_tokens: int
    """Tokens of the active groups, reductions applied."""
    events: int
    """Compaction events recorded."""

    @property
    def excluded_messages(self) -> int:
        """Stored messages not in an active group."""
        return self.stored_messages - self.active_messages


class ImportResult(BaseModel):
    """What importing already-compacted history did."""

    model_config = _FROZEN

    message_ids: tuple[str, ...]
    """The stored message ids, in input order (imported summaries included)."""
    event: CompactionEvent | None = None
    """The ``import`` event recording the imported exclusions and summaries, if any."""
