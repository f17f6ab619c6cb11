"""OpenAI Responses API input items (the ``input`` of a request, or a stored item list).

:func:`from_openai_responses` reads them into :class:`~strategies.messages.Message` and
:func:`to_openai_responses` writes them back, so that
``to_openai_responses(from_openai_responses(items)) == items``, unknown keys included.

One item is one message, so an item's ``id`` is its message's ``message_id`` exactly
(an item without one gets a fresh id, and the original, ``None`` when absent, is kept
under :data:`ORIGINAL_ID_KEY`). Where things go:

- ``message`` items (with or without ``"type": "message"``): ``role`` as the model maps
  it (``developer`` to system with the original kept); ``content`` a string (one
  :class:`~strategies.messages.TextContent`) or a list of parts (see below), the shape
  kept under :data:`RESPONSES_FORM_KEY`; every other key (``type``, ``status``, ...)
  under :data:`RESPONSES_EXTRA_KEY`.
- ``function_call``: an assistant message holding one
  :class:`~strategies.messages.FunctionCallContent` (``call_id``, ``name``,
  ``arguments`` exactly as given).
- ``function_call_output``: a tool message holding one
  :class:`~strategies.messages.FunctionResultContent` whose ``result`` is ``output``.
- ``reasoning``: an assistant message holding one
  :class:`~strategies.messages.ReasoningContent`; its ``text`` joins the summary texts
  (else the reasoning texts), its ``payload`` is the whole item but ``type`` and ``id``.
- Hosted calls (:data:`HOSTED_CALLS`: computer, custom tool, shell, local shell,
  apply-patch, MCP approval request, tool search, program) and their outputs
  (:data:`HOSTED_RESULTS`): an :class:`~strategies.messages.OtherContent` of ``kind``
  the item type, with the ``call_id`` that pairs them and ``pairing`` ``call``
  (assistant message) or ``result`` (tool message), so that a call and its output form
  one group. One without the id that pairs it is kept unpaired.
- Any other item type (web search, file search, MCP calls, item references, types this
  module does not know): an assistant message holding one ``OtherContent`` of that kind,
  unpaired, kept losslessly.

Message parts: ``input_text`` and ``output_text`` are text (the tag is kept only when
it is not the role's usual one); ``input_image`` with an ``image_url`` and
``input_file`` with base64 ``file_data`` or a ``file_url`` are data or URI contents;
every other part (``refusal``, images and files by ``file_id``, unknown parts) is an
``OtherContent`` of the part's type. The fields of an item or part that the model does
not name stay in the content's ``extra`` (with the part's ``type`` for media).

Messages from elsewhere are written as the Responses API accepts them as input: a
``message`` item for user, system and developer content (a string for one text, else
``input_text``, ``input_image`` and ``input_file`` parts), one assistant ``message``
item a text (its content a string: an assistant's parts would need the ids and status
of output messages), and one item a call and a result. What the Responses API cannot
take from another system is left out: reasoning (a reasoning item needs the id the API
gave it), another format's own content types, and media outside user, system and
developer messages; a message left with nothing is not written. (An export keeps all of
it in chatledger's record: :mod:`store.formats.documents`.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from store.formats._common import (
    SOURCE_FORMAT_KEY,
    FormatError,
    Reader,
    build,
    build_message,
    clone,
    content_form,
    copied,
    exported_role,
    foreign_result,
    join_data_uri,
    read_id,
    read_tagged,
    shown,
    split_data_uri,
    take,
    take_role,
    write_id,
)
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
    "HOSTED_CALLS",
    "HOSTED_RESULTS",
    "RESPONSES_EXTRA_KEY",
    "RESPONSES_FORM_KEY",
    "SOURCE_OPENAI_RESPONSES",
    "from_openai_responses",
    "to_openai_responses",
]

SOURCE_OPENAI_RESPONSES = "openai_responses"
"""The :data:`SOURCE_FORMAT_KEY` value of messages read by :func:`from_openai_responses`."""

RESPONSES_FORM_KEY = "openai_responses_content_form"
"""Metadata key on a ``message`` item: whether ``content`` was a ``string``, a list of
``parts``, or ``missing``. Its presence marks the message as a ``message`` item."""

RESPONSES_EXTRA_KEY = "openai_responses_extra"
"""Metadata key holding a ``message`` item's keys that the model does not name."""

HOSTED_CALLS: dict[str, str] = {
    "computer_call": "call_id",
    "custom_tool_call": "call_id",
    "shell_call": "call_id",
    "local_shell_call": "call_id",
    "apply_patch_call": "call_id",
    "mcp_approval_request": "id",
    "tool_search_call": "call_id",
    "program": "call_id",
}
"""Hosted call item types, each with the key that holds the id its output answers."""

HOSTED_RESULTS: dict[str, str] = {
    "computer_call_output": "call_id",
    "custom_tool_call_output": "call_id",
    "shell_call_output": "call_id",
    "local_shell_call_output": "id",
    "apply_patch_call_output": "call_id",
    "mcp_approval_response": "approval_request_id",
    "tool_search_output": "call_id",
    "program_output": "call_id",
}
"""Hosted output item types, each with the key that holds the id of the call it answers."""

ContentForm = Literal["string", "parts", "missing"]


def _usual_text_tag(role: str) -> str:
    return "output_text" if role == "assistant" else "input_text"


def _other(index: int, kind: str, payload: dict[str, Any]) -> OtherContent:
    return build(index, OtherContent, kind=kind, payload=payload)


def _text_reader(tag: str) -> Reader:
    def read(index: int, fields: dict[str, Any]) -> Content | None:
        text = take(fields, "text", str)
        if text is None:
            return None
        fields["type"] = tag  # dropped again below when it is the role's usual tag
        return build(index, TextContent, text=text, extra=fields)

    return read


def _image(index: int, fields: dict[str, Any]) -> Content | None:
    url = take(fields, "image_url", str)
    if url is None:
        return None
    fields["type"] = "input_image"
    parts = split_data_uri(url)
    if parts is not None:
        return build(index, DataContent, data=parts[1], media_type=parts[0], extra=fields)
    return build(index, UriContent, uri=url, extra=fields)


def _file(index: int, fields: dict[str, Any]) -> Content | None:
    file_data = fields.get("file_data")
    parts = split_data_uri(file_data) if isinstance(file_data, str) else None
    fields["type"] = "input_file"
    if parts is not None:
        del fields["file_data"]
        return build(index, DataContent, data=parts[1], media_type=parts[0], extra=fields)
    url = take(fields, "file_url", str)
    return None if url is None else build(index, UriContent, uri=url, extra=fields)


_PART_READERS: dict[str, Reader] = {
    "input_text": _text_reader("input_text"),
    "output_text": _text_reader("output_text"),
    "input_image": _image,
    "input_file": _file,
}


def _part_from_responses(index: int, position: int, part: Any, role: str) -> Content:
    def usual(content: Content) -> Content:
        if isinstance(content, TextContent) and content.extra.get("type") == _usual_text_tag(role):
            extra = {k: v for k, v in content.extra.items() if k != "type"}
            return content.model_copy(update={"extra": extra})
        return content

    def keep(content: Content) -> bool:
        return bool(_part_to_responses(usual(content), role, native=True) == part)

    content = read_tagged(
        index,
        f"content[{position}]",
        part,
        _PART_READERS,
        _other,
        container="an object",
        tag="part type",
        keep=keep,
    )
    return usual(content)


def _message_item(index: int, fields: dict[str, Any], *, allow_custom_roles: bool) -> Message:
    role = take_role(index, fields)
    form: ContentForm = content_form(index, fields, "parts")
    value = fields.pop("content", None)
    contents: list[Content] = []
    if isinstance(value, str):
        contents.append(build(index, TextContent, text=value))
    elif isinstance(value, list):
        contents = [_part_from_responses(index, i, part, role) for i, part in enumerate(value)]
    metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_OPENAI_RESPONSES}
    metadata[RESPONSES_FORM_KEY] = form
    values: dict[str, Any] = {"role": role, "contents": contents}
    read_id(fields, metadata, values)
    if fields:
        metadata[RESPONSES_EXTRA_KEY] = fields
    values["metadata"] = metadata
    return build_message(index, values, allow_custom_roles=allow_custom_roles)


def _function_call(index: int, fields: dict[str, Any]) -> Content:
    call_id = take(fields, "call_id", str)
    name = take(fields, "name", str)
    if call_id is None or name is None:
        raise FormatError(index, "function_call needs a string call_id and name")
    arguments = take(fields, "arguments", str)
    return build(
        index, FunctionCallContent, call_id=call_id, name=name, arguments=arguments, extra=fields
    )


def _function_output(index: int, fields: dict[str, Any]) -> Content:
    call_id = take(fields, "call_id", str)
    if call_id is None:
        raise FormatError(index, "function_call_output needs a string call_id")
    if "output" not in fields:
        raise FormatError(index, "function_call_output has no output")
    output = fields.pop("output")
    return build(index, FunctionResultContent, call_id=call_id, result=output, extra=fields)


def _texts(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [p["text"] for p in value if isinstance(p, Mapping) and isinstance(p.get("text"), str)]


def _reasoning(index: int, fields: dict[str, Any]) -> Content:
    texts = _texts(fields.get("summary")) or _texts(fields.get("content"))
    text = "\n\n".join(texts) if texts else None
    return build(index, ReasoningContent, text=text, payload=fields)


def _hosted(index: int, kind: str, fields: dict[str, Any], item_id: Any) -> Content:
    if kind in HOSTED_CALLS:
        key, pairing = HOSTED_CALLS[kind], "call"
    elif kind in HOSTED_RESULTS:
        key, pairing = HOSTED_RESULTS[kind], "result"
    else:
        return _other(index, kind, fields)
    call_id = item_id if key == "id" else fields.get(key)
    if not isinstance(call_id, str) or not call_id:
        return _other(index, kind, fields)  # nothing can pair it; kept as it is
    return build(index, OtherContent, kind=kind, payload=fields, call_id=call_id, pairing=pairing)


def _role_of(content: Content) -> str:
    if isinstance(content, FunctionResultContent):
        return "tool"
    if isinstance(content, OtherContent) and content.pairing == "result":
        return "tool"
    return "assistant"


def _other_item(index: int, kind: str, fields: dict[str, Any]) -> Message:
    metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_OPENAI_RESPONSES}
    values: dict[str, Any] = {}
    item_id = fields.get("id")
    read_id(fields, metadata, values)
    content: Content
    if kind == "function_call":
        content = _function_call(index, fields)
    elif kind == "function_call_output":
        content = _function_output(index, fields)
    elif kind == "reasoning":
        content = _reasoning(index, fields)
    else:
        content = _hosted(index, kind, fields, item_id)
    values.update(role=_role_of(content), contents=[content], metadata=metadata)
    return build_message(index, values, allow_custom_roles=False)


def _message_from_responses(index: int, item: Any, *, allow_custom_roles: bool) -> Message:
    if not isinstance(item, Mapping):
        raise FormatError(index, f"expected an item object, got {type(item).__name__}")
    fields = dict(item)
    kind = fields.get("type")
    if kind is None or kind == "message":
        return _message_item(index, fields, allow_custom_roles=allow_custom_roles)
    if not isinstance(kind, str) or not kind:
        raise FormatError(index, f"item type must be a non-empty string, not {shown(kind)}")
    del fields["type"]
    return _other_item(index, kind, fields)


def from_openai_responses(
    items: Sequence[Mapping[str, Any]], *, allow_custom_roles: bool = False
) -> list[Message]:
    """Read Responses API input items into messages, one message an item.

    Raises :class:`FormatError` naming the index of the first item it cannot read,
    including a message role outside the standard ones unless ``allow_custom_roles``
    is true.
    """
    return [
        _message_from_responses(index, item, allow_custom_roles=allow_custom_roles)
        for index, item in enumerate(items)
    ]


def _media_part(
    content: DataContent | UriContent, extra: dict[str, Any], *, native: bool
) -> dict[str, Any]:
    kind = extra.pop("type", None)
    if kind not in ("input_image", "input_file"):
        media_type = content.media_type or ""
        image = media_type.startswith("image/") or (
            isinstance(content, UriContent) and not media_type
        )
        kind = "input_image" if image else "input_file"
    if isinstance(content, DataContent):
        uri = join_data_uri(content.media_type or "application/octet-stream", content.data)
    else:
        uri = content.uri
    if kind == "input_image":
        key = "image_url"
        if not native:
            extra.setdefault("detail", "auto")  # required of an input image
    else:
        key = "file_data" if isinstance(content, DataContent) else "file_url"
    return {"type": kind, **extra, key: uri}


def _part_to_responses(content: Content, role: str, *, native: bool) -> dict[str, Any]:
    extra = copied(content.extra) if native else {}
    if isinstance(content, TextContent):
        tag = extra.pop("type", _usual_text_tag(role))
        part: dict[str, Any] = {"type": tag, **extra, "text": content.text}
        if not native and tag == "output_text":
            part["annotations"] = []
        return part
    if isinstance(content, DataContent | UriContent):
        return _media_part(content, extra, native=native)
    if isinstance(content, OtherContent):
        payload = copied(content.payload)
        payload.pop("type", None)
        return {"type": content.kind, **payload}
    return {"type": content.type, **content_fields(content)}


def _native_message_item(message: Message) -> dict[str, Any]:
    metadata = message.metadata
    role = exported_role(message)
    out: dict[str, Any] = {"role": role}
    form = metadata.get(RESPONSES_FORM_KEY)
    only = message.contents[0] if len(message.contents) == 1 else None
    if form == "string" and isinstance(only, TextContent) and not only.extra:
        out["content"] = only.text
    elif form != "missing" or message.contents:
        out["content"] = [_part_to_responses(c, role, native=True) for c in message.contents]
    write_id(out, message, native=True, with_ids=False)
    extra = metadata.get(RESPONSES_EXTRA_KEY)
    if isinstance(extra, dict):
        out.update(copied(extra))
    return out


def _content_item(content: Content, *, native: bool) -> dict[str, Any]:
    """The item of a content that is an item of its own (a call, an output, reasoning)."""
    extra = copied(content.extra) if native else {}
    if isinstance(content, FunctionCallContent):
        arguments = content.arguments
        if not native and not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        out: dict[str, Any] = {
            "type": "function_call",
            "call_id": content.call_id,
            "name": content.name,
        }
        if arguments is not None:
            out["arguments"] = arguments
        return {**out, **extra}
    if isinstance(content, FunctionResultContent):
        output = clone(content.result) if native else foreign_result(content.result, "input_text")
        return {
            "type": "function_call_output",
            "call_id": content.call_id,
            "output": output,
            **extra,
        }
    if isinstance(content, ReasoningContent):
        if native and isinstance(content.payload, dict):
            return {"type": "reasoning", **copied(content.payload)}
        summary = [] if content.text is None else [{"type": "summary_text", "text": content.text}]
        return {"type": "reasoning", "summary": summary}
    assert isinstance(content, OtherContent)
    return {"type": content.kind, **copied(content.payload)}


def _is_item(content: Content) -> bool:
    if isinstance(content, OtherContent):
        return content.pairing != "none" or content.kind in HOSTED_CALLS
    return isinstance(content, FunctionCallContent | FunctionResultContent | ReasoningContent)


def _native_items(message: Message) -> list[dict[str, Any]]:
    items = [_content_item(content, native=True) for content in message.contents]
    if items:
        write_id(items[0], message, native=True, with_ids=False)
    return items


def _foreign_message_items(message: Message, parts: list[Content]) -> list[dict[str, Any]]:
    """The ``message`` items of a message's parts: one an assistant text, else one."""
    role = exported_role(message)
    if role == "assistant" and parts:
        texts = [c.text for c in parts if isinstance(c, TextContent)]
        return [{"type": "message", "role": role, "content": text} for text in texts]
    out: dict[str, Any] = {"type": "message", "role": role}
    if len(parts) == 1 and isinstance(parts[0], TextContent):
        out["content"] = parts[0].text
    else:
        out["content"] = [_part_to_responses(c, role, native=False) for c in parts]
    return [out]


def _fits(role: str, content: Content) -> bool:
    """Whether the Responses API takes ``content`` of a message from elsewhere."""
    if isinstance(content, ReasoningContent | OtherContent):
        return False
    if isinstance(content, DataContent | UriContent):
        return role != "assistant"
    return True


def _foreign_items(message: Message, *, with_ids: bool) -> list[dict[str, Any]]:
    kept = [c for c in message.contents if _fits(message.role, c)]
    if message.contents and not kept:
        return []  # nothing the Responses API takes from another system
    items: list[dict[str, Any]] = []
    parts: list[Content] = []
    for content in kept:
        if _is_item(content):
            items += _foreign_message_items(message, parts) if parts else []
            parts = []
            items.append(_content_item(content, native=False))
        else:
            parts.append(content)
    if parts or not items:
        items += _foreign_message_items(message, parts)
    if with_ids:
        write_id(items[0], message, native=False, with_ids=True)
    return items


def to_openai_responses(
    messages: Sequence[Message], *, with_ids: bool = False
) -> list[dict[str, Any]]:
    """Write messages as Responses API input items.

    Messages read by :func:`from_openai_responses` come back exactly as they were read.
    Messages from elsewhere become ``message`` items for their texts and media and one
    item for each call and result, in their order: arguments as a JSON string, a result
    that is not text as JSON; what the API cannot take from another system is left out
    (see the module). ``with_ids`` writes the ``message_id`` as the ``id`` of the
    message's first item.
    """
    written: list[dict[str, Any]] = []
    for message in messages:
        if message.metadata.get(SOURCE_FORMAT_KEY) != SOURCE_OPENAI_RESPONSES:
            written.extend(_foreign_items(message, with_ids=with_ids))
        elif RESPONSES_FORM_KEY in message.metadata:
            written.append(_native_message_item(message))
        else:
            written.extend(_native_items(message))
    return written
