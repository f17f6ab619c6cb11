"""Every decoder of a message row reads the columns of one table, :data:`COLUMNS`.

Which columns a decoder reads is found, not listed: each column of a row read from the
database is replaced in turn by a value no column holds, and the decoder reads the
column when its answer changes (or it refuses the row). A decoder that builds a stored
message must read every column of the table; one that builds the message a projection
shows, every column but the stored message's own. Every column of
``chatledger_messages`` is either in the table or named as left unread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from store import HistoryStore
from store.errors import CorruptRowError
from store.sql.history import read_page_rows
from store.sql.mapping import (
    COLUMN_INDEX,
    COLUMNS,
    UNREAD_COLUMNS,
    inserted_message,
    message_columns,
    message_from_row,
    original_message,
    page_mapper,
    row_message,
    stored_message,
)
from store.sql.schema import MESSAGES
from strategies.messages import Message, TextContent

_JUNK = object()
"""A value no column holds."""

Decoder = Callable[[Sequence[Any], Any], Any]
"""A decoder as the test calls it: a row of :func:`message_columns` and its group's kind."""

TENANT, SESSION = "default", "s"

STORED: tuple[str, ...] = ("message", "stored", "reduced", "row")
"""What a decoder of the stored message reads: every column."""
SHOWN: tuple[str, ...] = ("message", "reduced", "row")
ORIGINAL: tuple[str, ...] = ("message", "row")

DECODERS: dict[str, tuple[Decoder, tuple[str, ...]]] = {
    "page_mapper": (lambda row, kind: page_mapper(TENANT, SESSION)((*row, kind)), STORED),
    "stored_message": (
        lambda row, kind: stored_message(row, kind, tenant=TENANT, session_id=SESSION),
        STORED,
    ),
    "message_from_row": (
        lambda row, kind: message_from_row(
            {**dict(zip(COLUMN_INDEX, row, strict=True)), "kind": kind},
            tenant=TENANT,
            session_id=SESSION,
        ),
        STORED,
    ),
    "row_message": (
        lambda row, kind: row_message(row, tenant=TENANT, session_id=SESSION),
        SHOWN,
    ),
    "original_message": (
        lambda row, kind: original_message(row, tenant=TENANT, session_id=SESSION),
        ORIGINAL,
    ),
}
"""Each decoder, and the targets of the columns it reads (:data:`STORED`: it builds the
stored message; :data:`SHOWN`: the message shown; :data:`ORIGINAL`: the message as
appended)."""


def _reads(decode: Decoder, row: Sequence[Any], kind: Any) -> set[str]:
    """The columns ``decode`` reads: those whose replacement changes what it returns."""
    before = decode(row, kind)
    read: set[str] = set()
    for name, index in COLUMN_INDEX.items():
        changed = [*row]
        changed[index] = _JUNK
        try:
            if decode(changed, kind) != before:
                read.add(name)
        except CorruptRowError:
            read.add(name)
    return read


def _expected(targets: tuple[str, ...]) -> set[str]:
    """What the table says a decoder of ``targets`` reads."""
    return {c.name for c in COLUMNS if c.target in targets}


async def _page_row(store: HistoryStore) -> tuple[Sequence[Any], Any]:
    await store.append(SESSION, [Message.text_message("user", "héllo", metadata={"k": [1]})])
    async with store.engine.connect() as conn:
        [row] = await read_page_rows(
            conn, TENANT, SESSION, include_excluded=True, after=None, before=None, limit=5
        )
    return tuple(row[:-1]), row[-1]


@pytest.mark.parametrize("name", DECODERS)
async def test_every_decoder_reads_the_columns_the_table_gives_it(
    store: HistoryStore, name: str
) -> None:
    row, kind = await _page_row(store)
    decode, targets = DECODERS[name]
    assert _reads(decode, row, kind) == _expected(targets)


async def test_the_decoders_agree_on_a_row(store: HistoryStore) -> None:
    row, kind = await _page_row(store)
    stored = [DECODERS[name][0](row, kind) for name in DECODERS if DECODERS[name][1] is STORED]
    assert stored[0] == stored[1] == stored[2]
    assert row_message(row, tenant=TENANT, session_id=SESSION) == stored[0].message
    assert original_message(row, tenant=TENANT, session_id=SESSION) == stored[0].message


async def test_the_finder_sees_a_decoder_that_skips_a_column(store: HistoryStore) -> None:
    row, kind = await _page_row(store)
    skipped = COLUMN_INDEX["source_id"]

    def careless(row: Sequence[Any], kind: Any) -> Any:
        whole = [*row]
        whole[skipped] = None
        return page_mapper(TENANT, SESSION)((*whole, kind))

    assert _reads(careless, row, kind) == _expected(STORED) - {"source_id"}


def test_every_column_of_the_table_is_read_or_named_as_unread() -> None:
    names = [c.name for c in COLUMNS]
    assert len(set(names)) == len(names)
    assert not set(names) & set(UNREAD_COLUMNS)
    assert set(names) | set(UNREAD_COLUMNS) == {c.key for c in MESSAGES.c}


def test_the_select_is_the_table_in_order() -> None:
    assert [c.key for c in message_columns()] == [c.name for c in COLUMNS]
    assert list(COLUMN_INDEX) == [c.name for c in COLUMNS]


def test_a_row_inserted_maps_as_it_reads_back() -> None:
    message = Message(role="assistant", contents=[TextContent(text="s")], metadata={"a": 1})
    values = {
        "tenant": TENANT,
        "session_id": SESSION,
        "seq": 4,
        "message_id": message.message_id,
        "role": message.role,
        "contents_json": '[{"extra":{},"type":"text","text":"s"}]',
        "author_name": None,
        "created_at": None,
        "metadata_json": '{"a":1}',
    }
    assert inserted_message(values) == message
