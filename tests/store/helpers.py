"""Helpers for the store tests: read raw rows, compare with the pure annotation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import Insert

from store import HistoryStore
from store.sql.schema import GROUPS, OPEN_CALLS
from strategies.groups import annotate
from strategies.messages import Message
from strategies.tokenizers import count_message_tokens

CALLS = OPEN_CALLS


async def group_rows(store: HistoryStore, session_id: str) -> dict[str, dict[str, Any]]:
    """The session's group rows, by id."""
    query = select(GROUPS).where(GROUPS.c.tenant == store.tenant, GROUPS.c.session_id == session_id)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return {row["group_id"]: dict(row) for row in rows}


async def open_call_rows(store: HistoryStore, session_id: str) -> dict[str, tuple[Any, bool]]:
    """The session's unanswered calls: call id to (group id, ambiguous)."""
    query = select(CALLS).where(CALLS.c.tenant == store.tenant, CALLS.c.session_id == session_id)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return {row["call_id"]: (row["group_id"], row["ambiguous"]) for row in rows}


def expected_groups(store: HistoryStore, messages: Sequence[Message]) -> dict[str, dict[str, Any]]:
    """What the groups table must hold after storing ``messages``: annotate them at once."""
    whole = annotate(messages)
    members: dict[str, list[int]] = {}
    for index, (_, group_id) in enumerate(whole.message_groups):
        members.setdefault(group_id, []).append(index)
    out: dict[str, dict[str, Any]] = {}
    for group_id, indexes in members.items():
        info = whole.groups[group_id]
        out[group_id] = {
            "kind": info.kind,
            "turn": info.turn,
            "anchor": info.first_position + 1,  # a joined early result is not first
            "message_count": len(indexes),
            "token_count": sum(
                count_message_tokens(messages[i], store.tokenizer, policy=store.policy)
                for i in indexes
            ),
            "pending_calls": info.pending_calls,
            "orphan": info.orphan,
            "has_reasoning": info.has_reasoning,
        }
    return out


def comparable(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Keep the columns :func:`expected_groups` states."""
    keys = (
        "kind",
        "turn",
        "anchor",
        "message_count",
        "token_count",
        "pending_calls",
        "orphan",
        "has_reasoning",
    )
    return {gid: {k: row[k] for k in keys} for gid, row in rows.items()}


def sqlalchemy_bound_rows(
    statement: Insert, columns: Sequence[str], dialect: Dialect, rows: list[dict[str, Any]]
) -> list[tuple[Any, ...]]:
    """What SQLAlchemy's execution context binds for ``rows`` (its own processors), in
    the statement's positional order: the reference for rows built as driver tuples."""
    compiled = statement.compile(dialect=dialect, column_keys=list(columns))
    processors: dict[str, Any] = dict(compiled._bind_processors)
    out: list[tuple[Any, ...]] = []
    for row in rows:
        params = compiled.construct_params(row)
        out.append(
            tuple(
                processors[key](params[key]) if key in processors else params[key]
                for key in compiled.positiontup or ()
            )
        )
    return out
