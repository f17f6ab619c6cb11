"""Message rows of an append: counted, serialized once, inserted while the next are built.

Part of :mod:`store._append` (kept apart to keep modules short). The ``contents`` and
``metadata`` columns are written as JSON text made once per message (no second
serialization by the driver layer), the content hash computed by the dedupe step is
reused, and each message is tokenized once, here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from pydantic import ConfigDict, TypeAdapter
from sqlalchemy import JSON, Table, bindparam, insert
from sqlalchemy.engine import Dialect, RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Insert
from sqlalchemy.types import TypeDecorator

from store._rows import now
from store.models import Provenance
from store.schema import MessageRow
from strategies.messages import Content, Message
from strategies.tokenizers import TokenCountPolicy, Tokenizer, count_message_tokens

__all__ = ["AppendContext", "AppendTotals", "RowBuilder", "insert_messages"]

MESSAGES = cast(Table, MessageRow.__table__)

_CONTENTS_JSON = TypeAdapter(list[Content], config=ConfigDict(ser_json_inf_nan="constants"))
"""The storage format (:data:`strategies.messages.CONTENTS_ADAPTER`) written straight to
JSON text, non-finite floats kept as Python's ``json`` keeps them."""


class _JSONText(TypeDecorator[str]):
    """A JSON column bound from text that is already JSON (no second serialization)."""

    impl = JSON
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> None:
        """Send the text as it is."""
        return None


def _message_insert() -> Insert:
    """``INSERT`` of message rows whose ``contents`` and ``metadata`` are JSON text."""
    return insert(MESSAGES).values(
        contents=bindparam("contents_json", type_=_JSONText()),
        metadata=bindparam("metadata_json", type_=_JSONText()),
    )


_INSERT_MESSAGES = _message_insert()
_INSERT_CHUNK = 250
"""Message rows per ``executemany`` (one bound row each: no parameter limit applies)."""


@dataclass(frozen=True, slots=True)
class AppendContext:
    """Who appends, and how tokens are counted."""

    tenant: str
    session_id: str
    tokenizer: Tokenizer
    policy: TokenCountPolicy
    provenance: Provenance | None = None
    counter: Callable[[Message], int] | None = None
    """Counts a message's tokens (the store's pending-count cache); the tokenizer if None."""

    def count(self, message: Message) -> int:
        """The token count of ``message`` as it is stored."""
        if self.counter is not None:
            return self.counter(message)
        return count_message_tokens(message, self.tokenizer, policy=self.policy)


@dataclass(slots=True)
class AppendTotals:
    """What an append adds to the session's and groups' aggregates."""

    messages: int = 0
    tokens: int = 0
    active_messages: int = 0
    active_tokens: int = 0
    groups: int = 0
    active_groups: int = 0
    per_group: dict[str, list[int]] = field(default_factory=dict)


def _json_text(message: Message) -> tuple[str, str]:
    """The ``contents`` and ``metadata`` columns of ``message`` as JSON text."""
    try:
        contents = _CONTENTS_JSON.dump_json(message.contents).decode()
    except ValueError:  # text pydantic cannot encode (a lone surrogate): Python's json can
        contents = json.dumps(_CONTENTS_JSON.dump_python(message.contents, mode="json"))
    return contents, json.dumps(message.metadata, separators=(",", ":"))


@dataclass(slots=True)
class RowBuilder:
    """Builds the messages' insert parameter sets, slice by slice, adding to the totals."""

    ctx: AppendContext
    next_seq: int
    fresh: Sequence[Message]
    hashes: Mapping[str, str]
    group_ids: Sequence[str]
    groups: Mapping[str, RowMapping]
    """The stored groups the append touches (by id)."""
    totals: AppendTotals
    stamp: datetime = field(default_factory=now)

    def rows(self, start: int, stop: int) -> list[dict[str, Any]]:
        """Parameter sets of ``fresh[start:stop]`` (tokens counted here, once)."""
        return [self._row(index) for index in range(start, stop)]

    def _row(self, index: int) -> dict[str, Any]:
        ctx, totals, message = self.ctx, self.totals, self.fresh[index]
        group_id = self.group_ids[index]
        seq = self.next_seq + index
        tokens = ctx.count(message)
        group = self.groups.get(group_id)
        excluded = bool(group is not None and group["excluded"])
        per_group = totals.per_group.setdefault(group_id, [0, 0])
        per_group[0] += 1
        per_group[1] += tokens
        totals.messages += 1
        totals.tokens += tokens
        if not excluded:
            totals.active_messages += 1
            totals.active_tokens += tokens
        contents, metadata = _json_text(message)
        provenance = ctx.provenance
        return {
            "tenant": ctx.tenant,
            "session_id": ctx.session_id,
            "seq": seq,
            "anchor": seq,
            "slot": 0,
            "message_id": message.message_id,
            "role": message.role,
            "contents_json": contents,
            "author_name": message.author_name,
            "created_at": message.created_at,
            "metadata_json": metadata,
            "content_hash": self.hashes[message.message_id],
            "stored_at": self.stamp,
            "group_id": group_id,
            "token_count": tokens,
            "excluded": excluded,
            "excluded_reason": group["excluded_reason"] if excluded and group else None,
            "excluded_event_id": group["excluded_event_id"] if excluded and group else None,
            "source_system": provenance.system if provenance else None,
            "source_id": provenance.source_ids.get(message.message_id) if provenance else None,
            "imported_at": (provenance.imported_at or self.stamp) if provenance else None,
        }


async def insert_messages(conn: AsyncConnection, builder: RowBuilder) -> None:
    """Insert the rows slice by slice, building the next slice while the driver writes.

    The driver works outside the interpreter lock (SQLite's thread, PostgreSQL's
    socket), so counting and serializing slice ``k + 1`` overlaps writing slice ``k``.
    Only one statement is ever in flight on the connection.
    """
    total = len(builder.fresh)
    step = _INSERT_CHUNK if total > _INSERT_CHUNK else total
    writing: asyncio.Task[Any] | None = None
    try:
        for start in range(0, total, step):
            rows = builder.rows(start, min(total, start + step))
            if writing is not None:
                await writing
            writing = asyncio.ensure_future(conn.execute(_INSERT_MESSAGES, rows))
            await asyncio.sleep(0)  # let the insert reach the driver
        if writing is not None:
            await writing
    finally:
        if writing is not None:
            if not writing.done():
                await asyncio.wait([writing])
            if not writing.cancelled():
                writing.exception()  # retrieved: an error raised above takes precedence
