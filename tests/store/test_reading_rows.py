"""Reads build their models from what the store wrote, without validating it again,
and still refuse every row that does not hold what the store writes.

A read validates what can be damaged on disk (JSON text, value types, a missing group)
and builds the models directly; the models it returns must be exactly the ones a full
validation builds, for every kind of content, and a row damaged in any field a fast
path trusts must raise :class:`CorruptRowError`.
"""

from __future__ import annotations

import gc
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from store import HistoryStore
from store.errors import CorruptRowError
from store.models import StoredMessage
from strategies.messages import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)

CHARS = st.characters(blacklist_categories=("Cs",))  # lone surrogates: refused at write
NAME_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
JSON_SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(CHARS, max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = st.text(CHARS, max_size=5)
EXTRA = st.dictionaries(KEYS, JSON_VALUES, max_size=2)
TEXT = st.text(CHARS, max_size=40)
CALL_IDS = st.text(NAME_CHARS, max_size=40)  # kept in an id column: NUL refused at write

CONTENTS = st.one_of(
    st.builds(TextContent, text=TEXT, extra=EXTRA),
    st.builds(ReasoningContent, text=st.none() | TEXT, payload=JSON_VALUES, extra=EXTRA),
    st.builds(
        FunctionCallContent,
        call_id=CALL_IDS,
        name=TEXT,
        arguments=st.none() | TEXT | st.dictionaries(KEYS, JSON_VALUES, max_size=3),
        extra=EXTRA,
    ),
    st.builds(
        FunctionResultContent,
        call_id=CALL_IDS,
        result=JSON_VALUES,
        is_error=st.booleans(),
        extra=EXTRA,
    ),
    st.builds(DataContent, data=TEXT, media_type=st.none() | TEXT, extra=EXTRA),
    st.builds(UriContent, uri=TEXT, media_type=st.none() | TEXT, extra=EXTRA),
    st.builds(
        OtherContent,
        kind=TEXT,
        payload=st.dictionaries(KEYS, JSON_VALUES, max_size=3),
        call_id=st.none() | CALL_IDS,
        pairing=st.sampled_from(["call", "result", "none"]),
        extra=EXTRA,
    ),
)
MESSAGES = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    contents=st.lists(CONTENTS, max_size=3),
    author_name=st.none() | st.text(NAME_CHARS, max_size=10),
    created_at=st.none() | st.datetimes(timezones=st.just(UTC), min_value=datetime(2000, 1, 1)),
    metadata=st.dictionaries(KEYS, JSON_VALUES, max_size=2),
)


RESULT = '[{"extra":{},"type":"function_result","call_id":"c","result":1,"is_error":false}]'
OTHER = '[{"extra":{},"type":"other","kind":"k","payload":{},"call_id":null,"pairing":"none"}]'


def _validated(stored: StoredMessage) -> StoredMessage:
    return StoredMessage.model_validate(stored.model_dump(), context={"allow_custom_roles": True})


@pytest.mark.parametrize("backend", ["sqlite"])  # the fast paths are the same on both
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(MESSAGES, min_size=1, max_size=6, unique_by=lambda m: m.message_id))
async def test_read_models_equal_validated_ones_for_every_content(
    store: HistoryStore, batch: list[Message]
) -> None:
    session = f"s-{batch[0].message_id}"
    await store.append(session, batch)
    read = await store.history(session)
    streamed = [m async for m in store.aiter_history(session)]
    assert [m.message for m in read] == batch
    for stored in (*read, *streamed):
        validated = _validated(stored)
        assert stored == validated
        assert stored.model_dump_json() == validated.model_dump_json()  # field order too
        assert stored.message.model_dump_json() == validated.message.model_dump_json()


@pytest.mark.parametrize(
    ("column", "damage"),
    [
        ("contents", '[{"extra":{},"type":"text","text":5}]'),
        ("contents", '[{"extra":[],"type":"text","text":"x"}]'),
        (
            "contents",
            RESULT.replace('"is_error":false', '"is_error":3'),
        ),
        (
            "contents",
            OTHER.replace('"none"', '"maybe"'),
        ),
        ("contents", '{"extra":{},"type":"text","text":"x"}'),
        ("contents", "[1]"),
        ("metadata", "[1, 2]"),
        ("role", ""),
        ("group_kind", "no-such-kind"),
    ],
)
async def test_a_damaged_field_raises_naming_the_row(
    store: HistoryStore, column: str, damage: str
) -> None:
    await store.append("s", [Message.text_message("user", f"m{i}") for i in range(3)])
    async with store.engine.begin() as conn:
        await conn.execute(
            text(
                f"UPDATE chatledger_messages SET {column} = :damage "
                "WHERE tenant = 'default' AND session_id = 's' AND seq = 2"
            ),
            {"damage": damage},
        )
    for read in (store.history("s"), _all(store)):
        with pytest.raises(CorruptRowError, match="seq 2"):
            await read


async def test_a_message_whose_group_is_missing_is_found(store: HistoryStore) -> None:
    """A row naming a group that does not exist: a read that must look its kind up
    refuses it; one whose row holds the kind maps it as stored, and ``doctor`` finds it
    (history reads check a row, not the group rows it points to)."""
    await store.append("s", [Message.text_message("user", f"m{i}") for i in range(3)])
    async with store.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE chatledger_messages SET group_id = 'no-such-group' "
                "WHERE tenant = 'default' AND session_id = 's' AND seq = 2"
            )
        )
    [second] = (await store.history("s"))[1:2]
    assert (second.group_id, second.kind) == ("no-such-group", "user")
    report = await store.doctor("s")
    assert ("unparsable_row", 2) in [(f.check, f.seq) for f in report.findings]
    async with store.engine.begin() as conn:
        await conn.execute(text("UPDATE chatledger_messages SET group_kind = NULL WHERE seq = 2"))
    for read in (store.history("s"), _all(store)):
        with pytest.raises(CorruptRowError, match="seq 2"):
            await read


async def _all(store: HistoryStore) -> list[StoredMessage]:
    return [m async for m in store.aiter_history("s")]


async def test_contents_of_an_unusual_shape_are_read_by_validation(store: HistoryStore) -> None:
    """A content stored with its keys in another order (another writer) still reads."""
    await store.append("s", [Message.text_message("user", "hello", message_id="m1")])
    reordered = json.dumps([{"type": "text", "text": "hello", "extra": {}}])
    async with store.engine.begin() as conn:
        await conn.execute(
            text("UPDATE chatledger_messages SET contents = :c WHERE session_id = 's'"),
            {"c": reordered},
        )
    [stored] = await store.history("s")
    assert stored.message == Message.text_message("user", "hello", message_id="m1")


async def test_a_page_before_a_bound_is_the_newest_ones_oldest_first(store: HistoryStore) -> None:
    await store.append("s", [Message.text_message("user", f"m{i}") for i in range(6)])
    page = await store.history("s", before=5, limit=2)
    assert [m.seq for m in page] == [3, 4]
    assert page == [_validated(m) for m in page]


async def test_a_group_of_no_known_kind_raises_naming_the_row(tmp_path: Path) -> None:
    """A row without its kind reads its group's, which must be known (only SQLite can be
    made to skip the kind's CHECK constraint)."""
    async with HistoryStore.open(f"sqlite:///{tmp_path}/k.db") as store:
        await store.append("s", [Message.text_message("user", f"m{i}") for i in range(3)])
        async with store.engine.begin() as conn:
            await conn.execute(text("UPDATE chatledger_messages SET group_kind = NULL"))
            await conn.execute(text("PRAGMA ignore_check_constraints = ON"))
            await conn.execute(
                text(
                    "UPDATE chatledger_groups SET kind = 'bogus' WHERE group_id = "
                    "(SELECT group_id FROM chatledger_messages WHERE seq = 2)"
                )
            )
        for read in (store.history("s"), _all(store)):
            with pytest.raises(CorruptRowError, match="seq 2"):
                await read


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        ("2025-01-01 00:00:21.000000", datetime(2025, 1, 1, 0, 0, 21, tzinfo=UTC)),
        ("2025-01-01 02:00:21+02:00", datetime(2025, 1, 1, 0, 0, 21, tzinfo=UTC)),
        ("2025-01-01T00:00:21Z", datetime(2025, 1, 1, 0, 0, 21, tzinfo=UTC)),
        ("2025-01-01", datetime(2025, 1, 1, tzinfo=UTC)),
    ],
)
async def test_timestamp_text_is_read_as_utc_whoever_wrote_it(
    tmp_path: Path, stored: str, read: datetime
) -> None:
    """SQLite holds timestamps as text: naive (the store's own) or with an offset."""
    async with HistoryStore.open(f"sqlite:///{tmp_path}/t.db") as store:
        await store.append("s", [Message.text_message("user", "m")])
        async with store.engine.begin() as conn:
            await conn.execute(
                text("UPDATE chatledger_messages SET created_at = :t"), {"t": stored}
            )
        for got in (await store.history("s"), await _all(store)):
            created = got[0].message.created_at
            assert created == read
            assert created is not None and created.tzinfo is UTC


async def test_timestamp_text_that_is_no_timestamp_raises_naming_the_row(tmp_path: Path) -> None:
    async with HistoryStore.open(f"sqlite:///{tmp_path}/t.db") as store:
        await store.append("s", [Message.text_message("user", f"m{i}") for i in range(3)])
        async with store.engine.begin() as conn:
            await conn.execute(
                text("UPDATE chatledger_messages SET created_at = 'yesterday' WHERE seq = 2")
            )
        for read in (store.history("s"), _all(store)):
            with pytest.raises(CorruptRowError, match="seq 2"):
                await read


@pytest.mark.parametrize("enabled", [True, False])
async def test_a_read_leaves_the_garbage_collector_as_it_found_it(
    store: HistoryStore, enabled: bool
) -> None:
    await store.append("s", [Message.text_message("user", f"m{i}") for i in range(3)])
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        assert len(await store.history("s")) == 3
        assert gc.isenabled() is enabled
        await store.append("s", [Message.text_message("user", "x")])
        async with store.engine.begin() as conn:
            await conn.execute(text("UPDATE chatledger_messages SET role = '' WHERE seq = 4"))
        with pytest.raises(CorruptRowError):
            await store.history("s")
        assert gc.isenabled() is enabled  # after a corrupt row too
    finally:
        (gc.enable if was else gc.disable)()
