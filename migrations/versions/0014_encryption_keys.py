"""Encryption at rest: tenants' wrapped keys, their mark, and the audit of key events.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06

Three new tables: ``chatledger_tenant_keys`` (an encrypted tenant's mark, its state and
current data key), ``chatledger_keys`` (each tenant's wrapped data keys and hash key)
and ``chatledger_key_events`` (``encrypt`` and the rotations: what, when, how far, and
where an interrupted one resumes). On PostgreSQL ``chatledger_messages.author_name``
becomes ``text``: a sealed name is longer than 255 characters (``varchar`` to ``text``
rewrites nothing); SQLite never enforced the length.

Additive only: a process of the previous release never reads the new tables, and
encrypts nothing. The downgrade is refused while any tenant is encrypted (its keys would
go with the tables) (``docs/encryption.md``: upgrade every process before a tenant is
encrypted, or the old ones write that tenant in clear).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from store.errors import EncryptionError
from store.sql import dialect

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = True
"""A process whose newest revision is ``down_revision`` keeps working against this one
on every tenant that is not encrypted."""


def _stamp(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "chatledger_tenant_keys",
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("current_key", sa.String(32), nullable=False),
        _stamp("created_at"),
        _stamp("updated_at"),
        sa.PrimaryKeyConstraint("tenant", name="chatledger_tenant_keys_pkey"),
    )
    op.create_table(
        "chatledger_keys",
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("purpose", sa.String(8), nullable=False),
        sa.Column("kek_id", sa.String(255), nullable=False),
        sa.Column("wrapped", sa.Text(), nullable=False),
        _stamp("created_at"),
        sa.PrimaryKeyConstraint("tenant", "key_id", name="chatledger_keys_pkey"),
    )
    op.create_table(
        "chatledger_key_events",
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("tenant", sa.String(255), nullable=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        _stamp("started_at"),
        _stamp("finished_at", nullable=True),
        sa.Column("rows", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=True),
        sa.Column("kek_id", sa.String(255), nullable=True),
        sa.Column("data_key_id", sa.String(32), nullable=True),
        sa.Column("cursor", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("event_id", name="chatledger_key_events_pkey"),
    )
    if _enforced_lengths():
        op.alter_column(
            "chatledger_messages", "author_name", type_=sa.Text(), existing_type=sa.String(255)
        )


def _enforced_lengths() -> bool:
    """Whether the database refuses a text longer than its ``VARCHAR`` (PostgreSQL)."""
    return dialect.capabilities(op.get_bind().dialect).enforced_lengths


def downgrade() -> None:
    marked = op.get_bind().execute(sa.text("SELECT count(*) FROM chatledger_tenant_keys"))
    if marked.scalar_one():
        # the tenants' wrapped keys would go with the tables: their rows, for good
        raise EncryptionError(
            "cannot downgrade below revision 0014 while a tenant is encrypted: its keys "
            "live in the tables the downgrade drops, and its rows could never be read again"
        )
    if _enforced_lengths():
        op.alter_column(
            "chatledger_messages", "author_name", type_=sa.String(255), existing_type=sa.Text()
        )
    op.drop_table("chatledger_key_events")
    op.drop_table("chatledger_keys")
    op.drop_table("chatledger_tenant_keys")
