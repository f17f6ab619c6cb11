"""Sessions draw an incarnation token; messages carry a format version; revisions
record whether they are backward-compatible.

Revision ID: 0004
Revises: 0002
Create Date: 2026-12-01

* ``chatledger_sessions.incarnation``: a random token drawn when the session row is
  created, which never repeats. The view cache is keyed on it (with ``revision``): a
  session deleted and recreated within one clock tick gets another token, where
  ``created_at`` could be equal. Existing rows are given one here; a row written later
  by a process of the previous release has none, and is read without the cache.
* ``chatledger_messages.format_version``: the version of the message's stored JSON
  (``contents``, ``metadata``, ``reduced_contents``). Every row written so far is
  version 1, which is also the default a previous release's inserts get.
* ``chatledger_schema_revisions``: one row per applied revision with its parent and its
  ``backward_compatible`` marker (a module attribute of each revision), written by the
  migration environment, so that a process whose newest revision is behind the
  database can tell whether it may keep working (see ``store/sql/migrations.py``).

Additive only; a process of the previous release keeps working against it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = True
"""A process whose newest revision is ``down_revision`` keeps working against this one."""

REVISIONS = "chatledger_schema_revisions"

_FILL_INCARNATION = {
    # a fresh random token per row: the expression is evaluated once per row
    "sqlite": "lower(hex(randomblob(16)))",
    "postgresql": "md5(random()::text || clock_timestamp()::text || session_id)",
}


def upgrade() -> None:
    op.add_column("chatledger_sessions", sa.Column("incarnation", sa.String(32), nullable=True))
    op.add_column(
        "chatledger_messages",
        sa.Column("format_version", sa.SmallInteger(), server_default=sa.text("1"), nullable=False),
    )
    op.create_table(
        REVISIONS,
        sa.Column("revision", sa.String(32), nullable=False),
        sa.Column("down_revision", sa.String(32), nullable=True),
        sa.Column("backward_compatible", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.PrimaryKeyConstraint("revision", name=op.f(f"{REVISIONS}_pkey")),
    )
    fill = _FILL_INCARNATION[op.get_bind().dialect.name]
    op.execute(f"UPDATE chatledger_sessions SET incarnation = {fill}")


def downgrade() -> None:
    # plain ALTER TABLE ... DROP COLUMN (SQLite 3.35 and later): a batch copy of the
    # sessions table would cascade-delete every session's rows
    op.drop_table(REVISIONS)
    op.drop_column("chatledger_messages", "format_version")
    op.drop_column("chatledger_sessions", "incarnation")
