"""The ``open-webui`` format: Open WebUI's ``webui.db`` and its chat export, built from
their documented and observed shapes (``fixtures/open_webui/``: the export by hand,
the database from it by ``fixtures/generate_open_webui.py``; ``docs/importing.md`` says
where each shape comes from), imported into SQLite and PostgreSQL: the current path
with its roles, texts, ids, times and title; tool calls and results cut from the output
items with their error flags; regenerated answers and edited questions as forks at
their branching message (or roots, linked); files as metadata; idempotence across the
database and the export; damaged sources that write nothing; the command line."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.formats import ATTACHMENTS_KEY
from store.formats.open_webui import (
    OPEN_WEBUI_BRANCH_KEY,
    OPEN_WEBUI_CONTINUES_KEY,
    OPEN_WEBUI_MESSAGE_KEY,
)
from store.importing import detect_format, import_sources
from store.importing.readers import open_webui
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
)
from tests.cli.helpers import assert_one_line_error, chatledger

FIXTURES = Path(__file__).parent / "fixtures" / "open_webui"
EXPORT = FIXTURES / "chat-export.json"
SINGLE = FIXTURES / "chat-export-single.json"
DATABASE = FIXTURES / "webui.db"
ROOT = Path(__file__).resolve().parents[2]
LISBON = "3f2b8c1e-6a4d-4e2f-9b1a-7c5d0e8f1a21"
QUICK = "9c1d7e2a-4b3f-4c8d-a1e6-2f5b8d0c3e47"
TOTAL = 17
"""Messages of every session of the fixture (a fork counts the messages it shares)."""


def _id(n: int) -> str:
    """The fixture's history message ids."""
    return f"{n:08x}-5d3c-4b2a-9e1f-{n:012x}"


U1, A1, U2, A2, A3, U3, A4, U4, A5 = (_id(n) for n in range(0x11, 0x1A))
Q1, QA1 = _id(0x21), _id(0x22)


def _records() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(EXPORT.read_text(encoding="utf-8"))
    return loaded


def _at(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


async def _messages(store: HistoryStore, session: str) -> list[Message]:
    return [row.message for row in await store.history(session, include_excluded=True)]


@pytest.mark.parametrize("source", [EXPORT, DATABASE], ids=["export", "database"])
async def test_the_current_path_imports_exactly(store: HistoryStore, source: Path) -> None:
    assert detect_format(source) == "open-webui"
    report = await import_sources(store, [source])
    assert set(report.session_ids) == {
        QUICK,
        LISBON,
        f"{LISBON}~{U1}",
        f"{LISBON}~{A2}",
        f"{LISBON}~{U4}",
    }  # the chat without messages is skipped
    messages = await _messages(store, LISBON)
    assert [(m.message_id, m.role, m.text) for m in messages] == [
        (U2, "user", "Plan a day in Lisbon, with a tram ride. My tram notes are attached."),
        (
            A3,
            "assistant",
            "Morning: tram 28 from Martim Moniz. Noon: Alfama. Evening: Bairro Alto.",
        ),
        (U3, "user", "And in the evening?"),
        (A4, "assistant", "Fado in Alfama, then a miradouro for the view."),
    ]
    assert [m.created_at for m in messages] == [
        _at(1733480090),
        _at(1733480140),
        _at(1733480200),
        _at(1733480206),
    ]
    question, answer = messages[0], messages[1]
    assert question.metadata[ATTACHMENTS_KEY] == [
        {
            "name": "lisbon-trams.pdf",
            "media_type": "application/pdf",  # from the entry's file record
            "size": 183204,
            "reference": "6e1b0c2f-3a4d-4b5e-8f9a-0c1d2e3f4a5b",
        }
    ]
    kept = answer.metadata[OPEN_WEBUI_MESSAGE_KEY]
    assert isinstance(kept, dict)
    original = _records()[1]["chat"]["history"]["messages"][A3]
    assert kept == {
        k: v
        for k, v in original.items()
        if k not in ("id", "role", "timestamp", "content", "childrenIds")
    }
    assert kept["reactions"] == {"thumbsup": 1}  # a field chatledger does not know
    assert kept["usage"]["total_tokens"] == 1244
    assert kept["sources"][0]["source"]["name"] == "lisbon-trams.pdf"
    assert kept["parentId"] == U2
    rows = await store.history(LISBON, include_excluded=True)
    assert {row.source_system for row in rows} == {"open-webui"}
    titles = {s.session_id: s.title for s in await store.sessions()}
    assert titles[LISBON] == titles[f"{LISBON}~{A2}"] == "Trip to Lisbon"
    assert titles[QUICK] == "Quick question"


async def test_older_tool_calls_stay_the_text_they_are_and_images_are_listed(
    store: HistoryStore,
) -> None:
    await import_sources(store, [EXPORT])
    question, answer = await _messages(store, QUICK)
    assert (question.message_id, question.text) == (Q1, "What colour is this pixel?")
    assert question.metadata[ATTACHMENTS_KEY] == [
        {"name": None, "media_type": "image", "size": None, "reference": None}
    ]  # the image's bytes are inline (a data: URL): no reference, kept in the message
    assert answer.contents == [
        TextContent(
            text='<details type="tool_calls" done="true" id="call_px" name="inspect_image" '
            'arguments="{}" result="&quot;white&quot;">\n<summary>Tool Executed</summary>\n'
            "</details>\nIt is white."
        )
    ]
    assert answer.created_at == _at(1733570003)


async def test_output_items_become_calls_results_and_reasoning(store: HistoryStore) -> None:
    await import_sources(store, [EXPORT])
    messages = await _messages(store, f"{LISBON}~{A2}")
    assert [(m.message_id, m.role) for m in messages] == [
        (U2, "user"),
        (A2, "assistant"),
        (f"{A2}/call_weather_1", "tool"),
        (f"{A2}/call_tram_1", "tool"),
        (f"{A2}#3", "assistant"),
    ]
    assert {m.created_at for m in messages[1:]} == {_at(1733480095)}
    thought, weather, tram = messages[1].contents
    assert isinstance(thought, ReasoningContent)
    assert thought.text == "Check the weather and the tram first."
    assert thought.extra == {"id": "rs_a2_1", "status": "completed", "duration": 2}
    assert isinstance(weather, FunctionCallContent) and isinstance(tram, FunctionCallContent)
    assert [(c.call_id, c.name, c.arguments) for c in (weather, tram)] == [
        ("call_weather_1", "get_weather", '{"city": "Lisbon"}'),
        ("call_tram_1", "tram_schedule", '{"line": "28"}'),
    ]
    assert tram.extra == {"id": "fc_a2_2", "status": "failed"}
    results = [messages[2].contents[0], messages[3].contents[0]]
    assert all(isinstance(r, FunctionResultContent) for r in results)
    assert [(r.call_id, r.result, r.is_error) for r in results] == [  # type: ignore[union-attr]
        ("call_weather_1", '{"temp_c": 21, "sky": "sunny"}', False),
        ("call_tram_1", "Error: the schedule service timed out", True),  # its call failed
    ]
    text, status = messages[4].contents
    assert text == TextContent(
        text="Sunny and 21 \u00b0C: ride tram 28 early, before the queues.",
        extra={
            "annotations": [],
            "item": {"id": "msg_a2_1", "role": "assistant", "status": "completed"},
        },
    )
    assert status == OtherContent(
        kind="open_webui:status",
        payload={"id": "st_a2_1", "description": "Answered with 2 tools", "done": True},
    )
    assert messages[4].metadata[OPEN_WEBUI_CONTINUES_KEY] == A2
    kept = messages[1].metadata[OPEN_WEBUI_MESSAGE_KEY]
    assert isinstance(kept, dict)
    assert kept["content"].startswith('<details type="reasoning"')  # the rendering, kept
    assert kept["statusHistory"] == [
        {"action": "web_search", "description": "Checked 2 tools", "done": True}
    ]
    assert "output" not in kept and "childrenIds" not in kept


async def test_other_branches_are_forks_at_their_branching_message(store: HistoryStore) -> None:
    report = await import_sources(store, [EXPORT])
    regenerated = await store.session(f"{LISBON}~{A2}")
    assert (regenerated.parent_session_id, regenerated.fork_message_id) == (LISBON, U2)
    edited = await store.session(f"{LISBON}~{U4}")
    assert (edited.parent_session_id, edited.fork_message_id) == (LISBON, A3)
    assert [m.text for m in await _messages(store, f"{LISBON}~{U4}")] == [
        "Plan a day in Lisbon, with a tram ride. My tram notes are attached.",
        "Morning: tram 28 from Martim Moniz. Noon: Alfama. Evening: Bairro Alto.",
        "And where should we eat?",
        "Time Out Market for lunch; a tasca in Mouraria for dinner.",
    ]
    # the first question as first written is another root: nothing is shared, so it is
    # a root session, linked to its sibling by its first message
    root = await store.session(f"{LISBON}~{U1}")
    assert root.parent_session_id is None
    first = await _messages(store, f"{LISBON}~{U1}")
    assert [(m.message_id, m.role, m.text) for m in first] == [
        (U1, "user", "Plan a day in Lisbon."),
        (A1, "assistant", "Start in Bel\u00e9m, then Alfama at sunset."),
    ]
    assert first[0].metadata[OPEN_WEBUI_BRANCH_KEY] == {"of": LISBON, "at": None}
    assert first[1].metadata[OPEN_WEBUI_MESSAGE_KEY]["model"] == "llama3.1:8b"  # type: ignore[index]
    fork_first = (await _messages(store, f"{LISBON}~{A2}"))[1]
    assert fork_first.metadata[OPEN_WEBUI_BRANCH_KEY] == {"of": LISBON, "at": U2}
    assert report.new == report.messages == TOTAL


async def test_the_database_the_export_and_a_chat_s_export_are_the_same_chats(
    store: HistoryStore, tmp_path: Path
) -> None:
    first = await import_sources(store, [DATABASE])
    assert (first.new, first.already_stored) == (TOTAL, 0)
    lone = tmp_path / "one-chat.json"
    lone.write_text(json.dumps(_records()[1]), encoding="utf-8")  # a record, not a list
    assert detect_format(SINGLE) == detect_format(lone) == "open-webui"
    for again, stored in ((EXPORT, TOTAL), (SINGLE, TOTAL - 2), (lone, TOTAL - 2)):
        report = await import_sources(store, [again])
        assert (report.new, report.already_stored) == (0, stored)
    url = f"sqlite:///{DATABASE}"
    report = await import_sources(store, [url], format="open-webui")
    assert (report.new, report.already_stored) == (0, TOTAL)
    assert len(await store.sessions()) == 5


async def test_the_oldest_releases_list_of_messages_is_one_path(tmp_path: Path) -> None:
    body = {
        "title": "Old chat",
        "messages": [
            {"id": "m1", "role": "user", "content": "Hi", "timestamp": 1700000000},
            {"id": "m2", "role": "assistant", "content": "Hello!", "timestamp": 1700000002},
        ],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps([{"id": "old-1", "title": "Old chat", "chat": body}]))
    (found,) = open_webui.read(path, str(path), None)
    assert (found.source_session, found.title, found.error) == ("old-1", "Old chat", None)
    assert [(m.message.message_id, m.message.role, m.message.text) for m in found.messages] == [
        ("m1", "user", "Hi"),
        ("m2", "assistant", "Hello!"),
    ]
    assert found.messages[1].message.created_at == _at(1700000002)


def _history(records: list[dict[str, Any]], chat: int) -> dict[str, Any]:
    history: dict[str, Any] = records[chat]["chat"]["history"]["messages"]
    return history


@pytest.mark.parametrize(
    ("damage", "place", "reason"),
    [
        (
            lambda c: _history(c, 0)[Q1].__setitem__("role", "bot"),
            f"conversation 1 message {Q1}",
            "unknown role 'bot'",
        ),
        (
            lambda c: _history(c, 1)[A4].__setitem__("parentId", "missing-message"),
            f"conversation 2 message {A4}",
            "parentId 'missing-message' names no message",
        ),
        (
            lambda c: _history(c, 1)[U3].__setitem__("timestamp", "noon"),
            f"conversation 2 message {U3}",
            "timestamp must be seconds",
        ),
        (
            lambda c: _history(c, 1)[A2]["output"][1].pop("name"),
            f"conversation 2 message {A2}",
            "a function_call needs a name",
        ),
        (
            lambda c: _history(c, 1)[U2].__setitem__("parentId", A3),
            "conversation 2",
            "is its own ancestor",
        ),
    ],
)
async def test_a_damaged_chat_is_refused_naming_its_place_and_nothing_is_written(
    store: HistoryStore, tmp_path: Path, damage: Any, place: str, reason: str
) -> None:
    exported = _records()
    damage(exported)
    path = tmp_path / "chat-export.json"
    path.write_text(json.dumps(exported))
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [path], format="open-webui")
    message = str(raised.value)
    assert message.startswith(f"{path}: {place}: ")
    assert reason in message
    assert "\n" not in message
    assert await store.sessions() == []


async def test_a_cut_off_export_or_a_row_that_is_not_json_is_refused(
    store: HistoryStore, tmp_path: Path
) -> None:
    text = EXPORT.read_text(encoding="utf-8")
    cut = tmp_path / "chat-export.json"
    cut.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [cut], format="open-webui")
    assert str(raised.value).startswith(f"{cut}: conversation 2: not JSON")
    assert "\n" not in str(raised.value)
    database = tmp_path / "webui.db"
    shutil.copy(DATABASE, database)
    with closing(sqlite3.connect(database)) as connection, connection:
        connection.execute("UPDATE chat SET chat = '{\"history\": ' WHERE id = ?", (QUICK,))
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [database])
    assert str(raised.value) == f"{database}: chat {QUICK}: the chat column is not JSON"
    assert await store.sessions() == []


async def test_a_result_without_its_call_is_an_orphan_refused_with_strict(
    store: HistoryStore, tmp_path: Path
) -> None:
    exported = _records()
    output = _history(exported, 1)[A2]["output"]
    del output[1]  # the weather call: its result answers nothing now
    path = tmp_path / "chat-export.json"
    path.write_text(json.dumps(exported))
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [path], strict=True)
    assert f"conversation 2 message {A2}" in str(raised.value)
    assert await store.sessions() == []
    report = await import_sources(store, [path])
    assert any("call_weather_1" in w or A2 in w for w in report.warnings)


def test_cli_imports_the_database_then_says_already_stored(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "webui.db"
    shutil.copy(DATABASE, source)
    args = ("import", "--create", str(source), "--format", "open-webui", "--url", db_url)
    first = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[1] == f"{TOTAL} stored, 0 already stored"
    second = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert second.stdout.splitlines()[1] == f"0 stored, {TOTAL} already stored"
    export = tmp_path / "chat-export.json"
    export.write_text('[{"id": "x", "title": "x", "chat": {"history": {"messages": {}}}}, {"id"')
    refused = chatledger(
        "import", str(export), "--format", "open-webui", "--url", db_url,
        env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert_one_line_error(refused, contains="chat-export.json: conversation 2: not JSON")
    helped = chatledger("import", "--help", env={"PYTHONPATH": str(ROOT)})
    assert "open-webui" in helped.stdout


async def test_another_table_of_that_shape_is_read_with_table(
    store: HistoryStore, tmp_path: Path
) -> None:
    database = tmp_path / "backup.db"
    shutil.copy(DATABASE, database)
    with closing(sqlite3.connect(database)) as connection, connection:
        connection.execute("ALTER TABLE chat RENAME TO chat_backup")
    with pytest.raises(InvalidSource, match="a database of none of the known formats"):
        detect_format(database)
    report = await import_sources(store, [database], table="chat_backup")
    assert (report.new, len(report.session_ids)) == (TOTAL, 5)
    with pytest.raises(InvalidSource) as raised:
        list(open_webui.read(tmp_path, str(tmp_path), None))
    assert str(raised.value) == (
        f"{tmp_path}: a folder: give Open WebUI's webui.db or its chat export's file"
    )


async def test_a_chat_renamed_since_gets_its_new_title_and_nothing_else(
    store: HistoryStore, tmp_path: Path
) -> None:
    database = tmp_path / "webui.db"
    shutil.copy(DATABASE, database)
    await import_sources(store, [database])
    with closing(sqlite3.connect(database)) as connection, connection:
        connection.execute("UPDATE chat SET title = 'Lisbon, day one' WHERE id = ?", (LISBON,))
    report = await import_sources(store, [database])
    assert (report.new, report.already_stored) == (0, TOTAL)
    titles = {s.session_id: s.title for s in await store.sessions()}
    assert titles[LISBON] == titles[f"{LISBON}~{U4}"] == "Lisbon, day one"
    assert titles[QUICK] == "Quick question"
