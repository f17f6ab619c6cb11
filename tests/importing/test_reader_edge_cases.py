"""The readers' edge cases through import_sources: the other shapes each format
accepts (documents, bare lists, integer ids) and the one-line refusal of every shape it
does not. The in-memory store is enough: reading happens before any backend is asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from store.errors import InvalidSource
from store.importing import import_sources
from store.memory import InMemoryHistoryStore
from tests.importing.sources import anthropic_body, responses_items, weather_chat


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _document(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


async def _refused(path: Path, fmt: str, message: str) -> None:
    store = InMemoryHistoryStore()
    with pytest.raises(InvalidSource, match=message) as caught:
        await import_sources(store, [path], format=fmt)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    assert await store.sessions() == []


async def test_openai_chat_integer_id_is_the_session_and_a_boolean_is_no_id(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path / "ids.jsonl",
        [{"id": 7, "messages": weather_chat(1)}, {"id": True, "messages": weather_chat(1)}],
    )
    report = await import_sources(InMemoryHistoryStore(), [path], format="openai-chat")
    assert report.sessions == 2
    assert report.session_ids[0] == "7"
    assert report.session_ids[1] not in ("True", "true", "1")


async def test_openai_chat_bare_list_line_is_one_conversation(tmp_path: Path) -> None:
    path = _write(tmp_path / "bare.jsonl", [weather_chat(1), weather_chat(2)])
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path], format="openai-chat")
    assert report.sessions == 2
    assert report.messages == len(weather_chat(1)) + len(weather_chat(2))
    texts = [r.message.text for r in await store.history(report.session_ids[1])]
    assert "It is sunny (1)." in texts


async def test_openai_chat_document_of_conversations_is_one_session_each(
    tmp_path: Path,
) -> None:
    path = _document(
        tmp_path / "many.json",
        [{"id": "a", "messages": weather_chat(1)}, {"id": "b", "messages": weather_chat(2)}],
    )
    report = await import_sources(InMemoryHistoryStore(), [path], format="openai-chat")
    assert report.session_ids == ["a", "b"]
    assert report.messages == len(weather_chat(1)) + len(weather_chat(2))


async def test_openai_chat_document_of_messages_is_one_conversation(tmp_path: Path) -> None:
    messages = weather_chat(2)
    path = _document(tmp_path / "one.json", messages)
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path], format="openai-chat")
    assert report.sessions == 1 and report.messages == len(messages)
    roles = [r.message.role for r in await store.history(report.session_ids[0])]
    assert roles == [m["role"] for m in messages]


async def test_openai_chat_bad_conversation_in_a_document_names_it(tmp_path: Path) -> None:
    path = _document(
        tmp_path / "bad.json",
        [{"id": "a", "messages": weather_chat(1)}, {"id": "b", "messages": "hello"}],
    )
    await _refused(path, "openai-chat", r"conversation 2: expected a list of messages")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"messages": "hello"}, r"line 1: expected a list of messages"),
        ("just text", r"line 1: expected a conversation"),
        ({"conversation": []}, r"line 1: expected a conversation"),
    ],
)
async def test_openai_chat_line_of_no_conversation_is_refused(
    tmp_path: Path, line: Any, message: str
) -> None:
    await _refused(_write(tmp_path / "bad.jsonl", [line]), "openai-chat", message)


async def test_openai_responses_document_of_sessions(tmp_path: Path) -> None:
    first, second = responses_items(1), responses_items(2)
    path = _document(tmp_path / "sessions.json", [{"id": "r1", "input": first}, {"input": second}])
    report = await import_sources(InMemoryHistoryStore(), [path], format="openai-responses")
    assert report.sessions == 2 and report.session_ids[0] == "r1"
    assert report.messages == len(first) + len(second)
    assert report.tool_calls == report.tool_results == 3


async def test_openai_responses_document_of_one_input_object(tmp_path: Path) -> None:
    items = responses_items(2)
    path = _document(tmp_path / "one.json", {"id": "solo", "input": items})
    report = await import_sources(InMemoryHistoryStore(), [path], format="openai-responses")
    assert report.session_ids == ["solo"] and report.messages == len(items)


async def test_openai_responses_document_of_items_is_one_session(tmp_path: Path) -> None:
    items = responses_items(1)
    path = _document(tmp_path / "items.json", items)
    report = await import_sources(InMemoryHistoryStore(), [path], format="openai-responses")
    assert report.sessions == 1 and report.messages == len(items)


async def test_openai_responses_document_of_no_session_is_refused(tmp_path: Path) -> None:
    path = _document(tmp_path / "bad.json", {"output": []})
    await _refused(path, "openai-responses", r"document: expected a list of items")


async def test_openai_responses_bad_session_in_a_document_names_it(tmp_path: Path) -> None:
    path = _document(
        tmp_path / "bad.json", [{"input": responses_items(1)}, {"input": "not a list"}]
    )
    await _refused(path, "openai-responses", r"session 2: expected a list of items")


def _input_text(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def test_openai_responses_line_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    good = json.dumps(_input_text("q"))
    path.write_text(f"{good}\n{good[:10]}\n", encoding="utf-8")
    await _refused(path, "openai-responses", r"line 2: not JSON")


async def test_openai_responses_long_file_is_one_session_across_runs(tmp_path: Path) -> None:
    items = [_input_text(f"q {n}") for n in range(1001)]
    store = InMemoryHistoryStore()
    path = _write(tmp_path / "long.jsonl", items)
    report = await import_sources(store, [path], format="openai-responses")
    assert report.sessions == 1 and report.messages == 1001
    texts = [r.message.text for r in await store.history(report.session_ids[0])]
    assert texts == [f"q {n}" for n in range(1001)]


def _chatledger_line(**changes: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "format": "chatledger",
        "version": 1,
        "session_id": "s",
        "seq": 0,
        "message": {"role": "user", "contents": [{"type": "text", "text": "hi"}]},
        "source_system": None,
        "source_id": None,
    }
    line.update(changes)
    return line


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"messages": []}, r"line 2: not a chatledger JSONL line"),
        (["format", "chatledger"], r"line 2: not a chatledger JSONL line"),
        (_chatledger_line(version=2), r"line 2: unsupported version 2"),
        (_chatledger_line(version=None), r"line 2: unsupported version"),
        (_chatledger_line(session_id=""), r"line 2: session_id must be a non-empty string"),
        (_chatledger_line(session_id=False), r"line 2: session_id must be a non-empty string"),
    ],
)
async def test_chatledger_jsonl_bad_line_is_refused(
    tmp_path: Path, line: Any, message: str
) -> None:
    path = _write(tmp_path / "own.jsonl", [_chatledger_line(), line])
    await _refused(path, "jsonl", message)


async def test_chatledger_jsonl_integer_session_id_is_its_string(tmp_path: Path) -> None:
    path = _write(tmp_path / "own.jsonl", [_chatledger_line(session_id=42)])
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path], format="jsonl")
    assert report.session_ids == ["42"]
    assert [r.message.text for r in await store.history("42")] == ["hi"]


async def test_chatledger_jsonl_empty_file_imports_nothing(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path], format="jsonl")
    assert (report.sessions, report.messages) == (0, 0)
    assert await store.sessions() == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"model": "claude", "system": "x"}, r"line 2: expected a request body"),
        ([{"role": "user", "content": "hi"}], r"line 2: expected a request body"),
    ],
)
async def test_anthropic_line_of_no_body_is_refused(
    tmp_path: Path, line: Any, message: str
) -> None:
    path = _write(tmp_path / "bodies.jsonl", [anthropic_body(1), line])
    await _refused(path, "anthropic", message)


async def test_anthropic_line_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bodies.jsonl"
    good = json.dumps(anthropic_body(1))
    path.write_text(f"{good}\n{good[:25]}\n", encoding="utf-8")
    await _refused(path, "anthropic", r"line 2: not JSON")
