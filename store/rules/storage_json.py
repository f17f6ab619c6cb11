"""The storage format's JSON, written in one place.

Three texts are written of a message, and the stored rows depend on their bytes:

* The **canonical text**, which a message's content hash is taken of
  (:mod:`store.rules.identity`): ``json.dumps(value, sort_keys=True, separators=(",",
  ":"))`` of :func:`canonical_value` (the message's JSON-mode dump, ``created_at`` made
  UTC). Stored hashes depend on these exact bytes: they tell a replay from an id reused
  with other content.
* The **column texts** of a message row (:func:`contents_json`, :func:`object_json`,
  :func:`reduced_json`): ``contents`` as :data:`~strategies.messages.CONTENTS_ADAPTER`
  dumps it (non-ASCII as is, non-finite floats as Python's ``json`` writes them), a JSON
  object as ``json.dumps(value, separators=(",", ":"))``.
* The **JSON values** a format writes of a stored message or content
  (:func:`message_value`, :func:`content_fields`), which ``json`` then serializes.

Messages made of the built-in JSON types (nearly all) have their canonical text written
field by field without the dump, and the ``contents`` column's text is written on the
way (:func:`canonical_and_contents`); anything else takes the reference path. The tests
pin both against it, and against what earlier releases wrote.

Pure: no I/O, no SQL. :data:`MESSAGE_FORMAT` is the version of the column texts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
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

__all__ = [
    "MESSAGE_FORMAT",
    "canonical_and_contents",
    "canonical_json",
    "canonical_value",
    "content_fields",
    "contents_json",
    "message_value",
    "object_json",
    "reduced_json",
]

MESSAGE_FORMAT = 1
"""The version of the stored message JSON this library writes and the newest it reads:
``contents`` and ``reduced_contents`` as :func:`contents_json` and :func:`reduced_json`
write them, ``metadata`` a JSON object."""


# --- the JSON values ----------------------------------------------------------------


def message_value(message: Message) -> dict[str, Any]:
    """The storage format's JSON value of ``message`` (its JSON-mode dump)."""
    return message.model_dump(mode="json")


def content_fields(content: BaseModel) -> dict[str, Any]:
    """The storage format's JSON value of ``content`` without its ``type`` and ``extra``:
    the fields a format writes of a content it has no type of its own for."""
    return content.model_dump(mode="json", exclude={"type", "extra"})


def canonical_value(message: Message) -> dict[str, Any]:
    """What the canonical text is written of: :func:`message_value`, with ``created_at``
    in UTC (a naive one taken to be UTC)."""
    data = message_value(message)
    if message.created_at is not None:
        created = message.created_at
        if created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        data["created_at"] = created.astimezone(UTC).isoformat()
    return data


# --- the column texts ---------------------------------------------------------------

_CONTENTS_JSON = TypeAdapter(list[Content], config=ConfigDict(ser_json_inf_nan="constants"))
"""The storage format (:data:`strategies.messages.CONTENTS_ADAPTER`) written straight to
JSON text, non-finite floats kept as Python's ``json`` keeps them."""

_OBJECT_JSON = json.JSONEncoder(separators=(",", ":"))
"""``json.dumps(value, separators=(",", ":"))``, without building an encoder per call."""


def contents_json(contents: list[Content]) -> str:
    """The ``contents`` column's text of ``contents``."""
    try:
        return _CONTENTS_JSON.dump_json(contents).decode()
    except ValueError:  # text pydantic cannot encode (a lone surrogate): Python's json can
        return json.dumps(_CONTENTS_JSON.dump_python(contents, mode="json"))


def object_json(value: Mapping[str, Any]) -> str:
    """The text of a JSON object column (a message's or a session's ``metadata``, an
    event's parameters): compact, ASCII, ``{}`` when empty."""
    return _OBJECT_JSON.encode(value) if value else "{}"


def reduced_json(message: Message) -> str:
    """The ``reduced_contents`` column's text of a reduced version: its contents and its
    own ``metadata``, ``role`` and ``author_name``, in that order."""
    fields = (
        contents_json(message.contents),
        object_json(message.metadata),
        _OBJECT_JSON.encode(message.role),
        _OBJECT_JSON.encode(message.author_name),
    )
    keys = ('{"contents":', ',"metadata":', ',"role":', ',"author_name":')
    return "".join(map(str.__add__, keys, fields)) + "}"


# --- the canonical text -------------------------------------------------------------


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

    def canonical(value: Any) -> str:
        if not isinstance(value, dict):  # pragma: no cover - only dicts are hashed
            return encoder.encode(value)
        return "".join(encode(value, 0))

    return canonical


_canonical_json = _canonical_encoder()


def canonical_json(message: Message) -> str:
    """The canonical text of ``message`` (what its content hash is taken of)."""
    return "".join(canonical_and_contents(message)[0])


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
    stored: tuple[tuple[int, str], ...]
    """Index into ``names`` and ``'"name":'`` of each field, in the model's order."""
    canonical: tuple[tuple[int, str], ...]
    """Index into ``names`` and key of each field, in the canonical (sorted) order."""

    @classmethod
    def of(cls, model: type[BaseModel]) -> _Layout:
        names = tuple(model.model_fields)
        order = sorted(range(len(names)), key=names.__getitem__)
        keys = tuple(f'"{name}":' for name in names)
        return cls(names, tuple(enumerate(keys)), tuple((i, keys[i]) for i in order))


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
"""The message type :func:`_fast_texts` writes (None if its fields changed)."""
_MISSING = object()
_EMPTY: dict[type[Any], str] = {dict: "{}", list: "[]"}


Parts = tuple[str, ...]
"""A text in parts, to be joined: a long string value is a part of its own, shared by
the canonical text and the ``contents`` column's, never copied into a larger string."""


def _plain_ascii(text: str) -> bool:
    """Whether ``text`` is escaped alike by both JSON texts (pydantic writes non-ASCII
    as is, and DEL unescaped: only ASCII without DEL agrees)."""
    return text.isascii() and "\x7f" not in text


_LONG_TEXT = 64
"""Characters from which :func:`_quoted` hands plain ASCII text to pydantic's encoder
(below it, the call itself costs more than the escaping saves)."""


_HUGE_TEXT = 1 << 20
"""Characters above which :func:`_quoted` leaves text to ``json``'s encoder again."""
_ESCAPED = re.compile(r'[\x00-\x1f"\\]')
"""What JSON escapes in ASCII text without DEL (a huge text without any is its own
quoted part, between two quotes: no copy of it is made)."""


def _quoted(text: str) -> tuple[Parts, bool]:
    """``text`` as a JSON string in parts, as ``json``'s ASCII encoder writes it, and
    whether the storage format writes it alike (:func:`_plain_ascii`). It is one part,
    or the text itself between two quotes when it is huge and holds nothing to escape.

    Such text, ASCII without DEL, is escaped alike by both encoders (the same short
    escapes, ``\\u00xx`` in lower case for the other control characters); a long one is
    escaped by pydantic's (a Rust loop, faster than ``json``'s per-character C loop),
    up to :data:`_HUGE_TEXT` characters: pydantic's writes bytes and then a copy of them
    as text, where ``json``'s writes the text once, as fast at that size.
    """
    plain = _plain_ascii(text)
    if plain and _LONG_TEXT <= len(text):
        if len(text) <= _HUGE_TEXT:
            return (_to_json(text).decode(),), True
        if _ESCAPED.search(text) is None:
            return ('"', text, '"'), True
    return (_quote(text),), plain


def _text_json(values: dict[str, Any]) -> tuple[Parts, Parts | None] | None:
    """:func:`_content_json` of the usual text content (no ``extra``), else None."""
    text, extra = values.get("text"), values.get("extra")
    if type(text) is not str or type(extra) is not dict or extra or values.get("type") != "text":
        return None
    quoted, plain = _quoted(text)
    stored = ('{"extra":{},"type":"text","text":', *quoted, "}") if plain else None
    return ('{"extra":{},"text":', *quoted, ',"type":"text"}'), stored


def _call_json(values: dict[str, Any]) -> tuple[Parts, Parts | None] | None:
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
        '{"arguments":',
        *args,
        f',"call_id":{call},"extra":{{}},"name":{named},"type":"function_call"}}',
    )
    if not (plain and _plain_ascii(call_id) and _plain_ascii(name)):
        return canonical, None
    stored = (
        f'{{"extra":{{}},"type":"function_call","call_id":{call},"name":{named},"arguments":',
        *args,
        "}",
    )
    return canonical, stored


def _result_json(values: dict[str, Any]) -> tuple[Parts, Parts | None] | None:
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
        f'{{"call_id":{call},"extra":{{}},"is_error":{error},"result":',
        *text,
        ',"type":"function_result"}',
    )
    if not (plain and _plain_ascii(call_id)):
        return canonical, None
    stored = (
        f'{{"extra":{{}},"type":"function_result","call_id":{call},"result":',
        *text,
        f',"is_error":{error}}}',
    )
    return canonical, stored


_USUAL: dict[type[BaseModel], Callable[[dict[str, Any]], tuple[Parts, Parts | None] | None]] = {
    TextContent: _text_json,
    FunctionCallContent: _call_json,
    FunctionResultContent: _result_json,
}
"""The contents written without the generic loop when their values are the usual ones."""


def _fields(keys: Sequence[tuple[int, str]], texts: Sequence[Parts]) -> Parts:
    """``{key:text,...}`` of the given fields (index into ``texts`` and key), in parts."""
    parts = ["{"]
    for index, key in keys:
        parts.append(key)
        parts += texts[index]
        parts.append(",")
    parts[-1] = "}"
    return tuple(parts)


def _content_json(content: Any) -> tuple[Parts, Parts | None] | None:
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
    texts: list[Parts] = []
    stored = True
    for name in layout.names:
        value = values.get(name, _MISSING)
        kind = type(value)
        if kind is str:
            text, plain = _quoted(value)
            stored = stored and plain
        elif value is None:
            text = ("null",)
        elif kind is bool:
            text = ("true",) if value else ("false",)
        elif kind in _EMPTY and not value:
            text = (_EMPTY[kind],)
        elif _plain(value):
            text, stored = (_encode_value(value),), False
        else:
            return None
        texts.append(text)
    canonical = _fields(layout.canonical, texts)
    if not stored:
        return canonical, None
    return canonical, _fields(layout.stored, texts)


def _fast_texts(message: Message) -> tuple[list[str], str | None] | None:
    """``_canonical_json(canonical_value(message))`` written field by field, in parts,
    without the dump, and the ``contents`` column's text when :func:`_content_json`
    could write it.

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
    head = f'{{"author_name":{author_json},"contents":['
    written = _contents_parts(contents, head)
    if written is None:
        return None
    canonical, stored = written
    canonical[-1] = (
        f'],"created_at":{created_json},"message_id":{_quote(message_id)},'
        f'"metadata":{metadata_json},"role":{_quote(role)}}}'
    )
    if stored is None:
        return canonical, None
    stored[-1] = "]"
    return canonical, "".join(stored)


def _contents_parts(contents: list[Any], head: str) -> tuple[list[str], list[str] | None] | None:
    """The parts of each content's two JSON texts, each followed by a comma (the last
    comma is the caller's to replace), the canonical ones after ``head`` and the stored
    ones after ``[``; None when a content takes the dump."""
    canonical = [head]
    stored: list[str] | None = ["["]
    for content in contents:
        texts = _content_json(content)
        if texts is None:
            return None
        canonical += texts[0]
        canonical.append(",")
        if stored is not None and texts[1] is not None:
            stored += texts[1]
            stored.append(",")
        else:
            stored = None
    if not contents:
        canonical.append(",")
        if stored is not None:
            stored.append(",")
    return canonical, stored


def canonical_and_contents(message: Message) -> tuple[list[str], str | None]:
    """The canonical text of ``message`` in parts (their concatenation is the text; a
    long string value is a part of its own, written once), and its ``contents`` column's
    text (:func:`contents_json`) when it was written on the way (plain ASCII text, the
    usual case), else None: one pass over the message's strings."""
    texts = _fast_texts(message)
    if texts is None:
        return [_canonical_json(canonical_value(message))], None
    return texts
