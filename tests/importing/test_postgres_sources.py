"""Database formats read from a PostgreSQL URL: the rows of a SQLite source copied into
a throwaway PostgreSQL database import message for message as the SQLite file does;
detection by the tables; the password of the URL nowhere in what the import says;
views, generated columns and long queries refused in one line; nothing written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.importing import detect_format, import_sources
from store.importing.readers import _postgres
from store.importing.source import Reading, read_with
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.cli.helpers import assert_one_line_error, chatledger
from tests.importing.pg_sources import PASSWORD, copy_tables, execute
from tests.importing.sources import (
    langchain_messages,
    responses_items,
    write_langchain,
    write_openai_agents,
    write_openai_agents_sqlalchemy,
)

pytestmark = pytest.mark.postgres

FIXTURE_DIR = Path(__file__).parent / "fixtures"
ADK_JSON = frozenset(
    {"state", "event_data", "content", "grounding_metadata", "custom_metadata", "usage_metadata"}
)
"""The columns ADK's ``DynamicJSON`` makes ``jsonb`` on PostgreSQL."""


async def _imported(tmp_path: Path, name: str, source: str | Path) -> list[tuple[str, list]]:
    """Every session the source imports into a fresh store, with its stored rows'
    messages, ids and provenance."""
    url = f"sqlite:///{tmp_path}/{name}.db"
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        report = await import_sources(store, [source])
        assert report.skipped == [] and report.new == report.messages > 0
        again = await import_sources(store, [source])
        assert (again.new, again.already_stored) == (0, report.messages)
        found = []
        for session_id in report.session_ids:
            rows = await store.history(session_id, include_excluded=True)
            found.append(
                (session_id, [(r.message, r.source_system, r.source_id, r.excluded) for r in rows])
            )
        return found


async def _same_as_sqlite(tmp_path: Path, path: Path, url: str, fmt: str) -> None:
    assert detect_format(url) == fmt
    from_file = await _imported(tmp_path, "from_file", path)
    from_pg = await _imported(tmp_path, "from_pg", url)
    assert [s for s, _ in from_pg] == [s for s, _ in from_file]
    for (session_id, pg_rows), (_, file_rows) in zip(from_pg, from_file, strict=True):
        assert len(pg_rows) == len(file_rows), session_id
        for pg_row, file_row in zip(pg_rows, file_rows, strict=True):
            assert pg_row == file_row


async def test_openai_agents_sqlite_session(tmp_path: Path, pg_source: str) -> None:
    path = tmp_path / "agents.db"
    await write_openai_agents(path, {"s1": responses_items(2), "s2": responses_items(1)})
    copy_tables(path, pg_source)
    await _same_as_sqlite(tmp_path, path, pg_source, "openai-agents")


async def test_openai_agents_sqlalchemy_session(tmp_path: Path, pg_source: str) -> None:
    path = tmp_path / "agents.db"
    await write_openai_agents_sqlalchemy(path, {"a": responses_items(3), "b": responses_items(1)})
    copy_tables(path, pg_source)
    await _same_as_sqlite(tmp_path, path, pg_source, "openai-agents")


async def test_langchain(tmp_path: Path, pg_source: str) -> None:
    path = tmp_path / "lc.db"
    write_langchain(path, {"lc-1": langchain_messages(2), "lc-2": langchain_messages(1)})
    copy_tables(path, pg_source)
    await _same_as_sqlite(tmp_path, path, pg_source, "langchain")


@pytest.mark.parametrize("fixture", ["adk_v1.db", "adk_v0.db", "adk_sqlite.db"])
async def test_adk(tmp_path: Path, pg_source: str, fixture: str) -> None:
    copy_tables(FIXTURE_DIR / fixture, pg_source, ADK_JSON)
    await _same_as_sqlite(tmp_path, FIXTURE_DIR / fixture, pg_source, "adk")


async def test_the_password_is_never_shown(tmp_path: Path, pg_source: str) -> None:
    path = tmp_path / "agents.db"
    await write_openai_agents(path, {"s1": responses_items(1)})
    copy_tables(path, pg_source)
    execute(pg_source, "UPDATE agent_messages SET message_data = '{' WHERE id = 2")
    store_url = f"sqlite:///{tmp_path}/cli.db"
    result = chatledger("import", "--create", pg_source, "--url", store_url)
    assert_one_line_error(result, contains="row 2: message_data is not JSON")
    assert PASSWORD not in result.stderr
    assert pg_source.replace(f":{PASSWORD}@", ":***@") in result.stderr
    async with HistoryStore.open(store_url) as store:
        assert await store.sessions() == []  # the refused source wrote nothing
        report = await import_sources(store, [pg_source], skip_invalid=True)
    assert report.sessions == 0 and len(report.skipped) == 1
    assert PASSWORD not in report.model_dump_json()
    assert [s.source for s in report.skipped] == [pg_source.replace(PASSWORD, "***")]


async def test_a_file_format_is_refused_for_a_url(tmp_path: Path, pg_source: str) -> None:
    async with HistoryStore.open(f"sqlite:///{tmp_path}/s.db") as store:
        with pytest.raises(InvalidSource, match="a database URL, but codex reads files"):
            await import_sources(store, [pg_source], format="codex")
        with pytest.raises(InvalidSource, match="a database of none of the known formats"):
            await import_sources(store, [pg_source])


async def test_an_unreachable_database_is_refused_in_one_line(tmp_path: Path) -> None:
    url = f"postgresql://me:{PASSWORD}@127.0.0.1:1/nowhere"
    result = chatledger("import", "--create", url, "--url", f"sqlite:///{tmp_path}/s.db")
    assert_one_line_error(result, contains="cannot open the database")
    assert PASSWORD not in result.stderr and "postgresql://me:***@127.0.0.1:1/nowhere" in (
        result.stderr
    )


async def test_views_and_generated_columns_are_refused(tmp_path: Path, pg_source: str) -> None:
    execute(
        pg_source,
        "CREATE TABLE base (id bigint, session_id text, message text)",
        "CREATE VIEW message_store AS SELECT * FROM base",
        "CREATE TABLE agent_messages (id bigint, session_id text, message_data text, "
        "created_at text, n bigint GENERATED ALWAYS AS (id * 2) STORED)",
    )
    async with HistoryStore.open(f"sqlite:///{tmp_path}/s.db") as store:
        with pytest.raises(InvalidSource, match="message_store is a view, not a table"):
            await import_sources(store, [pg_source], format="langchain", table="message_store")
        with pytest.raises(InvalidSource, match=r"agent_messages has generated columns \(n\)"):
            await import_sources(store, [pg_source], table="agent_messages")
        assert await store.sessions() == []


async def test_a_long_query_is_stopped_by_the_timeout(pg_source: str) -> None:
    execute(pg_source, "CREATE TABLE t (n bigint)", "INSERT INTO t VALUES (1)")
    database = _postgres.PostgresDatabase(_url(pg_source), "the source")
    with read_with(Reading(timeout=0.2)):
        with pytest.raises(InvalidSource, match=r"worked longer than 0.2 s"):
            list(database.rows("SELECT n FROM t, pg_sleep(5)"))
        assert list(database.rows("SELECT n FROM t")) == [(1,)]


async def test_the_source_is_read_only(pg_source: str) -> None:
    execute(pg_source, "CREATE TABLE t (n bigint)")
    database = _postgres.PostgresDatabase(_url(pg_source), "the source")
    with pytest.raises(InvalidSource, match="read-only transaction"):
        list(database.rows("INSERT INTO t VALUES (1) RETURNING n"))
    assert list(database.rows("SELECT count(*) FROM t")) == [(0,)]


async def test_rows_stream_in_pages(pg_source: str) -> None:
    count = _postgres.FETCH * 3 + 5
    execute(pg_source, f"CREATE TABLE t AS SELECT generate_series(1, {count}) AS n")
    database = _postgres.PostgresDatabase(_url(pg_source), "the source")
    reading = database.rows("SELECT n FROM t ORDER BY n")
    assert next(reading) == (1,)
    reading.close()  # an abandoned read closes its connection and its loop
    assert [n for (n,) in database.rows("SELECT n FROM t ORDER BY n")] == list(range(1, count + 1))
    await asyncio.sleep(0)


def _url(url: str) -> _postgres.DatabaseUrl:
    from store.importing.source import source_location

    location = source_location(url)
    assert isinstance(location, _postgres.DatabaseUrl)
    return location


async def test_open_webui(tmp_path: Path, pg_source: str) -> None:
    fixture = FIXTURE_DIR / "open_webui" / "webui.db"
    copy_tables(fixture, pg_source, frozenset({"chat", "meta"}))
    await _same_as_sqlite(tmp_path, fixture, pg_source, "open-webui")
