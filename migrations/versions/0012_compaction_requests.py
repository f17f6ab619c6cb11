"""Sessions keep the compaction asked for and not yet run.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06

``chatledger_sessions.compaction_request``: the request of
``request_compaction`` (its reason, focus and time, as JSON text) until the session's
next compaction runs it, which sets it back to null unless a newer request replaced it
meanwhile. Null for every session written before this revision: nothing is filled, the
upgrade is instant.

Additive only: the column is nullable and no process needs it to be set.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = True
"""A process whose newest revision is ``down_revision`` keeps working against this one:
it neither reads nor writes the column (its compactions leave a request waiting for a
process that reads it)."""

TABLE = "chatledger_sessions"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("compaction_request", sa.Text(), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN in place (SQLite 3.35 and later), as 0005 does
    op.drop_column(TABLE, "compaction_request")
