"""The append transaction: dedupe, incremental annotation, the rows, one write.

An append never scans a session's history. It reads the session row (annotation
position, turn and tail), the unanswered calls and the early results (results stored
before their call) whose ``call_id`` appears in the new messages, and the groups those
and the tail point to; everything else is written from what
:func:`strategies.groups.annotate` returns. An early result's group that compaction
excluded (or summarized) since is *frozen*: its call does not join it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Table, delete, insert, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store.rules.checks import check_tokenizer
from store.rules.identity import Deduped, dedupe, new_messages
from store.rules.records import now
from store.sql.annotation import Loaded, Prefetched, load_state, lock_and_prefetch, stored_hashes
from store.sql.append.counting import BackgroundCounts, count_in_background
from store.sql.append.inserts import Statement, execute_inserts, group_insert, message_insert
from store.sql.append.pipeline import insert_messages
from store.sql.append.rows import AppendContext, AppendTotals, NewGroups, RowBuilder
from store.sql.branches.sharing import keep_for_readers, move_inherited, refuse_tail
from store.sql.projection.cache import Key, session_key
from store.sql.schema import EARLY_RESULTS, FIRST_SEQ, GROUPS, MESSAGES, OPEN_CALLS
from store.sql.sessions import lock_session, lock_sessions
from store.sql.statements import (
    chunks,
    session_update,
)
from strategies.groups import (
    Annotation,
    AnnotationState,
    annotate,
    kind_is_settled,
)
from strategies.messages import Message

__all__ = [
    "GROUP_CHANGES",
    "SESSION_ADDED",
    "SESSION_VALUES",
    "AppendPlan",
    "Appended",
    "append_messages",
    "append_to_sessions",
    "plan_append",
    "planned_calls",
    "session_params",
]


def _keys(table: Table, ctx: AppendContext) -> tuple[Any, Any]:
    return (table.c.tenant == ctx.tenant, table.c.session_id == ctx.session_id)


async def _apply_merges(
    conn: AsyncConnection,
    ctx: AppendContext,
    annotation: Annotation,
    loaded: Loaded,
    totals: AppendTotals,
    pins: set[str],
    session: RowMapping,
) -> dict[str, list[int]]:
    """Move the messages, calls and early results of absorbed stored groups; return what
    each target gains. A pinned group's pin passes to the group absorbing it (recorded in
    ``pins`` when that group is new)."""
    gains: dict[str, list[int]] = {}
    for absorbed, target in annotation.merged.items():
        row = loaded.groups.get(absorbed)
        if row is None:
            continue
        into = loaded.groups.get(target)
        hidden = bool(into is not None and into["excluded"])
        moved = MESSAGES.c.group_id == absorbed
        await keep_for_readers(conn, ctx.tenant, session, moved)
        if session["branch"] is not None:  # the inherited rows move in this branch only
            await move_inherited(conn, ctx.tenant, ctx.session_id, absorbed, target)
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
        if row["pinned"] and into is None:
            pins.add(target)
        if row["pinned"] and into is not None and not into["pinned"]:
            await conn.execute(
                update(GROUPS)
                .where(*_keys(GROUPS, ctx), GROUPS.c.group_id == target)
                .values(pinned=True, written_revision=session["revision"] + 1)
            )
        if hidden != bool(row["excluded"]):
            # the absorbed messages take the target's state (a group is sent whole)
            sign = -1 if hidden else 1
            totals.active_messages += sign * row["message_count"]
            totals.active_tokens += sign * row["token_count"]
        for table in (OPEN_CALLS, EARLY_RESULTS):
            await conn.execute(
                update(table)
                .where(*_keys(table, ctx), table.c.group_id == absorbed)
                .values(group_id=target)
            )
        await conn.execute(delete(GROUPS).where(*_keys(GROUPS, ctx), GROUPS.c.group_id == absorbed))
        gain = gains.setdefault(target, [0, 0, 0])
        gain[0] += row["message_count"]
        gain[1] += row["token_count"]
        gain[2] += 0 if row["excluded"] else 1
    return gains


def _new_groups(
    ctx: AppendContext,
    session: Mapping[Any, Any],
    annotation: Annotation,
    loaded: Loaded,
    totals: AppendTotals,
    gains: dict[str, list[int]],
) -> NewGroups:
    """The groups the append creates, each written once its messages are built."""
    last = {group_id: index for index, (_, group_id) in enumerate(annotation.message_groups)}
    return NewGroups(
        ctx,
        first_seq=session["next_seq"] - session["position"],
        groups=[info for gid, info in annotation.groups.items() if gid not in loaded.groups],
        last=last,
        totals=totals,
        gains=gains,
        revision=session["revision"] + 1,
    )


def _group_changes(
    annotation: Annotation, loaded: Loaded, totals: AppendTotals, gains: dict[str, list[int]]
) -> list[tuple[Any, ...]]:
    """What the append changes in each stored group it touches: its id, the messages and
    tokens it adds, then :data:`GROUP_CHANGES`' values."""
    changes: list[tuple[Any, ...]] = []
    for group_id, info in annotation.groups.items():
        if group_id not in loaded.groups:
            continue
        count, tokens = totals.per_group.get(group_id, [0, 0])
        gain = gains.get(group_id, [0, 0, 0])
        changes.append(
            (
                group_id,
                count + gain[0],
                tokens + gain[1],
                info.kind,
                info.turn,
                info.first_position,
                info.has_reasoning,
                info.pending_calls,
                info.orphan,
            )
        )
    return changes


GROUP_CHANGES: Final = (
    "kind",
    "turn",
    "first_position",
    "has_reasoning",
    "pending_calls",
    "orphan",
)
"""What an append sets in a stored group it changes (besides adding to its counts)."""


def _count_groups(
    annotation: Annotation,
    loaded: Loaded,
    totals: AppendTotals,
    gains: dict[str, list[int]],
    created: int,
) -> None:
    """Count the groups the append created, less those it absorbed."""
    absorbed = [g for g in annotation.merged if g in loaded.groups]
    totals.groups = created - len(absorbed)
    totals.active_groups = created - sum(g[2] for g in gains.values())


async def _update_groups(
    conn: AsyncConnection,
    ctx: AppendContext,
    annotation: Annotation,
    loaded: Loaded,
    totals: AppendTotals,
    gains: dict[str, list[int]],
    created: int,
    revision: int,
) -> None:
    """Update the stored groups the append changed (written at ``revision``); count the
    groups it created."""
    for group_id, count, tokens, *values in _group_changes(annotation, loaded, totals, gains):
        await conn.execute(
            update(GROUPS)
            .where(*_keys(GROUPS, ctx), GROUPS.c.group_id == group_id)
            .values(
                message_count=GROUPS.c.message_count + count,
                token_count=GROUPS.c.token_count + tokens,
                written_revision=revision,
                **dict(zip(GROUP_CHANGES, values, strict=True)),
            )
        )
    _count_groups(annotation, loaded, totals, gains, created)


def _call_rows(ctx: AppendContext, state: AnnotationState, loaded: Loaded) -> list[dict[str, Any]]:
    """The open-call rows of the call ids the append referenced, as the state has them."""
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
    return rows


def _early_rows(ctx: AppendContext, state: AnnotationState, loaded: Loaded) -> list[dict[str, Any]]:
    """The early-result rows of the call ids the append referenced, as the state has them."""
    return [
        {
            "tenant": ctx.tenant,
            "session_id": ctx.session_id,
            "call_id": call_id,
            "group_id": state.early_results[call_id],
        }
        for call_id in sorted(loaded.wanted_calls)
        if call_id in state.early_results
    ]


async def _insert_all(conn: AsyncConnection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    for batch in chunks(rows):
        await conn.execute(insert(table), list(batch))


async def _write_calls(
    conn: AsyncConnection, ctx: AppendContext, state: AnnotationState, loaded: Loaded
) -> None:
    """Replace the open calls and early results of the call ids the append referenced
    by the state's."""
    for part in chunks(sorted(loaded.call_rows)):
        await conn.execute(
            delete(OPEN_CALLS).where(*_keys(OPEN_CALLS, ctx), OPEN_CALLS.c.call_id.in_(part))
        )
    await _insert_all(conn, OPEN_CALLS, _call_rows(ctx, state, loaded))
    for part in chunks(sorted(loaded.early_rows)):
        await conn.execute(
            delete(EARLY_RESULTS).where(
                *_keys(EARLY_RESULTS, ctx), EARLY_RESULTS.c.call_id.in_(part)
            )
        )
    await _insert_all(conn, EARLY_RESULTS, _early_rows(ctx, state, loaded))


SESSION_VALUES: Final = ("next_seq", "position", "turn", "tail_group_id", "tail_mode", "updated_at")
"""The session row's columns an append (or taking one back) sets (``v_<column>``)."""
SESSION_ADDED: Final = (
    "stored_messages",
    "stored_tokens",
    "stored_groups",
    "active_messages",
    "active_tokens",
    "active_groups",
)
"""The session row's columns an append (or taking one back) adds to (``d_<column>``)."""
_WRITE_SESSION = session_update(SESSION_VALUES, SESSION_ADDED, counters=(), chained=True)
_WRITE_MERGED = session_update(SESSION_VALUES, SESSION_ADDED, counters=())
"""The session's update after an append that absorbed stored groups (outside the chain)."""


def session_params(
    ctx: AppendContext, session: Mapping[Any, Any], state: AnnotationState, totals: AppendTotals
) -> dict[str, Any]:
    """The parameters of the session row's update after the append (``w_`` its key,
    ``v_`` a column's new value, ``d_`` what is added to one)."""
    tail = state.tail
    return {
        "w_tenant": ctx.tenant,
        "w_session_id": ctx.session_id,
        "v_next_seq": session["next_seq"] + totals.messages,
        "v_position": state.position,
        "v_turn": state.turn,
        "v_tail_group_id": tail.group.group_id if tail else None,
        "v_tail_mode": tail.mode if tail else None,
        "v_updated_at": now(),
        "d_stored_messages": totals.messages,
        "d_stored_tokens": totals.tokens,
        "d_stored_groups": totals.groups,
        "d_active_messages": totals.active_messages,
        "d_active_tokens": totals.active_tokens,
        "d_active_groups": totals.active_groups,
    }


@dataclass(frozen=True, slots=True)
class Appended:
    """What an append wrote."""

    count: int
    """Messages stored (the others were stored already)."""
    before: Key | None
    """The session's cache key when the transaction began (the write adds one revision);
    None when the write landed after others this store has not read (the cache catches
    up through the session's write chain)."""
    touched: frozenset[str]
    """Groups whose messages changed: those that gained messages or absorbed others."""
    tokens: int = 0
    """Tokens of the messages stored."""
    written: WrittenRows | None = None
    """The session row and the new groups' rows as the write left them, where it
    returned them and they are every row it wrote of those (None: not known)."""


@dataclass(frozen=True, slots=True)
class WrittenRows:
    """The rows an append wrote, as a read would give them."""

    session: Mapping[str, Any]
    groups: Sequence[Mapping[str, Any]]


async def append_messages(
    conn: AsyncConnection, ctx: AppendContext, messages: Sequence[Message]
) -> Appended:
    """Append ``messages`` inside the caller's write transaction."""
    prefetched = await lock_and_prefetch(conn, ctx.tenant, ctx.session_id, messages)
    if prefetched is None:
        session = await lock_session(
            conn, ctx.tenant, ctx.session_id, create_with_tokenizer=ctx.tokenizer.name
        )
        prefetched = Prefetched(session, None, None)
    session = prefetched.session
    check_tokenizer(session["tokenizer"], ctx.tokenizer.name, ctx.session_id)
    refuse_tail(session)
    blank = session["next_seq"] == FIRST_SEQ  # nothing stored: no hashes, calls, groups
    stored = prefetched.hashes
    if stored is None:
        stored = (
            {}
            if blank
            else await stored_hashes(conn, ctx.tenant, ctx.session_id, messages, session)
        )
    fresh = new_messages(messages, stored)
    counts = count_in_background(ctx, fresh)
    try:
        deduped = dedupe(ctx.session_id, messages, stored)
        if not fresh:
            return Appended(0, session_key(session), frozenset())
        return await _store_fresh(conn, ctx, session, fresh, deduped, counts, prefetched.calls)
    finally:
        if counts is not None:
            counts.close()


def _settled_kinds(
    fresh: Sequence[Message], group_ids: Sequence[str], annotation: Annotation
) -> list[str | None]:
    """Each message's group kind where the message settles it (else None)."""
    groups = annotation.groups
    return [
        groups[group_id].kind if group_id in groups and kind_is_settled(message) else None
        for message, group_id in zip(fresh, group_ids, strict=True)
    ]


async def _planned(
    conn: AsyncConnection,
    ctx: AppendContext,
    session: Mapping[Any, Any],
    fresh: Sequence[Message],
    deduped: Deduped,
    calls: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[Loaded, Annotation, RowBuilder]:
    """The state the append reads (the ``calls`` read with the session row, when
    given), its annotation, and the builder of its message rows."""
    loaded = await load_state(conn, ctx.tenant, ctx.session_id, session, fresh, calls)
    annotation = annotate(fresh, loaded.state, frozen=loaded.frozen)
    group_ids = [group_id for _, group_id in annotation.message_groups]
    builder = RowBuilder(
        ctx,
        session["next_seq"],
        fresh,
        deduped.hashes,
        group_ids,
        _settled_kinds(fresh, group_ids, annotation),
        loaded.groups,
        AppendTotals(),
        contents=deduped.contents,
    )
    return loaded, annotation, builder


async def _store_fresh(
    conn: AsyncConnection,
    ctx: AppendContext,
    session: RowMapping,
    fresh: Sequence[Message],
    deduped: Deduped,
    counts: BackgroundCounts | None,
    calls: Sequence[Mapping[str, Any]] | None,
) -> Appended:
    loaded, annotation, builder = await _planned(conn, ctx, session, fresh, deduped, calls)
    totals, group_ids = builder.totals, builder.group_ids
    pins: set[str] = set()
    gains = await _apply_merges(conn, ctx, annotation, loaded, totals, pins, session)
    created = _new_groups(ctx, session, annotation, loaded, totals, gains)
    await insert_messages(conn, builder, created, counts)
    revision = created.revision
    if pins:
        await conn.execute(
            update(GROUPS)
            .where(*_keys(GROUPS, ctx), GROUPS.c.group_id.in_(sorted(pins)))
            .values(pinned=True, written_revision=revision)
        )
    created_count = len(created.groups)
    await _update_groups(conn, ctx, annotation, loaded, totals, gains, created_count, revision)
    await _write_calls(conn, ctx, annotation.state, loaded)
    # an append that absorbed stored groups deleted their rows, which no later read of
    # the rows written since can tell: it breaks the write chain
    write = _WRITE_MERGED if annotation.merged else _WRITE_SESSION
    await conn.execute(write, session_params(ctx, session, annotation.state, totals))
    touched = {*group_ids, *annotation.groups, *annotation.merged, *annotation.merged.values()}
    return Appended(len(fresh), session_key(session), frozenset(touched), totals.tokens)


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """Every row an append writes, built before any is written (an append that merges
    no stored group: see :func:`plan_append`)."""

    loaded: Loaded
    annotation: Annotation
    totals: AppendTotals
    messages: list[tuple[Any, ...]]
    """The message rows, in :data:`~store.sql.append.inserts.MESSAGE_COLUMNS` order."""
    groups: list[tuple[Any, ...]]
    """The new groups' rows, in :data:`~store.sql.append.inserts.GROUP_COLUMNS` order."""
    changed: list[tuple[Any, ...]]
    """The stored groups changed: id, messages and tokens added, :data:`GROUP_CHANGES`."""
    appended: Appended


async def plan_append(
    conn: AsyncConnection,
    ctx: AppendContext,
    session: Mapping[Any, Any],
    fresh: Sequence[Message],
    deduped: Deduped,
    counts: BackgroundCounts | None,
    calls: Sequence[Mapping[str, Any]] | None,
) -> AppendPlan | None:
    """The rows of an append of ``fresh`` messages to ``session`` as
    :func:`append_messages` writes them, built whole; None when the annotation merges
    stored groups (whose moves are written as they are found)."""
    loaded, annotation, builder = await _planned(conn, ctx, session, fresh, deduped, calls)
    if annotation.merged:
        return None
    totals, dialect_ = builder.totals, conn.dialect
    counted = await counts.get(0, len(fresh)) if counts is not None else None
    messages = builder.rows(0, len(fresh), message_insert(dialect_), counted)
    created = _new_groups(ctx, session, annotation, loaded, totals, {})
    groups = created.ready(len(fresh), group_insert(dialect_), final=True)
    changed = _group_changes(annotation, loaded, totals, {})
    _count_groups(annotation, loaded, totals, {}, len(created.groups))
    touched = frozenset({*builder.group_ids, *annotation.groups})
    appended = Appended(len(fresh), session_key(session), touched, totals.tokens)
    return AppendPlan(loaded, annotation, totals, messages, groups, changed, appended)


def planned_calls(
    ctx: AppendContext, plan: AppendPlan
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[str], list[str]]:
    """The open calls and early results the append leaves of the call ids it referenced
    (``call_id, group_id, ambiguous`` and ``call_id, group_id``), and the ids of each
    read that it drops."""
    state = plan.annotation.state
    calls = [
        (r["call_id"], r["group_id"], r["ambiguous"]) for r in _call_rows(ctx, state, plan.loaded)
    ]
    early = [(r["call_id"], r["group_id"]) for r in _early_rows(ctx, state, plan.loaded)]
    gone_calls = sorted(plan.loaded.call_rows - {row[0] for row in calls})
    gone_early = sorted(plan.loaded.early_rows - {row[0] for row in early})
    return calls, early, gone_calls, gone_early


@dataclass(slots=True)
class _Blank:
    """An append to a session that stores nothing yet, planned for the bulk write."""

    ctx: AppendContext
    session: RowMapping
    fresh: list[Message]
    deduped: Deduped
    counts: BackgroundCounts | None


async def append_to_sessions(
    conn: AsyncConnection, items: Sequence[tuple[AppendContext, Sequence[Message]]]
) -> list[Appended]:
    """Append to many sessions of one tenant inside the caller's write transaction: the
    importer's bulk path. What each session gets is what :func:`append_messages` would
    store, returned in the order of ``items``.

    The sessions that store nothing yet (an import's usual case), each named once, are
    written together: their rows are locked (and created) in two statements, and every
    session's messages, groups, open calls and session row go out in one statement a
    table, so that PostgreSQL takes one ``COPY`` of all the messages rather than a small
    ``INSERT`` a session. Any other session is appended on its own afterwards.
    """
    if not items:
        return []
    named = Counter(ctx.session_id for ctx, _ in items)
    single = [ctx for ctx, _ in items if named[ctx.session_id] == 1]
    sessions: dict[str, RowMapping] = {}
    if single:
        tokenizer = single[0].tokenizer.name
        sessions = await lock_sessions(
            conn,
            single[0].tenant,
            [ctx.session_id for ctx in single],
            create_with_tokenizer=tokenizer,
        )
    done: dict[int, Appended] = {}
    blanks: list[tuple[int, _Blank]] = []
    try:
        for index, (ctx, messages) in enumerate(items):
            session = sessions.get(ctx.session_id) if named[ctx.session_id] == 1 else None
            if session is None or session["next_seq"] != FIRST_SEQ:
                continue
            check_tokenizer(session["tokenizer"], ctx.tokenizer.name, ctx.session_id)
            deduped = dedupe(ctx.session_id, messages, {})
            fresh = new_messages(messages, {})
            blanks.append(
                (index, _Blank(ctx, session, fresh, deduped, count_in_background(ctx, fresh)))
            )
        done.update(
            zip(
                [i for i, _ in blanks],
                await _write_blanks(conn, [b for _, b in blanks]),
                strict=True,
            )
        )
    finally:
        for _, blank in blanks:
            if blank.counts is not None:
                blank.counts.close()
    for index, (ctx, messages) in enumerate(items):
        if index not in done:
            done[index] = await append_messages(conn, ctx, messages)
    return [done[index] for index in range(len(items))]


async def _write_blanks(conn: AsyncConnection, blanks: Sequence[_Blank]) -> list[Appended]:
    """Annotate and build the rows of every blank session, then write them together."""
    binds, group_binds = message_insert(conn.dialect), group_insert(conn.dialect)
    messages: list[tuple[Any, ...]] = []
    groups: list[tuple[Any, ...]] = []
    calls: list[dict[str, Any]] = []
    early: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    appended: list[Appended] = []
    for blank in blanks:
        ctx, session, fresh = blank.ctx, blank.session, blank.fresh
        planned = await _planned(conn, ctx, session, fresh, blank.deduped)  # blank: no reads
        loaded, annotation, builder = planned
        totals, group_ids = builder.totals, builder.group_ids
        counted = await blank.counts.get(0, len(fresh)) if blank.counts is not None else None
        messages += builder.rows(0, len(fresh), binds, counted)
        created = _new_groups(ctx, session, annotation, loaded, totals, {})
        groups += created.ready(len(fresh), group_binds, final=True)
        totals.groups = totals.active_groups = len(created.groups)
        calls += _call_rows(ctx, annotation.state, loaded)
        early += _early_rows(ctx, annotation.state, loaded)
        updates.append(session_params(ctx, session, annotation.state, totals))
        touched = frozenset({*group_ids, *annotation.groups})
        appended.append(Appended(len(fresh), session_key(session), touched, totals.tokens))
    statements: list[Statement] = [(binds, messages), (group_binds, groups)]
    await execute_inserts(conn, [(i, rows) for i, rows in statements if rows])
    await _insert_all(conn, OPEN_CALLS, calls)
    await _insert_all(conn, EARLY_RESULTS, early)
    if updates:
        await conn.execute(_WRITE_SESSION, updates)
    return appended
