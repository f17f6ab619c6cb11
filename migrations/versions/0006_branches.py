"""Branches: forks that share their parent's rows, and superseded tails of a rewind.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05

* ``chatledger_sessions`` gains ``branch`` (None for a root; ``fork``, ``tail`` or
  ``kept``), ``parent_session_id``, ``fork_message_id``, ``branch_event_id``,
  ``lineage_version`` (bumped when its lineage changes) and ``shared`` (another branch
  reads this session's rows), and an index on
  ``(tenant, parent_session_id)`` that lists a session's forks and tails.
* ``chatledger_lineage``: the rows of other sessions a fork reads, up to a ``seq``.
* ``chatledger_branch_rows``: a branch's own group and reduction of such a row, where
  they differ from the row's.
* ``chatledger_events.phase`` accepts ``fork`` and ``rewind``. PostgreSQL replaces the
  CHECK constraint; SQLite cannot alter one, and a copy of the table would cascade to
  the event links, so the constraint is widened in the stored schema as SQLite's
  documentation describes for CHECK constraints (``writable_schema``, then a new
  ``schema_version``): every existing row satisfies the wider check.

Nothing is filled: every new column is nullable or has a server default, and the new
tables start empty, so the upgrade is instant on any table.

Not backward compatible: a process of the previous release reads a fork as a session
without the messages it shares with its parent, and fails to read the audit of a
session that holds a ``fork`` or ``rewind`` event. Upgrade every process to this
release before the first fork or rewind (``chatledger db upgrade`` prints this order).
Downgrading refuses while a fork, a tail or such an event exists.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from store.sql.dialect import capabilities

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = False
"""A process of the previous release misreads forks (see above): deploy this release to
every process before anyone forks or rewinds."""

OLD_PHASES = ("after_run", "manual", "import", "restore")
NEW_PHASES = (*OLD_PHASES, "fork", "rewind")
EVENTS = "chatledger_events"
SESSIONS = "chatledger_sessions"
PHASE_CHECK = "chatledger_events_event_phase_check"
PARENT_INDEX = "chatledger_sessions_parent_idx"
SESSION_COLUMNS = (
    "shared",
    "lineage_version",
    "branch_event_id",
    "fork_message_id",
    "parent_session_id",
    "branch",
)


def _key(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.String(255), nullable=nullable)


def _session_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["tenant", "session_id"],
        [f"{SESSIONS}.tenant", f"{SESSIONS}.session_id"],
        name=f"{table}_chatledger_sessions_fkey",
        ondelete="CASCADE",
    )


def _check(phases: Sequence[str]) -> str:
    return "phase IN (" + ", ".join(f"'{p}'" for p in phases) + ")"


def _set_phases(old: Sequence[str], new: Sequence[str]) -> None:
    bind = op.get_bind()
    if capabilities(bind.dialect).alter_constraints:
        op.drop_constraint(op.f(PHASE_CHECK), EVENTS, type_="check")
        op.create_check_constraint(op.f(PHASE_CHECK), EVENTS, sa.text(_check(new)))
        return
    query = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?"
    stored = bind.exec_driver_sql(query, (EVENTS,)).scalar_one()
    if _check(old) not in stored:
        raise RuntimeError(f"{EVENTS}'s phase check is not the expected {_check(old)!r}")
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        bind.exec_driver_sql(
            "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?",
            (stored.replace(_check(old), _check(new)), EVENTS),
        )
        bind.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        bind.exec_driver_sql("PRAGMA writable_schema = OFF")


def upgrade() -> None:
    op.add_column(SESSIONS, sa.Column("branch", sa.String(16), nullable=True))
    op.add_column(SESSIONS, _key("parent_session_id", nullable=True))
    op.add_column(SESSIONS, _key("fork_message_id", nullable=True))
    op.add_column(SESSIONS, sa.Column("branch_event_id", sa.String(64), nullable=True))
    op.add_column(
        SESSIONS,
        sa.Column("lineage_version", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.add_column(
        SESSIONS, sa.Column("shared", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.create_index(PARENT_INDEX, SESSIONS, ["tenant", "parent_session_id"])
    op.create_table(
        "chatledger_lineage",
        _key("tenant"),
        _key("session_id"),
        _key("owner_session_id"),
        sa.Column("through_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant", "session_id", "owner_session_id", name="chatledger_lineage_pkey"
        ),
        _session_fk("chatledger_lineage"),
    )
    op.create_index(
        "chatledger_lineage_owner_idx", "chatledger_lineage", ["tenant", "owner_session_id"]
    )
    op.create_table(
        "chatledger_branch_rows",
        _key("tenant"),
        _key("session_id"),
        _key("owner_session_id"),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        _key("group_id"),
        sa.Column("reduced_contents", sa.JSON(), nullable=True),
        sa.Column("reduced_token_count", sa.Integer(), nullable=True),
        sa.Column("reduced_event_id", sa.String(64), nullable=True),
        sa.Column("member", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant", "session_id", "owner_session_id", "seq", name="chatledger_branch_rows_pkey"
        ),
        _session_fk("chatledger_branch_rows"),
    )
    op.create_index(
        "chatledger_branch_rows_group_idx",
        "chatledger_branch_rows",
        ["tenant", "session_id", "group_id"],
    )
    op.create_index(
        "chatledger_branch_rows_owner_idx",
        "chatledger_branch_rows",
        ["tenant", "owner_session_id", "seq"],
    )
    _set_phases(OLD_PHASES, NEW_PHASES)


def downgrade() -> None:
    bind = op.get_bind()
    branched = bind.exec_driver_sql(
        f"SELECT count(*) FROM {SESSIONS} WHERE branch IS NOT NULL"
    ).scalar_one()
    phased = bind.exec_driver_sql(
        f"SELECT count(*) FROM {EVENTS} WHERE phase IN ('fork', 'rewind')"
    ).scalar_one()
    if branched or phased:
        raise RuntimeError(
            f"cannot downgrade below 0006: {branched} forks or tails and {phased} fork or "
            "rewind events exist (delete them first)"
        )
    _set_phases(NEW_PHASES, OLD_PHASES)
    op.drop_table("chatledger_branch_rows")
    op.drop_table("chatledger_lineage")
    op.drop_index(PARENT_INDEX, table_name=SESSIONS)
    for column in SESSION_COLUMNS:
        op.drop_column(SESSIONS, column)
