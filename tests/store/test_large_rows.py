"""A message row holding a text of over ``LARGE_TEXT`` characters goes on its own
(:mod:`store.sql.append.inserts`): by a ``COPY`` in slices on PostgreSQL, inserted and
then written by an ``UPDATE`` on SQLite. Either way it reads back as it was given, with
the rows around it, in order."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from store import HistoryStore
from store.sql.append import inserts
from strategies.messages import FunctionCallContent, FunctionResultContent, Message, TextContent

_AWKWARD = 'tab\there, newline\nthere, return\r, backslash \\ and \\n, quote ", é, 漢字, 🙂 '
"""What ``COPY``'s text format escapes, what JSON escapes, and text beyond ASCII."""


def _large(size: int) -> str:
    return (_AWKWARD * (size // len(_AWKWARD) + 1))[:size]


def _turn(index: int, size: int) -> list[Message]:
    call = FunctionCallContent(call_id=f"c{index}", name="fetch", arguments='{"q": "a\\tb"}')
    result = FunctionResultContent(call_id=f"c{index}", result=_large(size))
    return [
        Message(role="assistant", contents=[call], message_id=f"a{index}"),
        Message(
            role="tool",
            contents=[result],
            message_id=f"t{index}",
            author_name="tool\twith\\odd\nname",
            created_at=datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC),
            metadata={"note": _AWKWARD, "big": _large(inserts.LARGE_TEXT + 10)},
        ),
    ]


async def test_large_rows_read_back_as_given_between_small_ones(store: HistoryStore) -> None:
    size = inserts.LARGE_TEXT + inserts.TEXT_SLICE + 7  # over a slice boundary
    given = [
        Message(role="user", contents=[TextContent(text="before")], message_id="u0"),
        *_turn(1, size),
        Message(role="user", contents=[TextContent(text=_AWKWARD)], message_id="u1"),
        *_turn(2, inserts.LARGE_TEXT + 1),
        Message(role="user", contents=[TextContent(text="after")], message_id="u2"),
    ]
    await store.append("s", given)
    read = await store.history("s")
    assert [stored.message for stored in read] == given
    assert [stored.seq for stored in read] == sorted(stored.seq for stored in read)
    assert await store.context("s") == given


async def test_a_large_row_is_found_by_its_hash_on_a_second_append(store: HistoryStore) -> None:
    turn = _turn(1, inserts.LARGE_TEXT + 1)
    await store.append("s", turn)
    await store.append("s", turn)  # deduplicated by id and hash: nothing new
    assert [stored.message for stored in await store.history("s")] == turn


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "\\N"),
        (True, "t"),
        (False, "f"),
        (42, "42"),
        (datetime(5, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "0005-01-02T03:04:05.000006+00:00"),
        ("a\\b\tc\nd\re", "a\\\\b\\tc\\nd\\re"),
    ],
)
def test_copy_text_escapes_what_the_text_format_reads(value: object, text: str) -> None:
    assert inserts._copy_text(value) == text
