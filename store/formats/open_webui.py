"""Open WebUI's chats: the messages of one path through a chat's ``history``.

:func:`from_open_webui` reads the messages of one path through a chat's
``history.messages`` (root first, each ``{"id", "role", "content", ...}``) into
:class:`~strategies.messages.Message`. Which paths a chat has is the reader's
(:mod:`store.importing.readers.open_webui`). Where things go:

- ``id`` is the message's id, ``role`` its role (``user``, ``assistant``, ``system``;
  another is refused unless custom roles are allowed), ``timestamp`` (seconds since the
  epoch) its time.
- A message without ``output`` is its ``content``: a string is one text (none when
  empty); a list of parts gives a text for each ``text`` part and an ``other`` content
  for any other part. Older releases write tool calls and reasoning into that string as
  ``<details type="tool_calls">`` / ``<details type="reasoning">`` blocks: they are kept
  as the text they are, not parsed.
- Newer releases keep what the model produced as ``output``, a list of Responses-API
  items, and ``content`` as its rendering: then ``output`` gives the contents, in order:
  a ``message`` item a text for each ``output_text`` part, a ``reasoning`` item a
  reasoning (its summary's text, else its content's; a summary of one part is not kept
  beside its text), a ``function_call`` a call
  (``call_id``, ``name``, ``arguments``), a ``function_call_output`` a result (its
  ``input_text`` parts' text, else its whole ``output``; an error when its ``status``
  or its call's is ``failed`` or ``rejected``), and any other item (Open WebUI's own
  ``open_webui:code_interpreter``...) an ``other`` content of its type. Because
  chatledger keeps a result as a ``tool`` message after its call, the message is cut at
  each result: what comes before it (id ``<id>``), the result (id ``<id>/<call_id>``),
  then what goes on after it (id ``<id>#<n>``, marked :data:`OPEN_WEBUI_CONTINUES_KEY`).
  A call without a ``call_id`` gets ``<id>:<position>``. An item's fields the content
  does not hold (``id``, ``status``...) stay in its ``extra``.
- What the contents do not hold stays in the first message's metadata, under
  :data:`OPEN_WEBUI_MESSAGE_KEY`: every field of the message but ``id``, ``role``,
  ``timestamp``, ``output``, ``content`` when it gave the contents, and ``childrenIds``
  (the tree, which the reader turns into forks, and which grows when an answer is
  regenerated). So ``model``, ``modelName``, ``files``, ``sources``, ``citations``,
  ``statusHistory``, ``usage``, ``info``, ``annotation``, ``parentId`` and any field
  of a newer release are kept as they are. The files a message carried are also listed
  under :data:`ATTACHMENTS_KEY` (name, media type, size, the file's id); their bytes are
  Open WebUI's uploads, not in the chat, and are not imported.

Nothing is written back in this format (an export of such a session in chatledger's
``jsonl`` keeps everything).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
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
    "OPEN_WEBUI_BRANCH_KEY",
    "OPEN_WEBUI_CONTINUES_KEY",
    "OPEN_WEBUI_MESSAGE_KEY",
    "SOURCE_OPEN_WEBUI",
    "from_open_webui",
    "is_open_webui_chat",
]

SOURCE_OPEN_WEBUI = "open_webui"
"""The :data:`SOURCE_FORMAT_KEY` value of messages read by :func:`from_open_webui`."""

OPEN_WEBUI_MESSAGE_KEY = "open_webui_message"
"""Metadata key on a history message's first message: its fields that the contents do
not hold (see the module docstring)."""

OPEN_WEBUI_CONTINUES_KEY = "open_webui_continues"
"""Metadata key on a message cut from a history message after its first: the history
message's id."""

OPEN_WEBUI_BRANCH_KEY = "open_webui_branch"
"""Metadata key on the first message of a branch other than the chat's current path:
``{"of": SESSION, "at": MESSAGE}``, the session it branches from and the history
message it branches at (None for a branch from another root: an edited first
question)."""

_LEFT_OUT = frozenset({"id", "role", "timestamp", "output", "childrenIds"})
"""A history message's fields that :data:`OPEN_WEBUI_MESSAGE_KEY` never keeps."""
_FAILED = frozenset({"failed", "rejected"})
"""The ``status`` values of a call or result that make its result an error."""


def is_open_webui_chat(value: Any) -> bool:
    """Whether ``value`` is one of Open WebUI's chat records (``{"id", "title", "chat":
    {"history": {"messages": {...}}}}``, what its "Export chats" writes) or a chat's body
    (``{"history": {"messages": {...}}}``)."""
    if not isinstance(value, Mapping):
        return False
    chat = value.get("chat")
    history = (chat if isinstance(chat, Mapping) else value).get("history")
    return isinstance(history, Mapping) and isinstance(history.get("messages"), Mapping)


def _time(index: int, value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FormatError(index, f"timestamp must be seconds since the epoch, not {shown(value)}")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise FormatError(index, f"timestamp {shown(value)} is out of range") from None


def _texts(parts: Any, tag: str) -> str | None:
    """The joined text of ``parts`` when every one is a ``tag`` part with text."""
    if not isinstance(parts, list) or not parts:
        return None
    texts = [p.get("text") for p in parts if isinstance(p, Mapping) and p.get("type") == tag]
    if len(texts) != len(parts) or not all(isinstance(t, str) for t in texts):
        return None
    return "".join(t for t in texts if isinstance(t, str))


class _Cutter(ResultCutter):
    """One history message cut into messages at its results (the module docstring)."""

    def __init__(self, index: int, message_id: str, role: str, base: dict[str, Any]) -> None:
        super().__init__(index, message_id, role, base, OPEN_WEBUI_CONTINUES_KEY)
        self.calls: dict[str, Mapping[str, Any]] = {}
        """The calls seen so far by call id, whose status a result's error flag reads."""

    def item(self, position: int, item: Any) -> None:
        if not isinstance(item, Mapping):
            raise FormatError(self.index, f"output[{position}] is not an object")
        fields = dict(item)
        kind = fields.pop("type", None)
        if not isinstance(kind, str) or not kind:
            raise FormatError(self.index, f"output[{position}] has no type")
        if kind == "message":
            self._message(fields)
        elif kind == "reasoning":
            self._reasoning(fields)
        elif kind == "function_call":
            self._call(position, fields)
        elif kind == "function_call_output":
            self._result(position, fields)
        else:
            self.contents.append(build(self.index, OtherContent, kind=kind, payload=fields))

    def _message(self, fields: dict[str, Any]) -> None:
        parts = fields.pop("content", None)
        made: list[Content] = []
        for part in parts if isinstance(parts, list) else []:
            rest = dict(part) if isinstance(part, Mapping) else {"part": part}
            tag = rest.pop("type", None)
            if tag == "output_text" and isinstance(rest.get("text"), str):
                made.append(build(self.index, TextContent, text=rest.pop("text"), extra=rest))
            else:
                payload = {"type": tag, **rest} if tag is not None else rest
                made.append(build(self.index, OtherContent, kind="part", payload=payload))
        if parts is not None and not isinstance(parts, list):
            fields["content"] = parts
        if made and fields:
            made[0] = made[0].model_copy(update={"extra": {**made[0].extra, "item": fields}})
        elif fields or not made:
            made.append(build(self.index, OtherContent, kind="message", payload=fields))
        self.contents.extend(made)

    def _reasoning(self, fields: dict[str, Any]) -> None:
        summary = fields.get("summary")
        text = _texts(summary, "summary_text")
        if text is not None and isinstance(summary, list) and len(summary) == 1:
            del fields["summary"]  # the text is all it held
        text = text if text is not None else _texts(fields.get("content"), "output_text")
        if text is None:
            self.contents.append(build(self.index, OtherContent, kind="reasoning", payload=fields))
        else:
            self.contents.append(build(self.index, ReasoningContent, text=text, extra=fields))

    def _call(self, position: int, fields: dict[str, Any]) -> None:
        call_id = fields.pop("call_id", None)
        if not isinstance(call_id, str) or not call_id:
            if call_id is not None:
                fields["call_id"] = call_id
            call_id = f"{self.message_id}:{position}"
        name = fields.pop("name", None)
        if not isinstance(name, str) or not name:
            raise FormatError(self.index, f"output[{position}]: a function_call needs a name")
        arguments = fields.pop("arguments", None)
        if not isinstance(arguments, str | dict):
            if arguments is not None:
                fields["arguments"] = arguments
            arguments = ""
        self.calls[call_id] = fields
        call = build(
            self.index,
            FunctionCallContent,
            call_id=call_id,
            name=name,
            arguments=arguments,
            extra=fields,
        )
        self.contents.append(call)

    def _result(self, position: int, fields: dict[str, Any]) -> None:
        call_id = fields.pop("call_id", None)
        if not isinstance(call_id, str) or not call_id:
            raise FormatError(self.index, f"output[{position}]: a result needs a call_id")
        output = fields.pop("output", None)
        text = output if isinstance(output, str) else _texts(output, "input_text")
        value: Any = text if text is not None else output
        call = self.calls.get(call_id, {})
        error = fields.get("status") in _FAILED or call.get("status") in _FAILED
        result = build(
            self.index,
            FunctionResultContent,
            call_id=call_id,
            result=value,
            is_error=error,
            extra=fields,
        )
        self.cut_at(result, call_id)


def _content(index: int, content: Any) -> list[Content]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextContent(text=content)] if content else []
    if not isinstance(content, list):
        raise FormatError(index, f"content must be a string or a list, not {shown(content)}")
    found: list[Content] = []
    for part in content:
        rest = dict(part) if isinstance(part, Mapping) else {"part": part}
        if rest.get("type") == "text" and isinstance(rest.get("text"), str):
            del rest["type"]
            found.append(build(index, TextContent, text=rest.pop("text"), extra=rest))
        else:
            kind = rest.pop("type", None)
            tag = kind if isinstance(kind, str) and kind else "part"
            found.append(build(index, OtherContent, kind=tag, payload=rest))
    return found


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _attachments(files: Any) -> list[dict[str, Any]]:
    """What the message's ``files`` say of each file (its ``file`` record where the entry
    itself does not say); a URL is a reference unless it holds the bytes (``data:``)."""
    found: list[dict[str, Any]] = []
    for entry in files if isinstance(files, list) else []:
        if not isinstance(entry, Mapping):
            continue
        record = _mapping(entry.get("file"))
        meta = _mapping(record.get("meta"))
        url = entry.get("url")
        reference = entry.get("id") or record.get("id")
        if not reference and isinstance(url, str) and not url.startswith("data:"):
            reference = url
        found.append(
            attachment(
                entry.get("name") or meta.get("name") or record.get("filename"),
                entry.get("content_type") or meta.get("content_type") or entry.get("type"),
                entry.get("size") if entry.get("size") is not None else meta.get("size"),
                reference,
            )
        )
    return found


def _messages(index: int, item: Any, custom: bool) -> list[Message]:
    if not isinstance(item, Mapping):
        raise FormatError(index, "a history message must be an object")
    message_id, role = item.get("id"), item.get("role")
    if not isinstance(message_id, str) or not message_id:
        raise FormatError(index, "a history message needs a non-empty string id")
    if not isinstance(role, str) or not role:
        raise FormatError(index, f"role must be a string, not {shown(role)}")
    output = item.get("output")
    from_output = isinstance(output, list) and bool(output)
    own = {k: v for k, v in item.items() if k not in _LEFT_OUT}
    if not from_output:
        own.pop("content", None)
    if output is not None and not from_output:
        own["output"] = output  # an empty or odd output gave nothing: kept as it is
    metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_OPEN_WEBUI, OPEN_WEBUI_MESSAGE_KEY: own}
    if attachments := _attachments(item.get("files")):
        metadata[ATTACHMENTS_KEY] = attachments
    created = _time(index, item.get("timestamp"))
    base = {"created_at": created, "metadata": {SOURCE_FORMAT_KEY: SOURCE_OPEN_WEBUI}}
    cutter = _Cutter(index, message_id, role, base)
    if isinstance(output, list) and output:
        for position, entry in enumerate(output):
            cutter.item(position, entry)
    else:
        cutter.contents.extend(_content(index, item.get("content")))
    cutter.flush(always=True)
    cutter.messages[0]["metadata"] = {**metadata, **cutter.messages[0]["metadata"]}
    return [build_message(index, fields, allow_custom_roles=custom) for fields in cutter.messages]


def from_open_webui(items: Sequence[Any], *, allow_custom_roles: bool = False) -> list[Message]:
    """Convert the history messages of one path (root first) into messages (one or more
    a history message); :class:`FormatError` names the history message that does not
    convert."""
    found: list[Message] = []
    for index, item in enumerate(items):
        found.extend(_messages(index, item, allow_custom_roles))
    return found
