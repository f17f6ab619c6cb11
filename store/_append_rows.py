"""Message rows of an append: counted, serialized once, inserted while the next are built.

Part of :mod:`store._append` (kept apart to keep modules short). The ``contents`` and
``metadata`` columns are written as JSON text made once per message (no second
serialization by the driver layer), the content hash computed by the dedupe step is
reused, and each message is tokenized once, here. Rows go to the driver as tuples of
an ``INSERT`` compiled once per dialect (:class:`DriverInsert`): SQLAlchemy's per-row
parameter processing is replaced by the same bind processors, applied only to the
columns that have one (timestamps, ``excluded``), and once per slice to the constants.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, cast
from weakref import WeakKeyDictionary

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

__all__ = [
    "AppendContext",
    "AppendTotals",
    "DriverInsert",
    "RowBuilder",
    "insert_messages",
    "message_insert",
]

MESSAGES = cast(Table, MessageRow.__table__)

_CONTENTS_JSON = TypeAdapter(list[Content], config=ConfigDict(ser_json_inf_nan="constants"))
"""The storage format (:data:`strategies.messages.CONTENTS_ADAPTER`) written straight to
JSON text, non-finite floats kept as Python's ``json`` keeps them."""

_METADATA_JSON = json.JSONEncoder(separators=(",", ":"))
"""``json.dumps(value, separators=(",", ":"))``, without building an encoder per call."""


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

_COLUMNS: Final = (
    "tenant",
    "session_id",
    "seq",
    "anchor",
    "slot",
    "message_id",
    "role",
    "contents_json",
    "author_name",
    "created_at",
    "stored_at",
    "metadata_json",
    "content_hash",
    "group_id",
    "token_count",
    "excluded",
    "excluded_reason",
    "excluded_event_id",
    "source_system",
    "source_id",
    "imported_at",
)
"""The bound parameters of a message row, in the order of the compiled ``INSERT``."""

Processor = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class DriverInsert:
    """An ``INSERT`` compiled once for a dialect, its rows sent to the driver as tuples.

    SQLAlchemy's per-row parameter handling (a dict per row, every key looked up, a
    processor call per typed value) is replaced by the statement's own bind processors,
    applied by the caller only where a column has one (:meth:`processor`), or by
    :meth:`row` for rows given as mappings.
    """

    sql: str
    columns: tuple[str, ...]
    """The bound parameters in the order the driver takes them."""
    processors: Mapping[str, Processor]
    """The bind processor of each parameter that has one."""

    @classmethod
    def compile(cls, statement: Insert, columns: Sequence[str], dialect: Dialect) -> DriverInsert:
        """Compile ``statement`` binding ``columns`` (every row gives them all)."""
        compiled = statement.compile(dialect=dialect, column_keys=list(columns))
        order = tuple(compiled.positiontup or ())
        if sorted(order) != sorted(columns):  # pragma: no cover - a default or a missing key
            raise ValueError(f"statement binds {order}, expected {tuple(columns)}")
        processors: dict[str, Processor] = {}
        # the processors SQLAlchemy's own execution context applies to these parameters
        for name, processor in compiled._bind_processors.items():
            if isinstance(name, str) and name in order and callable(processor):
                processors[name] = processor
        return cls(str(compiled), order, processors)

    def processor(self, name: str) -> Processor:
        """The bind processor of parameter ``name`` (the identity when it has none)."""
        return self.processors.get(name, _identity)

    def row(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The driver row of ``values``, a mapping of every bound parameter."""
        out: list[Any] = []
        for name in self.columns:
            value, process = values[name], self.processors.get(name)
            out.append(value if process is None else process(value))
        return tuple(out)


_DRIVER_INSERTS: WeakKeyDictionary[Dialect, DriverInsert] = WeakKeyDictionary()


def message_insert(dialect: Dialect) -> DriverInsert:
    """The message ``INSERT`` for ``dialect``, binding :data:`_COLUMNS` in that order."""
    found = _DRIVER_INSERTS.get(dialect)
    if found is None:
        found = DriverInsert.compile(_INSERT_MESSAGES, _COLUMNS, dialect)
        if found.columns != _COLUMNS:  # pragma: no cover - the table's columns moved
            raise RuntimeError(f"unexpected message insert parameters: {found.columns}")
        _DRIVER_INSERTS[dialect] = found
    return found


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
    metadata = message.metadata
    return contents, _METADATA_JSON.encode(metadata) if metadata else "{}"


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

    def rows(self, start: int, stop: int, binds: DriverInsert) -> list[tuple[Any, ...]]:
        """Driver rows of ``fresh[start:stop]``, in :data:`_COLUMNS` order.

        Tokens are counted here, once per message; the bind processors of the constant
        values (the import stamp, ``excluded``) run once per slice.
        """
        ctx = self.ctx
        tenant, session_id, provenance = ctx.tenant, ctx.session_id, ctx.provenance
        source_ids = provenance.source_ids if provenance else {}
        source_system = provenance.system if provenance else None
        imported_at = binds.processor("imported_at")(
            (provenance.imported_at or self.stamp) if provenance else None
        )
        stored_at = binds.processor("stored_at")(self.stamp)
        excluded_flag = binds.processor("excluded")
        flags = (excluded_flag(False), excluded_flag(True))
        created_at, count, groups = binds.processor("created_at"), ctx.count, self.groups
        out: list[tuple[Any, ...]] = []
        for index in range(start, stop):
            message, group_id = self.fresh[index], self.group_ids[index]
            message_id, seq, tokens = message.message_id, self.next_seq + index, count(message)
            group = groups.get(group_id)
            excluded = group is not None and bool(group["excluded"])
            self._tally(group_id, tokens, excluded)
            contents, metadata = _json_text(message)
            reason, event_id = (
                (group["excluded_reason"], group["excluded_event_id"])
                if excluded and group is not None
                else (None, None)
            )
            out.append(
                (
                    tenant,
                    session_id,
                    seq,
                    seq,  # anchor
                    0,  # slot
                    message_id,
                    message.role,
                    contents,
                    message.author_name,
                    created_at(message.created_at),
                    stored_at,
                    metadata,
                    self.hashes[message_id],
                    group_id,
                    tokens,
                    flags[excluded],
                    reason,
                    event_id,
                    source_system,
                    source_ids.get(message_id),
                    imported_at,
                )
            )
        return out

    def _tally(self, group_id: str, tokens: int, excluded: bool) -> None:
        totals = self.totals
        counts = totals.per_group.get(group_id)
        if counts is None:
            totals.per_group[group_id] = [1, tokens]
        else:
            counts[0] += 1
            counts[1] += tokens
        totals.messages += 1
        totals.tokens += tokens
        if not excluded:
            totals.active_messages += 1
            totals.active_tokens += tokens


async def insert_messages(conn: AsyncConnection, builder: RowBuilder) -> None:
    """Insert the rows slice by slice, building the next slice while the driver writes.

    The driver works outside the interpreter lock (SQLite's thread, PostgreSQL's
    socket), so counting and serializing slice ``k + 1`` overlaps writing slice ``k``.
    Only one statement is ever in flight on the connection.
    """
    total = len(builder.fresh)
    step = _INSERT_CHUNK if total > _INSERT_CHUNK else total
    binds = message_insert(conn.dialect)
    writing: asyncio.Task[Any] | None = None
    try:
        for start in range(0, total, step):
            rows = builder.rows(start, min(total, start + step), binds)
            if writing is not None:
                await writing
            writing = asyncio.ensure_future(conn.exec_driver_sql(binds.sql, rows))
            await asyncio.sleep(0)  # let the insert reach the driver
        if writing is not None:
            await writing
    finally:
        if writing is not None:
            if not writing.done():
                await asyncio.wait([writing])
            if not writing.cancelled():
                writing.exception()  # retrieved: an error raised above takes precedence
