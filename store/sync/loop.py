"""The private event loop a synchronous store runs its async store on, and what it hands
back in place of async objects.

* :class:`LoopThread`: one event loop on one daemon thread; :meth:`LoopThread.run` runs a
  coroutine there and waits for it, from any thread but the loop's own, whether or not
  the calling thread has a running loop of its own; :meth:`LoopThread.arun` awaits it
  from another loop without blocking that loop.
* :class:`SyncView`: a :class:`~strategies.view.View` whose projection is synchronous.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

from store.errors import InvalidInput, StoreClosed
from strategies.messages import Message
from strategies.view import View

__all__ = ["LoopThread", "SyncView"]

T = TypeVar("T")


class LoopThread:
    """An event loop running on a daemon thread of its own, until :meth:`stop`."""

    def __init__(self, name: str = "chatledger-sync") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._stopped = False
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    @property
    def thread(self) -> threading.Thread:
        """The loop's thread (alive until :meth:`stop`)."""
        return self._thread

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and return its result (or raise its error)."""
        if self._stopped:
            coroutine.close()
            raise StoreClosed("the synchronous store was closed: open a new one")
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise InvalidInput(
                "a synchronous store was called from its own event loop (inside one of its "
                "calls): await the async store instead"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def arun(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and await its result from the caller's loop,
        which goes on meanwhile."""
        if self._stopped:
            coroutine.close()
            raise StoreClosed("the synchronous store was closed: open a new one")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return await asyncio.wrap_future(future)

    def iterate(self, iterator: AsyncIterator[T]) -> Iterator[T]:
        """A plain iterator over ``iterator``, each step run on the loop."""
        step = iterator.__anext__
        try:
            while True:
                try:
                    yield self.run(_next(step))
                except StopAsyncIteration:
                    return
        finally:
            closer = getattr(iterator, "aclose", None)
            if closer is not None and not self._stopped:
                self.run(closer())

    def stop(self) -> None:
        """Stop the loop and wait for its thread (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join()


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
