"""Every schema revision upgrades in place from every earlier one, with data in it.

The migration policy: each change is one additive Alembic revision, upgraded in place
and tested from every earlier revision with data in it, downgrade included, on SQLite
and PostgreSQL. The data is what the library writes (tool calls, an exclusion, a
summary, a reduction, a pin, metadata, two tenants): written at head into one database,
copied row by row into another database migrated only to the earlier revision (the
columns that revision has), then upgraded in place to head.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import JSON, MetaData, Table, insert, null, select
from sqlalchemy.ext.asyncio import AsyncConnection

from store import HistoryStore, MigrationRequired
from store.sql.drivers.engine import create_engine
from store.sql.migrations import current_revisions, downgrade, migrate
from store.sql.migrations.migrator import alembic_config
from store.sql.migrations.revisions import head_revisions
from strategies import SummarizationStrategy, ToolResultCompactionStrategy, TruncationStrategy
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.summarizers import FakeSummarizer
from strategies.tokenizers import CharacterEstimatorTokenizer

TABLES = (
    "chatledger_sessions",
    "chatledger_messages",
    "chatledger_groups",
    "chatledger_open_calls",
    "chatledger_events",
    "chatledger_event_groups",
    "chatledger_early_results",
)
"""In the order rows can be inserted (parents first); an earlier revision may lack some
(its upgrade fills them)."""


def _revisions() -> list[str]:
    """Every revision, oldest first."""
    scripts = ScriptDirectory.from_config(alembic_config())
    return [s.revision for s in reversed(list(scripts.walk_revisions()))]


EARLIER = _revisions()[:-1]


def _turn(index: int) -> list[Message]:
    call = f"c{index}"
    return [
        Message.text_message("user", f"question {index} " + "words " * 30),
        Message(
            role="assistant",
            contents=[FunctionCallContent(call_id=call, name="search", arguments={"q": index})],
        ),
        Message(
            role="tool",
            contents=[FunctionResultContent(call_id=call, result="rows " * 200)],
        ),
        Message.text_message("assistant", f"answer {index} " + "text " * 40),
    ]


async def _write_history(url: str) -> None:
    tokenizer = CharacterEstimatorTokenizer()
    async with HistoryStore.open(url, tokenizer=tokenizer) as store:
        for index in range(8):
            await store.append("main", _turn(index))
        await store.append("main", [_turn(99)[1]])  # a pending call: an open-call row
        early = FunctionResultContent(call_id="early", result="before its call")
        await store.append("main", [Message(role="tool", contents=[early])])  # waits for it
        await store.set_metadata("main", {"owner": "upgrade-test"})
        await store.compact("main", ToolResultCompactionStrategy(keep_last_tool_call_groups=1))
        await store.compact("main", TruncationStrategy(max_n=20, compact_to=14))
        summarizer = SummarizationStrategy(
            client=FakeSummarizer(), target_count=2, threshold=0, tokenizer=tokenizer
        )
        failing = SummarizationStrategy(
            client=FakeSummarizer(fail="error"), target_count=2, threshold=0, tokenizer=tokenizer
        )
        failed = await store.compact("main", failing)  # an event of another outcome
        assert failed is not None and failed.outcome == "failed"
        await store.compact("main", summarizer)
        groups = [g.group_id for g in (await store.view("main")).groups]
        await store.pin("main", groups[-2:])
    async with HistoryStore.open(url, tenant="other", tokenizer=tokenizer) as store:
        await store.append("elsewhere", _turn(0))


async def _tables(conn: AsyncConnection) -> dict[str, Table]:
    reflected = MetaData()
    await conn.run_sync(lambda sync: reflected.reflect(sync, only=lambda name, _: name in TABLES))
    return {name: reflected.tables[name] for name in TABLES if name in reflected.tables}


def _key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(row[k]) for k in sorted(row))


async def _rows(url: str) -> dict[str, list[dict[str, Any]]]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            tables = await _tables(conn)
            out = {}
            for name, table in tables.items():
                rows = [dict(r) for r in (await conn.execute(select(table))).mappings()]
                out[name] = sorted(rows, key=_key)
            return out
    finally:
        await engine.dispose()


async def _copy_into(url: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    """Insert ``rows`` into the database at ``url``, keeping the columns its tables have."""
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            tables = await _tables(conn)
            for name in tables:
                table = tables[name]
                json = {c.name for c in table.c if isinstance(c.type, JSON)}
                values = [
                    {
                        k: null() if v is None and k in json else v  # SQL NULL, not JSON null
                        for k, v in row.items()
                        if k in table.c
                    }
                    for row in rows[name]
                ]
                if values:
                    await conn.execute(insert(table), values)
    finally:
        await engine.dispose()


async def _messages(url: str) -> Sequence[Any]:
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        return await store.history("main", include_excluded=True)


def _subset(rows: list[dict[str, Any]], columns: set[str]) -> list[dict[str, Any]]:
    return sorted(({k: v for k, v in r.items() if k in columns} for r in rows), key=_key)


@pytest.mark.parametrize("revision", EARLIER)
async def test_upgrade_from_an_earlier_revision_keeps_every_row(
    revision: str, db_url: str, empty_db_url: str
) -> None:
    await _write_history(db_url)
    written = await _rows(db_url)
    expected = await _messages(db_url)
    assert all(written[name] for name in TABLES)  # every table holds data

    await migrate(empty_db_url, revision=revision)
    await _copy_into(empty_db_url, written)
    with pytest.raises(MigrationRequired, match="chatledger db upgrade"):
        async with HistoryStore.open(empty_db_url):
            pass
    old = await _rows(empty_db_url)

    await migrate(empty_db_url)  # in place, to head
    engine = create_engine(empty_db_url)
    try:
        assert await current_revisions(engine) == head_revisions()
    finally:
        await engine.dispose()
    upgraded = await _rows(empty_db_url)
    for name in TABLES:
        assert len(upgraded[name]) == len(written[name]), name
        if name not in old:  # a table the revision lacked: filled as head writes it
            assert upgraded[name] == written[name], name
            continue
        kept = set(old[name][0]) if old[name] else set()
        assert _subset(upgraded[name], kept) == old[name], name  # nothing lost or changed
        added = set(upgraded[name][0]) - kept if upgraded[name] else set()
        for column in added:  # a column the revision lacked is filled for every row
            nullable = next(
                c.nullable
                for c in (await _reflected_columns(empty_db_url, name))
                if c.name == column
            )
            assert nullable or all(r[column] is not None for r in upgraded[name]), column

    assert await _messages(empty_db_url) == expected
    texts = [r["search_text"] for r in upgraded["chatledger_messages"]]
    assert texts == [r["search_text"] for r in written["chatledger_messages"]]
    assert await _found(empty_db_url) == await _found(db_url) != []  # search finds them
    await _check_outcomes(empty_db_url, had_outcomes="outcome" in kept_events(old))
    async with HistoryStore.open(empty_db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        for index in range(100, 105):
            await store.append("main", _turn(index))
        assert await store.compact("main", TruncationStrategy(max_n=8, compact_to=4))
        for index in range(4):
            await store.append("after", _turn(index))
        failing = SummarizationStrategy(client=FakeSummarizer(fail="empty"), target_count=1)
        failed = await store.compact("after", failing)
        assert failed is not None and failed.outcome == "failed"
        assert failed.duration_seconds is not None and failed.attempts == 1
        assert next(e.id for e in await store.audit("after", outcome="failed")) == failed.id
        listed = [s.session_id for s in await store.sessions(order="updated")]
        assert listed == ["after", "main"]
        assert (await store.get_metadata("main")) == {"owner": "upgrade-test"}

    await downgrade(empty_db_url, revision=revision)
    downgraded = await _rows(empty_db_url)
    for name in old:
        assert len(downgraded[name]) >= len(written[name]), name


async def _found(url: str) -> list[tuple[str, str]]:
    """Every hit of a word of the history, tenant-wide: (session, message id)."""
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        page = await store.search("question", limit=100)
    return [(hit.session_id, hit.message_id) for hit in page.hits]


def kept_events(rows: dict[str, list[dict[str, Any]]]) -> set[str]:
    """The columns of the event rows of a database."""
    return set(rows["chatledger_events"][0])


async def _check_outcomes(url: str, *, had_outcomes: bool) -> None:
    """Events written before the outcome columns read as applied, once, with no duration;
    those written with them keep what they recorded."""
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        events = await store.audit("main")
    outcomes = sorted(e.outcome for e in events)
    if had_outcomes:
        assert "failed" in outcomes
        failed = next(e for e in events if e.outcome == "failed")
        assert failed.summarizer is not None and failed.diagnostics
    else:
        assert set(outcomes) == {"applied"}
        assert all(e.attempts == 1 and e.duration_seconds is None for e in events)


async def _reflected_columns(url: str, name: str) -> list[Any]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return list((await _tables(conn))[name].c)
    finally:
        await engine.dispose()


async def test_the_revision_list_is_a_single_line_of_history() -> None:
    revisions = _revisions()
    assert revisions[0] == "0001"
    assert list(head_revisions()) == [revisions[-1]]
    assert len(set(revisions)) == len(revisions)


async def test_head_has_the_index_of_the_sessions_listing(db_url: str) -> None:
    """A page of sessions by last update reads O(page) rows through this index."""
    await migrate(db_url)
    engine = create_engine(db_url)
    try:
        async with engine.connect() as conn:
            table = (await _tables(conn))["chatledger_sessions"]
        columns = {i.name: [c.name for c in i.columns] for i in table.indexes}
        assert columns["chatledger_sessions_recent_idx"] == ["tenant", "updated_at", "session_id"]
    finally:
        await engine.dispose()


async def test_head_has_the_index_of_the_audit_by_outcome(db_url: str) -> None:
    """``audit(outcome=...)`` over a tenant reads through this index."""
    await migrate(db_url)
    engine = create_engine(db_url)
    try:
        async with engine.connect() as conn:
            table = (await _tables(conn))["chatledger_events"]
        columns = {i.name: [c.name for c in i.columns] for i in table.indexes}
        assert columns["chatledger_events_outcome_idx"] == ["tenant", "outcome", "created_at"]
    finally:
        await engine.dispose()
