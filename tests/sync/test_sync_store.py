"""The synchronous store: derived from the contract, never stale, one private loop."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Generator
from pathlib import Path

import pytest

from store import InMemoryHistoryStore, SyncHistoryStore
from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound, StoreClosed
from store.sync import generate
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from strategies.truncation import TruncationStrategy

RENAMED = {"aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__"}


def test_the_generated_module_is_current() -> None:
    """Fails when the contract changed and ``python -m store.sync.generate`` was not run."""
    assert generate.generate() == Path(generate.TARGET).read_text(encoding="utf-8")


def contract_members() -> list[str]:
    return [
        name
        for name in vars(HistoryBackend)
        if (not name.startswith("_") or name in RENAMED) and name not in {"_is_protocol"}
    ]


@pytest.mark.parametrize("name", contract_members())
def test_every_contract_member_has_a_synchronous_twin(name: str) -> None:
    contract = inspect.getattr_static(HistoryBackend, name)
    twin = inspect.getattr_static(SyncHistoryStore, RENAMED.get(name, name), None)
    assert twin is not None, f"SyncHistoryStore lacks {name}: run python -m store.sync.generate"
    if isinstance(contract, property):
        assert isinstance(twin, property)
        return
    assert not inspect.iscoroutinefunction(twin)
    if name not in RENAMED:
        wanted = list(inspect.signature(contract).parameters)
        assert list(inspect.signature(twin).parameters) == wanted


def memory_store() -> SyncHistoryStore:
    async def make() -> InMemoryHistoryStore:
        return InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())

    return SyncHistoryStore.wrap(make)


def conversation(turns: int) -> list[Message]:
    out: list[Message] = []
    for i in range(turns):
        out.append(Message.text_message("user", f"question {i}", message_id=f"u{i}"))
        out.append(Message.text_message("assistant", f"answer {i}", message_id=f"a{i}"))
    return out


def test_reads_and_writes_without_a_loop(tmp_path: Path) -> None:
    with SyncHistoryStore.open(f"sqlite:///{tmp_path}/s.db") as store:
        store.append("s", conversation(3))
        streamed = list(store.aiter_history("s", page_size=2))
        assert [m.message_id for m in streamed] == [m.message_id for m in store.history("s")]
        view = store.view("s")
        assert view.project() == store.context("s")
        assert len(view.groups) == 6
        event = store.compact("s", TruncationStrategy(max_n=4, compact_to=2))
        assert event is not None and store.audit("s") == [event]
        assert store.compact("s", "truncation:max_n=2,compact_to=2", dry_run=True).is_empty


async def test_called_from_a_running_loop() -> None:
    store = memory_store()
    try:
        store.append("s", conversation(2))
        assert [m.message_id for m in store.context("s")] == ["u0", "a0", "u1", "a1"]
        assert store.retract_last("s") is not None
        assert store.session("s").stored_messages == 3
    finally:
        store.close()


def test_closing_stops_the_thread_and_refuses_later_calls() -> None:
    store = memory_store()
    thread = store.loop.thread
    assert thread.is_alive() and thread is not threading.current_thread()
    store.close()
    store.close()
    assert not thread.is_alive()
    with pytest.raises(StoreClosed):
        store.sessions()


def test_a_call_from_inside_its_own_loop_is_refused() -> None:
    store = memory_store()

    async def reentrant() -> None:
        store.sessions()

    try:
        with pytest.raises(InvalidInput, match="own event loop"):
            store.loop.run(reentrant())
    finally:
        store.close()


def test_errors_are_the_stores_own() -> None:
    store = memory_store()
    try:
        with pytest.raises(SessionNotFound):
            store.session("nobody")
        with pytest.raises(SessionNotFound):
            list(store.aiter_history("nobody"))
    finally:
        store.close()


def test_an_unfinished_iteration_is_closed() -> None:
    store = memory_store()
    try:
        store.append("s", conversation(3))
        iterator = store.aiter_history("s", page_size=1)
        assert isinstance(iterator, Generator)
        assert next(iterator).message_id == "u0"
        iterator.close()  # the async generator is closed on the loop, which goes on
        assert len(store.history("s")) == 6
        assert asyncio.iscoroutinefunction(store.async_store.session)
    finally:
        store.close()
