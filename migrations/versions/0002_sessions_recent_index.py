"""Sessions listed by last update: an index on (tenant, updated_at, session_id).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

``sessions(order="updated")`` pages newest first by a keyset on ``(updated_at,
session_id)``; this index makes a page cost O(page) however many sessions the tenant
has. Additive: ``chatledger_sessions_updated_idx`` (a prefix of it) stays until a
release deprecates it, so a process of the previous release is unaffected.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "chatledger_sessions_recent_idx"


def upgrade() -> None:
    op.create_index(INDEX, "chatledger_sessions", ["tenant", "updated_at", "session_id"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name="chatledger_sessions")
