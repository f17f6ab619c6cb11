"""The OpenAI Agents SDK's ``SQLAlchemySession`` (aiosqlite or asyncpg).

It has no compaction: the runner sends the whole stored history on every call, so the
request context is a full ``get_items()``. A parallel tool call becomes one
``function_call`` item per call, as the SDK stores it.
"""

from __future__ import annotations

from typing import Any

from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from benchmarks.generator import ChatDict
from benchmarks.peers import SESSION_ID, System

__all__ = ["OpenAIAgentsSystem", "to_items"]


def to_items(item: ChatDict) -> list[dict[str, Any]]:
    """Convert one generated chat dict into Responses-API input items."""
    role = item["role"]
    if role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": item["tool_call_id"],
                "output": item["content"],
            }
        ]
    if role != "assistant":
        return [{"role": role, "content": item["content"]}]
    out: list[dict[str, Any]] = []
    if item.get("content"):
        out.append(
            {
                "type": "message",
                "id": item["id"],
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": item["content"], "annotations": []}],
            }
        )
    for call in item.get("tool_calls") or ():
        out.append(
            {
                "type": "function_call",
                "id": f"fc_{call['id']}",
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
        )
    return out


class OpenAIAgentsSystem(System):
    """``SQLAlchemySession``: append with ``add_items``, read with ``get_items``."""

    _engine: AsyncEngine
    _session: SQLAlchemySession

    async def open(self, *, create: bool) -> None:
        """Create the engine and the session (and its tables when ``create``)."""
        driver = "aiosqlite" if self.target.backend == "sqlite" else "asyncpg"
        url = self.target.sqlalchemy_url(driver=driver)
        self._engine = create_async_engine(url, poolclass=NullPool)
        self._session = SQLAlchemySession(SESSION_ID, engine=self._engine, create_tables=create)

    def prepare(self, items: list[ChatDict]) -> list[dict[str, Any]]:
        """Convert to input items."""
        return [out for item in items for out in to_items(item)]

    async def load(self, native: list[Any]) -> None:
        """One ``add_items`` call (one transaction) per batch."""
        await self._session.add_items(native)

    async def append_turn(self, native: list[Any]) -> None:
        """Store the turn's items."""
        await self._session.add_items(native)

    async def context(self) -> int:
        """The SDK sends the whole history: ``get_items()``."""
        return len(await self._session.get_items())

    async def full_read(self) -> int:
        """``get_items()`` with no limit."""
        return len(await self._session.get_items())

    async def close(self) -> None:
        """Dispose of the engine."""
        await self._engine.dispose()
