"""What the store returns: frozen pydantic models, the same on every backend.

* :class:`StoredMessage`: a stored message with its place, group and compaction state.
* :class:`SessionInfo`: a session and its aggregates.
* :class:`Provenance`: where imported messages came from.
* :class:`CompactionEvent`: one audit row, written for every change set the store
  applies (``after_run`` and ``manual`` compactions, ``import`` of compacted history,
  ``restore``), with the counts before and after and the groups it touched, and for
  every compaction that did not apply (its :data:`EventOutcome`).
* :class:`CompactionRequest`: compaction asked for, which the session's next
  compaction runs.
* :class:`ExcludedGroup`: one group that the projection leaves out, and why.
* :class:`WhyResult`: whether one message is in the request context, and why (not).
* :class:`Stats`: stored versus active messages, groups and tokens.
* :class:`ImportResult`: what an import of already-compacted history did.
* :class:`PurgeReport` and :class:`RedactReport`: what a purge or a redaction erased.
* :class:`DoctorReport` and its :class:`Finding` items: what a check of the stored rows
  found and repaired; :class:`TenantInfo`: one tenant of a database and its totals
  (answers of the optional abilities of :mod:`store.contract`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from strategies.changeset import Diagnostic
from strategies.groups import GroupKind
from strategies.messages import Message
from strategies.requested import REQUEST_KEY

__all__ = [
    "COMPACT_PHASES",
    "OUTCOMES",
    "PHASES",
    "BranchInfo",
    "BranchRelation",
    "Check",
    "CompactionEvent",
    "CompactionRequest",
    "DoctorReport",
    "EventOutcome",
    "ExcludedGroup",
    "Finding",
    "ImportResult",
    "Phase",
    "Provenance",
    "PurgeReport",
    "RedactReport",
    "SearchHit",
    "SearchPage",
    "SessionInfo",
    "SessionOrder",
    "Stats",
    "StoredMessage",
    "TenantInfo",
    "WhyResult",
]

Phase = Literal["after_run", "manual", "import", "restore", "fork", "rewind"]
"""When a compaction event was applied; ``fork`` and ``rewind`` are the events of
:meth:`~store.contract.HistoryBackend.fork` and
:meth:`~store.contract.HistoryBackend.rewind` (``compact`` refuses them)."""

COMPACT_PHASES: tuple[Phase, ...] = ("after_run", "manual", "import", "restore")
"""The phases a compaction may be recorded under."""

BranchRelation = Literal["parent", "fork", "tail"]
"""How a branch relates to a session (see :class:`BranchInfo`)."""

PHASES: tuple[Phase, ...] = get_args(Phase)
"""Every phase, in the order of :data:`Phase`."""

EventOutcome = Literal["applied", "failed", "blocked", "abandoned"]
"""What became of a compaction: ``applied`` (its change set was written), ``failed`` (a
step of the strategy failed, e.g. the summarizer raised or returned nothing, and nothing
else changed), ``blocked`` (protected or pinned groups alone keep the session above the
budget, and nothing else changed), ``abandoned`` (the session changed under the plan
twice; nothing was applied). Only ``applied`` events change history or can be restored."""

OUTCOMES: tuple[EventOutcome, ...] = get_args(EventOutcome)
"""Every outcome, in the order of :data:`EventOutcome`."""

SessionOrder = Literal["id", "updated"]
"""How sessions are listed: by id, or by last update, newest first."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class CompactionEvent(BaseModel):
    """One compaction outcome: who did what to which groups, and what it saved.

    An ``applied`` event is a change set written (or a restore, or an import); the
    other outcomes record a compaction that changed nothing, with why (``diagnostics``),
    and have the same counts before and after."""

    model_config = _FROZEN

    id: str
    """The event's id (``evt_`` and 16 hex digits), unique in its session."""
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
    reasons: dict[str, str] = Field(default_factory=dict)
    """The exclusion reason of each group the event excluded, summarized ones included
    (``summarized``); empty for events recorded before reasons were kept."""
    outcome: EventOutcome = "applied"
    """What became of the compaction (see :data:`EventOutcome`)."""
    duration_seconds: float | None = None
    """Wall time of the compaction, plans and applies of every attempt included (None
    for restores, imports and events recorded before durations were kept)."""
    attempts: int = 1
    """How many times the change set was planned (2 after a conflict)."""
    summarizer: str | None = None
    """The summarizer that wrote the summaries, or failed to (qualified class name)."""
    summarizer_model: str | None = None
    """That summarizer's model, when it has one."""
    diagnostics: tuple[Diagnostic, ...] = ()
    """What the strategy reported it could not do (a ``failed`` or ``blocked`` event's
    reason; an ``applied`` event may carry some too, from steps that did not apply)."""

    @property
    def tokens_saved(self) -> int:
        """Active tokens before minus after (negative when a restore adds tokens)."""
        return self.tokens_before - self.tokens_after

    @property
    def reason(self) -> str | None:
        """Why compaction was asked for, when the event ran for a request
        (:meth:`~store.contract.HistoryBackend.request_compaction`: ``manual``,
        ``model_requested``, or a person's words); kept in ``params["request"]``."""
        request = self.params.get(REQUEST_KEY)
        value = request.get("reason") if isinstance(request, dict) else None
        return value if isinstance(value, str) else None

    @property
    def focus(self) -> str | None:
        """What the request asked the summary to keep, when it said."""
        request = self.params.get(REQUEST_KEY)
        value = request.get("focus") if isinstance(request, dict) else None
        return value if isinstance(value, str) else None


class CompactionRequest(BaseModel):
    """Compaction asked for and not yet run: the session's next compaction runs it,
    whatever its strategy's triggers say (see
    :meth:`~store.contract.HistoryBackend.request_compaction`)."""

    model_config = _FROZEN

    reason: str
    """Why (``manual``, ``model_requested``, or a person's words)."""
    focus: str | None = None
    """What the summary should keep, passed to a summarizer that accepts it."""
    requested_at: datetime
    """When it was asked for (a newer request replaces an older one)."""


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
    usage_calls: int = 0
    """Model calls recorded (:meth:`~store.contract.HistoryBackend.record_usage`)."""
    cache_read_tokens: int | None = None
    """The cache reads those calls reported (None: none reported the lane)."""
    cache_breaks: int = 0
    """Calls paired with a projection whose context did not begin with the previous
    call's (compaction changed what the provider had cached)."""

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


class Provenance(BaseModel):
    """Where imported messages came from: recorded on every message of an append."""

    model_config = ConfigDict(frozen=True)

    system: str
    """The source system (``openai_jsonl``, ``agent_framework``, ...)."""
    imported_at: datetime | None = None
    """When the import ran (now when None)."""
    source_ids: Mapping[str, str] = Field(default_factory=dict)
    """The source's own id of each message, by chatledger message id."""


class StoredMessage(BaseModel):
    """A stored message with its place in the session and its compaction state."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    tenant: str
    seq: int
    """Gapless 1-based position of the message in its session's storage order."""
    anchor: int
    """Projection order key (``seq`` for appended messages)."""
    slot: int
    """Secondary order key: 0 for appended messages, 1 or more for summaries."""
    message: Message
    """The message as it was stored."""
    group_id: str
    kind: GroupKind
    """Kind of the message's group."""
    token_count: int
    """Tokens of the stored message (the session's tokenizer)."""
    excluded: bool = False
    """Whether compaction left the message out of the context."""
    excluded_reason: str | None = None
    excluded_event_id: str | None = None
    reduced: Message | None = None
    """The reduced version the projection shows instead, when a reduction applies."""
    reduced_token_count: int | None = None
    reduced_event_id: str | None = None
    stored_at: datetime
    source_system: str | None = None
    source_id: str | None = None
    imported_at: datetime | None = None

    @property
    def message_id(self) -> str:
        """The message's id."""
        return self.message.message_id

    @property
    def role(self) -> str:
        """The message's role."""
        return self.message.role


class SessionInfo(BaseModel):
    """A session and its aggregates."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    tenant: str
    created_at: datetime
    updated_at: datetime
    tokenizer: str
    """Name of the tokenizer the session's token counts were made with."""
    revision: int
    """Bumped on every write to the session."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    stored_messages: int = 0
    stored_groups: int = 0
    stored_tokens: int = 0
    active_messages: int = 0
    active_groups: int = 0
    active_tokens: int = 0
    parent_session_id: str | None = None
    """The session this one was forked from; None for a root."""
    fork_message_id: str | None = None
    """The last message this session took from its parent; None for a root."""
    title: str | None = None
    """The session's title: set by :meth:`~store.contract.HistoryBackend.set_title`, or
    by an import whose source names its conversations; None when it has none."""


class BranchInfo(BaseModel):
    """A branch related to a session (:meth:`~store.contract.HistoryBackend.branches`).

    ``relation`` is ``parent`` (the session this one was forked from, at
    ``fork_message_id``), ``fork`` (a session forked from this one at
    ``fork_message_id``) or ``tail`` (messages a rewind of this session to
    ``fork_message_id`` superseded: kept under ``session_id``, readable, brought back by
    ``restore(session, event_id=event_id)``). ``event_id`` is the ``fork`` event in the
    fork's audit, or the ``rewind`` (or ``restore``) event in this session's audit that
    set the tail aside. ``messages`` is how many messages the branch's history holds
    (for a tail: the superseded messages).
    """

    model_config = _FROZEN

    session_id: str
    relation: BranchRelation
    fork_message_id: str | None
    event_id: str | None
    messages: int
    created_at: datetime


class PurgeReport(BaseModel):
    """What a purge removed (or, with ``dry_run``, would remove)."""

    model_config = _FROZEN

    tenant: str
    older_than: datetime
    """Sessions last updated before this instant were removed."""
    dry_run: bool
    sessions: tuple[str, ...]
    """The removed sessions' ids, in id order."""
    messages: int
    """Stored messages removed with them (summaries included)."""
    groups: int
    events: int
    """Audit events removed with them."""
    kept_messages: int = 0
    """Stored messages of the removed sessions kept because their forks still read them
    (unlisted, erased with the last branch that reads them)."""
    usage_calls: int = 0
    """Recorded model calls removed: the removed sessions', and those of sessions never
    stored whose calls were all recorded before the cutoff."""


class RedactReport(BaseModel):
    """What a redaction replaced by tombstones."""

    model_config = _FROZEN

    session_id: str
    tenant: str
    reason: str
    redacted: tuple[str, ...]
    """The messages replaced by their tombstones (already redacted ones left out)."""
    summaries: tuple[str, ...] = ()
    """Summary messages redacted because they covered a redacted message."""
    reductions_cleared: tuple[str, ...] = ()
    """Messages whose reduced version was dropped."""
    leftovers: tuple[str, ...] = ()
    """Messages redacted before whose leftovers this redaction erased: a content hash an
    older release kept in the row, a quarantine copy in a ``doctor`` event."""
    complete: bool = True
    """False when the text may still be in the database's files: a write-ahead log that
    another connection was reading could not be truncated (SQLite). Run the redaction
    again, or ``doctor --fix``, when nothing else reads."""
    tokens_before: int
    """Stored tokens of the session before the redaction."""
    tokens_after: int
    event: CompactionEvent | None = None
    """The audit event (strategy ``redact``), None when nothing changed."""


class SearchHit(BaseModel):
    """A stored message that matches a search
    (:meth:`~store.contract.HistoryBackend.search`)."""

    model_config = _FROZEN

    session_id: str
    """The session searched (scoped search), or the session that stored the message
    (tenant-wide search: a message shared by branches is one hit)."""
    message_id: str
    seq: int
    role: str
    group_id: str
    excluded: bool
    """Whether the message is excluded from the session's context now."""
    excluded_by: str | None
    """The audit event that excluded it (None when it is not excluded)."""
    snippet: str
    """A bounded excerpt of what the model sees of the message, around its matches."""
    highlights: tuple[tuple[int, int], ...]
    """``(start, end)`` offsets of the matches in ``snippet``."""
    score: float
    """Higher is better; comparable within one search only."""
    created_at: datetime | None


class SearchPage(BaseModel):
    """A page of search hits, best first (ties newest first)."""

    model_config = _FROZEN

    hits: list[SearchHit]
    next_cursor: str | None = None
    """Pass it as ``cursor`` for the next page; None on the last page."""


Check = Literal[
    "unparsable_row",
    "orphan_result",
    "stale_call",
    "duplicate_call_id",
    "audit_mismatch",
    "totals_mismatch",
    "half_imported",
    "redaction_residue",
    "erasure_pending",
]
"""What a doctor's finding is about (each check is described in
:mod:`store.sql.upkeep.doctor`)."""


class Finding(BaseModel):
    """One problem found in one session."""

    model_config = _FROZEN

    session_id: str
    check: Check
    detail: str
    """One sentence for people."""
    seq: int | None = None
    """The message row concerned, if one."""
    group_id: str | None = None
    """The group concerned, if one."""
    fixable: bool
    """Whether ``--fix`` repairs it."""
    fixed: bool = False
    """Whether this run repaired it."""
    event_id: str | None = None
    """The audit event of the repair."""


class DoctorReport(BaseModel):
    """What ``doctor`` found (and, with ``fix``, repaired)."""

    model_config = _FROZEN

    tenant: str
    sessions: int
    """Sessions checked."""
    fix: bool
    findings: tuple[Finding, ...] = ()

    @property
    def healthy(self) -> bool:
        """Whether nothing is left to repair (what cannot be repaired counts)."""
        return all(f.fixed for f in self.findings)


class TenantInfo(BaseModel):
    """One tenant of a database and its totals."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    sessions: int
    stored_messages: int
    stored_tokens: int
    updated_at: datetime
    """When the tenant's most recently updated session was updated."""
