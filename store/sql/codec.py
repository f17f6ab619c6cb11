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
function's name, the column. A store opened with encryption at rest runs each call in
:func:`sealed` with its tenant's :class:`~store.encryption.sealing.Sealing`: then every
``encode_*`` seals its text for that place and every ``decode_*`` opens it there, and
refuses a text in clear (:class:`~store.errors.CorruptRowError`). Without one, a sealed
text is refused too (:class:`~store.errors.KeyRequired`): nothing reads a sealed text as
if it were clear, and nothing is written in clear by a store that seals. The author
name, title and compaction request (text columns) go through here for that reason.
The read path's hot loop (:func:`~store.sql.mapping.page_mapper`) decodes a row's
contents and metadata with the expressions of :data:`INLINE`, kept here beside the
functions they stand for, when nothing seals (:func:`sealing_now`).

The JSON itself is written by :mod:`store.rules.storage_json`. This module belongs to the
SQL backend, not to :mod:`store.rules`, because only the SQL backend stores text (the
in-memory one keeps the models) and the places are its rows; its functions are plain
(no connection, no statement), and the one SQL name here is the bind type of its texts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pydantic import JsonValue
from sqlalchemy import JSON
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from store.errors import KeyRequired
from store.rules.identity import keyed_hashing
from store.rules.storage_json import contents_json, object_json, reduced_json
from store.sql.drivers.allocator import LARGE_VALUE
from strategies.messages import CONTENTS_ADAPTER, Content, Message

if TYPE_CHECKING:
    from store.encryption.sealing import Sealing

__all__ = [
    "ENCODED",
    "INLINE",
    "EncodedJSON",
    "Inline",
    "decode_author",
    "decode_compaction_request",
    "decode_contents",
    "decode_event_note",
    "decode_event_params",
    "decode_metadata",
    "decode_reduced",
    "decode_session_metadata",
    "decode_title",
    "encode_author",
    "encode_compaction_request",
    "encode_contents",
    "encode_event_note",
    "encode_event_params",
    "encode_metadata",
    "encode_reduced",
    "encode_session_metadata",
    "encode_title",
    "sealed",
    "sealing_now",
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


_SEALING: ContextVar[Sealing | None] = ContextVar("chatledger_sealing", default=None)
"""The sealing of the store whose call is running (None: texts are stored in clear)."""
_SEALED_PREFIX = '"cl1.'
""":data:`store.encryption.sealing.PREFIX` (not imported: that module loads the
cipher)."""


@contextmanager
def sealed(sealing: Sealing | None) -> Iterator[None]:
    """Run a store's call with ``sealing`` (None: in clear), its content hashes keyed
    by the tenant's hash key (:func:`~store.rules.identity.keyed_hashing`)."""
    token = _SEALING.set(sealing)
    try:
        with keyed_hashing(None if sealing is None else sealing.hash_key):
            yield
    finally:
        _SEALING.reset(token)


def sealing_now() -> Sealing | None:
    """The sealing of the running call (None when texts are stored in clear)."""
    return _SEALING.get()


def _seal(text: str, table: str, session_id: str, row: object, column: str) -> str:
    sealing = _SEALING.get()
    return text if sealing is None else sealing.seal(text, table, session_id, row, column)


def _open(tenant: str, text: str, table: str, session_id: str, row: object, column: str) -> str:
    sealing = _SEALING.get()
    if sealing is not None:
        return sealing.open(text, table, session_id, row, column)
    if type(text) is str and text.startswith(_SEALED_PREFIX):
        raise KeyRequired(
            f"tenant {tenant!r} is encrypted: open the store with its key "
            "(encryption=KeyRing(...), or --key-file)"
        )
    return text


def _open_optional(
    tenant: str, text: str | None, table: str, session_id: str, row: object, column: str
) -> str | None:
    return None if text is None else _open(tenant, text, table, session_id, row, column)


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
    text = written if written is not None else contents_json(contents)
    return _seal(text, "messages", session_id, seq, "contents")


def decode_contents(tenant: str, session_id: str, seq: int, text: str) -> list[Content]:
    """The contents of message ``seq`` from its ``contents`` column, validated."""
    text = _open(tenant, text, "messages", session_id, seq, "contents")
    if len(text) > LARGE_VALUE:
        return _validate_large_contents(text)
    return _validate_contents(text)


def encode_metadata(tenant: str, session_id: str, seq: int, metadata: Mapping[str, Any]) -> str:
    """The ``metadata`` column of message ``seq``."""
    return _seal(object_json(metadata), "messages", session_id, seq, "metadata")


def decode_metadata(
    tenant: str, session_id: str, seq: int, text: str | None
) -> dict[str, JsonValue]:
    """The metadata of message ``seq`` from its ``metadata`` column: a JSON object
    (``ValueError`` for anything else)."""
    text = _open_optional(tenant, text, "messages", session_id, seq, "metadata")
    return _object(text, "metadata")


def encode_author(tenant: str, session_id: str, seq: int, author_name: str | None) -> str | None:
    """The ``author_name`` column of message ``seq`` (None stays None)."""
    if author_name is None:
        return None
    return _seal(author_name, "messages", session_id, seq, "author_name")


def decode_author(tenant: str, session_id: str, seq: int, text: str | None) -> str | None:
    """The author name of message ``seq`` from its column (sealed only where the store
    seals: a name in clear may start like a sealed text)."""
    if text is None or _SEALING.get() is None:
        return text
    return _open(tenant, text, "messages", session_id, seq, "author_name")


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
    return _seal(reduced_json(reduced), "messages", session_id, seq, "reduced_contents")


def decode_reduced(tenant: str, session_id: str, seq: int, text: str) -> dict[str, Any]:
    """What the reduced version of message ``seq`` holds instead of the message's own
    values: ``contents`` (validated), and ``metadata``, ``role`` and ``author_name`` where
    the column holds them (rows written before it held them overlay the contents only)."""
    value = _loads(_open(tenant, text, "messages", session_id, seq, "reduced_contents"))
    if isinstance(value, dict) and "contents" in value:
        fields = {k: value[k] for k in ("metadata", "role", "author_name") if k in value}
        value = value["contents"]
    else:
        fields = {}
    return {"contents": CONTENTS_ADAPTER.validate_python(value), **fields}


# --- a session row ------------------------------------------------------------------


def encode_session_metadata(tenant: str, session_id: str, metadata: Mapping[str, Any]) -> str:
    """The ``metadata`` column of session ``session_id``."""
    return _seal(object_json(metadata), "sessions", session_id, "", "metadata")


def decode_session_metadata(tenant: str, session_id: str, text: str | None) -> dict[str, Any]:
    """The metadata of session ``session_id`` from its column: a JSON object
    (``ValueError`` for anything else)."""
    text = _open_optional(tenant, text, "sessions", session_id, "", "metadata")
    return _object(text, "metadata")


def encode_title(tenant: str, session_id: str, title: str | None) -> str | None:
    """The ``title`` column of session ``session_id`` (None stays None)."""
    return None if title is None else _seal(title, "sessions", session_id, "", "title")


def decode_title(tenant: str, session_id: str, text: str | None) -> str | None:
    """The title of session ``session_id`` from its column."""
    if text is None or _SEALING.get() is None:
        return text
    return _open(tenant, text, "sessions", session_id, "", "title")


def encode_compaction_request(tenant: str, session_id: str, text: str | None) -> str | None:
    """The ``compaction_request`` column of session ``session_id`` from the request's
    JSON text (None stays None)."""
    if text is None:
        return None
    return _seal(text, "sessions", session_id, "", "compaction_request")


def decode_compaction_request(tenant: str, session_id: str, text: str | None) -> str | None:
    """The JSON text of session ``session_id``'s waiting compaction request."""
    return _open_optional(tenant, text, "sessions", session_id, "", "compaction_request")


# --- an audit event -----------------------------------------------------------------


def encode_event_params(
    tenant: str, session_id: str, event_id: str, params: Mapping[str, Any]
) -> str:
    """The ``params`` column of event ``event_id``."""
    return _seal(object_json(params), "events", session_id, event_id, "params")


def decode_event_params(
    tenant: str, session_id: str, event_id: str, text: str | None
) -> dict[str, Any]:
    """The parameters of event ``event_id`` from its ``params`` column."""
    text = _open_optional(tenant, text, "events", session_id, event_id, "params")
    return _object(text, "params")


def encode_event_note(tenant: str, session_id: str, event_id: str, note: Mapping[str, Any]) -> str:
    """The ``note`` column of event ``event_id`` (its ordered group lists)."""
    return _seal(object_json(note), "events", session_id, event_id, "note")


def decode_event_note(
    tenant: str, session_id: str, event_id: str, text: str | None
) -> dict[str, Any]:
    """The note of event ``event_id`` (``{}`` when it has none)."""
    text = _open_optional(tenant, text or None, "events", session_id, event_id, "note")
    return _object(text, "note")
