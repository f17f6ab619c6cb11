"""The rule for counting the tokens of a stored message.

Counting a message (:func:`count_message_tokens`) counts what the model is sent,
under a :class:`TokenCountPolicy`:

* a fixed ``per_message_overhead`` for the framing of every message (its role and the
  chat template's delimiters), plus ``per_name_overhead`` and the name's tokens when
  the message has an ``author_name``;
* text: the text;
* reasoning: the readable text only; the opaque ``payload`` (encrypted reasoning,
  signatures) is not counted;
* function call: the name, plus the arguments as the model wrote them (a JSON string
  as is, a parsed mapping as compact JSON, see :func:`compact_json`);
* function result: a string result as is, any other JSON value as compact JSON,
  ``None`` as nothing;
* data and uri contents: a flat estimate, ``image_tokens`` for an image and
  ``file_tokens`` for anything else, whatever the size of the base64 or the URI
  (providers bill images and files by their pixels or pages, never by the length of
  their encoding);
* other contents that pair as a call or a result (hosted tools, MCP, approvals): the
  leaf values of the payload, strings as they are and other scalars as JSON, one per
  line (strings holding a ``data:`` URI count as an image or file instead); other
  contents that pair as neither (usage, annotations, citations) count 0;
* the ``extra`` dicts and message ``metadata`` are not counted: they keep fields of
  the source format, not what the model reads.

Empty text counts 0, whatever the tokenizer (the character estimator alone would say
1). Agent Framework instead counts the JSON serialization of its own message objects,
keys included (``"role"``, ``"message_id"``, ``"contents"``, ``"type"``...). Those keys
belong to a storage format the model never sees, so such a count grows with the
number of contents rather than with the context, and counts every byte of base64 of
an image. Here the storage format's keys are never counted: only the JSON a tool or
the model itself wrote (arguments, results) counts as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, JsonValue

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
from strategies.tokenizers.base import Tokenizer

__all__ = [
    "DEFAULT_POLICY",
    "TokenCountPolicy",
    "compact_json",
    "count_content_tokens",
    "count_message_tokens",
    "count_messages_tokens",
    "count_text_tokens",
    "message_texts",
]


class TokenCountPolicy(BaseModel):
    """The fixed costs added to the counted text of a message (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    per_message_overhead: int = Field(default=4, ge=0)
    """Framing tokens per message: its role and the chat template's delimiters."""
    per_name_overhead: int = Field(default=1, ge=0)
    """Tokens added, beside the name's own, when a message has an ``author_name``."""
    image_tokens: int = Field(default=765, ge=0)
    """Estimate for one image (data or uri content), whatever its encoded size."""
    file_tokens: int = Field(default=1000, ge=0)
    """Estimate for one non-image data or uri content (audio, PDF, other files)."""


DEFAULT_POLICY: Final = TokenCountPolicy()
"""The policy used when none is given."""

_IMAGE_SUFFIXES: Final = frozenset(
    {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".heic", ".heif", ".avif"}
)


def compact_json(value: JsonValue) -> str:
    """Serialize a JSON value as counted: no spaces after separators, non-ASCII kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def count_text_tokens(text: str | None, tokenizer: Tokenizer) -> int:
    """Count ``text`` with ``tokenizer``; ``None`` and the empty string count 0."""
    return tokenizer.count_tokens(text) if text else 0


def _data_uri_media_type(uri: str) -> str | None:
    if not uri.startswith("data:"):
        return None
    return uri[5:].split(",", 1)[0].split(";", 1)[0].strip().lower() or None


def _is_image(media_type: str | None, uri: str | None = None) -> bool:
    if media_type:
        return media_type.lower().startswith("image/")
    if uri is None:
        return False
    data_type = _data_uri_media_type(uri)
    if data_type is not None:
        return data_type.startswith("image/")
    path = uri.split("?", 1)[0].split("#", 1)[0].lower()
    return any(path.endswith(suffix) for suffix in _IMAGE_SUFFIXES)


def _binary_tokens(is_image: bool, policy: TokenCountPolicy) -> int:
    return policy.image_tokens if is_image else policy.file_tokens


def _payload_leaves(value: JsonValue) -> Iterator[JsonValue]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _payload_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _payload_leaves(item)
    elif value is not None:
        yield value


def _other_texts(content: OtherContent, policy: TokenCountPolicy, texts: list[str]) -> int:
    if content.pairing == "none":
        return 0
    fixed = 0
    lines: list[str] = []
    for leaf in _payload_leaves(content.payload):
        if isinstance(leaf, str) and _data_uri_media_type(leaf) is not None:
            fixed += _binary_tokens(_is_image(None, leaf), policy)
        elif isinstance(leaf, str):
            lines.append(leaf)
        else:
            lines.append(compact_json(leaf))
    _add_text("\n".join(lines), texts)
    return fixed


def _add_text(text: str | None, texts: list[str]) -> None:
    if text:  # empty text counts 0, whatever the tokenizer
        texts.append(text)


def _add_json_or_text(value: JsonValue, texts: list[str]) -> None:
    if value is not None:
        _add_text(value if isinstance(value, str) else compact_json(value), texts)


def _content_texts(content: Content, policy: TokenCountPolicy, texts: list[str]) -> int:
    """Add to ``texts`` what the model reads of ``content``; return its fixed tokens."""
    match content:
        case TextContent(text=text) | ReasoningContent(text=text):
            _add_text(text, texts)
            return 0
        case FunctionCallContent(name=name, arguments=arguments):
            _add_text(name, texts)
            _add_json_or_text(arguments, texts)
            return 0
        case FunctionResultContent(result=result):
            _add_json_or_text(result, texts)
            return 0
        case DataContent(media_type=media_type):
            return _binary_tokens(_is_image(media_type), policy)
        case UriContent(uri=uri, media_type=media_type):
            return _binary_tokens(_is_image(media_type, uri), policy)
        case OtherContent():
            return _other_texts(content, policy, texts)
    raise TypeError(f"not a message content: {type(content).__name__}")  # pragma: no cover


def message_texts(
    message: Message, *, policy: TokenCountPolicy = DEFAULT_POLICY
) -> tuple[int, list[str]]:
    """What counting ``message`` adds up: its fixed tokens, and the texts to tokenize.

    :func:`count_message_tokens` is the fixed tokens plus the count of each text; the
    texts are never empty.
    """
    fixed = policy.per_message_overhead
    texts: list[str] = []
    if message.author_name:
        fixed += policy.per_name_overhead
        texts.append(message.author_name)
    for content in message.contents:
        # the usual contents read directly; any other (or other values) as the rule says
        if type(content) is TextContent:
            _add_text(content.text, texts)
        elif type(content) is FunctionResultContent and isinstance(content.result, str):
            _add_text(content.result, texts)
        else:
            fixed += _content_texts(content, policy, texts)
    return fixed, texts


def count_content_tokens(
    content: Content, tokenizer: Tokenizer, *, policy: TokenCountPolicy = DEFAULT_POLICY
) -> int:
    """Count one content as the model sees it, without the message's framing."""
    texts: list[str] = []
    fixed = _content_texts(content, policy, texts)
    return fixed + sum(map(tokenizer.count_tokens, texts))


def count_message_tokens(
    message: Message, tokenizer: Tokenizer, *, policy: TokenCountPolicy = DEFAULT_POLICY
) -> int:
    """Count the tokens the model is sent for ``message`` (see the module docstring)."""
    fixed, texts = message_texts(message, policy=policy)
    return fixed + sum(map(tokenizer.count_tokens, texts))


def count_messages_tokens(
    messages: Iterable[Message],
    tokenizer: Tokenizer,
    *,
    policy: TokenCountPolicy = DEFAULT_POLICY,
) -> int:
    """Sum :func:`count_message_tokens` over ``messages``."""
    return sum(count_message_tokens(m, tokenizer, policy=policy) for m in messages)
