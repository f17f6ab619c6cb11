"""Messages carry their group's kind where the message alone settles it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04

``chatledger_messages.group_kind``: the kind of the message's group, written with the
row when nothing that comes later can change it: every message but an assistant's
reasoning alone, whose group becomes a tool call when calls follow it (and goes back
when they are retracted). A read of history takes the kind from the row, and looks the
group up only where the column is null: such messages, and every row written before
this revision or by a process of the previous release. Nothing is filled here, so the
upgrade is instant on any table; older rows read as fast as before.

Additive only: the column is nullable and no process ever needs it to be set.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = True
"""A process whose newest revision is ``down_revision`` keeps working against this one: its
rows leave the column null, and it changes only kinds that this revision leaves null."""

TABLE = "chatledger_messages"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("group_kind", sa.String(32), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN in place (SQLite 3.35 and later), as 0004 does
    op.drop_column(TABLE, "group_kind")
