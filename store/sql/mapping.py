"""Rows to models and models to rows: the SQL backend's mapping, plain functions.

One table, :data:`COLUMNS`, holds each column of ``chatledger_messages`` a message is
read from: its name, its position in the row (its place in the table, the order
:func:`message_columns` selects them in), the field it fills (of the
:class:`~strategies.messages.Message`, of the :class:`~store.models.StoredMessage`
around it, or none) and how its value is read (a :class:`Read`). Every decoder of a
message row is derived from it, so a new column is added to the table (with the schema
and the model) and nowhere else; the columns no decoder needs are
:data:`UNREAD_COLUMNS`.

A row is read one of two ways, both derived from the table:

* The fast way (:func:`page_mapper`, the full read's hot path, and
  :func:`row_message`): the table is compiled once into one function of each
  (as :mod:`dataclasses` compiles ``__init__`` from a class's fields), which unpacks
  the row once, hands it to the general way when a column's guard says so (a reduced
  version, a format or kind to check, a value of the wrong type, a timestamp that is not
  SQLite's naive UTC text), and otherwise builds the models without validating them
  again: what the store wrote was validated when it was written, so a read checks only
  what can be damaged on disk.
* The general way (:func:`stored_message`'s fallback, :func:`message_from_row`) reads
  each column by its :class:`Read` and validates the models.

Stored texts (``contents``, ``metadata``, ``reduced_contents``, a session's metadata)
are selected as text and decoded by :mod:`store.sql.codec`, so that a row holding
invalid JSON is reported as a :class:`~store.errors.CorruptRowError` naming its ``seq``
rather than failing inside the driver. Timestamps are read as the driver returns them
(SQLite's ISO text, asyncpg's ``datetime``) and made aware UTC here, as
:class:`~store.sql.schema.UTCDateTime` would, without SQLAlchemy's per-value result
processing. A row that fails any of it raises :class:`~store.errors.CorruptRowError`.

Every message row carries the version of its JSON's format (``format_version``, the
column's default: :data:`MESSAGE_FORMAT`, also what rows written before it existed
hold). A row of a later format than this library reads is refused with
:class:`~store.errors.CorruptRowError` saying so, never misread.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, cast

from pydantic import BaseModel, ValidationError
from sqlalchemy import String, Text, bindparam, insert, type_coerce
from sqlalchemy import cast as sql_cast
from sqlalchemy.sql import Insert

from store.errors import CorruptRowError
from store.formats._common import describe_validation
from store.models import SessionInfo, StoredMessage
from store.rules.identity import REDACTED_HASH, hashed_contents, is_tombstone
from store.rules.storage_json import MESSAGE_FORMAT
from store.search.text import search_text_of
from store.sql.codec import (
    ENCODED,
    INLINE,
    decode_author,
    decode_contents,
    decode_metadata,
    decode_reduced,
    decode_session_metadata,
    decode_title,
    encode_author,
    encode_contents,
    encode_metadata,
    sealing_now,
)
from store.sql.schema import MESSAGES
from strategies.groups import GROUP_KINDS
from strategies.messages import Message

__all__ = [
    "COLUMNS",
    "COLUMN_INDEX",
    "INSERT_MESSAGE",
    "MESSAGE_FORMAT",
    "UNREAD_COLUMNS",
    "Column",
    "Read",
    "inserted_message",
    "message_columns",
    "message_from_row",
    "message_to_values",
    "page_mapper",
    "paused_collection",
    "row_message",
    "session_from_row",
    "stored_message",
    "timestamp",
]

_CONTEXT = {"allow_custom_roles": True}
_MAPPED = (ValidationError, KeyError, TypeError, ValueError)
_Where = tuple[str, str, Any]
"""The place of a row: its tenant, its session and its ``seq``."""


def _reason(error: Exception) -> str:
    """Why a row did not map, on one line (pydantic's own text spans several)."""
    if isinstance(error, ValidationError):
        return describe_validation(error)
    return " ".join(str(error).split())


# --- reading one value ---------------------------------------------------------------

_parse = datetime.fromisoformat


def timestamp(value: Any) -> datetime | None:
    """A timestamp column read raw, as :class:`~store.sql.schema.UTCDateTime` returns it:
    aware UTC (SQLite's ISO text is parsed; a naive value is taken to be UTC)."""
    if value is None:
        return None
    if type(value) is str:
        # naive ISO text (what SQLite holds) parses as UTC in one step, with the offset
        # appended; text with its own offset, a date alone (whose "+" would be read as
        # the date-time separator) or no timestamp at all take the general way
        try:
            parsed = _parse(value + "+00:00")
        except ValueError:
            pass
        else:
            if parsed.tzinfo is not None:
                return parsed
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    if not isinstance(parsed, datetime):
        raise TypeError(f"not a timestamp: {value!r}")
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


_UTC = "+00:00"
"""Appended to SQLite's naive UTC text: one parse gives the aware timestamp."""


def _read_time(value: Any) -> datetime:
    """:func:`timestamp` of a value that is not None: SQLite's naive UTC text in one
    parse, any other value as :func:`timestamp` reads it (PostgreSQL's aware
    ``datetime``). Text that is not naive date and time (an offset of its own, a date
    alone, whose "+" would be read as the separator) raises ``ValueError``: the fast way
    then hands the row to the general one."""
    parsed = _parse(value + _UTC) if type(value) is str else timestamp(value)
    if parsed is None or parsed.tzinfo is None:
        raise ValueError("not a naive date and time")
    return parsed


def _text(value: Any, name: str, *, optional: bool = False) -> Any:
    """``value`` when it is text (non-empty, unless ``optional``: then also empty or
    None, as the model allows an empty ``author_name``), else ``ValueError``."""
    if optional and (value is None or type(value) is str):
        return value
    if type(value) is str and value:
        return value
    raise ValueError(f"{name} is {value!r}, not text")


def check_format(version: Any) -> None:
    """Refuse a row whose JSON is of a format this library does not read."""
    if version is not None and version != MESSAGE_FORMAT:
        raise ValueError(
            f"its JSON is in format {version!r}, and this chatledger reads format "
            f"{MESSAGE_FORMAT}: a newer chatledger wrote it (upgrade the package)"
        )


def _stamp(value: Any, name: str, where: _Where) -> datetime | None:
    if value is None:
        raise ValueError(f"{name} is missing")
    return timestamp(value)


@dataclass(frozen=True, slots=True)
class Read:
    """How a column's value becomes its field's value, the fast way and the general way.

    The fast way's code is written with ``{v}`` for the column's value (a local named
    after the column); ``tenant``, ``session_id`` and ``seq`` are the row's place.
    """

    select: Literal["column", "text", "raw"]
    """How the column is selected: read by its type, as text (a stored text, decoded
    here), or as the driver returns it (a timestamp)."""
    decode: Callable[[Any, str, _Where], Any]
    """The general way: the field's value from the column's value and name and the row's
    place; ``ValueError`` or ``TypeError`` when it holds no such value."""
    fast: str = "{v}"
    """The fast way: the field's value (an expression)."""
    guard: str = ""
    """The fast way: a condition that hands the row to the general way ("" for none)."""
    before: tuple[str, ...] = ()
    """The fast way: statements run before the models are built."""
    state: tuple[str, ...] = ()
    """The fast way: names its statements keep from row to row (None at first)."""


AS_IS = Read("column", lambda value, name, where: value)
"""Taken as it is (the stored message's validation checks it, the general way)."""
FLAG = Read("column", lambda value, name, where: bool(value), fast="bool({v})")
"""A boolean (SQLite's 0 or 1)."""
TEXT = Read(
    "column",
    lambda value, name, where: _text(value, name),
    guard="type({v}) is not str or not {v}",
)
"""Non-empty text."""
OPTIONAL_TEXT = Read(
    "column",
    lambda value, name, where: _text(value, name, optional=True),
    guard="{v} is not None and type({v}) is not str",
)
"""Text, empty or None."""
AUTHOR = Read(
    "column",
    lambda value, name, where: _text(decode_author(*where, value), name, optional=True),
    guard="{v} is not None and type({v}) is not str",
)
"""An author name: :data:`OPTIONAL_TEXT`, opened where the store seals (the fast way,
which reads it as it is, runs only where nothing seals)."""
TIME = Read(
    "raw", lambda value, name, where: timestamp(value), fast="None if {v} is None else time({v})"
)
"""A timestamp, or None."""
STAMP = Read(
    "raw",
    _stamp,
    fast="{v}_value",
    guard="{v} is None",
    before=("if {v} != {v}_seen:", "    {v}_value, {v}_seen = time({v}), {v}"),
    state=("{v}_seen", "{v}_value"),
)
"""A timestamp the rows of one write share (parsed once for a run of equal values)."""
OPTIONAL_STAMP = Read(
    "raw",
    lambda value, name, where: timestamp(value),
    fast="None if {v} is None else {v}_value",
    before=(
        "if {v} is not None and {v} != {v}_seen:",
        "    {v}_value, {v}_seen = time({v}), {v}",
    ),
    state=("{v}_seen", "{v}_value"),
)
"""A :data:`STAMP` or None."""
CONTENTS = Read(
    "text",
    lambda value, name, where: decode_contents(*where, value),
    fast=INLINE["contents"].expression,
)
"""A message's contents, decoded by :func:`~store.sql.codec.decode_contents`."""
METADATA = Read(
    "text",
    lambda value, name, where: decode_metadata(*where, value),
    fast=INLINE["metadata"].expression,
)
"""A message's metadata, decoded by :func:`~store.sql.codec.decode_metadata`."""
REDUCED = Read(
    "text",
    lambda value, name, where: None if value is None else decode_reduced(*where, value),
    fast="None",
    guard="{v} is not None",
)
"""A reduced version: what it overlays on the message, decoded by
:func:`~store.sql.codec.decode_reduced` (the fast way reads rows without one)."""
FORMAT = Read(
    "column", lambda value, name, where: check_format(value), guard="{v} != MESSAGE_FORMAT"
)
"""The version of the row's JSON (checked before any other column is read)."""


Target = Literal["message", "stored", "reduced", "row"]
"""What a column fills: a field of the message, a field of the stored message, the
stored message's reduced version (an overlay on the message), or nothing (it says how
the whole row is read)."""


@dataclass(frozen=True, slots=True)
class Column:
    """A column of ``chatledger_messages`` as the decoders read it."""

    name: str
    """Its name (and the local that holds its value in the fast way's code)."""
    target: Target
    field: str | None
    """The field it fills (None for a ``row`` column)."""
    read: Read


COLUMNS: tuple[Column, ...] = (
    Column("seq", "stored", "seq", AS_IS),
    Column("anchor", "stored", "anchor", AS_IS),
    Column("slot", "stored", "slot", AS_IS),
    Column("message_id", "message", "message_id", TEXT),
    Column("role", "message", "role", TEXT),
    Column("contents", "message", "contents", CONTENTS),
    Column("author_name", "message", "author_name", AUTHOR),
    Column("created_at", "message", "created_at", TIME),
    Column("stored_at", "stored", "stored_at", STAMP),
    Column("metadata", "message", "metadata", METADATA),
    Column("group_id", "stored", "group_id", AS_IS),
    Column("token_count", "stored", "token_count", AS_IS),
    Column("excluded", "stored", "excluded", FLAG),
    Column("excluded_reason", "stored", "excluded_reason", AS_IS),
    Column("excluded_event_id", "stored", "excluded_event_id", AS_IS),
    Column("reduced_contents", "reduced", "reduced", REDUCED),
    Column("reduced_token_count", "stored", "reduced_token_count", AS_IS),
    Column("reduced_event_id", "stored", "reduced_event_id", AS_IS),
    Column("source_system", "stored", "source_system", AS_IS),
    Column("source_id", "stored", "source_id", AS_IS),
    Column("imported_at", "stored", "imported_at", OPTIONAL_STAMP),
    Column("format_version", "row", None, FORMAT),
)
"""The columns a message is read from, in the order of the row (see the module
docstring); a column's position here is its position in the row."""

UNREAD_COLUMNS = ("tenant", "session_id", "content_hash", "group_kind", "search_text")
"""Not needed to map a row: every query is filtered by tenant and session, and a read
of history selects the kind as one column, the row's where it is stored, else its
group's (:mod:`store.sql.history`)."""

COLUMN_INDEX: dict[str, int] = {column.name: i for i, column in enumerate(COLUMNS)}
"""Position of each column in a row selected with :func:`message_columns`."""
_SEQ = COLUMN_INDEX["seq"]

_SHOWN: tuple[Target, ...] = ("message", "reduced", "row")
"""What the message a projection shows is read from (not the stored message's own)."""


def _selected(column: Column) -> Any:
    found = MESSAGES.c[column.name]
    if column.read.select == "text":
        return sql_cast(found, Text).label(column.name)
    if column.read.select == "raw":
        return type_coerce(found, String()).label(column.name)
    return found


def message_columns() -> list[Any]:
    """The columns a message is mapped from, in the order of :data:`COLUMNS`: stored
    texts as text, timestamps as the driver returns them (see :func:`timestamp`)."""
    return [_selected(column) for column in COLUMNS]


# --- the general way -----------------------------------------------------------------

_GENERAL_ORDER = tuple(sorted(range(len(COLUMNS)), key=lambda i: COLUMNS[i].read is not FORMAT))
"""Positions in the order the general way reads them: the format first."""


def _general(
    row: Sequence[Any], tenant: str, session_id: str
) -> tuple[Message, Message | None, dict[str, Any]]:
    """The row's message, its reduced version and the stored message's other fields,
    each column read by its :class:`Read` and the models validated."""
    where = (tenant, session_id, row[_SEQ])
    message_values: dict[str, Any] = {}
    stored_values: dict[str, Any] = {}
    overlay: dict[str, Any] | None = None
    for index in _GENERAL_ORDER:
        column = COLUMNS[index]
        value = column.read.decode(row[index], column.name, where)
        if column.target == "message":
            message_values[cast(str, column.field)] = value
        elif column.target == "stored":
            stored_values[cast(str, column.field)] = value
        elif column.target == "reduced":
            overlay = value
    message = Message.model_validate(message_values, context=_CONTEXT)
    reduced = None
    if overlay is not None:
        reduced = Message.model_validate({**message_values, **overlay}, context=_CONTEXT)
    return message, reduced, stored_values


def _corrupt(error: Exception, row: Sequence[Any], tenant: str, session_id: str) -> CorruptRowError:
    seq = row[_SEQ] if isinstance(row[_SEQ], int) else None
    return CorruptRowError(_reason(error), tenant=tenant, session_id=session_id, seq=seq)


def _general_stored(row: Sequence[Any], kind: Any, tenant: str, session_id: str) -> StoredMessage:
    """:func:`stored_message` the general way; :class:`CorruptRowError` saying why."""
    try:
        message, reduced, values = _general(row, tenant, session_id)
        if kind not in GROUP_KINDS:
            raise ValueError(f"its group {values['group_id']!r} is missing or of no known kind")
        return StoredMessage(
            session_id=session_id,
            tenant=tenant,
            message=message,
            kind=kind,
            reduced=reduced,
            **values,
        )
    except _MAPPED as error:
        raise _corrupt(error, row, tenant, session_id) from error


def _general_message(row: Sequence[Any], tenant: str, session_id: str) -> Message:
    """:func:`row_message` the general way; :class:`CorruptRowError` saying why."""
    try:
        message, reduced, _ = _general(row, tenant, session_id)
    except _MAPPED as error:
        raise _corrupt(error, row, tenant, session_id) from error
    return reduced if reduced is not None else message


def _general_original(row: Sequence[Any], tenant: str, session_id: str) -> Message:
    """:func:`original_message` the general way; :class:`CorruptRowError` saying why."""
    try:
        return _general(row, tenant, session_id)[0]
    except _MAPPED as error:
        raise _corrupt(error, row, tenant, session_id) from error


# --- the fast way --------------------------------------------------------------------

_SET_FIELDS, _SET_EXTRA, _SET_PRIVATE = (
    vars(BaseModel)[slot].__set__
    for slot in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
)
"""The setters of a model's slots (what ``model_construct`` sets, without the attribute
lookup of ``object.__setattr__``)."""

_MADE_OF_THE_ROW = {"session_id": "session_id", "tenant": "tenant", "message": "message"}
"""The stored message's fields no column fills: the reader's place and the message."""

_BUILD = """
            {name} = new({model})
            put({name}, "__dict__", {{{items}}})
            set_fields({name}, set({fields}))
            set_extra({name}, None)
            set_private({name}, None)"""

_MAPPER = """
def make({make_args}):
    {state}
    def mapped({args}):
        {declared}
        {unpack}
        if {guards}:
            return general({args})
        try:
            {before}{message}{stored}
            return {result}
        except MAPPED:
            return general({args})  # raises CorruptRowError, saying why
    return mapped
"""
"""The fast way's code: a function that makes the mapper (of one session, for a page)."""


def _items(model: type[BaseModel], exprs: Mapping[str, str]) -> str:
    """The ``__dict__`` of ``model`` as a dict display, in the model's field order
    (its dumps follow it): each field's expression in ``exprs``, which must name every
    field and no other."""
    fields = set(model.model_fields)
    if fields != set(exprs):  # pragma: no cover - the table and the models disagree
        raise RuntimeError(
            f"the columns fill {sorted(exprs)}, and {model.__name__} has {sorted(fields)}"
        )
    return ", ".join(f'"{name}": {exprs[name]}' for name in model.model_fields)


_SEALED_FAST: Mapping[str, str] = {
    "contents": "decode_contents(tenant, session_id, seq, {v})",
    "metadata": "decode_metadata(tenant, session_id, seq, {v})",
    "author_name": "decode_author(tenant, session_id, seq, {v})",
}
"""The fast way's expressions of the sealed columns where the store seals: the codec's
functions, which open each text at its place (the others read as in clear)."""


def _mapper_source(
    *, stored: bool, shown: tuple[Target, ...] = _SHOWN, sealed: bool = False
) -> str:
    """The fast way's code for a page row (``stored``: the columns, then the group's
    kind, to a :class:`StoredMessage`) or for a row of :func:`message_columns` to the
    :class:`Message` made of the columns of the targets ``shown`` (with ``reduced``:
    the message it shows; without: the message as appended)."""
    used = [c for c in COLUMNS if stored or c.target in shown]
    guards = [c.read.guard.format(v=c.name) for c in used if c.read.guard]
    if stored:  # a page row: unpacked at once
        guards.append("kind not in KINDS")
        unpack = ", ".join([c.name for c in COLUMNS] + ["kind"]) + " = row"
    else:  # a row that may end with other columns: the ones used (and the place)
        taken = [c for c in COLUMNS if c in used or c.name == "seq"]
        unpack = "\n        ".join(f"{c.name} = row[{COLUMN_INDEX[c.name]}]" for c in taken)
    state = [name.format(v=c.name) for c in used for name in c.read.state]
    before = [line.format(v=c.name) for c in used for line in c.read.before]
    exprs: dict[Target, dict[str, str]] = {"message": {}, "stored": {}, "reduced": {}}
    for c in used:
        if c.field is not None:
            fast = _SEALED_FAST.get(c.name, c.read.fast) if sealed else c.read.fast
            exprs[c.target][c.field] = fast.format(v=c.name)
    message = _BUILD.format(
        name="message",
        model="Message",
        fields="MESSAGE_FIELDS",
        items=_items(Message, exprs["message"]),
    )
    out = ""
    if stored:
        made = {**_MADE_OF_THE_ROW, "kind": "kind", **exprs["stored"], **exprs["reduced"]}
        items = _items(StoredMessage, made)
        out = _BUILD.format(name="out", model="StoredMessage", fields="STORED_FIELDS", items=items)
    return _MAPPER.format(
        make_args="tenant, session_id, general" if stored else "general",
        state=" = ".join([*state, "None"]) if state else "",
        args="row" if stored else "row, tenant, session_id",
        declared=f"nonlocal {', '.join(state)}" if state else "",
        unpack=unpack,
        guards=" or ".join(f"({guard})" for guard in guards),
        before="\n            ".join(before),
        message=message,
        stored=out,
        result="out" if stored else "message",
    )


_NAMESPACE: dict[str, Any] = {
    "new": object.__new__,
    "put": object.__setattr__,
    "set_fields": _SET_FIELDS,
    "set_extra": _SET_EXTRA,
    "set_private": _SET_PRIVATE,
    "Message": Message,
    "StoredMessage": StoredMessage,
    "MESSAGE_FIELDS": frozenset(Message.model_fields),
    "STORED_FIELDS": frozenset(StoredMessage.model_fields),
    "MAPPED": _MAPPED,
    "KINDS": frozenset(GROUP_KINDS),
    "MESSAGE_FORMAT": MESSAGE_FORMAT,
    "time": _read_time,
    **INLINE["contents"].names,
    **INLINE["metadata"].names,
    "decode_contents": decode_contents,
    "decode_metadata": decode_metadata,
    "decode_author": decode_author,
}
"""The names the fast way's code uses besides the columns."""
_RESERVED = frozenset(
    (*_NAMESPACE, "make", "mapped", "general", "row", "kind", "tenant", "session_id")
) | {"message", "out"}
"""Names the fast way's code takes (and the models it builds): no column may take one."""
if _RESERVED & set(COLUMN_INDEX):  # pragma: no cover - a column took a name of the code
    raise RuntimeError(f"columns named {sorted(_RESERVED & set(COLUMN_INDEX))}")


def _compiled(source: str) -> Callable[..., Callable[..., Any]]:
    """The ``make`` function of ``source``, the fast way's code."""
    namespace = dict(_NAMESPACE)
    exec(compile(source, f"<{__name__}: the fast way>", "exec"), namespace)
    return cast(Callable[..., Callable[..., Any]], namespace["make"])


_PAGE_SOURCE = _mapper_source(stored=True)
_SHOWN_SOURCE = _mapper_source(stored=False)
_make_page_mapper = _compiled(_PAGE_SOURCE)
_row_message = _compiled(_SHOWN_SOURCE)(_general_message)
_ORIGINAL_SOURCE = _mapper_source(stored=False, shown=("message", "row"))
_original_message = _compiled(_ORIGINAL_SOURCE)(_general_original)
_make_sealed_page_mapper = _compiled(_mapper_source(stored=True, sealed=True))
_sealed_row_message = _compiled(_mapper_source(stored=False, sealed=True))(_general_message)
_sealed_original_message = _compiled(
    _mapper_source(stored=False, shown=("message", "row"), sealed=True)
)(_general_original)


def page_mapper(tenant: str, session_id: str) -> Callable[[Sequence[Any]], StoredMessage]:
    """The mapping of a history page's rows (the columns of :func:`message_columns`,
    then the group's kind) of one session: :func:`stored_message` of each row, with the
    same checks, unpacking the row once and building both models in one frame.

    A row that is not the usual one takes the general way, which maps it or raises
    :class:`~store.errors.CorruptRowError` with the reason."""

    def general(row: Sequence[Any]) -> StoredMessage:
        return _general_stored(row[:-1], row[-1], tenant, session_id)

    make = _make_page_mapper if sealing_now() is None else _make_sealed_page_mapper
    return cast(Callable[[Sequence[Any]], StoredMessage], make(tenant, session_id, general))


def row_message(row: Sequence[Any], *, tenant: str, session_id: str) -> Message:
    """The message a projection shows for a row of :func:`message_columns` (reduction
    applied); :class:`~store.errors.CorruptRowError` when the row does not validate."""
    mapped = _row_message if sealing_now() is None else _sealed_row_message
    return cast(Message, mapped(row, tenant, session_id))


def original_message(row: Sequence[Any], *, tenant: str, session_id: str) -> Message:
    """The message as appended (no reduction) of a row of :func:`message_columns`, the
    fast way (a search builds its hits from these); :class:`~store.errors.CorruptRowError`
    when the row does not validate."""
    mapped = _original_message if sealing_now() is None else _sealed_original_message
    return cast(Message, mapped(row, tenant, session_id))


def stored_message(
    row: Sequence[Any], kind: str | None, *, tenant: str, session_id: str
) -> StoredMessage:
    """A :class:`StoredMessage` from a row of :func:`message_columns` and its group's kind."""
    return page_mapper(tenant, session_id)((*row, kind))


@contextmanager
def paused_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector while a batch of rows is mapped and kept.

    A read builds a tree of small objects for each row (the models, their dicts and
    contents), none of them in a cycle; every few hundred allocations the collector
    scans all the young ones that are still alive, and a read that keeps what it maps
    (:func:`~store.sql.history.read_history`) survives each scan with everything it
    built so far: the scans took more than half of such a read's mapping. Collection
    resumes when the batch is mapped (and stays off if it was off before)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# --- other forms of a row ------------------------------------------------------------


def _as_text(value: Any) -> Any:
    """A stored text's value as text (a value SQLAlchemy decoded is written again)."""
    return value if value is None or isinstance(value, str | bytes) else json.dumps(value)


def message_from_row(row: Mapping[Any, Any], *, tenant: str, session_id: str) -> StoredMessage:
    """Build a :class:`StoredMessage` from a joined messages/groups row mapping (the
    columns by name, the group's as ``kind``; stored texts as text, or as SQLAlchemy's
    JSON type decodes them), the general way."""
    try:
        values = tuple(
            _as_text(row[c.name]) if c.read.select == "text" else row[c.name] for c in COLUMNS
        )
        kind = row["kind"]
    except _MAPPED as error:
        seq = row.get("seq") if isinstance(row.get("seq"), int) else None
        raise CorruptRowError(
            _reason(error), tenant=tenant, session_id=session_id, seq=seq
        ) from error
    return _general_stored(values, kind, tenant, session_id)


INSERT_MESSAGE: Insert = insert(MESSAGES).values(
    contents=bindparam("contents_json", type_=ENCODED),
    metadata=bindparam("metadata_json", type_=ENCODED),
)
"""``INSERT`` of message rows, their ``contents`` and ``metadata`` encoded texts bound
as ``contents_json`` and ``metadata_json`` (see :func:`message_to_values`)."""
_BOUND_AS = {"contents": "contents_json", "metadata": "metadata_json"}


def message_to_values(
    message: Message, *, tenant: str, session_id: str, seq: int
) -> dict[str, Any]:
    """The parameters of :data:`INSERT_MESSAGE` that message ``seq`` fills itself: its
    id, role, author, timestamp and hash, and its encoded contents and metadata (the
    contents' JSON as hashing wrote it, where it did), and its searchable text."""
    digest, written = hashed_contents(message)
    if is_tombstone(message):
        digest = REDACTED_HASH
    return {
        "message_id": message.message_id,
        "role": message.role,
        "contents_json": encode_contents(tenant, session_id, seq, message.contents, written),
        "author_name": encode_author(tenant, session_id, seq, message.author_name),
        "created_at": message.created_at,
        "metadata_json": encode_metadata(tenant, session_id, seq, message.metadata),
        "content_hash": digest,
        "search_text": search_text_of(message) if sealing_now() is None else None,
    }


def inserted_message(values: Mapping[str, Any]) -> Message:
    """What :func:`row_message` returns for a row inserted from ``values`` (parameters
    of :data:`INSERT_MESSAGE` with the place, ``tenant``, ``session_id`` and ``seq``; no
    reduction): the stored texts are decoded, the timestamp normalized as read."""
    defaults = {"format_version": MESSAGE_FORMAT}
    row = tuple(values.get(_BOUND_AS.get(c.name, c.name), defaults.get(c.name)) for c in COLUMNS)
    return row_message(row, tenant=values["tenant"], session_id=values["session_id"])


def session_from_row(row: Mapping[Any, Any]) -> SessionInfo:
    """Build a :class:`SessionInfo` from a sessions row mapping (its metadata as text)."""
    tenant, session_id = row.get("tenant"), row.get("session_id")
    try:
        return SessionInfo(
            session_id=row["session_id"],
            tenant=row["tenant"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            tokenizer=row["tokenizer"],
            revision=row["revision"],
            metadata=decode_session_metadata(str(tenant), str(session_id), row["metadata"]),
            stored_messages=row["stored_messages"],
            stored_groups=row["stored_groups"],
            stored_tokens=row["stored_tokens"],
            active_messages=row["active_messages"],
            active_groups=row["active_groups"],
            active_tokens=row["active_tokens"],
            parent_session_id=row.get("parent_session_id"),
            fork_message_id=row.get("fork_message_id"),
            title=decode_title(str(tenant), str(session_id), row.get("title")),
        )
    except (ValidationError, KeyError, TypeError, ValueError) as error:
        raise CorruptRowError(
            f"the session row does not parse ({_reason(error)}); "
            "`chatledger doctor --fix` repairs it",
            tenant=str(tenant),
            session_id=str(session_id),
            seq=None,
        ) from error
