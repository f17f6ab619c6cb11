"""Edge cases of ADK events, on copies of the committed v1 fixture altered one event at a
time: the shapes of content ADK may hold that are still read (no role, no parts, an
unreadable timestamp) and the malformed ones refused with the row and event named. The
in-memory store is enough: reading happens before any backend is asked."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from store.errors import InvalidSource
from store.importing import import_sources
from store.memory import InMemoryHistoryStore
from tests.importing.fixtures.adk_sessions import SESSIONS, event_id, event_time

FIXTURE = Path(__file__).parent / "fixtures" / "adk_v1.db"
ALICE = SESSIONS[0]
ALICE_KEY = f"{ALICE.app_name}/{ALICE.user_id}/{ALICE.session_id}"


def _altered(tmp_path: Path, index: int, expression: str) -> Path:
    """A copy of the fixture whose event ``index`` of the first session has its
    ``event_data`` replaced by the SQL ``expression`` (of ``event_data``)."""
    path = tmp_path / "adk_v1.db"
    shutil.copyfile(FIXTURE, path)
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(
            f"UPDATE events SET event_data = {expression} WHERE id = ?", (event_id(ALICE, index),)
        )
    return path


async def _rows(path: Path) -> list[tuple[str, str, str]]:
    store = InMemoryHistoryStore()
    await import_sources(store, [path])
    return [
        (row.message.message_id, row.message.role, row.message.text)
        for row in await store.history(ALICE_KEY, include_excluded=True)
    ]


async def test_a_content_without_role_takes_it_from_the_author(tmp_path: Path) -> None:
    path = _altered(tmp_path, 0, "json_remove(event_data, '$.content.role')")
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(
            "UPDATE events SET event_data = json_remove(event_data, '$.content.role') WHERE id = ?",
            (event_id(ALICE, 3),),
        )
    rows = await _rows(path)
    assert ALICE.events[0].author == "user" and ALICE.events[3].author != "user"
    by_id = {message_id: role for message_id, role, _ in rows}
    assert by_id[event_id(ALICE, 0)] == "user"
    assert by_id[event_id(ALICE, 3)] == "assistant"


async def test_a_content_without_parts_is_no_message(tmp_path: Path) -> None:
    before = await _rows(FIXTURE)
    path = _altered(tmp_path, 0, "json_set(event_data, '$.content.parts', json('[]'))")
    after = await _rows(path)
    assert after == [row for row in before if row[0] != event_id(ALICE, 0)]


@pytest.mark.parametrize(
    "stamp",
    [
        "json_set(event_data, '$.timestamp', 'soon')",
        "json_set(event_data, '$.timestamp', json('null'))",
    ],
)
async def test_an_unreadable_event_timestamp_falls_back_to_the_row(
    tmp_path: Path, stamp: str
) -> None:
    path = _altered(tmp_path, 0, stamp)
    store = InMemoryHistoryStore()
    await import_sources(store, [path])
    rows = await store.history(ALICE_KEY)
    assert rows[0].message.message_id == event_id(ALICE, 0)
    assert rows[0].message.created_at == event_time(ALICE, 0)


async def test_a_session_of_events_without_content_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "adk_v1.db"
    shutil.copyfile(FIXTURE, path)
    last = max(SESSIONS, key=lambda s: (s.app_name, s.user_id, s.session_id))
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(
            "UPDATE events SET event_data = NULL "
            "WHERE app_name = ? AND user_id = ? AND session_id = ?",
            (last.app_name, last.user_id, last.session_id),
        )
    store = InMemoryHistoryStore()
    report = await import_sources(store, [path])
    gone = f"{last.app_name}/{last.user_id}/{last.session_id}"
    assert gone not in report.session_ids
    assert len(report.session_ids) == len(SESSIONS) - 1


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("json('[1, 2]')", "event_data is not a JSON object"),
        ("json_set(event_data, '$.content', 'hello')", "content is not an object"),
        ("json_set(event_data, '$.content.parts', 'hello')", "content.parts is not a list"),
        (
            "json_set(event_data, '$.content.parts', json('[\"hello\"]'))",
            "a content part that is not an object",
        ),
        (
            'json_set(event_data, \'$.content.parts\', json(\'[{"function_call": {"id": "c"}}]\'))',
            "a function_call without a name",
        ),
        (
            "json_set(event_data, '$.content.parts', json('[{\"function_response\": 7}]'))",
            "a function_response that is not an object",
        ),
        (
            "json_set(event_data, '$.content.parts', "
            'json(\'[{"function_response": {"name": "w"}}]\'))',
            "function_response 'w' has no id",
        ),
    ],
)
async def test_a_malformed_event_is_refused_naming_it(
    tmp_path: Path, expression: str, message: str
) -> None:
    path = _altered(tmp_path, 0, expression)
    store = InMemoryHistoryStore()
    with pytest.raises(
        InvalidSource, match=rf"row \d+ \(event {event_id(ALICE, 0)}\): {message}"
    ) as caught:
        await import_sources(store, [path])
    assert "\n" not in str(caught.value) and str(caught.value).startswith(f"{path}: ")
    assert await store.sessions() == []
