"""The private event loop a synchronous store runs its async store on, and what it hands
back in place of async objects.

* :class:`LoopThread`: one event loop on one daemon thread; :meth:`LoopThread.run` runs a
  coroutine there and waits for it, from any thread but the loop's own, whether or not
  the calling thread has a running loop of its own; :meth:`LoopThread.arun` awaits it
  from another loop without blocking that loop; :meth:`LoopThread.close` lets the calls
  in flight finish (for at most :data:`CLOSE_TIMEOUT`), fails those still running with
  :class:`~store.errors.StoreClosed`, then releases the store and stops the loop.
* :class:`SyncView`: a :class:`~strategies.view.View` whose projection is synchronous.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from store.errors import InvalidInput, StoreClosed
from strategies.messages import Message
from strategies.view import View

__all__ = ["CLOSE_TIMEOUT", "LoopThread", "SyncView"]

T = TypeVar("T")

logger = logging.getLogger("chatledger.store")

CLOSE_TIMEOUT = 30.0
"""Seconds :meth:`LoopThread.close` (and so ``SyncHistoryStore.close``) waits for the
calls in flight before it fails those still running with
:class:`~store.errors.StoreClosed`."""
UNWIND_TIMEOUT = 5.0
"""Seconds a call cancelled by :meth:`LoopThread.close` has to give back what it holds
(a rolled-back transaction, its connection) before the loop stops regardless."""

_CLOSED = "the synchronous store was closed: open a new one"
_OWN_LOOP = (
    "a synchronous store was called from its own event loop (inside one of its "
    "calls): await the async store instead"
)

Closer = Callable[[], Coroutine[Any, Any, None]]


class LoopThread:
    """An event loop running on a daemon thread of its own, until :meth:`close` or
    :meth:`stop`.

    Every call is admitted under one lock, so that once closing has begun no call starts;
    the calls admitted before are tracked on the loop, where :meth:`close` waits for them.
    """

    def __init__(self, name: str = "chatledger-sync") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._guard = threading.Lock()
        self._closing = False
        """Set once :meth:`close` or :meth:`stop` has begun: no call is admitted after."""
        self._stopping = False
        """Set once the loop was asked to stop."""
        self._calls: set[concurrent.futures.Future[Any]] = set()
        """The admitted calls not finished yet, as their callers wait on them."""
        self._tasks: set[asyncio.Task[Any]] = set()
        """The same calls, as they run on the loop (touched on the loop's thread only)."""
        self._streams: set[AsyncIterator[Any]] = set()
        """The async iterators of :meth:`iterate` that are not finished."""
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            try:
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
                self._loop.close()
            finally:
                self._strand()

    def _strand(self) -> None:
        """Fail the calls the stopped loop left unfinished."""
        with self._guard:
            self._closing = True
            stranded = list(self._calls)
        for future in stranded:
            future.cancel()  # its caller raises StoreClosed

    @property
    def thread(self) -> threading.Thread:
        """The loop's thread (alive until :meth:`close` or :meth:`stop`)."""
        return self._thread

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop as a tracked call, unless the loop is closing
        or this is the loop's own thread."""
        with self._guard:
            if self._closing:
                coroutine.close()
                raise StoreClosed(_CLOSED)
            if threading.current_thread() is self._thread:
                coroutine.close()
                raise InvalidInput(_OWN_LOOP)
            future = asyncio.run_coroutine_threadsafe(self._tracked(coroutine), self._loop)
            self._calls.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._guard:
            self._calls.discard(future)

    async def _tracked(self, coroutine: Coroutine[Any, Any, T]) -> T:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await coroutine
        finally:
            self._tasks.discard(task)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and return its result (or raise its error);
        :class:`~store.errors.StoreClosed` when the loop closed before it finished."""
        future = self._submit(coroutine)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if not self._closing:
                raise
            raise StoreClosed(_CLOSED) from None

    async def arun(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and await its result from the caller's loop,
        which goes on meanwhile."""
        future = self._submit(coroutine)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            caller = asyncio.current_task()
            if not self._closing or (caller is not None and caller.cancelling()):
                raise  # the caller was cancelled, not the call
            raise StoreClosed(_CLOSED) from None

    def iterate(self, iterator: AsyncIterator[T]) -> Iterator[T]:
        """A plain iterator over ``iterator``, each step run on the loop."""
        step = iterator.__anext__
        with self._guard:
            self._streams.add(iterator)
        try:
            while True:
                try:
                    yield self.run(_next(step))
                except StopAsyncIteration:
                    return
        finally:
            with self._guard:
                self._streams.discard(iterator)
                closing = self._closing
            if not closing:
                _close_stream(self, iterator)

    def close(self, closer: Closer, *, timeout: float = CLOSE_TIMEOUT) -> None:
        """Refuse new calls, wait for the calls in flight for at most ``timeout`` seconds,
        fail those still running with :class:`~store.errors.StoreClosed`, close the
        unfinished iterations, await ``closer()`` on the loop, then stop it.

        Idempotent: a second call waits until the first is done.
        """
        if threading.current_thread() is self._thread:
            raise InvalidInput(_OWN_LOOP)
        with self._guard:
            first = not self._closing
            self._closing = True
        if not first:
            self._thread.join()
            return
        try:
            drained = asyncio.run_coroutine_threadsafe(self._drain(closer, timeout), self._loop)
            drained.result()
        finally:
            self.stop()

    async def _drain(self, closer: Closer, seconds: float) -> None:
        # The calls admitted before closing began were scheduled before this coroutine,
        # and the loop runs what is scheduled in order: each has entered ``_tracked``
        # (and ``_tasks``) before this line runs.
        calls = set(self._tasks)
        if calls:
            _, late = await asyncio.wait(calls, timeout=seconds)
            if late:
                logger.warning(
                    "closing a synchronous store failed %d calls still running after %ss",
                    len(late),
                    seconds,
                )
                for task in late:
                    task.cancel()
                await asyncio.wait(late, timeout=UNWIND_TIMEOUT)
        with self._guard:
            streams = list(self._streams)
            self._streams.clear()
        for stream in streams:
            await _aclosed(stream)
        await closer()

    def stop(self) -> None:
        """Stop the loop at once and wait for its thread (idempotent; from the loop's own
        thread it stops once the current callback returns); calls in flight raise
        :class:`~store.errors.StoreClosed`."""
        with self._guard:
            self._closing = True
            first, self._stopping = not self._stopping, True
        if first:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join()


def _close_stream(loop: LoopThread, iterator: AsyncIterator[Any]) -> None:
    """Close an unfinished iteration on its loop (the loop may close meanwhile)."""
    closer = getattr(iterator, "aclose", None)
    if closer is None:
        return
    try:
        loop.run(closer())
    except StoreClosed:
        return  # closing the loop closed the iteration


async def _aclosed(stream: AsyncIterator[Any]) -> None:
    """Close an unfinished iteration, so that what it holds is given back (one whose step
    is still unwinding from its cancellation is left to the loop's shutdown)."""
    closer = getattr(stream, "aclose", None)
    if closer is None:
        return
    try:
        await closer()
    except RuntimeError as error:  # "asynchronous generator is already running"
        logger.warning("closing a synchronous store left an iteration open: %s", error)


async def _next(step: Any) -> Any:
    return await step()


class SyncView:
    """A :class:`~strategies.view.View` read through a synchronous store: its attributes
    are the view's; :meth:`project` runs the projection on the store's loop."""

    def __init__(self, view: View, loop: LoopThread) -> None:
        self._view = view
        self._loop = loop

    @property
    def view(self) -> View:
        """The async view itself (for a strategy's ``plan``)."""
        return self._view

    def project(self) -> list[Message]:
        """The view's messages in projection order (see :meth:`View.project`)."""
        return self._loop.run(self._view.project())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view, name)

    def __repr__(self) -> str:
        return f"SyncView({self._view!r})"
