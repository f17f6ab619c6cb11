"""One reader a source format: each turns a file or database into conversations.

A reader streams what it can (JSONL lines, database rows, a data export's conversations)
and reads whole documents whole. Every problem is an
:class:`~store.errors.InvalidSource` naming the source, the line or row, and the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from store.errors import InvalidSource
from store.importing.readers import (
    adk,
    agent_framework,
    anthropic,
    chatgpt,
    claude_ai,
    claude_code,
    codex,
    jsonl,
    langchain,
    langgraph,
    open_webui,
    openai_agents,
    openai_chat,
    openai_responses,
    pydantic_ai,
    vercel_ai,
)
from store.importing.source import Conversation, Location

__all__ = ["DATABASE_FORMATS", "READERS", "Reader"]

Reader = Callable[[Location, str, str | None], Iterator[Conversation]]
"""``(where the source is, its name, table)`` to the source's conversations."""


def _file(read: Callable[[Path, str], Iterator[Conversation]]) -> Reader:
    def reader(location: Location, source: str, table: str | None) -> Iterator[Conversation]:
        if not isinstance(location, Path):
            raise InvalidSource(source, None, "a database URL, but this format reads files")
        return read(location, source)

    return reader


READERS: dict[str, Reader] = {
    "jsonl": _file(jsonl.read),
    "openai-chat": _file(openai_chat.read),
    "openai-responses": _file(openai_responses.read),
    "anthropic": _file(anthropic.read),
    "pydantic-ai": _file(pydantic_ai.read),
    "vercel-ai": _file(vercel_ai.read),
    "claude-code": _file(claude_code.read),
    "codex": _file(codex.read),
    "chatgpt": _file(chatgpt.read),
    "claude-ai": _file(claude_ai.read),
    "agent-framework": _file(agent_framework.read),
    "openai-agents": openai_agents.read,
    "langchain": langchain.read,
    "adk": adk.read,
    "open-webui": open_webui.read,
    "langgraph": langgraph.read,
}
"""Every format id with its reader."""

DATABASE_FORMATS = frozenset({"openai-agents", "langchain", "adk", "langgraph", "open-webui"})
"""The formats whose sources are (or may be) databases."""
