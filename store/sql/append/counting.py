"""The token counts of a large append, counted in a worker thread beside the rest of it.

Counting tokens is most of the cost of a bulk import. When the store's tokenizer is a
:class:`~strategies.tokenizers.BatchTokenizer` (tiktoken's encoder runs outside the
interpreter lock), the new messages of a large append are counted in one worker
thread, a slice at a time, as soon as the append knows which messages are new (before
they are hashed). Meanwhile the event loop's thread hashes and annotates them, and
builds and writes the rows of each slice as its counts arrive.

The counts are the same as :func:`~strategies.tokenizers.count_message_tokens` gives:
each message's fixed tokens plus the count of each of its texts
(:func:`~strategies.tokenizers.message_texts`). A message whose count the store already
holds (pending in a projection, or planned by a strategy) is left to the row builder,
which takes that count; so are the messages of a small append, where handing the work
to a thread costs more than the counting.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from store.sql.append.inserts import INSERT_CHUNK
from store.sql.append.rows import AppendContext
from strategies.messages import Message
from strategies.tokenizers import BatchTokenizer, message_texts

__all__ = ["COUNT_SLICE", "THREAD_MIN_CHARS", "BackgroundCounts", "count_in_background"]

THREAD_MIN_CHARS = 65_536
"""An append with less text than this is counted inline, message by message."""
COUNT_SLICE = INSERT_CHUNK
"""Messages counted per call into the tokenizer: the row builder's slice."""

Plan = tuple[int, list[str]] | None
"""A message's fixed tokens and texts; None when the row builder counts it."""

_executor: tuple[int, ThreadPoolExecutor] | None = None
"""The counting thread's executor, with the id of the process that started it."""
_executor_lock = threading.Lock()


def _worker() -> ThreadPoolExecutor:
    """The process's one counting thread (one: the event loop's thread needs the other
    core). A process forked after the thread started gets its own: the thread was not
    forked with it."""
    global _executor
    with _executor_lock:
        if _executor is None or _executor[0] != os.getpid():
            _executor = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="chatledger-tokens"))
        return _executor[1]


def _count(tokenizer: BatchTokenizer, plans: Sequence[Plan]) -> list[int | None]:
    """The count of each planned message (in the worker thread)."""
    texts = [text for plan in plans if plan is not None for text in plan[1]]
    counts = iter(tokenizer.count_many(texts))
    return [
        None if plan is None else plan[0] + sum(next(counts) for _ in plan[1]) for plan in plans
    ]


class BackgroundCounts:
    """The counts of an append's new messages, by slice of :data:`COUNT_SLICE`."""

    def __init__(self, slices: list[asyncio.Future[list[int | None]]]) -> None:
        self._slices = slices

    async def get(self, start: int, stop: int) -> list[int | None]:
        """The counts of messages ``start`` to ``stop`` (None: not counted here)."""
        first, last = start // COUNT_SLICE, (stop - 1) // COUNT_SLICE
        counts: list[int | None] = []
        for index in range(first, last + 1):
            counts += await self._slices[index]
        offset = first * COUNT_SLICE
        return counts[start - offset : stop - offset]

    def close(self) -> None:
        """Drop the counts not taken (an append that failed): nothing is left to report."""
        for future in self._slices:
            if not future.cancel() and not future.cancelled():
                future.exception()  # retrieved (an error is the append's to raise)


def count_in_background(ctx: AppendContext, fresh: Sequence[Message]) -> BackgroundCounts | None:
    """Start counting ``fresh`` in the worker thread; None when the append counts inline."""
    tokenizer = ctx.tokenizer
    if ctx.counter is not None and ctx.holds is None:
        return None  # a counter of its own that cannot say what it holds: it counts all
    if not isinstance(tokenizer, BatchTokenizer):
        return None
    holds, policy = ctx.holds, ctx.policy
    loop = asyncio.get_running_loop()
    slices: list[asyncio.Future[list[int | None]]] = []
    planned: list[list[Plan]] = []
    chars = 0
    for start in range(0, len(fresh), COUNT_SLICE):
        plans: list[Plan] = []
        for message in fresh[start : start + COUNT_SLICE]:
            if holds is not None and holds(message):
                plans.append(None)
                continue
            plan = message_texts(message, policy=policy)
            chars += sum(map(len, plan[1]))
            plans.append(plan)
        planned.append(plans)
        if chars >= THREAD_MIN_CHARS:  # worth the thread: start on what is planned
            worker = _worker()
            slices += [loop.run_in_executor(worker, _count, tokenizer, p) for p in planned]
            planned = []
    if not slices:
        return None
    return BackgroundCounts(slices)
