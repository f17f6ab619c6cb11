"""Closing a synchronous store while other threads are calling it.

``close()`` waits for the calls in flight, up to its timeout, then fails those still
running with :class:`~store.errors.StoreClosed`; later calls get ``StoreClosed`` too; no
connection outlives it and no acknowledged write is lost. Every wait here has a
deadline, so that a close that strands its callers fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import random
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.engine import make_url

from store import InMemoryHistoryStore, SyncHistoryStore
from store.errors import StoreClosed
from store.models import Provenance
from store.sync.loop import CLOSE_TIMEOUT
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conftest import PgServer, _asyncpg_dsn, run_sync

TOKENIZER = CharacterEstimatorTokenizer()
HUNG = 30.0
"""Seconds after which a thread still waiting for the store counts as hung."""


class _SlowAppends(InMemoryHistoryStore):
    """An in-memory store whose appends say when they start, then wait ``delay`` seconds
    (None: until cancelled)."""

    def __init__(self, delay: float | None) -> None:
        super().__init__(tokenizer=TOKENIZER)
        self.delay = delay
        self.started = threading.Event()

    async def append(
        self,
        session_id: str,
        messages: Message | Iterable[Message],
        *,
        provenance: Provenance | None = None,
    ) -> list[str]:
        self.started.set()
        if self.delay is None:
            await asyncio.Event().wait()
        else:
            await asyncio.sleep(self.delay)
        return await super().append(session_id, messages, provenance=provenance)


def _slow_store(delay: float | None) -> tuple[SyncHistoryStore, _SlowAppends]:
    backend = _SlowAppends(delay)

    async def made() -> _SlowAppends:
        return backend

    return SyncHistoryStore.wrap(made), backend


@dataclass
class _Call:
    """One call of a synchronous store on a thread of its own."""

    store: SyncHistoryStore
    outcome: list[object] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._append, daemon=True)
        self.thread.start()

    def _append(self) -> None:
        try:
            self.outcome.append(self.store.append("s", Message.text_message("user", "hi")))
        except BaseException as error:
            self.outcome.append(error)

    def result(self) -> object:
        self.thread.join(HUNG)
        assert not self.thread.is_alive(), "the call in flight never returned"
        return self.outcome[0]


def test_the_close_timeout_has_a_documented_default() -> None:
    default = inspect.signature(SyncHistoryStore.close).parameters["timeout"].default
    assert default == CLOSE_TIMEOUT and 0 < default < 600


def test_close_waits_for_a_call_in_flight() -> None:
    store, backend = _slow_store(0.3)
    call = _Call(store)
    assert backend.started.wait(HUNG)
    start = time.monotonic()
    store.close()
    assert time.monotonic() - start >= 0.2  # it waited for the append
    appended = call.result()
    assert isinstance(appended, list) and len(appended) == 1
    assert not store.loop.thread.is_alive()
    with pytest.raises(StoreClosed):
        store.history("s")


def test_close_fails_the_calls_still_running_after_its_timeout() -> None:
    store, backend = _slow_store(None)
    call = _Call(store)
    assert backend.started.wait(HUNG)
    start = time.monotonic()
    store.close(timeout=0.2)
    assert time.monotonic() - start < HUNG
    failed = call.result()
    assert isinstance(failed, StoreClosed), repr(failed)
    assert "closed" in str(failed)
    with pytest.raises(StoreClosed):
        store.append("s", Message.text_message("user", "late"))
    store.close()  # closing again is harmless


def test_a_second_close_waits_for_the_first() -> None:
    store, backend = _slow_store(0.3)
    call = _Call(store)
    assert backend.started.wait(HUNG)
    first = threading.Thread(target=store.close, daemon=True)
    first.start()
    time.sleep(0.05)
    store.close()
    assert not store.loop.thread.is_alive()  # the second returned once the store closed
    first.join(HUNG)
    assert isinstance(call.result(), list)


WRITERS = 8
ROUNDS = 50


@dataclass
class _Round:
    """Eight threads appending to one synchronous store while a ninth closes it."""

    url: str
    number: int
    close_timeout: float | None
    acknowledged: list[tuple[str, str]] = field(default_factory=list)
    unexpected: list[BaseException] = field(default_factory=list)

    def run(self) -> None:
        store = SyncHistoryStore.open(self.url, tokenizer=TOKENIZER)
        ready = threading.Barrier(WRITERS + 1)
        threads = [
            threading.Thread(target=self._write, args=(store, ready, t), daemon=True)
            for t in range(WRITERS)
        ]
        threads.append(threading.Thread(target=self._close, args=(store, ready), daemon=True))
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + HUNG
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        hung = [thread.name for thread in threads if thread.is_alive()]
        assert hung == [], f"round {self.number}: threads still waiting on the store: {hung}"
        assert self.unexpected == [], f"round {self.number}: {self.unexpected!r}"

    def _write(self, store: SyncHistoryStore, ready: threading.Barrier, writer: int) -> None:
        ready.wait()
        session = f"s{writer % 4}"  # two writers a session
        for i in itertools.count():
            message_id = f"r{self.number}-w{writer}-{i}"
            try:
                store.append(session, Message.text_message("user", "hi", message_id=message_id))
            except StoreClosed:
                return
            except BaseException as error:
                self.unexpected.append(error)
                return
            self.acknowledged.append((session, message_id))

    def _close(self, store: SyncHistoryStore, ready: threading.Barrier) -> None:
        ready.wait()
        wanted = random.Random(self.number).randint(1, 3 * WRITERS)
        deadline = time.monotonic() + HUNG
        while len(self.acknowledged) < wanted and time.monotonic() < deadline:
            time.sleep(0.001)  # close once some appends were acknowledged, others in flight
        try:
            if self.close_timeout is None:
                store.close()
            else:
                store.close(timeout=self.close_timeout)
        except BaseException as error:
            self.unexpected.append(error)


def _stored(url: str) -> set[tuple[str, str]]:
    with SyncHistoryStore.open(url, tokenizer=TOKENIZER) as store:
        return {
            (info.session_id, m.message_id)
            for info in store.sessions()
            for m in store.history(info.session_id)
        }


async def _connections_to(server: PgServer, database: str) -> int:
    """Client connections to ``database``, counted from another database."""
    conn = await asyncpg.connect(_asyncpg_dsn(server.url), timeout=10)
    try:
        count = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", database
        )
        return int(count)
    finally:
        await conn.close()


def _connections(server: PgServer | None, url: str, baseline: int) -> int:
    """Connections to the test database, once they are back to ``baseline`` (a closed
    connection leaves the server's list a moment later) or after five seconds."""
    if server is None:
        return baseline
    database = make_url(url).database
    assert database is not None
    deadline = time.monotonic() + 5
    while True:
        count = run_sync(lambda: _connections_to(server, database))
        if count <= baseline or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


@pytest.mark.slow
def test_close_while_eight_threads_append(
    backend: str, db_url: str, request: pytest.FixtureRequest
) -> None:
    """Fifty rounds of eight appending threads and a ninth that closes the store mid-flight:
    the default timeout (the appends in flight finish) in even rounds, none at all (they
    are cancelled) in odd ones."""
    server: PgServer | None = (
        request.getfixturevalue("pg_server") if backend == "postgres" else None
    )
    baseline = _connections(server, db_url, 0)
    acknowledged: set[tuple[str, str]] = set()
    for number in range(ROUNDS):
        done = _Round(db_url, number, None if number % 2 == 0 else 0.0)
        done.run()
        acknowledged.update(done.acknowledged)
        left = _connections(server, db_url, baseline)
        assert left == baseline, f"round {number}: {left - baseline} connections outlived close"
    assert len(acknowledged) >= ROUNDS
    missing = acknowledged - _stored(db_url)
    assert missing == set(), f"{len(missing)} acknowledged appends are not stored"
