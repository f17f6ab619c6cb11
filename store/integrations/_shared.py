"""The stores the framework adapters open for themselves, one per database and tenant.

An adapter given a ``url`` (or nothing: ``$CHATLEDGER_URL``, then ``./chatledger.db``)
opens nothing in its constructor. On its first call it takes a :class:`StoreLease`
(async adapters) or a :class:`SyncLease` (adapters with synchronous methods too) from a
process-wide registry: adapters made with the same URL, tenant and tokenizer share one
:class:`~store.HistoryStore` (or :class:`~store.SyncHistoryStore`), opened once and
closed when the last lease is released, or at interpreter exit for those never
released. An adapter given a store uses it and never closes it.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

from pydantic import JsonValue

from store.contract import HistoryBackend, ProviderBackend
from store.errors import InvalidInput
from store.models import CompactionEvent, Phase, StoredMessage
from store.provider import CompactionMode, TwoPhaseProvider
from store.sync import SyncHistoryStore
from strategies.base import CompactionStrategy
from strategies.messages import Message
from strategies.tokenizers import Tokenizer

__all__ = [
    "LazyBackend",
    "StoreLease",
    "StoreSource",
    "SyncLease",
    "close_all",
    "phase_strategies",
    "provider_for",
]

_Key = tuple[str, str, str]


@dataclass
class _Entry:
    store: HistoryBackend
    leases: int = 0


@dataclass
class _Registry:
    entries: dict[_Key, _Entry] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)
    opening: dict[tuple[_Key, int], asyncio.Lock] = field(default_factory=dict)


_REGISTRY = _Registry()


@dataclass
class _SyncEntry:
    store: SyncHistoryStore
    leases: int = 0


_SYNC: dict[_Key, _SyncEntry] = {}
_SYNC_GUARD = threading.Lock()


def _key(url: str | None, tenant: str, tokenizer: Tokenizer | None) -> _Key:
    from store.sql.drivers.engine import normalize_url

    target = normalize_url(url).render_as_string(hide_password=False)
    return (target, tenant, tokenizer.name if tokenizer is not None else "")


class StoreLease:
    """One adapter's hold on a store: the one it was given, or a shared one."""

    def __init__(
        self,
        store: HistoryBackend | None,
        *,
        url: str | None,
        tenant: str,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        if store is not None and url is not None:
            raise InvalidInput("give a store or a url, not both")
        if store is not None and not isinstance(store, HistoryBackend):
            raise InvalidInput(f"store must be a chatledger store, got {type(store).__name__}")
        self._given = store
        self._url = url
        self._tenant = tenant
        self._tokenizer = tokenizer
        self._key: _Key | None = None

    @property
    def opened(self) -> bool:
        """Whether this lease holds a shared store now."""
        return self._key is not None

    async def get(self) -> HistoryBackend:
        """The store (the shared one is opened on first use)."""
        if self._given is not None:
            return self._given
        if self._key is not None:
            return _REGISTRY.entries[self._key].store
        key = _key(self._url, self._tenant, self._tokenizer)
        lock = _opening_lock(key)
        async with lock:
            entry = _REGISTRY.entries.get(key)
            if entry is None:
                from store.sql.store import HistoryStore

                opened = await HistoryStore.open(
                    self._url, tenant=self._tenant, tokenizer=self._tokenizer
                )
                entry = _REGISTRY.entries.setdefault(key, _Entry(opened))
            entry.leases += 1
        self._key = key
        return entry.store

    async def release(self) -> None:
        """Give the shared store back; the last lease closes it (idempotent)."""
        key, self._key = self._key, None
        if key is None:
            return
        entry = _REGISTRY.entries.get(key)
        if entry is None:
            return
        entry.leases -= 1
        if entry.leases <= 0:
            del _REGISTRY.entries[key]
            await entry.store.aclose()


class StoreSource(Protocol):
    """What hands an adapter its store: a :class:`StoreLease`, or a store of its own."""

    async def get(self) -> HistoryBackend:
        """The store, opened on the first call."""
        ...


class LazyBackend:
    """What the provider calls, on the store of ``source``, opened on the first call."""

    def __init__(self, source: StoreSource) -> None:
        self.source = source

    async def append(self, session_id: str, messages: Sequence[Message]) -> list[str]:
        """See :meth:`store.contract.HistoryBackend.append`."""
        return await (await self.source.get()).append(session_id, messages)

    async def context(
        self,
        session_id: str,
        *,
        strategy: CompactionStrategy | None = None,
        pending: Sequence[Message] = (),
    ) -> list[Message]:
        """See :meth:`store.contract.HistoryBackend.context`."""
        store = await self.source.get()
        return await store.context(session_id, strategy=strategy, pending=pending)

    async def compact(
        self, session_id: str, strategy: CompactionStrategy, *, phase: Phase = "manual"
    ) -> CompactionEvent | None:
        """See :meth:`store.contract.HistoryBackend.compact`."""
        return await (await self.source.get()).compact(session_id, strategy, phase=phase)

    async def history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        limit: int | None = None,
        before: int | None = None,
    ) -> list[StoredMessage]:
        """See :meth:`store.contract.HistoryBackend.history`."""
        store = await self.source.get()
        return await store.history(
            session_id, include_excluded=include_excluded, limit=limit, before=before
        )

    async def get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        """See :meth:`store.contract.HistoryBackend.get_metadata`."""
        return await (await self.source.get()).get_metadata(session_id)

    async def set_metadata(self, session_id: str, metadata: Mapping[str, JsonValue]) -> None:
        """See :meth:`store.contract.HistoryBackend.set_metadata`."""
        await (await self.source.get()).set_metadata(session_id, metadata)


def provider_for(
    backend: ProviderBackend,
    *,
    before_strategy: CompactionStrategy | str | None,
    after_strategy: CompactionStrategy | str | None,
    max_context_window_tokens: int | None,
    max_output_tokens: int | None,
    reserved_tokens: int,
    tokenizer: Tokenizer | None,
    compaction: CompactionMode = "inline",
) -> TwoPhaseProvider:
    """The two phases of an adapter; bad options raise :class:`InvalidInput` at once."""
    try:
        return TwoPhaseProvider(
            backend,
            before_strategy=before_strategy,
            after_strategy=after_strategy,
            max_context_window_tokens=max_context_window_tokens,
            max_output_tokens=max_output_tokens,
            reserved_tokens=reserved_tokens,
            tokenizer=tokenizer,
            compaction=compaction,
        )
    except InvalidInput:
        raise
    except ValueError as error:
        raise InvalidInput(str(error)) from error


def phase_strategies(
    *,
    before_strategy: CompactionStrategy | str | None,
    after_strategy: CompactionStrategy | str | None,
    max_context_window_tokens: int | None,
    max_output_tokens: int | None,
    reserved_tokens: int,
) -> tuple[CompactionStrategy | None, CompactionStrategy | None]:
    """The before and after strategies these options give, as the provider resolves
    them (for an adapter that runs them on the store itself)."""
    phases = provider_for(
        cast(ProviderBackend, None),  # never called: only the strategies are read
        before_strategy=before_strategy,
        after_strategy=after_strategy,
        max_context_window_tokens=max_context_window_tokens,
        max_output_tokens=max_output_tokens,
        reserved_tokens=reserved_tokens,
        tokenizer=None,
    )
    return phases.before_strategy, phases.after_strategy


def _opening_lock(key: _Key) -> asyncio.Lock:
    loop = id(asyncio.get_running_loop())
    with _REGISTRY.guard:
        return _REGISTRY.opening.setdefault((key, loop), asyncio.Lock())


async def close_all() -> None:
    """Close every shared store (what interpreter exit does for those still open)."""
    entries = list(_REGISTRY.entries.values())
    _REGISTRY.entries.clear()
    _REGISTRY.opening.clear()
    for entry in entries:
        await entry.store.aclose()


class SyncLease:
    """One synchronous adapter's hold on a :class:`~store.SyncHistoryStore`: the one it
    was given, or one shared by the adapters on the same URL, tenant and tokenizer."""

    def __init__(
        self,
        store: SyncHistoryStore | None,
        *,
        url: str | None,
        tenant: str,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        if store is not None and url is not None:
            raise InvalidInput("give a store or a url, not both")
        if store is not None and not isinstance(store, SyncHistoryStore):
            raise InvalidInput(
                f"store must be a SyncHistoryStore (SyncHistoryStore.open(url) or "
                f"SyncHistoryStore.wrap(...)), got {type(store).__name__}"
            )
        self._given = store
        self._url = url
        self._tenant = tenant
        self._tokenizer = tokenizer
        self._key: _Key | None = None

    def get(self) -> SyncHistoryStore:
        """The store (the shared one is opened on first use)."""
        if self._given is not None:
            return self._given
        with _SYNC_GUARD:
            if self._key is not None:
                return _SYNC[self._key].store
            key = _key(self._url, self._tenant, self._tokenizer)
            entry = _SYNC.get(key)
            if entry is None:
                opened = SyncHistoryStore.open(
                    self._url, tenant=self._tenant, tokenizer=self._tokenizer
                )
                entry = _SYNC[key] = _SyncEntry(opened)
            entry.leases += 1
            self._key = key
            return entry.store

    def release(self) -> None:
        """Give the shared store back; the last lease closes it (idempotent)."""
        with _SYNC_GUARD:
            key, self._key = self._key, None
            entry = _SYNC.get(key) if key is not None else None
            if key is None or entry is None:
                return
            entry.leases -= 1
            if entry.leases > 0:
                return
            del _SYNC[key]
        entry.store.close()


def _close_at_exit() -> None:
    with _SYNC_GUARD:
        stores = [entry.store for entry in _SYNC.values()]
        _SYNC.clear()
    for store in stores:
        store.close()
    if _REGISTRY.entries:
        asyncio.run(close_all())


atexit.register(_close_at_exit)
