"""Anthropic Messages API messages (the ``messages`` of a request body, and its ``system``).

:func:`from_anthropic` reads them into :class:`~strategies.messages.Message` and
:func:`to_anthropic` writes them back; :func:`anthropic_request` builds the
``system`` / ``messages`` pair of a request body. Where things go:

- ``system`` (a string or text blocks) is one system message, before the others.
- An assistant message: ``text`` blocks are text, ``thinking`` and ``redacted_thinking``
  reasoning (the signature or redacted data in its ``payload``), ``tool_use`` a
  :class:`~strategies.messages.FunctionCallContent` (``input`` the arguments). Server
  tool blocks (``server_tool_use``, ``mcp_tool_use``, ...) are calls and the blocks with
  a ``tool_use_id`` (``web_search_tool_result``, ...) results, kept as
  :class:`~strategies.messages.OtherContent` with their pairing.
- A user message: each ``tool_result`` block becomes a ``tool`` message holding one
  :class:`~strategies.messages.FunctionResultContent` (``is_error`` kept), and each run
  of other blocks a user message, in order; the messages after the first of one turn
  are marked :data:`ANTHROPIC_TURN_KEY` so that writing back rejoins the turn. So a turn
  that carries only results becomes tool messages.
- ``image`` and ``document`` blocks with a base64 or URL source are data or URI
  contents; any other block an ``OtherContent`` of its type. Unnamed fields stay in
  ``extra``; unknown message keys under :data:`ANTHROPIC_EXTRA_KEY`.

Anthropic messages have no ids: every message gets a fresh ``message_id``, and
:data:`ORIGINAL_ID_KEY` ``None`` says so (the importer gives stable ones).
Normalisations: ``is_error: false`` and a missing result content are written back
absent.

Messages from elsewhere are written as the Messages API accepts them: consecutive
messages of one side are one turn, so that the calls of one model turn (stored apart
when they came from the Responses API) are one assistant message and their results one
user message, its ``tool_result`` blocks first. What Anthropic cannot express is left
out: reasoning without a signature (or redacted data), media of a type its image and
document blocks do not take, and another format's own content types; a message left
with nothing is not written. (An export keeps all of it in
chatledger's record: :mod:`store.formats.documents`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    foreign_result,
    parsed_arguments,
    read_tagged,
    take,
    take_role,
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
    "ANTHROPIC_EXTRA_KEY",
    "ANTHROPIC_FORM_KEY",
    "ANTHROPIC_TURN_KEY",
    "SOURCE_ANTHROPIC",
    "anthropic_request",
    "from_anthropic",
    "to_anthropic",
]

SOURCE_ANTHROPIC = "anthropic"
"""The :data:`SOURCE_FORMAT_KEY` value of messages read by :func:`from_anthropic`."""

ANTHROPIC_TURN_KEY = "anthropic_continues_turn"
"""Metadata key on a message that continues the previous message's Anthropic turn."""

ANTHROPIC_FORM_KEY = "anthropic_content_form"
"""Metadata key on a turn's first message: ``content`` was a ``string`` or ``blocks``."""

ANTHROPIC_EXTRA_KEY = "anthropic_extra"
"""Metadata key holding message keys that the model does not name."""


def _other(index: int, kind: str, fields: dict[str, Any]) -> Content:
    call_id = fields.get("id") if kind.endswith("tool_use") else fields.get("tool_use_id")
    if isinstance(call_id, str) and call_id:
        pairing = "call" if kind.endswith("tool_use") else "result"
        return build(
            index, OtherContent, kind=kind, payload=fields, call_id=call_id, pairing=pairing
        )
    return build(index, OtherContent, kind=kind, payload=fields)


def _text(index: int, fields: dict[str, Any]) -> Content | None:
    text = take(fields, "text", str)
    return None if text is None else build(index, TextContent, text=text, extra=fields)


def _thinking(index: int, fields: dict[str, Any]) -> Content | None:
    text = take(fields, "thinking", str)
    if text is None:
        return None
    signature = fields.pop("signature", None)
    payload = {"signature": signature} if signature is not None else None
    return build(index, ReasoningContent, text=text, payload=payload, extra=fields)


def _redacted(index: int, fields: dict[str, Any]) -> Content | None:
    data = take(fields, "data", str)
    if data is None:
        return None
    return build(index, ReasoningContent, payload={"data": data}, extra=fields)


def _tool_use(index: int, fields: dict[str, Any]) -> Content | None:
    call_id, name = take(fields, "id", str), take(fields, "name", str)
    if not call_id or name is None:
        raise FormatError(index, "tool_use needs a string id and name")
    arguments = take(fields, "input", dict)
    return build(
        index, FunctionCallContent, call_id=call_id, name=name, arguments=arguments, extra=fields
    )


def _media(index: int, fields: dict[str, Any]) -> Content | None:
    source = fields.get("source")
    if not isinstance(source, Mapping):
        return None
    rest = {k: v for k, v in source.items() if k not in ("data", "url", "media_type")}
    media_type = source.get("media_type")
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        fields["source"] = rest
        return build(index, DataContent, data=source["data"], media_type=media_type, extra=fields)
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        fields["source"] = rest
        return build(index, UriContent, uri=source["url"], media_type=media_type, extra=fields)
    return None


_READERS: dict[str, Reader] = {
    "text": _text,
    "thinking": _thinking,
    "redacted_thinking": _redacted,
    "tool_use": _tool_use,
    "image": _media,
    "document": _media,
}


def _block(index: int, position: int, block: Any, kind: str) -> Content:
    return read_tagged(
        index,
        f"content[{position}]",
        block,
        _READERS,
        _other,
        container="an object",
        tag="block type",
        keep=lambda content: _block_to_anthropic(content, native=True, kind=kind) == block,
    )


def _result(index: int, position: int, block: Mapping[str, Any]) -> Content:
    fields = {k: v for k, v in block.items() if k != "type"}
    call_id = take(fields, "tool_use_id", str)
    if not call_id:
        raise FormatError(index, f"content[{position}]: tool_result needs a tool_use_id")
    is_error = take(fields, "is_error", bool) or False
    result = fields.pop("content", None)
    return build(
        index,
        FunctionResultContent,
        call_id=call_id,
        result=result,
        is_error=is_error,
        extra=fields,
    )


def _split_turn(index: int, blocks: list[Any]) -> list[tuple[str, list[Content]]]:
    """A user turn's blocks as (role, contents) runs: one ``tool`` per result."""
    runs: list[tuple[str, list[Content]]] = []
    for position, block in enumerate(blocks):
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            runs.append(("tool", [_result(index, position, block)]))
        elif runs and runs[-1][0] == "user":
            runs[-1][1].append(_block(index, position, block, "user"))
        else:
            runs.append(("user", [_block(index, position, block, "user")]))
    return runs


def _messages_from_item(index: int, item: Any, *, allow_custom_roles: bool) -> list[Message]:
    if not isinstance(item, Mapping):
        raise FormatError(index, f"expected a message object, got {type(item).__name__}")
    fields = dict(item)
    role = take_role(index, fields)
    content = fields.pop("content", None)
    runs: list[tuple[str, list[Content]]]
    if isinstance(content, str):
        form, runs = "string", [(role, [build(index, TextContent, text=content)])]
    elif isinstance(content, list):
        form = "blocks"
        if role == "user":
            runs = _split_turn(index, content)
        else:
            blocks = [_block(index, i, b, role) for i, b in enumerate(content)]
            runs = [(role, blocks)]
    else:
        raise FormatError(index, "content must be a string or a list of blocks")
    runs = runs or [(role, [])]
    messages = []
    for position, (run_role, contents) in enumerate(runs):
        metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_ANTHROPIC, ORIGINAL_ID_KEY: None}
        if position == 0:
            metadata[ANTHROPIC_FORM_KEY] = form
            if fields:
                metadata[ANTHROPIC_EXTRA_KEY] = fields
        else:
            metadata[ANTHROPIC_TURN_KEY] = True
        values = {"role": run_role, "contents": contents, "metadata": metadata}
        messages.append(build_message(index, values, allow_custom_roles=allow_custom_roles))
    return messages


def _system_message(system: Any) -> Message:
    if isinstance(system, str):
        contents: list[Any] = [TextContent(text=system)]
        form = "string"
    elif isinstance(system, list):
        contents = [_block(-1, i, b, "system") for i, b in enumerate(system)]
        form = "blocks"
    else:
        raise FormatError(-1, "system must be a string or a list of text blocks")
    metadata = {
        SOURCE_FORMAT_KEY: SOURCE_ANTHROPIC,
        ANTHROPIC_FORM_KEY: form,
        ORIGINAL_ID_KEY: None,
    }
    return Message(role="system", contents=contents, metadata=metadata)


def from_anthropic(
    items: Sequence[Mapping[str, Any]], *, system: Any = None, allow_custom_roles: bool = False
) -> list[Message]:
    """Read Messages API messages (and the request's ``system``, when given) into messages.

    Raises :class:`FormatError` naming the index of the first item it cannot read (-1 for
    ``system``), including a role outside the standard ones unless ``allow_custom_roles``.
    """
    messages = [] if system is None else [_system_message(system)]
    for index, item in enumerate(items):
        messages.extend(_messages_from_item(index, item, allow_custom_roles=allow_custom_roles))
    return messages


def _block_to_anthropic(content: Content, *, native: bool, kind: str = "") -> dict[str, Any]:
    extra = copied(content.extra) if native else {}
    if isinstance(content, TextContent):
        return {"type": "text", "text": content.text, **extra}
    if isinstance(content, ReasoningContent):
        payload = content.payload if isinstance(content.payload, dict) else {}
        if content.text is None and isinstance(payload.get("data"), str):
            return {"type": "redacted_thinking", "data": payload["data"], **extra}
        block: dict[str, Any] = {"type": "thinking", "thinking": content.text or ""}
        if "signature" in payload:
            block["signature"] = clone(payload["signature"])
        return {**block, **extra}
    if isinstance(content, FunctionCallContent):
        arguments = content.arguments
        if not isinstance(arguments, dict):
            arguments = _parsed(arguments)
        return {
            "type": "tool_use",
            "id": content.call_id,
            "name": content.name,
            "input": clone(arguments),
            **extra,
        }
    if isinstance(content, FunctionResultContent):
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": content.call_id}
        if content.result is not None:
            value = content.result
            result["content"] = clone(value) if native else foreign_result(value, "text")
        if content.is_error:
            result["is_error"] = True
        return {**result, **extra}
    if isinstance(content, DataContent | UriContent):
        return _media_block(content, extra, native=native)
    if isinstance(content, OtherContent):
        return {"type": content.kind, **copied(content.payload)}
    raise AssertionError(content)  # pragma: no cover - every content type is handled above


def _media_block(
    content: DataContent | UriContent, extra: dict[str, Any], *, native: bool
) -> dict[str, Any]:
    source = dict(extra.pop("source", {}))
    if isinstance(content, DataContent):
        source.update(type="base64", data=content.data)
    else:
        source.update(type="url", url=content.uri)
    if content.media_type is not None and (native or isinstance(content, DataContent)):
        source["media_type"] = content.media_type  # a URL source has none of its own
    media_type = content.media_type or ""
    kind = extra.pop("type", None) or ("image" if media_type.startswith("image/") else "document")
    return {"type": kind, "source": source, **extra}


def _parsed(arguments: str | None) -> dict[str, Any]:
    return parsed_arguments(arguments) if arguments else {}


def _role(message: Message) -> str:
    return "user" if message.role == "tool" else message.role


def _native(message: Message, out: list[dict[str, Any]]) -> None:
    blocks = [_block_to_anthropic(c, native=True) for c in message.contents]
    if message.metadata.get(ANTHROPIC_TURN_KEY) is True and out:
        previous = out[-1]
        if isinstance(previous["content"], str):
            previous["content"] = [{"type": "text", "text": previous["content"]}]
        previous["content"].extend(blocks)
        return
    written: dict[str, Any] = {"role": _role(message)}
    only = message.contents[0] if len(message.contents) == 1 else None
    if message.metadata.get(ANTHROPIC_FORM_KEY) == "string" and isinstance(only, TextContent):
        written["content"] = only.text
    else:
        written["content"] = blocks
    extra = message.metadata.get(ANTHROPIC_EXTRA_KEY)
    if isinstance(extra, dict):
        written.update(copied(extra))
    out.append(written)


_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp", "application/pdf"})
"""The media types of Anthropic's image and document blocks (base64 or by URL)."""


def _fits(content: Content) -> bool:
    """Whether Anthropic can express ``content`` of a message from elsewhere."""
    if isinstance(content, OtherContent):
        return False
    if isinstance(content, DataContent):
        return content.media_type in _MEDIA_TYPES
    if isinstance(content, UriContent):
        return content.media_type is None or content.media_type in _MEDIA_TYPES
    if isinstance(content, ReasoningContent):
        payload = content.payload if isinstance(content.payload, dict) else {}
        if content.text is None and isinstance(payload.get("data"), str):
            return True  # redacted thinking
        return isinstance(payload.get("signature"), str)
    return True


def _results_first(blocks: list[Any]) -> list[Any]:
    """A user turn's blocks with its ``tool_result`` blocks first, as Anthropic wants."""
    results: list[Any] = []
    others: list[Any] = []
    for block in blocks:
        is_result = isinstance(block, dict) and block.get("type") == "tool_result"
        (results if is_result else others).append(block)
    return results + others


def _foreign(message: Message, out: list[dict[str, Any]]) -> None:
    role = _role(message)
    kept = [c for c in message.contents if _fits(c)]
    if message.contents and not kept:
        return  # nothing Anthropic can express
    blocks = [_block_to_anthropic(c, native=False) for c in kept]
    previous = out[-1] if out else None
    if previous is not None and previous["role"] == role:
        # consecutive messages of one side (a model turn's calls, its results, then
        # text) are one Anthropic turn
        if isinstance(previous["content"], str):
            previous["content"] = [{"type": "text", "text": previous["content"]}]
        previous["content"] = _results_first([*previous["content"], *blocks])
        return
    only = kept[0] if len(kept) == 1 else None
    content: Any = only.text if isinstance(only, TextContent) else _results_first(blocks)
    out.append({"role": role, "content": content})


def to_anthropic(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Write messages as Messages API messages; system messages are left out (see
    :func:`anthropic_request`).

    Messages read by :func:`from_anthropic` come back exactly as they were read (up to
    the normalisations above). Others get the usual shapes: consecutive messages of one
    side are one turn (a tool message's results join the user turn as ``tool_result``
    blocks, first), JSON string arguments are parsed into ``input``, a result that is
    not text is written as its JSON, and content Anthropic cannot express is left out.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.metadata.get(SOURCE_FORMAT_KEY) == SOURCE_ANTHROPIC:
            _native(message, out)
        else:
            _foreign(message, out)
    return out


def anthropic_request(messages: Sequence[Message]) -> dict[str, Any]:
    """A request body's ``system`` (when there are system messages) and ``messages``."""
    body: dict[str, Any] = {}
    systems = [m for m in messages if m.role == "system"]
    if len(systems) == 1 and systems[0].metadata.get(ANTHROPIC_FORM_KEY) == "string":
        body["system"] = systems[0].text
    elif systems:
        body["system"] = [
            _block_to_anthropic(c, native=m.metadata.get(SOURCE_FORMAT_KEY) == SOURCE_ANTHROPIC)
            for m in systems
            for c in m.contents
            if isinstance(c, TextContent)
        ]
    body["messages"] = to_anthropic(messages)
    return body
