"""ChatGPT's data export: the messages of one path through a conversation's tree.

:func:`from_chatgpt` reads the nodes of one path through a conversation's ``mapping``
(root first, each ``{"id", "message", ...}``) into :class:`~strategies.messages.Message`,
one message a node. Which paths a conversation has and which nodes they leave out is
the reader's (:mod:`store.importing.readers.chatgpt`). Where things go:

- The node's id is the message's id; ``author.role`` its role (``system``, ``user``,
  ``assistant``, ``tool``; another is refused unless custom roles are allowed),
  ``author.name`` its author name, ``create_time`` (seconds since the epoch) its time.
- The content, by its ``content_type``: ``text``, each part a text; ``multimodal_text``,
  each string part a text, a part with an ``asset_pointer`` (an image, a recording) a
  URI content (the pointer; the part's other fields in ``extra``), an
  ``audio_transcription`` part a text; ``code`` and ``execution_output`` their text;
  ``thoughts`` one reasoning a thought; any other type (``reasoning_recap``,
  ``user_editable_context``, ``tether_quote``...) an ``other`` content of that type
  holding its fields.
- Tool use has no call ids, so calls and results pair by adjacency: an assistant message
  whose ``recipient`` is not ``all`` calls the tool it names (``call_id`` its node id,
  the arguments the text it wrote), and the tool message right after it is its result
  (``call_id`` the call's node id). A tool message that follows no call answers none: its
  result's ``call_id`` is its own node id, and it is imported as an orphan. A result's
  value is its text (``execution_output``, ``system_error``, ``text`` of one part), else
  its whole content; it is an error for ``system_error``, and for a code run whose
  ``metadata.aggregate_result.status`` is not ``success``.
- What the contents do not hold stays in the metadata: the message's own fields
  (``author``, ``status``, ``recipient``, ``weight``, ``end_turn``, ``channel``,
  ChatGPT's ``metadata``...) under :data:`CHATGPT_MESSAGE_KEY`, the content's type and
  other fields under :data:`CHATGPT_CONTENT_KEY`. The files a message carried
  (``metadata.attachments``) are also listed under :data:`ATTACHMENTS_KEY` (name, media
  type, size, the export's file id); their bytes are not in ``conversations.json`` and
  are not imported.

Nothing is written back in this format (an export of such a session in chatledger's
``jsonl`` keeps everything).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from store.formats._common import (
    ATTACHMENTS_KEY,
    SOURCE_FORMAT_KEY,
    FormatError,
    attachment,
    build,
    build_message,
    shown,
    take,
)
from strategies.messages import (
    Content,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)

__all__ = [
    "CHATGPT_BRANCH_KEY",
    "CHATGPT_CONTENT_KEY",
    "CHATGPT_MESSAGE_KEY",
    "SOURCE_CHATGPT",
    "from_chatgpt",
    "is_call",
]

SOURCE_CHATGPT = "chatgpt"
"""The :data:`SOURCE_FORMAT_KEY` value of messages read by :func:`from_chatgpt`."""

CHATGPT_MESSAGE_KEY = "chatgpt_message"
"""Metadata key: the export message's own fields, but for its ``id``, ``content`` and
``create_time`` (which the message holds)."""

CHATGPT_CONTENT_KEY = "chatgpt_content"
"""Metadata key: the content's ``content_type`` (when not ``text``) and the fields its
contents do not hold (a code cell's ``language``, thoughts' ``source_analysis_msg_id``)."""

CHATGPT_BRANCH_KEY = "chatgpt_branch"
"""Metadata key on the first message of a branch other than the conversation's current
path: ``{"of": SESSION, "at": NODE}``, the session it branches from and the node it
branches at (None for a branch from another root)."""

_NO_TOOL = ("all", None)
"""The ``recipient`` values of a message addressed to no tool."""
_TEXT_RESULTS = frozenset({"execution_output", "system_error"})
"""Content types whose ``text`` is a tool's result."""


def is_call(message: Mapping[str, Any]) -> bool:
    """Whether an export message calls a tool: the assistant addressing a recipient."""
    author = message.get("author")
    role = author.get("role") if isinstance(author, Mapping) else None
    return role == "assistant" and message.get("recipient") not in _NO_TOOL


def _time(index: int, value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FormatError(index, f"create_time must be seconds since the epoch, not {shown(value)}")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise FormatError(index, f"create_time {shown(value)} is out of range") from None


# Reading: the contents of a message's content.


def _part(index: int, position: int, part: Any) -> Content:
    if isinstance(part, str):
        return TextContent(text=part)
    if not isinstance(part, Mapping):
        raise FormatError(index, f"content.parts[{position}] is neither text nor an object")
    fields = dict(part)
    pointer = take(fields, "asset_pointer", str)
    if pointer:
        return build(index, UriContent, uri=pointer, extra=fields)
    kind = fields.get("content_type")
    if kind == "audio_transcription" and isinstance(fields.get("text"), str):
        return build(index, TextContent, text=fields.pop("text"), extra=fields)
    if pointer is not None:
        fields["asset_pointer"] = pointer  # an empty pointer points nowhere: kept as it is
    tag = kind if isinstance(kind, str) and kind else "part"
    return build(index, OtherContent, kind=tag, payload=fields)


def _parts(index: int, fields: dict[str, Any]) -> list[Content]:
    parts = take(fields, "parts", list)
    if parts is None:
        raise FormatError(index, f"content.parts must be a list, not {shown(fields.get('parts'))}")
    return [_part(index, position, part) for position, part in enumerate(parts)]


def _text(index: int, fields: dict[str, Any]) -> list[Content]:
    text = take(fields, "text", str)
    if text is None:
        raise FormatError(index, f"content.text must be a string, not {shown(fields.get('text'))}")
    return [TextContent(text=text)]


def _thoughts(index: int, fields: dict[str, Any]) -> list[Content]:
    thoughts = take(fields, "thoughts", list)
    if thoughts is None:
        raise FormatError(index, "content.thoughts must be a list")
    found: list[Content] = []
    for thought in thoughts:
        if isinstance(thought, Mapping) and isinstance(thought.get("content"), str):
            rest = {k: v for k, v in thought.items() if k != "content"}
            found.append(build(index, ReasoningContent, text=thought["content"], extra=rest))
        else:
            found.append(build(index, OtherContent, kind="thought", payload={"thought": thought}))
    return found


_CONTENTS: dict[str, Callable[[int, dict[str, Any]], list[Content]]] = {
    "text": _parts,
    "multimodal_text": _parts,
    "code": _text,
    "execution_output": _text,
    "thoughts": _thoughts,
}


def _content_fields(index: int, message: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, Mapping):
        raise FormatError(index, f"content must be an object, not {shown(content)}")
    fields = dict(content)
    kind = fields.pop("content_type", None)
    if not isinstance(kind, str) or not kind:
        raise FormatError(index, "content has no content_type")
    return kind, fields


def _leftover(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """What :data:`CHATGPT_CONTENT_KEY` keeps: the type (unless text) and unread fields."""
    return fields if kind == "text" else {"content_type": kind, **fields}


def _contents(index: int, message: Mapping[str, Any]) -> tuple[list[Content], dict[str, Any]]:
    kind, fields = _content_fields(index, message)
    reader = _CONTENTS.get(kind)
    if reader is None:
        return [build(index, OtherContent, kind=kind, payload=fields)], {"content_type": kind}
    return reader(index, fields), _leftover(kind, fields)


def _call(index: int, node_id: str, message: Mapping[str, Any]) -> tuple[Content, dict[str, Any]]:
    """A message to a tool as one call: its arguments the text it wrote (code, text
    parts), else its whole content."""
    kind, fields = _content_fields(index, message)
    arguments: str | dict[str, Any]
    parts = fields.get("parts")
    if kind == "code" and isinstance(fields.get("text"), str):
        arguments = fields.pop("text")
    elif kind == "text" and isinstance(parts, list) and all(isinstance(p, str) for p in parts):
        arguments = "".join(fields.pop("parts"))
    else:
        arguments, fields = {"content_type": kind, **fields}, {}
        kind = "text"  # nothing left to keep apart: the arguments hold it all
    call = build(
        index,
        FunctionCallContent,
        call_id=node_id,
        name=str(message["recipient"]),
        arguments=arguments,
    )
    return call, _leftover(kind, fields)


def _failed(message: Mapping[str, Any], kind: str) -> bool:
    if kind == "system_error":
        return True
    metadata = message.get("metadata")
    run = metadata.get("aggregate_result") if isinstance(metadata, Mapping) else None
    status = run.get("status") if isinstance(run, Mapping) else None
    return status is not None and status != "success"


def _result(index: int, call_id: str, message: Mapping[str, Any]) -> tuple[Content, dict[str, Any]]:
    kind, fields = _content_fields(index, message)
    error = _failed(message, kind)
    parts = fields.get("parts")
    value: Any
    if kind in _TEXT_RESULTS and isinstance(fields.get("text"), str):
        value = fields.pop("text")
    elif (
        kind == "text" and isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], str)
    ):
        value = fields.pop("parts")[0]
    else:
        value, fields, kind = {"content_type": kind, **fields}, {}, "text"
    result = build(index, FunctionResultContent, call_id=call_id, result=value, is_error=error)
    return result, _leftover(kind, fields)


# Reading: the message around the contents.


def _attachments(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    metadata = message.get("metadata")
    listed = metadata.get("attachments") if isinstance(metadata, Mapping) else None
    if not isinstance(listed, list):
        return []
    return [
        attachment(a.get("name"), a.get("mime_type"), a.get("size"), a.get("id"))
        for a in listed
        if isinstance(a, Mapping)
    ]


def _node(index: int, node: Any) -> tuple[str, Mapping[str, Any]]:
    if not isinstance(node, Mapping):
        raise FormatError(index, "a node must be an object")
    node_id, message = node.get("id"), node.get("message")
    if not isinstance(node_id, str) or not node_id:
        raise FormatError(index, "a node needs a non-empty string id")
    if not isinstance(message, Mapping):
        raise FormatError(index, f"node {node_id} has no message")
    return node_id, message


def _author(index: int, message: Mapping[str, Any]) -> tuple[Any, str | None]:
    author = message.get("author")
    if not isinstance(author, Mapping):
        raise FormatError(index, f"author must be an object, not {shown(author)}")
    name = author.get("name")
    return author.get("role"), name if isinstance(name, str) and name else None


def _message(
    index: int, node_id: str, message: Mapping[str, Any], pending: str | None, custom: bool
) -> Message:
    role, name = _author(index, message)
    contents: list[Content]
    if role == "tool":
        result, rest = _result(index, pending or node_id, message)
        contents = [result]
    elif is_call(message):
        call, rest = _call(index, node_id, message)
        contents = [call]
    else:
        contents, rest = _contents(index, message)
    own = {k: v for k, v in message.items() if k not in ("content", "create_time")}
    if own.get("id") == node_id:
        del own["id"]
    metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_CHATGPT, CHATGPT_MESSAGE_KEY: own}
    if rest:
        metadata[CHATGPT_CONTENT_KEY] = rest
    if attachments := _attachments(message):
        metadata[ATTACHMENTS_KEY] = attachments
    values = {
        "role": role,
        "contents": contents,
        "message_id": node_id,
        "author_name": name,
        "created_at": _time(index, message.get("create_time")),
        "metadata": metadata,
    }
    return build_message(index, values, allow_custom_roles=custom)


def from_chatgpt(items: Sequence[Any], *, allow_custom_roles: bool = False) -> list[Message]:
    """Convert the nodes of one path (root first, the nodes without a message left out)
    into messages, one a node; :class:`FormatError` names the node that does not
    convert."""
    found: list[Message] = []
    pending: str | None = None
    for index, item in enumerate(items):
        node_id, message = _node(index, item)
        found.append(_message(index, node_id, message, pending, allow_custom_roles))
        pending = node_id if is_call(message) else None
    return found
