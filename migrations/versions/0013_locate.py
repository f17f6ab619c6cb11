"""Messages found by id across a tenant's sessions: an index on (tenant, message_id).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06

``locate(message_id)`` answers which session holds a message without knowing the
session; the unique key ``(tenant, session_id, message_id)`` cannot serve it. Additive
only: a new index, which a process of the previous release never needs.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = True
"""A process whose newest revision is ``down_revision`` keeps working against this one:
the index changes nothing it reads or writes."""

INDEX = "chatledger_messages_locate_idx"


def upgrade() -> None:
    op.create_index(INDEX, "chatledger_messages", ["tenant", "message_id"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name="chatledger_messages")
