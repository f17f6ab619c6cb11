"""Rows to models and models to rows: the SQL backend's mapping, plain functions.

JSON columns are read as text and decoded while mapping each row, so that a row holding
invalid JSON is reported as a :class:`~store.errors.CorruptRowError` naming its ``seq``
rather than failing somewhere inside the driver. Timestamp columns are read as the
driver returns them (SQLite's ISO text, asyncpg's ``datetime``) and made aware UTC while
mapping, as :class:`~store.sql.schema.UTCDateTime` would, without SQLAlchemy's per-value
result processing.

Rows are mapped from plain tuples selected with :func:`message_columns`. What the store
wrote was validated when it was written, so a read validates only what can be damaged
on disk: the contents are validated straight from their JSON text
(:data:`~strategies.messages.CONTENTS_ADAPTER`, in one pass of pydantic-core), the
metadata must parse as a JSON
object, the text columns must hold text and the group's kind must be known; the models
are then built from those values without validating them again (``model_construct``).
A row that fails any of it raises :class:`~store.errors.CorruptRowError`. A row holding
a reduced version takes the general, validating mapping (:func:`message_from_row`).

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
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import String, Text, type_coerce
from sqlalchemy import cast as sql_cast

from store.errors import CorruptRowError
from store.formats._common import describe_validation
from store.models import SessionInfo, StoredMessage
from store.rules.identity import content_hash
from store.sql.schema import MESSAGES
from strategies.groups import GROUP_KINDS
from strategies.messages import (
    CONTENTS_ADAPTER,
    Message,
)

__all__ = [
    "COLUMN_INDEX",
    "MESSAGE_FORMAT",
    "inserted_message",
    "message_columns",
    "message_from_row",
    "message_to_values",
    "page_mapper",
    "paused_collection",
    "reduced_to_value",
    "row_message",
    "session_from_row",
    "stored_message",
    "timestamp",
]

M = TypeVar("M", Message, StoredMessage)

MESSAGE_FORMAT = 1
"""The version of the stored message JSON this library writes and the newest it reads:
``contents`` and ``reduced_contents`` as :data:`~strategies.messages.CONTENTS_ADAPTER`
dumps them, ``metadata`` a JSON object."""

_JSON_COLUMNS = ("contents", "metadata", "reduced_contents")
_TIMESTAMP_COLUMNS = ("created_at", "stored_at", "imported_at")
_UNREAD_COLUMNS = ("tenant", "session_id", "content_hash", "group_kind")
"""Not needed to map a row: every query is filtered by tenant and session, and a read
of history selects the kind as one column, the row's where it is stored, else its
group's (:mod:`store.sql.history`)."""


_CONTEXT = {"allow_custom_roles": True}
_MAPPED = (ValidationError, KeyError, TypeError, ValueError)


def _reason(error: Exception) -> str:
    """Why a row did not map, on one line (pydantic's own text spans several)."""
    if isinstance(error, ValidationError):
        return describe_validation(error)
    return " ".join(str(error).split())


def message_columns() -> list[Any]:
    """The columns a message is mapped from, in table order (see :data:`COLUMN_INDEX`):
    JSON ones as text, timestamps as the driver returns them (see :func:`timestamp`)."""
    columns: list[Any] = []
    for column in MESSAGES.c:
        if column.key in _UNREAD_COLUMNS:
            continue
        if column.key in _JSON_COLUMNS:
            columns.append(sql_cast(column, Text).label(column.key))
        elif column.key in _TIMESTAMP_COLUMNS:
            columns.append(type_coerce(column, String()).label(column.key))
        else:
            columns.append(column)
    return columns


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


class _Timestamps:
    """:func:`timestamp`, remembering the last value read (the rows of one append share
    their ``stored_at`` and ``imported_at``)."""

    __slots__ = ("_last", "_parsed")

    def __init__(self) -> None:
        self._last: Any = None
        self._parsed: datetime | None = None

    def __call__(self, value: Any) -> datetime | None:
        if value is None:
            return None
        if value != self._last or self._parsed is None:
            self._parsed = timestamp(value)
            self._last = value
        return self._parsed


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


_STORED_AT = _Timestamps()
_IMPORTED_AT = _Timestamps()


COLUMN_INDEX: dict[str, int] = {c.key: i for i, c in enumerate(message_columns())}
"""Position of each column in a row selected with :func:`message_columns`."""
_I = COLUMN_INDEX


_PLAIN_FIELDS = (
    "seq",
    "anchor",
    "slot",
    "group_id",
    "token_count",
    "excluded",
    "excluded_reason",
    "excluded_event_id",
    "reduced_token_count",
    "reduced_event_id",
    "source_system",
    "source_id",
)
"""The stored message's fields taken from the row as they are."""
_PLAIN = itemgetter(*(_I[key] for key in _PLAIN_FIELDS))
_SEQ, _GROUP, _REDUCED = _I["seq"], _I["group_id"], _I["reduced_contents"]
_ANCHOR, _SLOT, _TOKENS, _EXCLUDED = _I["anchor"], _I["slot"], _I["token_count"], _I["excluded"]
_EXCLUDED_REASON, _EXCLUDED_EVENT = _I["excluded_reason"], _I["excluded_event_id"]
_REDUCED_TOKENS, _REDUCED_EVENT = _I["reduced_token_count"], _I["reduced_event_id"]
_SOURCE_SYSTEM, _SOURCE_ID = _I["source_system"], _I["source_id"]
_STORED, _IMPORTED = _I["stored_at"], _I["imported_at"]
_ROLE, _CONTENTS, _ID = _I["role"], _I["contents"], _I["message_id"]
_AUTHOR, _CREATED, _METADATA = _I["author_name"], _I["created_at"], _I["metadata"]
_FORMAT = _I["format_version"]
_TIMESTAMP_INDEX = tuple((key, _I[key]) for key in _TIMESTAMP_COLUMNS)


def _corrupt(error: Exception, row: Sequence[Any], tenant: str, session_id: str) -> CorruptRowError:
    seq = row[_SEQ] if isinstance(row[_SEQ], int) else None
    return CorruptRowError(_reason(error), tenant=tenant, session_id=session_id, seq=seq)


def _as_mapping(row: Sequence[Any], kind: str | None) -> dict[str, Any]:
    mapping = {key: row[index] for key, index in _I.items()}
    for key, index in _TIMESTAMP_INDEX:
        mapping[key] = timestamp(row[index])
    mapping["kind"] = kind
    return mapping


_new = object.__new__
_set = object.__setattr__
_MESSAGE_FIELDS = frozenset(Message.model_fields)
_STORED_FIELDS = frozenset(StoredMessage.model_fields)


def _built(cls: type[M], values: dict[str, Any], fields: frozenset[str]) -> M:
    """An instance of the frozen model ``cls`` holding ``values``: every field (``fields``),
    in the model's order (dumps follow it), built as ``model_construct`` builds it
    without its per-field loop: the values are the store's own, checked by the caller."""
    model = _new(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", set(fields))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


_VALIDATE_CONTENTS = CONTENTS_ADAPTER.validator.validate_json
"""Validate a ``contents`` column by the storage format straight from its JSON text:
pydantic-core parses and builds the models in one pass (faster than decoding the text
with ``json`` first), called on the adapter's core validator, without the adapter's own
Python layer; raises for what is not a list of contents."""


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


def _row_message(row: Sequence[Any]) -> Message:
    """The stored message of ``row`` (no reduction): contents validated straight from
    their JSON text, the rest checked, then built without validating it again."""
    if row[_FORMAT] != MESSAGE_FORMAT:
        check_format(row[_FORMAT])
    metadata_text = row[_METADATA]
    metadata = {} if metadata_text is None or metadata_text == "{}" else json.loads(metadata_text)
    if type(metadata) is not dict:
        raise ValueError(f"metadata is {type(metadata).__name__}, not a JSON object")
    role, message_id, author = row[_ROLE], row[_ID], row[_AUTHOR]
    if type(role) is not str or not role:
        _text(role, "role")
    if type(message_id) is not str or not message_id:
        _text(message_id, "message_id")
    if author is not None and type(author) is not str:
        _text(author, "author_name", optional=True)
    created = row[_CREATED]
    values = {
        "role": role,
        "contents": _VALIDATE_CONTENTS(row[_CONTENTS]),
        "message_id": message_id,
        "author_name": author,
        "created_at": None if created is None else timestamp(created),
        "metadata": metadata,
    }
    return _built(Message, values, _MESSAGE_FIELDS)


def row_message(row: Sequence[Any], *, tenant: str, session_id: str) -> Message:
    """The message a projection shows for a row of :func:`message_columns` (reduction
    applied); :class:`~store.errors.CorruptRowError` when the row does not validate."""
    try:
        if row[_REDUCED] is not None:
            mapping = _as_mapping(row, "user")
            stored = message_from_row(mapping, tenant=tenant, session_id=session_id)
            return stored.reduced if stored.reduced is not None else stored.message
        return _row_message(row)
    except _MAPPED as error:
        raise _corrupt(error, row, tenant, session_id) from error


def inserted_message(values: Mapping[str, Any]) -> Message:
    """What :func:`row_message` returns for a row inserted from ``values`` (the columns
    of :func:`store.models.message_to_values`, no reduction): the JSON columns go
    through the text they are stored as, the timestamp is normalized as read."""
    metadata = values["metadata"]
    return Message.model_validate(
        {
            "role": values["role"],
            "contents": CONTENTS_ADAPTER.validate_json(json.dumps(values["contents"])),
            "message_id": values["message_id"],
            "author_name": values["author_name"],
            "created_at": timestamp(values["created_at"]),
            "metadata": json.loads(json.dumps(metadata)) if metadata else {},
        },
        context=_CONTEXT,
    )


def stored_message(
    row: Sequence[Any], kind: str | None, *, tenant: str, session_id: str
) -> StoredMessage:
    """A :class:`StoredMessage` from a row of :func:`message_columns` and its group's kind."""
    try:
        if row[_REDUCED] is not None:
            mapping = _as_mapping(row, kind)
            return message_from_row(mapping, tenant=tenant, session_id=session_id)
        if kind not in GROUP_KINDS:
            raise ValueError(f"its group {row[_GROUP]!r} is missing or of no known kind")
        stored_at = _STORED_AT(row[_STORED])
        if stored_at is None:
            raise ValueError("stored_at is missing")
        imported_at = row[_IMPORTED]
        values = {
            "session_id": session_id,
            "tenant": tenant,
            "seq": row[_SEQ],
            "anchor": row[_ANCHOR],
            "slot": row[_SLOT],
            "message": _row_message(row),
            "group_id": row[_GROUP],
            "kind": kind,
            "token_count": row[_TOKENS],
            "excluded": bool(row[_EXCLUDED]),
            "excluded_reason": row[_EXCLUDED_REASON],
            "excluded_event_id": row[_EXCLUDED_EVENT],
            "reduced": None,
            "reduced_token_count": row[_REDUCED_TOKENS],
            "reduced_event_id": row[_REDUCED_EVENT],
            "stored_at": stored_at,
            "source_system": row[_SOURCE_SYSTEM],
            "source_id": row[_SOURCE_ID],
            "imported_at": None if imported_at is None else _IMPORTED_AT(imported_at),
        }
        return _built(StoredMessage, values, _STORED_FIELDS)
    except _MAPPED as error:
        raise _corrupt(error, row, tenant, session_id) from error


_PAGE_ORDER = (
    "seq",
    "anchor",
    "slot",
    "message_id",
    "role",
    "contents",
    "author_name",
    "created_at",
    "stored_at",
    "metadata",
    "group_id",
    "token_count",
    "excluded",
    "excluded_reason",
    "excluded_event_id",
    "reduced_contents",
    "reduced_token_count",
    "reduced_event_id",
    "source_system",
    "source_id",
    "imported_at",
    "format_version",
)
"""The columns of :func:`message_columns`, in the order :func:`page_mapper` unpacks them."""
if tuple(COLUMN_INDEX) != _PAGE_ORDER:  # pragma: no cover - the table's columns moved
    raise RuntimeError(f"the message columns are {tuple(COLUMN_INDEX)}, not {_PAGE_ORDER}")

_KINDS = frozenset(GROUP_KINDS)
_loads = json.loads
_from_iso = datetime.fromisoformat
_UTC = "+00:00"
"""Appended to SQLite's naive UTC text: one parse gives the aware timestamp."""


def _read_time(value: Any) -> datetime:
    """:func:`timestamp` of a value that is not None: SQLite's naive UTC text in one
    parse, any other value as :func:`timestamp` reads it (PostgreSQL's aware
    ``datetime``). Text that is not naive date and time (an offset of its own, a date
    alone, whose "+" would be read as the separator) raises ``ValueError``: the caller
    then takes :func:`stored_message`'s way."""
    parsed = _from_iso(value + _UTC) if type(value) is str else timestamp(value)
    if parsed is None or parsed.tzinfo is None:
        raise ValueError("not a naive date and time")
    return parsed


_SET_FIELDS, _SET_EXTRA, _SET_PRIVATE = (
    vars(BaseModel)[slot].__set__
    for slot in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
)
"""The setters of a model's slots (what :func:`_built` sets, without the attribute
lookup of ``object.__setattr__``)."""


def page_mapper(tenant: str, session_id: str) -> Callable[[Sequence[Any]], StoredMessage]:
    """The mapping of a history page's rows (the columns of :func:`message_columns`,
    then the group's kind) of one session: :func:`stored_message` of each row, with the
    same checks, unpacking the row once and building both models in one frame.

    A row that is not the usual one (a reduced version, a format or kind to check, a
    value of the wrong type, a timestamp that is not SQLite's naive UTC text) takes
    :func:`stored_message` itself, which maps it or raises
    :class:`~store.errors.CorruptRowError` with the reason."""
    validate, new, put, set_fields, set_extra, set_private = (
        _VALIDATE_CONTENTS,
        _new,
        _set,
        _SET_FIELDS,
        _SET_EXTRA,
        _SET_PRIVATE,
    )
    message_fields, stored_fields = _MESSAGE_FIELDS, _STORED_FIELDS
    last_stored: Any = None
    stored_at: datetime | None = None
    imported_times = _Timestamps()

    def general(row: Sequence[Any]) -> StoredMessage:
        return stored_message(row, row[-1], tenant=tenant, session_id=session_id)

    def mapped(row: Sequence[Any]) -> StoredMessage:
        nonlocal last_stored, stored_at
        (
            seq,
            anchor,
            slot,
            message_id,
            role,
            contents,
            author,
            created,
            stored,
            metadata,
            group_id,
            tokens,
            excluded,
            excluded_reason,
            excluded_event_id,
            reduced,
            reduced_tokens,
            reduced_event_id,
            source_system,
            source_id,
            imported,
            version,
            kind,
        ) = row
        if (
            reduced is not None
            or version != MESSAGE_FORMAT
            or kind not in _KINDS
            or stored is None
            or type(role) is not str
            or not role
            or type(message_id) is not str
            or not message_id
            or (author is not None and type(author) is not str)
        ):
            return general(row)
        try:
            meta = {} if metadata is None or metadata == "{}" else _loads(metadata)
            if type(meta) is not dict:
                return general(row)
            if stored != last_stored:
                stored_at, last_stored = _read_time(stored), stored
            message = new(Message)
            put(
                message,
                "__dict__",
                {
                    "role": role,
                    "contents": validate(contents),
                    "message_id": message_id,
                    "author_name": author,
                    "created_at": None if created is None else _read_time(created),
                    "metadata": meta,
                },
            )
            set_fields(message, set(message_fields))
            set_extra(message, None)
            set_private(message, None)
            out = new(StoredMessage)
            put(
                out,
                "__dict__",
                {
                    "session_id": session_id,
                    "tenant": tenant,
                    "seq": seq,
                    "anchor": anchor,
                    "slot": slot,
                    "message": message,
                    "group_id": group_id,
                    "kind": kind,
                    "token_count": tokens,
                    "excluded": bool(excluded),
                    "excluded_reason": excluded_reason,
                    "excluded_event_id": excluded_event_id,
                    "reduced": None,
                    "reduced_token_count": reduced_tokens,
                    "reduced_event_id": reduced_event_id,
                    "stored_at": stored_at,
                    "source_system": source_system,
                    "source_id": source_id,
                    "imported_at": None if imported is None else imported_times(imported),
                },
            )
            set_fields(out, set(stored_fields))
            set_extra(out, None)
            set_private(out, None)
            return out
        except _MAPPED:
            return general(row)  # raises CorruptRowError, saying why

    return mapped


def message_to_values(message: Message) -> dict[str, Any]:
    """The message's own columns (role, contents, author, timestamps, metadata, hash)."""
    return {
        "message_id": message.message_id,
        "role": message.role,
        "contents": CONTENTS_ADAPTER.dump_python(message.contents, mode="json"),
        "author_name": message.author_name,
        "created_at": message.created_at,
        "metadata": message.metadata,
        "content_hash": content_hash(message),
    }


def _json(value: Any) -> Any:
    """Decode a JSON column read as text (a value already decoded is returned as is)."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def _build_message(row: Mapping[str, Any], contents: Any) -> Message:
    metadata = _json(row["metadata"])
    return Message.model_validate(
        {
            "role": row["role"],
            "contents": _json(contents),
            "message_id": row["message_id"],
            "author_name": row["author_name"],
            "created_at": row["created_at"],
            "metadata": metadata if metadata is not None else {},
        },
        context={"allow_custom_roles": True},
    )


def reduced_to_value(message: Message) -> dict[str, Any]:
    """The ``reduced_contents`` column of a reduced version: its contents and own fields."""
    values = message_to_values(message)
    return {k: values[k] for k in ("contents", "metadata", "role", "author_name")}


def _reduced_message(row: Mapping[str, Any]) -> Message:
    value = _json(row["reduced_contents"])
    if isinstance(value, dict) and "contents" in value:
        overlay = {
            **row,
            **{k: value[k] for k in ("metadata", "role", "author_name") if k in value},
        }
        return _build_message(overlay, value["contents"])
    return _build_message(row, value)  # an overlay of contents only


def message_from_row(row: Mapping[Any, Any], *, tenant: str, session_id: str) -> StoredMessage:
    """Build a :class:`StoredMessage` from a joined messages/groups row mapping."""
    try:
        check_format(row.get("format_version"))
        reduced = None
        if row["reduced_contents"] is not None:
            reduced = _reduced_message(row)
        return StoredMessage(
            session_id=session_id,
            tenant=tenant,
            seq=row["seq"],
            anchor=row["anchor"],
            slot=row["slot"],
            message=_build_message(row, row["contents"]),
            group_id=row["group_id"],
            kind=row["kind"],
            token_count=row["token_count"],
            excluded=row["excluded"],
            excluded_reason=row["excluded_reason"],
            excluded_event_id=row["excluded_event_id"],
            reduced=reduced,
            reduced_token_count=row["reduced_token_count"],
            reduced_event_id=row["reduced_event_id"],
            stored_at=row["stored_at"],
            source_system=row["source_system"],
            source_id=row["source_id"],
            imported_at=row["imported_at"],
        )
    except (ValidationError, KeyError, TypeError, ValueError) as error:
        seq = row.get("seq") if isinstance(row.get("seq"), int) else None
        raise CorruptRowError(
            _reason(error), tenant=tenant, session_id=session_id, seq=seq
        ) from error


def session_from_row(row: Mapping[Any, Any]) -> SessionInfo:
    """Build a :class:`SessionInfo` from a sessions row mapping."""
    try:
        return SessionInfo(
            session_id=row["session_id"],
            tenant=row["tenant"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            tokenizer=row["tokenizer"],
            revision=row["revision"],
            metadata=_json(row["metadata"]) or {},
            stored_messages=row["stored_messages"],
            stored_groups=row["stored_groups"],
            stored_tokens=row["stored_tokens"],
            active_messages=row["active_messages"],
            active_groups=row["active_groups"],
            active_tokens=row["active_tokens"],
        )
    except (ValidationError, KeyError, TypeError, ValueError) as error:
        raise CorruptRowError(
            f"the session row does not parse ({_reason(error)}); "
            "`chatledger doctor --fix` repairs it",
            tenant=str(row.get("tenant")),
            session_id=str(row.get("session_id")),
            seq=None,
        ) from error
