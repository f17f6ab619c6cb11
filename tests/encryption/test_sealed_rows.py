"""A sealed tenant on SQLite and PostgreSQL: it reads back what a plain store reads, its
texts leave no trace in the database's bytes, and every tampering with a sealed column
fails closed with a :class:`CorruptRowError` naming the place."""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from store import HistoryStore
from store.encryption import KeyRing
from store.errors import CorruptRowError, InvalidInput
from strategies.messages import Message, TextContent
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.encryption.support import (
    MARKERS,
    TENANT,
    build_corpus,
    json_param,
    raw,
    sealed_texts,
    snapshot,
)
from tests.sealing import MemoryKeyProvider

PG_DUMP = shutil.which("pg_dump") or "/usr/bin/pg_dump"


def _open(url: str, ring: KeyRing | None, tenant: str = TENANT) -> Any:
    return HistoryStore.open(
        url, tenant=tenant, encryption=ring, tokenizer=CharacterEstimatorTokenizer()
    )


def _retenanted(value: Any) -> Any:
    """``value`` with its tenant fields left out (two tenants compared)."""
    if isinstance(value, dict):
        return {k: _retenanted(v) for k, v in value.items() if k != "tenant"}
    if isinstance(value, list):
        return [_retenanted(v) for v in value]
    return value


def _found(data: bytes) -> list[str]:
    return [marker for marker in MARKERS.values() if marker.encode() in data]


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _in_file(path: Path) -> list[str]:
    """The markers in the bytes of ``path`` (none when it does not exist)."""
    return _found(path.read_bytes()) if path.exists() else []


# --- round trip -----------------------------------------------------------------------


async def test_every_sealed_text_reads_back_as_a_plain_store_gives(db_url: str) -> None:
    provider = MemoryKeyProvider()
    async with _open(db_url, None, tenant="plainco") as plain:
        await build_corpus(plain)
        expected = _retenanted(await snapshot(plain))
    async with _open(db_url, KeyRing(provider)) as sealed:
        await build_corpus(sealed)
        assert _retenanted(await snapshot(sealed)) == expected
    shown = json.dumps(expected, ensure_ascii=False)
    assert not [m for m in MARKERS.values() if m not in shown]  # the corpus holds every kind
    # read from the rows, not from a cache: a new store and a new key ring
    async with _open(db_url, KeyRing(provider)) as reopened:
        assert _retenanted(await snapshot(reopened)) == expected
    async with raw(db_url) as conn:
        query = text("SELECT current_key FROM chatledger_tenant_keys WHERE tenant = :t")
        current = (await conn.execute(query, {"t": TENANT})).scalar_one()
    stored = await sealed_texts(db_url)
    assert len(stored) > 60
    assert [t for t in stored if not t.startswith(f'"cl1.{current}.')] == []
    assert [t for t in await sealed_texts(db_url, "plainco") if t.startswith('"cl1.')] == []


# --- no trace -------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_no_marker_in_the_sqlite_file_or_its_log(backend: str, db_url: str) -> None:
    path = Path(make_url(db_url).database or "")
    wal = path.with_name(path.name + "-wal")
    async with _open(db_url, KeyRing(MemoryKeyProvider())) as store:
        await build_corpus(store)
        await snapshot(store)
        assert _size(wal) > 0  # the log, before any checkpoint
        assert _in_file(wal) == []
        assert _in_file(path) == []
    assert _in_file(path) == [] and _in_file(wal) == []
    with sqlite3.connect(path) as conn:  # a plain reader sees only sealed texts
        (contents,) = conn.execute("SELECT contents FROM chatledger_messages LIMIT 1").fetchone()
    assert str(contents).startswith('"cl1.')


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_no_marker_in_a_pg_dump(backend: str, db_url: str) -> None:
    async with _open(db_url, KeyRing(MemoryKeyProvider())) as store:
        await build_corpus(store)
    dump = _pg_dump(db_url)
    assert b"chatledger_messages" in dump and b'"cl1.' in dump  # the rows are in it
    assert _found(dump) == []


def _pg_dump(url: str) -> bytes:
    parsed = make_url(url)
    command = [PG_DUMP, "-h", parsed.host or "127.0.0.1", "-p", str(parsed.port or 5432)]
    command += ["-U", parsed.username or "postgres", "-d", parsed.database or ""]
    done = subprocess.run(command, capture_output=True, check=True, timeout=120)
    return done.stdout


# --- fail closed ----------------------------------------------------------------------


def _chat(prefix: str) -> list[Message]:
    return [
        Message(role="user", message_id="m1", contents=[TextContent(text=f"{prefix} one")]),
        Message(role="assistant", message_id="m2", contents=[TextContent(text=f"{prefix} two")]),
        Message(role="user", message_id="m3", contents=[TextContent(text=f"{prefix} three")]),
    ]


@pytest.fixture
async def two_tenants(db_url: str) -> KeyRing:
    """Sessions ``s`` and ``s2`` of tenant acme and ``s`` of tenant beta, the same
    message ids everywhere, sealed under one provider (each tenant its own data key)."""
    ring = KeyRing(MemoryKeyProvider())
    async with _open(db_url, ring) as store:
        await store.append("s", _chat("acme s"))
        await store.append("s2", _chat("acme s2"))
    async with _open(db_url, ring, tenant="beta") as store:
        await store.append("s", _chat("beta s"))
    return ring


async def _contents(url: str, tenant: str, session_id: str, seq: int) -> str:
    async with raw(url) as conn:
        query = text(
            "SELECT CAST(contents AS TEXT) FROM chatledger_messages "
            "WHERE tenant = :t AND session_id = :s AND seq = :q"
        )
        return str((await conn.execute(query, {"t": tenant, "s": session_id, "q": seq})).scalar())


async def _plant(url: str, value: str, *, session_id: str = "s", seq: int = 1) -> None:
    """Write ``value`` as the contents of acme's row (session, seq), as it is."""
    async with raw(url) as conn:
        statement = text(
            f"UPDATE chatledger_messages SET contents = {json_param(conn)} "
            "WHERE tenant = :t AND session_id = :s AND seq = :q"
        )
        await conn.execute(statement, {"v": value, "t": TENANT, "s": session_id, "q": seq})


async def _read_fails(url: str, ring: KeyRing, *, seq: int = 1, session_id: str = "s") -> str:
    """The error of reading acme's session in a new store: it names the place."""
    async with _open(url, ring) as store:
        with pytest.raises(CorruptRowError) as caught:
            await store.history(session_id)
    error = caught.value
    assert (error.tenant, error.session_id, error.seq) == (TENANT, session_id, seq)
    assert f"tenant '{TENANT}', session '{session_id}', seq {seq}" in str(error)
    assert "messages.contents" in str(error)
    return str(error)


def _parts(sealed: str) -> list[str]:
    assert sealed.startswith('"cl1.') and sealed.endswith('"')
    return sealed[1:-1].split(".")


def _unb64(value: str) -> bytes:
    return base64.b64decode(value)


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


async def test_contents_swapped_between_two_rows_of_a_session(
    db_url: str, two_tenants: KeyRing
) -> None:
    first = await _contents(db_url, TENANT, "s", 1)
    second = await _contents(db_url, TENANT, "s", 2)
    await _plant(db_url, second)
    await _plant(db_url, first, seq=2)
    assert "does not authenticate at its place" in await _read_fails(db_url, two_tenants)


async def test_contents_moved_to_another_session_with_the_same_seq_and_ids(
    db_url: str, two_tenants: KeyRing
) -> None:
    await _plant(db_url, await _contents(db_url, TENANT, "s2", 1))
    assert "sealed for a row of session 's2'" in await _read_fails(db_url, two_tenants)


async def test_contents_moved_from_another_tenant_with_the_same_session_and_seq(
    db_url: str, two_tenants: KeyRing
) -> None:
    await _plant(db_url, await _contents(db_url, "beta", "s", 1))
    assert "which the tenant does not have" in await _read_fails(db_url, two_tenants)


async def test_a_flipped_bit_in_a_ciphertext(db_url: str, two_tenants: KeyRing) -> None:
    version, key_id, owner, blob = _parts(await _contents(db_url, TENANT, "s", 2))
    data = bytearray(_unb64(blob))
    data[len(data) // 2] ^= 0x04
    await _plant(db_url, f'"{version}.{key_id}.{owner}.{_b64(bytes(data))}"', seq=2)
    assert "does not authenticate" in await _read_fails(db_url, two_tenants, seq=2)


@pytest.mark.parametrize("cut", [1, 20])
async def test_a_truncated_ciphertext(db_url: str, two_tenants: KeyRing, cut: int) -> None:
    version, key_id, owner, blob = _parts(await _contents(db_url, TENANT, "s", 3))
    data = _unb64(blob)
    await _plant(db_url, f'"{version}.{key_id}.{owner}.{_b64(data[:-cut])}"', seq=3)
    message = await _read_fails(db_url, two_tenants, seq=3)
    assert "truncated" in message or "does not authenticate" in message


async def test_an_unknown_key_id(db_url: str, two_tenants: KeyRing) -> None:
    version, _, owner, blob = _parts(await _contents(db_url, TENANT, "s", 1))
    await _plant(db_url, f'"{version}.nosuchkey.{owner}.{blob}"')
    assert "data key 'nosuchkey'" in await _read_fails(db_url, two_tenants)


async def test_a_plaintext_json_text_planted_in_an_encrypted_tenant(
    db_url: str, two_tenants: KeyRing
) -> None:
    await _plant(db_url, json.dumps([{"type": "text", "text": "planted in clear"}]))
    assert "not sealed" in await _read_fails(db_url, two_tenants)


PLAINTEXT_PLANTS = {
    "message metadata": ("chatledger_messages", "metadata", "seq = 2", '{"k": "clear"}'),
    "author name": ("chatledger_messages", "author_name", "seq = 2", "Mallory"),
    "session metadata": ("chatledger_sessions", "metadata", "1 = 1", '{"k": "clear"}'),
    "title": ("chatledger_sessions", "title", "1 = 1", "a title in clear"),
}


@pytest.mark.parametrize("place", sorted(PLAINTEXT_PLANTS))
async def test_a_text_in_clear_in_any_sealed_column_fails_closed(
    db_url: str, two_tenants: KeyRing, place: str
) -> None:
    table, column, where, value = PLAINTEXT_PLANTS[place]
    async with raw(db_url) as conn:
        bind = json_param(conn) if column == "metadata" else ":v"
        await conn.execute(
            text(
                f"UPDATE {table} SET {column} = {bind} "
                f"WHERE tenant = :t AND session_id = 's' AND {where}"
            ),
            {"v": value, "t": TENANT},
        )
    async with _open(db_url, two_tenants) as store:
        with pytest.raises(CorruptRowError) as caught:
            if table == "chatledger_sessions":
                await store.session("s")
            else:
                await store.history("s")
    assert caught.value.tenant == TENANT and caught.value.session_id == "s"
    assert f"{column}" in str(caught.value) and "not sealed" in str(caught.value)


# --- search ---------------------------------------------------------------------------


async def test_search_on_an_encrypted_tenant_is_refused_naming_encryption(db_url: str) -> None:
    async with _open(db_url, KeyRing(MemoryKeyProvider())) as store:
        await store.append("s", _chat("findable"))
        with pytest.raises(InvalidInput, match=r"(?i)encrypt") as caught:
            await store.search("findable")
    assert len(str(caught.value).splitlines()) == 1


def test_marker_words_are_distinct() -> None:
    """No marker is found inside another (a finding names one kind of text)."""
    words = list(MARKERS.values())
    assert not [(a, b) for a in words for b in words if a != b and a in b]
    assert all(word.startswith("qzv") and word.endswith("mark") for word in words)


# --- every sealed column of the corpus ------------------------------------------------


async def _read_everything(store: Any) -> None:
    """Every read that opens a sealed column of the corpus."""
    from strategies.truncation import TruncationStrategy

    for session_id in ("main", "keep", "tails"):
        await store.session(session_id)
        await store.history(session_id, include_excluded=True)
        await store.context(session_id)
        await store.audit(session_id)
    await store.context("main", strategy=TruncationStrategy(max_n=100, compact_to=4))


TAMPERED_COLUMNS: dict[str, tuple[str, str, str]] = {
    # name: (table, column, the rows of the tenant it plants in)
    "a reduction": ("chatledger_messages", "reduced_contents", "reduced_contents IS NOT NULL"),
    "a fork's reduction": (
        "chatledger_branch_rows",
        "reduced_contents",
        "reduced_contents IS NOT NULL",
    ),
    "a compaction request": (
        "chatledger_sessions",
        "compaction_request",
        "compaction_request IS NOT NULL",
    ),
    "an event's params": ("chatledger_events", "params", "params IS NOT NULL"),
}


@pytest.mark.parametrize("name", sorted(TAMPERED_COLUMNS))
@pytest.mark.parametrize("how", ["in clear", "swapped"])
async def test_tampering_with_any_sealed_column_of_the_corpus_fails_closed(
    db_url: str, name: str, how: str
) -> None:
    table, column, where = TAMPERED_COLUMNS[name]
    ring = KeyRing(MemoryKeyProvider())
    async with _open(db_url, ring) as store:
        await build_corpus(store)
        await _read_everything(store)
    async with raw(db_url) as conn:
        cast = f"CAST({column} AS TEXT)"
        query = text(f"SELECT {cast} FROM {table} WHERE tenant = :t AND {where}")
        found = [str(v) for (v,) in await conn.execute(query, {"t": TENANT})]
        assert found, name
        if how == "in clear":
            planted = found[0] if column == "compaction_request" else None
            value = '{"reason": "manual"}' if planted else '[{"type": "text", "text": "x"}]'
            if column == "params":
                value = "{}"
        else:
            others = [v for v in found if v != found[-1]]
            if not others:  # one such row: move the sealed text of another column here
                fallback = "metadata" if table != "chatledger_events" else "params"
                query = text(f"SELECT CAST({fallback} AS TEXT) FROM chatledger_sessions")
                others = [str(v) for (v,) in await conn.execute(query) if v is not None]
            value = others[0]
        bind = ":v" if column == "compaction_request" else json_param(conn)
        await conn.execute(
            text(f"UPDATE {table} SET {column} = {bind} WHERE tenant = :t AND {where}"),
            {"v": value, "t": TENANT},
        )
    async with _open(db_url, ring) as store:
        with pytest.raises(CorruptRowError) as caught:
            await _read_everything(store)
    assert caught.value.tenant == TENANT and column in str(caught.value)


# --- a fork of a fork whose middle is deleted -----------------------------------------


def _tool_turn(n: int) -> list[Message]:
    from strategies.messages import FunctionCallContent, FunctionResultContent

    return [
        Message(role="user", message_id=f"u{n}", contents=[TextContent(text=f"ask {n}")]),
        Message(
            role="assistant",
            message_id=f"c{n}",
            contents=[FunctionCallContent(call_id=f"k{n}", name="lookup", arguments="{}")],
        ),
        Message(
            role="tool",
            message_id=f"t{n}",
            contents=[FunctionResultContent(call_id=f"k{n}", result="long " * 50)],
        ),
        Message(role="assistant", message_id=f"a{n}", contents=[TextContent(text=f"say {n}")]),
    ]


async def _fork_of_a_reducing_fork(store: Any) -> list[tuple[int, bool]]:
    """P; F a fork of P that reduces rows P owns; G a fork of F; F deleted: G's rows."""
    from strategies.reduction import ToolResultReductionStrategy

    reduction = ToolResultReductionStrategy(
        reducers={"lookup": lambda result: "short"}, minimum_preserved_groups=2
    )
    await store.append("P", _tool_turn(1) + _tool_turn(2))
    await store.fork("P", new_session_id="F")
    await store.append("F", _tool_turn(3))
    reduced = await store.compact("F", reduction)
    assert reduced is not None and reduced.reduced
    await store.fork("F", new_session_id="G")
    await store.delete_session("F")
    return [(m.seq, m.reduced is not None) for m in await store.history("G")]


async def test_a_fork_of_a_reducing_fork_reads_after_the_middle_is_deleted(db_url: str) -> None:
    async with _open(db_url, None, tenant="plainco") as plain:
        expected = await _fork_of_a_reducing_fork(plain)
    assert (3, True) in expected  # the reduction G inherited
    ring = KeyRing(MemoryKeyProvider())
    async with _open(db_url, ring) as sealed:
        assert await _fork_of_a_reducing_fork(sealed) == expected


def _turn(n: int) -> list[Message]:
    return [
        Message(role="user", message_id=f"u{n}", contents=[TextContent(text=f"ask {n}")]),
        Message(role="assistant", message_id=f"a{n}", contents=[TextContent(text=f"say {n}")]),
    ]


async def _fork_read_first_by_context(url: str, ring: KeyRing | None, tenant: str) -> Any:
    """P and F a fork of P; then a new store reads F, context first."""
    async with _open(url, ring, tenant=tenant) as store:
        await store.append("P", _turn(1) + _turn(2))
        await store.fork("P", new_session_id="F")
    async with _open(url, ring, tenant=tenant) as store:
        context = [m.message_id for m in await store.context("F")]  # the first read
        history = [m.message.message_id for m in await store.history("F")]
    return [context, history]


async def test_a_new_store_reads_a_fork_s_context_first(db_url: str) -> None:
    expected = await _fork_read_first_by_context(db_url, None, "plainco")
    assert expected == [["u1", "a1", "u2", "a2"]] * 2
    ring = KeyRing(MemoryKeyProvider())
    assert await _fork_read_first_by_context(db_url, ring, TENANT) == expected
