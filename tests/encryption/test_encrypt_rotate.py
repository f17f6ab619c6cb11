"""A tenant's keys on SQLite and PostgreSQL: the refusals when a store opens (wrong key,
no key, a key on a tenant still in clear), encrypting a tenant in place, and the jobs
killed with SIGKILL halfway (encrypt, rotation of the data key) then resumed; and the
rotation of the provider's key, after which the new key alone opens everything."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from store import HistoryStore
from store.encryption import (
    KeyEvent,
    KeyRing,
    encrypt_tenant,
    key_events,
    rotate_kek,
    rotate_tenant_key,
)
from store.encryption.local import LocalKeyProvider, new_key_file
from store.errors import InvalidInput, KeyRequired, PlaintextRows, StoreError, WrongKey
from strategies.messages import Message, TextContent
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.encryption.support import (
    MARKERS,
    TENANT,
    build_corpus,
    corpus_messages,
    raw,
    sealed_texts,
    snapshot,
)
from tests.sealing import MemoryKeyProvider

ROOT = Path(__file__).resolve().parents[2]


def _open(url: str, ring: KeyRing | None) -> Any:
    return HistoryStore.open(
        url, tenant=TENANT, encryption=ring, tokenizer=CharacterEstimatorTokenizer()
    )


async def _plain_corpus(url: str) -> dict[str, Any]:
    """The corpus written in clear; what it reads back."""
    async with _open(url, None) as store:
        await build_corpus(store)
        return await snapshot(store)


async def _current_key(url: str) -> str:
    async with raw(url) as conn:
        query = text("SELECT current_key FROM chatledger_tenant_keys WHERE tenant = :t")
        return str((await conn.execute(query, {"t": TENANT})).scalar_one())


async def _assert_all_sealed_under_current(url: str) -> None:
    current = await _current_key(url)
    stored = await sealed_texts(url)
    assert len(stored) > 60
    assert [t[:40] for t in stored if not t.startswith(f'"cl1.{current}.')] == []


def _found(path: Path) -> list[str]:
    data = path.read_bytes() if path.exists() else b""
    return [marker for marker in MARKERS.values() if marker.encode() in data]


def _sqlite_path(url: str) -> Path:
    return Path(make_url(url).database or "")


# --- refusals when a store opens ------------------------------------------------------


async def test_a_wrong_key_is_one_clear_wrong_key(db_url: str) -> None:
    async with _open(db_url, KeyRing(MemoryKeyProvider())) as store:
        await store.append("s", corpus_messages()[:2])
    other = MemoryKeyProvider(keys={"test-kek-1": os.urandom(32)})
    with pytest.raises(WrongKey) as caught:
        async with _open(db_url, KeyRing(other)):
            pass
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and "test-kek-1" in message
    assert "Traceback" not in message and caught.value.__cause__ is None


async def test_a_store_without_the_key_refuses_an_encrypted_tenant(db_url: str) -> None:
    async with _open(db_url, KeyRing(MemoryKeyProvider())) as store:
        await store.append("s", corpus_messages()[:2])
    with pytest.raises(KeyRequired, match=f"tenant '{TENANT}' is encrypted"):
        async with _open(db_url, None):
            pass


async def test_encrypting_a_tenant_in_clear_in_place(
    db_url: str,
) -> None:
    before = await _plain_corpus(db_url)
    ring = KeyRing(MemoryKeyProvider())
    with pytest.raises(PlaintextRows, match="chatledger encrypt --tenant acme"):
        async with _open(db_url, ring):
            pass
    event = await encrypt_tenant(db_url, tenant=TENANT, encryption=ring, batch_size=7)
    assert (event.kind, event.state, event.tenant) == ("encrypt", "done", TENANT)
    assert event.data_key_id == await _current_key(db_url)
    await _assert_all_sealed_under_current(db_url)
    async with _open(db_url, ring) as store:
        assert await snapshot(store) == before
        # keyed hashes: the same messages appended again are still a no-op
        stored = await store.history("main", include_excluded=True)
        ids = await store.append("main", corpus_messages())
        assert ids == [m.message_id for m in corpus_messages()]
        assert await store.history("main", include_excluded=True) == stored
    async with raw(db_url) as conn:
        query = text(
            "SELECT count(*) FROM chatledger_messages WHERE tenant = :t "
            "AND (search_text IS NOT NULL OR length(content_hash) <> 64)"
        )
        assert (await conn.execute(query, {"t": TENANT})).scalar_one() == 0
    with pytest.raises(KeyRequired):
        async with _open(db_url, None):
            pass


async def test_an_encrypt_event_counts_each_row_once(db_url: str) -> None:
    await _plain_corpus(db_url)
    event = await encrypt_tenant(db_url, tenant=TENANT, encryption=KeyRing(MemoryKeyProvider()))
    assert event.total is not None and event.rows == event.total


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_after_encrypt_and_vacuum_the_sqlite_file_holds_no_plaintext(
    backend: str, db_url: str
) -> None:
    """After ``VACUUM`` and a truncating checkpoint nothing of the texts in clear may
    remain in the file or its log.

    Before ``VACUUM`` something may: encrypting rewrites each row in place, and SQLite's
    free pages keep what a row held until they are reused or zeroed (``secure_delete``),
    and the write-ahead log keeps the pages it was given until a checkpoint. What
    remains is named in the assertion's message."""
    words = [f"qzvword{n}mark" for n in range(3)]
    async with _open(db_url, None) as store:  # one message a session, each its segment
        for n, word in enumerate(words):
            said = Message(role="user", message_id=f"m{n}", contents=[TextContent(text=word)])
            await store.append(f"s{n}", [said])
    await encrypt_tenant(db_url, tenant=TENANT, encryption=KeyRing(MemoryKeyProvider()))
    path = _sqlite_path(db_url)
    wal = path.with_name(path.name + "-wal")
    before = [w for w in words if w.encode() in _bytes(path) + _bytes(wal)]
    with sqlite3.connect(path) as conn:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        blocks = conn.execute("SELECT block FROM chatledger_search_data").fetchall()
    index = b"".join(bytes(block) for (block,) in blocks)
    left = [w for w in words if w.encode() in index]
    after = [w for w in words if w.encode() in _bytes(path) + _bytes(wal)]
    assert after == [], f"before VACUUM the file held {before}; after, the FTS5 index {left}"


def _bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


# --- killed halfway, then resumed -----------------------------------------------------


def _kill_halfway(url: str, key_file: Path, job: str, *, batch: int, after: int) -> None:
    """Run ``job`` in a process that SIGKILLs itself after ``after`` batches."""
    command = [sys.executable, "-m", "tests.encryption.killed_job", url, str(key_file)]
    command += [job, TENANT, str(batch), str(after)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=300)
    last = (done.stderr.decode().strip().splitlines() or [""])[-1]
    if last.startswith("store.errors.StoreError: "):  # the job failed: its error, here
        raise StoreError(last.removeprefix("store.errors.StoreError: "))
    assert done.returncode == -9, done.stderr.decode()[-2000:]


def _ring(key_file: Path) -> KeyRing:
    return KeyRing(LocalKeyProvider.from_file(key_file))


async def _events(url: str, kind: str) -> list[KeyEvent]:
    return [e for e in await key_events(url, tenant=TENANT) if e.kind == kind]


async def test_encrypt_killed_halfway_then_resumed(db_url: str, tmp_path: Path) -> None:
    before = await _plain_corpus(db_url)
    key_file = tmp_path / "chatledger.key"
    new_key_file(key_file)
    _kill_halfway(db_url, key_file, "encrypt", batch=5, after=3)
    [running] = await _events(db_url, "encrypt")
    assert running.state == "running" and running.rows == 15
    texts = await sealed_texts(db_url)
    sealed = [t for t in texts if t.startswith('"cl1.')]
    assert 0 < len(sealed) < len(texts)  # halfway
    with pytest.raises(PlaintextRows, match="again to finish"):
        async with _open(db_url, _ring(key_file)):
            pass
    with pytest.raises(KeyRequired):
        async with _open(db_url, None):
            pass
    event = await encrypt_tenant(db_url, tenant=TENANT, encryption=_ring(key_file), batch_size=5)
    assert event.event_id == running.event_id and event.state == "done"
    assert event.total is not None and event.rows >= event.total > 15
    [done] = await _events(db_url, "encrypt")
    assert done == event
    await _assert_all_sealed_under_current(db_url)
    async with _open(db_url, _ring(key_file)) as store:
        assert await snapshot(store) == before


async def test_a_data_key_rotation_killed_halfway_then_resumed(db_url: str, tmp_path: Path) -> None:
    key_file = tmp_path / "chatledger.key"
    new_key_file(key_file)
    async with _open(db_url, _ring(key_file)) as store:
        await build_corpus(store)
        before = await snapshot(store)
    old = await _current_key(db_url)
    _kill_halfway(db_url, key_file, "rotate", batch=5, after=3)
    new = await _current_key(db_url)
    assert new != old
    [running] = await _events(db_url, "rotate_data_key")
    assert running.state == "running" and running.rows == 15 and running.data_key_id == new
    keys = {t.split(".", 2)[1] for t in await sealed_texts(db_url)}
    assert keys == {old, new}  # halfway: both keys seal rows
    async with _open(db_url, _ring(key_file)) as store:  # reads keep working meanwhile
        assert await snapshot(store) == before
    event = await rotate_tenant_key(db_url, tenant=TENANT, encryption=_ring(key_file), batch_size=5)
    assert event.event_id == running.event_id and event.state == "done"
    assert event.total is not None and event.rows == event.total > 15
    assert [e.state for e in await _events(db_url, "rotate_data_key")] == ["done"]
    await _assert_all_sealed_under_current(db_url)
    assert await _current_key(db_url) == new
    async with _open(db_url, _ring(key_file)) as store:
        assert await snapshot(store) == before
        # the hash key is not rotated: a replayed append is still a no-op
        stored = await store.history("main", include_excluded=True)
        await store.append("main", corpus_messages())
        assert await store.history("main", include_excluded=True) == stored


def _only_current_key(key_file: Path) -> LocalKeyProvider:
    """A provider holding only the key file's current key."""
    document = json.loads(key_file.read_text())
    current = document["current"]
    return LocalKeyProvider({current: base64.b64decode(document["keys"][current])}, current=current)


async def test_after_a_kek_rotation_the_new_key_alone_opens_everything(
    db_url: str, tmp_path: Path
) -> None:
    key_file = tmp_path / "chatledger.key"
    old_id = new_key_file(key_file)
    async with _open(db_url, _ring(key_file)) as store:
        await build_corpus(store)
        before = await snapshot(store)
    old_only = _only_current_key(key_file)
    new_id = new_key_file(key_file, add=True)
    event = await rotate_kek(db_url, encryption=_ring(key_file))
    assert (event.kind, event.state, event.tenant, event.key_id) == (
        "rotate_kek",
        "done",
        None,
        new_id,
    )
    assert event.rows == 2  # the tenant's data key and hash key
    new_only = _only_current_key(key_file)
    assert new_only.key_ids == (new_id,)
    async with _open(db_url, KeyRing(new_only)) as store:
        assert await snapshot(store) == before
    with pytest.raises(WrongKey, match=old_id.split("-")[0]):
        async with _open(db_url, KeyRing(old_only)):
            pass
    # a store marked the empty tenant itself: no encrypt job, so no encrypt event
    assert [e.kind for e in await key_events(db_url, tenant=TENANT)] == ["rotate_kek"]


async def test_the_jobs_refuse_or_repeat_in_one_line(backend: str, db_url: str) -> None:
    """A rotation of a tenant in clear is refused naming the command that encrypts it;
    encrypting an encrypted tenant again is a pass of its own that finds nothing in
    clear: a new event of no rows, and every sealed text as it was."""
    async with _open(db_url, None) as store:
        await store.append("s", corpus_messages()[:2])
    ring = KeyRing(MemoryKeyProvider())
    with pytest.raises(InvalidInput, match="chatledger encrypt --tenant acme"):
        await rotate_tenant_key(db_url, tenant=TENANT, encryption=ring)
    with pytest.raises(InvalidInput, match="batch_size"):
        await encrypt_tenant(db_url, tenant=TENANT, encryption=ring, batch_size=0)
    async with _open(db_url, None) as store:  # nothing was marked by the refusals
        assert len(await store.history("s")) == 2
    first = await encrypt_tenant(db_url, tenant=TENANT, encryption=ring)
    texts = await sealed_texts(db_url)
    again = await encrypt_tenant(db_url, tenant=TENANT, encryption=ring)
    assert again.event_id != first.event_id and (again.state, again.rows) == ("done", 0)
    assert await sealed_texts(db_url) == texts
