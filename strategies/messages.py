"""The message model: what a chat message is, independent of any framework or database.

A :class:`Message` has a ``role`` and a list of ``contents``; each content is one
variant of a discriminated union on its ``type`` tag. Every content carries an
``extra`` dict, kept verbatim, so that converters never lose a field they do not
model. :data:`MESSAGES_ADAPTER` and :data:`CONTENTS_ADAPTER` are the storage format.

Roles: ``system``, ``user``, ``assistant`` and ``tool``. ``developer`` is stored as
``system`` and ``function`` as ``tool``, with the original role kept in
``metadata["original_role"]``. Any other role is rejected with an error naming it,
unless the caller passes ``allow_custom_roles=True`` (as a keyword of the
constructor, or in the validation context).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationInfo,
    model_validator,
)

__all__ = [
    "CONTENTS_ADAPTER",
    "MESSAGES_ADAPTER",
    "ROLE_ALIASES",
    "STANDARD_ROLES",
    "Content",
    "DataContent",
    "FunctionCallContent",
    "FunctionResultContent",
    "Message",
    "OtherContent",
    "Pairing",
    "ReasoningContent",
    "TextContent",
    "UriContent",
    "new_message_id",
]

STANDARD_ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})
"""The roles a message may have without ``allow_custom_roles``."""

ROLE_ALIASES: dict[str, str] = {"developer": "system", "function": "tool"}
"""Roles accepted on input and stored as their standard equivalent."""

ORIGINAL_ROLE_KEY = "original_role"
"""Metadata key that keeps an aliased role (``developer``, ``function``)."""

Pairing = Literal["call", "result", "none"]


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone UTF-16 surrogate: valid in a Python ``str``
    (``json.loads('"\\ud800"')`` makes one) but not text: it has no UTF-8 form, so no
    database can store it."""
    if text.isascii():
        return False
    try:
        text.encode("utf-16")  # the fastest strict encoder: it refuses lone surrogates
    except UnicodeEncodeError:
        return True
    return False


def surrogate_path(value: object, path: str) -> str | None:
    """Where in ``value`` (a string, or JSON of lists and mappings) a lone surrogate is,
    as a path from ``path`` (``contents[0].result["rows"][2]``); None when there is none."""
    if isinstance(value, str):
        return path if has_lone_surrogate(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and has_lone_surrogate(key):
                return f"{path} (a key)"
            found = surrogate_path(item, f"{path}[{key!r}]") if item else None
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = surrogate_path(item, f"{path}[{index}]") if item else None
            if found is not None:
                return found
    return None


def _check_content_tags(contents: object) -> None:
    """Refuse a content whose ``type`` tag is not a string, before the discriminated
    union looks at it: pydantic-core writes an unmatched tag into its error message with
    ``str()``, and a value whose ``str()`` raises (an integer of more digits than Python
    converts) is then reported as an unraisable exception instead."""
    if not isinstance(contents, list):
        return
    for index, content in enumerate(contents):
        if isinstance(content, dict) and not isinstance(content.get("type", ""), str):
            raise ValueError(
                f"contents[{index}].type must be a string naming the content type, not "
                f"{type(content['type']).__name__}"
            )


def new_message_id() -> str:
    """Return a fresh, random message id (never derived from a position)."""
    # Not "msg_<digits>": that is the positional form Agent Framework assigns.
    return f"m-{uuid.uuid4().hex}"


class _ContentBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    extra: dict[str, JsonValue] = Field(default_factory=dict)
    """Fields of the source format that this model does not name, kept verbatim."""


class TextContent(_ContentBase):
    """Plain text the model reads or wrote."""

    type: Literal["text"] = "text"
    text: str
    """The text."""


class ReasoningContent(_ContentBase):
    """A model's reasoning: readable text and/or an opaque provider payload."""

    type: Literal["reasoning"] = "reasoning"
    text: str | None = None
    """Readable reasoning text, when the provider returns one."""
    payload: JsonValue = None
    """Opaque provider data (encrypted reasoning, signatures), passed back unchanged."""


class FunctionCallContent(_ContentBase):
    """A request by the model to call a function tool."""

    type: Literal["function_call"] = "function_call"
    call_id: str
    """Links the call to its result."""
    name: str
    """The tool's name."""
    arguments: str | dict[str, JsonValue] | None = None
    """Arguments as the model wrote them: a JSON string, or an already parsed mapping."""


class FunctionResultContent(_ContentBase):
    """The result of a function call, answering the call with the same ``call_id``."""

    type: Literal["function_result"] = "function_result"
    call_id: str
    """The ``call_id`` of the call this answers."""
    result: JsonValue = None
    """What the tool returned (text or JSON)."""
    is_error: bool = False
    """Whether the tool failed; ``result`` then holds the error."""


class DataContent(_ContentBase):
    """Inline binary data (an image, audio, a file), base64-encoded."""

    type: Literal["data"] = "data"
    data: str
    """The bytes, base64-encoded."""
    media_type: str | None = None
    """MIME type, such as ``image/png``."""


class UriContent(_ContentBase):
    """A reference to content held elsewhere (an image URL, a hosted file)."""

    type: Literal["uri"] = "uri"
    uri: str
    """Where the content is."""
    media_type: str | None = None
    """MIME type, when known."""


class OtherContent(_ContentBase):
    """Any content this model does not name, kept losslessly.

    ``kind`` is the source's own type tag and ``payload`` its fields. Hosted-tool
    calls and results, approval requests and responses keep their pairing through
    ``call_id`` and ``pairing`` so that grouping treats them like function calls.
    """

    type: Literal["other"] = "other"
    kind: str
    """The source format's type tag (for example ``mcp_server_tool_call``)."""
    payload: dict[str, JsonValue] = Field(default_factory=dict)
    """The source content's fields."""
    call_id: str | None = None
    """Pairs a hosted call with its result."""
    pairing: Pairing = "none"
    """Whether this content is a call, a result, or neither."""


Content = Annotated[
    TextContent
    | ReasoningContent
    | FunctionCallContent
    | FunctionResultContent
    | DataContent
    | UriContent
    | OtherContent,
    Field(discriminator="type"),
]
"""One content of a message, discriminated on ``type``."""


class Message(BaseModel):
    """One chat message. Immutable; ``message_id`` is generated once when absent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: str = Field(strict=True, min_length=1)
    """``system``, ``user``, ``assistant`` or ``tool`` (or a custom role, by opt-in); text,
    never coerced from another type (which would skip the check of the role)."""
    contents: list[Content] = Field(default_factory=list)
    """What the message holds, in order."""
    message_id: str = Field(default_factory=new_message_id, min_length=1)
    """Stable id, unique within a session; never derived from a position."""
    author_name: str | None = None
    """Name of the participant that wrote it, when the source has one."""
    created_at: datetime | None = None
    """When the message was written, as the source says; order never depends on it."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Free-form data kept with the message (original ids, roles, annotations)."""

    @model_validator(mode="before")
    @classmethod
    def _read_input(cls, data: Any, info: ValidationInfo) -> Any:
        """Refuse content tags that are not strings; store aliased roles as standard."""
        if not isinstance(data, dict):
            return data
        _check_content_tags(data.get("contents"))
        data = dict(data)
        allow_custom = bool(data.pop("allow_custom_roles", False))
        if isinstance(info.context, dict):
            allow_custom = allow_custom or bool(info.context.get("allow_custom_roles"))
        role = data.get("role")
        if not isinstance(role, str):
            return data
        if role in ROLE_ALIASES:
            metadata = dict(data.get("metadata") or {})
            metadata.setdefault(ORIGINAL_ROLE_KEY, role)
            data["metadata"] = metadata
            data["role"] = ROLE_ALIASES[role]
        elif role not in STANDARD_ROLES and not allow_custom:
            raise ValueError(
                f"unknown role {role!r}: expected one of system, user, assistant, tool "
                "(or developer, function); pass allow_custom_roles=True to keep it"
            )
        return data

    @model_validator(mode="after")
    def _text_is_text(self) -> Self:
        """Refuse a lone surrogate anywhere (it could be stored, never read back)."""
        where = (
            surrogate_path(self.role, "role")
            or surrogate_path(self.message_id, "message_id")
            or (surrogate_path(self.author_name, "author_name") if self.author_name else None)
            or (surrogate_path(self.metadata, "metadata") if self.metadata else None)
        )
        for index, content in enumerate(self.contents):
            if where is not None:
                break
            for name, value in content.__dict__.items():
                if value and not isinstance(value, bool | int | float):
                    where = surrogate_path(value, f"contents[{index}].{name}")
                    if where is not None:
                        break
        if where is not None:
            raise ValueError(
                f"{where} holds a lone surrogate, which is not text (it has no UTF-8 form "
                "and cannot be stored)"
            )
        return self

    @classmethod
    def text_message(cls, role: str, text: str, /, **kwargs: Any) -> Self:
        """Build a message holding one text content."""
        return cls(role=role, contents=[TextContent(text=text)], **kwargs)

    @property
    def text(self) -> str:
        """The message's text contents, joined with blank-free concatenation."""
        return "".join(c.text for c in self.contents if isinstance(c, TextContent))

    @property
    def is_custom_role(self) -> bool:
        """Whether the role is outside the four standard ones."""
        return self.role not in STANDARD_ROLES


CONTENTS_ADAPTER: TypeAdapter[list[Content]] = TypeAdapter(list[Content])
"""Storage format of a message's contents (the ``contents`` column)."""

MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
"""Storage and interchange format of whole messages."""
