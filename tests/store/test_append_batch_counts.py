"""The fast paths of an append write what the plain ones wrote.

* ``content_hash`` is byte-identical to SHA-256 of ``json.dumps(..., sort_keys=True,
  separators=(",", ":"))`` of the canonical dump (stored rows hold these hashes).
* The message rows sent to the driver as tuples are what SQLAlchemy's own parameter
  processing makes of the same values, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy.dialects import sqlite
from sqlalchemy.dialects.postgresql import asyncpg
from sqlalchemy.engine import Dialect

from store.models import Provenance
from store.rules.identity import content_hash
from store.rules.storage_json import canonical_value
from store.sql.append.inserts import (
    _INSERT_MESSAGES,
    MESSAGE_COLUMNS,
    DriverInsert,
    message_insert,
)
from store.sql.append.rows import AppendContext, AppendTotals, RowBuilder
from strategies.messages import (
    DataContent,
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


def _messages() -> list[Message]:
    east = timezone(timedelta(hours=5, minutes=30))
    return [
        Message(role="user", contents=[TextContent(text='héllo \u2028 \x00 "q" \\')]),
        Message(
            role="assistant",
            contents=[
                ReasoningContent(text="think", payload={"sig": "abc", "n": [1, 2.5, None]}),
                FunctionCallContent(call_id="c1", name="f", arguments={"b": 1, "a": {"z": []}}),
            ],
            author_name="bot",
            created_at=datetime(2025, 5, 6, 7, 8, 9, tzinfo=east),
            metadata={"z": 1, "a": {"y": "ü", "x": [True, False]}},
        ),
        Message(
            role="tool",
            contents=[FunctionResultContent(call_id="c1", result={"k": 1e300, "j": -0.0})],
            created_at=datetime(2025, 5, 6, 7, 8, 9, 123),  # naive: taken as UTC
        ),
        Message(
            role="assistant",
            contents=[
                DataContent(data="aGk=", media_type="image/png", extra={"detail": "low"}),
                OtherContent(kind="mcp", payload={"q": "日本"}, call_id="c2", pairing="call"),
            ],
            created_at=datetime(2025, 5, 6, 7, 8, 9, tzinfo=UTC),
        ),
    ]


def _reference_hash(message: Message) -> str:
    payload = json.dumps(canonical_value(message), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


@pytest.mark.parametrize("message", _messages(), ids=lambda m: m.role)
def test_content_hash_matches_the_stored_format(message: Message) -> None:
    assert content_hash(message) == _reference_hash(message)


def test_content_hash_is_pinned() -> None:
    message = Message(
        role="user",
        contents=[TextContent(text="hi é")],
        message_id="m-1",
        created_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
        metadata={"b": 1, "a": [1.5]},
    )
    assert content_hash(message) == (
        "1e258ea4cb53b5b335dec19f9eb62c38bffba1044c1db83bab8fe7e53077fcc8"
    )


def _builder(messages: list[Message], *, provenance: Provenance | None) -> RowBuilder:
    ctx = AppendContext(
        tenant="t",
        session_id="s",
        tokenizer=CharacterEstimatorTokenizer(),
        policy=DEFAULT_POLICY,
        provenance=provenance,
    )
    hidden = {"excluded": True, "excluded_reason": "r", "excluded_event_id": "e"}
    return RowBuilder(
        ctx,
        next_seq=10,
        fresh=messages,
        hashes={m.message_id: content_hash(m) for m in messages},
        group_ids=["g1", "g2", "g2", "g3"],
        kinds=["user", "tool_call", "tool_call", None],
        groups={"g2": hidden},  # type: ignore[dict-item]
        totals=AppendTotals(),
        stamp=STAMP,
    )


def _sqlalchemy_rows(dialect: Dialect, rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sqlalchemy_bound_rows(_INSERT_MESSAGES, MESSAGE_COLUMNS, dialect, rows)


@pytest.mark.parametrize("dialect", [sqlite.dialect(), asyncpg.dialect()], ids=lambda d: d.name)
@pytest.mark.parametrize("imported", [False, True])
def test_driver_rows_match_sqlalchemy_binding(dialect: Dialect, imported: bool) -> None:
    messages = _messages()
    provenance = (
        Provenance(system="src", source_ids={messages[1].message_id: "x1"}) if imported else None
    )
    plain = DriverInsert("", MESSAGE_COLUMNS, {})
    raw = _builder(messages, provenance=provenance).rows(0, len(messages), plain)
    expected = _sqlalchemy_rows(
        dialect, [dict(zip(MESSAGE_COLUMNS, row, strict=True)) for row in raw]
    )
    builder, binds = _builder(messages, provenance=provenance), message_insert(dialect)
    assert builder.rows(0, 2, binds) + builder.rows(2, len(messages), binds) == expected
    assert [binds.row(dict(zip(MESSAGE_COLUMNS, row, strict=True))) for row in raw] == expected
    totals = builder.totals
    assert (totals.messages, totals.active_messages) == (4, 2)
    assert totals.per_group["g2"][0] == 2
    assert sum(n for _, n in totals.per_group.values()) == totals.tokens
