"""The ``vercel-ai`` format: ``UIMessage[]`` JSON as the Vercel AI SDK itself assembled
it (the committed fixtures of ``fixtures/vercel_ai/``, written by
``fixtures/generate_vercel_ai.mjs``), imported into SQLite and PostgreSQL: exact
messages, tool parts cut into calls and results with their error flags, files and
sources kept, idempotence, export round trips, damaged files that write nothing, and the
command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.exporting import export_sessions
from store.importing import detect_format, import_sources
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    OtherContent,
    ReasoningContent,
    UriContent,
)
from tests.cli.helpers import assert_one_line_error, chatledger

FIXTURES = Path(__file__).parent / "fixtures" / "vercel_ai"
ROOT = Path(__file__).resolve().parents[2]
WEATHER_IDS = [
    "sys-1", "msg-u1", "msg-a1", "msg-a1/call_1", "msg-a1/call_2", "msg-a1#3",
    "msg-a1/call_3", "msg-a1#5", "msg-u2", "msg-a2",
]  # fmt: skip


def _load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


async def test_a_chat_imports_exactly(store: HistoryStore) -> None:
    path = FIXTURES / "weather.json"
    assert detect_format(path) == "vercel-ai"
    report = await import_sources(store, [path])
    assert report.session_ids == ["weather"]  # a bare list: the file's name, said
    assert (report.messages, report.tool_calls, report.tool_results) == (10, 3, 3)
    assert report.warnings == [
        f"{path}: document: the source gives no session id; the session is named after its "
        "file: weather"
    ]
    rows = await store.history("weather", include_excluded=True)
    messages = [row.message for row in rows]
    assert [m.message_id for m in messages] == WEATHER_IDS
    assert [m.role for m in messages] == [
        "system", "user", "assistant", "tool", "tool", "assistant", "tool", "assistant",
        "user", "assistant",
    ]  # fmt: skip
    _, image = messages[1].contents
    assert messages[1].text == "Weather in Paris and Atlantis?"
    assert isinstance(image, UriContent)
    assert (image.uri, image.media_type, image.extra) == (
        "https://example.com/map.png",
        "image/png",
        {"filename": "map.png"},
    )
    step, reasoning, *calls = messages[2].contents
    assert isinstance(step, OtherContent) and step.kind == "step-start"
    assert isinstance(reasoning, ReasoningContent) and reasoning.text == "Look up both cities."
    dynamic = messages[5].contents[1]
    assert [
        (c.call_id, c.name, c.arguments)
        for c in [*calls, dynamic]
        if isinstance(c, FunctionCallContent)
    ] == [
        ("call_1", "getWeather", {"city": "Paris"}),
        ("call_2", "getWeather", {"city": "Atlantis"}),
        ("call_3", "lookup", {"q": "Atlantis"}),
    ]
    results = [m.contents[0] for m in messages if m.role == "tool"]
    assert [
        (r.call_id, r.result, r.is_error) for r in results if isinstance(r, FunctionResultContent)
    ] == [
        ("call_1", {"weather": "sunny", "celsius": 21}, False),
        ("call_2", "no such city: Atlantis", True),  # output-error
        ("call_3", "a legendary island", False),
    ]
    source = messages[7].contents[0]
    assert isinstance(source, OtherContent) and source.kind == "source-url"
    assert source.payload["url"] == "https://example.com/atlantis"
    assert messages[7].text == "Paris is sunny (21 °C); Atlantis is a legend."
    assert {row.source_system for row in rows} == {"vercel-ai"}


async def test_a_chat_with_its_id_and_a_pending_call(store: HistoryStore) -> None:
    report = await import_sources(store, [FIXTURES / "booking.json"])
    assert report.session_ids == ["chat-booking"]
    rows = await store.history("chat-booking")
    assistant = rows[-1].message
    assert [c.type for c in assistant.contents] == ["other", "text", "other", "function_call"]
    data = assistant.contents[2]
    assert isinstance(data, OtherContent)
    assert (data.kind, data.payload) == (
        "data-progress",
        {"id": "progress-1", "data": {"step": "searching"}},
    )


async def test_a_folder_imports_and_a_second_import_stores_nothing(store: HistoryStore) -> None:
    assert detect_format(FIXTURES) == "vercel-ai"
    report = await import_sources(store, [FIXTURES])
    assert sorted(report.session_ids) == ["chat-booking", "weather"]
    assert report.new == report.messages == 12
    again = await import_sources(store, [FIXTURES])
    assert (again.new, again.already_stored) == (0, 12)


@pytest.mark.parametrize("fixture", ["weather.json", "booking.json"])
async def test_export_gives_back_what_the_sdk_wrote(store: HistoryStore, fixture: str) -> None:
    report = await import_sources(store, [FIXTURES / fixture])
    session = report.session_ids[0]
    chunks = [c async for c in export_sessions(store, [session], format="vercel-ai")]
    document = json.loads("".join(chunks))
    source = _load(fixture)
    assert document["messages"] == (source["messages"] if isinstance(source, dict) else source)
    assert set(document["chatledger"]) == {"version", "format", "message_ids", "created_at"}


async def test_an_export_imports_into_the_same_store_as_already_stored(
    store: HistoryStore, tmp_path: Path
) -> None:
    await import_sources(store, [FIXTURES])
    out = tmp_path / "export.jsonl"
    chunks = [
        c async for c in export_sessions(store, ["weather", "chat-booking"], format="vercel-ai")
    ]
    out.write_text("".join(chunks))
    assert detect_format(out) == "vercel-ai"
    again = await import_sources(store, [out])
    assert (again.new, again.already_stored) == (0, 12)


def _tool_part(messages: list[dict[str, Any]]) -> dict[str, Any]:
    part: dict[str, Any] = messages[2]["parts"][2]
    return part


@pytest.mark.parametrize(
    ("damage", "place"),
    [
        (lambda ms: ms[1].__setitem__("role", "narrator"), "message 2"),
        (lambda ms: _tool_part(ms).__setitem__("state", "output-lost"), "message 3"),
        (lambda ms: _tool_part(ms).pop("toolCallId"), "message 3"),
        (lambda ms: ms[3].pop("id"), "message 4"),
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
        await import_sources(store, [path], format="vercel-ai")
    assert str(path) in str(raised.value)
    assert place in str(raised.value)
    assert "\n" not in str(raised.value)
    assert await store.sessions() == []


async def test_a_file_in_another_encoding_is_refused(store: HistoryStore, tmp_path: Path) -> None:
    path = tmp_path / "weather.json"
    path.write_bytes((FIXTURES / "weather.json").read_text().encode("latin-1", "replace"))
    with pytest.raises(InvalidSource, match=r"weather\.json"):
        await import_sources(store, [path], format="vercel-ai")
    assert await store.sessions() == []


def test_cli_imports_then_says_already_stored(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "chats"
    shutil.copytree(FIXTURES, source)
    args = ("import", "--create", str(source), "--url", db_url)
    first = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[1] == "12 stored, 0 already stored"
    second = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert second.stdout.splitlines()[1] == "0 stored, 12 already stored"
    (source / "weather.json").write_text('[{"id": "x", "role": "user", "parts": [')
    refused = chatledger(*args, "--format", "vercel-ai", env={"PYTHONPATH": str(ROOT)})
    assert_one_line_error(refused, contains="weather.json")
