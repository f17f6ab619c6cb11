"""import_sources on SQLite and PostgreSQL: every format's counts, texts and call ids,
idempotence, changed sources, orphans, and bad input that writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.exporting import export_sessions
from store.importing import detect_format, import_sources, validate, write
from store.importing.stored import append_sessions
from store.memory import InMemoryHistoryStore
from store.rules.import_mark import IMPORT_MARK_KEY
from strategies.groups import call_links
from strategies.messages import FunctionResultContent
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.importing.sources import (
    Expected,
    anthropic_body,
    chat_expected,
    langchain_messages,
    responses_expected,
    responses_items,
    weather_chat,
    write_agent_framework_files,
    write_chat_jsonl,
    write_langchain,
    write_openai_agents,
)


async def _check(store: HistoryStore, expected: Expected) -> None:
    rows = await store.history(expected.session_id, include_excluded=True)
    messages = [row.message for row in rows]
    assert [m.role for m in messages] == expected.roles
    assert [m.text for m in messages if m.text] == [t for t in expected.texts if t]
    calls = [c for m in messages for c in call_links(m)[0]]
    results = [r for m in messages for r in call_links(m)[1]]
    assert calls == expected.call_ids
    assert results == expected.result_ids
    outputs = [
        c.result for m in messages for c in m.contents if isinstance(c, FunctionResultContent)
    ]
    assert len(outputs) == len(expected.result_ids) and all(outputs)


async def _session_ids(store: HistoryStore) -> list[str]:
    return [s.session_id for s in await store.sessions()]


async def test_openai_chat_jsonl_counts_and_idempotence(
    store: HistoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "chats.jsonl"
    conversations = {"conv-a": weather_chat(2), None: weather_chat(3)}
    write_chat_jsonl(path, conversations)
    assert detect_format(path) == "openai-chat"
    report = await import_sources(store, [path], session_prefix="x/")
    total = sum(len(m) for m in conversations.values())
    assert (report.sessions, report.messages, report.new, report.already_stored) == (
        2,
        total,
        total,
        0,
    )
    assert report.tool_calls == report.tool_results == 5
    assert report.tokens > 0 and report.formats == {str(path): "openai-chat"}
    assert "x/conv-a" in report.session_ids
    await _check(store, chat_expected("x/conv-a", conversations["conv-a"]))
    hashed = next(s for s in report.session_ids if s != "x/conv-a")
    await _check(store, chat_expected(hashed, conversations[None]))
    again = await import_sources(store, [path], session_prefix="x/")
    assert (again.new, again.already_stored) == (0, total)
    assert again.session_ids == report.session_ids
    assert sorted(await _session_ids(store)) == sorted(report.session_ids)
    for session_id in report.session_ids:
        assert len(await store.history(session_id)) == len(
            conversations["conv-a" if session_id == "x/conv-a" else None]
        )


async def test_provenance_is_recorded(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    write_chat_jsonl(path, {"c": weather_chat(1)})
    await import_sources(store, [path])
    rows = await store.history("c")
    assert {row.source_system for row in rows} == {"openai-chat"}
    assert [row.source_id for row in rows] == [
        f"c line 1 message {i}" for i in range(1, len(rows) + 1)
    ]


async def test_openai_agents_database(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    sessions = {"s1": responses_items(2), "s2": responses_items(1)}
    await write_openai_agents(path, sessions)
    assert detect_format(path) == "openai-agents"
    report = await import_sources(store, [path])
    assert report.session_ids == ["s1", "s2"]
    assert report.messages == sum(len(items) for items in sessions.values())
    for session_id, items in sessions.items():
        await _check(store, responses_expected(session_id, items))
        rows = await store.history(session_id)
        assert all(row.message.created_at is not None for row in rows)
    again = await import_sources(store, [path])
    assert (again.new, again.already_stored) == (0, report.messages)


async def test_a_sqlite_url_names_the_same_source_as_its_path(
    store: HistoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "agents.db"
    await write_openai_agents(path, {"s1": responses_items(1)})
    url = f"sqlite:///{path}"  # absolute: sqlite:////tmp/...
    assert detect_format(url) == "openai-agents"
    report = await import_sources(store, [url])
    assert report.session_ids == ["s1"]
    again = await import_sources(store, [path])
    assert (again.new, again.already_stored) == (0, report.messages)
    for refused in ("mysql://me@127.0.0.1/agents", "sqlite:///"):
        with pytest.raises(InvalidSource, match="URL"):
            await import_sources(store, [refused])
    assert [s.session_id for s in await store.sessions()] == ["s1"]


async def test_langchain_database(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "lc.db"
    write_langchain(path, {"lc-1": langchain_messages(2)})
    assert detect_format(path) == "langchain"
    report = await import_sources(store, [path], format="langchain")
    expected_roles = ["system"] + ["user", "assistant", "tool", "assistant"] * 2
    rows = await store.history("lc-1")
    assert [row.message.role for row in rows] == expected_roles
    assert report.tool_calls == report.tool_results == 2
    assert [c for row in rows for c in call_links(row.message)[1]] == ["call_0", "call_1"]
    again = await import_sources(store, [path])
    assert again.new == 0


async def test_agent_framework_folder(store: HistoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "af"
    await write_agent_framework_files(folder, {"plain": 1, "with/slash": 2})
    assert detect_format(folder) == "agent-framework"
    report = await import_sources(store, [folder])
    assert sorted(report.session_ids) == ["plain", "with/slash"]
    rows = await store.history("with/slash")
    assert [row.message.role for row in rows] == ["system"] + [
        "user",
        "assistant",
        "tool",
        "assistant",
    ] * 2
    again = await import_sources(store, [folder])
    assert (again.new, again.already_stored) == (0, report.messages)


async def test_anthropic_bodies(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "bodies.json"
    path.write_text(json.dumps([{**anthropic_body(2), "id": "a-1"}]), encoding="utf-8")
    assert detect_format(path) == "anthropic"
    report = await import_sources(store, [path])
    rows = await store.history("a-1")
    assert [row.message.role for row in rows] == ["system"] + [
        "user",
        "assistant",
        "tool",
        "assistant",
    ] * 2
    results = [c for row in rows for c in row.message.contents]
    assert [c.call_id for c in results if isinstance(c, FunctionResultContent)] == [
        "toolu_0",
        "toolu_1",
    ]
    assert report.tool_calls == 2
    assert (await import_sources(store, [path])).already_stored == report.messages


async def test_utf16_with_bom_is_read(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    line = json.dumps({"id": "u", "messages": weather_chat(1)}) + "\n"
    path.write_bytes(line.encode("utf-16"))
    report = await import_sources(store, [path])
    assert report.session_ids == ["u"]


def _bad_variants(tmp_path: Path) -> dict[str, tuple[Path, str, str | None]]:
    good = json.dumps({"id": "ok", "messages": weather_chat(1)})
    variants: dict[str, tuple[Path, str, str | None]] = {}

    def write(name: str, content: bytes, message: str, fmt: str | None = None) -> None:
        path = tmp_path / name
        path.write_bytes(content)
        variants[name] = (path, message, fmt)

    write("truncated.jsonl", (good + "\n" + good[:40] + "\n").encode(), r"line 2: not JSON")
    write(
        "role.jsonl",
        (good + "\n" + json.dumps({"messages": [{"role": "narrator", "content": "x"}]})).encode(),
        r"line 2 message 1: .*'narrator'",
    )
    write("latin1.jsonl", (good + "\n").encode() + b'{"messages": "\xe9"}\n', "not UTF-8")
    write("mismatch.jsonl", (good + "\n").encode(), "not anthropic", "anthropic")
    write("nothing.json", b'{"hello": 1}', "not a chat log")
    return variants


@pytest.mark.parametrize(
    "name", ["truncated.jsonl", "role.jsonl", "latin1.jsonl", "mismatch.jsonl", "nothing.json"]
)
async def test_bad_input_writes_nothing(store: HistoryStore, tmp_path: Path, name: str) -> None:
    path, message, fmt = _bad_variants(tmp_path)[name]
    with pytest.raises(InvalidSource, match=message) as caught:
        await import_sources(store, [path], format=fmt)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    assert await _session_ids(store) == []


async def test_database_of_no_format_is_refused(store: HistoryStore, tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE things (id INTEGER)")
    connection.close()
    with pytest.raises(InvalidSource, match="none of the known formats"):
        await import_sources(store, [path])
    assert await _session_ids(store) == []


async def test_skip_invalid_imports_the_valid_sessions(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    good = json.dumps({"id": "ok", "messages": weather_chat(1)})
    bad = json.dumps({"id": "bad", "messages": [{"role": "narrator", "content": "x"}]})
    path.write_text(f"{good}\n{bad}\n{good[:30]}\n", encoding="utf-8")
    report = await import_sources(store, [path], skip_invalid=True)
    assert await _session_ids(store) == ["ok"]
    assert report.session_ids == ["ok"]
    reasons = [s.reason for s in report.skipped]
    assert len(reasons) == 2
    assert any("line 2 message 1" in r for r in reasons)
    assert any("line 3: not JSON" in r for r in reasons)


async def test_changed_source_skips_the_session(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    first = weather_chat(1)
    write_chat_jsonl(path, {"c": first, "d": weather_chat(1)})
    await import_sources(store, [path])
    changed = [dict(m) for m in first]
    changed[1] = {"role": "user", "content": "something else"}
    write_chat_jsonl(path, {"c": changed, "d": weather_chat(2)})
    with pytest.raises(InvalidSource, match="changed since it was imported"):
        await import_sources(store, [path])
    report = await import_sources(store, [path], skip_invalid=True)
    assert [s.session_id for s in report.skipped] == ["c"]
    assert report.new == 4  # the second turn of d
    assert [r.message.text for r in await store.history("c")][1] == "weather 0?"


async def test_orphan_results_warn_and_strict_refuses(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "orphan.jsonl"
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "nowhere", "content": "late"},
    ]
    write_chat_jsonl(path, {"o": messages})
    with pytest.raises(InvalidSource, match="line 1 message 2: a result for call 'nowhere'"):
        await import_sources(store, [path], strict=True)
    assert await _session_ids(store) == []
    report = await import_sources(store, [path])
    assert len(report.warnings) == 1 and "orphan" in report.warnings[0]
    assert len(await store.history("o", include_excluded=True)) == 2


async def test_dry_run_writes_nothing(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    write_chat_jsonl(path, {"c": weather_chat(2)})
    report = await import_sources(store, [path], dry_run=True)
    assert report.dry_run and report.new == report.messages == 9
    assert await _session_ids(store) == []


async def test_compact_after_import(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    write_chat_jsonl(path, {"c": weather_chat(6)})
    await import_sources(store, [path], compact="truncation:max_n=8,compact_to=4")
    events = await store.audit("c")
    assert [event.phase for event in events] == ["import"]
    assert len(await store.history("c")) < len(await store.history("c", include_excluded=True))


async def test_responses_items_one_a_line_are_one_session(
    store: HistoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "items.jsonl"
    items = responses_items(3)
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    assert detect_format(path) == "openai-responses"
    report = await import_sources(store, [path])
    (session_id,) = report.session_ids
    await _check(store, responses_expected(session_id, items))
    rows = await store.history(session_id)
    assert [row.source_id for row in rows] == [f"line {n}" for n in range(1, len(items) + 1)]


async def test_damaged_database_row_writes_nothing(store: HistoryStore, tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "agents.db"
    await write_openai_agents(path, {"s1": responses_items(1), "s2": responses_items(1)})
    with sqlite3.connect(path) as connection:
        (last,) = connection.execute("SELECT max(id) FROM agent_messages").fetchone()
        connection.execute("UPDATE agent_messages SET message_data = '{\"ty' WHERE id = ?", (last,))
    connection.close()
    with pytest.raises(InvalidSource, match=rf"row {last}: message_data is not JSON"):
        await import_sources(store, [path])
    assert await _session_ids(store) == []


def _many_chats(path: Path) -> dict[str | None, list[dict[str, Any]]]:
    conversations: dict[str | None, list[dict[str, Any]]] = {
        f"s{n}": weather_chat(1 + n % 3) for n in range(6)
    }
    write_chat_jsonl(path, conversations)
    return conversations


async def test_writes_hold_many_sessions_and_each_session_whole(
    store: HistoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chats.jsonl"
    conversations = _many_chats(path)  # sessions of 5, 9 and 13 messages
    total = sum(len(m) for m in conversations.values())
    monkeypatch.setattr(write, "BATCH", 10)
    monkeypatch.setattr(validate, "WINDOW", 5)
    writes: list[list[tuple[str, int]]] = []

    async def recorded(target: Any, batches: Any) -> None:
        writes.append([(session_id, len(messages)) for session_id, messages, _ in batches])
        await append_sessions(target, batches)

    monkeypatch.setattr(write, "append_sessions", recorded)
    report = await import_sources(store, [path])
    assert (report.sessions, report.new, report.already_stored) == (6, total, 0)
    assert max(len(w) for w in writes) > 1  # a write holds many sessions
    assert all(sum(n for _, n in w) <= 10 for w in writes)
    parts: dict[str, int] = {}
    for w in writes:
        for session_id, _ in w:
            parts[session_id] = parts.get(session_id, 0) + 1
    assert {s: n for s, n in parts.items() if n > 1} == {"s2": 3, "s5": 3}  # 13 messages
    for session_id, messages in conversations.items():
        assert session_id is not None
        await _check(store, chat_expected(session_id, messages))
    assert IMPORT_MARK_KEY not in await store.get_metadata("s2")
    again = await import_sources(store, [path])
    assert (again.new, again.already_stored) == (0, total)


class _Interrupted(Exception):
    """The process stopping in the middle of the write pass."""


async def test_interrupted_write_pass_is_completed_by_running_again(
    store: HistoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chats.jsonl"
    conversations = _many_chats(path)
    total = sum(len(m) for m in conversations.values())
    monkeypatch.setattr(write, "BATCH", 10)
    calls = [0]

    async def interrupted(target: Any, batches: Any) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise _Interrupted
        await append_sessions(target, batches)

    monkeypatch.setattr(write, "append_sessions", interrupted)
    with pytest.raises(_Interrupted):
        await import_sources(store, [path])
    stored = {s.session_id: s.stored_messages for s in await store.sessions()}
    assert stored == {"s0": 5, "s1": 9, "s2": 1}  # whole, or marked (s2)
    assert await store.get_metadata("s1") == {}
    assert IMPORT_MARK_KEY in await store.get_metadata("s2")
    monkeypatch.setattr(write, "append_sessions", append_sessions)
    report = await import_sources(store, [path])
    assert (report.new, report.already_stored) == (total - 15, 15)
    for session_id, messages in conversations.items():
        assert session_id is not None
        await _check(store, chat_expected(session_id, messages))
    assert IMPORT_MARK_KEY not in await store.get_metadata("s2")


async def test_a_result_answering_a_stored_call_is_no_orphan(
    store: HistoryStore, tmp_path: Path
) -> None:
    chats = tmp_path / "chats.jsonl"
    write_chat_jsonl(chats, {"c": weather_chat(1)})
    await import_sources(store, [chats])
    lines = [
        chunk.replace('"session_id":"c"', '"session_id":"d"')
        async for chunk in export_sessions(store, ["c"], format="jsonl")
    ]
    assert len(lines) == 5 and all('"session_id":"d"' in line for line in lines)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(lines[:3]), encoding="utf-8")  # up to the call
    second.write_text("".join(lines[3:]), encoding="utf-8")  # its result and the answer
    await import_sources(store, [first])
    report = await import_sources(store, [second], strict=True)
    assert (report.new, report.warnings) == (2, [])
    await _check(store, chat_expected("d", weather_chat(1)))


async def test_other_backends_are_asked_session_by_session(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    conversations = _many_chats(path)
    total = sum(len(m) for m in conversations.values())
    memory = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())
    report = await import_sources(memory, [path])
    assert (report.sessions, report.new) == (6, total)
    for session_id, messages in conversations.items():
        assert session_id is not None
        rows = await memory.history(session_id, include_excluded=True)
        assert [r.message.role for r in rows] == chat_expected(session_id, messages).roles
    again = await import_sources(memory, [path])
    assert (again.new, again.already_stored) == (0, total)
