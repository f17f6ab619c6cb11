"""What people get wrong, on SQLite and PostgreSQL: one line naming the fix, the exit
code of its kind, and reads that never write (a foreign SQLite file stays byte for
byte the same; a PostgreSQL database gets no table)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shlex
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.engine import make_url

from store import HistoryStore, MigrationRequired
from store.sql.drivers.engine import sqlite_file
from store.sql.migrations import VERSION_TABLE, migrate
from tests.cli.helpers import assert_one_line_error, chatledger, conversation, invoke, run_api
from tests.conftest import PgServer

READS: list[tuple[str, ...]] = [
    ("sessions",),
    ("tenants",),
    ("show", "s"),
    ("show", "s", "--all"),
    ("show", "s", "--context"),
    ("audit",),
    ("audit", "s"),
    ("excluded", "s"),
    ("why", "s", "m"),
    ("stats",),
    ("stats", "s"),
    ("compact", "s", "--strategy", "truncation:max_n=4,compact_to=2", "--dry-run"),
]
"""Every read command (``db current`` and ``db history`` report instead of failing)."""
WRITES: list[tuple[str, ...]] = [
    ("compact", "s", "--strategy", "truncation:max_n=4,compact_to=2"),
    ("restore", "s", "--group", "g"),
    ("pin", "s", "g"),
    ("unpin", "s", "g"),
    ("delete", "s", "--yes"),
    ("recount", "s", "--tokenizer", "o200k_base"),
]
"""The commands that change a session: they refuse a database without the schema too."""


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _pg_tables(url: str) -> list[str]:
    async def tables() -> list[str]:
        dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        conn = await asyncpg.connect(dsn, timeout=10)
        try:
            found = await conn.fetch(
                "SELECT table_schema || '.' || table_name FROM information_schema.tables "
                "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
            )
            return sorted(str(row[0]) for row in found)
        finally:
            await conn.close()

    return asyncio.run(tables())


@pytest.fixture
def foreign_url(empty_db_url: str, tmp_path: Path) -> Iterator[str]:
    """Another application's database: one table of its own, no chatledger schema."""
    path = sqlite_file(empty_db_url)
    if path is not None:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
        conn.commit()
        conn.close()
        yield empty_db_url
        return

    async def create() -> None:
        dsn = make_url(empty_db_url).set(drivername="postgresql").render_as_string(False)
        conn = await asyncpg.connect(dsn, timeout=10)
        try:
            await conn.execute("CREATE TABLE invoices (id serial PRIMARY KEY, total real)")
        finally:
            await conn.close()

    asyncio.run(create())
    yield empty_db_url


def _snapshot(url: str) -> Callable[[], object]:
    """A function returning what a database holds: a SQLite folder's bytes, or the
    PostgreSQL tables."""
    path = sqlite_file(url)
    if path is not None:
        folder = Path(path).parent
        return lambda: _digest(folder)
    return lambda: _pg_tables(url)


def test_reads_and_writes_refuse_a_foreign_database_and_leave_it_as_it_was(
    foreign_url: str,
) -> None:
    snapshot = _snapshot(foreign_url)
    before = snapshot()
    for args in (*READS, *WRITES):
        result = invoke(*args, "--url", foreign_url)
        assert_one_line_error(result, contains="no chatledger schema in ")
        hint = f"run `chatledger db upgrade --url {shlex.quote(foreign_url)}` to create it"
        assert hint in result.stderr
        assert result.returncode == 1
    current = invoke("db", "current", "--url", foreign_url)
    assert current.returncode == 0 and "no chatledger schema" in current.stdout
    assert invoke("db", "check", "--url", foreign_url).returncode == 1
    assert invoke("db", "history", "--url", foreign_url).returncode == 0
    assert invoke("db", "downgrade", "base", "--url", foreign_url).returncode == 1
    assert snapshot() == before


def test_the_console_script_leaves_a_foreign_sqlite_file_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    before = _digest(tmp_path)
    for args in (("sessions",), ("stats",), ("show", "s", "--context")):
        result = chatledger(*args, "--url", str(path))
        assert_one_line_error(result, contains=f"no chatledger schema in {path}")
        assert result.returncode == 1
    assert _digest(tmp_path) == before  # no -wal, no -shm, not a byte changed


def test_an_empty_sqlite_file_is_no_schema_and_stays_empty(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    assert_one_line_error(invoke("sessions", "--url", str(path)), contains="no chatledger schema")
    assert [p.name for p in tmp_path.iterdir()] == ["empty.db"] and path.stat().st_size == 0


def _future(url: str) -> None:
    """Record a revision this chatledger does not ship, as a newer one would."""

    async def bump() -> None:
        from sqlalchemy import text

        from store.sql.drivers.engine import create_engine

        engine = create_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
        finally:
            await engine.dispose()

    asyncio.run(bump())


def test_a_database_made_by_a_newer_chatledger_says_so(db_url: str) -> None:
    asyncio.run(migrate(db_url))
    _future(db_url)
    for args in (("sessions",), ("stats",), ("tenants",), ("db", "upgrade")):
        result = invoke(*args, "--url", db_url)
        assert_one_line_error(result, contains="created by a newer chatledger (revision 9999)")
        assert "upgrade the package" in result.stderr and "db upgrade`" not in result.stderr
    current = invoke("db", "current", "--url", db_url)
    assert "made by a newer chatledger" in current.stdout
    with pytest.raises(MigrationRequired, match="newer chatledger"):
        run_api(db_url, HistoryStore.stats)


def test_a_plain_path_is_a_sqlite_file(tmp_path: Path) -> None:
    made = chatledger("db", "upgrade", "--url", "chat.db", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    run_api(f"sqlite:///{tmp_path}/chat.db", lambda s: s.append("p", conversation(1)))
    listed = chatledger("sessions", "--url", "chat.db", "--json", cwd=tmp_path)
    assert [s["session_id"] for s in listed.json()] == ["p"]


@pytest.mark.parametrize(
    ("url", "contains"),
    [
        ("{tmp}", "is a directory"),
        ("{tmp}/missing/x.db", "no database at {tmp}/missing/x.db"),
        ("{tmp}/junk.db", "{tmp}/junk.db is not a SQLite database"),
        ("mysql://me@host/db", "chatledger supports sqlite:///PATH, postgresql://"),
        ("sqlite+pysqlite:///{tmp}/none.db", "no database at {tmp}/none.db"),
        ("sqlite+sqlcipher:///{tmp}/x.db", "use 'sqlite:///{tmp}/x.db'"),
        ("postgresql+pg9000://u@h/db", "use 'postgresql://u@h/db'"),
        ("no scheme here", "invalid database URL"),
    ],
)
def test_a_bad_database_is_named_in_one_line(tmp_path: Path, url: str, contains: str) -> None:
    (tmp_path / "junk.db").write_bytes(b"not a database " * 200)
    for args in (("sessions",), ("db", "current")):
        result = invoke(*args, "--url", url.format(tmp=tmp_path))
        assert_one_line_error(result, contains=contains.format(tmp=tmp_path))
        assert result.returncode == 1


def test_db_upgrade_names_a_path_it_cannot_create(tmp_path: Path) -> None:
    (tmp_path / "junk.db").write_bytes(b"not a database " * 200)
    for target, contains in (
        (f"{tmp_path}/missing/x.db", f"the folder {tmp_path}/missing does not exist"),
        (f"{tmp_path}/junk.db", "is not a SQLite database"),
        (str(tmp_path), "is a directory"),
    ):
        result = chatledger("db", "upgrade", "--url", target)
        assert_one_line_error(result, contains=contains)
        assert result.returncode == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.db"]


def test_a_read_only_folder_hints_at_the_wal_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/ro.db"
    asyncio.run(migrate(url))
    real = os.access

    def access(path: object, mode: int, **kw: object) -> bool:  # root may write anywhere
        if Path(str(path)) == tmp_path and mode & os.W_OK:
            return False
        return real(path, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    result = invoke("sessions", "--url", url)
    assert_one_line_error(result, contains=f"the folder {tmp_path} is read-only")
    assert "ro.db-wal and ro.db-shm" in result.stderr


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A migrated, empty PostgreSQL database."""
    name = pg_server.clone()
    try:
        yield pg_server.url_for(name)
    finally:
        pg_server.drop_later(name)


@pytest.mark.postgres
def test_postgres_driver_names_and_missing_databases(pg_url: str) -> None:
    db_url = pg_url
    run_api(db_url, lambda s: s.append("p", conversation(1)))
    parsed = make_url(db_url)
    for driver in ("psycopg2", "psycopg", "asyncpg"):
        mapped = parsed.set(drivername=f"postgresql+{driver}").render_as_string(False)
        listed = invoke("sessions", "--url", mapped, "--json")
        assert listed.returncode == 0, listed
        assert [s["session_id"] for s in listed.json()] == ["p"]
    schemeless = db_url.replace("postgresql://", "postgres://", 1)
    console = chatledger("sessions", "--url", schemeless, "--json")  # the console script
    assert console.returncode == 0, console.stderr
    assert [s["session_id"] for s in console.json()] == ["p"]
    missing = parsed.set(database="chatledger_no_such_db").render_as_string(False)
    result = chatledger("sessions", "--url", missing)
    assert_one_line_error(result, contains='database "chatledger_no_such_db" does not exist')
    assert "asyncpg" not in result.stderr and "Error" not in result.stderr
