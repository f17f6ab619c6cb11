"""The ``pydantic-ai`` format: ``ModelMessagesTypeAdapter`` JSON as Pydantic AI itself
wrote it (the committed fixtures of ``fixtures/pydantic_ai/``, written by
``fixtures/generate_pydantic_ai.py``), imported into SQLite and PostgreSQL: exact
messages, calls and results with their error flags, times, usage, idempotence, export
round trips, damaged files that write nothing, and the command line."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.exporting import export_sessions
from store.formats.pydantic_ai import PYDANTIC_AI_MESSAGE_KEY
from store.importing import detect_format, import_sources
from strategies.messages import FunctionCallContent, FunctionResultContent, ReasoningContent
from tests.cli.helpers import assert_one_line_error, chatledger

FIXTURES = Path(__file__).parent / "fixtures" / "pydantic_ai"
ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads((FIXTURES / name).read_text())
    return loaded


def _conversation(name: str) -> str:
    return str(_load(name)[0]["conversation_id"])


async def test_the_weather_run_imports_exactly(store: HistoryStore) -> None:
    path = FIXTURES / "weather.json"
    assert detect_format(path) == "pydantic-ai"
    report = await import_sources(store, [path])
    session = _conversation("weather.json")
    assert report.session_ids == [session]
    assert (report.messages, report.tool_calls, report.tool_results) == (8, 3, 3)
    assert report.warnings == []
    rows = await store.history(session, include_excluded=True)
    messages = [row.message for row in rows]
    assert [m.role for m in messages] == [
        "system", "user", "assistant", "tool", "tool", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert messages[0].text == "You are a weather bot."
    assert messages[1].text == "Weather in Paris, Atlantis and Lyon?"
    thinking, *calls = messages[2].contents
    assert isinstance(thinking, ReasoningContent)
    assert thinking.text == "Look up both cities first."
    assert thinking.extra["signature"] == "sig-1"
    assert [
        (c.call_id, c.name, c.arguments) for c in calls if isinstance(c, FunctionCallContent)
    ] == [
        ("call_1", "get_weather", {"city": "Paris"}),
        ("call_2", "get_weather", {"city": "Atlantis"}),
    ]
    results = [m.contents[0] for m in messages if m.role == "tool"]
    assert all(isinstance(r, FunctionResultContent) for r in results)
    assert [(r.call_id, r.result, r.is_error) for r in results] == [  # type: ignore[union-attr]
        ("call_1", "sunny", False),
        ("call_2", "no such city: Atlantis", True),  # ModelRetry: outcome "retried"
        ("call_3", "rainy", False),
    ]
    string_call = messages[5].contents[0]
    assert isinstance(string_call, FunctionCallContent)
    assert string_call.arguments == '{"city": "Lyon"}'  # as the model wrote it
    assert messages[7].text == "Paris is sunny; Atlantis does not exist; Lyon is rainy."
    source = _load("weather.json")
    assert messages[0].created_at == datetime.fromisoformat(source[0]["parts"][0]["timestamp"])
    assert messages[2].created_at == datetime.fromisoformat(source[1]["timestamp"])
    kept = messages[2].metadata[PYDANTIC_AI_MESSAGE_KEY]
    assert isinstance(kept, dict)
    assert kept["usage"] == source[1]["usage"]
    assert kept["model_name"] == source[1]["model_name"]
    assert {row.source_system for row in rows} == {"pydantic-ai"}


async def test_a_folder_is_one_session_a_file_and_a_second_import_stores_nothing(
    store: HistoryStore,
) -> None:
    assert detect_format(FIXTURES) == "pydantic-ai"
    report = await import_sources(store, [FIXTURES])
    assert sorted(report.session_ids) == sorted(
        [_conversation("weather.json"), _conversation("chat.json")]
    )
    assert report.new == report.messages == 13
    chat = await store.history(_conversation("chat.json"))
    assert [(r.message.role, r.message.text) for r in chat] == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello! How can I help?"),
        ("user", "Say it in French"),
        ("assistant", "Bonjour."),
    ]
    again = await import_sources(store, [FIXTURES])
    assert (again.new, again.already_stored) == (0, 13)


async def test_without_a_conversation_id_the_file_name_is_the_session(
    store: HistoryStore, tmp_path: Path
) -> None:
    messages = _load("chat.json")
    for message in messages:
        del message["conversation_id"]
    path = tmp_path / "my-chat.json"
    path.write_text(json.dumps(messages))
    report = await import_sources(store, [path])
    assert report.session_ids == ["my-chat"]
    assert report.warnings == [
        f"{path}: document: the source gives no session id; the session is named after its "
        "file: my-chat"
    ]
    named = await import_sources(store, [FIXTURES])  # ids of their own: nothing said
    assert not any("named after its file" in w for w in named.warnings)


@pytest.mark.parametrize("fixture", ["weather.json", "chat.json"])
async def test_export_gives_back_the_file_pydantic_wrote(store: HistoryStore, fixture: str) -> None:
    await import_sources(store, [FIXTURES / fixture])
    session = _conversation(fixture)
    chunks = [c async for c in export_sessions(store, [session], format="pydantic-ai")]
    document = json.loads("".join(chunks))
    assert document["id"] == session
    assert document["messages"] == _load(fixture)
    assert set(document["chatledger"]) == {"version", "format", "message_ids", "created_at"}
    bare = [c async for c in export_sessions(store, [session], format="pydantic-ai", record=False)]
    assert json.loads("".join(bare)) == {"id": session, "messages": _load(fixture)}


async def test_an_export_imports_into_the_same_store_as_already_stored(
    store: HistoryStore, tmp_path: Path
) -> None:
    await import_sources(store, [FIXTURES])
    sessions = [_conversation("weather.json"), _conversation("chat.json")]
    out = tmp_path / "export.jsonl"
    out.write_text(
        "".join([c async for c in export_sessions(store, sessions, format="pydantic-ai")])
    )
    assert detect_format(out) == "pydantic-ai"
    again = await import_sources(store, [out])
    assert (again.new, again.already_stored) == (0, 13)


@pytest.mark.parametrize(
    ("damage", "place"),
    [
        (lambda ms: ms.__setitem__(2, {"kind": "reply", "parts": []}), "message 3"),
        (lambda ms: ms[1]["parts"][1].pop("tool_call_id"), "message 2"),
        (lambda ms: ms[2]["parts"][0].pop("tool_call_id"), "message 3"),
        (lambda ms: ms[0]["parts"][1].__setitem__("content", 7), "message 1"),
    ],
)
async def test_a_damaged_file_is_refused_naming_its_place_and_nothing_is_written(
    store: HistoryStore, tmp_path: Path, damage: Any, place: str
) -> None:
    messages = _load("weather.json")
    damage(messages)
    path = tmp_path / "weather.json"
    path.write_text(json.dumps(messages))
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [path], format="pydantic-ai")
    assert str(path) in str(raised.value)
    assert place in str(raised.value)
    assert "\n" not in str(raised.value)
    assert await store.sessions() == []


async def test_a_truncated_file_is_refused_and_nothing_is_written(
    store: HistoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "weather.json"
    text = (FIXTURES / "weather.json").read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(InvalidSource, match=r"weather\.json"):
        await import_sources(store, [path], format="pydantic-ai")
    assert await store.sessions() == []


async def test_a_retry_without_its_call_is_refused_with_strict(
    store: HistoryStore, tmp_path: Path
) -> None:
    messages = _load("weather.json")
    del messages[1]  # the response with the first calls
    path = tmp_path / "orphans.json"
    path.write_text(json.dumps(messages))
    with pytest.raises(InvalidSource, match=r"orphans\.json"):
        await import_sources(store, [path], strict=True)
    assert await store.sessions() == []
    report = await import_sources(store, [path])
    assert report.warnings


def test_cli_imports_then_says_already_stored(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "chats"
    shutil.copytree(FIXTURES, source)
    args = ("import", "--create", str(source), "--format", "pydantic-ai", "--url", db_url)
    first = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[1] == "13 stored, 0 already stored"
    second = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert second.stdout.splitlines()[1] == "0 stored, 13 already stored"
    (source / "chat.json").write_text('[{"kind": "request", "parts": [')
    refused = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert_one_line_error(refused, contains="chat.json")
