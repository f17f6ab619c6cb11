"""A fork in SQL: a session row, copies of the source's groups, and a lineage; no
message row is written.

:func:`fork_session` runs in one write transaction with the source's row locked. It
reads the source's rows after the cut (none for a fork at the end), the groups those
rows share with the prefix (split groups: refused when a tool exchange would be parted,
else annotated again), and the source's summary groups; then copies the prefix's group
rows, unanswered calls, waiting results and (for a source that is a fork) its own
state of inherited rows, in a few ``INSERT ... SELECT`` statements. Its time grows
with the source's groups and with its rows after the cut, not with the prefix's rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, insert, literal, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import ColumnElement

from store.errors import InvalidInput
from store.models import CompactionEvent, SessionInfo
from store.rules.branching import FORK_STRATEGY, check_cut, summary_fates, trimmed_group
from store.sql.audit import write_event
from store.sql.branches.resealing import reseal_in_place
from store.sql.branches.rows import Filter, Lineage, conversation, read_lineage
from store.sql.codec import decode_session_metadata, decode_title, encode_title
from store.sql.mapping import COLUMN_INDEX, session_from_row, stored_message
from store.sql.schema import (
    BRANCH_ROWS,
    EARLY_RESULTS,
    GROUPS,
    LINEAGE,
    OPEN_CALLS,
    SESSIONS,
)
from store.sql.sessions import incarnation, metadata_value, read_session
from store.sql.statements import chunks
from strategies.groups import GroupInfo, Tail
from strategies.messages import Message

__all__ = [
    "Cut",
    "carried_summaries",
    "fork_session",
    "locate",
    "resolve_cut",
    "shape_groups",
]

_SEQ = COLUMN_INDEX["seq"]
_SLOT = COLUMN_INDEX["slot"]
_GROUP = COLUMN_INDEX["group_id"]
_ROLE = COLUMN_INDEX["role"]
_MESSAGE_ID = COLUMN_INDEX["message_id"]
_TOKENS = COLUMN_INDEX["token_count"]
_REDUCED_TOKENS = COLUMN_INDEX["reduced_token_count"]
_WIDTH = len(COLUMN_INDEX)


async def locate(
    conn: AsyncConnection, tenant: str, lineage: Lineage, message_id: str | None
) -> Sequence[Any] | None:
    """The row of ``message_id`` in the conversation (None: its last appended message),
    or None when it holds no such message."""
    if message_id is None:
        query = conversation(tenant, lineage, lambda c: [c["slot"] == 0]).subquery()
        ordered = select(query).order_by(query.c.seq.desc()).limit(1)
    else:
        query = conversation(tenant, lineage, message_ids=[message_id])
        ordered = query
    return (await conn.execute(ordered)).first()


@dataclass
class Cut:
    """Where a fork or a rewind cuts a conversation, and what that leaves out."""

    lineage: Lineage
    """The conversation cut (the source's, or one of its tails')."""
    row: Sequence[Any] | None
    """The cut message's row; None for an empty conversation."""
    after: list[Sequence[Any]] = field(default_factory=list)
    """The conversation's rows after the cut (light columns)."""
    split: dict[str, tuple[GroupInfo, Tail | None, int, int]] = field(default_factory=dict)
    """Groups with members on both sides, trimmed: their info before the cut, the tail
    after it, and their messages and tokens before it."""
    tail: Tail | None = None
    """The annotation tail after the cut (when the cut is not the last message)."""

    @property
    def seq(self) -> int:
        return 0 if self.row is None else int(self.row[_SEQ])

    @property
    def message_id(self) -> str | None:
        return None if self.row is None else str(self.row[_MESSAGE_ID])

    @property
    def at_end(self) -> bool:
        """No appended message comes after the cut."""
        return not any(r[_SLOT] == 0 for r in self.after)


async def resolve_cut(
    conn: AsyncConnection,
    tenant: str,
    session: RowMapping,
    at: str | None,
    *,
    verb: str,
    tails: bool,
    start: bool = False,
) -> Cut:
    """Find the cut ``at`` in the session's conversation (with ``tails``, also in its
    superseded tails'), check it, and read what lies after it. ``at`` None is the last
    appended message, or with ``start`` the start of the conversation."""
    session_id = session["session_id"]
    lineage = await read_lineage(conn, tenant, session_id)
    if at is None and start:
        every = conversation(tenant, lineage).subquery()
        whole: list[Sequence[Any]] = list(
            (await conn.execute(select(every).order_by(every.c.seq))).all()
        )
        return Cut(lineage, None, whole)
    row = await locate(conn, tenant, lineage, at)
    if row is None and at is not None and tails:
        for tail_id in await _tails(conn, tenant, session_id):
            tail_lineage = await read_lineage(conn, tenant, tail_id)
            row = await locate(conn, tenant, tail_lineage, at)
            if row is not None:
                lineage = tail_lineage
                break
    if row is None and at is not None:
        raise InvalidInput(f"cannot {verb} session {session_id!r}: no message {at!r} in it")
    if row is not None and row[_SLOT] != 0:
        raise InvalidInput(
            f"cannot {verb} session {session_id!r} at message {at!r}: it is a summary"
        )
    cut = Cut(lineage, row)
    if row is None:
        return cut
    seq = cut.seq
    later = conversation(tenant, lineage, lambda c: [c["seq"] > seq]).subquery()
    cut.after = list((await conn.execute(select(later).order_by(later.c.seq))).all())
    after_groups = {r[_GROUP] for r in cut.after if r[_SLOT] == 0}
    spanning: set[str] = set()
    for part in chunks(sorted(after_groups)):
        before = conversation(tenant, lineage, _upto(seq), groups=list(part)).subquery()
        spanning.update(g for (g,) in await conn.execute(select(before.c.group_id).distinct()))
    at_group = str(row[_GROUP])
    for group_id in sorted(spanning | {at_group}):
        members = await _members(conn, tenant, lineage, group_id)
        before_rows = [r for r in members if r[_SEQ] <= seq]
        after_rows = [r for r in members if r[_SEQ] > seq]
        before_messages = [_message(r, tenant, lineage.session_id) for r in before_rows]
        check_cut(
            verb,
            session_id,
            str(row[_MESSAGE_ID]),
            before_messages,
            [_message(r, tenant, lineage.session_id) for r in after_rows],
        )
        group = await _group(conn, tenant, lineage.session_id, group_id)
        info, tail = trimmed_group(
            before_messages, turn=group["turn"], first_position=group["first_position"]
        )
        tokens = sum(
            int(r[_REDUCED_TOKENS] if r[_REDUCED_TOKENS] is not None else r[_TOKENS])
            for r in before_rows
        )
        if group_id == at_group:
            cut.tail = tail
        if after_rows:
            cut.split[group_id] = (info, tail, len(before_rows), tokens)
    return cut


def _upto(seq: int) -> Filter:
    def where(c: Mapping[str, ColumnElement[Any]]) -> list[ColumnElement[bool]]:
        return [c["seq"] <= seq]

    return where


async def _tails(conn: AsyncConnection, tenant: str, session_id: str) -> list[str]:
    s = SESSIONS.c
    query = (
        select(s.session_id)
        .where(s.tenant == tenant, s.parent_session_id == session_id, s.branch == "tail")
        .order_by(s.created_at)
    )
    return [str(r[0]) for r in await conn.execute(query)]


async def _members(
    conn: AsyncConnection, tenant: str, lineage: Lineage, group_id: str
) -> list[Sequence[Any]]:
    query = conversation(tenant, lineage, groups=[group_id]).subquery()
    return list((await conn.execute(select(query).order_by(query.c.seq))).all())


async def _group(conn: AsyncConnection, tenant: str, session_id: str, group_id: str) -> RowMapping:
    query = select(GROUPS).where(
        GROUPS.c.tenant == tenant,
        GROUPS.c.session_id == session_id,
        GROUPS.c.group_id == group_id,
    )
    return (await conn.execute(query)).mappings().one()


def _message(row: Sequence[Any], tenant: str, session_id: str) -> Message:
    """The stored message of a conversation row (not its reduction)."""
    return stored_message(
        row[:_WIDTH], str(row[_WIDTH]), tenant=tenant, session_id=session_id
    ).message


async def carried_summaries(
    conn: AsyncConnection, tenant: str, cut: Cut
) -> tuple[list[str], list[str]]:
    """The summary groups of the cut conversation that the prefix keeps, and those it
    drops (:func:`~store.rules.branching.summary_fates`, the summaries in the order
    they were stored): the prefix's groups are those begun at or before the cut, whole
    unless the cut splits them. A summary's own row lies after the cut, yet a summary
    of carried summaries is carried too."""
    g = GROUPS.c
    query = select(g.first_seq, g.group_id, g.summary_of).where(
        g.tenant == tenant, g.session_id == cut.lineage.session_id, g.kind == "summary"
    )
    summaries = sorted(
        (int(first), str(group_id), [str(r) for r in summary_of or ()])
        for first, group_id, summary_of in await conn.execute(query)
    )
    ids = {group_id for _, group_id, _ in summaries}
    after = {r[_GROUP] for r in cut.after}
    replaced = {r for _, _, some in summaries for r in some}
    # of the groups a summary replaced, those begun at or before the cut: wholly
    # before it, or split by it
    prefix = {r for r in replaced if r not in ids and (r not in after or r in cut.split)}
    return summary_fates(
        ((group_id, some) for _, group_id, some in summaries), prefix, prefix - set(cut.split)
    )


async def shape_groups(
    conn: AsyncConnection, tenant: str, session_id: str, cut: Cut, dropped: Sequence[str]
) -> None:
    """Make the prefix's group rows of ``session_id`` what the cut leaves: split groups
    trimmed, the groups of dropped summaries active again."""
    keys = (GROUPS.c.tenant == tenant, GROUPS.c.session_id == session_id)
    for group_id, (info, _, messages, tokens) in cut.split.items():
        await conn.execute(
            update(GROUPS)
            .where(*keys, GROUPS.c.group_id == group_id)
            .values(
                kind=info.kind,
                has_reasoning=info.has_reasoning,
                pending_calls=info.pending_calls,
                orphan=info.orphan,
                message_count=messages,
                token_count=tokens,
            )
        )
    if dropped:
        await conn.execute(
            update(GROUPS)
            .where(*keys, GROUPS.c.summarized_by.in_(list(dropped)))
            .values(
                excluded=False, excluded_reason=None, excluded_event_id=None, summarized_by=None
            )
        )


async def fork_session(
    conn: AsyncConnection,
    tenant: str,
    source: RowMapping,
    cut: Cut,
    new_session_id: str,
    *,
    event_id: str,
    now: datetime,
) -> SessionInfo:
    """Write the fork ``new_session_id`` of ``source`` at ``cut`` (checked)."""
    src = cut.lineage.session_id
    seq = cut.seq
    g = GROUPS.c
    await conn.execute(
        insert(SESSIONS).values(
            tenant=tenant,
            session_id=new_session_id,
            created_at=now,
            updated_at=now,
            incarnation=incarnation(),
            metadata=metadata_value(
                tenant,
                new_session_id,
                decode_session_metadata(tenant, source["session_id"], source["metadata"]),
            ),
            title=encode_title(
                tenant,
                new_session_id,
                decode_title(tenant, source["session_id"], source["title"]),
            ),
            tokenizer=source["tokenizer"],
            branch="fork",
            parent_session_id=source["session_id"],
            fork_message_id=cut.message_id,
            branch_event_id=event_id,
        )
    )
    kept_summaries, dropped = await carried_summaries(conn, tenant, cut)
    # the prefix's groups: every non-summary group begun at or before the cut, and the
    # carried summaries
    copy_where = and_(
        g.tenant == tenant,
        g.session_id == src,
        (and_(g.first_seq <= seq, g.kind != "summary")) | g.group_id.in_(kept_summaries or [""]),
    )
    copied = [c for c in GROUPS.c if c.key not in ("tenant", "session_id")]
    await conn.execute(
        insert(GROUPS).from_select(
            ["tenant", "session_id", *(c.key for c in copied)],
            select(literal(tenant), literal(new_session_id), *copied).where(copy_where),
        )
    )
    await shape_groups(conn, tenant, new_session_id, cut, dropped)
    keys = (GROUPS.c.tenant == tenant, GROUPS.c.session_id == new_session_id)
    # calls and waiting results of the prefix's groups
    in_fork = select(GROUPS.c.group_id).where(*keys)
    for table in (OPEN_CALLS, EARLY_RESULTS):
        columns = [c for c in table.c if c.key not in ("tenant", "session_id")]
        await conn.execute(
            insert(table).from_select(
                ["tenant", "session_id", *(c.key for c in columns)],
                select(literal(tenant), literal(new_session_id), *columns).where(
                    table.c.tenant == tenant,
                    table.c.session_id == src,
                    table.c.group_id.in_(in_fork) | table.c.group_id.is_(None),
                ),
            )
        )
    # lineage, and the source's own state of what the fork inherits
    pairs = cut.lineage.cut(seq)
    if pairs:
        await conn.execute(
            insert(LINEAGE),
            [
                {
                    "tenant": tenant,
                    "session_id": new_session_id,
                    "owner_session_id": owner,
                    "through_seq": through,
                }
                for owner, through in pairs
            ],
        )
    b = BRANCH_ROWS.c
    copied_rows = [c for c in BRANCH_ROWS.c if c.key not in ("tenant", "session_id")]
    for owner, through in pairs:
        await conn.execute(
            insert(BRANCH_ROWS).from_select(
                ["tenant", "session_id", *(c.key for c in copied_rows)],
                select(literal(tenant), literal(new_session_id), *copied_rows).where(
                    b.tenant == tenant,
                    b.session_id == src,
                    b.owner_session_id == owner,
                    b.seq <= through,
                    b.member.is_(False),
                ),
            )
        )
    await reseal_in_place(conn, tenant, BRANCH_ROWS, b.session_id == new_session_id)
    members: dict[tuple[str, int], str] = {}
    if kept_summaries:
        held = select(b.owner_session_id, b.seq, b.group_id).where(
            b.tenant == tenant,
            b.session_id == src,
            b.member.is_(True),
            b.group_id.in_(kept_summaries),
        )
        members.update(((o, int(q)), gid) for o, q, gid in await conn.execute(held))
        members.update(
            ((str(r[-1]), int(r[_SEQ])), str(r[_GROUP]))
            for r in cut.after
            if r[_SLOT] != 0 and r[_GROUP] in kept_summaries
        )
    if members:
        await conn.execute(
            insert(BRANCH_ROWS),
            [
                {
                    "tenant": tenant,
                    "session_id": new_session_id,
                    "owner_session_id": owner,
                    "seq": member_seq,
                    "group_id": group_id,
                    "member": True,
                }
                for (owner, member_seq), group_id in sorted(members.items())
            ],
        )
    owners = {owner for owner, _ in pairs} | {owner for owner, _ in members}
    if owners:
        await conn.execute(
            update(SESSIONS)
            .where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id.in_(sorted(owners)))
            .values(shared=True)
        )
    # the session row and its first event
    state = source if src == source["session_id"] else await read_session(conn, tenant, src)
    totals = await _totals(conn, tenant, new_session_id)
    gone = [r for r in cut.after if not (r[_SLOT] != 0 and r[_GROUP] in kept_summaries)]
    gone_tokens = sum(int(r[_TOKENS]) for r in gone)
    if dropped:
        early = conversation(tenant, cut.lineage, _upto(seq), groups=dropped).subquery()
        gone_tokens += int(
            (await conn.execute(select(func.coalesce(func.sum(early.c.token_count), 0)))).scalar()
            or 0
        )
    appended_after = [r for r in cut.after if r[_SLOT] == 0]
    position = int(state["position"]) - len(appended_after)
    turn = int(state["turn"]) - sum(1 for r in appended_after if r[_ROLE] == "user")
    if cut.at_end:
        tail_group_id, tail_mode = state["tail_group_id"], state["tail_mode"]
    else:
        tail_group_id = None if cut.tail is None else cut.tail.group.group_id
        tail_mode = None if cut.tail is None else cut.tail.mode
    top = max([seq, *(member_seq for _, member_seq in members)])
    inherited = {
        "groups": totals["groups"],
        "excluded_groups": totals["groups"] - totals["active_groups"],
        "summaries": len(kept_summaries),
        "reductions": await _reductions(conn, tenant, new_session_id, pairs),
        "pins": totals["pins"],
    }
    values: dict[str, Any] = {
        "revision": 1,
        "next_seq": top + 1,
        "position": position,
        "turn": turn,
        "tail_group_id": tail_group_id,
        "tail_mode": tail_mode,
        "event_count": 1,
        "stored_messages": totals["messages"],
        "stored_groups": totals["groups"],
        "stored_tokens": int(state["stored_tokens"]) - gone_tokens,
        "active_messages": totals["active_messages"],
        "active_groups": totals["active_groups"],
        "active_tokens": totals["active_tokens"],
    }
    await conn.execute(
        update(SESSIONS)
        .where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == new_session_id)
        .values(**values)
    )
    event = CompactionEvent(
        id=event_id,
        session_id=new_session_id,
        tenant=tenant,
        phase="fork",
        strategy=FORK_STRATEGY,
        params={
            "source_session_id": source["session_id"],
            "at": cut.message_id,
            "inherited": inherited,
            "dropped_summaries": dropped,
        },
        messages_before=0,  # the fork held nothing before its first event
        messages_after=totals["active_messages"],
        groups_before=0,
        groups_after=totals["active_groups"],
        tokens_before=0,
        tokens_after=totals["active_tokens"],
        created_at=now,
    )
    await write_event(conn, tenant, new_session_id, event, number=1, revision=1)
    return session_from_row(await read_session(conn, tenant, new_session_id))


async def _totals(conn: AsyncConnection, tenant: str, session_id: str) -> dict[str, int]:
    g = GROUPS.c
    rows = (
        await conn.execute(
            select(g.message_count, g.token_count, g.excluded, g.pinned).where(
                g.tenant == tenant, g.session_id == session_id
            )
        )
    ).all()
    return {
        "groups": len(rows),
        "messages": sum(int(r[0]) for r in rows),
        "active_groups": sum(1 for r in rows if not r[2]),
        "active_messages": sum(int(r[0]) for r in rows if not r[2]),
        "active_tokens": sum(int(r[1]) for r in rows if not r[2]),
        "pins": sum(1 for r in rows if r[3]),
    }


async def _reductions(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    pairs: Sequence[tuple[str, int]],
) -> int:
    """The reduced messages the fork ``session_id`` inherits (through ``pairs``)."""
    lineage = Lineage(
        session_id,
        tuple(
            (owner, pairs[i - 1][1] if i else 0, through)
            for i, (owner, through) in enumerate(pairs)
        ),
    )

    def reduced(columns: Mapping[str, ColumnElement[Any]]) -> list[ColumnElement[bool]]:
        return [columns["reduced_event_id"].is_not(None)]

    rows = conversation(tenant, lineage, reduced).subquery()
    return int((await conn.execute(select(func.count()).select_from(rows))).scalar() or 0)
