"""Nothing a redaction leaves lets its text back: no hash of it to check guesses
against, no copy of it in ``doctor``'s quarantine events, no page of it in SQLite's
write-ahead log after a redaction that could not truncate it is run again (or
``doctor --fix``); ``doctor`` reports what a redaction left behind. Every table's text is
scanned (and, on SQLite, the bytes of the database file and its ``-wal``)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Text, select, text
from sqlalchemy import cast as sql_cast

from store import HistoryStore
from store.rules.identity import content_hash
from store.sql.schema import metadata
from strategies.messages import Message, TextContent
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.groups.conversations import assistant, user

PIN = "4711"
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECRET = "passport X1234567 of Jane Q. Example"


def _pin(text_: str) -> Message:
    return Message(
        role="user", contents=[TextContent(text=text_)], message_id="u-pin", created_at=AT
    )


async def _every_text(store: HistoryStore) -> str:
    """Every value of every chatledger table, as text."""
    found: list[str] = []
    async with store.engine.connect() as conn:
        for table in metadata.sorted_tables:
            query = select(*(sql_cast(c, Text) for c in table.c))
            for row in await conn.execute(query):
                found.extend(str(v) for v in row if v is not None)
    return "\n".join(found)


def _files(store: HistoryStore) -> dict[str, bytes]:
    """The SQLite database file and its companions (empty on PostgreSQL)."""
    if store.engine.dialect.name != "sqlite":
        return {}
    path = Path(str(store.engine.url.database))
    return {p.name: p.read_bytes() for p in path.parent.glob(f"{path.name}*")}


def _names_pin(text: str) -> bool:
    """Whether ``text`` holds the PIN as a value of its own, not as four digits inside a
    random hex id or hash (a SHA-256 in hex holds "4711" about once in a thousand)."""
    return re.search(rf"(?<![0-9A-Za-z]){PIN}(?![0-9A-Za-z])", text) is not None


def _holding(store: HistoryStore, needle: str) -> list[str]:
    return sorted(n for n, data in _files(store).items() if needle.encode() in data)


async def test_no_hash_of_a_guess_matches_anything_left(store: HistoryStore) -> None:
    await store.append("s", [_pin(PIN), assistant("a1", "noted")])
    guesses = {content_hash(_pin(f"{n:04d}")): f"{n:04d}" for n in range(10_000)}
    before = await _every_text(store)
    # the control: the hash kept before names the PIN among the guesses
    assert [g for h, g in guesses.items() if h in before] == [PIN]
    await store.redact("s", ["u-pin"], reason="erasure request")
    after = await _every_text(store)
    assert [g for h, g in guesses.items() if h in after] == []
    assert not _names_pin(after), after
    for data in _files(store).values():
        assert not any(h.encode() in data for h in guesses)
    # a replay of the original is still no change, and no error
    assert await store.append("s", [_pin(PIN)]) == ["u-pin"]
    assert not _names_pin(await _every_text(store))


async def _sql(store: HistoryStore, statement: str, **params: Any) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(text(statement), params)


async def _quarantined(store: HistoryStore) -> None:
    """A session whose row ``u1`` (holding the secret) doctor quarantined."""
    await store.append("s", [user("u1", f"my {SECRET}"), assistant("a1", "noted")])
    await _sql(store, "UPDATE chatledger_messages SET metadata = '[1, 2]' WHERE message_id = 'u1'")
    fixed = await store.doctor("s", fix=True)
    assert fixed.healthy
    assert SECRET in await _every_text(store)  # the control: the copy is in the audit


async def test_redact_reaches_doctors_quarantine_copies(store: HistoryStore) -> None:
    await _quarantined(store)
    report = await store.redact("s", ["u1"], reason="erasure request")
    assert SECRET not in await _every_text(store)
    assert _holding(store, SECRET) == []
    assert report.redacted == ("u1",) and report.complete
    (copy,) = [q for e in await store.audit("s") for q in e.params.get("quarantined", ()) if q]
    assert copy["columns"] == {"message_id": json.dumps("u1")}
    assert (await store.doctor("s")).healthy


async def test_doctor_reports_and_erases_what_a_redaction_left(store: HistoryStore) -> None:
    """What older releases left: the hash of the redacted message, and (before redact
    reached them) doctor's quarantine copies; written back here with SQL."""
    await _quarantined(store)
    (event,) = [e for e in await store.audit("s") if e.params.get("check") == "unparsable_row"]
    async with store.engine.connect() as conn:
        query = text("SELECT CAST(params AS TEXT) FROM chatledger_events WHERE event_id = :e")
        kept = (await conn.execute(query, {"e": event.id})).scalar_one()
    await store.append("s", [_pin(PIN)])
    await store.redact("s", ["u1", "u-pin"], reason="erasure request")
    assert (await store.doctor("s")).healthy
    old_hash = content_hash(_pin(PIN))
    await _sql(
        store,
        "UPDATE chatledger_messages SET content_hash = :h WHERE message_id = 'u-pin'",
        h=old_hash,
    )
    await _sql(
        store,
        "UPDATE chatledger_events SET params = :p WHERE event_id = :e",
        p=kept,
        e=event.id,
    )
    found = await store.doctor("s")
    residue = [f for f in found.findings if f.check == "redaction_residue"]
    assert len(residue) == 2 and all(f.fixable and not f.fixed for f in residue)
    assert "'u-pin'" in residue[0].detail and event.id in residue[1].detail
    assert not found.healthy
    fixed = await store.doctor("s", fix=True)
    assert fixed.healthy and all(f.fixed for f in fixed.findings)
    left = await _every_text(store)
    assert SECRET not in left and old_hash not in left
    assert (await store.doctor("s")).findings == ()


@contextmanager
def _reader(path: Path) -> Iterator[sqlite3.Connection]:
    """Another process's connection, reading (a snapshot held open) while in the block;
    the connection stays open afterwards (until closed by the caller)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM chatledger_messages").fetchall()
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def _filler() -> list[Message]:
    return [user(f"f{i}", f"unrelated filler text {i} " * 8) for i in range(40)]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'crash.db'}"


async def _interrupted_redaction(url: str) -> tuple[sqlite3.Connection, Any, Any]:
    """A redaction committed while another connection read, then the process gone:
    the text is left in the write-ahead log, which the other connection keeps open.
    That connection, the redaction's report and what doctor found then."""
    path = Path(url.removeprefix("sqlite:///"))
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append("s", [user("u1", f"my {SECRET}"), assistant("a1", "noted")])
        await store.append("filler", _filler())
        with _reader(path) as other:
            report = await store.redact("s", ["u1"], reason="erasure request")
        assert report.redacted == ("u1",)
        found = await store.doctor("s")
    # the control: the store is closed, the other connection still holds the log open
    assert _held(url) != []
    return other, report, found


def _visibly_incomplete(report: Any, found: Any) -> None:
    assert not report.complete
    assert [f.check for f in found.findings] == ["erasure_pending"]


def _held(url: str) -> list[str]:
    path = Path(url.removeprefix("sqlite:///"))
    return sorted(
        p.name for p in path.parent.glob("crash.db*") if SECRET.encode() in p.read_bytes()
    )


async def test_redact_again_finishes_an_interrupted_erasure(sqlite_url: str) -> None:
    other, report, found = await _interrupted_redaction(sqlite_url)
    try:
        async with HistoryStore.open(sqlite_url, tokenizer=CharacterEstimatorTokenizer()) as store:
            again = await store.redact("s", ["u1"], reason="erasure request")
            assert _held(sqlite_url) == []
            _visibly_incomplete(report, found)
            assert again.redacted == () and again.complete
            assert (await store.doctor("s")).findings == ()
    finally:
        other.close()


async def test_doctor_fix_finishes_an_interrupted_erasure(sqlite_url: str) -> None:
    other, report, found = await _interrupted_redaction(sqlite_url)
    try:
        async with HistoryStore.open(sqlite_url, tokenizer=CharacterEstimatorTokenizer()) as store:
            fixed = await store.doctor("s", fix=True)
            assert _held(sqlite_url) == []
            _visibly_incomplete(report, found)
            assert [(f.check, f.fixed) for f in fixed.findings] == [("erasure_pending", True)]
            assert (await store.doctor("s")).findings == ()
            (event,) = [e for e in await store.audit("s") if e.strategy == "redact"]
            assert event.params["file_erased"] is True
    finally:
        other.close()


async def test_importing_a_redacted_source_again_stores_nothing(
    store: HistoryStore, tmp_path: Path
) -> None:
    """Ids the importer makes from the source (no ids in it) and ids it gives: the
    import of the same file after a redaction is a replay, not a change."""
    from store.importing import import_sources

    source = tmp_path / "chat.jsonl"
    conversation = {
        "id": "conv-1",
        "messages": [
            {"role": "user", "content": f"my PIN is {PIN}"},
            {"role": "assistant", "content": "noted", "id": "given-1"},
        ],
    }
    source.write_text(json.dumps(conversation) + "\n")
    await import_sources(store, [source], format="openai-chat")
    (session,) = await store.sessions()
    rows = await store.history(session.session_id)
    await store.redact(session.session_id, [r.message_id for r in rows], reason="erasure")
    again = await import_sources(store, [source], format="openai-chat")
    assert list(again.skipped) == []
    after = await store.history(session.session_id, include_excluded=True)
    assert [r.message_id for r in after] == [r.message_id for r in rows]
    assert not _names_pin(await _every_text(store))
