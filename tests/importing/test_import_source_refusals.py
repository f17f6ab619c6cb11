"""import_sources' refusals of whole sources (an unknown format, a missing path, a bad
table name, a source that fails as it is read) with and without ``skip_invalid``, an
empty database, and a session that exists with no messages on a backend asked session
by session. The in-memory store is enough: reading happens before any backend is asked."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from store.errors import InvalidInput, InvalidSource
from store.importing import import_sources
from store.memory import InMemoryHistoryStore
from tests.importing.sources import weather_chat, write_chat_jsonl


def _chats(tmp_path: Path, name: str = "chats.jsonl") -> Path:
    path = tmp_path / name
    write_chat_jsonl(path, {"c": weather_chat(1)})
    return path


async def test_unknown_format_is_invalid_input(tmp_path: Path) -> None:
    store = InMemoryHistoryStore()
    with pytest.raises(InvalidInput, match=r"unknown format 'yaml' \(known: .*openai-chat"):
        await import_sources(store, [_chats(tmp_path)], format="yaml")
    assert await store.sessions() == []


async def test_missing_source_with_a_format_is_refused(tmp_path: Path) -> None:
    store = InMemoryHistoryStore()
    missing = tmp_path / "gone.jsonl"
    with pytest.raises(InvalidSource, match=r"gone\.jsonl: no such file or folder"):
        await import_sources(store, [_chats(tmp_path), missing], format="openai-chat")
    assert await store.sessions() == []


async def test_skip_invalid_lists_a_missing_source_and_imports_the_others(
    tmp_path: Path,
) -> None:
    store = InMemoryHistoryStore()
    missing = tmp_path / "gone.jsonl"
    report = await import_sources(store, [missing, _chats(tmp_path)], skip_invalid=True)
    assert report.session_ids == ["c"]
    assert [(s.source, s.session_id) for s in report.skipped] == [(str(missing), None)]
    assert "no such file or folder" in report.skipped[0].reason
    assert [s.session_id for s in await store.sessions()] == ["c"]


async def test_skip_invalid_skips_a_source_that_fails_as_it_is_read(tmp_path: Path) -> None:
    bad = tmp_path / "own.jsonl"
    line = {
        "format": "chatledger",
        "version": 1,
        "session_id": "mine",
        "seq": 0,
        "message": {"role": "user", "contents": [{"type": "text", "text": "hi"}]},
        "source_system": None,
        "source_id": None,
    }
    bad.write_text(
        json.dumps(line) + "\n" + json.dumps({**line, "version": 9}) + "\n", encoding="utf-8"
    )
    store = InMemoryHistoryStore()
    report = await import_sources(store, [bad, _chats(tmp_path)], skip_invalid=True)
    assert report.session_ids == ["c"]
    assert len(report.skipped) == 1 and "line 2: unsupported version 9" in report.skipped[0].reason
    assert [s.session_id for s in await store.sessions()] == ["c"]


def _agents_database(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE agent_sessions (session_id TEXT PRIMARY KEY)")
        connection.execute(
            "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, "
            "message_data TEXT, created_at TEXT)"
        )
    connection.close()


async def test_an_empty_database_imports_nothing(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    _agents_database(path)
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path])
    assert report.formats == {str(path): "openai-agents"}
    assert (report.sessions, report.messages) == (0, 0)
    assert await store.sessions() == []


async def test_a_table_name_that_is_not_a_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    _agents_database(path)
    store = InMemoryHistoryStore()
    with pytest.raises(InvalidSource, match=r"invalid table name 'x; DROP TABLE agent_messages'"):
        await import_sources(
            store, [path], format="openai-agents", table="x; DROP TABLE agent_messages"
        )
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM agent_messages").fetchone() == (0,)
    connection.close()


async def test_a_stored_session_without_messages_is_imported_into(tmp_path: Path) -> None:
    store = InMemoryHistoryStore()
    await store.set_metadata("c", {"owner": "me"})
    report = await import_sources(store, [_chats(tmp_path)])
    assert (report.new, report.already_stored) == (len(weather_chat(1)), 0)
    assert [r.message.text for r in await store.history("c")][1] == "weather 0?"
    assert await store.get_metadata("c") == {"owner": "me"}


async def test_a_session_in_two_sources_is_counted_once(tmp_path: Path) -> None:
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    write_chat_jsonl(first, {"c": weather_chat(1)})
    grown = [*weather_chat(1), {"role": "user", "content": "and tomorrow?"}]
    write_chat_jsonl(second, {"d": weather_chat(1), "c": grown})  # c again, further on
    store = InMemoryHistoryStore()
    report = await import_sources(store, [first, second])
    assert report.session_ids == ["c", "d"] and report.sessions == 2
    assert report.messages == report.new == 2 * len(weather_chat(1)) + 1
    texts = [r.message.text for r in await store.history("c")]
    assert texts[1] == "weather 0?" and texts[-1] == "and tomorrow?"
    assert len(texts) == len(grown)


async def test_a_source_holding_only_the_rest_of_a_session_is_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    write_chat_jsonl(first, {"c": weather_chat(1)})
    write_chat_jsonl(second, {"c": [{"role": "user", "content": "and tomorrow?"}]})
    store = InMemoryHistoryStore()
    with pytest.raises(InvalidSource, match=r"two\.jsonl: line 1 message 1: session 'c' has "):
        await import_sources(store, [first, second])
    report = await import_sources(store, [first, second], skip_invalid=True)
    assert [(s.source, s.session_id, s.where) for s in report.skipped] == [
        (str(second), "c", "line 1")
    ]
    assert report.messages == report.new == len(weather_chat(1))
