"""The records of a session, and the rules of appending to them and reading them.

Everything here is synchronous and does no I/O. A :class:`SessionRecord` holds the
records of one session (messages, groups, events) and the annotation state that lets an
append go on without re-reading history, as the SQL tables do. The in-memory backend
keeps whole sessions of them; the SQL backend loads the few records a write can touch
into a partial one (:mod:`store.sql.compaction.mirror`) and applies the same rules
(:mod:`store.rules.changes`) to it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import JsonValue

from store.models import CompactionEvent, CompactionRequest, SessionInfo, StoredMessage
from store.rules.identity import dedupe, new_messages, stored_hash
from strategies.groups import AnnotationState, GroupKind, annotate, in_call_order
from strategies.messages import Message
from strategies.view import GroupView, InMemorySource, Totals, View

__all__ = [
    "Counter",
    "GroupRecord",
    "MessageRecord",
    "SessionRecord",
    "TailRecord",
    "as_stored",
    "now",
]

Counter = Callable[[Message], int]
"""Counts the tokens of one message (the store's tokenizer and policy)."""


def now() -> datetime:
    """The current time, timezone-aware (UTC): the clock of every backend."""
    return datetime.now(UTC)


def as_stored(message: Message) -> Message:
    """``message`` as every backend gives it back: ``created_at`` in UTC (a naive one
    taken as UTC), as the SQL columns hold it."""
    created = message.created_at
    if created is None or created.tzinfo is UTC:
        return message
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return message.model_copy(update={"created_at": created.astimezone(UTC)})


_row_keys = itertools.count(1)


def _new_row_key() -> int:
    return next(_row_keys)


@dataclass
class MessageRecord:
    """One stored message, with its order keys, group, counts and overlays."""

    message: Message
    seq: int
    anchor: int
    slot: int
    group_id: str
    tokens: int
    stored_at: datetime
    digest: str
    reduced: Message | None = None
    reduced_tokens: int | None = None
    reduced_event: str | None = None
    source_system: str | None = None
    source_id: str | None = None
    imported_at: datetime | None = None
    key: int = field(default_factory=_new_row_key)
    """The stored row's identity: a copy of the record (a branch holding the same row)
    keeps it, a message stored again under the same id gets a new one."""
    stored_by: str = ""
    """The session that appended the row ("" for a summary): copies keep it."""

    @property
    def effective(self) -> Message:
        """What the projection shows: the reduced version when there is one."""
        return self.reduced if self.reduced is not None else self.message

    @property
    def effective_tokens(self) -> int:
        """Tokens of :attr:`effective`."""
        return self.reduced_tokens if self.reduced_tokens is not None else self.tokens


@dataclass
class GroupRecord:
    """One group: the unit of compaction, with its exclusion state and summary links."""

    group_id: str
    kind: GroupKind
    turn: int
    anchor: int
    slot: int
    created_at: datetime
    message_ids: list[str] = field(default_factory=list)
    has_reasoning: bool = False
    pending_calls: int = 0
    orphan: bool = False
    pinned: bool = False
    excluded: bool = False
    reason: str | None = None
    event_id: str | None = None
    excluded_at: datetime | None = None
    summarized_by: str | None = None
    summary_of: tuple[str, ...] = ()

    @property
    def order_key(self) -> tuple[int, int]:
        """Where the group sits in the projection."""
        return (self.anchor, self.slot)


@dataclass(frozen=True)
class TailRecord:
    """A superseded tail of a session, as the session lists it (oldest first)."""

    session_id: str
    """The tail's id: its records are a session of that id, read-only."""
    to: str | None
    """The cut the session was rewound to (None: before its first message)."""
    event_id: str
    """The ``rewind`` (or ``restore``) event of the session that set it aside."""
    messages: int
    """The appended messages it set aside (those after ``to``)."""
    created_at: datetime


@dataclass
class SessionRecord:
    """All rows of one session (or of a superseded tail)."""

    tenant: str
    session_id: str
    tokenizer: str
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, JsonValue] = field(default_factory=dict)
    title: str | None = None
    rows: dict[str, MessageRecord] = field(default_factory=dict)
    """Stored messages by id, in ``seq`` order."""
    groups: dict[str, GroupRecord] = field(default_factory=dict)
    state: AnnotationState = field(default_factory=AnnotationState)
    next_seq: int = 1
    revision: int = 0
    events: list[CompactionEvent] = field(default_factory=list)
    parent_session_id: str | None = None
    """The session this one was forked from (None for a root, or once it is deleted)."""
    fork_message_id: str | None = None
    """The last message this session took from its parent."""
    tail_of: str | None = None
    """For a superseded tail, the session it belongs to; None for a session."""
    tails: list[TailRecord] = field(default_factory=list)
    """The session's superseded tails, oldest first."""
    request: CompactionRequest | None = None
    """Compaction asked for and not yet run (in memory; SQL keeps it in the session row)."""

    def clone(self) -> SessionRecord:
        """An independent copy (rows and groups copied; messages are immutable)."""
        return replace(
            self,
            metadata=dict(self.metadata),
            rows={k: replace(r) for k, r in self.rows.items()},
            groups={k: replace(g, message_ids=list(g.message_ids)) for k, g in self.groups.items()},
            events=list(self.events),
            tails=list(self.tails),
        )

    def appended(self) -> list[MessageRecord]:
        """The appended messages (not summaries), in ``seq`` order."""
        return sorted((r for r in self.rows.values() if r.slot == 0), key=lambda r: r.seq)

    def touch(self, now: datetime) -> None:
        """Record a write: bump the revision and the update time."""
        self.revision += 1
        self.updated_at = now

    # --- appending -----------------------------------------------------------------

    def new_messages(self, messages: list[Message]) -> list[Message]:
        """The messages not stored yet (see :func:`~store.rules.identity.dedupe`, which
        refuses an id reused with other content)."""
        stored = {
            m.message_id: row.digest for m in messages if (row := self.rows.get(m.message_id))
        }
        dedupe(self.session_id, messages, stored)
        return new_messages(messages, stored)

    def append(
        self,
        messages: list[Message],
        count: Counter,
        now: datetime,
        *,
        source: tuple[str, dict[str, str]] | None = None,
    ) -> None:
        """Store ``messages`` (all new), annotating them incrementally."""
        if not messages:
            return
        annotation = annotate(messages, self.state, frozen=self._frozen())
        groups_of = dict(annotation.message_groups)
        for message in messages:
            seq = self._take_seq()
            row = MessageRecord(
                message=as_stored(message),
                seq=seq,
                anchor=seq,
                slot=0,
                group_id=groups_of[message.message_id],
                tokens=count(message),
                stored_at=now,
                digest=stored_hash(message),
                stored_by=self.session_id,
            )
            if source is not None:
                row.source_system = source[0]
                row.source_id = source[1].get(message.message_id)
                row.imported_at = now
            self.rows[message.message_id] = row
        created: set[str] = set()
        for group_id, info in annotation.groups.items():
            group = self.groups.get(group_id)
            if group is None:
                group = GroupRecord(group_id, info.kind, info.turn, 0, 0, now)
                self.groups[group_id] = group
                created.add(group_id)
            group.kind = info.kind
            group.turn = info.turn
            group.has_reasoning = info.has_reasoning
            group.pending_calls = info.pending_calls
            group.orphan = info.orphan
        self._merge_groups(annotation.merged)
        for message in messages:
            group = self.groups[groups_of[message.message_id]]
            group.message_ids.append(message.message_id)
            if group.group_id in created:  # placed at its first new message, for good
                created.discard(group.group_id)
                group.anchor = self.rows[message.message_id].anchor
        self.state = annotation.state
        self.touch(now)

    def _frozen(self) -> set[str]:
        """Groups holding early results that compaction excluded since: no call joins them."""
        return {
            gid
            for gid in self.state.waiting_groups
            if (group := self.groups.get(gid)) is None or group.excluded
        }

    def _merge_groups(self, merged: dict[str, str]) -> None:
        for absorbed_id, target_id in merged.items():
            absorbed = self.groups.pop(absorbed_id, None)
            if absorbed is None:
                continue
            target = self.groups[target_id]
            target.message_ids = sorted(
                [*target.message_ids, *absorbed.message_ids], key=lambda m: self.rows[m].seq
            )
            target.pinned = target.pinned or absorbed.pinned
            for message_id in absorbed.message_ids:
                self.rows[message_id].group_id = target_id

    def _take_seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def insert_summary(
        self, message: Message, replaced: list[GroupRecord], count: Counter, now: datetime
    ) -> GroupRecord:
        """Store ``message`` as a summary group placed where ``replaced[0]`` was."""
        first = min(replaced, key=lambda g: g.order_key)
        slot = 1 + max(g.slot for g in self.groups.values() if g.anchor == first.anchor)
        group_id = f"group_{message.message_id}"
        self.rows[message.message_id] = MessageRecord(
            message=as_stored(message),
            seq=self._take_seq(),
            anchor=first.anchor,
            slot=slot,
            group_id=group_id,
            tokens=count(message),
            stored_at=now,
            digest=stored_hash(message),
        )
        group = GroupRecord(
            group_id=group_id,
            kind="summary",
            turn=first.turn,
            anchor=first.anchor,
            slot=slot,
            created_at=now,
            message_ids=[message.message_id],
            summary_of=tuple(g.group_id for g in replaced),
        )
        self.groups[group_id] = group
        return group

    # --- reading -------------------------------------------------------------------

    def group_rows(self, group: GroupRecord) -> list[MessageRecord]:
        """The group's messages, in ``seq`` order (a joined early result after its call:
        :func:`~strategies.groups.in_call_order`)."""
        return in_call_order([self.rows[m] for m in group.message_ids], _message_of)

    def group_tokens(self, group: GroupRecord) -> int:
        """Tokens of the group as the projection shows it (reductions applied)."""
        return sum(r.effective_tokens for r in self.group_rows(group))

    def fingerprint(self, group: GroupRecord) -> tuple[int, int, bool, bool, int]:
        """What must not change in a group between a plan's snapshot and its apply: its
        messages, tokens (reductions applied), exclusion, pin and pending calls, as the
        SQL backend compares them (:func:`store.sql.compaction.compactor.fingerprint`)."""
        return (
            len(group.message_ids),
            self.group_tokens(group),
            group.excluded,
            group.pinned,
            group.pending_calls,
        )

    def active_groups(self) -> list[GroupRecord]:
        """The groups not excluded, in projection order."""
        return sorted((g for g in self.groups.values() if not g.excluded), key=_order)

    def totals(self) -> Totals:
        """Active messages, groups and tokens."""
        active = self.active_groups()
        return Totals(
            messages=sum(len(g.message_ids) for g in active),
            groups=len(active),
            tokens=sum(self.group_tokens(g) for g in active),
        )

    def view(self, **kwargs: Any) -> View:
        """The active view: what strategies plan on (``kwargs`` go to :class:`View`)."""
        groups = []
        members: dict[str, list[Message]] = {}
        excluded = Totals()
        for group in sorted(self.groups.values(), key=_order):
            rows = self.group_rows(group)
            tokens = sum(r.effective_tokens for r in rows)
            if group.excluded:
                excluded = Totals(
                    excluded.messages + len(rows), excluded.groups + 1, excluded.tokens + tokens
                )
                continue
            members[group.group_id] = [r.effective for r in rows]
            groups.append(_group_view(group, len(rows), tokens))
        return View(
            groups=tuple(groups), source=InMemorySource(members), excluded=excluded, **kwargs
        )

    def stored_message(self, row: MessageRecord) -> StoredMessage:
        """The public model of one stored message."""
        group = self.groups[row.group_id]
        return StoredMessage(
            session_id=self.session_id,
            tenant=self.tenant,
            seq=row.seq,
            anchor=row.anchor,
            slot=row.slot,
            message=row.message,
            group_id=row.group_id,
            kind=group.kind,
            token_count=row.tokens,
            excluded=group.excluded,
            excluded_reason=group.reason,
            excluded_event_id=group.event_id,
            reduced=row.reduced,
            reduced_token_count=row.reduced_tokens,
            reduced_event_id=row.reduced_event,
            stored_at=row.stored_at,
            source_system=row.source_system,
            source_id=row.source_id,
            imported_at=row.imported_at,
        )

    def info(self) -> SessionInfo:
        """The public model of the session, with its aggregates."""
        active = self.totals()
        return SessionInfo(
            session_id=self.session_id,
            tenant=self.tenant,
            created_at=self.created_at,
            updated_at=self.updated_at,
            tokenizer=self.tokenizer,
            revision=self.revision,
            metadata=dict(self.metadata),
            stored_messages=len(self.rows),
            stored_groups=len(self.groups),
            stored_tokens=sum(r.tokens for r in self.rows.values()),
            active_messages=active.messages,
            active_groups=active.groups,
            active_tokens=active.tokens,
            parent_session_id=self.parent_session_id,
            fork_message_id=self.fork_message_id,
            title=self.title,
        )


def _message_of(row: MessageRecord) -> Message:
    return row.message


def _order(group: GroupRecord) -> tuple[int, int]:
    return group.order_key


def _group_view(group: GroupRecord, messages: int, tokens: int) -> GroupView:
    return GroupView(
        group_id=group.group_id,
        kind=group.kind,
        turn=group.turn,
        anchor=group.anchor,
        slot=group.slot,
        message_count=messages,
        token_count=tokens,
        pinned=group.pinned,
        has_reasoning=group.has_reasoning,
        pending_calls=group.pending_calls,
        orphan=group.orphan,
        summary_of=group.summary_of,
    )
