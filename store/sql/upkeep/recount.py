"""Recounting a session's tokens with another tokenizer (or policy).

Token counts are cached per message and never mixed across tokenizers. Recounting is
the one operation that reads a whole session: it walks the messages page by page,
writes the new counts, then rebuilds the group and session totals from them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store.contract import PAGE_SIZE
from store.rules.records import now
from store.sql.branches.sharing import refuse_shared, refuse_tail
from store.sql.history import read_history
from store.sql.schema import GROUPS, MESSAGES, SESSIONS
from store.sql.sessions import lock_session
from strategies.tokenizers import TokenCountPolicy, Tokenizer, count_message_tokens

__all__ = ["rebuild_totals", "recount_session"]


async def _recount_messages(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    tokenizer: Tokenizer,
    policy: TokenCountPolicy,
) -> None:
    statement = (
        update(MESSAGES)
        .where(
            MESSAGES.c.tenant == bindparam("b_tenant"),
            MESSAGES.c.session_id == bindparam("b_session"),
            MESSAGES.c.seq == bindparam("b_seq"),
        )
        .values(token_count=bindparam("b_tokens"), reduced_token_count=bindparam("b_reduced"))
    )
    after: int | None = None
    while True:
        page = await read_history(
            conn, tenant, session_id, include_excluded=True, limit=PAGE_SIZE, after=after
        )
        if not page:
            return
        params: list[dict[str, Any]] = []
        for stored in page:
            reduced = stored.reduced
            params.append(
                {
                    "b_tenant": tenant,
                    "b_session": session_id,
                    "b_seq": stored.seq,
                    "b_tokens": count_message_tokens(stored.message, tokenizer, policy=policy),
                    "b_reduced": (
                        None
                        if reduced is None
                        else count_message_tokens(reduced, tokenizer, policy=policy)
                    ),
                }
            )
        await conn.execute(statement, params)
        after = page[-1].seq


def _effective_tokens() -> Any:
    return func.coalesce(MESSAGES.c.reduced_token_count, MESSAGES.c.token_count)


async def rebuild_totals(conn: AsyncConnection, tenant: str, session_id: str) -> None:
    """Rebuild every group's and the session's totals (messages, groups and tokens,
    stored and active) from the message rows, and record the write (revision, time)."""
    same_group = and_(
        MESSAGES.c.tenant == GROUPS.c.tenant,
        MESSAGES.c.session_id == GROUPS.c.session_id,
        MESSAGES.c.group_id == GROUPS.c.group_id,
    )
    group_tokens = (
        select(func.coalesce(func.sum(_effective_tokens()), 0)).where(same_group).scalar_subquery()
    )
    group_messages = select(func.count()).where(same_group).scalar_subquery()
    await conn.execute(
        update(GROUPS)
        .where(GROUPS.c.tenant == tenant, GROUPS.c.session_id == session_id)
        .values(token_count=group_tokens, message_count=group_messages)
    )
    in_session = (MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == session_id)
    stored_messages, stored = (
        await conn.execute(
            select(func.count(), func.coalesce(func.sum(MESSAGES.c.token_count), 0)).where(
                *in_session
            )
        )
    ).one()
    await write_totals(
        conn, tenant, session_id, stored_messages=int(stored_messages), stored_tokens=int(stored)
    )


async def write_totals(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    stored_messages: int,
    stored_tokens: int,
) -> None:
    """Write the session's totals, its stored messages and tokens as given and the rest
    from its group rows (which hold their counts already), and record the write
    (revision, time)."""
    groups_in_session = (GROUPS.c.tenant == tenant, GROUPS.c.session_id == session_id)
    stored_groups = (
        await conn.execute(select(func.count()).where(*groups_in_session))
    ).scalar_one()
    active_groups, active_messages, active = (
        await conn.execute(
            select(
                func.count(),
                func.coalesce(func.sum(GROUPS.c.message_count), 0),
                func.coalesce(func.sum(GROUPS.c.token_count), 0),
            ).where(*groups_in_session, GROUPS.c.excluded.is_(False))
        )
    ).one()
    await conn.execute(
        update(SESSIONS)
        .where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id)
        .values(
            stored_messages=stored_messages,
            stored_groups=int(stored_groups),
            stored_tokens=stored_tokens,
            active_messages=int(active_messages),
            active_groups=int(active_groups),
            active_tokens=int(active),
            revision=SESSIONS.c.revision + 1,
            updated_at=now(),
        )
    )


async def recount_session(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    tokenizer: Tokenizer,
    policy: TokenCountPolicy,
) -> None:
    """Recount every message of the session and record ``tokenizer`` as its tokenizer."""
    session = await lock_session(conn, tenant, session_id)
    refuse_tail(session)
    await refuse_shared(conn, tenant, session, "recount")
    await _recount_messages(conn, tenant, session_id, tokenizer, policy)
    await rebuild_totals(conn, tenant, session_id)
    await conn.execute(
        update(SESSIONS)
        .where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id)
        .values(tokenizer=tokenizer.name)
    )
