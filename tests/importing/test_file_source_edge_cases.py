"""Edge cases of file and database sources through import_sources: encodings and blank
lines, LangChain and Agent Framework documents, a messages table named with ``table``,
and what detection refuses. The in-memory store is enough: reading happens before any
backend is asked."""

from __future__ import annotations

import codecs
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from store.errors import InvalidSource
from store.importing import detect_format, import_sources
from store.memory import InMemoryHistoryStore
from tests.importing.sources import weather_chat, write_chat_jsonl


async def _refused(path: Path, fmt: str | None, message: str, table: str | None = None) -> None:
    store = InMemoryHistoryStore()
    with pytest.raises(InvalidSource, match=message) as caught:
        await import_sources(store, [path], format=fmt, table=table)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    assert await store.sessions() == []


async def test_utf8_bom_and_blank_lines_are_read(tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    write_chat_jsonl(plain, {"c": weather_chat(1)})
    line = plain.read_text(encoding="utf-8").strip()
    path = tmp_path / "bom.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + f"\n{line}\n   \n\n".encode())
    assert detect_format(path) == "openai-chat"
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path])
    assert report.session_ids == ["c"] and report.messages == len(weather_chat(1))
    assert [r.message.text for r in await store.history("c")][1] == "weather 0?"


def _lc(kind: str, content: str) -> dict[str, Any]:
    return {"type": kind, "data": {"content": content}}


async def test_langchain_document_of_sessions(tmp_path: Path) -> None:
    path = tmp_path / "lc.json"
    sessions = [
        {"session_id": "one", "messages": [_lc("human", "hi"), _lc("ai", "hello")]},
        {"session_id": "two", "messages": [_lc("human", "bye")]},
    ]
    path.write_text(json.dumps(sessions), encoding="utf-8")
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path], format="langchain")
    assert report.session_ids == ["one", "two"] and report.messages == 3
    assert [r.message.role for r in await store.history("one")] == ["user", "assistant"]


async def test_langchain_document_of_no_session_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lc.json"
    path.write_text(json.dumps([{"session_id": "one", "history": []}]), encoding="utf-8")
    await _refused(path, "langchain", r'session 1: expected \{"session_id"')


async def test_langchain_line_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lc.jsonl"
    good = json.dumps({"session_id": "one", "messages": [_lc("human", "hi")]})
    path.write_text(f"{good}\n{good[:20]}\n", encoding="utf-8")
    await _refused(path, "langchain", r"line 2: not JSON")


def _af(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "contents": [{"type": "text", "text": text}]}


async def test_agent_framework_history_file_is_one_session(tmp_path: Path) -> None:
    path = tmp_path / "chat-7.jsonl"
    lines = [_af("user", "hi"), _af("assistant", "hello")]
    path.write_text("".join(json.dumps(v) + "\n" for v in lines), encoding="utf-8")
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path], format="agent-framework")
    assert report.session_ids == ["chat-7"]
    assert [r.message.text for r in await store.history("chat-7")] == ["hi", "hello"]


async def test_agent_framework_bad_message_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    lines = [_af("user", "hi"), _af("narrator", "once upon a time")]
    path.write_text("".join(json.dumps(v) + "\n" for v in lines), encoding="utf-8")
    await _refused(path, "agent-framework", r"chat\.jsonl: line 2: .*narrator")


async def test_agent_framework_session_document_skips_state_without_messages(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session.json"
    document = {
        "type": "session",
        "session_id": "s1",
        "state": {
            "settings": {"temperature": 0},
            "history": {"messages": [_af("user", "hi"), _af("assistant", "hello")]},
        },
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path], format="agent-framework")
    assert report.session_ids == ["s1"] and report.messages == 2
    assert [r.message.text for r in await store.history("s1")] == ["hi", "hello"]


async def test_agent_framework_document_of_no_session_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text(json.dumps([{"type": "thread", "contents": []}]), encoding="utf-8")
    await _refused(path, "agent-framework", r"session 1: expected AgentSession\.to_dict\(\)")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"42", "document: not a chat log of any known format"),
        (b'"hello"', "document: not a chat log of any known format"),
    ],
)
async def test_detection_refuses_a_document_of_no_record(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "value.json"
    path.write_bytes(content)
    await _refused(path, None, message)


async def test_detection_refuses_a_first_line_not_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    good = json.dumps({"messages": weather_chat(1)})
    path.write_text(f"{good[:15]}\n{good}\n", encoding="utf-8")
    await _refused(path, None, r"line 1: not JSON")


def _database(path: Path, table: str, message_column: str) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute(
            f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, session_id TEXT, "
            f"{message_column} TEXT, created_at TEXT)"
        )
    connection.close()


def _insert(path: Path, table: str, column: str, rows: list[tuple[str, str, str | None]]) -> None:
    with sqlite3.connect(path) as connection:
        connection.executemany(
            f"INSERT INTO {table} (session_id, {column}, created_at) VALUES (?, ?, ?)", rows
        )
    connection.close()


async def test_renamed_agents_table_is_detected_and_read(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    _database(path, "my_items", "message_data")
    _insert(
        path,
        "my_items",
        "message_data",
        [
            ("s", json.dumps({"role": "user", "content": "hi"}), None),
            ("s", json.dumps({"role": "user", "content": "again"}), ""),
            ("s", json.dumps({"role": "user", "content": "late"}), "2026-01-02 03:04:05"),
        ],
    )
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path], table="my_items")
    assert report.formats == {str(path): "openai-agents"}
    assert report.session_ids == ["s"] and report.messages == 3
    rows = await store.history("s")
    assert [r.message.text for r in rows] == ["hi", "again", "late"]
    stamped = rows[2].message.created_at
    assert stamped is not None and (stamped.year, stamped.hour) == (2026, 3)
    assert stamped.utcoffset() is not None and not stamped.utcoffset()


async def test_renamed_langchain_table_is_detected_and_read(tmp_path: Path) -> None:
    path = tmp_path / "lc.db"
    _database(path, "my_messages", "message")
    _insert(path, "my_messages", "message", [("s", json.dumps(_lc("human", "hi")), None)])
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path], table="my_messages")
    assert report.formats == {str(path): "langchain"}
    assert [r.message.text for r in await store.history("s")] == ["hi"]


async def test_a_named_table_of_no_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    _database(path, "things", "payload")
    await _refused(path, None, "a database of none of the known formats", table="things")
