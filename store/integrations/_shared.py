"""What the framework adapters share: their hold on a store, and their compaction options.

An adapter's store is *borrowed* (given by the caller: used, never closed) or *owned*
(opened from a URL: ``url``, else ``$CHATLEDGER_URL``, then ``./chatledger.db``). An
adapter opens nothing in its constructor. It holds its store through a lease:
:class:`StoreLease` for the async adapters, :class:`SyncLease` for those with
synchronous methods too (a :class:`~store.SyncHistoryStore`), both built on one base.
An owned store is opened on the lease's first use and shared by the leases on the same
URL, tenant and tokenizer: opened once, closed when the last of them is released, or at
interpreter exit for those never released.

The compaction options reach every adapter as one :class:`~store.provider.ContextWindow`,
built once from the adapter's keywords (or given as ``window=``); :func:`adapter_options`
raises a bad one as :class:`~store.errors.InvalidInput`.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, Self, TypeVar, cast

from store.contract import HistoryBackend
from store.errors import InvalidInput
from store.provider import BackendSource, CompactionMode, ContextWindow, TwoPhaseProvider
from store.sync import SyncHistoryStore
from strategies.tokenizers import Tokenizer

__all__ = [
    "StoreLease",
    "SyncLease",
    "adapter_options",
    "close_all",
    "provider_for",
]

_Key = tuple[str, str, str]
"""Where an owned store is opened: the URL, the tenant and the tokenizer's name."""

_S = TypeVar("_S")
"""A store of one kind: a :class:`~store.contract.HistoryBackend` or a
:class:`~store.SyncHistoryStore`."""


@dataclass
class _Entry(Generic[_S]):
    store: _S
    leases: int = 0


@dataclass
class _Owned(Generic[_S]):
    """The owned stores of one kind, one per key, each with the number of leases on it."""

    entries: dict[_Key, _Entry[_S]] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def join(self, key: _Key) -> _S | None:
        """The store open for ``key``, with one more lease on it; None when none is."""
        with self.guard:
            entry = self.entries.get(key)
            if entry is None:
                return None
            entry.leases += 1
            return entry.store

    def add(self, key: _Key, store: _S) -> _S:
        """Keep ``store`` for ``key``, with one lease on it."""
        with self.guard:
            entry = self.entries.setdefault(key, _Entry(store))
            entry.leases += 1
            return entry.store

    def held(self, key: _Key) -> _S:
        """The store a lease on ``key`` holds."""
        with self.guard:
            return self.entries[key].store

    def leave(self, key: _Key) -> _S | None:
        """One lease less on ``key``: the store, for the caller to close, when it was the last."""
        with self.guard:
            entry = self.entries.get(key)
            if entry is None:
                return None
            entry.leases -= 1
            if entry.leases > 0:
                return None
            del self.entries[key]
            return entry.store

    def drain(self) -> list[_S]:
        """Every store, forgotten (for the caller to close)."""
        with self.guard:
            stores = [entry.store for entry in self.entries.values()]
            self.entries.clear()
            return stores


_ASYNC: _Owned[HistoryBackend] = _Owned()
_SYNC: _Owned[SyncHistoryStore] = _Owned()
_SYNC_OPENING = threading.Lock()
"""Held while a :class:`SyncLease` looks for its store and opens it, so that threads
opening the same one wait for the first."""
_ASYNC_OPENING: dict[tuple[_Key, int], asyncio.Lock] = {}
"""The same for :class:`StoreLease`, one lock per key and event loop."""


def _key(url: str | None, tenant: str, tokenizer: Tokenizer | None) -> _Key:
    from store.sql.drivers.engine import normalize_url

    target = normalize_url(url).render_as_string(hide_password=False)
    return (target, tenant, tokenizer.name if tokenizer is not None else "")


class _Lease(Generic[_S]):
    """One adapter's hold on a store: borrowed, or owned and shared (see the module
    docstring). Its subclasses only open and close."""

    _owned: _Owned[_S]

    def __init__(
        self,
        store: _S | None,
        *,
        url: str | None = None,
        tenant: str,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        """Borrow ``store``, or own the one of ``url``, ``tenant`` and ``tokenizer`` when
        it is None (a borrowed store makes ``url`` unused)."""
        self._given: _S | None = store
        self._url = url
        self._tenant = tenant
        self._tokenizer = tokenizer
        self._key: _Key | None = None

    @property
    def borrowed(self) -> bool:
        """Whether the store was given by the caller (then it is never closed here)."""
        return self._given is not None

    @property
    def opened(self) -> bool:
        """Whether this lease holds an owned store now."""
        return self._key is not None

    def _held(self) -> _S | None:
        """The borrowed store, or the owned one this lease holds now."""
        if self._given is not None:
            return self._given
        return self._owned.held(self._key) if self._key is not None else None

    @classmethod
    def of(
        cls,
        store: object,
        *,
        url: str | None,
        tenant: str,
        tokenizer: Tokenizer | None = None,
    ) -> Self:
        """The lease of an adapter's ``store`` or ``url`` (not both), checking the store."""
        if store is not None and url is not None:
            raise InvalidInput("give a store or a url, not both")
        if store is not None:
            cls._check(store)
        return cls(cast(_S, store), url=url, tenant=tenant, tokenizer=tokenizer)

    @staticmethod
    def _check(store: object) -> None:
        """Refuse a given store this kind of lease cannot hold."""
        raise NotImplementedError

    def _target(self) -> _Key:
        return _key(self._url, self._tenant, self._tokenizer)

    def _took(self, key: _Key, store: _S) -> _S:
        self._key = key
        return store

    def _leave(self) -> _S | None:
        """Let go of the owned store: it, for the caller to close, when this was its last
        lease (idempotent)."""
        key, self._key = self._key, None
        return self._owned.leave(key) if key is not None else None


class StoreLease(_Lease[HistoryBackend]):
    """An async adapter's hold on its store (see the module docstring); the provider's
    :class:`~store.provider.BackendSource`."""

    _owned = _ASYNC

    @staticmethod
    def _check(store: object) -> None:
        if not isinstance(store, HistoryBackend):
            raise InvalidInput(f"store must be a chatledger store, got {type(store).__name__}")

    async def get(self) -> HistoryBackend:
        """The store (an owned one is opened on first use)."""
        held = self._held()
        if held is not None:
            return held
        key = self._target()
        async with _opening_lock(key):
            store = self._owned.join(key)
            if store is None:
                from store.sql.store import HistoryStore

                opened = await HistoryStore.open(
                    self._url, tenant=self._tenant, tokenizer=self._tokenizer
                )
                store = self._owned.add(key, opened)
        return self._took(key, store)

    async def release(self) -> None:
        """Give the owned store back; the last lease closes it (idempotent)."""
        store = self._leave()
        if store is not None:
            await store.aclose()


class SyncLease(_Lease[SyncHistoryStore]):
    """A synchronous adapter's hold on its :class:`~store.SyncHistoryStore` (see the
    module docstring)."""

    _owned = _SYNC

    @staticmethod
    def _check(store: object) -> None:
        if not isinstance(store, SyncHistoryStore):
            raise InvalidInput(
                f"store must be a SyncHistoryStore (SyncHistoryStore.open(url) or "
                f"SyncHistoryStore.wrap(...)), got {type(store).__name__}"
            )

    def get(self) -> SyncHistoryStore:
        """The store (an owned one is opened on first use)."""
        if self._given is not None:
            return self._given
        with _SYNC_OPENING:
            held = self._held()
            if held is not None:
                return held
            key = self._target()
            store = self._owned.join(key)
            if store is None:
                opened = SyncHistoryStore.open(
                    self._url, tenant=self._tenant, tokenizer=self._tokenizer
                )
                store = self._owned.add(key, opened)
            return self._took(key, store)

    def release(self) -> None:
        """Give the owned store back; the last lease closes it (idempotent)."""
        store = self._leave()
        if store is not None:
            store.close()


def _opening_lock(key: _Key) -> asyncio.Lock:
    loop = id(asyncio.get_running_loop())
    with _ASYNC.guard:
        return _ASYNC_OPENING.setdefault((key, loop), asyncio.Lock())


@contextmanager
def adapter_options() -> Iterator[None]:
    """Raise an adapter's bad compaction options as :class:`InvalidInput` (a
    ``ValueError`` of :class:`~store.provider.ContextWindow` or of the provider)."""
    try:
        yield
    except InvalidInput:
        raise
    except ValueError as error:
        raise InvalidInput(str(error)) from error


def provider_for(
    source: BackendSource,
    window: ContextWindow,
    *,
    compaction: CompactionMode = "inline",
    calibrate: bool = False,
) -> TwoPhaseProvider:
    """The two phases of an adapter, on the store of ``source``, with ``window`` as it is;
    a bad option raises :class:`InvalidInput` at once."""
    with adapter_options():
        return TwoPhaseProvider(source, window=window, compaction=compaction, calibrate=calibrate)


async def close_all() -> None:
    """Close every owned async store (what interpreter exit does for those still open)."""
    stores = _ASYNC.drain()
    with _ASYNC.guard:
        _ASYNC_OPENING.clear()
    for store in stores:
        await store.aclose()


def _close_at_exit() -> None:
    for store in _SYNC.drain():
        store.close()
    if _ASYNC.entries:
        asyncio.run(close_all())


atexit.register(_close_at_exit)
