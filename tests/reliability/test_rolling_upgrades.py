"""A rolling deploy: a process keeps working against a database one compatible
revision ahead, refuses one that is not marked compatible, and refuses message rows of a
format it cannot read.

The newer release is simulated by a revision script this library does not ship,
applied from a second versions directory; this library's own configuration (the
"previous release") then opens the database.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from store import HistoryStore, MigrationRequired
from store.errors import CorruptRowError
from store.sql.drivers.engine import create_engine
from store.sql.migrations import (
    current_revisions,
    ensure_schema,
    migrate,
    schema_marks,
    schema_state,
)
from store.sql.migrations.migrator import alembic_config
from store.sql.migrations.revisions import head_revisions, shipped_revisions
from store.sql.schema import MESSAGES, SCHEMA_REVISIONS
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer

TOKENIZER = CharacterEstimatorTokenizer()
TABLE_REVISION = "0003"
"""The revision that creates ``chatledger_schema_revisions``."""

FUTURE = '''
"""A revision of a newer chatledger.

Revision ID: {revision}
Revises: {down}
"""

import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{down}"
branch_labels = None
depends_on = None
{marker}

def upgrade() -> None:
    op.add_column("chatledger_sessions", sa.Column("col_{revision}", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("chatledger_sessions", "col_{revision}")
'''


def _future(directory: Path, revision: str, down: str, *, compatible: bool | None) -> None:
    marker = "" if compatible is None else f"backward_compatible = {compatible}\n"
    text = FUTURE.format(revision=revision, down=down, marker=marker)
    (directory / f"{revision}_future.py").write_text(textwrap.dedent(text))


async def _run_newer(url: str, directory: Path, revision: str, *, down: bool = False) -> None:
    """Migrate as the newer release does: this library's scripts plus ``directory``'s."""
    config = alembic_config()
    shipped = config.get_main_option("version_locations")
    config.set_main_option("version_locations", f"{shipped}{os.pathsep}{directory}")

    def run(connection: Connection) -> None:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)

    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(run)
    finally:
        await engine.dispose()


async def _use(url: str) -> list[str]:
    async with HistoryStore.open(url, tokenizer=TOKENIZER) as store:
        await store.append("s", [Message.text_message("user", "still works")])
        return [m.message.text for m in await store.history("s")]


async def test_each_applied_revision_records_its_marker(db_url: str) -> None:
    await migrate(db_url)
    engine = create_engine(db_url)
    try:
        marks = await schema_marks(engine)
    finally:
        await engine.dispose()
    head = head_revisions()[0]
    shipped = {r.revision: r.backward_compatible for r in shipped_revisions()}
    # the revisions applied since the bookkeeping table exists (0003 on)
    assert {r: m.backward_compatible for r, m in marks.items()} == {r: shipped[r] for r in marks}
    assert shipped["0005"] and not shipped["0006"]  # branches: see its docstring
    assert marks[head].down_revision is not None


async def test_a_database_one_compatible_revision_ahead_is_used_as_it_is(
    db_url: str, tmp_path: Path
) -> None:
    head = head_revisions()[0]
    _future(tmp_path, "9001", head, compatible=True)
    await migrate(db_url)
    await _run_newer(db_url, tmp_path, "9001")
    assert await _use(db_url) == ["still works"]
    assert "newer chatledger, compatible" in (await schema_state(db_url)).describe()
    engine = create_engine(db_url)
    try:
        await ensure_schema(engine, upgrade=True)  # nothing to do, nothing refused
        assert await current_revisions(engine) == ("9001",)
    finally:
        await engine.dispose()


async def test_a_chain_of_compatible_revisions_ahead_is_used(db_url: str, tmp_path: Path) -> None:
    _future(tmp_path, "9001", head_revisions()[0], compatible=True)
    _future(tmp_path, "9002", "9001", compatible=True)
    await migrate(db_url)
    await _run_newer(db_url, tmp_path, "9002")
    assert await _use(db_url) == ["still works"]


@pytest.mark.parametrize("compatible", [False, None], ids=["marked-incompatible", "unmarked"])
async def test_a_newer_revision_not_marked_compatible_is_refused(
    db_url: str, tmp_path: Path, compatible: bool | None
) -> None:
    _future(tmp_path, "9001", head_revisions()[0], compatible=True)
    _future(tmp_path, "9002", "9001", compatible=compatible)
    await migrate(db_url)
    await _run_newer(db_url, tmp_path, "9002")
    with pytest.raises(MigrationRequired, match="created by a newer chatledger"):
        await _use(db_url)
    assert "(upgrade the package)" in (await schema_state(db_url)).describe()


async def test_the_newer_release_downgrading_forgets_its_marker(
    db_url: str, tmp_path: Path
) -> None:
    head = head_revisions()[0]
    _future(tmp_path, "9001", head, compatible=True)
    await migrate(db_url)
    await _run_newer(db_url, tmp_path, "9001")
    await _run_newer(db_url, tmp_path, head, down=True)
    engine = create_engine(db_url)
    try:
        assert "9001" not in await schema_marks(engine)
        assert await current_revisions(engine) == (head,)
    finally:
        await engine.dispose()
    assert await _use(db_url) == ["still works"]


async def test_messages_are_stored_with_the_format_version(db_url: str) -> None:
    await _use(db_url)
    engine = create_engine(db_url)
    try:
        async with engine.connect() as conn:
            versions = (await conn.execute(select(MESSAGES.c.format_version))).scalars().all()
        assert versions == [1]
    finally:
        await engine.dispose()


async def test_a_message_of_a_newer_format_is_refused_not_misread(db_url: str) -> None:
    await _use(db_url)
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(update(MESSAGES).values(format_version=2))
    finally:
        await engine.dispose()
    async with HistoryStore.open(db_url, tokenizer=TOKENIZER) as store:
        with pytest.raises(CorruptRowError, match="format 2"):
            await store.history("s")
        with pytest.raises(CorruptRowError, match="newer chatledger"):
            await store.context("s")


async def test_migrating_an_empty_database_records_only_the_revisions_with_the_table(
    empty_db_url: str,
) -> None:
    await migrate(empty_db_url)
    engine = create_engine(empty_db_url)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(select(SCHEMA_REVISIONS.c.revision))).scalars().all()
    finally:
        await engine.dispose()
    # the table comes with 0003: it records that revision and every one after it
    scripts = ScriptDirectory.from_config(alembic_config(empty_db_url))
    shipped = [s.revision for s in reversed(list(scripts.walk_revisions()))]
    assert list(rows) == shipped[shipped.index(TABLE_REVISION) :]
    assert rows[-1] == head_revisions()[0]
