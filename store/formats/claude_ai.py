"""Claude.ai's data export: the ``chat_messages`` of one conversation.

:func:`from_claude_ai` reads them into :class:`~strategies.messages.Message`. Where
things go:

- ``sender`` is the role (``human`` a user, ``assistant`` an assistant; another is kept
  as it is, so ``system`` is a system message and anything else is refused unless custom
  roles are allowed), ``uuid`` the message's id, ``created_at`` its time.
- The ``content`` blocks, in order: ``text`` a text, ``thinking`` reasoning (its
  ``thinking``; ``summaries``, ``signature`` and the rest in ``extra``), ``tool_use`` a
  :class:`~strategies.messages.FunctionCallContent` (``id``, ``name``, ``input`` the
  arguments), ``tool_result`` a :class:`~strategies.messages.FunctionResultContent`
  (``tool_use_id``, ``content`` the result, ``is_error`` the error flag), any other block
  an ``other`` content of its type (so is a ``thinking`` block without readable
  ``thinking``). A block's fields the content does not name
  (``start_timestamp``, ``stop_timestamp``, ``citations``, ``message``...) stay in its
  ``extra``. A message without blocks (older exports) is its ``text``.
- Claude.ai runs its tools (web search, artifacts) inside the assistant's turn, so one
  chat message holds calls and their results. Because chatledger keeps a result as a
  ``tool`` message after its call, a message is cut at each result: what comes before
  it (id ``uuid``), the result (id ``<uuid>/<tool_use_id>``), then what goes on after it
  (id ``<uuid>#<n>``, marked :data:`CLAUDE_AI_CONTINUES_KEY`). A call without an id gets
  ``<uuid>:<block index>``, and a result without one answers the last such call before
  it in the same message.
- The message's other fields (``attachments`` with their ``extracted_content``,
  ``files``, ``parent_message_uuid``, ``updated_at``..., and ``text`` where the blocks
  do not give it back) stay under :data:`CLAUDE_AI_MESSAGE_KEY` on its first message;
  its attachments and files are also listed under :data:`ATTACHMENTS_KEY` (name, type,
  size, the export's file id). Their bytes are not in the export and are not imported.

Nothing is written back in this format (an export of such a session in chatledger's
``jsonl`` keeps everything).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from store.formats._common import (
    ATTACHMENTS_KEY,
    SOURCE_FORMAT_KEY,
    FormatError,
    ResultCutter,
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
)

__all__ = [
    "CLAUDE_AI_CONTINUES_KEY",
    "CLAUDE_AI_MESSAGE_KEY",
    "SOURCE_CLAUDE_AI",
    "from_claude_ai",
]

SOURCE_CLAUDE_AI = "claude_ai"
"""The :data:`SOURCE_FORMAT_KEY` value of messages read by :func:`from_claude_ai`."""

CLAUDE_AI_MESSAGE_KEY = "claude_ai_message"
"""Metadata key on a chat message's first message: its fields but ``uuid``, ``sender``,
``created_at`` and ``content`` (and ``text`` when the blocks give it back)."""

CLAUDE_AI_CONTINUES_KEY = "claude_ai_continues"
"""Metadata key on a message cut from a chat message after its first: the chat
message's ``uuid``."""

_ROLES = {"human": "user"}
"""Senders whose role has another name."""


def _text(index: int, fields: dict[str, Any]) -> Content:
    text = take(fields, "text", str)
    if text is None:
        raise FormatError(
            index, f"a text block needs a string text, not {shown(fields.get('text'))}"
        )
    return build(index, TextContent, text=text, extra=fields)


def _thinking(index: int, fields: dict[str, Any]) -> Content:
    text = take(fields, "thinking", str)
    if text is None:  # no readable thinking (redacted): kept as the block it is
        return build(index, OtherContent, kind="thinking", payload=fields)
    return build(index, ReasoningContent, text=text, extra=fields)


class _Cutter(ResultCutter):
    """One chat message cut into messages at its results (see the module docstring)."""

    def __init__(self, index: int, uuid: str, role: str, base: dict[str, Any]) -> None:
        super().__init__(index, uuid, role, base, CLAUDE_AI_CONTINUES_KEY)
        self.derived: str | None = None
        """The last call given a derived id, which a result without an id answers."""

    def call(self, position: int, fields: dict[str, Any]) -> None:
        call_id = take(fields, "id", str)
        if not call_id:
            call_id = self.derived = f"{self.message_id}:{position}"
        name = take(fields, "name", str)
        if not name:
            raise FormatError(self.index, f"content[{position}]: a tool_use block needs a name")
        arguments = take(fields, "input", (dict, str))
        self.contents.append(
            build(
                self.index,
                FunctionCallContent,
                call_id=call_id,
                name=name,
                arguments=arguments,
                extra=fields,
            )
        )

    def result(self, position: int, fields: dict[str, Any]) -> None:
        call_id = take(fields, "tool_use_id", str) or self.derived
        call_id = call_id or f"{self.message_id}:{position}"
        error = take(fields, "is_error", bool)
        value = fields.pop("content", None)
        result = build(
            self.index,
            FunctionResultContent,
            call_id=call_id,
            result=value,
            is_error=bool(error),
            extra=fields,
        )
        self.cut_at(result, call_id)


def _block(cutter: _Cutter, position: int, block: Any) -> None:
    if not isinstance(block, Mapping):
        raise FormatError(cutter.index, f"content[{position}] is not an object")
    fields = {k: v for k, v in block.items() if k != "type"}
    kind = block.get("type")
    if not isinstance(kind, str) or not kind:
        raise FormatError(cutter.index, f"content[{position}] has no type")
    if kind == "text":
        cutter.contents.append(_text(cutter.index, fields))
    elif kind == "thinking":
        cutter.contents.append(_thinking(cutter.index, fields))
    elif kind == "tool_use":
        cutter.call(position, fields)
    elif kind == "tool_result":
        cutter.result(position, fields)
    else:
        cutter.contents.append(build(cutter.index, OtherContent, kind=kind, payload=fields))


def _attachments(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for entry in item.get("attachments") or []:
        if isinstance(entry, Mapping):
            found.append(
                attachment(
                    entry.get("file_name"),
                    entry.get("file_type"),
                    entry.get("file_size"),
                    entry.get("id"),
                )
            )
    for key in ("files", "files_v2"):
        for entry in item.get(key) or []:
            if isinstance(entry, Mapping):
                kind = entry.get("file_kind")
                found.append(attachment(entry.get("file_name"), kind, None, entry.get("file_uuid")))
    return found


def _texts(blocks: list[Any]) -> str:
    return "".join(
        b["text"]
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _messages(index: int, item: Any, custom: bool) -> list[Message]:
    if not isinstance(item, Mapping):
        raise FormatError(index, "a chat message must be an object")
    uuid, sender = item.get("uuid"), item.get("sender")
    if not isinstance(uuid, str) or not uuid:
        raise FormatError(index, "a chat message needs a non-empty string uuid")
    if not isinstance(sender, str) or not sender:
        raise FormatError(index, f"sender must be a string, not {shown(sender)}")
    blocks = item.get("content")
    own = {k: v for k, v in item.items() if k not in ("uuid", "sender", "created_at", "content")}
    if isinstance(blocks, list) and blocks and own.get("text") == _texts(blocks):
        del own["text"]
    metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_CLAUDE_AI, CLAUDE_AI_MESSAGE_KEY: own}
    if attachments := _attachments(item):
        metadata[ATTACHMENTS_KEY] = attachments
    base = {"created_at": item.get("created_at"), "metadata": {SOURCE_FORMAT_KEY: SOURCE_CLAUDE_AI}}
    cutter = _Cutter(index, uuid, _ROLES.get(sender, sender), base)
    if isinstance(blocks, list) and blocks:
        for position, block in enumerate(blocks):
            _block(cutter, position, block)
    elif isinstance(item.get("text"), str):
        if item["text"]:
            cutter.contents.append(TextContent(text=item["text"]))
    elif blocks is not None and not isinstance(blocks, list):
        raise FormatError(index, f"content must be a list of blocks, not {shown(blocks)}")
    cutter.flush(always=True)
    cutter.messages[0]["metadata"] = {**metadata, **cutter.messages[0]["metadata"]}
    return [build_message(index, fields, allow_custom_roles=custom) for fields in cutter.messages]


def from_claude_ai(items: Sequence[Any], *, allow_custom_roles: bool = False) -> list[Message]:
    """Convert a conversation's chat messages, in order, into messages (one or more a
    chat message); :class:`FormatError` names the chat message that does not convert."""
    found: list[Message] = []
    for index, item in enumerate(items):
        found.extend(_messages(index, item, allow_custom_roles))
    return found
