"""The SQL schema: every table and index is prefixed ``chatledger_``.

Alembic alone creates and changes these tables (``migrations/``); this module is the
model the migrations are checked against (a drift test compares them), and it holds the
typed handles of the tables (:data:`SESSIONS`, :data:`MESSAGES`, ...) that every
statement of the SQL backend is built from.

Every table's key starts with ``(tenant, session_id)``, so that a distributed PostgreSQL
can shard by session without a schema change. Enums are not native (a string column
with a CHECK constraint), so the schema shares a database with other applications.

* ``chatledger_sessions``: one row per session, with the annotation state that lets an
  append go on without reading history (``position``, ``turn``, the tail group), the
  ``revision`` bumped on every write (optimistic apply of change sets), and aggregates.
* ``chatledger_messages``: every stored message, keyed by ``seq`` (gapless per session),
  ordered in projections by ``(anchor, slot)``; exclusion and reduction overlay columns.
* ``chatledger_groups``: one row per group (the unit of compaction), with totals,
  exclusion and summary links.
* ``chatledger_open_calls``: unanswered calls, so that a late result finds its call by
  ``call_id`` without scanning history.
* ``chatledger_early_results``: results stored before any call with their ``call_id``,
  so that the call, when it arrives, finds the orphan group to join without a scan.
* ``chatledger_lineage`` and ``chatledger_branch_rows``: what a fork reads of the rows
  other sessions store, and its own state of them (``docs/branches.md``).
* ``chatledger_events`` and ``chatledger_event_groups``: the compaction audit (every
  outcome: applied change sets, and compactions that failed, were blocked or abandoned).
* ``chatledger_schema_revisions``: bookkeeping of the migrations (like Alembic's version
  table, not a session's data): each applied revision, its parent and whether it is
  backward-compatible.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Enum,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    TypeDecorator,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeEngine

from store.models import PHASES
from store.sql.dialect import capabilities
from strategies.groups import GROUP_KINDS

__all__ = [
    "BRANCH_ROWS",
    "EARLY_RESULTS",
    "EVENTS",
    "EVENT_ACTIONS",
    "EVENT_GROUPS",
    "EVENT_PHASES",
    "FIRST_SEQ",
    "GROUPS",
    "KEYS",
    "KEY_EVENTS",
    "LINEAGE",
    "MESSAGES",
    "OPEN_CALLS",
    "SCHEMA_REVISIONS",
    "SESSIONS",
    "SESSION_CHILD_TABLES",
    "SETTINGS",
    "TABLE_PREFIX",
    "TENANT_KEYS",
    "USAGE",
    "Base",
    "BranchRowRow",
    "EarlyResultRow",
    "EventGroupRow",
    "EventRow",
    "GroupRow",
    "LineageRow",
    "MessageRow",
    "OpenCallRow",
    "SchemaRevisionRow",
    "SessionRow",
    "SettingRow",
    "UTCDateTime",
    "UsageRow",
    "metadata",
]

FIRST_SEQ = 1
"""The ``seq`` of a session's first stored message."""

TABLE_PREFIX = "chatledger_"

EVENT_PHASES: tuple[str, ...] = PHASES
"""When a compaction event was applied."""

EVENT_ACTIONS: tuple[str, ...] = (
    "excluded",
    "summarized",
    "summary_inserted",
    "reduced",
    "restored",
    "included",
)
"""What an event did to a group."""

NAMING_CONVENTION: dict[str, str] = {
    "ix": "%(table_name)s_%(column_0_N_name)s_idx",
    "uq": "%(table_name)s_%(column_0_N_name)s_key",
    "ck": "%(table_name)s_%(constraint_name)s_check",
    "fk": "%(table_name)s_%(referred_table_name)s_fkey",
    "pk": "%(table_name)s_pkey",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)
"""The chatledger tables' metadata (constraint names follow :data:`NAMING_CONVENTION`)."""

JSONType: TypeEngine[Any] = JSON()
"""Plain ``json`` on PostgreSQL, not ``jsonb``: ``jsonb`` (like ``text``) cannot hold the
NUL character (``\\u0000``), which chat contents may carry and which must round-trip."""
KEY = String(255)
_SESSION_FK = ("tenant", "session_id")


class LenientJSON(TypeDecorator[Any]):
    """JSON that reads back even when the stored text is not JSON (SQLite keeps any text
    in a JSON column): such a value comes back as the raw text, for the reader to refuse
    with a :class:`~store.errors.CorruptRowError` naming its row, so that one damaged
    column fails the reads that need it and nothing else."""

    impl = JSON
    cache_ok = True

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any] | None:
        decode = self.impl_instance.result_processor(dialect, coltype)
        if decode is None:
            return None

        def process(value: Any) -> Any:
            try:
                return decode(value)
            except ValueError:  # not JSON: handed on as stored
                return value

        return process


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware timestamp, stored in UTC and always read back aware (UTC).

    SQLite keeps no offset: values are normalized to UTC before they are written.
    Naive values are taken to be UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if capabilities(dialect).naive_timestamps else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _enum(values: tuple[str, ...], name: str) -> Enum:
    return Enum(
        *values,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=32,
        validate_strings=True,
    )


class Base(DeclarativeBase):
    """Declarative base of the chatledger tables."""

    metadata = metadata


def _session_fk() -> ForeignKeyConstraint:
    return ForeignKeyConstraint(
        list(_SESSION_FK),
        ["chatledger_sessions.tenant", "chatledger_sessions.session_id"],
        ondelete="CASCADE",
    )


class SessionRow(Base):
    """One session: identity, annotation state, revision and aggregates."""

    __tablename__ = "chatledger_sessions"
    __table_args__ = (
        Index("chatledger_sessions_updated_idx", "tenant", "updated_at"),
        Index("chatledger_sessions_recent_idx", "tenant", "updated_at", "session_id"),
        Index("chatledger_sessions_parent_idx", "tenant", "parent_session_id"),
    )

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    incarnation: Mapped[str | None] = mapped_column(String(32))
    """A random token drawn when the row is created, never repeated: a session deleted
    and recreated is another incarnation even within one clock tick. None for a row
    created by a release that predates it (such a session is never cached)."""
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", LenientJSON())
    title: Mapped[str | None] = mapped_column(Text)
    """The session's title (at most 500 characters, checked before it is written)."""
    tokenizer: Mapped[str] = mapped_column(String(128))
    revision: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    chain_since: Mapped[int | None] = mapped_column(BigInteger)
    """With :attr:`chain_revision`: every write from revision ``chain_since`` to
    ``chain_revision`` left each group's messages as they were unless it changed the
    group's row (an append, a compaction without reductions). A view cached at a
    revision within it catches up by reading the group rows alone, when
    ``chain_revision`` is the session's revision (any other write breaks the chain)."""
    chain_revision: Mapped[int | None] = mapped_column(BigInteger)
    """The revision the last write of the chain made (see :attr:`chain_since`)."""
    next_seq: Mapped[int] = mapped_column(BigInteger, server_default=text(str(FIRST_SEQ)))
    """The ``seq`` the next stored message takes: still :data:`FIRST_SEQ` while the
    session has never stored a message (nor, so, a group or an open call)."""
    position: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    """Appended (annotated) messages so far; summaries are not counted."""
    turn: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    tail_group_id: Mapped[str | None] = mapped_column(KEY)
    tail_mode: Mapped[str | None] = mapped_column(_enum(("reasoning", "calls"), "tail_mode"))
    branch: Mapped[str | None] = mapped_column(String(16))
    """None for a root; ``fork``, ``tail`` (a rewind's superseded tail, read-only), or
    ``kept`` (a deleted session's rows its forks still read: listed nowhere)."""
    parent_session_id: Mapped[str | None] = mapped_column(KEY)
    """The session a fork was forked from (a tail: the session it was rewound from)."""
    fork_message_id: Mapped[str | None] = mapped_column(KEY)
    """The last message a fork took from its parent (a tail: the rewind's ``to``)."""
    branch_event_id: Mapped[str | None] = mapped_column(String(64))
    """A fork's ``fork`` event; a tail's ``rewind`` (or ``restore``) event, in its
    parent's audit."""
    lineage_version: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    """Bumped whenever the session's ``chatledger_lineage`` rows change (after the fork
    that wrote them): a process keeps a fork's lineage while it stays the same."""
    shared: Mapped[bool] = mapped_column(Boolean, server_default=false())
    """Whether another branch reads rows this session stores (set by a fork, never
    cleared): only then does a write to the state of its rows look for those branches."""
    compaction_request: Mapped[str | None] = mapped_column(Text)
    """The compaction asked for and not yet run, as JSON text (see
    :func:`store.sql.sessions.compaction_request_of`); null when none waits."""
    event_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    stored_messages: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    stored_groups: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    stored_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    active_messages: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    active_groups: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    active_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))


class LineageRow(Base):
    """A fork reads the rows another session stores, up to a ``seq``: one row per
    session whose rows it reads (its parent's, and theirs)."""

    __tablename__ = "chatledger_lineage"
    __table_args__ = (
        _session_fk(),
        Index("chatledger_lineage_owner_idx", "tenant", "owner_session_id"),
    )

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    """The reading branch."""
    owner_session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    """The session that stores the rows."""
    through_seq: Mapped[int] = mapped_column(BigInteger)
    """The highest ``seq`` of the owner's rows the branch reads."""


class BranchRowRow(Base):
    """A branch's own state of a row another session stores, where it differs from the
    row's: its group (after a merge) and its reduction. ``member`` marks a row the
    branch holds beyond its lineage's ``through_seq`` (a summary stored after the cut)."""

    __tablename__ = "chatledger_branch_rows"
    __table_args__ = (
        _session_fk(),
        Index("chatledger_branch_rows_group_idx", "tenant", "session_id", "group_id"),
        Index("chatledger_branch_rows_owner_idx", "tenant", "owner_session_id", "seq"),
    )

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    owner_session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    group_id: Mapped[str] = mapped_column(KEY)
    reduced_contents: Mapped[Any | None] = mapped_column(JSONType)
    reduced_token_count: Mapped[int | None] = mapped_column(Integer)
    reduced_event_id: Mapped[str | None] = mapped_column(String(64))
    member: Mapped[bool] = mapped_column(Boolean, server_default=false())


class MessageRow(Base):
    """One stored message (never deleted by compaction)."""

    __tablename__ = "chatledger_messages"
    __table_args__ = (
        _session_fk(),
        Index(
            "chatledger_messages_message_id_key",
            "tenant",
            "session_id",
            "message_id",
            unique=True,
        ),
        Index(
            "chatledger_messages_active_idx", "tenant", "session_id", "excluded", "anchor", "slot"
        ),
        Index("chatledger_messages_group_idx", "tenant", "session_id", "group_id", "seq"),
        Index("chatledger_messages_locate_idx", "tenant", "message_id"),
    )

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    anchor: Mapped[int] = mapped_column(BigInteger)
    slot: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    message_id: Mapped[str] = mapped_column(KEY)
    role: Mapped[str] = mapped_column(String(64))
    contents: Mapped[Any] = mapped_column(JSONType)
    author_name: Mapped[str | None] = mapped_column(String(255).with_variant(Text(), "postgresql"))
    """Text on PostgreSQL since 0014 (a sealed name is longer than the name); SQLite
    never enforced the length."""
    created_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the message was written, as its source says."""
    stored_at: Mapped[datetime] = mapped_column(UTCDateTime())
    meta: Mapped[Any] = mapped_column("metadata", JSONType)
    content_hash: Mapped[str] = mapped_column(String(64))
    group_id: Mapped[str] = mapped_column(KEY)
    token_count: Mapped[int] = mapped_column(Integer)
    excluded: Mapped[bool] = mapped_column(Boolean, server_default=false())
    excluded_reason: Mapped[str | None] = mapped_column(Text)
    excluded_event_id: Mapped[str | None] = mapped_column(String(64))
    reduced_contents: Mapped[Any | None] = mapped_column(JSONType)
    reduced_token_count: Mapped[int | None] = mapped_column(Integer)
    reduced_event_id: Mapped[str | None] = mapped_column(String(64))
    source_system: Mapped[str | None] = mapped_column(String(64))
    source_id: Mapped[str | None] = mapped_column(String(255))
    imported_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    format_version: Mapped[int] = mapped_column(SmallInteger, server_default=text("1"))
    """The version of the stored JSON (``contents``, ``metadata``, ``reduced_contents``);
    rows written before versions were recorded are version 1."""
    group_kind: Mapped[str | None] = mapped_column(String(32))
    """The kind of the message's group when the message alone settles it (see
    :func:`settled_kind`); None otherwise, and in rows written before the column
    existed: a read then looks the group up."""
    search_text: Mapped[str | None] = mapped_column(Text)
    """What the model sees of the message, normalized for full-text search
    (:func:`store.search.indexable_text`); None when it is not searchable: a
    redacted message, a recall result, a row written with search off or by a release
    without search."""


class GroupRow(Base):
    """One group of messages: the unit of compaction."""

    __tablename__ = "chatledger_groups"
    __table_args__ = (
        _session_fk(),
        Index("chatledger_groups_active_idx", "tenant", "session_id", "excluded", "anchor", "slot"),
        Index("chatledger_groups_summarized_by_idx", "tenant", "session_id", "summarized_by"),
        Index("chatledger_groups_written_idx", "tenant", "session_id", "written_revision"),
    )

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    group_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    kind: Mapped[str] = mapped_column(_enum(GROUP_KINDS, "group_kind"))
    turn: Mapped[int] = mapped_column(Integer)
    anchor: Mapped[int] = mapped_column(BigInteger)
    slot: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    first_seq: Mapped[int] = mapped_column(BigInteger)
    first_position: Mapped[int] = mapped_column(BigInteger)
    """Annotation position of the first message (-1 for summaries)."""
    message_count: Mapped[int] = mapped_column(Integer)
    token_count: Mapped[int] = mapped_column(BigInteger)
    pinned: Mapped[bool] = mapped_column(Boolean, server_default=false())
    has_reasoning: Mapped[bool] = mapped_column(Boolean, server_default=false())
    pending_calls: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    orphan: Mapped[bool] = mapped_column(Boolean, server_default=false())
    excluded: Mapped[bool] = mapped_column(Boolean, server_default=false())
    excluded_reason: Mapped[str | None] = mapped_column(Text)
    excluded_event_id: Mapped[str | None] = mapped_column(String(64))
    summarized_by: Mapped[str | None] = mapped_column(KEY)
    """For a group replaced by a summary: the summary group's id."""
    summary_of: Mapped[Any | None] = mapped_column(JSONType)
    """For a summary group: the ids of the groups it replaced, in order."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    written_revision: Mapped[int | None] = mapped_column(BigInteger)
    """The session's revision that last wrote the row, set by every write of the
    session's write chain (appends and compactions without reductions, see
    :attr:`SessionRow.chain_since`); other writes may leave it as it was, as they break
    the chain. A store whose cache holds the rows as of revision ``r`` reads only the
    rows written after ``r`` when the chain reaches the session's revision from ``r``
    (:mod:`store.sql.projection.catch_up`). Null for rows written before revision 0015."""


class OpenCallRow(Base):
    """An unanswered call: ``call_id`` to the group that declared it."""

    __tablename__ = "chatledger_open_calls"
    __table_args__ = (
        _session_fk(),
        Index("chatledger_open_calls_group_idx", "tenant", "session_id", "group_id"),
    )

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    call_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    group_id: Mapped[str | None] = mapped_column(KEY)
    """The declaring group; None when ``ambiguous``."""
    ambiguous: Mapped[bool] = mapped_column(Boolean, server_default=false())
    """Declared by more than one unanswered call: results for it are never linked."""


class EarlyResultRow(Base):
    """A result stored before any call with its ``call_id``: the group it waits in."""

    __tablename__ = "chatledger_early_results"
    __table_args__ = (
        _session_fk(),
        Index("chatledger_early_results_group_idx", "tenant", "session_id", "group_id"),
    )

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    call_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    group_id: Mapped[str] = mapped_column(KEY)
    """The orphan group (or the group it has joined since) holding the result."""


class EventRow(Base):
    """One compaction event: a change set applied (or a restore), with its counts."""

    __tablename__ = "chatledger_events"
    __table_args__ = (
        _session_fk(),
        Index("chatledger_events_number_idx", "tenant", "session_id", "number", unique=True),
        Index("chatledger_events_created_idx", "tenant", "created_at"),
        Index("chatledger_events_outcome_idx", "tenant", "outcome", "created_at"),
    )

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    event_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    number: Mapped[int] = mapped_column(Integer)
    """1-based ordinal of the event in its session."""
    phase: Mapped[str] = mapped_column(_enum(EVENT_PHASES, "event_phase"))
    strategy: Mapped[str] = mapped_column(String(255))
    params: Mapped[Any] = mapped_column(JSONType)
    messages_before: Mapped[int] = mapped_column(BigInteger)
    messages_after: Mapped[int] = mapped_column(BigInteger)
    groups_before: Mapped[int] = mapped_column(BigInteger)
    groups_after: Mapped[int] = mapped_column(BigInteger)
    tokens_before: Mapped[int] = mapped_column(BigInteger)
    tokens_after: Mapped[int] = mapped_column(BigInteger)
    revision: Mapped[int] = mapped_column(BigInteger)
    """The session's revision once the event was applied."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    note: Mapped[str | None] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(String(32), server_default=text("'applied'"))
    """``applied``, ``failed``, ``blocked`` or ``abandoned``: a plain string (no CHECK), so
    that a later release can add an outcome without rewriting the table."""
    duration_seconds: Mapped[float | None] = mapped_column(Float)
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    summarizer: Mapped[str | None] = mapped_column(String(255))
    summarizer_model: Mapped[str | None] = mapped_column(String(255))


class EventGroupRow(Base):
    """What an event did to one group (links both ways: by event and by group)."""

    __tablename__ = "chatledger_event_groups"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant", "session_id", "event_id"],
            [
                "chatledger_events.tenant",
                "chatledger_events.session_id",
                "chatledger_events.event_id",
            ],
            ondelete="CASCADE",
        ),
        Index("chatledger_event_groups_group_idx", "tenant", "session_id", "group_id"),
    )

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    event_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    group_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    action: Mapped[str] = mapped_column(_enum(EVENT_ACTIONS, "event_action"), primary_key=True)
    reason: Mapped[str | None] = mapped_column(Text)
    tokens_before: Mapped[int | None] = mapped_column(BigInteger)
    tokens_after: Mapped[int | None] = mapped_column(BigInteger)


class UsageRow(Base):
    """One model call's usage, as its provider reported it (``record_usage``), with what
    chatledger projected for it. No key to the session row: a call may be recorded
    before its session's first message is stored."""

    __tablename__ = "chatledger_usage"
    __table_args__ = (
        Index("chatledger_usage_call_idx", "tenant", "session_id", "call_id", unique=True),
        Index("chatledger_usage_called_idx", "tenant", "called_at"),
    )

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    session_id: Mapped[str] = mapped_column(KEY, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    """The call's place among the session's recorded calls, from 1."""
    call_id: Mapped[str | None] = mapped_column(KEY)
    """The caller's id of the call, unique in the session (nulls are not compared)."""
    message_id: Mapped[str | None] = mapped_column(KEY)
    after_seq: Mapped[int | None] = mapped_column(BigInteger)
    """The session's newest stored ``seq`` when the call was recorded."""
    model: Mapped[str | None] = mapped_column(KEY)
    input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_write_tokens: Mapped[int | None] = mapped_column(BigInteger)
    reasoning_tokens: Mapped[int | None] = mapped_column(BigInteger)
    exact: Mapped[bool] = mapped_column(Boolean)
    called_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the call was made (``Usage.at``)."""
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime())
    local_tokens: Mapped[int | None] = mapped_column(BigInteger)
    """chatledger's count of the context projected for the call (paired calls only)."""
    context_messages: Mapped[int | None] = mapped_column(BigInteger)
    """How many messages that context held (paired calls only)."""
    context_digest: Mapped[str | None] = mapped_column(String(64))
    """The digest of that whole context (:func:`store.usage.ledger.context_chain`)."""
    prefix_kept: Mapped[bool | None] = mapped_column(Boolean)


class TenantKeyRow(Base):
    """An encrypted tenant's mark (``docs/encryption.md``): while a row here names the
    tenant, a store without its key refuses it. ``state`` is ``encrypting`` while
    ``chatledger encrypt`` still has rows in clear to seal (a store opened with the key
    refuses the tenant until then), ``encrypted`` after; ``current_key`` is the data key
    new texts are sealed with."""

    __tablename__ = "chatledger_tenant_keys"

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    current_key: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class KeyRow(Base):
    """A tenant's key, wrapped by the key provider's key ``kek_id``: a data key (texts
    name the one that sealed them) or the hash key (the keyed content hash)."""

    __tablename__ = "chatledger_keys"

    tenant: Mapped[str] = mapped_column(KEY, primary_key=True)
    key_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    purpose: Mapped[str] = mapped_column(String(8))
    kek_id: Mapped[str] = mapped_column(KEY)
    wrapped: Mapped[str] = mapped_column(Text)
    """The wrapped key, base64."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class KeyEventRow(Base):
    """What was done to a tenant's keys and rows, and how far (the audit of ``encrypt``
    and both rotations, and the resume point of one that was interrupted)."""

    __tablename__ = "chatledger_key_events"

    event_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant: Mapped[str | None] = mapped_column(KEY)
    """Null for a rotation of the provider's key (every tenant's keys)."""
    kind: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    rows: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    total: Mapped[int | None] = mapped_column(BigInteger)
    kek_id: Mapped[str | None] = mapped_column(KEY)
    data_key_id: Mapped[str | None] = mapped_column(String(32))
    cursor: Mapped[str | None] = mapped_column(Text)
    """Where an interrupted run resumes (JSON)."""


class SchemaRevisionRow(Base):
    """An applied schema revision and its ``backward_compatible`` marker."""

    __tablename__ = "chatledger_schema_revisions"

    revision: Mapped[str] = mapped_column(String(32), primary_key=True)
    down_revision: Mapped[str | None] = mapped_column(String(32))
    backward_compatible: Mapped[bool] = mapped_column(Boolean, server_default=false())
    """A process whose newest revision is :attr:`down_revision` keeps working with it."""


class SettingRow(Base):
    """A setting of the whole database (every tenant): ``search`` (``on`` or ``off``),
    ``cursor_key`` (the hex key that signs search cursors)."""

    __tablename__ = "chatledger_settings"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


SESSIONS = cast(Table, SessionRow.__table__)
MESSAGES = cast(Table, MessageRow.__table__)
GROUPS = cast(Table, GroupRow.__table__)
OPEN_CALLS = cast(Table, OpenCallRow.__table__)
EARLY_RESULTS = cast(Table, EarlyResultRow.__table__)
EVENTS = cast(Table, EventRow.__table__)
EVENT_GROUPS = cast(Table, EventGroupRow.__table__)
SCHEMA_REVISIONS = cast(Table, SchemaRevisionRow.__table__)
SETTINGS = cast(Table, SettingRow.__table__)
LINEAGE = cast(Table, LineageRow.__table__)
BRANCH_ROWS = cast(Table, BranchRowRow.__table__)
USAGE = cast(Table, UsageRow.__table__)
TENANT_KEYS = cast(Table, TenantKeyRow.__table__)
KEYS = cast(Table, KeyRow.__table__)
KEY_EVENTS = cast(Table, KeyEventRow.__table__)

SESSION_CHILD_TABLES: tuple[Table, ...] = (
    USAGE,
    EVENT_GROUPS,
    EVENTS,
    OPEN_CALLS,
    BRANCH_ROWS,
    LINEAGE,
    MESSAGES,
    GROUPS,
)
"""The tables a deletion of sessions empties before their rows go, children first."""
