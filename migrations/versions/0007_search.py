"""Search: every message row's searchable text, and the index over it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05

* ``chatledger_messages.search_text``: what the model sees of the message, normalized
  (:func:`store.search.indexable_text`); filled here for every stored message, in
  batches, with progress in ``chatledger db upgrade``.
* ``chatledger_settings``: settings of the whole database: ``search`` (``on``) and
  ``cursor_key`` (a random key that signs search cursors).
* The index (:mod:`store.sql.search.index`): on SQLite the FTS5 table
  ``chatledger_search`` and its triggers, on PostgreSQL the stored generated column
  ``search_vector`` (``to_tsvector('simple', search_text)``) and a GIN index on it;
  built once the column is filled. (Revision 0008 moved PostgreSQL's vectors into a
  table of their own.)

Not backward compatible for erasure: a process of the previous release still reads,
appends and imports (what it writes is not searchable until ``chatledger db search on``
fills it), but a redaction it makes leaves the message's words in ``search_text`` and
the index. Deploy this release to every process before the next redaction.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from store.sql import dialect
from store.sql.search.index import drop_index, ensure_cursor_key, fill_search_text, set_search

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = False
"""A redaction by a process of the previous release would leave the words it erases in
the search index (see above)."""

MESSAGES = "chatledger_messages"
SETTINGS = "chatledger_settings"


def upgrade() -> None:
    op.add_column(MESSAGES, sa.Column("search_text", sa.Text(), nullable=True))
    op.create_table(
        SETTINGS,
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="chatledger_settings_pkey"),
    )
    bind = op.get_bind()
    ensure_cursor_key(bind)
    fill_search_text(bind, encrypted_tenants=False)  # none before 0014
    set_search(bind, True)


def downgrade() -> None:
    bind = op.get_bind()
    drop_index(bind)
    if dialect.capabilities(bind.dialect).full_text == "tsvector":  # as made here (0008 moved it)
        bind.exec_driver_sql("DROP INDEX IF EXISTS chatledger_messages_search_idx")
        bind.exec_driver_sql("ALTER TABLE chatledger_messages DROP COLUMN IF EXISTS search_vector")
    op.drop_table(SETTINGS)
    with op.batch_alter_table(MESSAGES) as batch:
        batch.drop_column("search_text")
