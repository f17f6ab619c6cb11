"""The ``adk`` format: Google ADK's session stores, as ADK itself wrote them (the
committed fixtures of ``fixtures/``), imported into SQLite and PostgreSQL: exact
sessions, messages, calls and results, idempotence, export round trips, damaged
databases that write nothing, and the command line."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.exporting import export_sessions
from store.importing import detect_format, import_sources
from store.models import StoredMessage
from strategies.groups import call_links
from strategies.messages import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    OtherContent,
    ReasoningContent,
    UriContent,
)
from tests.cli.helpers import assert_one_line_error, chatledger
from tests.importing.fixtures.adk_sessions import FIXTURES, SESSIONS, event_id, event_time
from tests.importing.sources import Expected, adk_expected

FIXTURE_DIR = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
EXPECTED = [adk_expected(session) for session in SESSIONS]
ALL_MESSAGES = sum(len(expected.roles) for expected in EXPECTED)


def _copy(tmp_path: Path, name: str = "adk_v1.db") -> Path:
    """A copy of a fixture, to damage or to import (the committed files stay as ADK
    wrote them)."""
    target = tmp_path / name
    shutil.copyfile(FIXTURE_DIR / name, target)
    return target


def _execute(path: Path, sql: str, *args: object) -> None:
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(sql, args)


async def _session_ids(store: HistoryStore) -> list[str]:
    return sorted(s.session_id for s in await store.sessions())


async def _check(store: HistoryStore, expected: Expected) -> None:
    rows = await store.history(expected.session_id, include_excluded=True)
    messages = [row.message for row in rows]
    assert [m.role for m in messages] == expected.roles
    assert [m.text for m in messages] == expected.texts
    assert [c for m in messages for c in call_links(m)[0]] == expected.call_ids
    assert [r for m in messages for r in call_links(m)[1]] == expected.result_ids


@pytest.mark.parametrize("fixture", list(FIXTURES))
async def test_every_fixture_imports_exactly(store: HistoryStore, fixture: str) -> None:
    path = FIXTURE_DIR / fixture
    assert detect_format(path) == "adk"
    report = await import_sources(store, [path])
    assert report.formats == {str(path): "adk"}
    assert report.session_ids == sorted(e.session_id for e in EXPECTED)
    assert (report.messages, report.new, report.already_stored) == (ALL_MESSAGES,) * 2 + (0,)
    assert report.tool_calls == sum(len(e.call_ids) for e in EXPECTED)
    assert report.tool_results == sum(len(e.result_ids) for e in EXPECTED)
    assert report.warnings == []
    for expected in EXPECTED:
        await _check(store, expected)
    again = await import_sources(store, [path])
    assert (again.new, again.already_stored) == (0, ALL_MESSAGES)
    assert await _session_ids(store) == report.session_ids


async def test_ids_times_authors_and_provenance(store: HistoryStore) -> None:
    await import_sources(store, [FIXTURE_DIR / "adk_v1.db"], session_prefix="adk:")
    for session, expected in zip(SESSIONS, EXPECTED, strict=True):
        rows = await store.history("adk:" + expected.session_id)
        kept = [(i, e) for i, e in enumerate(session.events) if e.role is not None]
        assert [row.message.message_id for row in rows] == [event_id(session, i) for i, _ in kept]
        assert [row.message.created_at for row in rows] == [event_time(session, i) for i, _ in kept]
        assert [row.message.author_name for row in rows] == [
            None if e.author == "user" else e.author for _, e in kept
        ]
        assert {row.source_system for row in rows} == {"adk"}
        assert [row.source_id for row in rows] == [event_id(session, i) for i, _ in kept]


async def test_calls_results_and_thoughts_keep_their_payloads(store: HistoryStore) -> None:
    await import_sources(store, [FIXTURE_DIR / "adk_v0.db"])
    (session,) = [s for s in SESSIONS if (s.app_name, s.user_id) == ("weather_app", "alice")]
    contents = [
        c for row in await store.history("weather_app/alice/s1") for c in row.message.contents
    ]
    calls = [
        (c.call_id, c.name, c.arguments) for c in contents if isinstance(c, FunctionCallContent)
    ]
    assert calls == [(c.call_id, c.name, c.args) for e in session.events for c in e.calls]
    results = [(c.call_id, c.result) for c in contents if isinstance(c, FunctionResultContent)]
    assert results == [(r.call_id, r.response) for e in session.events for r in e.results]
    thoughts = [c.text for c in contents if isinstance(c, ReasoningContent)]
    assert thoughts == [e.thought for e in session.events if e.thought is not None]


async def test_session_key_parts_are_escaped(store: HistoryStore, tmp_path: Path) -> None:
    path = _copy(tmp_path)
    _execute(path, "UPDATE events SET user_id = 'team/x%' WHERE user_id = 'bob'")
    report = await import_sources(store, [path])
    assert "weather_app/team%2Fx%25/s1" in report.session_ids
    assert len(await store.history("weather_app/team%2Fx%25/s1")) == len(EXPECTED[1].roles)


async def test_order_is_adks_timestamp_then_id_not_the_row(
    store: HistoryStore, tmp_path: Path
) -> None:
    path = _copy(tmp_path, "adk_sqlite.db")
    notes = SESSIONS[2]
    first, last = event_id(notes, 0), event_id(notes, len(notes.events) - 1)
    earlier = event_time(notes, 0).timestamp() - 1
    _execute(
        path,
        "UPDATE events SET timestamp = ?, event_data = json_set(event_data, '$.timestamp', ?) "
        "WHERE id = ?",
        earlier,
        earlier,
        last,
    )
    await import_sources(store, [path])
    rows = await store.history("notes_app/alice/n-7")
    assert [row.message.message_id for row in rows][:2] == [last, first]
    assert rows[0].message.created_at is not None
    assert rows[0].message.created_at.timestamp() == pytest.approx(earlier)


async def test_a_renamed_events_table_is_read_with_table(
    store: HistoryStore, tmp_path: Path
) -> None:
    path = _copy(tmp_path)
    _execute(path, "ALTER TABLE events RENAME TO adk_events")
    with pytest.raises(InvalidSource, match="none of the known formats"):
        await import_sources(store, [path])
    report = await import_sources(store, [path], table="adk_events")
    assert report.formats == {str(path): "adk"} and report.messages == ALL_MESSAGES


async def test_a_null_event_data_is_an_event_without_content(
    store: HistoryStore, tmp_path: Path
) -> None:
    path = _copy(tmp_path)
    bob = SESSIONS[1]
    _execute(path, "UPDATE events SET event_data = NULL WHERE id = ?", event_id(bob, 0))
    report = await import_sources(store, [path])
    assert report.messages == ALL_MESSAGES - 1
    rows = await store.history("weather_app/bob/s1")
    assert [row.message.message_id for row in rows] == [event_id(bob, i) for i in (1, 2, 3)]


async def test_media_code_and_camel_case_parts(store: HistoryStore, tmp_path: Path) -> None:
    path = _copy(tmp_path)
    notes = SESSIONS[2]
    with closing(sqlite3.connect(path)) as connection, connection:
        for index, parts in (
            (
                0,
                [
                    {"text": "look"},
                    {"inlineData": {"data": "aGk=", "mimeType": "image/png"}},
                    {"file_data": {"file_uri": "gs://b/n.pdf", "mime_type": "application/pdf"}},
                ],
            ),
            (
                1,
                [
                    {"executable_code": {"code": "print(1)", "language": "PYTHON"}},
                    {"functionCall": {"id": "adk-call-n1", "name": "save_note", "args": {}}},
                ],
            ),
        ):
            (data,) = connection.execute(
                "SELECT event_data FROM events WHERE id = ?", (event_id(notes, index),)
            ).fetchone()
            event = json.loads(data)
            event["content"]["parts"] = parts
            connection.execute(
                "UPDATE events SET event_data = ? WHERE id = ?",
                (json.dumps(event), event_id(notes, index)),
            )
    await import_sources(store, [path])
    first, second = [row.message for row in await store.history("notes_app/alice/n-7")][:2]
    assert [c.type for c in first.contents] == ["text", "data", "uri"]
    assert [(c.data, c.media_type) for c in first.contents if isinstance(c, DataContent)] == [
        ("aGk=", "image/png")
    ]
    assert [c.uri for c in first.contents if isinstance(c, UriContent)] == ["gs://b/n.pdf"]
    (code, call) = second.contents
    assert isinstance(code, OtherContent) and code.kind == "executable_code"
    assert code.payload == {"executable_code": {"code": "print(1)", "language": "PYTHON"}}
    assert isinstance(call, FunctionCallContent) and call.call_id == "adk-call-n1"


async def test_export_round_trips(store: HistoryStore, tmp_path: Path) -> None:
    report = await import_sources(store, [FIXTURE_DIR / "adk_v1.db"])
    exported = tmp_path / "out.jsonl"
    exported.write_text(
        "".join([c async for c in export_sessions(store, report.session_ids, format="jsonl")]),
        encoding="utf-8",
    )
    again = await import_sources(store, [exported])
    assert (again.new, again.already_stored) == (0, ALL_MESSAGES)
    responses = tmp_path / "out.responses.jsonl"
    chunks = export_sessions(store, report.session_ids, format="openai-responses")
    responses.write_text("".join([c async for c in chunks]), encoding="utf-8")
    back = await import_sources(store, [responses], session_prefix="back/")
    assert back.new == back.messages and back.tool_calls == report.tool_calls
    for expected in EXPECTED:
        original = _flat(await store.history(expected.session_id))
        assert original and _flat(await store.history("back/" + expected.session_id)) == original


def _flat(rows: list[StoredMessage]) -> list[tuple[str, str, str]]:
    """Each message's texts, calls and results in order, with its role: what survives a
    format that writes one call or result a message (Responses items)."""
    flat: list[tuple[str, str, str]] = []
    for row in rows:
        message = row.message
        if message.text:
            flat.append((message.role, "text", message.text))
        calls, results = call_links(message)
        flat += [(message.role, "call", call) for call in calls]
        flat += [(message.role, "result", result) for result in results]
    return flat


def _damage(tmp_path: Path, name: str) -> tuple[Path, str, str | None]:
    """A damaged copy of a fixture, the error it must give, and the --format given."""
    first = event_id(SESSIONS[0], 1)
    if name == "truncated-event-data":
        path = _copy(tmp_path)
        _execute(
            path, "UPDATE events SET event_data = substr(event_data, 1, 40) WHERE id = ?", first
        )
        return path, rf"row \d+ \(event {first}\): event_data is not JSON", None
    if name == "corrupt-v0-content":
        path = _copy(tmp_path, "adk_v0.db")
        _execute(path, "UPDATE events SET content = '{\"parts\": [' WHERE id = ?", first)
        return path, rf"event {first}\): content is not JSON", None
    if name == "call-without-id":
        path = _copy(tmp_path, "adk_sqlite.db")
        _execute(
            path,
            "UPDATE events SET event_data = json_remove(event_data, "
            "'$.content.parts[0].function_call.id') WHERE id = ?",
            first,
        )
        return path, r"function_call 'get_weather' has no id", None
    if name == "unknown-role":
        path = _copy(tmp_path)
        _execute(
            path,
            "UPDATE events SET event_data = json_set(event_data, '$.content.role', 'narrator') "
            "WHERE id = ?",
            first,
        )
        return path, r"unknown content role 'narrator'", None
    if name == "bad-call-args":
        path = _copy(tmp_path)
        _execute(
            path,
            "UPDATE events SET event_data = json_set(event_data, "
            "'$.content.parts[0].function_call.args', json('[1, 2]')) WHERE id = ?",
            first,
        )
        return path, rf"event {first}\): function_call 'get_weather': args is not an object", None
    path = tmp_path / "other.db"
    with closing(sqlite3.connect(path)) as connection, connection:
        if name == "other-events-table":
            connection.execute("CREATE TABLE sessions (id TEXT)")
            connection.execute("CREATE TABLE events (id TEXT, payload TEXT)")
            return path, r"not a Google ADK session store \(events columns\)", "adk"
        connection.execute("CREATE TABLE things (id INTEGER)")
    return path, r"not a Google ADK session store \(no events table\)", "adk"


DAMAGED = [
    "truncated-event-data",
    "corrupt-v0-content",
    "call-without-id",
    "unknown-role",
    "bad-call-args",
    "other-events-table",
    "no-events-table",
]


@pytest.mark.parametrize("name", DAMAGED)
async def test_damaged_databases_write_nothing(
    store: HistoryStore, tmp_path: Path, name: str
) -> None:
    path, message, fmt = _damage(tmp_path, name)
    with pytest.raises(InvalidSource, match=message) as caught:
        await import_sources(store, [path], format=fmt)
    assert "\n" not in str(caught.value) and str(caught.value).startswith(f"{path}: ")
    assert await _session_ids(store) == []


async def test_a_database_of_another_format_is_refused_as_adk(
    store: HistoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "lc.db"
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("CREATE TABLE message_store (id INTEGER, session_id TEXT, message TEXT)")
    with pytest.raises(InvalidSource, match="this is langchain, not adk"):
        await import_sources(store, [path], format="adk")
    without = tmp_path / "none.db"
    _execute(without, "CREATE TABLE things (id INTEGER)")
    with pytest.raises(InvalidSource, match="none of the known formats"):
        await import_sources(store, [without])
    assert await _session_ids(store) == []


def _cli(*args: str) -> tuple[int, str, str]:
    """``chatledger ARGS`` through the console script, running this checkout's code."""
    result = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    return result.returncode, result.stdout, result.stderr


def test_cli_imports_then_says_already_stored(db_url: str, tmp_path: Path) -> None:
    source = _copy(tmp_path)
    calls = sum(len(e.call_ids) for e in EXPECTED)
    code, out, err = _cli("import", "--create", str(source), "--format", "adk", "--url", db_url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(
        f"{len(EXPECTED)} sessions, {ALL_MESSAGES} messages ({calls} tool calls, {calls} results"
    )
    assert lines[1] == f"{ALL_MESSAGES} stored, 0 already stored"
    code, out, err = _cli("import", "--create", str(source), "--url", db_url, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["new"], report["already_stored"]) == (0, ALL_MESSAGES)
    assert report["formats"] == {str(source): "adk"}
    code, out, err = _cli("sessions", "--url", db_url, "--json")
    assert sorted(s["session_id"] for s in json.loads(out)) == report["session_ids"]


def test_cli_damaged_database_is_one_line_and_writes_nothing(db_url: str, tmp_path: Path) -> None:
    path, _, _ = _damage(tmp_path, "truncated-event-data")
    result = chatledger(
        "import",
        "--create",
        str(path),
        "--format",
        "adk",
        "--url",
        db_url,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 1
    assert_one_line_error(result, contains="event_data is not JSON")
    code, out, _ = _cli("sessions", "--url", db_url, "--json")
    assert code == 0 and json.loads(out) == []
