"""Deferred after-run compaction: the provider's background queue.

An after-run compaction may wait seconds on a summarizer's model. With
``compaction="deferred"`` the provider returns from ``save_turn`` as soon as the turn's
messages are stored and hands the compaction to :class:`DeferredCompactions`: a bounded
queue of sessions served by a few background tasks, one compaction at a time a session.
The optimistic apply (:mod:`store.rules.conflicts`) keeps it safe against the next
turn's appends: a plan made on a snapshot never excludes what was appended since.

A session asked for while it is queued is queued once; asked for while it is being
compacted, it is queued again, so that the newest turn is compacted too. When the queue
is full, ``request`` waits for room (backpressure rather than unbounded memory).
:meth:`DeferredCompactions.flush` waits until everything asked for is done;
:meth:`DeferredCompactions.aclose` flushes and stops the tasks. A compaction that fails
is logged and kept in :attr:`DeferredCompactions.errors`; it never reaches the turn
that asked for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from store.errors import InvalidInput
from store.models import CompactionEvent

__all__ = ["DEFAULT_MAX_PENDING", "DEFAULT_WORKERS", "DeferredCompactions"]

logger = logging.getLogger("chatledger.store")

DEFAULT_MAX_PENDING = 256
"""Sessions that may wait for their compaction before ``request`` waits for room."""
DEFAULT_WORKERS = 4
"""Compactions (of different sessions) that run at the same time."""

Compact = Callable[[str], Awaitable[CompactionEvent | None]]


class DeferredCompactions:
    """Runs ``compact(session_id)`` in the background, once at a time a session."""

    def __init__(
        self,
        compact: Compact,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        workers: int = DEFAULT_WORKERS,
    ) -> None:
        if max_pending < 1 or workers < 1:
            raise InvalidInput("max_pending and workers must be at least 1")
        self._compact = compact
        self._max_pending = max_pending
        self._workers = workers
        self._queue: asyncio.Queue[str] | None = None
        self._queued: set[str] = set()
        self._running: set[str] = set()
        self._again: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self.errors: list[tuple[str, BaseException]] = []
        """Each failed compaction: the session, and what it raised."""
        self.events: list[CompactionEvent] = []
        """The events of the compactions applied so far (newest last, the last 1,000)."""

    def _started(self) -> asyncio.Queue[str]:
        if self._queue is None:
            self._queue = asyncio.Queue(self._max_pending)
            self._tasks = [
                asyncio.create_task(self._serve(), name=f"chatledger-compaction-{i}")
                for i in range(self._workers)
            ]
        return self._queue

    async def request(self, session_id: str) -> None:
        """Ask for ``session_id``'s after-run compaction; returns once it is queued."""
        queue = self._started()
        if session_id in self._queued:
            return
        if session_id in self._running:
            self._again.add(session_id)
            return
        self._queued.add(session_id)
        await queue.put(session_id)

    async def _serve(self) -> None:
        assert self._queue is not None
        while True:
            session_id = await self._queue.get()
            self._queued.discard(session_id)
            self._running.add(session_id)
            try:
                event = await self._compact(session_id)
                if event is not None:
                    self.events = [*self.events[-999:], event]
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a failure belongs to no caller: kept, and logged
                self.errors.append((session_id, error))
                logger.warning("deferred compaction of session %r failed: %s", session_id, error)
            finally:
                self._running.discard(session_id)
                self._queue.task_done()
            if session_id in self._again:
                self._again.discard(session_id)
                await self.request(session_id)

    @property
    def pending(self) -> int:
        """Sessions queued or being compacted."""
        return len(self._queued) + len(self._running)

    async def flush(self) -> None:
        """Wait until every compaction asked for so far (and those they queued) is done."""
        while self._queue is not None and (self.pending or self._again):
            await self._queue.join()

    async def aclose(self) -> None:
        """Flush, then stop the background tasks (idempotent)."""
        await self.flush()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks = []
        self._queue = None
