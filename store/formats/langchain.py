"""LangChain messages: ``BaseMessage`` objects and their ``message_to_dict`` form.

:func:`from_langchain` reads either (``{"type": ..., "data": {...}}`` mappings, or any
object with a ``type`` and a pydantic ``model_dump``, as ``BaseMessage`` is) into
:class:`~strategies.messages.Message`; :func:`to_langchain` writes the
``message_to_dict`` form back (``messages_from_dict`` turns it into objects), so that
``to_langchain(from_langchain(items)) == items``, unknown keys included. Nothing here
imports LangChain.

Where things go:

- ``type``: ``system``, ``human`` (user), ``ai`` (assistant), ``tool``, the legacy
  ``function`` (a tool message, kept as the model maps it), their ``...Chunk`` forms,
  and ``chat``, whose own ``role`` is the role: a role outside the standard ones is
  refused unless custom roles are allowed. The type is kept under
  :data:`LANGCHAIN_TYPE_KEY` when it is not the role's usual one.
- ``content``: a non-empty string is one :class:`~strategies.messages.TextContent` (the
  empty string, as an AI message with only tool calls has, is no content); a list holds
  blocks: a ``text`` block is text, a plain string in the list is text marked
  ``extra["langchain_block"] = "string"``, any other block an
  :class:`~strategies.messages.OtherContent` of the block's type. The shape is kept under
  :data:`LANGCHAIN_FORM_KEY`.
- ``tool_calls`` of an AI message: one :class:`~strategies.messages.FunctionCallContent`
  each (``id`` the call id, ``args`` the arguments); a call without an id is kept as an
  unpaired ``OtherContent`` of kind ``tool_call``.
- A tool message is one :class:`~strategies.messages.FunctionResultContent` for its
  ``tool_call_id`` whose ``result`` is the content; ``status`` ``error`` sets
  ``is_error``.
- ``name`` is the ``author_name``; ``id``, when a non-empty string, the ``message_id``
  (otherwise one is generated and the original kept under :data:`ORIGINAL_ID_KEY`).
- Every other key of ``data`` (``additional_kwargs``, ``response_metadata``,
  ``usage_metadata``, ``invalid_tool_calls``, ``artifact``, ``example``, ...) is kept
  under :data:`LANGCHAIN_EXTRA_KEY`.

Normalisations, as ``message_to_dict`` itself writes: ``data`` always repeats the
``type``, and a tool message always has a ``status``.

Messages from elsewhere get LangChain's usual shapes; the assistant messages of one
model turn (reasoning, text and every parallel call, stored apart when they came from
the Responses API) are one AI message with all the calls (see
:mod:`store.formats._turns`), followed by one tool message a result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from store.formats._common import (
    SOURCE_FORMAT_KEY,
    FormatError,
    build,
    build_message,
    clone,
    content_form,
    copied,
    exported_role,
    parsed_arguments,
    read_id,
    shown,
    take,
    write_id,
)
from store.formats._turns import joined, turns
from store.rules.storage_json import content_fields
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
    "LANGCHAIN_EXTRA_KEY",
    "LANGCHAIN_FORM_KEY",
    "LANGCHAIN_TYPE_KEY",
    "SOURCE_LANGCHAIN",
    "from_langchain",
    "to_langchain",
]

SOURCE_LANGCHAIN = "langchain"
"""The :data:`SOURCE_FORMAT_KEY` value of messages read by :func:`from_langchain`."""

LANGCHAIN_TYPE_KEY = "langchain_type"
"""Metadata key holding the message type when it is not the role's usual one
(``chat``, ``function``, a chunk type)."""

LANGCHAIN_FORM_KEY = "langchain_content_form"
"""Metadata key recording the shape of ``content``: ``string``, ``blocks`` or ``missing``."""

LANGCHAIN_EXTRA_KEY = "langchain_extra"
"""Metadata key holding the keys of ``data`` that the model does not name."""

_BLOCK_KEY = "langchain_block"
_TOOL_CALL_KIND = "tool_call"

_ROLES: dict[str, str] = {
    "system": "system",
    "human": "user",
    "ai": "assistant",
    "tool": "tool",
    "function": "function",
}
_TYPES: dict[str, str] = {
    "system": "system",
    "user": "human",
    "assistant": "ai",
    "tool": "tool",
    "function": "function",
}

ContentForm = Literal["string", "blocks", "missing"]


def _as_mapping(index: int, item: Any) -> Mapping[str, Any]:
    """The ``message_to_dict`` form of ``item``: a mapping as given, or an object dumped."""
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)
    kind = getattr(item, "type", None)
    if callable(dump) and isinstance(kind, str):
        data = dump()
        if isinstance(data, dict):
            return {"type": kind, "data": data}
    raise FormatError(index, f"expected a LangChain message, got {type(item).__name__}")


def _role(index: int, kind: str, data: dict[str, Any]) -> str:
    base = kind.removesuffix("MessageChunk").removesuffix("Chunk").lower()
    if base == "chat":
        role = data.pop("role", None)
        if not isinstance(role, str):
            raise FormatError(index, "a chat message needs a string role")
        return role
    if base not in _ROLES:
        raise FormatError(index, f"unknown LangChain message type {shown(kind)}")
    return _ROLES[base]


def _usual_type(role: str) -> str:
    return _TYPES.get(role, "chat")


def _block(index: int, position: int, block: Any) -> Content:
    if isinstance(block, str):
        return build(index, TextContent, text=block, extra={_BLOCK_KEY: "string"})
    if not isinstance(block, Mapping):
        raise FormatError(index, f"content[{position}] is not a string or an object")
    fields = dict(block)
    kind = fields.pop("type", None)
    if kind == "text" and isinstance(fields.get("text"), str):
        text = fields.pop("text")
        return build(index, TextContent, text=text, extra=fields)
    if not isinstance(kind, str) or not kind:
        raise FormatError(index, f"content[{position}] has no block type")
    return build(index, OtherContent, kind=kind, payload=fields)


def _read_body(index: int, data: dict[str, Any]) -> list[Content]:
    value = data.pop("content", None)
    if isinstance(value, str):
        return [build(index, TextContent, text=value)] if value else []
    if isinstance(value, list):
        return [_block(index, position, block) for position, block in enumerate(value)]
    return []


def _tool_call(index: int, position: int, call: Any) -> Content:
    if not isinstance(call, Mapping):
        raise FormatError(index, f"tool_calls[{position}] is not an object")
    fields = dict(call)
    call_id = fields.get("id")
    name = fields.get("name")
    args = fields.get("args")
    if isinstance(call_id, str) and call_id and isinstance(name, str) and isinstance(args, dict):
        for key in ("id", "name", "args"):
            del fields[key]
        return build(
            index, FunctionCallContent, call_id=call_id, name=name, arguments=args, extra=fields
        )
    return build(index, OtherContent, kind=_TOOL_CALL_KIND, payload=fields)


def _read_tool_calls(index: int, data: dict[str, Any]) -> list[Content]:
    calls = data.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return []  # an empty or odd value is kept verbatim in the extra keys
    del data["tool_calls"]
    return [_tool_call(index, position, call) for position, call in enumerate(calls)]


def _read_result(index: int, data: dict[str, Any], form: ContentForm) -> list[Content]:
    call_id = take(data, "tool_call_id", str)
    if call_id is None:
        raise FormatError(index, "a tool message needs a string tool_call_id")
    status = data.get("status")
    is_error = status == "error"
    if status in ("success", "error"):
        del data["status"]  # written back from is_error
    result = data.pop("content", None) if form != "missing" else None
    return [build(index, FunctionResultContent, call_id=call_id, result=result, is_error=is_error)]


def _message_from_langchain(index: int, item: Any, *, allow_custom_roles: bool) -> Message:
    mapping = _as_mapping(index, item)
    kind = mapping.get("type")
    raw = mapping.get("data")
    if not isinstance(kind, str) or not isinstance(raw, Mapping):
        raise FormatError(index, "expected {'type': ..., 'data': {...}} (message_to_dict)")
    data = dict(raw)
    if data.get("type") == kind:
        del data["type"]
    role = _role(index, kind, data)
    metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_LANGCHAIN}
    if kind != _usual_type(role):
        metadata[LANGCHAIN_TYPE_KEY] = kind
    form: ContentForm = content_form(index, data, "blocks")
    metadata[LANGCHAIN_FORM_KEY] = form
    if role == "tool":
        contents = _read_result(index, data, form)
    else:
        contents = _read_body(index, data) + _read_tool_calls(index, data)
    values: dict[str, Any] = {"role": role, "contents": contents}
    read_id(data, metadata, values)
    author_name = take(data, "name", str)
    if author_name is not None:
        values["author_name"] = author_name
    if data:
        metadata[LANGCHAIN_EXTRA_KEY] = data
    values["metadata"] = metadata
    return build_message(index, values, allow_custom_roles=allow_custom_roles)


def from_langchain(items: Sequence[Any], *, allow_custom_roles: bool = False) -> list[Message]:
    """Read LangChain messages (objects or ``message_to_dict`` mappings) into messages.

    Raises :class:`FormatError` naming the index of the first item it cannot read,
    including a ``chat`` message whose role is not a standard one unless
    ``allow_custom_roles`` is true.
    """
    return [
        _message_from_langchain(index, item, allow_custom_roles=allow_custom_roles)
        for index, item in enumerate(items)
    ]


def _block_to_langchain(content: Content, *, native: bool) -> Any:
    extra = copied(content.extra) if native else {}
    if isinstance(content, TextContent):
        if extra.get(_BLOCK_KEY) == "string":
            return content.text
        return {"type": "text", **extra, "text": content.text}
    if isinstance(content, OtherContent):
        return {"type": content.kind, **copied(content.payload)}
    if isinstance(content, ReasoningContent):
        return {"type": "reasoning", "reasoning": content.text or ""}
    if isinstance(content, DataContent):
        kind = (content.media_type or "file/").split("/", 1)[0]
        kind = kind if kind in ("image", "audio", "video") else "file"
        return {"type": kind, "base64": content.data, "mime_type": content.media_type}
    if isinstance(content, UriContent):
        kind = (content.media_type or "image/").split("/", 1)[0]
        kind = kind if kind in ("image", "audio", "video") else "file"
        return {"type": kind, "url": content.uri}
    return {"type": content.type, **content_fields(content)}


def _arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return clone(arguments)
    if isinstance(arguments, str) and arguments:
        return parsed_arguments(arguments)
    return {}


def _call_to_langchain(content: FunctionCallContent | OtherContent, *, native: bool) -> Any:
    if isinstance(content, OtherContent):
        return copied(content.payload)
    extra = copied(content.extra) if native else {"type": "tool_call"}
    args = _arguments(content.arguments)
    return {"name": content.name, "args": args, "id": content.call_id, **extra}


def _body(message: Message, others: list[Content], native: bool) -> Any:
    form = message.metadata.get(LANGCHAIN_FORM_KEY) if native else None
    blocks = [_block_to_langchain(c, native=native) for c in others]
    if form == "blocks":
        return blocks
    if len(others) == 1 and isinstance(others[0], TextContent) and not others[0].extra:
        return others[0].text
    if not others:
        return ""
    return blocks


def _result_content(result: Any) -> Any:
    if isinstance(result, str):
        return result
    if isinstance(result, list):
        return clone(result)
    return "" if result is None else json.dumps(result)


def _write_common(out: dict[str, Any], message: Message, native: bool, with_ids: bool) -> None:
    metadata = message.metadata
    if message.author_name is not None:
        out["name"] = message.author_name
    write_id(out, message, native=native, with_ids=with_ids)
    extra = metadata.get(LANGCHAIN_EXTRA_KEY)
    if native and isinstance(extra, dict):
        out.update(copied(extra))


def _defaults(kind: str) -> dict[str, Any]:
    """What ``message_to_dict`` writes for a message of ``kind`` beyond its content."""
    data: dict[str, Any] = {"additional_kwargs": {}, "response_metadata": {}, "name": None}
    data["id"] = None
    if kind == "ai":
        data.update(tool_calls=[], invalid_tool_calls=[], usage_metadata=None)
    if kind == "tool":
        data.update(artifact=None, status="success")
    return data


def _wrap(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "data": {**data, "type": kind}}  # message_to_dict repeats the type


def _native_message(message: Message) -> dict[str, Any]:
    metadata = message.metadata
    role = exported_role(message)
    kind = metadata.get(LANGCHAIN_TYPE_KEY) or _usual_type(role)
    assert isinstance(kind, str)
    out: dict[str, Any] = {}
    if kind.removesuffix("MessageChunk").removesuffix("Chunk").lower() == "chat":
        out["role"] = role
    results = [c for c in message.contents if isinstance(c, FunctionResultContent)]
    if role == "tool" and len(results) == 1:
        result = results[0]
        if metadata.get(LANGCHAIN_FORM_KEY) != "missing":
            out["content"] = clone(result.result)
        out["tool_call_id"] = result.call_id
        out["status"] = "error" if result.is_error else "success"
    else:
        calls = _calls(message)
        others = [c for c in message.contents if c not in calls]
        if metadata.get(LANGCHAIN_FORM_KEY) != "missing" or others:
            out["content"] = _body(message, others, native=True)
        if calls:
            out["tool_calls"] = [_call_to_langchain(c, native=True) for c in calls]
    _write_common(out, message, native=True, with_ids=False)
    return _wrap(kind, out)


def _calls(message: Message) -> list[FunctionCallContent | OtherContent]:
    return [
        c
        for c in message.contents
        if isinstance(c, FunctionCallContent)
        or (isinstance(c, OtherContent) and c.kind == _TOOL_CALL_KIND)
    ]


def _foreign_messages(message: Message, *, with_ids: bool) -> list[dict[str, Any]]:
    role = message.role
    results = [c for c in message.contents if isinstance(c, FunctionResultContent)]
    calls = [c for c in message.contents if isinstance(c, FunctionCallContent)]
    others: list[Content] = [
        c
        for c in message.contents
        if not isinstance(c, FunctionCallContent | FunctionResultContent)
    ]
    written: list[dict[str, Any]] = []
    if others or calls or not results:
        kind = "ai" if calls else _usual_type(role)
        data = _defaults(kind)
        data["content"] = _body(message, others, native=False)
        if kind == "chat":
            data["role"] = role
        if calls:
            data["tool_calls"] = [_call_to_langchain(c, native=False) for c in calls]
        _write_common(data, message, native=False, with_ids=with_ids)
        written.append(_wrap(kind, data))
    for result in results:
        data = _defaults("tool")
        data.update(content=_result_content(result.result), tool_call_id=result.call_id)
        data["status"] = "error" if result.is_error else "success"
        if not written:
            _write_common(data, message, native=False, with_ids=with_ids)
        written.append(_wrap("tool", data))
    return written


def to_langchain(messages: Sequence[Message], *, with_ids: bool = False) -> list[dict[str, Any]]:
    """Write messages in LangChain's ``message_to_dict`` form.

    Messages read by :func:`from_langchain` come back exactly as they were read. Others
    get what ``message_to_dict`` writes for a fresh message: one AI message a model turn
    with every call (see :mod:`store.formats._turns`), a string content for one text
    (else a list of blocks), ``tool_calls`` with parsed ``args``, one ``tool`` message
    per result (``status`` from ``is_error``); ``with_ids`` writes the
    ``message_id`` as ``id``. Content LangChain has no block for is written as a block of
    its own type, so nothing is dropped.
    """
    written: list[dict[str, Any]] = []
    for run in turns(messages, _is_native):
        message = joined(run)
        if _is_native(message):
            written.append(_native_message(message))
        else:
            written.extend(_foreign_messages(message, with_ids=with_ids))
    return written


def _is_native(message: Message) -> bool:
    return message.metadata.get(SOURCE_FORMAT_KEY) == SOURCE_LANGCHAIN
