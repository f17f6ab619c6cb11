"""Vercel AI SDK UI messages: ``UIMessage[]`` JSON, each ``{"id", "role", "parts"}``.

:func:`from_vercel_ai` reads them into :class:`~strategies.messages.Message` and
:func:`to_vercel_ai` writes them back. Where things go:

- ``text`` parts are text, ``reasoning`` parts reasoning, ``file`` parts URI contents
  (the part's ``url``, a link or a data URL, kept as it is; ``mediaType`` its media
  type).
- A tool part (``tool-NAME``, or ``dynamic-tool`` with its ``toolName``) is a
  :class:`~strategies.messages.FunctionCallContent` (``input`` the arguments) and, once
  it has an outcome (``output-available``, ``output-error``, ``output-denied``), a
  ``tool`` message holding one :class:`~strategies.messages.FunctionResultContent`:
  ``output``, or ``errorText`` with ``is_error``; a denial is an error whose result is
  the approval's ``reason``. An assistant UI message is cut where its parts go on after
  results: the calls, then their results, then a message that continues the same UI
  message (:data:`VERCEL_CONTINUES_KEY`), so that every result follows its call and
  precedes what the model wrote after it. The results' ids are ``<message id>/<call
  id>``, the continuations' ``<message id>#<n>``.
- Every other part (``step-start``, ``source-url``, ``source-document``, ``data-*``,
  ``custom``...) is an :class:`~strategies.messages.OtherContent` of its type, kept in
  order.
- A UI message's id is the message's; its other keys (``metadata``...) are kept under
  :data:`VERCEL_EXTRA_KEY`, a part's unnamed fields in its content's ``extra``.

UI messages have no times. Messages from elsewhere are written as the SDK's ``useChat``
keeps them: consecutive assistant and tool messages are one assistant UI message, each
result merged into its call's tool part; data contents become ``file`` parts with a data
URL. What a UI message cannot express is left out: another format's own content types,
reasoning without text, and a result whose call is not written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from store.formats._common import (
    SOURCE_FORMAT_KEY,
    FormatError,
    Reader,
    build,
    build_message,
    clone,
    copied,
    join_data_uri,
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
    "SOURCE_VERCEL_AI",
    "VERCEL_CONTINUES_KEY",
    "VERCEL_EXTRA_KEY",
    "from_vercel_ai",
    "is_ui_message",
    "to_vercel_ai",
]

SOURCE_VERCEL_AI = "vercel_ai"
"""The :data:`SOURCE_FORMAT_KEY` value of messages read by :func:`from_vercel_ai`."""

VERCEL_EXTRA_KEY = "vercel_extra"
"""Metadata key holding a UI message's keys other than ``id``, ``role`` and ``parts``."""

VERCEL_CONTINUES_KEY = "vercel_continues"
"""Metadata key on a message that continues a UI message (or holds one of its results):
the UI message's id."""

TOOL_STATES = frozenset(
    {
        "input-streaming",
        "input-available",
        "approval-requested",
        "approval-responded",
        "output-available",
        "output-error",
        "output-denied",
    }
)
"""The states of a tool part."""

_OUTCOMES = frozenset({"output-available", "output-error", "output-denied"})
_RESULT_FIELDS = ("output", "errorText", "resultProviderMetadata", "preliminary")
"""A tool part's fields that belong to its result."""
_DYNAMIC = "dynamic-tool"


def is_ui_message(value: Any) -> bool:
    """Whether ``value`` looks like a ``UIMessage``: a ``role`` and a list of typed
    ``parts``."""
    if not isinstance(value, Mapping) or not isinstance(value.get("role"), str):
        return False
    parts = value.get("parts")
    if not isinstance(parts, list):
        return False
    return not parts or (isinstance(parts[0], Mapping) and isinstance(parts[0].get("type"), str))


# Reading.


def _other(index: int, kind: str, fields: dict[str, Any]) -> Content:
    return build(index, OtherContent, kind=kind, payload=fields)


def _text(index: int, fields: dict[str, Any]) -> Content | None:
    text = take(fields, "text", str)
    return None if text is None else build(index, TextContent, text=text, extra=fields)


def _reasoning(index: int, fields: dict[str, Any]) -> Content | None:
    text = take(fields, "text", str)
    return None if text is None else build(index, ReasoningContent, text=text, extra=fields)


def _file(index: int, fields: dict[str, Any]) -> Content | None:
    url = take(fields, "url", str)
    if url is None:
        return None
    media_type = take(fields, "mediaType", str)
    return build(index, UriContent, uri=url, media_type=media_type, extra=fields)


_READERS: dict[str, Reader] = {"text": _text, "reasoning": _reasoning, "file": _file}


def _is_tool(part: Any) -> bool:
    kind = part.get("type") if isinstance(part, Mapping) else None
    return isinstance(kind, str) and (kind.startswith("tool-") or kind == _DYNAMIC)


def _part(index: int, position: int, part: Any) -> Content:
    return read_tagged(
        index,
        f"parts[{position}]",
        part,
        _READERS,
        _other,
        container="an object",
        tag="type",
        keep=lambda content: _part_of(content, native=True) == part,
    )


def _tool(
    index: int, position: int, part: Mapping[str, Any]
) -> tuple[FunctionCallContent, FunctionResultContent | None]:
    where = f"parts[{position}]"
    fields = dict(part)
    kind = fields.pop("type")
    name = take(fields, "toolName", str) if kind == _DYNAMIC else kind.removeprefix("tool-")
    call_id = take(fields, "toolCallId", str)
    if not name or not call_id:
        raise FormatError(index, f"{where}: a tool part needs a toolCallId and a tool name")
    state = fields.get("state")
    if state not in TOOL_STATES:
        raise FormatError(index, f"{where}: unknown tool state {shown(state)}")
    if kind == _DYNAMIC:
        fields["type"] = _DYNAMIC
    result_fields = {k: fields.pop(k) for k in _RESULT_FIELDS if k in fields}
    arguments = take(fields, "input", (dict, str))
    call = build(
        index, FunctionCallContent, call_id=call_id, name=name, arguments=arguments, extra=fields
    )
    if state not in _OUTCOMES:
        return call, None
    return call, _result(index, call_id, state, fields, result_fields)


def _result(
    index: int,
    call_id: str,
    state: str,
    call_fields: Mapping[str, Any],
    fields: dict[str, Any],
) -> FunctionResultContent:
    if state == "output-available":
        value = fields.pop("output", None)
    elif state == "output-error":
        value = fields.pop("errorText", None)
    else:
        approval = call_fields.get("approval")
        reason = approval.get("reason") if isinstance(approval, Mapping) else None
        value = reason if isinstance(reason, str) else "The tool call was denied."
    return build(
        index,
        FunctionResultContent,
        call_id=call_id,
        result=value,
        is_error=state != "output-available",
        extra=fields,
    )


class _Cut:
    """One UI message being cut into messages (see the module)."""

    def __init__(self, index: int, item: Mapping[str, Any], allow_custom_roles: bool) -> None:
        self.index = index
        self.item = item
        self.allow_custom_roles = allow_custom_roles
        self.messages: list[Message] = []
        self.contents: list[Content] = []
        self.results: list[FunctionResultContent] = []

    def _emit(self, role: str, contents: list[Content], message_id: str) -> None:
        ui_id = self.item["id"]
        metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_VERCEL_AI}
        if self.messages:
            metadata[VERCEL_CONTINUES_KEY] = ui_id
        else:
            extra = {k: v for k, v in self.item.items() if k not in ("id", "role", "parts")}
            if extra:
                metadata[VERCEL_EXTRA_KEY] = clone(extra)
        values = {
            "role": role,
            "contents": contents,
            "message_id": message_id,
            "metadata": metadata,
        }
        message = build_message(self.index, values, allow_custom_roles=self.allow_custom_roles)
        self.messages.append(message)

    def _flush(self) -> None:
        ui_id = self.item["id"]
        if self.contents or not self.messages:
            number = len(self.messages)
            self._emit(self.item["role"], self.contents, f"{ui_id}#{number}" if number else ui_id)
        for result in self.results:
            self._emit("tool", [result], f"{ui_id}/{result.call_id}")
        self.contents, self.results = [], []

    def cut(self) -> list[Message]:
        for position, part in enumerate(self.item["parts"]):
            if _is_tool(part):
                call, result = _tool(self.index, position, part)
                self.contents.append(call)
                if result is not None:
                    self.results.append(result)
                continue
            if self.results:
                self._flush()
            self.contents.append(_part(self.index, position, part))
        self._flush()
        return self.messages


def from_vercel_ai(
    items: Sequence[Mapping[str, Any]], *, allow_custom_roles: bool = False
) -> list[Message]:
    """Read UI messages into messages.

    Raises :class:`FormatError` naming the index of the first item it cannot read: one
    without a string ``id``, a ``role`` or a list of ``parts``, a role outside the
    standard ones unless ``allow_custom_roles``, a tool part without a ``toolCallId`` or
    with an unknown ``state``.
    """
    messages: list[Message] = []
    for index, item in enumerate(items):
        if not is_ui_message(item):
            raise FormatError(
                index,
                f'expected a UI message ({{"id", "role", "parts": [...]}}), got {shown(item)}',
            )
        if not isinstance(item.get("id"), str) or not item["id"]:
            raise FormatError(index, "a UI message needs a non-empty string id")
        messages.extend(_Cut(index, item, allow_custom_roles).cut())
    return messages


# Writing.


def _part_of(content: Content, *, native: bool) -> dict[str, Any] | None:
    extra = copied(content.extra) if native else {}
    if isinstance(content, TextContent):
        return {"type": "text", "text": content.text, **extra}
    if isinstance(content, ReasoningContent):
        return (
            None if content.text is None else {"type": "reasoning", "text": content.text, **extra}
        )
    if isinstance(content, UriContent):
        media_type = content.media_type or "application/octet-stream"
        return {"type": "file", "mediaType": media_type, "url": content.uri, **extra}
    if isinstance(content, DataContent):
        media_type = content.media_type or "application/octet-stream"
        url = join_data_uri(media_type, content.data)
        return {"type": "file", "mediaType": media_type, "url": url, **extra}
    if isinstance(content, FunctionCallContent):
        return _tool_part(content, native=native)
    if isinstance(content, OtherContent) and native:
        return {"type": content.kind, **copied(content.payload)}
    return None


def _tool_part(content: FunctionCallContent, *, native: bool) -> dict[str, Any]:
    extra = copied(content.extra) if native else {}
    part: dict[str, Any] = {"type": f"tool-{content.name}", "toolCallId": content.call_id}
    if extra.get("type") == _DYNAMIC:
        part["toolName"] = content.name
    if content.arguments is not None:
        part["input"] = clone(content.arguments)
    elif not native:
        part["input"] = {}
    part.update(extra)
    part.setdefault("state", "input-available")
    return part


def _merge(part: dict[str, Any], result: FunctionResultContent, *, native: bool) -> None:
    """Write ``result`` into its call's tool ``part``."""
    if native:
        part.update(copied(result.extra))
    else:
        part["state"] = "output-error" if result.is_error else "output-available"
    if part["state"] == "output-available":
        part["output"] = clone(result.result)
    elif part["state"] == "output-error":
        value = result.result
        part["errorText"] = value if isinstance(value, str) else json_text(value)


def json_text(value: Any) -> str:
    """A result that is not text, as the JSON text of an ``errorText``."""
    return json.dumps(value, ensure_ascii=False)


class _Writer:
    def __init__(self) -> None:
        self.out: list[dict[str, Any]] = []

    def _tool_part(self, call_id: str) -> dict[str, Any] | None:
        if not self.out or self.out[-1]["role"] != "assistant":
            return None
        parts: list[dict[str, Any]] = self.out[-1]["parts"]
        return next((p for p in parts if p.get("toolCallId") == call_id), None)

    def add(self, message: Message) -> None:
        native = message.metadata.get(SOURCE_FORMAT_KEY) == SOURCE_VERCEL_AI
        if message.role == "tool":
            for content in message.contents:
                if isinstance(content, FunctionResultContent):
                    part = self._tool_part(content.call_id)
                    if part is not None:
                        _merge(part, content, native=native)
            return
        parts = [p for p in (_part_of(c, native=native) for c in message.contents) if p]
        if message.contents and not parts:
            return
        if self._joins(message, native):
            self.out[-1]["parts"].extend(parts)
            return
        item: dict[str, Any] = {"id": message.message_id, "role": message.role, "parts": parts}
        extra = message.metadata.get(VERCEL_EXTRA_KEY)
        if native and isinstance(extra, dict):
            item.update(copied(extra))
        self.out.append(item)

    def _joins(self, message: Message, native: bool) -> bool:
        if not self.out:
            return False
        last = self.out[-1]
        if native:
            return bool(message.metadata.get(VERCEL_CONTINUES_KEY) == last["id"])
        return message.role == "assistant" and last["role"] == "assistant"


def to_vercel_ai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Write messages as UI messages (what the SDK's ``validateUIMessages`` accepts).

    Messages read by :func:`from_vercel_ai` come back exactly as they were read. Others
    get the usual shapes (see the module): each result merged into its call's tool
    part, and what a UI message cannot express left out.
    """
    writer = _Writer()
    for message in messages:
        writer.add(message)
    return writer.out
