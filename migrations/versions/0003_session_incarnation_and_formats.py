"""Sessions draw an incarnation token; messages carry a format version; revisions
record whether they are backward-compatible.

Revision ID: 0003
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
  database can tell whether it may keep working (see ``store/sql/migrations/__init__.py``).
* ``chatledger_early_results``: results stored before any call with their ``call_id``,
  each naming the orphan group that the call, when it arrives, joins (see
  ``docs/groups.md``). A previous release ignores the table: its appends link nothing
  early, as before. Filled here from the active orphan groups whose call has not come.

Additive only; a process of the previous release keeps working against it.
"""

import json
import secrets
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

backward_compatible: bool = True
"""A process whose newest revision is ``down_revision`` keeps working against this one."""

REVISIONS = "chatledger_schema_revisions"
EARLY = "chatledger_early_results"

BATCH = 1000


def _fill_incarnations() -> None:
    """Give every existing session a token of its own (in batches, any database)."""
    bind = op.get_bind()
    sessions = sa.table(
        "chatledger_sessions",
        sa.column("tenant", sa.String()),
        sa.column("session_id", sa.String()),
        sa.column("incarnation", sa.String()),
    )
    keys = bind.execute(
        sa.select(sessions.c.tenant, sessions.c.session_id).where(sessions.c.incarnation.is_(None))
    ).all()
    statement = (
        sa.update(sessions)
        .where(sessions.c.tenant == sa.bindparam("t"), sessions.c.session_id == sa.bindparam("s"))
        .values(incarnation=sa.bindparam("token"))
    )
    for start in range(0, len(keys), BATCH):
        rows = [
            {"t": tenant, "s": session_id, "token": secrets.token_hex(16)}
            for tenant, session_id in keys[start : start + BATCH]
        ]
        bind.execute(statement, rows)


def _result_ids(contents: object) -> list[str]:
    """The call ids a stored ``contents`` list answers (frozen copy of the format 1 rule)."""
    if isinstance(contents, str):
        contents = json.loads(contents)
    found: list[str] = []
    for item in contents if isinstance(contents, list) else []:
        if not isinstance(item, dict) or not item.get("call_id"):
            continue
        kind = item.get("type")
        if kind == "function_result" or (kind == "other" and item.get("pairing") == "result"):
            found.append(str(item["call_id"]))
    return found


def _fill_early_results() -> None:
    """Record the results of active orphan groups whose call id no pending call has, so
    that their call, when it arrives, joins them as it would have after this revision."""
    bind = op.get_bind()
    messages = sa.table(
        "chatledger_messages",
        sa.column("tenant", sa.String()),
        sa.column("session_id", sa.String()),
        sa.column("seq", sa.BigInteger()),
        sa.column("group_id", sa.String()),
        sa.column("contents", sa.JSON()),
    )
    groups = sa.table(
        "chatledger_groups",
        sa.column("tenant", sa.String()),
        sa.column("session_id", sa.String()),
        sa.column("group_id", sa.String()),
        sa.column("orphan", sa.Boolean()),
        sa.column("excluded", sa.Boolean()),
    )
    calls = sa.table(
        "chatledger_open_calls",
        sa.column("tenant", sa.String()),
        sa.column("session_id", sa.String()),
        sa.column("call_id", sa.String()),
    )
    join = messages.join(
        groups,
        sa.and_(
            groups.c.tenant == messages.c.tenant,
            groups.c.session_id == messages.c.session_id,
            groups.c.group_id == messages.c.group_id,
        ),
    )
    query = (
        sa.select(
            messages.c.tenant, messages.c.session_id, messages.c.group_id, messages.c.contents
        )
        .select_from(join)
        .where(groups.c.orphan.is_(True), groups.c.excluded.is_(False))
        .order_by(messages.c.tenant, messages.c.session_id, messages.c.seq)
    )
    taken = {
        tuple(r)
        for r in bind.execute(sa.select(calls.c.tenant, calls.c.session_id, calls.c.call_id))
    }
    rows: list[dict[str, str]] = []
    for tenant, session_id, group_id, contents in bind.execute(query):
        for call_id in _result_ids(contents):
            if (tenant, session_id, call_id) not in taken:
                taken.add((tenant, session_id, call_id))
                rows.append(
                    {
                        "tenant": tenant,
                        "session_id": session_id,
                        "call_id": call_id,
                        "group_id": group_id,
                    }
                )
    early = sa.table(
        EARLY,
        sa.column("tenant", sa.String()),
        sa.column("session_id", sa.String()),
        sa.column("call_id", sa.String()),
        sa.column("group_id", sa.String()),
    )
    for start in range(0, len(rows), BATCH):
        bind.execute(sa.insert(early), rows[start : start + BATCH])


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
    op.create_table(
        EARLY,
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("call_id", sa.String(255), nullable=False),
        sa.Column("group_id", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant", "session_id"],
            ["chatledger_sessions.tenant", "chatledger_sessions.session_id"],
            name=op.f(f"{EARLY}_chatledger_sessions_fkey"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant", "session_id", "call_id", name=op.f(f"{EARLY}_pkey")),
    )
    op.create_index(f"{EARLY}_group_idx", EARLY, ["tenant", "session_id", "group_id"])
    _fill_incarnations()
    _fill_early_results()


def downgrade() -> None:
    # plain ALTER TABLE ... DROP COLUMN (SQLite 3.35 and later): a batch copy of the
    # sessions table would cascade-delete every session's rows
    op.drop_table(EARLY)
    op.drop_table(REVISIONS)
    op.drop_column("chatledger_messages", "format_version")
    op.drop_column("chatledger_sessions", "incarnation")
