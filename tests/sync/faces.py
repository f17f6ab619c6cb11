"""An async face over a :class:`~store.SyncHistoryStore`, so that the async conformance
suite can drive the synchronous store, from the test's loop thread (a thread with a
running loop) or from worker threads (threads without one)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from store import SyncHistoryStore
from store.sql.drivers.engine import create_engine

_PLAIN = {"tenant", "tokenizer", "policy", "count_tokens"}
"""Members that are not coroutines on the async store either."""


class AsyncFace:
    """The async store's API over a synchronous store (``threaded``: each call from a
    worker thread, which has no running loop; else straight from the caller's loop)."""

    def __init__(self, sync: SyncHistoryStore, url: str, *, threaded: bool) -> None:
        self._sync = sync
        self._url = url
        self._threaded = threaded
        self._engine: AsyncEngine | None = None

    @property
    def engine(self) -> AsyncEngine:
        """An engine of the caller's loop on the same database (for raw-row helpers)."""
        if self._engine is None:
            self._engine = create_engine(self._url)
        return self._engine

    async def dispose(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()

    async def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._threaded:
            return await asyncio.to_thread(method, *args, **kwargs)
        return method(*args, **kwargs)

    async def _stream(self, iterator: Iterator[Any]) -> AsyncIterator[Any]:
        done = object()
        while (item := await self._call(next, iterator, done)) is not done:
            yield item

    def __getattr__(self, name: str) -> Any:
        member = getattr(self._sync, name)
        if name in _PLAIN:
            return member
        if name == "aiter_history":
            return lambda *args, **kwargs: self._stream(member(*args, **kwargs))

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._call(member, *args, **kwargs)

        return call
