"""Agent Framework contents (``Content.to_dict()`` mappings) to and from the model.

text, text_reasoning, function_call, function_result, data and uri map to their model
variants; every other type (hosted tools, approvals, usage, errors, hosted files, ...)
becomes :class:`~strategies.messages.OtherContent` with all its fields in ``payload``.
A modelled field is taken out of the mapping only when it has the expected type; every
field left over is kept in ``extra`` and written back as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from store.formats._common import (
    Reader,
    build,
    clone,
    copied,
    join_data_uri,
    read_tagged,
    split_data_uri,
    take,
)
from strategies.messages import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    OtherContent,
    Pairing,
    ReasoningContent,
    TextContent,
    UriContent,
)

__all__ = ["EXCEPTION_MARKER", "content_from_af", "content_to_af"]

EXCEPTION_MARKER = "FunctionInvocationError"
"""What Agent Framework writes in place of a function's exception when it serializes."""

_CALL_KINDS = frozenset({"function_call", "function_approval_request"})
_RESULT_KINDS = frozenset({"function_result", "function_approval_response"})


def _pairing(kind: str) -> Pairing:
    if kind in _CALL_KINDS or kind.endswith("_tool_call"):
        return "call"
    if kind in _RESULT_KINDS or kind.endswith("_tool_result"):
        return "result"
    return "none"


def _non_empty_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _other_call_id(kind: str, fields: Mapping[str, Any]) -> str | None:
    """The id that pairs a hosted call, or an approval request, with its answer.

    Approvals pair by their ``id`` (how Agent Framework matches a response to its
    request), falling back to the ``call_id`` of the function call they carry. Image
    generation calls have no ``call_id`` and pair by ``image_id``.
    """
    if kind.startswith("function_approval_"):
        call = fields.get("function_call")
        nested = call.get("call_id") if isinstance(call, Mapping) else None
        return _non_empty_str(fields.get("id")) or _non_empty_str(nested)
    call_id = _non_empty_str(fields.get("call_id"))
    if call_id is None and kind.startswith("image_generation_tool_"):
        return _non_empty_str(fields.get("image_id"))
    return call_id


def _other(index: int, kind: str, fields: dict[str, Any]) -> OtherContent:
    return build(
        index,
        OtherContent,
        kind=kind,
        payload=fields,
        call_id=_other_call_id(kind, fields),
        pairing=_pairing(kind),
    )


def _text(index: int, fields: dict[str, Any]) -> Content | None:
    # Agent Framework itself turns a missing or null text into "".
    text = take(fields, "text", str)
    return build(index, TextContent, text=text or "", extra=fields)


def _reasoning(index: int, fields: dict[str, Any]) -> Content | None:
    text = take(fields, "text", str)
    protected = take(fields, "protected_data", str)
    return build(index, ReasoningContent, text=text, payload=protected, extra=fields)


def _function_call(index: int, fields: dict[str, Any]) -> Content | None:
    if not isinstance(fields.get("call_id"), str) or not isinstance(fields.get("name"), str):
        return None
    call_id, name = fields.pop("call_id"), fields.pop("name")
    arguments = take(fields, "arguments", (str, dict))
    return build(
        index, FunctionCallContent, call_id=call_id, name=name, arguments=arguments, extra=fields
    )


def _is_error(fields: Mapping[str, Any]) -> bool:
    items = fields.get("items")
    error_item = isinstance(items, list) and any(
        isinstance(item, Mapping) and item.get("type") == "error" for item in items
    )
    return fields.get("exception") is not None or error_item


def _function_result(index: int, fields: dict[str, Any]) -> Content | None:
    if not isinstance(fields.get("call_id"), str):
        return None
    call_id = fields.pop("call_id")
    result = fields.pop("result") if fields.get("result") is not None else None
    return build(
        index,
        FunctionResultContent,
        call_id=call_id,
        result=result,
        is_error=_is_error(fields),
        extra=fields,
    )


def _data(index: int, fields: dict[str, Any]) -> Content | None:
    uri = fields.get("uri")
    parts = split_data_uri(uri) if isinstance(uri, str) else None
    if parts is None:
        return None
    data = parts[1]
    del fields["uri"]
    media_type = take(fields, "media_type", str)
    if media_type is None or join_data_uri(media_type, data) != uri:
        fields["uri"] = uri  # kept verbatim: the media type alone does not rebuild it
    return build(index, DataContent, data=data, media_type=media_type, extra=fields)


def _uri(index: int, fields: dict[str, Any]) -> Content | None:
    uri = take(fields, "uri", str)
    if uri is None:
        return None
    media_type = take(fields, "media_type", str)
    return build(index, UriContent, uri=uri, media_type=media_type, extra=fields)


_READERS: dict[str, Reader] = {
    "text": _text,
    "text_reasoning": _reasoning,
    "function_call": _function_call,
    "function_result": _function_result,
    "data": _data,
    "uri": _uri,
}


def content_from_af(index: int, position: int, item: Any) -> Content:
    """Convert one Agent Framework content mapping (``contents[position]`` of item ``index``)."""
    return read_tagged(
        index,
        f"contents[{position}]",
        item,
        _READERS,
        _other,
        container="a mapping",
        tag="content type",
    )


def _protected_data(payload: Any) -> str:
    return payload if isinstance(payload, str) else json.dumps(payload)


def _media(tag: str, value: str, media_type: str | None) -> dict[str, Any]:
    out = {"type": tag, "uri": value}
    if media_type is not None:
        out["media_type"] = media_type
    return out


def _write_text(content: TextContent) -> dict[str, Any]:
    return {"type": "text", "text": content.text}


def _write_reasoning(content: ReasoningContent) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "text_reasoning"}
    if content.text is not None:
        out["text"] = content.text
    if content.payload is not None:
        out["protected_data"] = _protected_data(content.payload)
    return out


def _write_call(content: FunctionCallContent) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "function_call",
        "call_id": content.call_id,
        "name": content.name,
    }
    if content.arguments is not None:
        out["arguments"] = clone(content.arguments)
    return out


def _write_result(content: FunctionResultContent) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function_result", "call_id": content.call_id}
    if content.result is not None:
        out["result"] = clone(content.result)
    return out


def _write_data(content: DataContent) -> dict[str, Any]:
    media_type = content.media_type or "application/octet-stream"
    return _media("data", join_data_uri(media_type, content.data), content.media_type)


def _write_uri(content: UriContent) -> dict[str, Any]:
    return _media("uri", content.uri, content.media_type)


def _write_other(content: OtherContent) -> dict[str, Any]:
    payload = copied(content.payload)
    payload.pop("type", None)  # the kind names the type (a foreign payload may carry its own)
    return {"type": content.kind, **payload}


_WRITERS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "text": _write_text,
    "reasoning": _write_reasoning,
    "function_call": _write_call,
    "function_result": _write_result,
    "data": _write_data,
    "uri": _write_uri,
    "other": _write_other,
}


def content_to_af(content: Content, *, native: bool) -> dict[str, Any]:
    """Convert one content to an Agent Framework content mapping.

    ``native`` says the message came from Agent Framework: its ``extra`` fields are
    written back. Contents from other formats get Agent Framework's defaults instead.
    """
    out = _WRITERS[content.type](content)
    if not native:
        if isinstance(content, OtherContent):
            return out
        if isinstance(content, FunctionResultContent) and content.is_error:
            out["exception"] = EXCEPTION_MARKER
        out["additional_properties"] = {}
        return out
    extra = copied(content.extra)
    if isinstance(content, DataContent) and "uri" in extra:
        del out["uri"]  # the original URI, kept verbatim
    return {"type": out.pop("type"), **extra, **out}
