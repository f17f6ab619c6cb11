"""Alembic owns the schema: no drift, a clean round trip, safe concurrent creation."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from store import HistoryStore
from store.errors import MigrationRequired
from store.sql.drivers.engine import create_engine
from store.sql.migrations import VERSION_TABLE, current_revisions, downgrade, migrate
from store.sql.migrations.revisions import head_revisions, script_location
from store.sql.schema import metadata
from store.sql.search.index import INDEX_OBJECTS
from strategies.messages import Message

REPO = Path(__file__).resolve().parents[2]


def _include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    if name is not None and name.startswith(INDEX_OBJECTS):  # the search index's own
        return False
    if type_ == "table":
        return bool(name and name.startswith("chatledger_"))
    return True


def _diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(
        connection,
        opts={"compare_type": True, "include_object": _include, "version_table": VERSION_TABLE},
    )
    return list(compare_metadata(context, metadata))


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


async def test_upgrade_has_no_drift_and_round_trips(empty_db_url: str) -> None:
    engine = create_engine(empty_db_url)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("CREATE TABLE host_app_table (id INTEGER PRIMARY KEY)"))
            await conn.commit()
        await migrate(empty_db_url)
        assert await current_revisions(engine) == head_revisions()
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
            tables = await conn.run_sync(_tables)
        assert {t for t in tables if not t.startswith("chatledger_")} == {"host_app_table"}
        assert set(metadata.tables) | {VERSION_TABLE} <= tables

        await downgrade(empty_db_url, revision="base")
        assert await current_revisions(engine) == ()
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == {"host_app_table", VERSION_TABLE}

        await migrate(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
    finally:
        await engine.dispose()


async def test_open_creates_schema_concurrently(empty_db_url: str) -> None:
    async def open_and_append(index: int) -> None:
        async with HistoryStore.open(empty_db_url) as store:
            await store.append(f"s{index}", [Message.text_message("user", "hi")])

    await asyncio.gather(*(open_and_append(i) for i in range(4)))
    async with HistoryStore.open(empty_db_url) as store:
        assert len(await store.sessions()) == 4
        assert await current_revisions(store.engine) == head_revisions()


async def test_schema_behind_requires_upgrade(empty_db_url: str) -> None:
    await migrate(empty_db_url, revision="0001")
    with pytest.raises(MigrationRequired, match=r"at revision 0001.*chatledger db upgrade"):
        async with HistoryStore.open(empty_db_url):
            pass
    async with HistoryStore.open(empty_db_url, upgrade=True) as store:
        assert await current_revisions(store.engine) == head_revisions()


async def test_a_database_of_a_newer_chatledger_says_to_upgrade_the_package(
    empty_db_url: str,
) -> None:
    await migrate(empty_db_url)
    engine = create_engine(empty_db_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
    finally:
        await engine.dispose()
    for create in (True, False):
        with pytest.raises(MigrationRequired, match=r"newer chatledger \(revision 9999\)"):
            async with HistoryStore.open(empty_db_url, create=create, upgrade=True):
                pass


async def test_a_database_without_the_schema_is_refused_when_nothing_may_be_created(
    empty_db_url: str,
) -> None:
    with pytest.raises(MigrationRequired, match="chatledger db upgrade"):
        async with HistoryStore.open(empty_db_url, create=False):
            pass
    engine = create_engine(empty_db_url)
    try:
        assert await current_revisions(engine) == ()
        async with engine.connect() as conn:
            assert not [t for t in await conn.run_sync(_tables) if t.startswith("chatledger_")]
    finally:
        await engine.dispose()


def test_config_is_built_in_code(tmp_path: Path) -> None:
    """Migrating needs no alembic.ini: run from an unrelated directory."""
    assert (script_location() / "env.py").is_file()
    url = f"sqlite:///{tmp_path}/fresh.db"
    code = f"from store.sql.migrations import migrate_sync; migrate_sync({url!r})"
    subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        check=True,
        env={"PYTHONPATH": str(REPO), "PATH": ""},
    )
    assert (tmp_path / "fresh.db").is_file()
    assert not (tmp_path / "alembic.ini").exists()


def test_alembic_command_line(tmp_path: Path) -> None:
    """The repository's alembic.ini drives the same async env.py from the command line."""
    env = {"PYTHONPATH": str(REPO), "PATH": ""}
    ini = str(REPO / "alembic.ini")
    for args in (["upgrade", "head"], ["downgrade", "base"], ["upgrade", "head"]):
        subprocess.run(
            [sys.executable, "-m", "alembic", "-c", ini, *args],
            cwd=tmp_path,
            check=True,
            env=env,
            capture_output=True,
        )
    found = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", ini, "current"],
        cwd=tmp_path,
        check=True,
        env=env,
        capture_output=True,
        text=True,
    )
    assert head_revisions()[0] in found.stdout
    assert (tmp_path / "chatledger.db").is_file()


def test_packaged_layout_creates_a_fresh_database(tmp_path: Path) -> None:
    """The wheel's layout (migrations under ``store/_migrations``), without the repository.

    The wheel itself is built and installed by tests/tokenizers/test_tokenizers_wheel.py;
    this copies the same layout (pyproject's force-include) so that it runs offline.
    """
    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "store", site / "store", ignore=ignore)
    shutil.copytree(REPO / "strategies", site / "strategies", ignore=ignore)
    shutil.copytree(REPO / "migrations", site / "store" / "_migrations", ignore=ignore)
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    code = (
        "import asyncio, store.sql.migrations.revisions as m\n"
        "from store import HistoryStore\n"
        "from strategies.messages import Message\n"
        "async def main():\n"
        "    async with HistoryStore.open('sqlite:///fresh.db') as s:\n"
        "        await s.append('s', [Message.text_message('user', 'hi')])\n"
        "        print(m.script_location())\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=workdir,
        env={"PYTHONPATH": str(site), "PATH": ""},
        check=True,
        capture_output=True,
        text=True,
    )
    assert Path(done.stdout.strip()) == site / "store" / "_migrations"
    assert (workdir / "fresh.db").is_file()
