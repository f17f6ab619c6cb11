"""Erasure in the bytes: after a redaction or a purge, the SQLite database file and its
write-ahead log no longer hold the text; PostgreSQL's ``VACUUM`` runs (what it does not
guarantee is in ``docs/retention.md``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from store import HistoryStore
from strategies.changeset import ChangeSet, SummaryInsert
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conformance.toy_strategies import Fixed
from tests.groups.conversations import assistant, call, result, tool, user

SMALL = "passport X1234567 of Jane Q. Example"
LARGE = "medical-record-" + "0123456789abcdef" * 2000  # spills over several pages


def _files(path: Path) -> dict[str, bytes]:
    """The database file and whatever SQLite keeps beside it (the WAL, the shm)."""
    return {p.name: p.read_bytes() for p in path.parent.glob(f"{path.name}*")}


def _holding(path: Path, text: str) -> list[str]:
    """The files holding the start or the end of ``text`` (a large text is cut across
    overflow pages, so the whole of it is never contiguous in the file)."""
    needles = {text[:32].encode(), text[-32:].encode()}
    return sorted(name for name, data in _files(path).items() if any(n in data for n in needles))


def _chat(prefix: str, secret: str) -> list[Message]:
    return [
        user(f"{prefix}u1", f"here is my {secret}"),
        assistant(f"{prefix}a1", call(f"{prefix}c1", "store_document")),
        tool(f"{prefix}t1", result(f"{prefix}c1", f"stored {secret}")),
        assistant(f"{prefix}a2", "Done."),
        user(f"{prefix}u2", "thanks"),
    ]


def _filler(session: int) -> list[Message]:
    return [user(f"f{session}-{i}", f"unrelated filler text {session} {i} " * 8) for i in range(40)]


@pytest.fixture(params=["build-default", "secure-delete-off"])
async def sqlite_store(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[HistoryStore, Path]]:
    """A SQLite store with filler sessions; ``secure-delete-off`` starts each connection
    with ``secure_delete`` off, as most SQLite builds do (some, like Debian's, turn it
    on at compile time): the erasure must not depend on the build."""
    path = tmp_path / "erase.db"
    async with HistoryStore.open(
        f"sqlite:///{path}", tokenizer=CharacterEstimatorTokenizer()
    ) as store:
        if request.param == "secure-delete-off":
            await store.engine.dispose()

            @event.listens_for(store.engine.sync_engine, "connect")
            def _off(dbapi_connection: Any, _record: Any) -> None:
                cursor = dbapi_connection.cursor()
                cursor.execute("PRAGMA secure_delete = OFF")
                cursor.close()

        for session in range(3):
            await store.append(f"filler-{session}", _filler(session))
        yield store, path


@pytest.mark.parametrize("secret", [SMALL, LARGE], ids=["small", "large"])
async def test_redacted_text_leaves_the_sqlite_file(
    sqlite_store: tuple[HistoryStore, Path], secret: str
) -> None:
    store, path = sqlite_store
    await store.append("s", _chat("", secret))
    summary = Message.text_message("assistant", f"the user shared {secret}", message_id="sum")
    changes = ChangeSet(summaries=(SummaryInsert(summary, ("group_u1",)),), strategy="fixed")
    await store.compact("s", Fixed(changes))
    await store.append("s", _filler(9))
    assert _holding(path, secret)  # the control: the text is in the file before
    report = await store.redact("s", ["u1", "t1"], reason="erasure request")
    assert report.summaries == ("sum",)
    assert _holding(path, secret) == []
    assert all(secret not in m.model_dump_json() for m in await store.history("s"))
    # the rest of the database is intact and still readable
    assert len(await store.history("filler-1")) == len(_filler(1))


@pytest.mark.parametrize("secret", [SMALL, LARGE], ids=["small", "large"])
async def test_purged_text_leaves_the_sqlite_file(
    sqlite_store: tuple[HistoryStore, Path], secret: str
) -> None:
    store, path = sqlite_store
    await store.append("old", _chat("old-", secret))
    cutoff = datetime.now(UTC) + timedelta(microseconds=1)
    while datetime.now(UTC) <= cutoff:
        pass
    await store.append("filler-0", _filler(7))  # the filler sessions are newer
    await store.append("filler-1", _filler(8))
    await store.append("filler-2", _filler(6))
    assert _holding(path, secret)
    report = await store.purge(older_than=cutoff)
    assert report.sessions == ("old",)
    assert _holding(path, secret) == []
    assert {s.session_id for s in await store.sessions()} == {"filler-0", "filler-1", "filler-2"}


async def test_vacuum_shrinks_the_file_and_keeps_the_data(
    sqlite_store: tuple[HistoryStore, Path],
) -> None:
    store, path = sqlite_store
    await store.append("old", _chat("old-", LARGE))
    cutoff = datetime.now(UTC) + timedelta(microseconds=1)
    while datetime.now(UTC) <= cutoff:
        pass
    for session in range(3):
        await store.append(f"filler-{session}", [user(f"late-{session}", "still here")])
    before = {s.session_id: s for s in await store.sessions()}
    assert (await store.purge(older_than=cutoff)).sessions == ("old",)
    size = path.stat().st_size  # the purge checkpointed: the file holds every page
    await store.vacuum()
    assert path.stat().st_size < size
    assert _holding(path, LARGE) == []
    after = {s.session_id: s for s in await store.sessions()}
    assert after.keys() == before.keys() - {"old"}
    for session_id, info in after.items():
        assert len(await store.history(session_id)) == info.stored_messages
        assert info.stored_messages == before[session_id].stored_messages


@pytest.mark.postgres
async def test_postgres_vacuum_runs_after_a_redaction(
    pg_server: object, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue("pg_server")
    name = server.clone()
    request.addfinalizer(lambda: server.drop_later(name))
    async with HistoryStore.open(
        server.url_for(name), tokenizer=CharacterEstimatorTokenizer()
    ) as store:
        await store.append("s", _chat("", SMALL))
        await store.redact("s", ["u1", "t1"], reason="erasure request")
        await store.vacuum()
        assert all(SMALL not in m.model_dump_json() for m in await store.history("s"))
        assert len(await store.history("s")) == len(_chat("", SMALL))
