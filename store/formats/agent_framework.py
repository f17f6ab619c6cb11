"""Microsoft Agent Framework messages: the mappings of ``Message.to_dict()``.

:func:`from_agent_framework` reads them into :class:`~strategies.messages.Message` and
:func:`to_agent_framework` writes them back, so that
``to_agent_framework(from_agent_framework(items)) == items`` for every mapping that
``Message.to_dict()`` produces (with or without ``exclude_none``), unknown keys included.

Where things go:

- ``role``, ``author_name`` and the contents map to the model's fields (see
  :mod:`store.formats._af_contents` for each content type).
- ``message_id``: Agent Framework numbers messages by position (``msg_<N>``) or leaves
  them without an id; neither is stable. Such a message gets a fresh ``message_id`` and
  its original (``None`` when it had none) is kept under :data:`ORIGINAL_ID_KEY`. Any
  other id is kept as the ``message_id``.
- ``additional_properties``: the compaction annotations (:data:`COMPACTION_KEYS`) go,
  exactly as they were, under :data:`AF_ANNOTATIONS_KEY`; :func:`af_annotations` parses
  them. The other properties go under :data:`AF_PROPERTIES_KEY`.
- Any other key, and a modelled key holding ``None`` or a value of an unexpected type,
  is kept under :data:`AF_EXTRA_KEY`.

Normalisations, the same that Agent Framework's own ``from_dict``/``to_dict`` make: a
missing ``type`` is written back as ``"message"``, a missing ``contents`` as ``[]``, a
missing ``additional_properties`` as ``{}``, and a text content without text as ``""``.

Messages from elsewhere get Agent Framework's defaults: the assistant messages of one
model turn (reasoning, text and every parallel call, stored apart when they came from
the Responses API) are one message with all the calls (see
:mod:`store.formats._turns`), as Agent Framework writes a model's response. Another
format's own content types are left out (``Message.from_dict`` refuses their fields),
and a message left with nothing is not written. (An export keeps all of it in
chatledger's record: :mod:`store.formats.documents`.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from store.formats._af_contents import content_from_af, content_to_af
from store.formats._common import (
    ORIGINAL_ID_KEY,
    SOURCE_FORMAT_KEY,
    FormatError,
    build_message,
    copied,
    exported_role,
    message_items,
    shown,
    take_role,
    write_id,
)
from store.formats._turns import joined, turns
from strategies.messages import Message, OtherContent

__all__ = [
    "AF_ANNOTATIONS_KEY",
    "AF_EXTRA_KEY",
    "AF_PROPERTIES_KEY",
    "COMPACTION_KEYS",
    "SOURCE_AGENT_FRAMEWORK",
    "AFAnnotations",
    "af_annotations",
    "from_agent_framework",
    "to_agent_framework",
]

SOURCE_AGENT_FRAMEWORK = "agent_framework"
"""The :data:`SOURCE_FORMAT_KEY` value of messages read by :func:`from_agent_framework`."""

AF_ANNOTATIONS_KEY = "agent_framework_compaction"
"""Metadata key holding Agent Framework's compaction annotations, exactly as it wrote them."""

AF_PROPERTIES_KEY = "agent_framework_properties"
"""Metadata key holding the other ``additional_properties`` of the message."""

AF_EXTRA_KEY = "agent_framework_extra"
"""Metadata key holding message keys that the model does not name."""

COMPACTION_KEYS: frozenset[str] = frozenset(
    {
        "_group",
        "_excluded",
        "_exclude_reason",
        "_summary_of_message_ids",
        "_summary_of_group_ids",
        "_summarized_by_summary_id",
    }
)
"""The ``additional_properties`` keys in which Agent Framework's compaction annotates messages.

``_group`` holds the group annotation (id, kind, index, has_reasoning, token_count,
token_count_basis) and, for summaries and what they replace, the summary links.
"""

_POSITIONAL_ID = re.compile(r"^msg_\d+$")


@dataclass(frozen=True, slots=True)
class AFAnnotations:
    """Agent Framework's compaction annotations on one message, parsed.

    Message and group ids are Agent Framework's own: map them through
    :data:`ORIGINAL_ID_KEY` to find the imported messages they name.
    """

    group_id: str | None = None
    """The id of the message's group."""
    kind: str | None = None
    """The group kind (``system``, ``user``, ``assistant_text``, ``tool_call``)."""
    index: int | None = None
    """The group's position when it was annotated."""
    has_reasoning: bool | None = None
    """Whether the group holds reasoning."""
    token_count: int | None = None
    """The cached token count, when Agent Framework stored one."""
    excluded: bool = False
    """Whether compaction excluded the message."""
    exclude_reason: str | None = None
    """Why it was excluded."""
    summary_of_message_ids: tuple[str, ...] = ()
    """On a summary: the ids of the messages it replaces."""
    summary_of_group_ids: tuple[str, ...] = ()
    """On a summary: the ids of the groups it replaces."""
    summarized_by_summary_id: str | None = None
    """On a replaced message: the id of the summary that replaces it."""

    @property
    def is_summary(self) -> bool:
        """Whether the message is a summary written by compaction."""
        return bool(self.summary_of_message_ids or self.summary_of_group_ids)


def _typed(value: Any, kind: type) -> Any:
    if kind is int and isinstance(value, bool):
        return None
    return value if isinstance(value, kind) else None


def _ids(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str))


def af_annotations(message: Message) -> AFAnnotations | None:
    """Parse the compaction annotations that :func:`from_agent_framework` kept.

    Returns ``None`` when the message has none. A field of an unexpected type reads as
    absent, as Agent Framework reads it; the raw annotations stay in the metadata.
    """
    raw = message.metadata.get(AF_ANNOTATIONS_KEY)
    if not isinstance(raw, dict):
        return None
    group = raw.get("_group")
    group = group if isinstance(group, dict) else {}

    def link(key: str) -> Any:
        return group.get(key, raw.get(key))

    return AFAnnotations(
        group_id=_typed(group.get("id"), str),
        kind=_typed(group.get("kind"), str),
        index=_typed(group.get("index"), int),
        has_reasoning=_typed(group.get("has_reasoning"), bool),
        token_count=_typed(group.get("token_count"), int),
        excluded=raw.get("_excluded") is True,
        exclude_reason=_typed(raw.get("_exclude_reason"), str),
        summary_of_message_ids=_ids(link("_summary_of_message_ids")),
        summary_of_group_ids=_ids(link("_summary_of_group_ids")),
        summarized_by_summary_id=_typed(link("_summarized_by_summary_id"), str),
    )


def _read_id(fields: dict[str, Any], metadata: dict[str, Any]) -> str | None:
    """Take the message id when it is stable; otherwise record the original."""
    raw = fields.get("message_id")
    if isinstance(raw, str):
        del fields["message_id"]
        if raw and not _POSITIONAL_ID.match(raw):
            return raw
        metadata[ORIGINAL_ID_KEY] = raw
        return None
    metadata[ORIGINAL_ID_KEY] = None  # a null or odd-typed id stays in the extra keys
    return None


def _read_properties(fields: dict[str, Any], metadata: dict[str, Any]) -> None:
    properties = fields.get("additional_properties")
    if not isinstance(properties, Mapping):
        return
    del fields["additional_properties"]
    annotations = {k: v for k, v in properties.items() if k in COMPACTION_KEYS}
    others = {k: v for k, v in properties.items() if k not in COMPACTION_KEYS}
    if annotations:
        metadata[AF_ANNOTATIONS_KEY] = annotations
    if others:
        metadata[AF_PROPERTIES_KEY] = others


def _read_type(index: int, fields: dict[str, Any]) -> None:
    kind = fields.get("type")
    if kind == "message":
        del fields["type"]
    elif kind:  # Agent Framework accepts a missing or empty type, and rejects any other
        raise FormatError(index, f"not an Agent Framework message (type {shown(kind)})")


def _read_contents(index: int, fields: dict[str, Any]) -> list[Any]:
    contents = fields.get("contents")
    if contents is None:
        return []
    if not isinstance(contents, list):
        raise FormatError(index, "contents must be a list")
    del fields["contents"]
    return [content_from_af(index, position, item) for position, item in enumerate(contents)]


def _message_from_af(index: int, item: Any, *, allow_custom_roles: bool) -> Message:
    if not isinstance(item, Mapping):
        raise FormatError(index, f"expected a message mapping, got {type(item).__name__}")
    fields = dict(item)
    _read_type(index, fields)
    role = take_role(index, fields)
    metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_AGENT_FRAMEWORK}
    values: dict[str, Any] = {"role": role, "contents": _read_contents(index, fields)}
    message_id = _read_id(fields, metadata)
    if message_id is not None:
        values["message_id"] = message_id
    author_name = fields.get("author_name")
    if isinstance(author_name, str):
        values["author_name"] = fields.pop("author_name")
    _read_properties(fields, metadata)
    if fields:
        metadata[AF_EXTRA_KEY] = fields
    values["metadata"] = metadata
    return build_message(index, values, allow_custom_roles=allow_custom_roles)


def from_agent_framework(
    items: Sequence[Mapping[str, Any]], *, allow_custom_roles: bool = False
) -> list[Message]:
    """Read Agent Framework message mappings (``Message.to_dict()``) into messages.

    Raises :class:`FormatError` naming the index of the first item it cannot read,
    including a role outside the standard ones unless ``allow_custom_roles`` is true.
    """
    return [
        _message_from_af(index, item, allow_custom_roles=allow_custom_roles)
        for index, item in enumerate(message_items(items))
    ]


def _message_to_af(message: Message) -> dict[str, Any]:
    metadata = message.metadata
    native = _is_native(message)
    out: dict[str, Any] = {
        "type": "message",
        "role": exported_role(message),
        "contents": [content_to_af(c, native=native) for c in message.contents],
    }
    if message.author_name is not None:
        out["author_name"] = message.author_name
    write_id(out, message, native=native, with_ids=True, key="message_id")
    properties: dict[str, Any] = {}
    for key in (AF_PROPERTIES_KEY, AF_ANNOTATIONS_KEY):
        value = metadata.get(key)
        if isinstance(value, dict):
            properties.update(copied(value))
    out["additional_properties"] = properties
    extra = metadata.get(AF_EXTRA_KEY)
    if native and isinstance(extra, dict):
        out.update(copied(extra))
    return out


def to_agent_framework(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Write messages as Agent Framework message mappings, ready for ``Message.from_dict``.

    Messages read by :func:`from_agent_framework` come back exactly as they were read.
    Others get Agent Framework's defaults, one message a model turn; their
    ``message_id`` is written out, and another format's own content types are left out
    (see the module).
    """
    written: list[dict[str, Any]] = []
    for run in turns(messages, _is_native):
        message = joined(run)
        if not _is_native(message):
            kept = [c for c in message.contents if not isinstance(c, OtherContent)]
            if message.contents and not kept:
                continue
            message = message.model_copy(update={"contents": kept})
        written.append(_message_to_af(message))
    return written


def _is_native(message: Message) -> bool:
    return message.metadata.get(SOURCE_FORMAT_KEY) == SOURCE_AGENT_FRAMEWORK
