"""New groups' rows written within the message pipeline are the rows SQLAlchemy binds.

:class:`~store.sql.append.rows.NewGroups` hands a group's row to the pipeline once every
message of it is built, in the annotation's order; the rows are what SQLAlchemy's own
parameter processing makes of the same values, on SQLite and on PostgreSQL. The calls
an append looks up are those :func:`call_ids` and :func:`result_ids` name.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import insert
from sqlalchemy.dialects import sqlite
from sqlalchemy.dialects.postgresql import asyncpg
from sqlalchemy.engine import Dialect

from store.sql.annotation import referenced_calls
from store.sql.append.inserts import GROUP_COLUMNS, group_insert
from store.sql.append.rows import AppendContext, AppendTotals, NewGroups
from store.sql.schema import GROUPS
from strategies.groups import GroupInfo, call_ids, result_ids
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
)
from strategies.tokenizers import DEFAULT_POLICY, CharacterEstimatorTokenizer
from tests.store.helpers import sqlalchemy_bound_rows

STAMP = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _groups() -> NewGroups:
    ctx = AppendContext(
        tenant="t", session_id="s", tokenizer=CharacterEstimatorTokenizer(), policy=DEFAULT_POLICY
    )
    infos = [
        GroupInfo("g1", "user", 1, 5),
        GroupInfo("g2", "tool_call", 1, 6, has_reasoning=True, pending_calls=1),
        GroupInfo("g3", "assistant_text", 1, 7, orphan=True),
        GroupInfo("g4", "tool_call", 2, 9),  # no message in the append
    ]
    totals = AppendTotals(per_group={"g1": [1, 10], "g2": [3, 30], "g3": [1, 5]})
    return NewGroups(
        ctx,
        first_seq=11,
        groups=infos,
        last={"g1": 0, "g2": 4, "g3": 2},  # g2's result comes after g3
        totals=totals,
        gains={"g3": [2, 7, 1]},
        revision=8,
        stamp=STAMP,
    )


def _sqlalchemy_rows(dialect: Dialect, rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sqlalchemy_bound_rows(insert(GROUPS), GROUP_COLUMNS, dialect, rows)


def _expected(dialect: Dialect) -> list[tuple[Any, ...]]:
    rows = [
        ("g1", "user", 1, 16, 5, 1, 10, False, 0, False),
        ("g2", "tool_call", 1, 17, 6, 3, 30, True, 1, False),
        ("g3", "assistant_text", 1, 18, 7, 3, 12, False, 0, True),
        ("g4", "tool_call", 2, 20, 9, 0, 0, False, 0, False),
    ]
    values = [
        {
            "tenant": "t",
            "session_id": "s",
            "group_id": gid,
            "kind": kind,
            "turn": turn,
            "anchor": seq,
            "slot": 0,
            "first_seq": seq,
            "first_position": position,
            "message_count": count,
            "token_count": tokens,
            "has_reasoning": reasoning,
            "pending_calls": pending,
            "orphan": orphan,
            "created_at": STAMP,
            "written_revision": 8,
        }
        for gid, kind, turn, seq, position, count, tokens, reasoning, pending, orphan in rows
    ]
    return _sqlalchemy_rows(dialect, values)


@pytest.mark.parametrize("dialect", [sqlite.dialect(), asyncpg.dialect()], ids=lambda d: d.name)
def test_group_rows_match_sqlalchemy_binding(dialect: Dialect) -> None:
    groups, binds = _groups(), group_insert(dialect)
    assert binds.columns == GROUP_COLUMNS
    written = [*groups.ready(5, binds, final=False), *groups.ready(5, binds, final=True)]
    assert written == _expected(dialect)


def test_groups_are_ready_in_order_once_their_messages_are_built() -> None:
    groups, binds = _groups(), group_insert(sqlite.dialect())
    expected = _expected(sqlite.dialect())
    assert groups.ready(0, binds, final=False) == []
    assert groups.ready(1, binds, final=False) == expected[:1]
    # g3 is complete, but g2 (before it) waits for its result at index 4
    assert groups.ready(3, binds, final=False) == []
    assert groups.ready(5, binds, final=False) == expected[1:3]
    # g4 has no message in the append: written with the last slice
    assert groups.ready(5, binds, final=False) == []
    assert groups.ready(5, binds, final=True) == expected[3:]
    assert groups.ready(5, binds, final=True) == []


def test_referenced_calls_are_those_of_call_ids_and_result_ids() -> None:
    messages = [
        Message(role="user", contents=[TextContent(text="hi")]),
        Message(
            role="assistant",
            contents=[
                ReasoningContent(text="r"),
                FunctionCallContent(call_id="c1", name="f"),
                FunctionCallContent(call_id="", name="f"),
            ],
        ),
        Message(role="tool", contents=[FunctionResultContent(call_id="c1", result="x")]),
        Message(role="tool", contents=[FunctionResultContent(call_id="", result="x")]),
        Message(
            role="assistant",
            contents=[
                FunctionCallContent(call_id="c2", name="f"),
                OtherContent(kind="mcp", call_id="h1", pairing="call"),
                OtherContent(kind="mcp", call_id="h2", pairing="result"),
                OtherContent(kind="note", call_id="h3"),
            ],
        ),
        Message(role="tool", contents=[OtherContent(kind="mcp", call_id="", pairing="call")]),
    ]
    expected: set[str] = set()
    for message in messages:
        expected.update(c for c in call_ids(message) if c is not None)
        expected.update(result_ids(message))
    assert referenced_calls(messages) == expected == {"c1", "c2", "h1", "h2"}
    for message in messages:
        assert referenced_calls([message]) <= expected


@settings(max_examples=300, deadline=None)
@given(value=st.none() | st.datetimes(timezones=st.none() | st.timezones()))
def test_timestamps_bind_as_sqlalchemy_binds_them(value: datetime | None) -> None:
    compiled = insert(GROUPS).compile(dialect=sqlite.dialect(), column_keys=list(GROUP_COLUMNS))
    reference = compiled._bind_processors["created_at"]
    fast = group_insert(sqlite.dialect()).processor("created_at")
    assert fast is not reference
    assert fast(value) == reference(value)
    assert type(fast(value)) is type(reference(value))
