"""What the format converters share: the error type, metadata keys and small helpers."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from store.rules.limits import MAX_JSON_DEPTH, json_depth
from strategies.errors import ChatledgerError
from strategies.messages import ORIGINAL_ROLE_KEY, ROLE_ALIASES, Content, Message

__all__ = [
    "ATTACHMENTS_KEY",
    "ORIGINAL_ID_KEY",
    "SOURCE_FORMAT_KEY",
    "TEXT_PART_TYPES",
    "FormatError",
    "Reader",
    "ResultCutter",
    "attachment",
    "build",
    "build_message",
    "clone",
    "content_form",
    "copied",
    "describe_validation",
    "exported_role",
    "foreign_result",
    "join_data_uri",
    "message_items",
    "parsed_arguments",
    "parts_text",
    "read_id",
    "read_tagged",
    "shown",
    "split_data_uri",
    "take",
    "take_role",
    "write_id",
]

ORIGINAL_ID_KEY = "original_message_id"
"""Metadata key set when ``message_id`` was generated on import: the source's own id.

Present only when the id was generated; ``None`` means the source had no usable id.
Exporting back to the same format restores it, so round trips stay exact.
"""

SOURCE_FORMAT_KEY = "source_format"
"""Metadata key naming the format a message was imported from (``agent_framework``,
``openai_chat``). Exporters copy a content's ``extra`` fields only into the format
they came from."""

ATTACHMENTS_KEY = "attachments"
"""Metadata key listing the files a message carried in an export (ChatGPT's, Claude.ai's),
each ``{"name", "media_type", "size", "reference"}`` (:func:`attachment`): what the
export says of them, never their bytes."""

_T = TypeVar("_T")
_Listed = TypeVar("_Listed", bound=str)

_BASE64_DATA_URI = re.compile(r"^data:(?P<media_type>[^;,]*);base64,(?P<data>.*)$", re.DOTALL)


class FormatError(ChatledgerError, ValueError):
    """Input a converter cannot read. The message names the index of the offending item."""

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        """Position of the offending item in the input sequence."""
        self.problem = problem
        """What is wrong with it."""
        super().__init__(f"item {index}: {problem}")


SHOWN_LENGTH = 80
"""At most this many characters of a value are quoted in an error."""


def shown(value: object) -> str:
    """``repr(value)`` for an error message: at most :data:`SHOWN_LENGTH` characters, and
    never itself an error (the repr of an int past Python's digit limit raises)."""
    try:
        text = repr(value)
    except ValueError:
        text = f"<{type(value).__name__} too large to show>"
    return text if len(text) <= SHOWN_LENGTH else f"{text[: SHOWN_LENGTH - 3]}..."


def message_items(items: Any) -> list[Any]:
    """A converter's input as a list: :class:`FormatError` (for item 0) when it is not a
    sequence of messages at all (None, a mapping, a string, a number)."""
    if isinstance(items, str | bytes | bytearray | Mapping) or not isinstance(items, Iterable):
        raise FormatError(0, f"expected a list of messages, got {type(items).__name__}")
    return list(items)


def describe_validation(exc: ValidationError) -> str:
    """A pydantic validation error on one line: ``place: reason`` for each error."""
    parts = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{location}: {message}" if location else message)
    return "; ".join(parts)


def build(index: int, factory: Callable[..., _T], /, **fields: Any) -> _T:
    """Call ``factory(**fields)`` (a pydantic model), turning validation errors into
    :class:`FormatError` for item ``index``."""
    try:
        return factory(**fields)
    except ValidationError as exc:
        raise FormatError(index, describe_validation(exc)) from exc


def build_message(index: int, fields: dict[str, Any], *, allow_custom_roles: bool) -> Message:
    """Validate ``fields`` as a :class:`Message`, reporting failures as :class:`FormatError`."""
    try:
        return Message.model_validate(fields, context={"allow_custom_roles": allow_custom_roles})
    except ValidationError as exc:
        raise FormatError(index, describe_validation(exc)) from exc


def exported_role(message: Message) -> str:
    """The role to write out: the original alias (``developer``, ``function``) when kept."""
    original = message.metadata.get(ORIGINAL_ROLE_KEY)
    if isinstance(original, str) and ROLE_ALIASES.get(original) == message.role:
        return original
    return message.role


TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
"""The type tags of a text part in the formats' content lists."""


def parts_text(value: Any) -> str | None:
    """The text of a non-empty list of text parts of any format (:data:`TEXT_PART_TYPES`),
    joined; None for anything else."""
    if not isinstance(value, list) or not value:
        return None
    texts: list[str] = []
    for part in value:
        if not isinstance(part, Mapping) or part.get("type") not in TEXT_PART_TYPES:
            return None
        text = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def foreign_result(result: Any, text_tag: str) -> Any:
    """A function result from another format as a tool message's content in a format
    whose text parts are tagged ``text_tag``: text as it is, a list of such text parts
    (``type`` and ``text`` only) as it is, another format's text parts as their joined
    text, ``""`` for none, else its JSON."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    if isinstance(result, list) and result and all(_is_text_part(p, text_tag) for p in result):
        return clone(result)
    text = parts_text(result)
    return text if text is not None else json.dumps(result)


def _is_text_part(part: Any, tag: str) -> bool:
    return (
        isinstance(part, Mapping)
        and part.keys() == {"type", "text"}
        and part["type"] == tag
        and isinstance(part["text"], str)
    )


def split_data_uri(uri: str) -> tuple[str, str] | None:
    """Split ``data:<media type>;base64,<data>`` into its media type and data.

    Returns ``None`` for anything else (an http URL, a data URI with parameters or
    without base64), so callers keep such URIs verbatim.
    """
    match = _BASE64_DATA_URI.match(uri)
    if match is None:
        return None
    return match["media_type"], match["data"]


def join_data_uri(media_type: str, data: str) -> str:
    """The inverse of :func:`split_data_uri`."""
    return f"data:{media_type};base64,{data}"


def clone(value: _T) -> _T:
    """A deep copy of a JSON value."""
    return copy.deepcopy(value)


def copied(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy, so that output never shares state with a stored message."""
    return copy.deepcopy(dict(value))


def take(fields: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    """Remove and return ``fields[key]`` if it is an instance of ``kind``, else ``None``.

    A value of another type (``None`` included) stays in ``fields`` and so lands in the
    content's ``extra``: converters never lose it.
    """
    value = fields.get(key)
    if isinstance(value, kind):
        del fields[key]
        return value
    return None


def take_role(index: int, fields: dict[str, Any]) -> str:
    """Remove and return ``fields["role"]``: :class:`FormatError` when it is not a string."""
    role = fields.pop("role", None)
    if not isinstance(role, str):
        raise FormatError(index, "role must be a string")
    return role


def content_form(
    index: int, fields: Mapping[str, Any], listed: _Listed
) -> Literal["string", "missing"] | _Listed:
    """The shape of ``fields["content"]``: ``string``, ``listed`` (a list of ``listed``,
    such as ``parts`` or ``blocks``) or ``missing``; :class:`FormatError` for anything else."""
    if "content" not in fields:
        return "missing"
    value = fields["content"]
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return listed
    raise FormatError(index, f"content must be a string or a list of {listed}, not {shown(value)}")


def read_id(fields: dict[str, Any], metadata: dict[str, Any], values: dict[str, Any]) -> None:
    """Take a non-empty string ``id`` from ``fields`` as the ``message_id`` of ``values``.

    Otherwise the message gets a generated id and ``metadata`` keeps the original
    (``""`` or ``None``) under :data:`ORIGINAL_ID_KEY`; a null or odd-typed ``id`` stays
    in ``fields``, so in the extra keys.
    """
    raw = take(fields, "id", str)
    if raw:
        values["message_id"] = raw
    else:
        metadata[ORIGINAL_ID_KEY] = raw


def write_id(
    out: dict[str, Any], message: Message, *, native: bool, with_ids: bool, key: str = "id"
) -> None:
    """Write the message id to ``out[key]``.

    A message read from this format (``native``) gets its original id back, or none when
    it had none; another gets its ``message_id`` when ``with_ids``.
    """
    metadata = message.metadata
    if native and ORIGINAL_ID_KEY in metadata:
        if metadata[ORIGINAL_ID_KEY] is not None:
            out[key] = metadata[ORIGINAL_ID_KEY]
    elif native or with_ids:
        out[key] = message.message_id


Reader = Callable[[int, dict[str, Any]], Content | None]
"""Reads one content's fields (its ``type`` removed); None when it is not this model's."""


def read_tagged(
    index: int,
    where: str,
    item: Any,
    readers: Mapping[str, Reader],
    fallback: Callable[[int, str, dict[str, Any]], Content],
    *,
    container: str,
    tag: str,
    keep: Callable[[Content], bool] | None = None,
) -> Content:
    """Convert one ``type``-tagged content at ``where`` of item ``index``.

    The reader registered for its tag converts it; when there is none, when it declines,
    or when ``keep`` rejects what it made, ``fallback`` keeps the content losslessly.
    Errors name the item and ``where``.
    """
    if not isinstance(item, Mapping):
        raise FormatError(index, f"{where} is not {container}")
    kind = item.get("type")
    if not isinstance(kind, str) or not kind:
        raise FormatError(index, f"{where} has no {tag}")
    fields = {key: value for key, value in item.items() if key != "type"}
    reader = readers.get(kind)
    try:
        content = reader(index, dict(fields)) if reader is not None else None
        if content is not None and (keep is None or keep(content)):
            return content
        return fallback(index, kind, fields)
    except FormatError as exc:
        raise FormatError(index, f"{where}: {exc.problem}") from exc


def parsed_arguments(text: str) -> dict[str, Any]:
    """Call arguments kept as JSON text, as the object a format wants: the object the
    text holds; ``{"input": value}`` for JSON that is not an object; ``{"input": text}``
    for text that is not JSON or nests deeper than any store keeps (``MAX_JSON_DEPTH``,
    which no reader or writer needs to recurse through)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {"input": text}
    if json_depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


def attachment(name: Any, media_type: Any, size: Any, reference: Any) -> dict[str, Any]:
    """One entry of :data:`ATTACHMENTS_KEY`: the file's name, media type (or the type the
    export names), size in bytes and the export's own reference to it (a file id or
    asset pointer), each None when the export does not say (or says it otherwise)."""

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) and value else None

    whole = size if isinstance(size, int) and not isinstance(size, bool) else None
    return {
        "name": text(name),
        "media_type": text(media_type),
        "size": whole,
        "reference": text(reference),
    }


class ResultCutter:
    """One source message whose tool results stand inside it (Claude.ai's, Open
    WebUI's), cut into messages at each result, since chatledger keeps a result as a
    ``tool`` message: the contents before the first result keep the source message's id,
    each result is ``ID/CALL_ID``, and the contents after a result ``ID#N``; every
    message after the first names the source message under ``continues_key``.

    A format's cutter adds its contents to :attr:`contents` and calls :meth:`cut_at`
    with each result; :meth:`flush` at the end (``always``: one message even when the
    source message held nothing)."""

    def __init__(
        self, index: int, message_id: str, role: str, base: dict[str, Any], continues_key: str
    ) -> None:
        self.index = index
        self.message_id = message_id
        self.role = role
        self.base = base
        """What every message cut from it shares (time, format, metadata)."""
        self.continues_key = continues_key
        self.messages: list[dict[str, Any]] = []
        self.contents: list[Content] = []

    def _emit(self, role: str, contents: list[Content], message_id: str) -> None:
        metadata = dict(self.base["metadata"])
        if self.messages:
            metadata[self.continues_key] = self.message_id
        self.messages.append(
            {
                **self.base,
                "role": role,
                "contents": contents,
                "message_id": message_id,
                "metadata": metadata,
            }
        )

    def flush(self, *, always: bool = False) -> None:
        """The contents gathered so far as a message of the source message's role."""
        if self.contents or (always and not self.messages):
            number = len(self.messages)
            own = f"{self.message_id}#{number}" if number else self.message_id
            self._emit(self.role, self.contents, own)
            self.contents = []

    def cut_at(self, result: Content, call_id: str) -> None:
        """What came before, then ``result`` as a ``tool`` message of its own."""
        self.flush()
        self._emit("tool", [result], f"{self.message_id}/{call_id}")
