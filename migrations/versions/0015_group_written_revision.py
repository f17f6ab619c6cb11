"""Groups record the session's revision that last wrote them.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07

``chatledger_groups.written_revision``, with an index on ``(tenant, session_id,
written_revision)``: every write of a session's write chain (appends, compactions
without reductions) sets it on the group rows it inserts or changes, so that a store
whose cache holds a session's active view at one revision reads, when other writers
wrote since, only the group rows written after it instead of every active group (writers
sharing a session read the others' changes at each turn). Null for every row written
before this revision: nothing is filled, and no cache holds rows from before it.

Not backward compatible: a process of the previous release extends the write chain
without setting the column, and a process of this release would then miss that
write's rows when it catches up through the chain.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = False
"""A process whose newest revision is ``down_revision`` would write the chain's group
rows without the column this one's cache catches up by."""

TABLE = "chatledger_groups"
INDEX = "chatledger_groups_written_idx"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("written_revision", sa.BigInteger(), nullable=True))
    op.create_index(INDEX, TABLE, ["tenant", "session_id", "written_revision"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name=TABLE)
    # ALTER TABLE ... DROP COLUMN in place (SQLite 3.35 and later), as 0005 does
    op.drop_column(TABLE, "written_revision")
