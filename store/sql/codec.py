"""Every text the SQL backend stores, encoded and decoded in one place.

The stored texts are a message row's ``contents``, ``metadata`` and
``reduced_contents`` (summaries and tombstones are message rows too), a session row's
``metadata``, and an audit event's ``params`` and ``note``. Every statement that writes
one of these columns binds what an ``encode_*`` function here returned (a JSON column
with :data:`ENCODED` as the bind's type: the text as it is, never serialized again), and
every read that maps one selects it as text and decodes it with the ``decode_*``
function of its column. What compaction reads (ids, order, token counts, exclusion
state, timestamps) is not stored text: it stays in clear columns.

Each function is given the place of its text: the tenant, the row within it (a message
row's session and ``seq``, a session's id, an event's session and id) and, by the
function's name, the column. None of them uses the place yet: a layer that seals the
texts (encryption at rest, bound to that place and to
:data:`~store.rules.storage_json.MESSAGE_FORMAT`) wraps these functions, and no caller
changes. The read path's hot loop (:func:`~store.sql.mapping.page_mapper`) decodes a
row's contents and metadata with the expressions of :data:`INLINE`, kept here beside
the functions they stand for.

The JSON itself is written by :mod:`store.rules.storage_json`. This module belongs to the
SQL backend, not to :mod:`store.rules`, because only the SQL backend stores text (the
in-memory one keeps the models) and the places are its rows; its functions are plain
(no connection, no statement), and the one SQL name here is the bind type of its texts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import JsonValue
from sqlalchemy import JSON
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from store.rules.storage_json import contents_json, object_json, reduced_json
from store.sql.drivers.allocator import LARGE_VALUE
from strategies.messages import CONTENTS_ADAPTER, Content, Message

__all__ = [
    "ENCODED",
    "INLINE",
    "EncodedJSON",
    "Inline",
    "decode_contents",
    "decode_event_note",
    "decode_event_params",
    "decode_metadata",
    "decode_reduced",
    "decode_session_metadata",
    "encode_contents",
    "encode_event_note",
    "encode_event_params",
    "encode_metadata",
    "encode_reduced",
    "encode_session_metadata",
]


class EncodedJSON(TypeDecorator[str]):
    """A JSON column bound from the text an ``encode_*`` function returned, as it is."""

    impl = JSON
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> None:
        """Send the text as it is."""
        return None


ENCODED = EncodedJSON()
"""The bind type of every encoded text."""

_validate_contents: Callable[[str], list[Content]] = CONTENTS_ADAPTER.validator.validate_json
"""Validate a ``contents`` text by the storage format: pydantic-core parses and builds
the models in one pass, called on the adapter's core validator (without its Python
layer); raises for what is not a list of contents."""
_validate_parsed: Callable[[Any], list[Content]] = CONTENTS_ADAPTER.validator.validate_python
_loads = json.loads
_SURROGATE_ESCAPES = ("\\ud", "\\uD")
"""How a JSON text writes a surrogate (pydantic-core refuses a lone one; ``json`` does
not). A text read from either database holds no raw surrogate: neither stores one."""


def _validate_large_contents(text: str) -> list[Content]:
    """:data:`_validate_contents` of a text of over
    :data:`~store.sql.drivers.allocator.LARGE_VALUE` characters, parsed by :mod:`json`
    and the parsed values validated: the same models. pydantic-core writes a string
    holding escapes into a scratch buffer grown as it goes before it makes the Python
    string, and decoding a 20 MB tool result of prose took up to 15 MB more than that
    at its peak, in some runs and not others (``docs/limits.md``, "Memory"); ``json``
    writes the string itself. A text holding a surrogate's escape, and one that either
    step refuses, is decoded by pydantic-core, which raises as it always did."""
    if any(escape in text for escape in _SURROGATE_ESCAPES):
        return _validate_contents(text)
    try:
        return _validate_parsed(_loads(text))
    except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError
        return _validate_contents(text)


def _object(text: str | None, what: str) -> dict[str, Any]:
    """The JSON object ``text`` holds (``{}`` for None); ``ValueError`` for anything else."""
    if text is None or text == "{}":
        return {}
    value = _loads(text)
    if type(value) is not dict:
        raise ValueError(f"{what} is {type(value).__name__}, not a JSON object")
    return value


# --- a message row ------------------------------------------------------------------


def encode_contents(
    tenant: str,
    session_id: str,
    seq: int,
    contents: list[Content],
    written: str | None = None,
) -> str:
    """The ``contents`` column of message ``seq``: ``written`` when hashing wrote its
    JSON already (:func:`~store.rules.identity.hashed_contents`), else its JSON."""
    return written if written is not None else contents_json(contents)


def decode_contents(tenant: str, session_id: str, seq: int, text: str) -> list[Content]:
    """The contents of message ``seq`` from its ``contents`` column, validated."""
    if len(text) > LARGE_VALUE:
        return _validate_large_contents(text)
    return _validate_contents(text)


def encode_metadata(tenant: str, session_id: str, seq: int, metadata: Mapping[str, Any]) -> str:
    """The ``metadata`` column of message ``seq``."""
    return object_json(metadata)


def decode_metadata(
    tenant: str, session_id: str, seq: int, text: str | None
) -> dict[str, JsonValue]:
    """The metadata of message ``seq`` from its ``metadata`` column: a JSON object
    (``ValueError`` for anything else)."""
    return _object(text, "metadata")


@dataclass(frozen=True, slots=True)
class Inline:
    """A message text's decoding written into generated code, where a call per row would
    cost more than the decoding itself: an expression over ``{v}`` (the column's text)
    and the row's place (``tenant``, ``session_id``, ``seq``), and the names it uses. It
    gives what the column's ``decode_*`` function gives, and raises what it raises."""

    expression: str
    names: Mapping[str, Any]


def _metadata_object(text: str) -> dict[str, JsonValue]:
    return _object(text, "metadata")


INLINE: Final[Mapping[str, Inline]] = {
    "contents": Inline(
        "validate_contents({v}) if len({v}) <= LARGE_VALUE else validate_large({v})",
        {
            "validate_contents": _validate_contents,
            "validate_large": _validate_large_contents,
            "LARGE_VALUE": LARGE_VALUE,
        },
    ),
    "metadata": Inline(
        '{{}} if {v} is None or {v} == "{{}}" else metadata_object({v})',
        {"metadata_object": _metadata_object},
    ),
}
""":func:`decode_contents` and :func:`decode_metadata` for the hot loop of a history read
(:func:`~store.sql.mapping.page_mapper`), by column. A layer that seals the texts
replaces these with calls of its ``decode_*`` functions, as it wraps them."""


def encode_reduced(tenant: str, session_id: str, seq: int, reduced: Message) -> str:
    """The ``reduced_contents`` column of message ``seq``: its reduced version."""
    return reduced_json(reduced)


def decode_reduced(tenant: str, session_id: str, seq: int, text: str) -> dict[str, Any]:
    """What the reduced version of message ``seq`` holds instead of the message's own
    values: ``contents`` (validated), and ``metadata``, ``role`` and ``author_name`` where
    the column holds them (rows written before it held them overlay the contents only)."""
    value = _loads(text)
    if isinstance(value, dict) and "contents" in value:
        fields = {k: value[k] for k in ("metadata", "role", "author_name") if k in value}
        value = value["contents"]
    else:
        fields = {}
    return {"contents": CONTENTS_ADAPTER.validate_python(value), **fields}


# --- a session row ------------------------------------------------------------------


def encode_session_metadata(tenant: str, session_id: str, metadata: Mapping[str, Any]) -> str:
    """The ``metadata`` column of session ``session_id``."""
    return object_json(metadata)


def decode_session_metadata(tenant: str, session_id: str, text: str | None) -> dict[str, Any]:
    """The metadata of session ``session_id`` from its column: a JSON object
    (``ValueError`` for anything else)."""
    return _object(text, "metadata")


# --- an audit event -----------------------------------------------------------------


def encode_event_params(
    tenant: str, session_id: str, event_id: str, params: Mapping[str, Any]
) -> str:
    """The ``params`` column of event ``event_id``."""
    return object_json(params)


def decode_event_params(
    tenant: str, session_id: str, event_id: str, text: str | None
) -> dict[str, Any]:
    """The parameters of event ``event_id`` from its ``params`` column."""
    return _object(text, "params")


def encode_event_note(tenant: str, session_id: str, event_id: str, note: Mapping[str, Any]) -> str:
    """The ``note`` column of event ``event_id`` (its ordered group lists)."""
    return object_json(note)


def decode_event_note(
    tenant: str, session_id: str, event_id: str, text: str | None
) -> dict[str, Any]:
    """The note of event ``event_id`` (``{}`` when it has none)."""
    return _object(text or None, "note")
