"""LangGraph's stored values (its ``JsonPlusSerializer``), decoded without LangGraph
and never unpickled.

A checkpoint saver stores a value as a type tag and bytes: ``msgpack`` (MessagePack
whose extension types carry an object as ``(module, class, payload[, method])``),
``json`` (LangChain's ``lc`` constructor objects), ``bytes`` / ``bytearray``,
``null``, ``empty`` (``PostgresSaver``'s blob of a channel without a value), or
``pickle``. Only data is decoded, with the ``msgpack`` library: an object
becomes its payload (what LangGraph itself falls back to for a type it does not
allow), and a LangChain message becomes its ``message_to_dict`` form
(``{"type": ..., "data": {...}}``), which :func:`~store.formats.from_langchain` reads.
A pickled value, or a tag this module does not know, is refused: unpickling would run
whatever code the database holds.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack

from store.errors import InvalidSource

__all__ = ["PICKLED", "decode", "is_message"]

PICKLED = "a pickled value (never unpickled: it could run any code)"
"""Why a pickled value is refused."""
_PYDANTIC_V1, _PYDANTIC_V2, _NUMPY, _DELTA_SNAPSHOT = 4, 5, 6, 7
"""LangGraph's MessagePack extension codes that are not ``(module, class, args)``."""
_MESSAGE_MODULES = ("langchain_core.messages", "langchain.schema.messages")
_LC_TYPES = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
    "RemoveMessage": "remove",
}
"""The ``type`` of each LangChain message class (a ``...Chunk`` class is its own type)."""


def is_message(value: Any) -> bool:
    """Whether ``value`` is a decoded LangChain message (``{"type", "data"}``)."""
    return (
        isinstance(value, dict)
        and set(value) == {"type", "data"}
        and isinstance(value["type"], str)
        and isinstance(value["data"], dict)
    )


def _message(name: str, fields: Any) -> Any:
    """A LangChain message's ``message_to_dict`` form, from its class and fields."""
    if not isinstance(fields, dict):
        return fields
    kind = fields.get("type")
    if not isinstance(kind, str):
        kind = _LC_TYPES.get(name, name)
    return {"type": kind, "data": {**fields, "type": kind}}


def _object(module: Any, name: Any, payload: Any) -> Any:
    if isinstance(module, str) and module.startswith(_MESSAGE_MODULES) and isinstance(name, str):
        return _message(name, payload)
    return payload


def _ext(code: int, data: bytes) -> Any:
    value = msgpack.unpackb(data, ext_hook=_ext, strict_map_key=False, raw=False)
    if code in (_DELTA_SNAPSHOT, _NUMPY):
        return value
    if isinstance(value, list | tuple) and len(value) >= 3:
        return _object(value[0], value[1], value[2])
    return value


def _revive(value: dict[str, Any]) -> Any:
    """A ``json`` value's LangChain ``lc`` object as data (a message as its dict)."""
    if value.get("lc") == 1 and value.get("type") == "constructor":
        ident = value.get("id")
        if isinstance(ident, list) and ident and all(isinstance(p, str) for p in ident):
            return _object(".".join(ident[:-1]), ident[-1], value.get("kwargs"))
        return value.get("kwargs")
    return value


def decode(kind: Any, data: Any, source: str, where: str) -> Any:
    """The value LangGraph stored as ``(kind, data)``; a pickled value or an unknown
    tag is an :class:`InvalidSource` naming ``where``."""
    if kind == "pickle":
        raise InvalidSource(source, where, PICKLED)
    if kind in ("null", "empty") or data is None:  # "empty": a channel without a value
        return None
    if kind in ("bytes", "bytearray"):
        return bytes(data)
    try:
        if kind == "msgpack":
            return msgpack.unpackb(bytes(data), ext_hook=_ext, strict_map_key=False, raw=False)
        if kind == "json":
            return json.loads(data, object_hook=_revive)
    except (ValueError, TypeError, msgpack.UnpackException) as error:
        raise InvalidSource(
            source, where, f"a {kind} value that does not decode ({error})"
        ) from None
    raise InvalidSource(source, where, f"a value of unknown serialization type {kind!r}")
