"""Sessions tell which of their writes another process's view cache can catch up with.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

``chatledger_sessions.chain_since`` and ``chain_revision``: the writes that leave every
group's messages as they were unless they change its row (appends, compactions without
reductions) set ``chain_revision`` to the revision they make and keep ``chain_since``
(or start it at the revision they write over, when the write before was another kind).
A process whose cache holds the session at revision ``R`` may then keep the messages of
the groups whose rows are unchanged when ``chain_revision`` is the session's revision
and ``chain_since <= R``; every other write moves the revision without them, which
breaks the chain, and the cache reads everything again, as before. Null for every
session written before this revision: nothing is filled, the upgrade is instant.

Additive only: both columns are nullable and no process needs them to be set.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = True
"""A process whose newest revision is ``down_revision`` keeps working against this one:
it neither reads nor writes the columns, and its writes, moving the revision alone,
break the chain (the other processes' caches then read everything again)."""

TABLE = "chatledger_sessions"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("chain_since", sa.BigInteger(), nullable=True))
    op.add_column(TABLE, sa.Column("chain_revision", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN in place (SQLite 3.35 and later), as 0005 does
    op.drop_column(TABLE, "chain_revision")
    op.drop_column(TABLE, "chain_since")
