"""``stream_history``: the same messages as ``history()`` pages, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest
from sqlalchemy import select, text

from store import HistoryStore
from store.errors import CorruptRowError, InvalidInput, SessionNotFound
from store.models import StoredMessage
from store.sql.history import stream_history
from store.sql.mapping import message_from_row
from store.sql.schema import GROUPS, MESSAGES
from strategies.messages import Message
from tests.conformance.test_append_read import every_content_message
from tests.conformance.toy_strategies import ExcludeOldest, ReduceResults, SummarizeOldest
from tests.memory.test_compaction import _chat


def _stream(
    store: HistoryStore,
    session_id: str,
    *,
    include_excluded: bool = False,
    after: int | None = None,
    before: int | None = None,
    page_size: int = 500,
) -> AsyncGenerator[StoredMessage, None]:
    return stream_history(
        store.engine,
        store.tenant,
        session_id,
        include_excluded=include_excluded,
        after=after,
        before=before,
        page_size=page_size,
    )


async def _paged(
    store: HistoryStore,
    session_id: str,
    *,
    include_excluded: bool,
    after: int | None,
    before: int | None,
    page_size: int,
) -> list[StoredMessage]:
    """What a caller paging with ``history()`` by hand gets (the expected answer)."""
    out: list[StoredMessage] = []
    cursor = after
    while True:
        page = await store.history(
            session_id, include_excluded=include_excluded, limit=page_size, after=cursor
        )
        out.extend(m for m in page if before is None or m.seq < before)
        if len(page) < page_size:
            return out
        cursor = page[-1].seq


async def _compacted_session(store: HistoryStore) -> int:
    """A session holding excluded, reduced and summary messages; its stored count."""
    messages = [m for round_ in range(4) for m in _chat(f"r{round_}")][1:]
    messages.append(every_content_message())
    await store.append("s", [_chat("r0")[0], *messages])
    await store.compact("s", ExcludeOldest(3))
    await store.compact("s", ReduceResults())
    await store.compact("s", SummarizeOldest(2))
    return (await store.session("s")).stored_messages


async def test_equals_history_pages(store: HistoryStore) -> None:
    stored = await _compacted_session(store)
    everything = await store.history("s", include_excluded=True)
    assert len(everything) == stored
    assert any(m.excluded for m in everything) and any(m.reduced for m in everything)
    assert any(m.kind == "summary" for m in everything)
    for include_excluded in (False, True):
        for after, before in ((None, None), (3, None), (None, 20), (5, 17), (0, stored + 5)):
            for page_size in (1, 4, 7, stored, 500):
                expected = await _paged(
                    store,
                    "s",
                    include_excluded=include_excluded,
                    after=after,
                    before=before,
                    page_size=page_size,
                )
                streamed = [
                    m
                    async for m in _stream(
                        store,
                        "s",
                        include_excluded=include_excluded,
                        after=after,
                        before=before,
                        page_size=page_size,
                    )
                ]
                assert streamed == expected, (include_excluded, after, before, page_size)
                unpaged = await store.history(
                    "s", include_excluded=include_excluded, after=after, before=before
                )
                assert streamed == unpaged


async def test_same_fields_as_history(store: HistoryStore) -> None:
    await _compacted_session(store)
    streamed = [m async for m in _stream(store, "s", include_excluded=True, page_size=3)]
    for got, want in zip(streamed, await store.history("s", include_excluded=True), strict=True):
        assert got.model_dump() == want.model_dump()
        assert got.model_fields_set == want.model_fields_set
        assert got.stored_at.tzinfo == want.stored_at.tzinfo


async def test_page_size_dividing_the_count_ends_cleanly(store: HistoryStore) -> None:
    await store.append("s", [Message.text_message("user", f"m{i}") for i in range(12)])
    for page_size in (1, 3, 4, 6, 12):
        assert [m.seq async for m in _stream(store, "s", page_size=page_size)] == list(range(1, 13))
    assert [m.seq async for m in _stream(store, "s", after=12)] == []
    assert [m.seq async for m in _stream(store, "s", before=1)] == []


async def test_missing_session_and_invalid_input(store: HistoryStore) -> None:
    with pytest.raises(SessionNotFound):
        [m async for m in _stream(store, "nope")]
    await store.append("s", [Message.text_message("user", "hi")])
    other = HistoryStore(store.engine, tenant="other", tokenizer=store.tokenizer)
    with pytest.raises(SessionNotFound):
        [m async for m in _stream(other, "s")]
    with pytest.raises(InvalidInput):
        [m async for m in _stream(store, "s", page_size=0)]
    with pytest.raises(InvalidInput):
        [m async for m in _stream(store, "")]


async def test_corrupt_row_raises_where_the_iteration_reaches_it(store: HistoryStore) -> None:
    await store.append("s", [Message.text_message("user", f"m{i}") for i in range(6)])
    async with store.engine.begin() as conn:
        await conn.execute(
            text(
                'UPDATE chatledger_messages SET contents = \'[{"type": "no-such"}]\' '
                "WHERE tenant = 'default' AND session_id = 's' AND seq = 4"
            )
        )
    seen: list[int] = []
    with pytest.raises(CorruptRowError) as info:
        async for m in _stream(store, "s", page_size=5):
            seen.append(m.seq)
    assert info.value.seq == 4 and info.value.session_id == "s"
    assert info.value.tenant == "default"
    assert seen == [1, 2, 3]


async def test_writes_during_iteration(store: HistoryStore, backend: str) -> None:
    """A writer is never blocked by an iteration in progress. SQLite reads one snapshot;
    PostgreSQL reads each page in its own transaction, so later pages see new rows and no
    transaction stays open while the caller holds a message."""
    await store.append("s", [Message.text_message("user", f"m{i}") for i in range(6)])
    seen: list[int] = []
    async for m in _stream(store, "s", page_size=2):
        seen.append(m.seq)
        if m.seq == 1:
            await store.append("s", [Message.text_message("user", "late")])
            if backend == "postgres":
                async with store.engine.connect() as conn:
                    idle = await conn.scalar(
                        text(
                            "SELECT count(*) FROM pg_stat_activity "
                            "WHERE datname = current_database() "
                            "AND state LIKE 'idle in transaction%' "
                            "AND pid <> pg_backend_pid()"
                        )
                    )
                assert idle == 0
    assert seen == (list(range(1, 7)) if backend == "sqlite" else list(range(1, 8)))


async def test_leaving_early_releases_the_connection(store: HistoryStore) -> None:
    await store.append("s", [Message.text_message("user", f"m{i}") for i in range(6)])
    stream = _stream(store, "s", page_size=2)
    assert (await anext(stream)).seq == 1
    await stream.aclose()
    assert [m.seq for m in await store.history("s")] == list(range(1, 7))
    await store.append("s", [Message.text_message("user", "after")])


async def test_rows_map_as_the_general_mapping_does(store: HistoryStore) -> None:
    """The fast mapping equals :func:`message_from_row` on rows SQLAlchemy decodes itself
    (JSON decoded, timestamps processed by the column types)."""
    await _compacted_session(store)
    await store.append(
        "s",
        [
            Message.model_validate(
                {"role": "critic", "message_id": "custom", "metadata": {"k": [1, None]}},
                context={"allow_custom_roles": True},
            )
        ],
    )
    messages, groups = MESSAGES, GROUPS
    query = (
        select(messages, groups.c.kind)
        .join(
            groups,
            (groups.c.tenant == messages.c.tenant)
            & (groups.c.session_id == messages.c.session_id)
            & (groups.c.group_id == messages.c.group_id),
        )
        .where(messages.c.tenant == store.tenant, messages.c.session_id == "s")
        .order_by(messages.c.seq)
    )
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    expected = [message_from_row(row, tenant=store.tenant, session_id="s") for row in rows]
    streamed = [m async for m in _stream(store, "s", include_excluded=True, page_size=4)]
    assert streamed == expected
    assert any(m.role == "critic" for m in streamed) and any(m.reduced for m in streamed)
