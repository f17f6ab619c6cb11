"""Appending messages: dedupe, incremental annotation, token counting, one transaction.

An append never scans a session's history. It reads the session row (annotation
position, turn and tail), the unanswered calls whose ``call_id`` appears in the new
messages, and the groups those calls and the tail point to; everything else is written
from what :func:`strategies.groups.annotate` returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast
from weakref import WeakKeyDictionary

from sqlalchemy import Table, bindparam, delete, insert, select, update
from sqlalchemy.engine import Dialect, RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store._append_rows import (
    AppendContext,
    AppendTotals,
    DriverInsert,
    RowBuilder,
    insert_messages,
)
from store._cache import Key, session_key
from store._rows import chunks, lock_session, now
from store.errors import InvalidInput
from store.models import content_hash
from store.schema import GroupRow, MessageRow, OpenCallRow, SessionRow
from strategies.groups import (
    Annotation,
    AnnotationState,
    GroupInfo,
    Tail,
    annotate,
    call_ids,
    result_ids,
)
from strategies.messages import Message
from strategies.tokenizers import Tokenizer

__all__ = ["AppendContext", "Appended", "append_messages", "check_tokenizer", "load_state"]

MESSAGES = cast(Table, MessageRow.__table__)
GROUPS = cast(Table, GroupRow.__table__)
CALLS = cast(Table, OpenCallRow.__table__)
SESSIONS = cast(Table, SessionRow.__table__)


@dataclass(slots=True)
class _Loaded:
    """What an append reads besides the session row."""

    state: AnnotationState
    groups: dict[str, RowMapping]
    call_rows: set[str]
    wanted_calls: set[str]


def check_tokenizer(stored: str, tokenizer: Tokenizer, session_id: str) -> None:
    """Refuse to mix token counts of two tokenizers in one session."""
    if stored != tokenizer.name:
        raise InvalidInput(
            f"session {session_id!r} was counted with tokenizer {stored!r}, this store uses "
            f"{tokenizer.name!r}: open the store with {stored!r}, or call "
            f"recount({session_id!r}) to recount the session with {tokenizer.name!r}"
        )


def _keys(table: Table, ctx: AppendContext) -> tuple[Any, Any]:
    return (table.c.tenant == ctx.tenant, table.c.session_id == ctx.session_id)


def _bound_keys(table: Table, column: str) -> tuple[Any, ...]:
    """Tenant, session and ``column IN (:ids)`` as bound parameters (prebuilt statements)."""
    return (
        table.c.tenant == bindparam("tenant"),
        table.c.session_id == bindparam("session_id"),
        table.c[column].in_(bindparam("ids", expanding=True)),
    )


_STORED_HASHES = select(MESSAGES.c.message_id, MESSAGES.c.content_hash).where(
    *_bound_keys(MESSAGES, "message_id")
)
_OPEN_CALLS = select(CALLS.c.call_id, CALLS.c.group_id, CALLS.c.ambiguous).where(
    *_bound_keys(CALLS, "call_id")
)


async def _dedupe(
    conn: AsyncConnection, ctx: AppendContext, messages: Sequence[Message]
) -> tuple[list[Message], dict[str, str]]:
    """The messages not stored yet, and each one's content hash by id.

    Raises InvalidInput for an id reused with other content. Each message is hashed
    once; the hash is stored with the row.
    """
    hashes: dict[str, str] = {}
    unique: list[Message] = []
    for message in messages:
        digest = content_hash(message)
        known = hashes.get(message.message_id)
        if known is None:
            hashes[message.message_id] = digest
            unique.append(message)
        elif known != digest:
            raise InvalidInput(
                f"message id {message.message_id!r} appears twice in the batch "
                "with different content"
            )
    stored: dict[str, str] = {}
    params = {"tenant": ctx.tenant, "session_id": ctx.session_id}
    for part in chunks([m.message_id for m in unique]):
        found = await conn.execute(_STORED_HASHES, {**params, "ids": part})
        stored.update((row[0], row[1]) for row in found)
    fresh: list[Message] = []
    for message in unique:
        stored_digest = stored.get(message.message_id)
        if stored_digest is None:
            fresh.append(message)
        elif stored_digest != hashes[message.message_id]:
            raise InvalidInput(
                f"message id {message.message_id!r} is already stored in session "
                f"{ctx.session_id!r} with different content"
            )
    return fresh, hashes


def _group_info(row: RowMapping) -> GroupInfo:
    return GroupInfo(
        group_id=row["group_id"],
        kind=row["kind"],
        turn=row["turn"],
        first_position=row["first_position"],
        has_reasoning=row["has_reasoning"],
        pending_calls=row["pending_calls"],
        orphan=row["orphan"],
    )


def _referenced_calls(messages: Iterable[Message]) -> set[str]:
    wanted: set[str] = set()
    for message in messages:
        wanted.update(c for c in call_ids(message) if c is not None)
        wanted.update(result_ids(message))
    return wanted


async def load_state(
    conn: AsyncConnection, ctx: AppendContext, session: RowMapping, fresh: Sequence[Message]
) -> _Loaded:
    wanted = _referenced_calls(fresh)
    open_calls: dict[str, str] = {}
    ambiguous: set[str] = set()
    params = {"tenant": ctx.tenant, "session_id": ctx.session_id}
    for part in chunks(sorted(wanted)):
        found = await conn.execute(_OPEN_CALLS, {**params, "ids": list(part)})
        for call_id, group_id, is_ambiguous in found:
            if is_ambiguous or group_id is None:
                ambiguous.add(call_id)
            else:
                open_calls[call_id] = group_id
    group_ids = set(open_calls.values())
    if session["tail_group_id"] is not None:
        group_ids.add(session["tail_group_id"])
    groups: dict[str, RowMapping] = {}
    for part in chunks(sorted(group_ids)):
        query = select(GROUPS).where(*_keys(GROUPS, ctx), GROUPS.c.group_id.in_(part))
        groups.update((row["group_id"], row) for row in (await conn.execute(query)).mappings())
    infos = {gid: _group_info(row) for gid, row in groups.items()}
    tail = None
    if session["tail_group_id"] in infos:
        tail = Tail(infos[session["tail_group_id"]], session["tail_mode"])
    state = AnnotationState(
        position=session["position"],
        turn=session["turn"],
        open_calls=open_calls,
        ambiguous_calls=frozenset(ambiguous),
        pending_groups={gid: info for gid, info in infos.items() if info.pending_calls > 0},
        tail=tail,
    )
    return _Loaded(state, groups, set(open_calls) | ambiguous, wanted)


async def _apply_merges(
    conn: AsyncConnection,
    ctx: AppendContext,
    annotation: Annotation,
    loaded: _Loaded,
    totals: AppendTotals,
) -> dict[str, list[int]]:
    """Move the messages and calls of absorbed stored groups; return what each target gains."""
    gains: dict[str, list[int]] = {}
    for absorbed, target in annotation.merged.items():
        row = loaded.groups.get(absorbed)
        if row is None:
            continue
        into = loaded.groups.get(target)
        hidden = bool(into is not None and into["excluded"])
        await conn.execute(
            update(MESSAGES)
            .where(*_keys(MESSAGES, ctx), MESSAGES.c.group_id == absorbed)
            .values(
                group_id=target,
                excluded=hidden,
                excluded_reason=into["excluded_reason"] if into is not None else None,
                excluded_event_id=into["excluded_event_id"] if into is not None else None,
            )
        )
        if row["pinned"] and into is not None and not into["pinned"]:
            await conn.execute(
                update(GROUPS)
                .where(*_keys(GROUPS, ctx), GROUPS.c.group_id == target)
                .values(pinned=True)
            )
        if hidden != bool(row["excluded"]):
            # the absorbed messages take the target's state (a group is sent whole)
            sign = -1 if hidden else 1
            totals.active_messages += sign * row["message_count"]
            totals.active_tokens += sign * row["token_count"]
        await conn.execute(
            update(CALLS)
            .where(*_keys(CALLS, ctx), CALLS.c.group_id == absorbed)
            .values(group_id=target)
        )
        await conn.execute(delete(GROUPS).where(*_keys(GROUPS, ctx), GROUPS.c.group_id == absorbed))
        gain = gains.setdefault(target, [0, 0, 0])
        gain[0] += row["message_count"]
        gain[1] += row["token_count"]
        gain[2] += 0 if row["excluded"] else 1
    return gains


async def _write_groups(
    conn: AsyncConnection,
    ctx: AppendContext,
    session: RowMapping,
    annotation: Annotation,
    loaded: _Loaded,
    totals: AppendTotals,
    gains: dict[str, list[int]],
) -> None:
    stamp = now()
    inserts: list[dict[str, Any]] = []
    for group_id, info in annotation.groups.items():
        count, tokens = totals.per_group.get(group_id, [0, 0])
        gain = gains.get(group_id, [0, 0, 0])
        values = {
            "kind": info.kind,
            "turn": info.turn,
            "first_position": info.first_position,
            "has_reasoning": info.has_reasoning,
            "pending_calls": info.pending_calls,
            "orphan": info.orphan,
        }
        if group_id in loaded.groups:
            await conn.execute(
                update(GROUPS)
                .where(*_keys(GROUPS, ctx), GROUPS.c.group_id == group_id)
                .values(
                    message_count=GROUPS.c.message_count + count + gain[0],
                    token_count=GROUPS.c.token_count + tokens + gain[1],
                    **values,
                )
            )
            continue
        seq = session["next_seq"] + info.first_position - session["position"]
        inserts.append(
            {
                "tenant": ctx.tenant,
                "session_id": ctx.session_id,
                "group_id": group_id,
                "anchor": seq,
                "slot": 0,
                "first_seq": seq,
                "message_count": count + gain[0],
                "token_count": tokens + gain[1],
                "created_at": stamp,
                **values,
            }
        )
    if inserts:
        driver = _group_insert(conn.dialect, tuple(inserts[0]))
        for part in chunks(inserts):
            await conn.exec_driver_sql(driver.sql, [driver.row(r) for r in part])
    absorbed = [g for g in annotation.merged if g in loaded.groups]
    totals.groups = len(inserts) - len(absorbed)
    totals.active_groups = len(inserts) - sum(g[2] for g in gains.values())


_GROUP_INSERTS: WeakKeyDictionary[Dialect, dict[tuple[str, ...], DriverInsert]] = (
    WeakKeyDictionary()
)


def _group_insert(dialect: Dialect, columns: tuple[str, ...]) -> DriverInsert:
    """The group ``INSERT`` for ``dialect`` binding ``columns``, compiled once."""
    compiled = _GROUP_INSERTS.setdefault(dialect, {})
    found = compiled.get(columns)
    if found is None:
        found = compiled[columns] = DriverInsert.compile(insert(GROUPS), columns, dialect)
    return found


async def _write_calls(
    conn: AsyncConnection, ctx: AppendContext, state: AnnotationState, loaded: _Loaded
) -> None:
    stale = sorted(loaded.call_rows)
    for part in chunks(stale):
        await conn.execute(delete(CALLS).where(*_keys(CALLS, ctx), CALLS.c.call_id.in_(part)))
    rows: list[dict[str, Any]] = []
    for call_id in sorted(loaded.wanted_calls):
        if call_id in state.open_calls:
            group_id: str | None = state.open_calls[call_id]
            ambiguous = False
        elif call_id in state.ambiguous_calls:
            group_id, ambiguous = None, True
        else:
            continue
        rows.append(
            {
                "tenant": ctx.tenant,
                "session_id": ctx.session_id,
                "call_id": call_id,
                "group_id": group_id,
                "ambiguous": ambiguous,
            }
        )
    for batch in chunks(rows):
        await conn.execute(insert(CALLS), list(batch))


async def _write_session(
    conn: AsyncConnection,
    ctx: AppendContext,
    session: RowMapping,
    state: AnnotationState,
    totals: AppendTotals,
) -> None:
    c = SESSIONS.c
    tail = state.tail
    await conn.execute(
        update(SESSIONS)
        .where(*_keys(SESSIONS, ctx))
        .values(
            next_seq=session["next_seq"] + totals.messages,
            position=state.position,
            turn=state.turn,
            tail_group_id=tail.group.group_id if tail else None,
            tail_mode=tail.mode if tail else None,
            revision=c.revision + 1,
            updated_at=now(),
            stored_messages=c.stored_messages + totals.messages,
            stored_tokens=c.stored_tokens + totals.tokens,
            stored_groups=c.stored_groups + totals.groups,
            active_messages=c.active_messages + totals.active_messages,
            active_tokens=c.active_tokens + totals.active_tokens,
            active_groups=c.active_groups + totals.active_groups,
        )
    )


@dataclass(frozen=True, slots=True)
class Appended:
    """What an append wrote."""

    count: int
    """Messages stored (the others were stored already)."""
    before: Key
    """The session's cache key when the transaction began (the write adds one revision)."""
    touched: frozenset[str]
    """Groups whose messages changed: those that gained messages or absorbed others."""


async def append_messages(
    conn: AsyncConnection, ctx: AppendContext, messages: Sequence[Message]
) -> Appended:
    """Append ``messages`` inside the caller's write transaction."""
    session = await lock_session(
        conn, ctx.tenant, ctx.session_id, create_with_tokenizer=ctx.tokenizer.name
    )
    check_tokenizer(session["tokenizer"], ctx.tokenizer, ctx.session_id)
    fresh, hashes = await _dedupe(conn, ctx, messages)
    if not fresh:
        return Appended(0, session_key(session), frozenset())
    loaded = await load_state(conn, ctx, session, fresh)
    annotation = annotate(fresh, loaded.state)
    totals = AppendTotals()
    group_ids = [group_id for _, group_id in annotation.message_groups]
    builder = RowBuilder(ctx, session["next_seq"], fresh, hashes, group_ids, loaded.groups, totals)
    gains = await _apply_merges(conn, ctx, annotation, loaded, totals)
    await insert_messages(conn, builder)
    await _write_groups(conn, ctx, session, annotation, loaded, totals, gains)
    await _write_calls(conn, ctx, annotation.state, loaded)
    await _write_session(conn, ctx, session, annotation.state, totals)
    touched = {*group_ids, *annotation.groups, *annotation.merged, *annotation.merged.values()}
    return Appended(len(fresh), session_key(session), frozenset(touched))
