"""Fast start, by the modules a command loads (never by a timing): ``--help``,
``--version`` and ``version`` load neither SQLAlchemy nor Alembic nor tiktoken, reads
that count nothing load no tokenizer, importing the store loads no Alembic, and opening
a database whose schema is current loads no Alembic either: only creating or upgrading
a schema does."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from importlib.metadata import version as metadata_version
from pathlib import Path

import click
import pytest

import store.cli
from store.cli import _COMMANDS, cli
from store.cli._version import installed_version
from store.sql.migrations import current_revisions, migrate
from store.sql.migrations.revisions import head_revisions
from tests.cli.helpers import conversation, run_api

HEAVY = (
    "sqlalchemy",
    "tiktoken",
    "alembic",
    "pydantic",
    "asyncpg",
    "aiosqlite",
    "rich",
    "pygments",
    "mako",
)
PROBE = """
import json, sys
from store.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exited:
    code = exited.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}),
      file=sys.stderr)
"""
OPEN = """
import asyncio, json, sys
from store import HistoryStore
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer

async def main() -> None:
    async with HistoryStore.open(sys.argv[1], tokenizer=CharacterEstimatorTokenizer()) as s:
        await s.append("s", [Message.text_message("user", "hi")])

asyncio.run(main())
print(json.dumps({"code": 0, "modules": sorted(sys.modules)}),
      file=sys.stderr)
"""
IMPORT = """
import json, sys
from store import HistoryStore
print(json.dumps({"code": 0, "modules": sorted(sys.modules)}),
      file=sys.stderr)
"""


def _modules(*args: str, code: str = PROBE) -> set[str]:
    """The modules loaded by ``code`` with ``args`` (by default ``chatledger ARGS``),
    which must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return set(report["modules"])


def _loaded(*args: str, code: str = PROBE) -> set[str]:
    """The top-level packages of :func:`_modules`."""
    return {name.split(".")[0] for name in _modules(*args, code=code)}


@pytest.mark.parametrize(
    "args",
    [("--help",), ("-h",), ("--version",), ("version",), ("db", "--help"), ("show", "--help")],
)
def test_help_and_version_load_nothing_heavy(args: tuple[str, ...]) -> None:
    loaded = _loaded(*args)
    assert "click" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize("args", [("version",), ("--version",)])
def test_the_version_is_read_without_importlib_metadata(args: tuple[str, ...]) -> None:
    assert "importlib.metadata" not in _modules(*args)


def test_the_version_is_the_installed_distributions() -> None:
    assert installed_version() == metadata_version("chatledger")


def test_the_version_is_read_from_the_first_dist_info_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headless = tmp_path / "first" / "chatledger-0.0.dist-info"
    headless.mkdir(parents=True)
    (headless / "METADATA").write_text("Name: chatledger\n\nVersion: 0.0 (in the body)\n")
    shipped = tmp_path / "second" / "chatledger-9.9.dist-info"
    shipped.mkdir(parents=True)
    (shipped / "METADATA").write_text("Metadata-Version: 2.4\nName: chatledger\nVersion: 9.9\n")
    path = [str(tmp_path / "missing"), str(tmp_path / "first"), str(tmp_path / "second")]
    monkeypatch.setattr(sys, "path", path)
    assert installed_version() == "9.9"


def test_importing_the_store_loads_no_alembic() -> None:
    loaded = _loaded(code=IMPORT)
    assert "sqlalchemy" in loaded  # the SQL backend did load
    assert not loaded & {"alembic", "mako", "pygments"}


def test_opening_a_database_at_head_loads_no_alembic(db_url: str) -> None:
    asyncio.run(migrate(db_url))
    loaded = _loaded(db_url, code=OPEN)
    assert "sqlalchemy" in loaded
    assert not loaded & {"alembic", "mako", "pygments"}


async def _revisions(url: str) -> tuple[str, ...]:
    from store.sql.drivers.engine import create_engine

    engine = create_engine(url)
    try:
        return await current_revisions(engine)
    finally:
        await engine.dispose()


def test_opening_an_empty_database_creates_the_schema_with_alembic(empty_db_url: str) -> None:
    assert "alembic" in _loaded(empty_db_url, code=OPEN)
    assert asyncio.run(_revisions(empty_db_url)) == head_revisions()


def test_the_schema_commands_load_alembic_only_to_move_the_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    assert "alembic" in _loaded("db", "upgrade", "--url", url)
    for args in (("db", "current"), ("db", "check"), ("db", "history"), ("sessions",)):
        assert "alembic" not in _loaded(*args, "--url", url), args


def test_reads_that_count_nothing_load_no_tokenizer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    run_api(url, lambda s: s.append("s", conversation(2)))
    for args in (("sessions",), ("show", "s"), ("audit",), ("stats", "s"), ("excluded", "s")):
        loaded = _loaded(*args, "--url", url)
        assert "sqlalchemy" in loaded, args  # the store did run
        assert "tiktoken" not in loaded, args
    assert "tiktoken" in _loaded("show", "s", "--context", "--url", url)  # it counts


def test_each_listed_command_is_the_command_of_that_name_with_that_summary() -> None:
    for name, (module, attribute, summary) in _COMMANDS.items():
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        assert command.name == name
        assert command.get_short_help_str(limit=1000) == summary, name


def _listed_commands() -> list[click.Command]:
    """Every command ``chatledger`` runs, the ``db`` group's included."""
    ctx = click.Context(cli)
    found: list[click.Command] = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None, name
        found.append(command)
        if isinstance(command, click.Group):
            found.extend(command.commands.values())
    return found


def test_every_command_the_cli_modules_define_is_listed() -> None:
    listed = _listed_commands()
    for info in pkgutil.iter_modules(store.cli.__path__, "store.cli."):
        if info.name.endswith("__main__"):  # importing it would run the CLI
            continue
        for value in vars(importlib.import_module(info.name)).values():
            if isinstance(value, click.Command) and value is not cli:
                assert any(value is c for c in listed), (info.name, value.name)


def test_the_listing_shows_what_the_commands_themselves_would() -> None:
    """``--help`` (no command loaded) prints what it prints once every command is."""
    eager = "from store.cli import cli, main\nimport click\n" + (
        "[cli.get_command(click.Context(cli), n) for n in cli.list_commands(click.Context(cli))]\n"
        "main(['--help'])\n"
    )
    env = {**os.environ, "COLUMNS": "90"}

    def shown(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, check=False, env=env
        )
        return done.stdout

    lazy = shown("-c", "from store.cli import main\nmain(['--help'])\n")
    assert "Commands:" in lazy
    assert lazy == shown("-c", eager)


CONVERTERS = {
    "store.formats.agent_framework",
    "store.formats.anthropic",
    "store.formats.langchain",
    "store.formats.openai_chat",
    "store.formats.openai_responses",
    "store.importing",
    "store.exporting",
}


def test_data_commands_load_only_the_sql_stack(tmp_path: Path) -> None:
    """A read loads the store and SQLAlchemy, not Alembic, rich's pygments, or the
    formats' converters (only import, export and the integrations use those)."""
    url = f"sqlite:///{tmp_path}/s.db"
    run_api(url, lambda s: s.append("s", conversation(2)))
    for args in (
        ("sessions",),
        ("show", "s", "--all"),
        ("audit",),
        ("stats", "s"),
        ("why", "s", "2"),
    ):
        modules = _modules(*args, "--url", url)
        assert "sqlalchemy" in modules, args
        top = {name.split(".")[0] for name in modules}
        assert not top & {"alembic", "mako", "pygments", "rich"}, (args, top)
        assert not modules & CONVERTERS, (args, sorted(modules & CONVERTERS))


def test_the_formats_load_a_converter_on_its_first_use() -> None:
    code = (
        "import json, sys\n"
        "import store.formats as f\n"
        "before = 'store.formats.anthropic' in sys.modules\n"
        "f.to_anthropic\n"
        "print(json.dumps({'code': 0, 'modules': [str(before)] + sorted(sys.modules)}),"
        " file=sys.stderr)\n"
    )
    modules = _modules(code=code)
    assert "False" in modules and "store.formats.anthropic" in modules
