"""Converters between chat-message formats and the model in :mod:`strategies.messages`.

Each format has a pair of pure functions, list in and list out:

- Agent Framework (``Message.to_dict()`` mappings): :func:`from_agent_framework`,
  :func:`to_agent_framework`, with :func:`af_annotations` to read its compaction
  annotations;
- Anthropic Messages API messages: :func:`from_anthropic`, :func:`to_anthropic`,
  :func:`anthropic_request`;
- OpenAI Chat Completions messages: :func:`from_openai_chat`, :func:`to_openai_chat`;
- OpenAI Responses API input items: :func:`from_openai_responses`,
  :func:`to_openai_responses`;
- LangChain messages (objects or ``message_to_dict`` mappings): :func:`from_langchain`,
  :func:`to_langchain`;
- Pydantic AI messages (``ModelMessagesTypeAdapter`` JSON): :func:`from_pydantic_ai`,
  :func:`to_pydantic_ai`;
- Vercel AI SDK UI messages (``UIMessage[]`` JSON): :func:`from_vercel_ai`,
  :func:`to_vercel_ai`;
- import only, the data exports of chat services: ChatGPT's (one path through a
  conversation's tree) :func:`from_chatgpt`, Claude.ai's (a conversation's
  ``chat_messages``) :func:`from_claude_ai`, and Open WebUI's chats (one path through a
  chat's ``history``) :func:`from_open_webui`.

Reading then writing the same format gives back exactly what was read. Messages from
another format are written as the target accepts them: the calls of one model turn in
one message, followed by their results, and what the target cannot express left out
(each module says what). Input that cannot be read raises :class:`FormatError` (a
:class:`ValueError`) naming the index of the offending item. Nothing here imports a
framework: the converters work on plain mappings. :mod:`store.formats.documents` makes
one session a document of each export format, with chatledger's record of it.

The package loads a converter's module when one of its names is first used: a reader
of stored messages that needs only :data:`ORIGINAL_ID_KEY` loads no converter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from store.formats._common import (
        ATTACHMENTS_KEY,
        ORIGINAL_ID_KEY,
        SOURCE_FORMAT_KEY,
        FormatError,
    )
    from store.formats.agent_framework import (
        AF_ANNOTATIONS_KEY,
        AF_EXTRA_KEY,
        AF_PROPERTIES_KEY,
        AFAnnotations,
        af_annotations,
        from_agent_framework,
        to_agent_framework,
    )
    from store.formats.anthropic import anthropic_request, from_anthropic, to_anthropic
    from store.formats.chatgpt import from_chatgpt
    from store.formats.claude_ai import from_claude_ai
    from store.formats.langchain import (
        LANGCHAIN_EXTRA_KEY,
        LANGCHAIN_FORM_KEY,
        LANGCHAIN_TYPE_KEY,
        from_langchain,
        to_langchain,
    )
    from store.formats.open_webui import from_open_webui
    from store.formats.openai_chat import (
        OPENAI_CONTENT_FORM_KEY,
        OPENAI_EXTRA_KEY,
        from_openai_chat,
        to_openai_chat,
    )
    from store.formats.openai_responses import (
        RESPONSES_EXTRA_KEY,
        RESPONSES_FORM_KEY,
        from_openai_responses,
        to_openai_responses,
    )
    from store.formats.pydantic_ai import from_pydantic_ai, to_pydantic_ai
    from store.formats.vercel_ai import from_vercel_ai, to_vercel_ai

_MODULES: dict[str, str] = {
    "ATTACHMENTS_KEY": "store.formats._common",
    "ORIGINAL_ID_KEY": "store.formats._common",
    "SOURCE_FORMAT_KEY": "store.formats._common",
    "FormatError": "store.formats._common",
    "AF_ANNOTATIONS_KEY": "store.formats.agent_framework",
    "AF_EXTRA_KEY": "store.formats.agent_framework",
    "AF_PROPERTIES_KEY": "store.formats.agent_framework",
    "AFAnnotations": "store.formats.agent_framework",
    "af_annotations": "store.formats.agent_framework",
    "from_agent_framework": "store.formats.agent_framework",
    "to_agent_framework": "store.formats.agent_framework",
    "anthropic_request": "store.formats.anthropic",
    "from_anthropic": "store.formats.anthropic",
    "to_anthropic": "store.formats.anthropic",
    "from_chatgpt": "store.formats.chatgpt",
    "from_claude_ai": "store.formats.claude_ai",
    "LANGCHAIN_EXTRA_KEY": "store.formats.langchain",
    "LANGCHAIN_FORM_KEY": "store.formats.langchain",
    "LANGCHAIN_TYPE_KEY": "store.formats.langchain",
    "from_langchain": "store.formats.langchain",
    "to_langchain": "store.formats.langchain",
    "from_open_webui": "store.formats.open_webui",
    "OPENAI_CONTENT_FORM_KEY": "store.formats.openai_chat",
    "OPENAI_EXTRA_KEY": "store.formats.openai_chat",
    "from_openai_chat": "store.formats.openai_chat",
    "to_openai_chat": "store.formats.openai_chat",
    "RESPONSES_EXTRA_KEY": "store.formats.openai_responses",
    "RESPONSES_FORM_KEY": "store.formats.openai_responses",
    "from_openai_responses": "store.formats.openai_responses",
    "to_openai_responses": "store.formats.openai_responses",
    "from_pydantic_ai": "store.formats.pydantic_ai",
    "to_pydantic_ai": "store.formats.pydantic_ai",
    "from_vercel_ai": "store.formats.vercel_ai",
    "to_vercel_ai": "store.formats.vercel_ai",
}
"""Where each public name is defined (loaded on its first use)."""

__all__ = [
    "AF_ANNOTATIONS_KEY",
    "AF_EXTRA_KEY",
    "AF_PROPERTIES_KEY",
    "ATTACHMENTS_KEY",
    "LANGCHAIN_EXTRA_KEY",
    "LANGCHAIN_FORM_KEY",
    "LANGCHAIN_TYPE_KEY",
    "OPENAI_CONTENT_FORM_KEY",
    "OPENAI_EXTRA_KEY",
    "ORIGINAL_ID_KEY",
    "RESPONSES_EXTRA_KEY",
    "RESPONSES_FORM_KEY",
    "SOURCE_FORMAT_KEY",
    "AFAnnotations",
    "FormatError",
    "af_annotations",
    "anthropic_request",
    "from_agent_framework",
    "from_anthropic",
    "from_chatgpt",
    "from_claude_ai",
    "from_langchain",
    "from_open_webui",
    "from_openai_chat",
    "from_openai_responses",
    "from_pydantic_ai",
    "from_vercel_ai",
    "to_agent_framework",
    "to_anthropic",
    "to_langchain",
    "to_openai_chat",
    "to_openai_responses",
    "to_pydantic_ai",
    "to_vercel_ai",
]


def __getattr__(name: str) -> Any:
    """A public name, from its module (imported now, the first time)."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
