"""Audit outcomes: every compaction that matters is an event, with its duration.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

``chatledger_events`` gains ``outcome`` (``applied``, ``failed``, ``blocked``,
``abandoned``; default ``applied``, what every earlier event was), ``duration_seconds``,
``attempts`` (default 1), ``summarizer`` and ``summarizer_model``, and an index on
``(tenant, outcome, created_at)`` for the audit filtered by outcome. Additive: every
new column is nullable or has a server default, so a process of the previous release
goes on writing events (they read as ``applied``, one attempt, no duration).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = True
"""A process whose newest revision is ``down_revision`` keeps working against this one: its
events get the defaults (``applied``, one attempt), and it reads the rows of other outcomes
as events that changed nothing."""

TABLE = "chatledger_events"
INDEX = "chatledger_events_outcome_idx"


def upgrade() -> None:
    op.add_column(
        TABLE,
        sa.Column("outcome", sa.String(32), nullable=False, server_default=sa.text("'applied'")),
    )
    op.add_column(TABLE, sa.Column("duration_seconds", sa.Float(), nullable=True))
    op.add_column(
        TABLE, sa.Column("attempts", sa.Integer(), nullable=False, server_default=sa.text("1"))
    )
    op.add_column(TABLE, sa.Column("summarizer", sa.String(255), nullable=True))
    op.add_column(TABLE, sa.Column("summarizer_model", sa.String(255), nullable=True))
    op.create_index(INDEX, TABLE, ["tenant", "outcome", "created_at"])


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN in place (SQLite 3.35 and later): a batch copy of the
    # table would drop it first, and its event links with it (ON DELETE CASCADE)
    op.drop_index(INDEX, table_name=TABLE)
    for column in ("summarizer_model", "summarizer", "attempts", "duration_seconds", "outcome"):
        op.drop_column(TABLE, column)
