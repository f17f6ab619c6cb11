"""The adapters' hold on a store: an owned store is opened on first use, shared by the
leases on one URL and tenant, and closed once, by the last release; a borrowed store
is never closed. Async (:class:`StoreLease`) and sync (:class:`SyncLease`) alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidInput
from store.integrations._shared import StoreLease, SyncLease
from store.integrations.agent_framework import ChatledgerHistoryProvider
from store.memory import InMemoryHistoryStore
from store.provider import TwoPhaseProvider
from store.sync import SyncHistoryStore
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer


def _count_calls(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[object]:
    """The instances of ``cls`` whose method ``name`` was called, one entry a call."""
    calls: list[object] = []
    original: Callable[..., Any] = getattr(cls, name)

    def counted(self: object, *args: Any, **kwargs: Any) -> Any:
        calls.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return calls


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'lease.db'}"


# -- async -----------------------------------------------------------------------------


async def test_an_owned_store_is_shared_and_closed_once_by_the_last_release(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    closes = _count_calls(monkeypatch, HistoryStore, "aclose")
    first = StoreLease(None, url=url, tenant="default")
    second = StoreLease(None, url=url, tenant="default")
    assert not first.opened and not first.borrowed
    store = await first.get()
    assert await second.get() is store and await first.get() is store
    await first.release()
    assert closes == []
    await store.append("s", [Message.text_message("user", "still open")])
    await second.release()
    await second.release()
    await first.release()
    assert closes == [store]
    assert not first.opened and not second.opened


async def test_a_released_lease_opens_a_fresh_store_on_its_next_use(url: str) -> None:
    lease = StoreLease(None, url=url, tenant="default")
    store = await lease.get()
    await lease.release()
    again = await lease.get()
    assert again is not store
    await lease.release()


async def test_leases_of_another_tenant_or_tokenizer_hold_another_store(url: str) -> None:
    leases = [
        StoreLease(None, url=url, tenant="default"),
        StoreLease(None, url=url, tenant="other"),
        StoreLease(None, url=url, tenant="default", tokenizer=CharacterEstimatorTokenizer()),
    ]
    stores = [await lease.get() for lease in leases]
    assert len({id(s) for s in stores}) == 3
    assert stores[2].tokenizer.name == CharacterEstimatorTokenizer().name
    for lease in leases:
        await lease.release()


async def test_a_borrowed_store_is_never_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    closes = _count_calls(monkeypatch, InMemoryHistoryStore, "aclose")
    given = InMemoryHistoryStore()
    lease = StoreLease(given, url=None, tenant="default")
    assert lease.borrowed and await lease.get() is given
    await lease.release()
    await lease.release()
    assert closes == []
    await given.append("s", [Message.text_message("user", "still open")])


async def test_a_lease_is_the_source_the_provider_opens_on_first_use(url: str) -> None:
    lease = StoreLease(None, url=url, tenant="default")
    provider = TwoPhaseProvider(lease)
    assert not lease.opened
    await provider.save_turn("s", [Message.text_message("user", "hello")], end_of_turn=False)
    assert lease.opened
    assert [m.text for m in await provider.load("s")] == ["hello"]
    await lease.release()


def test_an_adapter_lease_refuses_a_store_and_a_url_or_a_wrong_store() -> None:
    with pytest.raises(InvalidInput, match="give a store or a url, not both"):
        StoreLease.of(InMemoryHistoryStore(), url="sqlite://", tenant="default")
    with pytest.raises(InvalidInput, match="store must be a chatledger store, got int"):
        StoreLease.of(3, url=None, tenant="default")
    with pytest.raises(InvalidInput, match="give a store or a url, not both"):
        SyncLease.of(object(), url="sqlite://", tenant="default")
    with pytest.raises(InvalidInput, match="store must be a SyncHistoryStore"):
        SyncLease.of(InMemoryHistoryStore(), url=None, tenant="default")


async def test_the_agent_framework_provider_closes_its_own_store_and_never_a_given_one(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    closes = _count_calls(monkeypatch, HistoryStore, "aclose")
    async with ChatledgerHistoryProvider(url=url) as first:
        async with ChatledgerHistoryProvider(url=url) as second:
            store = await first.store()
            assert await second.store() is store
        assert closes == []
    assert closes == [store]
    given = InMemoryHistoryStore()
    async with ChatledgerHistoryProvider(given, url=url) as provider:
        assert await provider.store() is given  # a given store makes url unused
    await given.append("s", [Message.text_message("user", "still open")])
    assert closes == [store]


# -- sync ------------------------------------------------------------------------------


def test_an_owned_sync_store_is_shared_and_closed_once_by_the_last_release(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    closes = _count_calls(monkeypatch, SyncHistoryStore, "close")
    first = SyncLease(None, url=url, tenant="default")
    second = SyncLease(None, url=url, tenant="default")
    store = first.get()
    assert second.get() is store and first.get() is store
    first.release()
    assert closes == []
    store.append("s", [Message.text_message("user", "still open")])
    second.release()
    second.release()
    first.release()
    assert closes == [store]


def test_a_borrowed_sync_store_is_never_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    async def make() -> InMemoryHistoryStore:
        return InMemoryHistoryStore()

    given = SyncHistoryStore.wrap(make)
    closes = _count_calls(monkeypatch, SyncHistoryStore, "close")
    try:
        lease = SyncLease(given, url=None, tenant="default")
        assert lease.borrowed and lease.get() is given
        lease.release()
        assert closes == []
        given.append("s", [Message.text_message("user", "still open")])
    finally:
        given.close()
