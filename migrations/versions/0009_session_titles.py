"""Sessions have a title.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06

``chatledger_sessions.title``: the session's title, set by ``set_title`` and by the
imports whose sources name their conversations (ChatGPT's and Claude's exports, Claude
Code's summaries); null for a session without one, and for every session written
before this revision. Nothing is filled here, so the upgrade is instant on any table.

Additive only: the column is nullable and no process ever needs it to be set.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = True
"""A process whose newest revision is ``down_revision`` keeps working against this one:
it neither reads nor writes the column (its sessions have no title)."""

TABLE = "chatledger_sessions"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("title", sa.Text(), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN in place (SQLite 3.35 and later), as 0005 does
    op.drop_column(TABLE, "title")
