"""Initial schema: sessions, messages, groups, open calls, compaction events.

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Written by hand from ``store/schema.py`` (checked against it by the drift test). Migrations
are frozen: they never import the library's current models.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GROUP_KINDS = ("system", "user", "assistant_text", "tool_call", "summary")
EVENT_PHASES = ("after_run", "manual", "import", "restore")
EVENT_ACTIONS = ("excluded", "summarized", "summary_inserted", "reduced", "restored", "included")


def _json() -> sa.types.TypeEngine[object]:
    # plain json on PostgreSQL: jsonb cannot hold NUL characters (see store/schema.py)
    return sa.JSON()


def _ts(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _key(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.String(255), nullable=nullable)


def _count(name: str, type_: type[sa.Integer] = sa.BigInteger) -> sa.Column[object]:
    return sa.Column(name, type_(), server_default=sa.text("0"), nullable=False)


def _flag(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.Boolean(), server_default=sa.false(), nullable=False)


def _enum(values: tuple[str, ...], name: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=True, length=32)


def _session_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["tenant", "session_id"],
        ["chatledger_sessions.tenant", "chatledger_sessions.session_id"],
        name=op.f(f"{table}_chatledger_sessions_fkey"),
        ondelete="CASCADE",
    )


def _pk(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint("tenant", "session_id", *columns, name=op.f(f"{table}_pkey"))


def _exclusion() -> list[sa.Column[object]]:
    return [
        _flag("excluded"),
        sa.Column("excluded_reason", sa.Text(), nullable=True),
        sa.Column("excluded_event_id", sa.String(64), nullable=True),
    ]


def _create_sessions() -> None:
    table = "chatledger_sessions"
    op.create_table(
        table,
        _key("tenant"),
        _key("session_id"),
        _ts("created_at"),
        _ts("updated_at"),
        sa.Column("metadata", _json(), nullable=False),
        sa.Column("tokenizer", sa.String(128), nullable=False),
        _count("revision"),
        sa.Column("next_seq", sa.BigInteger(), server_default=sa.text("1"), nullable=False),
        _count("position"),
        _count("turn", sa.Integer),
        _key("tail_group_id", nullable=True),
        sa.Column("tail_mode", _enum(("reasoning", "calls"), "tail_mode"), nullable=True),
        _count("event_count", sa.Integer),
        _count("stored_messages"),
        _count("stored_groups"),
        _count("stored_tokens"),
        _count("active_messages"),
        _count("active_groups"),
        _count("active_tokens"),
        _pk(table),
    )
    op.create_index("chatledger_sessions_updated_idx", table, ["tenant", "updated_at"])


def _create_messages() -> None:
    table = "chatledger_messages"
    op.create_table(
        table,
        _key("tenant"),
        _key("session_id"),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("anchor", sa.BigInteger(), nullable=False),
        _count("slot", sa.Integer),
        _key("message_id"),
        sa.Column("role", sa.String(64), nullable=False),
        sa.Column("contents", _json(), nullable=False),
        sa.Column("author_name", sa.String(255), nullable=True),
        _ts("created_at", nullable=True),
        _ts("stored_at"),
        sa.Column("metadata", _json(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        _key("group_id"),
        sa.Column("token_count", sa.Integer(), nullable=False),
        *_exclusion(),
        sa.Column("reduced_contents", _json(), nullable=True),
        sa.Column("reduced_token_count", sa.Integer(), nullable=True),
        sa.Column("reduced_event_id", sa.String(64), nullable=True),
        sa.Column("source_system", sa.String(64), nullable=True),
        sa.Column("source_id", sa.String(255), nullable=True),
        _ts("imported_at", nullable=True),
        _session_fk(table),
        _pk(table, "seq"),
    )
    keys = ["tenant", "session_id"]
    op.create_index("chatledger_messages_message_id_key", table, [*keys, "message_id"], unique=True)
    op.create_index("chatledger_messages_active_idx", table, [*keys, "excluded", "anchor", "slot"])
    op.create_index("chatledger_messages_group_idx", table, [*keys, "group_id", "seq"])


def _create_groups() -> None:
    table = "chatledger_groups"
    op.create_table(
        table,
        _key("tenant"),
        _key("session_id"),
        _key("group_id"),
        sa.Column("kind", _enum(GROUP_KINDS, "group_kind"), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("anchor", sa.BigInteger(), nullable=False),
        _count("slot", sa.Integer),
        sa.Column("first_seq", sa.BigInteger(), nullable=False),
        sa.Column("first_position", sa.BigInteger(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("token_count", sa.BigInteger(), nullable=False),
        _flag("pinned"),
        _flag("has_reasoning"),
        _count("pending_calls", sa.Integer),
        _flag("orphan"),
        *_exclusion(),
        _key("summarized_by", nullable=True),
        sa.Column("summary_of", _json(), nullable=True),
        _ts("created_at"),
        _session_fk(table),
        _pk(table, "group_id"),
    )
    keys = ["tenant", "session_id"]
    op.create_index("chatledger_groups_active_idx", table, [*keys, "excluded", "anchor", "slot"])
    op.create_index("chatledger_groups_summarized_by_idx", table, [*keys, "summarized_by"])


def _create_open_calls() -> None:
    table = "chatledger_open_calls"
    op.create_table(
        table,
        _key("tenant"),
        _key("session_id"),
        _key("call_id"),
        _key("group_id", nullable=True),
        _flag("ambiguous"),
        _session_fk(table),
        _pk(table, "call_id"),
    )
    op.create_index("chatledger_open_calls_group_idx", table, ["tenant", "session_id", "group_id"])


def _create_events() -> None:
    table = "chatledger_events"
    op.create_table(
        table,
        _key("tenant"),
        _key("session_id"),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("phase", _enum(EVENT_PHASES, "event_phase"), nullable=False),
        sa.Column("strategy", sa.String(255), nullable=False),
        sa.Column("params", _json(), nullable=False),
        *(
            sa.Column(f"{what}_{when}", sa.BigInteger(), nullable=False)
            for what in ("messages", "groups", "tokens")
            for when in ("before", "after")
        ),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        _ts("created_at"),
        sa.Column("note", sa.Text(), nullable=True),
        _session_fk(table),
        _pk(table, "event_id"),
    )
    op.create_index(
        "chatledger_events_number_idx", table, ["tenant", "session_id", "number"], unique=True
    )
    op.create_index("chatledger_events_created_idx", table, ["tenant", "created_at"])


def _create_event_groups() -> None:
    table = "chatledger_event_groups"
    op.create_table(
        table,
        _key("tenant"),
        _key("session_id"),
        sa.Column("event_id", sa.String(64), nullable=False),
        _key("group_id"),
        sa.Column("action", _enum(EVENT_ACTIONS, "event_action"), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("tokens_before", sa.BigInteger(), nullable=True),
        sa.Column("tokens_after", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant", "session_id", "event_id"],
            [
                "chatledger_events.tenant",
                "chatledger_events.session_id",
                "chatledger_events.event_id",
            ],
            name=op.f(f"{table}_chatledger_events_fkey"),
            ondelete="CASCADE",
        ),
        _pk(table, "event_id", "group_id", "action"),
    )
    op.create_index(
        "chatledger_event_groups_group_idx", table, ["tenant", "session_id", "group_id"]
    )


def upgrade() -> None:
    _create_sessions()
    _create_messages()
    _create_groups()
    _create_open_calls()
    _create_events()
    _create_event_groups()


def downgrade() -> None:
    for table in (
        "chatledger_event_groups",
        "chatledger_events",
        "chatledger_open_calls",
        "chatledger_groups",
        "chatledger_messages",
        "chatledger_sessions",
    ):
        op.drop_table(table)
