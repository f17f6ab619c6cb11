"""OpenAI Chat Completions content parts and tool calls, to and from model contents.

Parts: ``text`` becomes :class:`~strategies.messages.TextContent`; ``image_url`` a
:class:`~strategies.messages.DataContent` for a base64 data URL, else a
:class:`~strategies.messages.UriContent`; ``input_audio`` and a ``file`` with
``file_data`` a :class:`~strategies.messages.DataContent`. The fields of the part that
these do not name stay in ``extra`` (the rest of the nested object under its own key:
``extra["image_url"]``, ``extra["input_audio"]``, ``extra["file"]``). Every other part
(``refusal``, a ``file`` by ``file_id``, unknown types) becomes
:class:`~strategies.messages.OtherContent` with ``kind`` = the part's type. A media part
that would not be written back exactly is kept as :class:`OtherContent` as well.

Tool calls of type ``function`` become :class:`~strategies.messages.FunctionCallContent`;
any other tool call an :class:`OtherContent` of kind ``tool_call``, paired as a call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from store.formats._common import (
    FormatError,
    Reader,
    build,
    clone,
    copied,
    join_data_uri,
    read_tagged,
    split_data_uri,
    take,
)
from store.rules.storage_json import content_fields
from strategies.messages import (
    Content,
    DataContent,
    FunctionCallContent,
    OtherContent,
    TextContent,
    UriContent,
)

__all__ = [
    "TOOL_CALL_KIND",
    "part_from_openai",
    "part_to_openai",
    "tool_call_from_openai",
    "tool_call_to_openai",
]

TOOL_CALL_KIND = "tool_call"
"""``OtherContent.kind`` of a tool call that is not a function call."""

_MEDIA_KEYS = ("image_url", "input_audio", "file")


def _other(index: int, kind: str, payload: dict[str, Any]) -> OtherContent:
    return build(index, OtherContent, kind=kind, payload=payload)


def _image_url(index: int, fields: dict[str, Any]) -> Content | None:
    inner = fields.get("image_url")
    url = inner.get("url") if isinstance(inner, Mapping) else None
    if not isinstance(url, str):
        return None
    assert isinstance(inner, Mapping)
    fields["image_url"] = {k: v for k, v in inner.items() if k != "url"}
    parts = split_data_uri(url)
    if parts is not None:
        return build(index, DataContent, data=parts[1], media_type=parts[0], extra=fields)
    return build(index, UriContent, uri=url, extra=fields)


def _input_audio(index: int, fields: dict[str, Any]) -> Content | None:
    inner = fields.get("input_audio")
    data = inner.get("data") if isinstance(inner, Mapping) else None
    if not isinstance(data, str):
        return None
    assert isinstance(inner, Mapping)
    fields["input_audio"] = {k: v for k, v in inner.items() if k != "data"}
    audio_format = inner.get("format")
    media_type = f"audio/{audio_format}" if isinstance(audio_format, str) else None
    return build(index, DataContent, data=data, media_type=media_type, extra=fields)


def _file(index: int, fields: dict[str, Any]) -> Content | None:
    inner = fields.get("file")
    file_data = inner.get("file_data") if isinstance(inner, Mapping) else None
    parts = split_data_uri(file_data) if isinstance(file_data, str) else None
    if parts is None:
        return None
    assert isinstance(inner, Mapping)
    fields["file"] = {k: v for k, v in inner.items() if k != "file_data"}
    return build(index, DataContent, data=parts[1], media_type=parts[0], extra=fields)


def _text(index: int, fields: dict[str, Any]) -> Content | None:
    text = take(fields, "text", str)
    return None if text is None else build(index, TextContent, text=text, extra=fields)


_READERS: dict[str, Reader] = {
    "text": _text,
    "image_url": _image_url,
    "input_audio": _input_audio,
    "file": _file,
}


def part_from_openai(index: int, position: int, part: Any) -> Content:
    """Convert one content part (``content[position]`` of message ``index``).

    A part is modelled only when writing it back gives the same part; otherwise it is
    kept as :class:`OtherContent`.
    """
    return read_tagged(
        index,
        f"content[{position}]",
        part,
        _READERS,
        _other,
        container="an object",
        tag="part type",
        keep=lambda content: part_to_openai(content, native=True) == part,
    )


def _media_part(
    content: DataContent | UriContent, key: str, extra: dict[str, Any]
) -> dict[str, Any]:
    inner = dict(extra.pop(key, {}))
    if isinstance(content, UriContent):
        value = content.uri
    elif key == "input_audio":
        value = content.data
    else:
        value = join_data_uri(content.media_type or "application/octet-stream", content.data)
    field = {"image_url": "url", "input_audio": "data", "file": "file_data"}[key]
    return {"type": key, **extra, key: {field: value, **inner}}


def _default_media_key(content: DataContent | UriContent) -> str:
    media_type = content.media_type or ""
    if isinstance(content, UriContent) or media_type.startswith("image/"):
        return "image_url"
    return "input_audio" if media_type.startswith("audio/") else "file"


def _foreign_media(content: DataContent | UriContent) -> dict[str, Any]:
    key = _default_media_key(content)
    if key == "input_audio":
        audio_format = (content.media_type or "audio/wav").split("/", 1)[1]
        return _media_part(content, key, {"input_audio": {"format": audio_format}})
    return _media_part(content, key, {})


def part_to_openai(content: Content, *, native: bool) -> dict[str, Any]:
    """Convert one content to a content part.

    ``native`` says the content was read from this format: its ``extra`` fields are
    written back. Content this format cannot express (reasoning, another format's
    own types) is written as a part of its own type, so nothing is dropped.
    """
    extra = copied(content.extra) if native else {}
    if isinstance(content, TextContent):
        return {"type": "text", **extra, "text": content.text}
    if isinstance(content, DataContent | UriContent):
        if not native:
            return _foreign_media(content)
        key = next((k for k in _MEDIA_KEYS if isinstance(extra.get(k), dict)), None)
        return _media_part(content, key or _default_media_key(content), extra)
    if isinstance(content, OtherContent):
        payload = copied(content.payload)
        payload.pop("type", None)
        return {"type": content.kind, **payload, **extra}
    return {"type": content.type, **content_fields(content)}


def tool_call_from_openai(index: int, position: int, call: Any) -> Content:
    """Convert one entry of ``tool_calls`` (``tool_calls[position]`` of message ``index``)."""
    if not isinstance(call, Mapping):
        raise FormatError(index, f"tool_calls[{position}] is not an object")
    try:
        return _tool_call(index, call)
    except FormatError as exc:
        raise FormatError(index, f"tool_calls[{position}]: {exc.problem}") from exc


def _tool_call(index: int, call: Mapping[str, Any]) -> Content:
    function = call.get("function")
    call_id = call.get("id")
    if (
        call.get("type") == "function"
        and isinstance(call_id, str)
        and isinstance(function, Mapping)
        and isinstance(function.get("name"), str)
    ):
        extra = {k: v for k, v in call.items() if k not in ("id", "type", "function")}
        rest = {k: v for k, v in function.items() if k != "name"}
        arguments = take(rest, "arguments", (str, dict))
        if rest:
            extra["function"] = rest
        name = function["name"]
        fields = {"call_id": call_id, "name": name, "arguments": arguments, "extra": extra}
        return build(index, FunctionCallContent, **fields)
    call_ref = call_id if isinstance(call_id, str) and call_id else None
    return build(
        index,
        OtherContent,
        kind=TOOL_CALL_KIND,
        payload=dict(call),
        call_id=call_ref,
        pairing="call",
    )


def tool_call_to_openai(
    content: FunctionCallContent | OtherContent, *, native: bool
) -> dict[str, Any]:
    """Convert a call content back to an entry of ``tool_calls``."""
    if isinstance(content, OtherContent):
        return copied(content.payload)
    extra = copied(content.extra) if native else {}
    function: dict[str, Any] = {"name": content.name}
    arguments = content.arguments
    if arguments is not None:
        function["arguments"] = clone(arguments) if native else _argument_text(arguments)
    elif not native:
        function["arguments"] = "{}"
    function.update(extra.pop("function", {}))
    return {"id": content.call_id, "type": "function", **extra, "function": function}


def _argument_text(arguments: str | dict[str, Any]) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
