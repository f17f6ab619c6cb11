"""Deferred after-run compaction: the provider's background queue.

An after-run compaction may wait seconds on a summarizer's model. With
``compaction="deferred"`` the provider returns from ``save_turn`` as soon as the turn's
messages are stored and hands the compaction to :class:`DeferredCompactions`: a bounded
queue of sessions served by a few background tasks, one compaction at a time a session.
The optimistic apply (:mod:`store.rules.conflicts`) keeps it safe against the next
turn's appends: a plan made on a snapshot never excludes what was appended since.

A session asked for while it is queued is queued once; asked for while it is being
compacted, the task compacting it compacts it once more when done, so that the newest
turn is compacted too (a task never waits for room in the queue it serves). When the
queue is full, ``request`` waits for room (backpressure rather than unbounded memory).

:meth:`DeferredCompactions.flush` waits until everything asked for is done, for at most
its ``timeout``; :meth:`DeferredCompactions.aclose` flushes for at most its ``timeout``
(:data:`DEFAULT_CLOSE_TIMEOUT`), then cancels what is still running and stops the tasks.
Both return a :class:`FlushResult` naming the sessions left undone, and log a warning
when there are any. A session left undone loses nothing: its turns are stored, and the
after phase of its next turn compacts its whole active context, as after a crash.

A compaction that fails is logged, counted in :attr:`DeferredCompactions.failures` and
kept as a :class:`Failure` (the last :data:`KEPT_FAILURES`, without their tracebacks);
it never reaches the turn that asked for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from store.errors import InvalidInput
from store.models import CompactionEvent

__all__ = [
    "DEFAULT_CLOSE_TIMEOUT",
    "DEFAULT_MAX_PENDING",
    "DEFAULT_WORKERS",
    "KEPT_FAILURES",
    "DeferredCompactions",
    "Failure",
    "FlushResult",
]

logger = logging.getLogger("chatledger.store")

DEFAULT_MAX_PENDING = 256
"""Sessions that may wait for their compaction before ``request`` waits for room."""
DEFAULT_WORKERS = 4
"""Compactions (of different sessions) that run at the same time."""
DEFAULT_CLOSE_TIMEOUT = 30.0
"""Seconds :meth:`DeferredCompactions.aclose` waits for the compactions asked for before
it cancels those still running."""
KEPT_FAILURES = 100
"""Failed compactions kept in :attr:`DeferredCompactions.errors` (the newest ones)."""
_NAMED_IN_WARNINGS = 20
"""Sessions a warning about unfinished compactions names (it counts the others)."""

Compact = Callable[[str], Awaitable[CompactionEvent | None]]


@dataclass(frozen=True, slots=True)
class Failure:
    """A deferred compaction that raised."""

    session_id: str
    """The session whose compaction failed."""
    error: str
    """The name of the exception's type."""
    message: str
    """The exception's message."""


@dataclass(frozen=True, slots=True)
class FlushResult:
    """What a bounded wait for the deferred compactions left undone."""

    pending: tuple[str, ...] = ()
    """Sessions (sorted) whose compaction was asked for and had not finished when the wait
    ended; each is compacted by the after phase of its next turn."""

    @property
    def complete(self) -> bool:
        """Whether every compaction asked for was done."""
        return not self.pending


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
        self._errors: deque[Failure] = deque(maxlen=KEPT_FAILURES)
        self.failures = 0
        """How many compactions failed so far."""
        self.events: list[CompactionEvent] = []
        """The events of the compactions applied so far (newest last, the last 1,000)."""

    @property
    def errors(self) -> tuple[Failure, ...]:
        """The newest failed compactions, oldest first (at most :data:`KEPT_FAILURES`)."""
        return tuple(self._errors)

    def _started(self) -> asyncio.Queue[str]:
        if self._queue is None:
            self._queue = asyncio.Queue(self._max_pending)
            self._tasks = [
                asyncio.create_task(self._serve(self._queue), name=f"chatledger-compaction-{i}")
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

    async def _serve(self, queue: asyncio.Queue[str]) -> None:
        while True:
            session_id = await queue.get()
            self._queued.discard(session_id)
            self._running.add(session_id)
            try:
                await self._run(session_id)
            finally:
                self._running.discard(session_id)
                self._again.discard(session_id)
                queue.task_done()

    async def _run(self, session_id: str) -> None:
        """Compact ``session_id``, again as long as it was asked for meanwhile."""
        while True:
            self._again.discard(session_id)
            await self._compact_once(session_id)
            if session_id not in self._again:
                return

    async def _compact_once(self, session_id: str) -> None:
        try:
            event = await self._compact(session_id)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a failure belongs to no caller: counted, kept, logged
            self.failures += 1
            self._errors.append(Failure(session_id, type(error).__name__, str(error)))
            logger.warning("deferred compaction of session %r failed: %s", session_id, error)
            return
        if event is not None:
            self.events = [*self.events[-999:], event]

    @property
    def pending(self) -> int:
        """Sessions queued or being compacted."""
        return len(self._queued) + len(self._running)

    def _unfinished(self) -> FlushResult:
        return FlushResult(tuple(sorted(self._queued | self._running | self._again)))

    async def _wait(self, seconds: float | None) -> FlushResult:
        queue = self._queue
        if queue is None or not (self.pending or self._again):
            return FlushResult()
        try:
            await asyncio.wait_for(queue.join(), seconds)
        except TimeoutError:
            return self._unfinished()
        return FlushResult()

    async def flush(self, *, timeout: float | None = None) -> FlushResult:  # noqa: ASYNC109
        """Wait until every compaction asked for so far is done, for at most ``timeout``
        seconds (None: as long as they take); name the sessions left undone (they go on
        in the background)."""
        result = await self._wait(timeout)
        if not result.complete:
            _warn_unfinished("not done", result.pending, timeout)
        return result

    async def aclose(self, *, timeout: float = DEFAULT_CLOSE_TIMEOUT) -> FlushResult:  # noqa: ASYNC109
        """Wait for the compactions asked for, for at most ``timeout`` seconds, then cancel
        those still running and stop the tasks; name the sessions left undone
        (idempotent; a later :meth:`request` starts the tasks again)."""
        result = await self._wait(timeout)
        if not result.complete:
            result = self._unfinished()  # asked for meanwhile too
            _warn_unfinished("cancelled", result.pending, timeout)
        await _cancelled(self._tasks)
        if self._queue is not None:
            _emptied(self._queue)
        self._tasks = []
        self._queue = None
        self._queued.clear()
        self._running.clear()
        self._again.clear()
        return result


async def _cancelled(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait until each has stopped."""
    stopping = list(tasks)
    for task in stopping:
        task.cancel()
    await asyncio.gather(*stopping, return_exceptions=True)


def _emptied(queue: asyncio.Queue[str]) -> None:
    """Empty ``queue``, which releases the requests waiting for room in it."""
    while not queue.empty():
        queue.get_nowait()


def _warn_unfinished(state: str, sessions: tuple[str, ...], timeout: float | None) -> None:
    named = ", ".join(repr(s) for s in sessions[:_NAMED_IN_WARNINGS])
    more = len(sessions) - _NAMED_IN_WARNINGS
    others = f" and {more} more" if more > 0 else ""
    logger.warning(
        "deferred compaction of %d sessions %s after %ss (%s%s): "
        "each is compacted on its next turn",
        len(sessions),
        state,
        timeout,
        named,
        others,
    )
