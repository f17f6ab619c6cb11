"""A compaction's write-back in one statement (PostgreSQL), against the write transaction.

The same turns are appended and compacted in two sessions, with a context-window
strategy small enough that most turns' compactions exclude groups and insert summaries
of tool results. One session's write-backs go in one statement; the other's are made to
fall back (the one statement gives None) and go through the write transaction. The two
sessions must then be the same, row by row (messages, groups, the session's counters
and totals, the events and their links), and the one statement must have been used.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
from sqlalchemy import event, text

import store.sql.compaction.compactor as compactor
import store.sql.compaction.mirror as mirror
from store import HistoryStore
from store.sql.compaction.one_statement import MOVED
from strategies import ContextWindowCompactionStrategy
from strategies.changeset import ChangeSet, SummaryInsert
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conformance.toy_strategies import ExcludeOldest, Fixed
from tests.groups.support import assistant, call, result, tool, user

pytestmark = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)]
)

_MESSAGE_COLUMNS = (
    "seq, anchor, slot, message_id, role, CAST(contents AS text) AS contents, group_id, "
    "group_kind, token_count, excluded, excluded_reason"
)
_GROUP_COLUMNS = (
    "group_id, kind, turn, anchor, slot, first_seq, first_position, message_count, "
    "token_count, pinned, excluded, excluded_reason, summarized_by, summary_of"
)
_SESSION_COLUMNS = (
    "next_seq, revision, event_count, stored_messages, stored_groups, stored_tokens, "
    "active_messages, active_groups, active_tokens"
)
_EVENT_COLUMNS = (
    "number, phase, strategy, messages_before, messages_after, groups_before, "
    "groups_after, tokens_before, tokens_after, revision, outcome"
)


def _turn(n: int) -> list[Message]:
    found = " ".join(f"line {i} of what the search found for turn {n}" for i in range(150))
    return [
        user(f"u{n}", f"question {n}: " + "why " * 30),
        assistant(f"c{n}", call(f"k{n}", "search")),
        tool(f"t{n}", result(f"k{n}", found)),
        assistant(f"a{n}", f"answer {n}: " + "because " * 30),
    ]


async def _rows(store: HistoryStore, session_id: str) -> dict[str, Any]:
    """The session's rows, event ids left out (each write-back draws its own)."""
    queries = {
        "messages": f"SELECT {_MESSAGE_COLUMNS} FROM chatledger_messages"
        " WHERE session_id = :s ORDER BY seq",
        "groups": f"SELECT {_GROUP_COLUMNS} FROM chatledger_groups"
        " WHERE session_id = :s ORDER BY group_id",
        "session": f"SELECT {_SESSION_COLUMNS} FROM chatledger_sessions WHERE session_id = :s",
        "events": f"SELECT {_EVENT_COLUMNS} FROM chatledger_events"
        " WHERE session_id = :s ORDER BY number",
        "links": "SELECT e.number, l.group_id, l.action FROM chatledger_event_groups AS l"
        " JOIN chatledger_events AS e ON e.tenant = l.tenant"
        " AND e.session_id = l.session_id AND e.event_id = l.event_id"
        " WHERE l.session_id = :s ORDER BY e.number, l.group_id, l.action",
    }
    async with store.engine.connect() as conn:
        return {
            name: [tuple(r) for r in await conn.execute(text(sql), {"s": session_id})]
            for name, sql in queries.items()
        }


def _event_statements(store: HistoryStore) -> list[str]:
    """The statements of ``store`` that write an event, from now on, each named by its
    first ``WITH`` query (``written_session``: the one statement; ``written_event``:
    the write transaction's)."""
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "INSERT INTO chatledger_events" in statement:
            statements.append(statement.split()[1])

    event.listen(store.engine.sync_engine, "before_cursor_execute", record)
    return statements


async def _compacted(store: HistoryStore, session_id: str, turns: int) -> int:
    """Append and compact ``turns`` turns; how many compactions wrote."""
    strategy = ContextWindowCompactionStrategy(
        max_context_window_tokens=8_000, max_output_tokens=500, keep_last_tool_call_groups=1
    )
    wrote = 0
    for n in range(turns):
        await store.append(session_id, _turn(n))
        wrote += await store.compact(session_id, strategy, phase="after_run") is not None
        await store.context(session_id)
    return wrote


async def test_one_statement_writes_what_the_transaction_writes(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        statements = _event_statements(store)
        wrote = await _compacted(store, "one", 12)
        at_once = list(statements)

        async def never(*args: Any, **kwargs: Any) -> None:
            return None

        monkeypatch.setattr(f"{compactor.__name__}.write_back_in_one_statement", never)
        statements.clear()
        assert await _compacted(store, "two", 12) == wrote
        in_transactions = list(statements)
        monkeypatch.undo()
        one, two = await _rows(store, "one"), await _rows(store, "two")
        assert (await store.doctor("one")).findings == ()
        assert (await store.doctor("two")).findings == ()
    assert wrote >= 8, "the strategy should have compacted in most turns"
    # every write-back of the first session in its one statement, which begins with
    # the session row's gate; the second's in the write transaction's event statement
    assert at_once == ["written_session"] * wrote, at_once
    assert in_transactions == ["written_event"] * wrote, in_transactions
    summaries = [m for m in one["messages"] if m[7] == "summary"]
    assert summaries, "the strategy should have summarized tool results"
    assert any(m[9] for m in one["messages"]), "the strategy should have excluded groups"
    for name in one:
        assert one[name] == two[name], name


async def _interleaved(
    store: HistoryStore, other: HistoryStore, session_id: str, turns: int
) -> int:
    """:func:`_compacted`, with ``other`` appending a turn of its own to the session
    each time a compaction has planned, before its apply's first step (the read of the
    groups it touches or, made from the snapshot, its one statement): the plan was made
    before that append; how many compactions wrote."""
    appended: list[int] = []

    def after_another_append(through: Callable[..., Awaitable[Any]]) -> Any:
        async def step(*args: Any, **kwargs: Any) -> Any:
            if not appended or appended[-1] != len(pending):
                appended.append(len(pending))
                await other.append(session_id, _turn(1_000 + len(pending)))
            return await through(*args, **kwargs)

        return step

    pending: list[int] = []
    strategy = ContextWindowCompactionStrategy(
        max_context_window_tokens=8_000, max_output_tokens=500, keep_last_tool_call_groups=1
    )
    wrote = 0
    with pytest.MonkeyPatch.context() as patch:
        for name in ("lock_with_groups", "write_back_in_one_statement"):
            step = after_another_append(getattr(compactor, name))
            patch.setattr(f"{compactor.__name__}.{name}", step)
        for n in range(turns):
            await store.append(session_id, _turn(n))
            pending.append(n)  # one append of the other writer during this compaction
            wrote += await store.compact(session_id, strategy, phase="after_run") is not None
    return wrote


async def test_a_plan_lands_after_another_writers_append(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store appends between a compaction's snapshot and its read without a
    lock: what of the plan still applies to the groups as read (all of it: the append
    adds groups of its own) is written in one statement, and the session is what the
    write transaction makes of the same interleaving."""
    tokenizer = CharacterEstimatorTokenizer()
    async with (
        HistoryStore.open(db_url, tokenizer=tokenizer) as store,
        HistoryStore.open(db_url, tokenizer=tokenizer) as other,
    ):
        statements = _event_statements(store)
        wrote = await _interleaved(store, other, "one", 10)
        at_once = list(statements)

        async def never(*args: Any, **kwargs: Any) -> None:
            return None

        monkeypatch.setattr(f"{compactor.__name__}.write_back_in_one_statement", never)
        statements.clear()
        assert await _interleaved(store, other, "two", 10) == wrote
        in_transactions = list(statements)
        monkeypatch.undo()
        one, two = await _rows(store, "one"), await _rows(store, "two")
        assert (await store.doctor("one")).findings == ()
    assert wrote >= 6, "the strategy should have compacted in most turns"
    assert at_once == ["written_session"] * wrote, at_once
    assert in_transactions == ["written_event"] * wrote, in_transactions
    ids = [m[3] for m in one["messages"]]
    assert ids.index("u4") < ids.index("u1005") < ids.index("u5")  # during the 5th compaction
    for name in one:
        assert one[name] == two[name], name


@asynccontextmanager
async def _three_turns(db_url: str) -> AsyncIterator[tuple[HistoryStore, HistoryStore]]:
    """Two stores on one database, the first having appended three turns to ``s`` and
    projected them."""
    tokenizer = CharacterEstimatorTokenizer()
    async with (
        HistoryStore.open(db_url, tokenizer=tokenizer) as store,
        HistoryStore.open(db_url, tokenizer=tokenizer) as other,
    ):
        for n in range(3):
            await store.append("s", _turn(n))
        await store.context("s")
        yield store, other


def _once_first(
    meanwhile: Callable[[], Awaitable[Any]],
    through: Callable[..., Awaitable[Any]],
    done: list[object],
    results: list[object],
) -> Callable[..., Awaitable[Any]]:
    """``through`` (a step of the compaction), first running ``meanwhile`` (once: what
    it gives in ``done``); each call's result goes in ``results`` (a compaction run by
    ``meanwhile`` goes through it too, first)."""

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(None)  # a call made by ``meanwhile`` comes through here
            done[0] = await meanwhile()
        result = await through(*args, **kwargs)
        results.append(result)
        return result

    return wrapped


def _once_the_other_compacts(
    other: HistoryStore,
    through: Callable[..., Awaitable[Any]],
    compacted: list[object],
    results: list[object],
) -> Callable[..., Awaitable[Any]]:
    """:func:`_once_first`, ``other`` excluding the two oldest groups of ``s``."""
    return _once_first(lambda: other.compact("s", ExcludeOldest(2)), through, compacted, results)


def _first_in_the_apply(
    patch: pytest.MonkeyPatch,
    meanwhile: Callable[[], Awaitable[Any]],
    done: list[object],
    written: list[object] | None = None,
) -> None:
    """Run ``meanwhile`` once (what it gives in ``done``), before the first step of a
    compaction's apply after its plan: its read without a lock or, where its snapshot
    holds what that read reads (this store wrote the session last), its one statement
    (whose results go in ``written``)."""
    steps = {
        "lock_with_groups": (mirror.lock_with_groups, []),
        "write_back_in_one_statement": (
            compactor.write_back_in_one_statement,
            [] if written is None else written,
        ),
    }
    for name, (through, results) in steps.items():
        patch.setattr(
            f"{compactor.__name__}.{name}", _once_first(meanwhile, through, done, results)
        )


async def _group_ids(store: HistoryStore, session_id: str) -> list[str]:
    """The session's group ids in stored order."""
    query = "SELECT group_id FROM chatledger_groups WHERE session_id = :s ORDER BY first_seq"
    async with store.engine.connect() as conn:
        return list((await conn.execute(text(query), {"s": session_id})).scalars())


def _transactions(store: HistoryStore, patch: pytest.MonkeyPatch) -> list[object]:
    """The write transactions ``store`` runs from now on (while ``patch`` lasts)."""
    transactions: list[object] = []
    write = store._write

    async def counted(operation: Any) -> Any:
        transactions.append(operation)
        return await write(operation)

    patch.setattr(store, "_write", counted)
    return transactions


async def test_a_plan_another_writer_carried_out_meanwhile_ends_without_a_write(
    db_url: str,
) -> None:
    """Another store carries the same plan out between a compaction's snapshot and its
    apply: the one statement made from the snapshot writes nothing (its groups were
    written since), the read without a lock shows the plan done, and the compaction
    ends there, with no write transaction (which would queue for the session's row to
    find the same)."""
    async with _three_turns(db_url) as (store, other):
        compacted: list[object] = []
        written: list[object] = []
        with pytest.MonkeyPatch.context() as patch:
            transactions = _transactions(store, patch)
            meanwhile = partial(other.compact, "s", ExcludeOldest(2))
            _first_in_the_apply(patch, meanwhile, compacted, written)
            assert await store.compact("s", ExcludeOldest(2)) is None
        assert transactions == [] and compacted[0] is not None
        assert written[1:] == [MOVED]  # the other's statement, then this store's
        events = await store.audit("s")
        assert [e.outcome for e in events] == ["applied"]  # the other's, once
        assert {g.group_id for g in await store.excluded("s")} == set(events[0].excluded)


async def _appended_before_each_statement(
    store: HistoryStore, other: HistoryStore, session_id: str, turns: int, *, at_once: bool
) -> int:
    """:func:`_compacted`, with ``other`` appending a turn of its own to the session
    after each compaction's read without a lock and before its one statement (with
    ``at_once``; else the write transaction takes over there); how many compactions
    wrote."""
    write = compactor.write_back_in_one_statement
    appended: list[int] = []

    async def after_another_append(*args: Any, **kwargs: Any) -> Any:
        appended.append(len(appended))
        await other.append(session_id, _turn(2_000 + len(appended)))
        return await write(*args, **kwargs) if at_once else None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(f"{compactor.__name__}.write_back_in_one_statement", after_another_append)
        return await _compacted(store, session_id, turns)


async def test_a_statement_lands_after_an_append_made_since_its_read(db_url: str) -> None:
    """Another store appends between a compaction's read and its one statement: the
    statement lands after that append (every write since was of the write chain and
    wrote no group the plan read), its summary's message after the appended ones, its
    event numbered and totalled as the row is written; the session is what the write
    transaction makes of the same interleaving, row by row."""
    tokenizer = CharacterEstimatorTokenizer()
    async with (
        HistoryStore.open(db_url, tokenizer=tokenizer) as store,
        HistoryStore.open(db_url, tokenizer=tokenizer) as other,
    ):
        statements = _event_statements(store)
        wrote = await _appended_before_each_statement(store, other, "one", 10, at_once=True)
        at_once = list(statements)
        statements.clear()
        again = await _appended_before_each_statement(store, other, "two", 10, at_once=False)
        in_transactions = list(statements)
        one, two = await _rows(store, "one"), await _rows(store, "two")
        assert (await store.doctor("one")).findings == ()
        events = await store.audit("one")
        context = [m.message_id for m in await store.context("one")]
    async with HistoryStore.open(db_url, tokenizer=tokenizer) as fresh:
        assert context == [m.message_id for m in await fresh.context("one")]
    assert wrote == again and wrote >= 6, "the strategy should have compacted in most turns"
    assert at_once == ["written_session"] * wrote, at_once
    assert in_transactions == ["written_event"] * wrote, in_transactions
    summaries = [m for m in one["messages"] if m[7] == "summary"]
    assert summaries, "the strategy should have summarized tool results"
    assert all(e.messages_before >= e.messages_after for e in events)
    for name in one:
        assert one[name] == two[name], name


async def test_a_statement_does_not_land_after_a_write_of_a_group_it_read(
    db_url: str,
) -> None:
    """Another store excludes the same groups between a compaction's read and its one
    statement: those rows were written since the read, so the statement writes
    nothing; the groups read again without a lock show the plan carried out, and the
    compaction ends there, without a write transaction."""
    async with _three_turns(db_url) as (store, other):
        compacted: list[object] = []
        written: list[object] = []
        write = _once_the_other_compacts(
            other, compactor.write_back_in_one_statement, compacted, written
        )

        with pytest.MonkeyPatch.context() as patch:
            transactions = _transactions(store, patch)
            patch.setattr(f"{compactor.__name__}.write_back_in_one_statement", write)
            assert await store.compact("s", ExcludeOldest(2)) is None
        assert transactions == []
        # the other's compaction wrote (in its own one statement); this store's
        # statement, sent after it, wrote nothing
        assert compacted[0] is not None and written[0] is not None and written[1:] == [MOVED]
        events = await store.audit("s")
        assert [e.outcome for e in events] == ["applied"]  # the other's, once
        assert (await store.doctor("s")).findings == ()


def _summary(message_id: str, *replaces: str) -> SummaryInsert:
    text = "summary of " + ", ".join(replaces)
    return SummaryInsert(Message.text_message("assistant", text, message_id=message_id), replaces)


async def test_what_is_left_of_a_plan_another_writer_partly_wrote_is_one_statement(
    db_url: str,
) -> None:
    """Another store writes one of a plan's two summaries (the same id) between the
    plan's snapshot and its apply: the one statement made from the snapshot writes
    nothing (the summarized groups were written since); the read without a lock counts
    that id stored, but what is left of the plan is the other summary, whose ids are
    not; it is written in the one statement, with no write transaction."""
    async with _three_turns(db_url) as (store, other):
        groups = await _group_ids(store, "s")
        first = _summary("sum_first", groups[0], groups[1])
        second = _summary("sum_second", groups[3], groups[4])
        done: list[object] = []
        written: list[object] = []
        statements = _event_statements(store)
        with pytest.MonkeyPatch.context() as patch:
            transactions = _transactions(store, patch)
            meanwhile = partial(other.compact, "s", Fixed(ChangeSet(summaries=(first,))))
            _first_in_the_apply(patch, meanwhile, done, written)
            event = await store.compact("s", Fixed(ChangeSet(summaries=(first, second))))
        assert transactions == [] and done[0] is not None
        # its two one statements (the other has its own), the first writing nothing
        assert statements == ["written_session"] * 2 and written[1] is MOVED
        assert event is not None
        assert [sorted(replaced) for replaced in event.summarized.values()] == [sorted(groups[3:5])]
        assert [e.outcome for e in await store.audit("s")] == ["applied", "applied"]
        stored = [s.message.message_id async for s in store.aiter_history("s")]
        assert stored.count("sum_first") == stored.count("sum_second") == 1
        assert (await store.doctor("s")).findings == ()


async def test_a_plan_that_conflicts_with_a_write_since_is_made_again_without_a_lock(
    db_url: str,
) -> None:
    """Another store pins a group a plan excludes between the plan's snapshot and its
    apply: the one statement made from the snapshot writes nothing, the read without a
    lock finds the conflict, and the plan is made again and written in one statement,
    no write transaction taken to find the same."""
    async with _three_turns(db_url) as (store, other):
        groups = await _group_ids(store, "s")
        done: list[object] = []
        with pytest.MonkeyPatch.context() as patch:
            transactions = _transactions(store, patch)
            _first_in_the_apply(patch, partial(other.pin, "s", [groups[0]]), done)
            event = await store.compact("s", ExcludeOldest(2))
        assert transactions == [] and done[0] == [groups[0]]
        assert event is not None and event.attempts == 2
        assert sorted(event.excluded) == sorted(groups[1:3])  # the pinned one kept
        assert (await store.doctor("s")).findings == ()


async def test_a_summary_made_from_the_snapshot_goes_after_an_excluded_group_at_its_place(
    db_url: str,
) -> None:
    """A plan made on the snapshot of a session this store wrote last is written in one
    statement without a read first; the snapshot holds only the active groups, so where
    a summary goes after a group it lacks (an earlier summary at the same place, since
    restored away), that statement writes nothing, and the read without a lock finds
    the group: the summary takes the slot after it."""
    async with _three_turns(db_url) as (store, _other):
        groups = await _group_ids(store, "s")
        first = await store.compact(
            "s", Fixed(ChangeSet(summaries=(_summary("sum_1", *groups[:2]),)))
        )
        assert first is not None
        await store.restore("s", event_id=first.id)  # sum_1 excluded, at its place
        await store.unpin("s", groups[:2])
        await store.context("s")
        written: list[object] = []
        with pytest.MonkeyPatch.context() as patch:
            transactions = _transactions(store, patch)
            _recorded_statements(patch, written)
            again = await store.compact(
                "s", Fixed(ChangeSet(summaries=(_summary("sum_2", *groups[:2]),)))
            )
        assert again is not None and transactions == []
        assert written[0] is MOVED and isinstance(written[1], tuple)
        query = (
            "SELECT group_id, anchor, slot, excluded FROM chatledger_groups WHERE session_id = 's'"
        )
        async with store.engine.connect() as conn:
            rows = {r[0]: r[1:] for r in await conn.execute(text(query))}
        assert rows["group_sum_1"][2] is True and rows["group_sum_2"][2] is False
        assert rows["group_sum_2"][:2] == (rows["group_sum_1"][0], rows["group_sum_1"][1] + 1)
        assert (await store.doctor("s")).findings == ()


async def test_a_summary_of_a_summary_made_from_the_snapshot_is_one_statement(
    db_url: str,
) -> None:
    """A summary that replaces an earlier summary goes at that summary's place, after
    it; the groups the earlier one replaced, excluded there before it, do not stop the
    statement made from the snapshot: it writes at once, at the slot after the earlier
    summary's."""
    async with _three_turns(db_url) as (store, _other):
        groups = await _group_ids(store, "s")
        first = await store.compact(
            "s", Fixed(ChangeSet(summaries=(_summary("sum_1", *groups[:2]),)))
        )
        assert first is not None
        await store.context("s")
        written: list[object] = []
        with pytest.MonkeyPatch.context() as patch:
            transactions = _transactions(store, patch)
            _recorded_statements(patch, written)
            rolled = _summary("sum_2", "group_sum_1", groups[2])
            again = await store.compact("s", Fixed(ChangeSet(summaries=(rolled,))))
        assert again is not None and transactions == []
        assert len(written) == 1 and isinstance(written[0], tuple)
        query = (
            "SELECT group_id, anchor, slot, excluded FROM chatledger_groups WHERE session_id = 's'"
        )
        async with store.engine.connect() as conn:
            rows = {r[0]: r[1:] for r in await conn.execute(text(query))}
        assert rows[groups[0]][2] is True and rows["group_sum_1"][2] is True
        assert rows["group_sum_2"][:2] == (rows["group_sum_1"][0], rows["group_sum_1"][1] + 1)
        assert (await store.doctor("s")).findings == ()


def _recorded_statements(patch: pytest.MonkeyPatch, written: list[object]) -> None:
    """What each write-back in one statement gives goes in ``written`` (while ``patch``
    lasts)."""
    write = compactor.write_back_in_one_statement

    async def through(*args: Any, **kwargs: Any) -> Any:
        written.append(await write(*args, **kwargs))
        return written[-1]

    patch.setattr(f"{compactor.__name__}.write_back_in_one_statement", through)
