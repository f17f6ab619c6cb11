"""The ``langgraph`` format: LangGraph checkpoint databases as LangGraph itself wrote
them (``fixtures/generate_langgraph.py``: ``SqliteSaver`` into ``langgraph.db``,
``PostgresSaver`` dumped into ``langgraph_postgres.json``), imported without LangGraph:
every message of the newest checkpoint's chain, those a trimming node dropped excluded
by the import event, calls, results and their error flags, ids and the times of the
checkpoints; once; a pickled value refused in one line (or its thread skipped); the
other channel; the command line."""

from __future__ import annotations

import base64
import json
import pickle
import shutil
import sqlite3
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

import msgpack
import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.importing import detect_format, import_sources
from store.importing.readers.langgraph import DROPPED
from strategies.messages import FunctionCallContent, FunctionResultContent, TextContent
from tests.cli.helpers import assert_one_line_error, chatledger
from tests.conftest import run_sync
from tests.importing.pg_sources import PASSWORD

FIXTURE_DIR = Path(__file__).parent / "fixtures"
SQLITE = FIXTURE_DIR / "langgraph.db"
POSTGRES = FIXTURE_DIR / "langgraph_postgres.json"

WEATHER_1 = [
    ("weather-1-human-0", "user", "weather in Paris?"),
    ("ai-call-paris", "assistant", ""),
    ("tool-call-clock-paris", "tool", "clock is broken"),
    ("tool-call-paris", "tool", "sunny in Paris"),
    ("ai-4", "assistant", "It is sunny in Paris."),
    ("summary-10", "system", "Summary of 5 earlier messages."),
    ("weather-1-human-1", "user", "weather in Rome?"),
    ("ai-call-rome", "assistant", ""),
    ("tool-call-clock-rome", "tool", "clock is broken"),
    ("tool-call-rome", "tool", "sunny in Rome"),
    ("ai-9", "assistant", "It is sunny in Rome."),
    ("summary-8", "system", "Summary of 6 earlier messages."),
    ("weather-1-human-2", "user", "thanks"),
    ("ai-7", "assistant", "You are welcome."),
]
"""What thread ``weather-1`` holds along its chain, in order: the two summaries of the
``trim`` node each put first in the list it rewrote, after what they replaced."""
WEATHER_1_CONTEXT = ["summary-8", "weather-1-human-2", "ai-7"]
"""The newest checkpoint's messages: the rest was dropped by the ``trim`` node."""
WEATHER_2 = [
    ("weather-2-human-0", "user", "weather in Oslo?"),
    ("ai-call-oslo", "assistant", ""),
    ("tool-call-clock-oslo", "tool", "clock is broken"),
    ("tool-call-oslo", "tool", "sunny in Oslo"),
    ("ai-4", "assistant", "It is sunny in Oslo."),
]


def _text(message: Any) -> str:
    return "".join(c.text for c in message.contents if isinstance(c, TextContent)) or "".join(
        str(c.result) for c in message.contents if isinstance(c, FunctionResultContent)
    )


def _first_seen(rows: list[tuple[Any, ...]]) -> dict[tuple[str, str], datetime]:
    """Each (thread, message id) with the time of the first checkpoint holding it, read
    from ``SqliteSaver``'s rows with msgpack directly (not by the reader)."""

    def ext(code: int, data: bytes) -> Any:
        return msgpack.unpackb(data, ext_hook=ext, strict_map_key=False)

    seen: dict[tuple[str, str], datetime] = {}
    for thread, _, kind, blob in sorted(rows, key=lambda row: (row[0], row[1])):
        assert kind == "msgpack"
        checkpoint = msgpack.unpackb(blob, ext_hook=ext, strict_map_key=False)
        for module_name_fields in checkpoint["channel_values"].get("messages", []):
            fields = module_name_fields[2]
            seen.setdefault((thread, fields["id"]), datetime.fromisoformat(checkpoint["ts"]))
    return seen


def _sqlite_rows(path: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(
            "SELECT thread_id, checkpoint_id, type, checkpoint FROM checkpoints"
        ).fetchall()


async def _history(store: HistoryStore, session_id: str) -> list[Any]:
    return await store.history(session_id, include_excluded=True)


async def test_threads_import_with_what_the_trimming_node_dropped(store: HistoryStore) -> None:
    assert detect_format(SQLITE) == "langgraph"
    report = await import_sources(store, [SQLITE])
    assert report.session_ids == ["weather-1", "weather-2"]
    assert report.messages == len(WEATHER_1) + len(WEATHER_2)
    assert (report.tool_calls, report.tool_results) == (6, 6)
    seen = _first_seen(_sqlite_rows(SQLITE))
    for session_id, expected in (("weather-1", WEATHER_1), ("weather-2", WEATHER_2)):
        rows = await _history(store, session_id)
        assert [(r.message.message_id, r.message.role, _text(r.message)) for r in rows] == expected
        assert [r.message.created_at for r in rows] == [
            seen[(session_id, r.message.message_id)] for r in rows
        ]
        assert {r.source_system for r in rows} == {"langgraph"}
    context = await store.history("weather-1")
    assert [r.message.message_id for r in context] == WEATHER_1_CONTEXT
    excluded = [r for r in await _history(store, "weather-1") if r.excluded]
    assert len(excluded) == len(WEATHER_1) - len(WEATHER_1_CONTEXT)
    assert {r.excluded_reason for r in excluded} == {DROPPED}
    assert [r.message.message_id for r in await store.history("weather-2")] == [
        m for m, _, _ in WEATHER_2
    ]
    again = await import_sources(store, [SQLITE])
    assert (again.new, again.already_stored) == (0, report.messages)


async def test_calls_results_and_error_flags(store: HistoryStore) -> None:
    await import_sources(store, [SQLITE])
    rows = {r.message.message_id: r.message for r in await _history(store, "weather-2")}
    calls = [c for c in rows["ai-call-oslo"].contents if isinstance(c, FunctionCallContent)]
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [
        ("call-oslo", "weather", {"city": "Oslo"}),
        ("call-clock-oslo", "clock", {}),
    ]
    (failed,) = rows["tool-call-clock-oslo"].contents
    (answered,) = rows["tool-call-oslo"].contents
    assert isinstance(failed, FunctionResultContent) and isinstance(answered, FunctionResultContent)
    assert (failed.call_id, failed.result, failed.is_error) == (
        "call-clock-oslo",
        "clock is broken",
        True,
    )
    assert (answered.call_id, answered.result, answered.is_error) == (
        "call-oslo",
        "sunny in Oslo",
        False,
    )


def _with_pickle(tmp_path: Path, thread: str) -> Path:
    """A copy of the fixture whose newest checkpoint of ``thread`` is pickled."""
    target = tmp_path / "pickled.db"
    shutil.copyfile(SQLITE, target)
    with closing(sqlite3.connect(target)) as connection, connection:
        (newest,) = connection.execute(
            "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ?", (thread,)
        ).fetchone()
        connection.execute(
            "UPDATE checkpoints SET type = 'pickle', checkpoint = ? WHERE checkpoint_id = ?",
            (pickle.dumps({"not": "read"}), newest),
        )
    return target


async def test_a_pickled_value_refuses_the_source(store: HistoryStore, tmp_path: Path) -> None:
    source = _with_pickle(tmp_path, "weather-2")
    with pytest.raises(InvalidSource, match="a pickled value") as refused:
        await import_sources(store, [source])
    assert "thread weather-2 checkpoint" in str(refused.value)
    assert await store.sessions() == []
    report = await import_sources(store, [source], skip_invalid=True)
    assert report.session_ids == ["weather-1"]
    assert [s.session_id for s in report.skipped] == ["weather-2"]


def test_the_command_line_refuses_a_pickle_in_one_line(tmp_path: Path) -> None:
    source = _with_pickle(tmp_path, "weather-1")
    url = f"sqlite:///{tmp_path}/cli.db"
    result = chatledger("import", "--create", str(source), "--url", url)
    assert_one_line_error(result, contains="a pickled value (never unpickled")
    assert "thread weather-1 checkpoint" in result.stderr


def _renamed_channel(tmp_path: Path, channel: str) -> Path:
    """A copy of the fixture whose state keeps its messages under ``channel``: every
    checkpoint re-packed with msgpack, LangGraph's extension values left as they are."""
    target = tmp_path / "renamed.db"
    shutil.copyfile(SQLITE, target)
    with closing(sqlite3.connect(target)) as connection, connection:
        for checkpoint_id, blob in connection.execute(
            "SELECT checkpoint_id, checkpoint FROM checkpoints"
        ).fetchall():
            checkpoint = msgpack.unpackb(blob, strict_map_key=False)
            for key in ("channel_values", "channel_versions"):
                if "messages" in checkpoint[key]:
                    checkpoint[key][channel] = checkpoint[key].pop("messages")
            connection.execute(
                "UPDATE checkpoints SET checkpoint = ? WHERE checkpoint_id = ?",
                (msgpack.packb(checkpoint), checkpoint_id),
            )
    return target


async def test_another_channel(store: HistoryStore, tmp_path: Path) -> None:
    source = _renamed_channel(tmp_path, "chat_history")
    with pytest.raises(InvalidSource, match="invalid channel name 'bad name'"):
        await import_sources(store, [source], channel="bad name")
    nothing = await import_sources(store, [source])  # no thread has a messages channel
    assert (nothing.sessions, nothing.messages) == (0, 0)
    report = await import_sources(store, [source], channel="chat_history")
    assert report.session_ids == ["weather-1", "weather-2"]
    rows = await _history(store, "weather-1")
    assert [(r.message.message_id, r.message.role, _text(r.message)) for r in rows] == WEATHER_1
    context = await store.history("weather-1")
    assert [r.message.message_id for r in context] == WEATHER_1_CONTEXT


def test_the_command_line_names_the_channel(tmp_path: Path) -> None:
    source = _renamed_channel(tmp_path, "chat_history")
    url = f"sqlite:///{tmp_path}/cli.db"
    result = chatledger(
        "import", "--create", str(source), "--url", url, "--channel", "chat_history", "--json"
    )
    assert result.returncode == 0, result.stderr
    report = result.json()
    assert report["formats"] == {str(source): "langgraph"}
    assert report["session_ids"] == ["weather-1", "weather-2"]
    assert (report["new"], report["tool_calls"], report["tool_results"]) == (19, 6, 6)


def _load(url: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    dumped = json.loads(POSTGRES.read_text(encoding="utf-8"))

    def cell(value: Any) -> Any:
        if isinstance(value, dict) and "base64" in value:
            return base64.b64decode(value["base64"])
        if isinstance(value, dict) and "json" in value:
            return value["json"]
        return value

    async def load() -> None:
        connection = await asyncpg.connect(url)
        try:
            for table, content in dumped.items():
                columns = ", ".join(
                    f"{n} {t}{'' if nullable else ' NOT NULL'}"
                    for n, t, nullable in content["columns"]
                )
                await connection.execute(f"CREATE TABLE {table} ({columns})")
                marks = ", ".join(f"${i + 1}" for i in range(len(content["columns"])))
                await connection.executemany(
                    f"INSERT INTO {table} VALUES ({marks})",
                    [tuple(cell(v) for v in row) for row in content["rows"]],
                )
        finally:
            await connection.close()

    run_sync(load)


@pytest.mark.postgres
async def test_a_postgres_saver_database(store: HistoryStore, pg_source: str) -> None:
    _load(pg_source)
    assert detect_format(pg_source) == "langgraph"
    report = await import_sources(store, [pg_source])
    assert PASSWORD not in report.model_dump_json()
    assert report.session_ids == ["weather-1", "weather-2"]
    for session_id, expected in (("weather-1", WEATHER_1), ("weather-2", WEATHER_2)):
        rows = await _history(store, session_id)
        assert [(r.message.message_id, r.message.role, _text(r.message)) for r in rows] == expected
        assert all(r.message.created_at is not None for r in rows)
    context = await store.history("weather-1")
    assert [r.message.message_id for r in context] == WEATHER_1_CONTEXT
    again = await import_sources(store, [pg_source])
    assert (again.new, again.already_stored) == (0, report.messages)


async def test_a_damaged_checkpoint_refuses_the_source(store: HistoryStore, tmp_path: Path) -> None:
    target = tmp_path / "cut.db"
    shutil.copyfile(SQLITE, target)
    with closing(sqlite3.connect(target)) as connection, connection:
        (newest,) = connection.execute(
            "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = 'weather-2'"
        ).fetchone()
        connection.execute(
            "UPDATE checkpoints SET checkpoint = substr(checkpoint, 1, 40) WHERE checkpoint_id = ?",
            (newest,),
        )
    with pytest.raises(InvalidSource, match="a msgpack value that does not decode") as refused:
        await import_sources(store, [target])
    assert f"thread weather-2 checkpoint {newest}" in str(refused.value)
    assert await store.sessions() == []


async def test_checkpoints_off_the_chain_are_counted(store: HistoryStore, tmp_path: Path) -> None:
    target = tmp_path / "forked.db"
    shutil.copyfile(SQLITE, target)
    with closing(sqlite3.connect(target)) as connection, connection:
        first, kind, blob = connection.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints "
            "WHERE thread_id = 'weather-2' ORDER BY checkpoint_id LIMIT 1"
        ).fetchone()
        connection.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, type, checkpoint, metadata) "
            "VALUES ('weather-2', '', ?, ?, ?, ?, '{}')",
            (f"{first}-fork", first, kind, blob),
        )
    report = await import_sources(store, [target])
    assert report.warnings == [
        f"{target}: thread weather-2: 1 checkpoint off the newest checkpoint's chain "
        "(other branches) not read"
    ]
    rows = await _history(store, "weather-2")
    assert [r.message.message_id for r in rows] == [m for m, _, _ in WEATHER_2]
