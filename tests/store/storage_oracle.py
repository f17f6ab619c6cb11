"""The writers of the storage JSON as the release before this module's tests wrote it.

Copied as they were (``store/rules/identity.py``'s canonical writer and content hash,
``store/sql/append/rows.py``'s column texts), unchanged but for this docstring: the
oracle :mod:`tests.store.test_storage_json` compares the writer of today with. The
content hash of every message must stay what :func:`content_hash` gives here (stored
databases dedupe against it), also where it differs from its reference definition (a
lone surrogate in a key, which the dump replaces and the field-by-field path keeps).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic_core import to_json as _to_json

from strategies.messages import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)


def _canonical(message: Message) -> dict[str, Any]:
    data = message.model_dump(mode="json")
    if message.created_at is not None:
        created = message.created_at
        if created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        data["created_at"] = created.astimezone(UTC).isoformat()
    return data


def _canonical_encoder() -> Callable[[Any], str]:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))``, built once.

    ``json.dumps`` builds an encoder on every call; this builds it once, with the same
    settings (only the check for circular references, which model dumps never have, is
    left out), as ``json`` itself builds it: the C encoder when there is one.
    """
    encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), check_circular=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has the C encoder
        return encoder.encode
    encode = make(
        None,  # markers: no circular check
        encoder.default,
        json.encoder.encode_basestring_ascii,
        None,  # indent
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )

    def canonical_json(value: Any) -> str:
        if not isinstance(value, dict):  # pragma: no cover - only dicts are hashed
            return encoder.encode(value)
        return "".join(encode(value, 0))

    return canonical_json


_canonical_json = _canonical_encoder()


_encode_value = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
"""The canonical JSON of one value, as it appears inside :func:`_canonical_json`'s."""
_quote: Callable[[str], str] = json.encoder.encode_basestring_ascii
_SCALARS = (str, int, float, bool, type(None))


def _plain(value: Any) -> bool:
    """Whether ``value`` is JSON made of the built-in types only (its JSON-mode dump is
    itself, so its canonical JSON can be written without the dump)."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if kind is list:
        return all(_plain(v) for v in value)
    return kind in _SCALARS


def _value_json(value: Any) -> str | None:
    """The canonical JSON of a field's value, or None when only the dump can tell."""
    kind = type(value)
    if kind is str:
        return _quote(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if (kind is dict or kind is list) and not value:
        return "{}" if kind is dict else "[]"
    return _encode_value(value) if _plain(value) else None


@dataclass(frozen=True, slots=True)
class _Layout:
    """A content model's fields as its two JSON texts write them."""

    names: tuple[str, ...]
    """Field names in the model's order (the ``contents`` column's)."""
    stored_keys: tuple[str, ...]
    """``'"name":'`` of each field, in the model's order."""
    canonical: tuple[tuple[int, str], ...]
    """Index into ``names`` and key of each field, in the canonical (sorted) order."""

    @classmethod
    def of(cls, model: type[BaseModel]) -> _Layout:
        names = tuple(model.model_fields)
        order = sorted(range(len(names)), key=names.__getitem__)
        keys = tuple(f'"{name}":' for name in names)
        return cls(names, keys, tuple((i, keys[i]) for i in order))


_LAYOUTS: dict[type[BaseModel], _Layout] = {
    model: _Layout.of(model)
    for model in (
        TextContent,
        ReasoningContent,
        FunctionCallContent,
        FunctionResultContent,
        DataContent,
        UriContent,
        OtherContent,
    )
}
_MESSAGE_FIELDS = frozenset(
    {"author_name", "contents", "created_at", "message_id", "metadata", "role"}
)
_FAST_MESSAGE: type[Message] | None = (
    Message if set(Message.model_fields) == _MESSAGE_FIELDS else None
)
"""The message type :func:`_fast_canonical_json` writes (None if its fields changed)."""
_MISSING = object()
_EMPTY: dict[type[Any], str] = {dict: "{}", list: "[]"}


def _plain_ascii(text: str) -> bool:
    """Whether ``text`` is escaped alike by both JSON texts (pydantic writes non-ASCII
    as is, and DEL unescaped: only ASCII without DEL agrees)."""
    return text.isascii() and "\x7f" not in text


_LONG_TEXT = 64
"""Characters from which :func:`_quoted` hands plain ASCII text to pydantic's encoder
(below it, the call itself costs more than the escaping saves)."""


def _quoted(text: str) -> tuple[str, bool]:
    """``text`` as a JSON string, as ``json``'s ASCII encoder writes it, and whether the
    storage format writes it alike (:func:`_plain_ascii`).

    Such text, ASCII without DEL, is escaped alike by both encoders (the same short
    escapes, ``\\u00xx`` in lower case for the other control characters); a long one is
    escaped by pydantic's (a Rust loop, faster than ``json``'s per-character C loop).
    """
    plain = _plain_ascii(text)
    if plain and len(text) >= _LONG_TEXT:
        return _to_json(text).decode(), True
    return _quote(text), plain


def _text_json(values: dict[str, Any]) -> tuple[str, str | None] | None:
    """:func:`_content_json` of the usual text content (no ``extra``), else None."""
    text, extra = values.get("text"), values.get("extra")
    if type(text) is not str or type(extra) is not dict or extra or values.get("type") != "text":
        return None
    quoted, plain = _quoted(text)
    stored = '{"extra":{},"type":"text","text":' + quoted + "}" if plain else None
    return '{"extra":{},"text":' + quoted + ',"type":"text"}', stored


def _call_json(values: dict[str, Any]) -> tuple[str, str | None] | None:
    """:func:`_content_json` of a function call with text arguments and no ``extra``."""
    call_id, name, arguments, extra = (
        values.get("call_id"),
        values.get("name"),
        values.get("arguments"),
        values.get("extra"),
    )
    if (
        type(call_id) is not str
        or type(name) is not str
        or type(arguments) is not str
        or type(extra) is not dict
        or extra
        or values.get("type") != "function_call"
    ):
        return None
    (args, plain), call, named = _quoted(arguments), _quote(call_id), _quote(name)
    canonical = (
        f'{{"arguments":{args},"call_id":{call},"extra":{{}},"name":{named},'
        '"type":"function_call"}'
    )
    if not (plain and _plain_ascii(call_id) and _plain_ascii(name)):
        return canonical, None
    stored = (
        f'{{"extra":{{}},"type":"function_call","call_id":{call},"name":{named},'
        f'"arguments":{args}}}'
    )
    return canonical, stored


def _result_json(values: dict[str, Any]) -> tuple[str, str | None] | None:
    """:func:`_content_json` of a function result with a text result and no ``extra``."""
    call_id, result, is_error, extra = (
        values.get("call_id"),
        values.get("result"),
        values.get("is_error"),
        values.get("extra"),
    )
    if (
        type(call_id) is not str
        or type(result) is not str
        or type(is_error) is not bool
        or type(extra) is not dict
        or extra
        or values.get("type") != "function_result"
    ):
        return None
    (text, plain), call = _quoted(result), _quote(call_id)
    error = "true" if is_error else "false"
    canonical = (
        f'{{"call_id":{call},"extra":{{}},"is_error":{error},"result":{text},'
        '"type":"function_result"}'
    )
    if not (plain and _plain_ascii(call_id)):
        return canonical, None
    stored = (
        f'{{"extra":{{}},"type":"function_result","call_id":{call},"result":{text},'
        f'"is_error":{error}}}'
    )
    return canonical, stored


_USUAL: dict[type[BaseModel], Callable[[dict[str, Any]], tuple[str, str | None] | None]] = {
    TextContent: _text_json,
    FunctionCallContent: _call_json,
    FunctionResultContent: _result_json,
}
"""The contents written without the generic loop when their values are the usual ones."""


def _content_json(content: Any) -> tuple[str, str | None] | None:
    """The content's canonical JSON, and its ``contents`` column JSON when every value
    is one the two write alike (an ASCII string, None, a bool, an empty dict or list)."""
    kind = type(content)
    usual = _USUAL.get(kind)
    if usual is not None:
        found = usual(content.__dict__)
        if found is not None:
            return found
    layout = _LAYOUTS.get(kind)
    if layout is None:
        return None
    values = content.__dict__
    texts: list[str] = []
    stored = True
    for name in layout.names:
        value = values.get(name, _MISSING)
        kind = type(value)
        if kind is str:
            text = _quote(value)
            stored = stored and _plain_ascii(value)
        elif value is None:
            text = "null"
        elif kind is bool:
            text = "true" if value else "false"
        elif kind in _EMPTY and not value:
            text = _EMPTY[kind]
        elif _plain(value):
            text, stored = _encode_value(value), False
        else:
            return None
        texts.append(text)
    canonical = "{" + ",".join([key + texts[i] for i, key in layout.canonical]) + "}"
    if not stored:
        return canonical, None
    return canonical, "{" + ",".join(map(str.__add__, layout.stored_keys, texts)) + "}"


def _fast_canonical_json(message: Message) -> tuple[str, str | None] | None:
    """``_canonical_json(_canonical(message))`` written field by field, without the dump,
    and the ``contents`` column's JSON text when :func:`_content_json` could write it.

    Keys are written in sorted order and strings escaped by the encoder's own function;
    a value of any other type than the built-in JSON ones gives None (the caller then
    takes the dump).
    """
    if type(message) is not _FAST_MESSAGE:
        return None
    values = message.__dict__
    contents = values.get("contents")
    if type(contents) is not list:
        return None
    parts: list[str] = []
    stored: list[str] = []
    for content in contents:
        texts = _content_json(content)
        if texts is None:
            return None
        parts.append(texts[0])
        if texts[1] is not None:
            stored.append(texts[1])
    created = values.get("created_at", _MISSING)
    if created is None:
        created_json = "null"
    elif type(created) is datetime:
        if created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        elif created.tzinfo is not UTC:
            created = created.astimezone(UTC)
        created_json = f'"{created.isoformat()}"'  # digits, '-', ':', '.', 'T' and '+'
    else:
        return None
    author, metadata = values.get("author_name", _MISSING), values.get("metadata", _MISSING)
    message_id, role = values.get("message_id", _MISSING), values.get("role", _MISSING)
    author_json, metadata_json = _value_json(author), _value_json(metadata)
    if (
        type(message_id) is not str
        or type(role) is not str
        or author_json is None
        or metadata_json is None
    ):
        return None
    canonical = (
        f'{{"author_name":{author_json},"contents":[{",".join(parts)}],'
        f'"created_at":{created_json},"message_id":{_quote(message_id)},'
        f'"metadata":{metadata_json},"role":{_quote(role)}}}'
    )
    return canonical, f"[{','.join(stored)}]" if len(stored) == len(parts) else None


def hashed_contents(message: Message) -> tuple[str, str | None]:
    """:func:`content_hash` of ``message``, and its ``contents`` as the storage format's
    JSON text (``CONTENTS_ADAPTER.dump_json``) when it was written on the way (plain
    ASCII text, the usual case), else None: one pass over the message's strings."""
    texts = _fast_canonical_json(message)
    if texts is None:
        return _sha256(_canonical_json(_canonical(message))), None
    return _sha256(texts[0]), texts[1]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def content_hash(message: Message) -> str:
    """SHA-256 of the message's canonical JSON (timestamps normalized to UTC).

    The JSON is ``json.dumps(..., sort_keys=True, separators=(",", ":"))`` of the
    message's JSON-mode dump: the stored hashes depend on these exact bytes. Messages
    made of the built-in JSON types (nearly all) are written without the dump
    (:func:`_fast_canonical_json`, the same bytes).
    """
    return hashed_contents(message)[0]


_CONTENTS_JSON = TypeAdapter(list[Content], config=ConfigDict(ser_json_inf_nan="constants"))
"""The storage format (:data:`strategies.messages.CONTENTS_ADAPTER`) written straight to
JSON text, non-finite floats kept as Python's ``json`` keeps them."""

_METADATA_JSON = json.JSONEncoder(separators=(",", ":"))
"""``json.dumps(value, separators=(",", ":"))``, without building an encoder per call."""


def contents_text(message: Message) -> str:
    """The ``contents`` column of ``message`` as JSON text."""
    try:
        return _CONTENTS_JSON.dump_json(message.contents).decode()
    except ValueError:  # text pydantic cannot encode (a lone surrogate): Python's json can
        return json.dumps(_CONTENTS_JSON.dump_python(message.contents, mode="json"))
