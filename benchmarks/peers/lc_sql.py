"""LangChain's ``SQLChatMessageHistory`` (langchain-community) on a SQLite file.

No compaction: a chain with message history reads ``.messages`` (the whole session)
before every call. The synchronous engine is used, as in LangChain's own examples.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_community.chat_message_histories import SQLChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import NullPool

from benchmarks.generator import ChatDict
from benchmarks.peers import SESSION_ID, System

__all__ = ["LangChainSystem", "to_lc_message"]


def to_lc_message(item: ChatDict) -> BaseMessage:
    """Convert one generated chat dict into a LangChain message."""
    role = item["role"]
    if role == "system":
        return SystemMessage(content=item["content"], id=item["id"])
    if role == "user":
        return HumanMessage(content=item["content"], id=item["id"])
    if role == "tool":
        return ToolMessage(
            content=item["content"], tool_call_id=item["tool_call_id"], id=item["id"]
        )
    tool_calls: list[Any] = [
        {
            "id": call["id"],
            "name": call["function"]["name"],
            "args": json.loads(call["function"]["arguments"]),
            "type": "tool_call",
        }
        for call in item.get("tool_calls") or ()
    ]
    return AIMessage(content=item.get("content") or "", tool_calls=tool_calls, id=item["id"])


class LangChainSystem(System):
    """``add_messages`` to append, ``.messages`` to read."""

    _engine: Engine
    _history: SQLChatMessageHistory

    async def open(self, *, create: bool) -> None:
        """Build the history object (it creates its table when missing)."""
        self._engine = create_engine(
            self.target.sqlalchemy_url(driver="pysqlite"), poolclass=NullPool
        )
        self._history = SQLChatMessageHistory(session_id=SESSION_ID, connection=self._engine)

    def prepare(self, items: list[ChatDict]) -> list[BaseMessage]:
        """Convert to LangChain messages."""
        return [to_lc_message(item) for item in items]

    async def load(self, native: list[BaseMessage]) -> None:
        """One ``add_messages`` call (one transaction) per batch."""
        self._history.add_messages(native)

    async def append_turn(self, native: list[BaseMessage]) -> None:
        """Store the turn."""
        self._history.add_messages(native)

    async def context(self) -> int:
        """The whole history: ``.messages``."""
        return len(self._history.messages)

    async def full_read(self) -> int:
        """``.messages``."""
        return len(self._history.messages)

    async def close(self) -> None:
        """Dispose of the engine."""
        self._engine.dispose()
