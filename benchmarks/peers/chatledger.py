"""chatledger's own store, written against the API expected from issues 4 to 6.

Expected surface::

    async with store.HistoryStore.open(url) as s:
        await s.append(session_id, messages)
        await s.compact(session_id, strategy, phase="after_run")
        await s.context(session_id)

with ``strategies.ContextWindowCompactionStrategy(max_context_window_tokens=128_000,
max_output_tokens=...)``. Until ``store.HistoryStore`` exists this module fails to
import and the registry reports the system as skipped: "store not yet available".
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from benchmarks.generator import ChatDict, to_message
from benchmarks.peers import CONTEXT_WINDOW, MAX_OUTPUT_TOKENS, System
from benchmarks.tokenizing import TokenCounter, Unavailable
from store import HistoryStore
from strategies import ContextWindowCompactionStrategy, TruncationStrategy
from strategies.messages import Message
from strategies.tokenizers import count_message_tokens

__all__ = ["ChatledgerSystem", "SealedChatledgerSystem"]


class ChatledgerSystem(System):
    """``HistoryStore``: append, after-run compaction, projection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stack = AsyncExitStack()
        self._store: Any = None
        self._strategy = ContextWindowCompactionStrategy(
            max_context_window_tokens=CONTEXT_WINDOW, max_output_tokens=MAX_OUTPUT_TOKENS
        )

    @property
    def store(self) -> Any:
        """The open :class:`~store.HistoryStore`."""
        return self._store

    async def open(self, *, create: bool) -> None:
        """Open the store (it creates or upgrades its schema itself)."""
        url = self.target.sqlalchemy_url(
            driver="aiosqlite" if self.target.backend == "sqlite" else "asyncpg"
        )
        kwargs = await self._options()
        if self.tokenizer is not None:
            kwargs["tokenizer"] = self.tokenizer
        self._store = await self._stack.enter_async_context(HistoryStore.open(url, **kwargs))
        if self.tokenizer is None:  # a counting tokenizer must see the workload's calls only
            # the store loads its tokenizer on first use; load it here, untimed, as the
            # limit loads tiktoken when it opens (else a bulk import counts the loading)
            self._store.tokenizer.count_tokens("warm-up")

    async def _options(self) -> dict[str, Any]:
        """Keywords of ``HistoryStore.open`` beyond the URL and the tokenizer."""
        return {}

    def prepare(self, items: list[ChatDict]) -> list[Message]:
        """Convert to chatledger messages."""
        return [to_message(item) for item in items]

    async def load(self, native: list[Message]) -> None:
        """One ``append`` (one transaction) per batch."""
        await self._store.append(self.session_id, native)

    async def append_turn(self, native: list[Message]) -> None:
        """Append the run's messages."""
        await self._store.append(self.session_id, native)

    settle_every = 100_000

    async def settle(self) -> dict[str, float]:
        """Compact the imported history to the steady state of a long-lived agent.

        First a truncation to the context-window strategy's own budgets (what its
        truncation phase would do, without first summarizing tool results that are then
        excluded anyway: the same active view at a fraction of the cost), then one
        after-run compaction with the strategy itself.
        """
        if getattr(self._store, "compact", None) is None:
            return {}
        start = time.perf_counter()
        truncation = TruncationStrategy(
            max_n=self._strategy.truncation_tokens,
            compact_to=self._strategy.tool_eviction_tokens,
            tokenizer=self._store.tokenizer,
        )
        await self._store.compact(self.session_id, truncation, phase="import")
        await self.after_run()
        return {"settle_s": time.perf_counter() - start}

    def _method(self, name: str) -> Any:
        method = getattr(self._store, name, None)
        if method is None:
            raise Unavailable(f"store not yet available: HistoryStore.{name}() is missing")
        return method

    async def after_run(self) -> None:
        """The after-run compaction, with the 128k context-window strategy."""
        await self._method("compact")(self.session_id, self._strategy, phase="after_run")

    async def context(self) -> int:
        """The before-call projection."""
        return len(await self._method("context")(self.session_id))

    async def full_read(self) -> int:
        """Every stored message, excluded ones too, streamed page by page (``aiter_history``)."""
        count = 0
        stream = self._method("aiter_history")(self.session_id, include_excluded=True)
        async for _message in stream:
            count += 1
        return count

    async def count_stored_once(self, tokenizer: TokenCounter) -> int | None:
        """Count every stored message (summaries too) once, as the store counts them."""
        count = 0
        async for stored in self._store.aiter_history(self.session_id, include_excluded=True):
            count_message_tokens(stored.message, tokenizer, policy=self._store.policy)  # type: ignore[arg-type]
            count += 1
        return count

    async def close(self) -> None:
        """Close the store."""
        await self._stack.aclose()


class UnindexedChatledgerSystem(ChatledgerSystem):
    """chatledger with search off (``chatledger db search off``): the same store without
    its search index, what a turn with the index is compared with."""

    async def open(self, *, create: bool) -> None:
        """Open the store; a new database has its search turned off first."""
        await super().open(create=create)
        if create:
            from store.sql.search.index import switch_search

            await switch_search(self._store.engine, False)


KEY_FILE = "chatledger-sealed.keys"
"""The key file of :class:`SealedChatledgerSystem`, beside its database."""


class SealedChatledgerSystem(ChatledgerSystem):
    """chatledger with encryption at rest: every text sealed under the tenant's data key,
    wrapped by a :class:`~store.encryption.local.LocalKeyProvider` whose key file
    (:data:`KEY_FILE`) is made once beside the databases, by the first store opened there
    (the template's build: its rows are sealed as they are stored), and read by every
    run's store after."""

    async def _options(self) -> dict[str, Any]:
        """A key ring on the key file beside the database."""
        try:
            from store.encryption import KeyRing
            from store.encryption.local import LocalKeyProvider, new_key_file
        except ImportError as exc:
            raise Unavailable(f"this store has no encryption at rest ({exc})") from exc
        path = Path(self.target.location).parent / KEY_FILE
        if not path.exists():
            await asyncio.to_thread(new_key_file, path)
        provider = await asyncio.to_thread(LocalKeyProvider.from_file, path)
        return {"encryption": KeyRing(provider)}


_DIRECT_INDEX = {
    "sqlite": (
        "CREATE VIRTUAL TABLE bench_direct_index USING fts5(search_text, "
        "content='chatledger_messages', tokenize='unicode61 remove_diacritics 0')",
    ),
    "postgresql": (
        "CREATE TABLE bench_direct_index (seq bigint PRIMARY KEY, vector tsvector NOT NULL)",
        "CREATE INDEX bench_direct_index_gin ON bench_direct_index USING gin (vector)",
    ),
}
"""An index of the same kind as chatledger's (FTS5 over the messages' ``search_text``;
a table of tsvectors and its GIN index), which nothing keeps current."""
_DIRECT_INSERT = {
    "sqlite": (
        "INSERT INTO bench_direct_index(rowid, search_text) SELECT rowid, search_text "
        "FROM chatledger_messages WHERE session_id = :session AND seq > :last "
        "AND search_text IS NOT NULL"
    ),
    "postgresql": (
        "INSERT INTO bench_direct_index(seq, vector) SELECT seq, "
        "to_tsvector('simple'::regconfig, search_text) "
        "FROM chatledger_messages WHERE session_id = :session AND seq > :last "
        "AND search_text IS NOT NULL"
    ),
}


class DirectIndexChatledgerSystem(UnindexedChatledgerSystem):
    """The import's comparator: chatledger with search off, each batch's normalized
    text then inserted into an index of the same kind directly, by one
    ``INSERT ... SELECT`` a batch."""

    _last = 0

    async def open(self, *, create: bool) -> None:
        """Open the store with search off, and create the direct index."""
        await super().open(create=create)
        if create:
            from sqlalchemy import text

            async with self._store.engine.begin() as conn:
                for statement in _DIRECT_INDEX[self.target.backend]:
                    await conn.execute(text(statement))

    async def load(self, native: list[Message]) -> None:
        """One ``append`` per batch, then its texts into the direct index in a
        transaction of their own (one commit more per batch of 1,000 messages)."""
        from sqlalchemy import text

        await self._store.append(self.session_id, native)
        async with self._store.engine.begin() as conn:
            params = {"session": self.session_id, "last": self._last}
            await conn.execute(text(_DIRECT_INSERT[self.target.backend]), params)
            found = await conn.execute(
                text("SELECT max(seq) FROM chatledger_messages WHERE session_id = :s"),
                {"s": self.session_id},
            )
            self._last = int(found.scalar_one())
