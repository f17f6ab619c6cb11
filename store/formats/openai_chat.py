"""OpenAI Chat Completions messages (the ``messages`` of a request, or a chat JSONL log).

:func:`from_openai_chat` reads them into :class:`~strategies.messages.Message` and
:func:`to_openai_chat` writes them back, so that
``to_openai_chat(from_openai_chat(items)) == items``, unknown keys included.

Where things go:

- ``role``: ``system``, ``user``, ``assistant``, ``tool``; ``developer`` and the legacy
  ``function`` are kept as the model maps them (to system and tool, with the original
  role in metadata).
- ``content``: a string is one :class:`~strategies.messages.TextContent`; a list holds
  parts (see :mod:`store.formats._openai_parts`). Whether it was a string, a list,
  ``null`` or missing is kept under :data:`OPENAI_CONTENT_FORM_KEY`.
- ``tool_calls``: one content per call, after the parts.
- A ``tool`` message with a ``tool_call_id`` holds one
  :class:`~strategies.messages.FunctionResultContent` whose ``result`` is the content
  (a string, or the list of parts).
- ``name`` is the ``author_name``; ``id``, when a non-empty string, the ``message_id``
  (otherwise one is generated and the original, ``None`` when absent, kept under
  :data:`ORIGINAL_ID_KEY`).
- ``refusal``, ``audio``, the legacy ``function_call``, any unknown key and any of the
  above holding ``null`` or an unexpected type are kept under :data:`OPENAI_EXTRA_KEY`.
  (Legacy function calls are not paired with their ``function`` results.)

Messages from elsewhere are written as the Chat Completions API accepts them: the
assistant messages of one model turn (reasoning, text and every parallel call, stored
apart when they came from the Responses API) are one assistant message with all the
calls, followed by one ``tool`` message a result (see :mod:`store.formats._turns`).
What Chat Completions cannot express is left out: reasoning, another format's own
content types, media outside user messages, calls outside assistant messages, and a
tool message's ``name``; a message left with nothing is not written. (An export keeps
all of it in chatledger's record: :mod:`store.formats.documents`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from store.formats._common import (
    SOURCE_FORMAT_KEY,
    FormatError,
    build,
    build_message,
    clone,
    copied,
    exported_role,
    foreign_result,
    message_items,
    read_id,
    shown,
    take,
    take_role,
    write_id,
)
from store.formats._openai_parts import (
    part_from_openai,
    part_to_openai,
    tool_call_from_openai,
    tool_call_to_openai,
)
from store.formats._turns import joined, turns
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
    "OPENAI_CONTENT_FORM_KEY",
    "OPENAI_EXTRA_KEY",
    "SOURCE_OPENAI_CHAT",
    "ContentForm",
    "from_openai_chat",
    "to_openai_chat",
]

SOURCE_OPENAI_CHAT = "openai_chat"
"""The :data:`SOURCE_FORMAT_KEY` value of messages read by :func:`from_openai_chat`."""

OPENAI_CONTENT_FORM_KEY = "openai_content_form"
"""Metadata key recording the shape of ``content``: ``string``, ``parts``, ``null`` or
``missing``."""

OPENAI_EXTRA_KEY = "openai_chat_extra"
"""Metadata key holding message keys that the model does not name."""

ContentForm = Literal["string", "parts", "null", "missing"]


def _content_form(index: int, fields: Mapping[str, Any]) -> ContentForm:
    if "content" not in fields:
        return "missing"
    value = fields["content"]
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "parts"
    raise FormatError(
        index, f"content must be a string, a list of parts or null, not {shown(value)}"
    )


def _read_content(index: int, fields: dict[str, Any], result_call_id: str | None) -> list[Any]:
    value = fields.pop("content", None)
    if result_call_id is not None:
        return [build(index, FunctionResultContent, call_id=result_call_id, result=value)]
    if isinstance(value, str):
        return [build(index, TextContent, text=value)]
    if isinstance(value, list):
        return [part_from_openai(index, position, part) for position, part in enumerate(value)]
    return []


def _read_tool_calls(index: int, fields: dict[str, Any]) -> list[Content]:
    calls = fields.get("tool_calls")
    if calls is None or calls == []:
        return []  # kept verbatim in the extra keys
    if not isinstance(calls, list):
        raise FormatError(index, "tool_calls must be a list")
    del fields["tool_calls"]
    return [tool_call_from_openai(index, position, call) for position, call in enumerate(calls)]


def _message_from_openai(index: int, item: Any, *, allow_custom_roles: bool) -> Message:
    if not isinstance(item, Mapping):
        raise FormatError(index, f"expected a message object, got {type(item).__name__}")
    fields = dict(item)
    role = take_role(index, fields)
    form = _content_form(index, fields)
    result_call_id = take(fields, "tool_call_id", str) if role == "tool" else None
    contents = _read_content(index, fields, result_call_id)
    contents += _read_tool_calls(index, fields)
    metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_OPENAI_CHAT}
    metadata[OPENAI_CONTENT_FORM_KEY] = form
    values: dict[str, Any] = {"role": role, "contents": contents}
    read_id(fields, metadata, values)
    author_name = take(fields, "name", str)
    if author_name is not None:
        values["author_name"] = author_name
    if fields:
        metadata[OPENAI_EXTRA_KEY] = fields
    values["metadata"] = metadata
    return build_message(index, values, allow_custom_roles=allow_custom_roles)


def from_openai_chat(
    items: Sequence[Mapping[str, Any]], *, allow_custom_roles: bool = False
) -> list[Message]:
    """Read Chat Completions messages into messages.

    Raises :class:`FormatError` naming the index of the first item it cannot read,
    including a role outside the standard ones unless ``allow_custom_roles`` is true.
    """
    return [
        _message_from_openai(index, item, allow_custom_roles=allow_custom_roles)
        for index, item in enumerate(message_items(items))
    ]


def _native_content(parts: list[dict[str, Any]], others: list[Content], form: Any) -> Any:
    if form == "string" and len(others) == 1:
        only = others[0]
        if isinstance(only, TextContent) and not only.extra:
            return only.text
    if not parts and form in ("null", "missing"):
        return None
    return parts


def _foreign_content(parts: list[dict[str, Any]], others: list[Content], calls: bool) -> Any:
    if not others:
        return None if calls else ""
    if len(others) == 1 and isinstance(others[0], TextContent):
        return others[0].text
    return parts


def _write_body(
    out: dict[str, Any], message: Message, others: list[Content], native: bool, calls: bool
) -> None:
    """Set ``content`` from the message's non-call contents."""
    parts = [part_to_openai(c, native=native) for c in others]
    if not native:
        out["content"] = _foreign_content(parts, others, calls)
        return
    form = message.metadata.get(OPENAI_CONTENT_FORM_KEY)
    content = _native_content(parts, others, form)
    if not (content is None and form == "missing"):
        out["content"] = content


def _write_result(
    out: dict[str, Any], message: Message, result: FunctionResultContent, native: bool
) -> None:
    out["tool_call_id"] = result.call_id
    if not native:
        out["content"] = foreign_result(result.result, "text")
        return
    form = message.metadata.get(OPENAI_CONTENT_FORM_KEY)
    if form != "missing":
        out["content"] = None if form == "null" else clone(result.result)


def _split(message: Message) -> tuple[list[Any], list[FunctionResultContent], list[Content]]:
    calls: list[Any] = []
    results: list[FunctionResultContent] = []
    others: list[Content] = []
    for content in message.contents:
        if isinstance(content, FunctionCallContent) or (
            isinstance(content, OtherContent) and content.kind == "tool_call"
        ):
            calls.append(content)
        elif isinstance(content, FunctionResultContent):
            results.append(content)
        else:
            others.append(content)
    return calls, results, others


def _message_to_openai(message: Message, *, with_ids: bool) -> list[dict[str, Any]]:
    native = _is_native(message)
    calls, results, others = _split(message)
    single = native or (len(results) <= 1 and not (results and others))
    out: dict[str, Any] = {"role": exported_role(message)}
    if single and results:
        _write_result(out, message, results[0], native)
    elif others or calls or not results:
        _write_body(out, message, others, native, bool(calls))
    if message.author_name is not None and (native or not (single and results)):
        out["name"] = message.author_name
    if calls:
        out["tool_calls"] = [tool_call_to_openai(c, native=native) for c in calls]
    write_id(out, message, native=native, with_ids=with_ids)
    extra = message.metadata.get(OPENAI_EXTRA_KEY)
    if native and isinstance(extra, dict):
        out.update(copied(extra))
    if single:
        return [out]
    # A message holding several results (as Agent Framework writes them) becomes one
    # ``tool`` message per result, after the message's other contents if it has any.
    written = [out] if "content" in out else []
    for result in results:
        content = foreign_result(result.result, "text")
        written.append({"role": "tool", "tool_call_id": result.call_id, "content": content})
    return written


def to_openai_chat(messages: Sequence[Message], *, with_ids: bool = False) -> list[dict[str, Any]]:
    """Write messages as Chat Completions messages.

    Messages read by :func:`from_openai_chat` come back exactly as they were read.
    Messages from elsewhere get the usual shapes: one assistant message a model turn,
    with every call, a string content for one text, a ``tool`` message per function
    result (its text, else its JSON), arguments as a JSON string; ``with_ids`` adds
    their ``message_id`` as ``id``. Content this format cannot express is left out (see
    the module).
    """
    written: list[dict[str, Any]] = []
    for run in turns(messages, _is_native):
        message = joined(run)
        kept = message if _is_native(message) else _expressible(message)
        if kept is not None:
            written.extend(_message_to_openai(kept, with_ids=with_ids))
    return written


def _is_native(message: Message) -> bool:
    return message.metadata.get(SOURCE_FORMAT_KEY) == SOURCE_OPENAI_CHAT


def _fits(role: str, content: Content) -> bool:
    """Whether Chat Completions can express ``content`` in a message of ``role``."""
    if isinstance(content, ReasoningContent | OtherContent):
        return False
    if isinstance(content, DataContent | UriContent):
        return role == "user"
    if isinstance(content, FunctionCallContent):
        return role == "assistant"
    return True


def _expressible(message: Message) -> Message | None:
    """A message from elsewhere with what Chat Completions cannot express left out;
    None when that leaves nothing of a message that held something."""
    kept = [c for c in message.contents if _fits(message.role, c)]
    if len(kept) == len(message.contents):
        return message
    return message.model_copy(update={"contents": kept}) if kept else None
