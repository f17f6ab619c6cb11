"""A page of search hits from the index (:mod:`store.sql.search.index`).

One statement finds the matching rows of the session's owners (or of the tenant) and
their scores in the index: FTS5's ``bm25`` (SQLite) or ``ts_rank`` (PostgreSQL). A
tenant-wide search, and a search of a root, read those rows themselves, each stored
once, with the exclusion its owner mirrors in the row; a branch's search reads its
conversation (:func:`~store.sql.branches.rows.conversation`) limited to the matches,
with its own exclusion state. Both order the page as :mod:`store.search.request`
says, in SQL, and cut it by the cursor's offset; the hits are built by
:func:`store.search.hits.make_hit`, as every backend builds them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    and_,
    bindparam,
    column,
    exists,
    func,
    literal_column,
    select,
    table,
    true,
    tuple_,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import ColumnElement, Select

from store.errors import SessionNotFound
from store.models import SearchHit, SearchPage
from store.search.hits import make_hit, page_of, resume_at
from store.search.query import to_fts5, to_tsquery
from store.search.request import SearchRequest
from store.sql import dialect
from store.sql.branches.rows import Lineage, conversation, lineage_of
from store.sql.mapping import COLUMN_INDEX, message_columns, original_message
from store.sql.schema import BRANCH_ROWS, LINEAGE, MESSAGES, SESSIONS
from store.sql.search.index import FTS_TABLE, VECTOR_TABLE
from store.sql.sessions import SESSION_COLUMNS

__all__ = ["search_page"]

_FTS = table(FTS_TABLE, column("rowid"))
_SIMPLE: ColumnElement[Any] = literal_column("'simple'::regconfig")
_ROWID: ColumnElement[Any] = literal_column("chatledger_messages.rowid")
_VECTORS = table(
    VECTOR_TABLE, column("tenant"), column("session_id"), column("seq"), column("vector")
)


def _matching(
    full_text: str, tenant: Any, owners: Any | None
) -> tuple[Any, list[ColumnElement[bool]], Any]:
    """What finds the matching rows of ``owners`` (every owner of the tenant when None),
    in an index of kind ``full_text``: the ``FROM``, the conditions, and the score
    (higher is better); the query is bound as ``q``."""
    m = MESSAGES.c
    if full_text == "tsvector":
        v = _VECTORS.c
        query = func.to_tsquery(_SIMPLE, bindparam("q"))
        where = [v.tenant == tenant, v.vector.op("@@")(query)]
        if owners is not None:
            where.append(v.session_id.in_(owners))
        on = and_(m.tenant == v.tenant, m.session_id == v.session_id, m.seq == v.seq)
        return _VECTORS.join(MESSAGES, on), where, func.ts_rank(v.vector, query)
    where = [m.tenant == tenant, m.search_text.is_not(None)]
    if owners is not None:
        where.append(m.session_id.in_(owners))
    rank = -func.bm25(literal_column(FTS_TABLE), type_=Float)
    match = literal_column(FTS_TABLE).op("MATCH")(bindparam("q"))
    return _FTS.join(MESSAGES, _ROWID == _FTS.c.rowid), [match, *where], rank


def _matches(conn: AsyncConnection, tenant: str, owners: Sequence[str]) -> Any:
    """The matching rows of ``owners``: their ``owner``, ``seq`` and ``score``."""
    m = MESSAGES.c
    source, where, score = _matching(dialect.of(conn).full_text, tenant, list(owners))
    found = select(m.session_id.label("owner"), m.seq, score.label("score"))
    return found.select_from(source).where(*where).subquery("matched")


def _filters(request: SearchRequest, columns: Mapping[str, Any]) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if not request.include_excluded:
        where.append(columns["excluded"].is_(False))
    if request.excluded_only:
        where.append(columns["excluded"].is_(True))
    if request.roles is not None:
        where.append(columns["role"].in_(list(request.roles)))
    return where


def _order(score: Any, when: Any, seq: Any, owner: Any) -> tuple[Any, ...]:
    """Best first, ties newest first, then by place (:mod:`store.search.request`)."""
    return score.desc(), when.desc(), seq.desc(), owner


@functools.cache
def _stored_page(
    full_text: str, scoped: bool, include_excluded: bool, excluded_only: bool, roles: bool
) -> Select[Any]:
    """The page of matching rows read as stored (a root's, or the tenant's), in one
    statement over the index and the rows: the page's places found and ordered first,
    then only their rows read whole (reading every matching row's texts to keep 21 of
    them took PostgreSQL 1.8 times the time of the search itself). Built once for each
    shape; bound: ``tenant``, ``q``, ``owners`` (scoped), ``roles``, ``offset``,
    ``limit``."""
    m = MESSAGES.c
    tenant: Any = bindparam("tenant")
    owners: Any = bindparam("owners", expanding=True) if scoped else None
    source, where, score = _matching(full_text, tenant, owners)
    if not include_excluded:
        where.append(m.excluded.is_(False))
    if excluded_only:
        where.append(m.excluded.is_(True))
    if roles:
        where.append(m.role.in_(bindparam("roles", expanding=True)))
    when = func.coalesce(m.created_at, m.stored_at)
    page = (
        select(m.session_id, m.seq, score.label("score"), when.label("at"))
        .select_from(source)
        .where(*where)
        .order_by(*_order(score, when, m.seq, m.session_id))
        .offset(bindparam("offset", type_=Integer))
        .limit(bindparam("limit", type_=Integer))
        .subquery("page")
    )
    p = page.c
    on = and_(m.tenant == tenant, m.session_id == p.session_id, m.seq == p.seq)
    return (
        select(*message_columns(), m.session_id.label("owner_session_id"), p.score)
        .select_from(page.join(MESSAGES, on))
        .order_by(*_order(p.score, p.at, p.seq, p.session_id))
    )


def _stored_params(
    tenant: str, owners: Sequence[str] | None, request: SearchRequest, offset: int
) -> dict[str, Any]:
    params: dict[str, Any] = {"tenant": tenant, "offset": offset, "limit": request.limit + 1}
    if owners is not None:
        params["owners"] = list(owners)
    if request.roles is not None:
        params["roles"] = list(request.roles)
    return params


def _branch_page(
    tenant: str, lineage: Lineage, matched: Any, request: SearchRequest, offset: int
) -> Select[Any]:
    """The page of matching rows of a branch's conversation, with its own state of each."""
    pairs = select(matched.c.owner, matched.c.seq)

    def where(columns: Mapping[str, ColumnElement[Any]]) -> list[ColumnElement[bool]]:
        return [tuple_(columns["owner"], columns["seq"]).in_(pairs), *_filters(request, columns)]

    rows = conversation(tenant, lineage, where).subquery("conversation")
    on = and_(rows.c.owner_session_id == matched.c.owner, rows.c.seq == matched.c.seq)
    when = func.coalesce(rows.c.created_at, rows.c.stored_at)
    columns = [rows.c[c.key] for c in rows.c if c.key != "group_kind"]
    return (
        select(*columns, matched.c.score)
        .select_from(rows.join(matched, on))
        .order_by(*_order(matched.c.score, when, rows.c.seq, rows.c.owner_session_id))
        .offset(offset)
        .limit(request.limit + 1)
    )


async def _shown_under(conn: AsyncConnection, tenant: str, owners: set[str]) -> dict[str, str]:
    """Tenant-wide, the session a kept holder's rows are shown under: the first branch
    (by id) that reads them."""
    s, lin = SESSIONS.c, LINEAGE.c
    kept = select(s.session_id).where(
        s.tenant == tenant, s.session_id.in_(sorted(owners)), s.branch == "kept"
    )
    readers = (
        select(lin.owner_session_id, func.min(lin.session_id))
        .where(lin.tenant == tenant, lin.owner_session_id.in_(kept))
        .group_by(lin.owner_session_id)
    )
    return {str(owner): str(reader) for owner, reader in await conn.execute(readers)}


_SEQ = COLUMN_INDEX["seq"]
_GROUP = COLUMN_INDEX["group_id"]
_EXCLUDED = COLUMN_INDEX["excluded"]
_EVENT = COLUMN_INDEX["excluded_event_id"]
_WIDTH = len(message_columns())


def _hit(tenant: str, request: SearchRequest, row: Sequence[Any], shown_as: str) -> SearchHit:
    owner = str(row[_WIDTH])
    message = original_message(row[:_WIDTH], tenant=tenant, session_id=owner)
    return make_hit(
        request.query,
        message,
        session_id=shown_as,
        seq=int(row[_SEQ]),
        group_id=str(row[_GROUP]),
        excluded=bool(row[_EXCLUDED]),
        excluded_by=row[_EVENT],
        score=float(row[-1]),
    )


async def search_page(
    conn: AsyncConnection,
    tenant: str,
    request: SearchRequest,
    session_id: str | None,
    key: bytes,
) -> SearchPage:
    """The page of hits ``request`` asks for (the tenant's, or ``session_id``'s), its
    cursors signed with ``key`` (:func:`~store.sql.search.index.cursor_key`).

    A search scoped to a session is one statement when the session is a root that holds
    only its own rows (:func:`_root_page`: its row, and its page when it is such a
    root); a branch's, or a rewound root's, then reads its lineage and its own page."""
    offset = resume_at(key, request, session_id)
    full_text = dialect.of(conn).full_text
    shape = (request.include_excluded, request.excluded_only, request.roles is not None)
    params = _stored_params(tenant, None if session_id is None else [session_id], request, offset)
    params["q"] = _compiled(conn, request)
    if session_id is None:
        found = (await conn.execute(_stored_page(full_text, False, *shape), params)).all()
        kept = found[: request.limit]  # one more says whether a next page exists
        shown = await _shown_under(conn, tenant, {str(r[_WIDTH]) for r in kept})
        hits = [_hit(tenant, request, r, shown.get(str(r[_WIDTH]), str(r[_WIDTH]))) for r in kept]
        return page_of(key, request, None, offset, hits, more=len(found) > request.limit)
    params["session_id"] = session_id
    rows = (await conn.execute(_root_page(full_text, *shape), params)).all()
    if not rows:
        raise SessionNotFound(session_id, tenant=tenant)
    session = dict(zip(_SESSION_KEYS, rows[0][:_SESSION_WIDTH], strict=True))
    if session["branch"] is None and not session["has_members"]:
        found = [r[_SESSION_WIDTH:] for r in rows if r[_SESSION_WIDTH + _WIDTH] is not None]
        hits = [_hit(tenant, request, r, session_id) for r in found[: request.limit]]
        return page_of(key, request, session_id, offset, hits, more=len(found) > request.limit)
    # a branch, or a root rewound past summaries it keeps (held under the tail now):
    # its conversation, not every row of the sessions it reads from
    lineage = await lineage_of(conn, tenant, session)
    members = await _members_owners(conn, tenant, session_id) if session["has_members"] else []
    owners = sorted({session_id, *(owner for owner, _, _ in lineage.segments), *members})
    query = _branch_page(tenant, lineage, _matches(conn, tenant, owners), request, offset)
    found = (await conn.execute(query, {"q": params["q"]})).all()
    hits = [_hit(tenant, request, r, session_id) for r in found[: request.limit]]
    return page_of(key, request, session_id, offset, hits, more=len(found) > request.limit)


_HAS_MEMBERS = (
    exists()
    .where(
        BRANCH_ROWS.c.tenant == bindparam("tenant"),
        BRANCH_ROWS.c.session_id == bindparam("session_id"),
        BRANCH_ROWS.c.member,
    )
    .label("has_members")
)
_SESSION_KEYS = (*(c.key for c in SESSION_COLUMNS), "has_members")
_SESSION_WIDTH = len(_SESSION_KEYS)


@functools.cache
def _root_page(
    full_text: str, include_excluded: bool, excluded_only: bool, roles: bool
) -> Select[Any]:
    """The session's row and whether it holds rows beyond its lineage, each beside the
    session's page of hits read as stored (:func:`_stored_page`), which is read only
    when the session is a root that holds only its own rows (the condition is
    evaluated once, before the page): one round trip for the common scoped search.
    No row: no such session; one row with no message: a session without hits, or one
    whose page needs its lineage."""
    s = SESSIONS.c
    session = (
        select(*SESSION_COLUMNS, _HAS_MEMBERS)
        .where(s.tenant == bindparam("tenant"), s.session_id == bindparam("session_id"))
        .cte("scope")
    )
    alone = (
        select(literal_column("1"))
        .select_from(session)
        .where(session.c.branch.is_(None), session.c.has_members.is_(False))
        .exists()
    )
    page = (
        _stored_page(full_text, True, include_excluded, excluded_only, roles)
        .where(alone)
        .subquery("hits")
    )
    h = page.c
    when = func.coalesce(h.created_at, h.stored_at)
    return (
        select(*session.c, *page.c)
        .select_from(session.outerjoin(page, true()))
        .order_by(*_order(h.score, when, h.seq, h.owner_session_id))
    )


async def _members_owners(conn: AsyncConnection, tenant: str, session_id: str) -> list[str]:
    """Owners of rows the branch holds beyond its lineage (summaries it kept)."""
    b = BRANCH_ROWS.c
    query = (
        select(b.owner_session_id)
        .where(b.tenant == tenant, b.session_id == session_id, b.member)
        .distinct()
    )
    return [str(r[0]) for r in await conn.execute(query)]


def _compiled(conn: AsyncConnection, request: SearchRequest) -> str:
    if dialect.of(conn).full_text == "tsvector":
        return to_tsquery(request.query)
    return to_fts5(request.query)
