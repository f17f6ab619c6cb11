"""Pydantic AI messages: ``ModelMessagesTypeAdapter`` JSON, a list of requests and responses.

:func:`from_pydantic_ai` reads them into :class:`~strategies.messages.Message` and
:func:`to_pydantic_ai` writes them back. Where things go:

- A request (``"kind": "request"``) becomes one message a part, in order: a
  ``system-prompt`` a system message, a ``user-prompt`` a user message (its content a
  string, or a list of strings and files: URLs are URI contents, ``binary`` data
  contents, anything else an :class:`~strategies.messages.OtherContent`), a
  ``tool-return`` or a ``retry-prompt`` naming a tool a ``tool`` message holding one
  :class:`~strategies.messages.FunctionResultContent`. The result is an error when the
  return's ``outcome`` is ``failed``, ``retried`` or ``denied``, and for every retry
  prompt. Any other part (a retry prompt or feedback that answers no call, instruction
  parts) is a user message holding it as an ``OtherContent`` of its ``part_kind``.
  The part's time is the message's; its other fields are kept under
  :data:`PYDANTIC_AI_PART_KEY`. The messages after the first of one request are marked
  :data:`PYDANTIC_AI_CONTINUES_KEY`, so that writing back rejoins the request.
- A response (``"kind": "response"``) becomes one assistant message: ``text`` parts
  text, ``thinking`` reasoning, ``tool-call`` a
  :class:`~strategies.messages.FunctionCallContent` (``args`` the arguments, a string
  or an object), ``builtin-tool-call`` and ``builtin-tool-return`` hosted calls and
  results (``OtherContent`` with their pairing), any other part an ``OtherContent``.
  The response's time is the message's.
- Each request's and response's own fields (``usage``, ``model_name``, ``run_id``,
  ``conversation_id``, ``metadata``...) are kept under :data:`PYDANTIC_AI_MESSAGE_KEY`
  on its first message; a part's unnamed fields in its content's ``extra``.

Pydantic AI messages have no ids: :data:`ORIGINAL_ID_KEY` ``None`` says so (the
importer gives stable ones). Times are written back as Pydantic writes them (``Z`` for
UTC).

Messages from elsewhere are written as Pydantic AI reads them: consecutive system, user
and tool messages are one request, consecutive assistant messages one response. A
result names the tool of its call (``tool_name``), found among the calls written before
it. What Pydantic AI cannot express is left out: another format's own content types,
and a result whose call is not written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from store.formats._common import (
    ORIGINAL_ID_KEY,
    SOURCE_FORMAT_KEY,
    FormatError,
    Reader,
    build,
    build_message,
    clone,
    copied,
    read_tagged,
    shown,
    take,
)
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
    "PYDANTIC_AI_CONTINUES_KEY",
    "PYDANTIC_AI_FORM_KEY",
    "PYDANTIC_AI_MESSAGE_KEY",
    "PYDANTIC_AI_PART_KEY",
    "SOURCE_PYDANTIC_AI",
    "from_pydantic_ai",
    "is_pydantic_ai_message",
    "to_pydantic_ai",
]

SOURCE_PYDANTIC_AI = "pydantic_ai"
"""The :data:`SOURCE_FORMAT_KEY` value of messages read by :func:`from_pydantic_ai`."""

PYDANTIC_AI_MESSAGE_KEY = "pydantic_ai_message"
"""Metadata key on the first message of a request or response: its own fields
(everything but ``parts``, and a response's ``timestamp``)."""

PYDANTIC_AI_PART_KEY = "pydantic_ai_part"
"""Metadata key on a message read from a request part: the part's fields that the
message does not hold (``part_kind``, ``tool_name``, ``outcome``...)."""

PYDANTIC_AI_CONTINUES_KEY = "pydantic_ai_continues"
"""Metadata key on a message that continues the previous message's request."""

PYDANTIC_AI_FORM_KEY = "pydantic_ai_content_form"
"""Metadata key on a user prompt's message: its content was a ``string`` or a ``list``."""

ERROR_OUTCOMES = frozenset({"failed", "retried", "denied"})
"""The ``outcome`` values of a tool return that make its result an error."""

_URL_KINDS = frozenset({"image-url", "document-url", "audio-url", "video-url"})
_KINDS = ("request", "response")


def is_pydantic_ai_message(value: Any) -> bool:
    """Whether ``value`` looks like a serialized ``ModelRequest`` or ``ModelResponse``."""
    return (
        isinstance(value, Mapping)
        and value.get("kind") in _KINDS
        and isinstance(value.get("parts"), list)
    )


def _time(value: datetime | None) -> str | None:
    """A time as Pydantic writes it: ISO 8601, ``Z`` for UTC."""
    if value is None:
        return None
    text = value.isoformat()
    return text.removesuffix("+00:00") + "Z" if value.utcoffset() == UTC.utcoffset(None) else text


def _metadata(**entries: Any) -> dict[str, Any]:
    return {SOURCE_FORMAT_KEY: SOURCE_PYDANTIC_AI, ORIGINAL_ID_KEY: None, **entries}


# Reading: response parts.


def _other(index: int, kind: str, fields: dict[str, Any]) -> Content:
    call_id = fields.get("tool_call_id")
    if kind.startswith("builtin-tool-") and isinstance(call_id, str) and call_id:
        pairing = "call" if kind == "builtin-tool-call" else "result"
        return build(
            index, OtherContent, kind=kind, payload=fields, call_id=call_id, pairing=pairing
        )
    return build(index, OtherContent, kind=kind, payload=fields)


def _text(index: int, fields: dict[str, Any]) -> Content | None:
    text = take(fields, "content", str)
    return None if text is None else build(index, TextContent, text=text, extra=fields)


def _thinking(index: int, fields: dict[str, Any]) -> Content | None:
    text = take(fields, "content", str)
    return None if text is None else build(index, ReasoningContent, text=text, extra=fields)


def _tool_call(index: int, fields: dict[str, Any]) -> Content | None:
    call_id, name = take(fields, "tool_call_id", str), take(fields, "tool_name", str)
    if not call_id or not name:
        raise FormatError(index, "tool-call needs a string tool_call_id and tool_name")
    arguments = take(fields, "args", (dict, str))
    return build(
        index, FunctionCallContent, call_id=call_id, name=name, arguments=arguments, extra=fields
    )


_RESPONSE_PARTS: dict[str, Reader] = {
    "text": _text,
    "thinking": _thinking,
    "tool-call": _tool_call,
}


def _response_part(index: int, position: int, part: Any) -> Content:
    if not isinstance(part, Mapping):
        raise FormatError(index, f"parts[{position}] is not an object")
    renamed = {"type" if k == "part_kind" else k: v for k, v in part.items()}
    return read_tagged(
        index,
        f"parts[{position}]",
        renamed,
        _RESPONSE_PARTS,
        _other,
        container="an object",
        tag="part_kind",
        keep=lambda content: _response_part_of(content, native=True) == dict(part),
    )


def _response(index: int, item: Mapping[str, Any], allow_custom_roles: bool) -> Message:
    envelope = {k: v for k, v in item.items() if k != "parts"}
    created = take(envelope, "timestamp", str)
    contents = [_response_part(index, p, part) for p, part in enumerate(item["parts"])]
    values: dict[str, Any] = {
        "role": "assistant",
        "contents": contents,
        "created_at": created,
        "metadata": _metadata(**{PYDANTIC_AI_MESSAGE_KEY: envelope}),
    }
    return build_message(index, values, allow_custom_roles=allow_custom_roles)


# Reading: request parts.


def _user_item(index: int, where: str, value: Any) -> Content:
    if isinstance(value, str):
        return build(index, TextContent, text=value)
    if not isinstance(value, Mapping) or not isinstance(value.get("kind"), str):
        raise FormatError(index, f"{where} is neither a string nor a content with a kind")
    fields = dict(value)
    kind = fields["kind"]
    if kind in _URL_KINDS and isinstance(fields.get("url"), str):
        uri = fields.pop("url")
        media_type = take(fields, "media_type", str)
        return build(index, UriContent, uri=uri, media_type=media_type, extra=fields)
    if kind == "binary" and isinstance(fields.get("data"), str):
        data = fields.pop("data")
        media_type = take(fields, "media_type", str)
        return build(index, DataContent, data=data, media_type=media_type, extra=fields)
    fields.pop("kind")
    return build(index, OtherContent, kind=kind, payload=fields)


def _user_prompt(index: int, where: str, fields: dict[str, Any]) -> tuple[str, list[Content]]:
    content = fields.pop("content", None)
    if isinstance(content, str):
        fields[PYDANTIC_AI_FORM_KEY] = "string"
        return "user", [build(index, TextContent, text=content)]
    if isinstance(content, list):
        fields[PYDANTIC_AI_FORM_KEY] = "list"
        return "user", [
            _user_item(index, f"{where}.content[{i}]", v) for i, v in enumerate(content)
        ]
    raise FormatError(index, f"{where}: user-prompt content must be a string or a list")


def _tool_result(index: int, where: str, fields: dict[str, Any]) -> tuple[str, list[Content]]:
    call_id = take(fields, "tool_call_id", str)
    if not call_id:
        raise FormatError(index, f"{where}: {fields['part_kind']} needs a tool_call_id")
    is_error = fields["part_kind"] == "retry-prompt" or fields.get("outcome") in ERROR_OUTCOMES
    result = fields.pop("content", None)
    return "tool", [
        build(index, FunctionResultContent, call_id=call_id, result=result, is_error=is_error)
    ]


def _request_part(index: int, position: int, part: Any) -> Message:
    where = f"parts[{position}]"
    if not isinstance(part, Mapping):
        raise FormatError(index, f"{where} is not an object")
    fields = dict(part)
    kind = fields.get("part_kind")
    if not isinstance(kind, str) or not kind:
        raise FormatError(index, f"{where} has no part_kind")
    created = take(fields, "timestamp", str)
    form = None
    role: str
    contents: list[Content]
    if kind == "system-prompt" and isinstance(fields.get("content"), str):
        role, contents = "system", [build(index, TextContent, text=fields.pop("content"))]
    elif kind == "user-prompt":
        role, contents = _user_prompt(index, where, fields)
        form = fields.pop(PYDANTIC_AI_FORM_KEY)
    elif kind == "tool-return" or (kind == "retry-prompt" and fields.get("tool_name")):
        role, contents = _tool_result(index, where, fields)
    else:
        fields.pop("part_kind")
        role, contents = "user", [build(index, OtherContent, kind=kind, payload=fields)]
        fields = {"part_kind": kind}
    metadata = _metadata(**{PYDANTIC_AI_PART_KEY: fields})
    if form is not None:
        metadata[PYDANTIC_AI_FORM_KEY] = form
    values = {"role": role, "contents": contents, "created_at": created, "metadata": metadata}
    return build_message(index, values, allow_custom_roles=False)


def _request(index: int, item: Mapping[str, Any]) -> list[Message]:
    messages = [_request_part(index, p, part) for p, part in enumerate(item["parts"])]
    envelope = {k: v for k, v in item.items() if k != "parts"}
    if not messages:
        metadata = _metadata(**{PYDANTIC_AI_MESSAGE_KEY: envelope})
        return [
            build_message(index, {"role": "user", "metadata": metadata}, allow_custom_roles=False)
        ]
    first, rest = messages[0], messages[1:]
    marked = [
        m.model_copy(update={"metadata": {**m.metadata, PYDANTIC_AI_CONTINUES_KEY: True}})
        for m in rest
    ]
    head = first.model_copy(
        update={"metadata": {**first.metadata, PYDANTIC_AI_MESSAGE_KEY: clone(envelope)}}
    )
    return [head, *marked]


def from_pydantic_ai(
    items: Sequence[Mapping[str, Any]], *, allow_custom_roles: bool = False
) -> list[Message]:
    """Read serialized Pydantic AI messages (``ModelMessagesTypeAdapter`` JSON, parsed)
    into messages.

    Raises :class:`FormatError` naming the index of the first item it cannot read: one
    that is neither a request nor a response, or a part without what its kind needs.
    """
    messages: list[Message] = []
    for index, item in enumerate(items):
        if not is_pydantic_ai_message(item):
            raise FormatError(
                index,
                'expected a request or response ({"kind": "request" or "response", '
                f'"parts": [...]}}), got {shown(item)}',
            )
        if item["kind"] == "response":
            messages.append(_response(index, item, allow_custom_roles))
        else:
            messages.extend(_request(index, item))
    return messages


# Writing.


def _response_part_of(content: Content, *, native: bool) -> dict[str, Any] | None:
    extra = copied(content.extra) if native else {}
    if isinstance(content, TextContent):
        return {"content": content.text, **extra, "part_kind": "text"}
    if isinstance(content, ReasoningContent):
        if content.text is None:
            return None
        return {"content": content.text, **extra, "part_kind": "thinking"}
    if isinstance(content, FunctionCallContent):
        part: dict[str, Any] = {"tool_name": content.name, "tool_call_id": content.call_id}
        if content.arguments is not None or not native:
            part["args"] = clone(content.arguments)
        return {**part, **extra, "part_kind": "tool-call"}
    if isinstance(content, OtherContent) and native:
        return {**copied(content.payload), "part_kind": content.kind}
    return None


def _user_item_of(content: Content, *, native: bool) -> Any:
    extra = copied(content.extra) if native else {}
    if isinstance(content, TextContent):
        return content.text
    if isinstance(content, UriContent):
        item = {"url": content.uri, **extra}
        if content.media_type is not None:
            item["media_type"] = content.media_type
        if not native:
            item["kind"] = _url_kind(content.media_type)
        return item
    if isinstance(content, DataContent):
        item = {"data": content.data, "media_type": content.media_type, **extra}
        item.setdefault("kind", "binary")
        return item
    if isinstance(content, OtherContent) and native:
        return {**copied(content.payload), "kind": content.kind}
    return None


def _url_kind(media_type: str | None) -> str:
    family = (media_type or "").split("/", 1)[0]
    return {"image": "image-url", "audio": "audio-url", "video": "video-url"}.get(
        family, "document-url"
    )


class _Writer:
    """The requests and responses being written, with the tool names of the calls."""

    def __init__(self) -> None:
        self.out: list[dict[str, Any]] = []
        self.tools: dict[str, str] = {}

    def _open(self, kind: str, envelope: Any) -> dict[str, Any]:
        item = {"parts": [], **(copied(envelope) if isinstance(envelope, dict) else {})}
        item.setdefault("kind", kind)
        self.out.append(item)
        return item

    def _current(self, kind: str, message: Message) -> dict[str, Any]:
        native = message.metadata.get(SOURCE_FORMAT_KEY) == SOURCE_PYDANTIC_AI
        last = self.out[-1] if self.out else None
        if native:
            continues = message.metadata.get(PYDANTIC_AI_CONTINUES_KEY) is True
            if continues and last is not None and last["kind"] == kind:
                return last
            return self._open(kind, message.metadata.get(PYDANTIC_AI_MESSAGE_KEY))
        if last is not None and last["kind"] == kind and last.get(PYDANTIC_AI_MESSAGE_KEY) is True:
            return last
        item = self._open(kind, None)
        item[PYDANTIC_AI_MESSAGE_KEY] = True  # marks a request or response from elsewhere
        return item

    def response(self, message: Message) -> None:
        native = message.metadata.get(SOURCE_FORMAT_KEY) == SOURCE_PYDANTIC_AI
        item = self._current("response", message)
        for content in message.contents:
            if isinstance(content, FunctionCallContent):
                self.tools[content.call_id] = content.name
            part = _response_part_of(content, native=native)
            if part is not None:
                item["parts"].append(part)
        if message.created_at is not None:
            item["timestamp"] = _time(message.created_at)

    def request(self, message: Message) -> None:
        native = message.metadata.get(SOURCE_FORMAT_KEY) == SOURCE_PYDANTIC_AI
        parts = self._native_parts(message) if native else self._foreign_parts(message)
        if message.contents and not parts:
            return  # nothing Pydantic AI can express
        item = self._current("request", message)
        item["parts"].extend(parts)

    def _native_parts(self, message: Message) -> list[dict[str, Any]]:
        fields = message.metadata.get(PYDANTIC_AI_PART_KEY)
        if not isinstance(fields, dict):
            return []
        part = copied(fields)
        kind = part.get("part_kind")
        if (
            kind in ("system-prompt", "user-prompt")
            and message.metadata.get(PYDANTIC_AI_FORM_KEY) != "list"
            and len(message.contents) == 1
            and isinstance(message.contents[0], TextContent)
        ):
            part["content"] = message.contents[0].text
        elif kind == "user-prompt":
            part["content"] = [_user_item_of(c, native=True) for c in message.contents]
        elif len(message.contents) == 1 and isinstance(message.contents[0], FunctionResultContent):
            result = message.contents[0]
            part["content"] = clone(result.result)
            part["tool_call_id"] = result.call_id
        elif len(message.contents) == 1 and isinstance(message.contents[0], OtherContent):
            part = {**copied(message.contents[0].payload), "part_kind": message.contents[0].kind}
        if message.created_at is not None:
            part["timestamp"] = _time(message.created_at)
        return [part]

    def _foreign_parts(self, message: Message) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        stamp = {"timestamp": _time(message.created_at)} if message.created_at else {}
        if message.role == "tool":
            for content in message.contents:
                if isinstance(content, FunctionResultContent) and content.call_id in self.tools:
                    parts.append(self._return(content, stamp))
            return parts
        kind = "system-prompt" if message.role == "system" else "user-prompt"
        items = [_user_item_of(c, native=False) for c in message.contents]
        kept = [i for i in items if i is not None]
        if kind == "system-prompt" or all(isinstance(i, str) for i in kept):
            texts = [i for i in kept if isinstance(i, str)]
            if texts or not message.contents:
                parts.append({"content": "".join(texts), **stamp, "part_kind": kind})
            return parts
        return [{"content": kept, **stamp, "part_kind": kind}]

    def _return(self, content: FunctionResultContent, stamp: dict[str, Any]) -> dict[str, Any]:
        return {
            "tool_name": self.tools[content.call_id],
            "content": clone(content.result),
            "tool_call_id": content.call_id,
            **stamp,
            "outcome": "failed" if content.is_error else "success",
            "part_kind": "tool-return",
        }

    def written(self) -> list[dict[str, Any]]:
        for item in self.out:
            if item.get(PYDANTIC_AI_MESSAGE_KEY) is True:
                del item[PYDANTIC_AI_MESSAGE_KEY]
        return self.out


def to_pydantic_ai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Write messages as serialized Pydantic AI messages (what
    ``ModelMessagesTypeAdapter.validate_python`` reads).

    Messages read by :func:`from_pydantic_ai` come back exactly as they were read.
    Others get the usual shapes (see the module): consecutive messages of one side are
    one request or response, and what Pydantic AI cannot express is left out.
    """
    writer = _Writer()
    for message in messages:
        if message.role == "assistant":
            writer.response(message)
        else:
            writer.request(message)
    return writer.written()
