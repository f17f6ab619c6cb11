"""Model calls' usage, as providers report it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06

``chatledger_usage``: one row per model call recorded with ``record_usage``: the five
token lanes the provider reported (null where it reported none), the model, the message
or turn the call is tied to, and, for a call paired with a projection of the store, the
local count of that projection and the digest of its context (whether the call's context
began with the previous call's). No key to the session row: a call may be recorded
before its session's first message. ``delete_session`` and ``purge`` remove a session's
rows; redaction leaves them.

Additive only: a new, empty table that a process of the previous release never reads.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = True
"""A process whose newest revision is ``down_revision`` keeps working against this one:
it neither reads nor writes the table (a session it deletes or purges may leave usage
rows behind, which the next purge of this release removes)."""

TABLE = "chatledger_usage"


def _key(name: str, *, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.String(255), nullable=nullable)


def _tokens(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger(), nullable=True)


def upgrade() -> None:
    op.create_table(
        TABLE,
        _key("tenant"),
        _key("session_id"),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        _key("call_id", nullable=True),
        _key("message_id", nullable=True),
        sa.Column("after_seq", sa.BigInteger(), nullable=True),
        _key("model", nullable=True),
        _tokens("input_tokens"),
        _tokens("output_tokens"),
        _tokens("cache_read_tokens"),
        _tokens("cache_write_tokens"),
        _tokens("reasoning_tokens"),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("called_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        _tokens("local_tokens"),
        sa.Column("context_messages", sa.BigInteger(), nullable=True),
        sa.Column("context_digest", sa.String(64), nullable=True),
        sa.Column("prefix_kept", sa.Boolean(), nullable=True),
        sa.PrimaryKeyConstraint("tenant", "session_id", "seq", name="chatledger_usage_pkey"),
    )
    op.create_index(
        "chatledger_usage_call_idx", TABLE, ["tenant", "session_id", "call_id"], unique=True
    )
    op.create_index("chatledger_usage_called_idx", TABLE, ["tenant", "called_at"])


def downgrade() -> None:
    op.drop_index("chatledger_usage_called_idx", table_name=TABLE)
    op.drop_index("chatledger_usage_call_idx", table_name=TABLE)
    op.drop_table(TABLE)
