"""Search on PostgreSQL: the vectors beside the rows, not in them.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06

On PostgreSQL with search on, the stored generated column
``chatledger_messages.search_vector`` and its GIN index are replaced by the table
``chatledger_search_vectors`` (a searchable message's key and vector), its GIN index and
the triggers that keep it in step (:mod:`store.sql.search.index`). With the vector in
the row, every update of an indexed column of the messages (a compaction excluding
rows) wrote every word of the row into the GIN index again: excluding 300 messages took
337 ms instead of 2. The table is filled from the stored column (no text parsed again).

SQLite is unchanged. Not backward compatible on PostgreSQL: a process of the previous
release still reads, appends and imports (the triggers index what it writes), but its
search reads the dropped column and fails. Deploy this release to every process that
searches.
"""

from collections.abc import Sequence

from alembic import op
from sqlalchemy import text
from sqlalchemy.engine import Connection

from store.sql import dialect
from store.sql.search.index import VECTOR_TABLE, create_index, drop_index, search_setting

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = False
"""A search by a process of the previous release reads the dropped ``search_vector``
column and fails: deploy this release to every process that searches."""

_OLD_COLUMN = "search_vector"
_OLD_INDEX = "chatledger_messages_search_idx"
_OLD_DDL = (
    f"ALTER TABLE chatledger_messages ADD COLUMN IF NOT EXISTS {_OLD_COLUMN} tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, coalesce(search_text, ''))) "
    "STORED",
    f"CREATE INDEX IF NOT EXISTS {_OLD_INDEX} ON chatledger_messages USING gin "
    f"({_OLD_COLUMN}) WHERE search_text IS NOT NULL",
)
_OLD_DROP = (
    f"DROP INDEX IF EXISTS {_OLD_INDEX}",
    f"ALTER TABLE chatledger_messages DROP COLUMN IF EXISTS {_OLD_COLUMN}",
)


def _has_old_column(bind: Connection) -> bool:
    found = bind.execute(
        text(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND table_name = 'chatledger_messages' AND column_name = :name"
        ),
        {"name": _OLD_COLUMN},
    ).scalar_one()
    return bool(found)


def _vectors(bind: Connection) -> bool:
    """Whether the database's index is of vectors (PostgreSQL's; SQLite's is FTS5)."""
    return dialect.capabilities(bind.dialect).full_text == "tsvector"


def upgrade() -> None:
    bind = op.get_bind()
    if not _vectors(bind) or not search_setting(bind):
        return
    if _has_old_column(bind):
        # the vectors as stored, not parsed again; the rest of the index as new
        bind.exec_driver_sql(
            f"CREATE TABLE {VECTOR_TABLE} AS SELECT tenant, session_id, seq, "
            f"{_OLD_COLUMN} AS vector FROM chatledger_messages WHERE search_text IS NOT NULL"
        )
        bind.exec_driver_sql(
            f"ALTER TABLE {VECTOR_TABLE} ALTER COLUMN vector SET NOT NULL, "
            f"ADD CONSTRAINT {VECTOR_TABLE}_pkey PRIMARY KEY (tenant, session_id, seq)"
        )
        for statement in _OLD_DROP:
            bind.exec_driver_sql(statement)
    create_index(bind)


def downgrade() -> None:
    bind = op.get_bind()
    if not _vectors(bind) or not search_setting(bind):
        return
    drop_index(bind)
    for statement in _OLD_DDL:
        bind.exec_driver_sql(statement)
