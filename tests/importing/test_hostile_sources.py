"""Hostile import sources: another system's database is data, never code to run.

Views, virtual tables and generated columns where a table is expected are refused in one
line, on every format that reads a SQLite database; every query runs under a guard of
steps and of the store's timeout; a line or row nested too deeply is an
``InvalidSource`` naming it. What could hang runs in a subprocess with a generous
kill-timeout, so that a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from store.errors import InvalidSource
from store.importing import import_sources
from store.importing.readers import _sqlite
from store.importing.source import Reading, read_with, reading
from store.memory import InMemoryHistoryStore
from store.rules.limits import Limits
from tests.cli.helpers import assert_one_line_error, chatledger

KILL_AFTER = 120.0
"""Seconds before a subprocess that should have been refused at once is killed."""

ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT {columns} FROM r"
"""A query that never ends (``{columns}``: the selected expressions over ``n``)."""

LANGCHAIN_ROW = json.dumps({"type": "human", "data": {"content": "hi"}})
AGENTS_ROW = json.dumps({"role": "user", "content": "hi"})
ADK_EVENT = json.dumps({"author": "user", "content": {"role": "user", "parts": [{"text": "hi"}]}})

ADK_SESSIONS = "CREATE TABLE sessions (app_name TEXT, user_id TEXT, id TEXT)"

# each SQLite format: its messages table's columns (as a view selects them over n), and
# the statements that make a real table of them holding one row of `message`
VIEWS = {
    "langchain": (
        "message_store",
        "n AS id, 's' AS session_id, '{}' AS message".format(LANGCHAIN_ROW.replace("'", "''")),
        [],
    ),
    "openai-agents": (
        "agent_messages",
        f"n AS id, 's' AS session_id, '{AGENTS_ROW}' AS message_data, NULL AS created_at",
        [],
    ),
    "adk": (
        "events",
        "'e' || n AS id, 'app' AS app_name, 'u' AS user_id, 's' AS session_id, "
        f"n AS timestamp, '{ADK_EVENT}' AS event_data",
        [ADK_SESSIONS],
    ),
}


def _database(path: Path, *statements: str) -> Path:
    with sqlite3.connect(path) as connection:
        for statement in statements:
            connection.execute(statement)
    connection.close()
    return path


def _endless_view(tmp_path: Path, fmt: str) -> Path:
    table, selected, others = VIEWS[fmt]
    view = f"CREATE VIEW {table} AS " + ENDLESS.format(columns=selected)
    return _database(tmp_path / f"{fmt}.db", *others, view)


@pytest.mark.parametrize("given", [False, True], ids=["detected", "format-given"])
@pytest.mark.parametrize("fmt", sorted(VIEWS))
def test_a_view_over_an_endless_query_is_refused_in_one_line(
    tmp_path: Path, fmt: str, given: bool
) -> None:
    source = _endless_view(tmp_path, fmt)
    assert source.stat().st_size <= 8192  # a few kB: the whole attack
    table = VIEWS[fmt][0]
    options = ["--format", fmt] if given else []
    result = chatledger(
        "import",
        "--create",
        str(source),
        *options,
        "--url",
        str(tmp_path / "store.db"),
        timeout=KILL_AFTER,
    )
    assert_one_line_error(result, contains=f"{table} is a view, not a table")


GENERATED = {
    "langchain": [
        "CREATE TABLE message_store (id INTEGER PRIMARY KEY, session_id TEXT, seed TEXT, "
        "message TEXT GENERATED ALWAYS AS "
        "(json_object('type', 'human', 'data', json_object('content', seed))) {kind})",
        "INSERT INTO message_store (session_id, seed) VALUES ('s', 'hi')",
    ],
    "openai-agents": [
        "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, seed TEXT, "
        "message_data TEXT GENERATED ALWAYS AS "
        "(json_object('role', 'user', 'content', seed)) {kind}, created_at TEXT)",
        "INSERT INTO agent_messages (session_id, seed) VALUES ('s', 'hi')",
    ],
    "adk": [
        ADK_SESSIONS,
        "CREATE TABLE events (id TEXT, app_name TEXT, user_id TEXT, session_id TEXT, "
        "timestamp REAL, seed TEXT, event_data TEXT GENERATED ALWAYS AS "
        "(json_object('author', 'user', 'content', json_object('role', 'user', 'parts', "
        "json_array(json_object('text', seed))))) {kind})",
        "INSERT INTO events (id, app_name, user_id, session_id, timestamp, seed) "
        "VALUES ('e1', 'app', 'u', 's', 1.0, 'hi')",
    ],
}


@pytest.mark.parametrize("kind", ["VIRTUAL", "STORED"])
@pytest.mark.parametrize("fmt", sorted(GENERATED))
async def test_a_generated_column_is_refused(tmp_path: Path, fmt: str, kind: str) -> None:
    statements = [s.format(kind=kind) for s in GENERATED[fmt]]
    source = _database(tmp_path / "generated.db", *statements)
    store = InMemoryHistoryStore()
    with pytest.raises(InvalidSource, match="has generated columns") as refused:
        await import_sources(store, [source], format=fmt, dry_run=True)
    assert "\n" not in str(refused.value)
    assert await store.sessions() == []


def test_a_generated_column_that_would_blow_up_is_refused_before_it_is_computed(
    tmp_path: Path,
) -> None:
    """A value of 800 MB a row, computed on read: refused from the schema alone (a
    regression computes it, and the subprocess runs out of its memory limit or time)."""
    source = _database(
        tmp_path / "huge.db",
        "CREATE TABLE message_store (id INTEGER PRIMARY KEY, session_id TEXT, "
        "message TEXT GENERATED ALWAYS AS (hex(zeroblob(400000000 + length(session_id)))) VIRTUAL)",
        *[f"INSERT INTO message_store (session_id) VALUES ('s{i}')" for i in range(8)],
    )
    assert source.stat().st_size <= 16384
    limited = textwrap.dedent(
        f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from store.cli import main
        main(["import", "--create", {str(source)!r}, "--format", "langchain", "--dry-run",
              "--url", {str(tmp_path / "store.db")!r}])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", limited],
        capture_output=True,
        text=True,
        timeout=KILL_AFTER,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "chatledger: error: "
        f"{source}: message_store has generated columns (message): "
        "only tables of stored columns are read"
    ]


async def test_a_virtual_table_is_refused(tmp_path: Path) -> None:
    source = _database(
        tmp_path / "virtual.db",
        "CREATE VIRTUAL TABLE message_store USING fts5(id, session_id, message)",
        f"INSERT INTO message_store VALUES (1, 's', '{LANGCHAIN_ROW}')",
    )
    store = InMemoryHistoryStore()
    with pytest.raises(InvalidSource, match="message_store is a virtual table"):
        await import_sources(store, [source], dry_run=True)
    assert await store.sessions() == []


def _in_subprocess(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=KILL_AFTER,
        check=False,
    )


def test_a_query_that_gives_no_row_is_stopped_by_its_budget_of_steps(tmp_path: Path) -> None:
    """The guard under every query: an endless sort over a real table's database stops
    with one ``InvalidSource`` (the budget of a 4 kB file is the minimum)."""
    source = _database(tmp_path / "real.db", "CREATE TABLE t (x)")
    query = ENDLESS.format(columns="n, 's', '{}'") + " ORDER BY 1"
    done = _in_subprocess(
        f"""
        from pathlib import Path
        from store.errors import InvalidSource
        from store.importing.readers._sqlite import rows
        try:
            next(rows(Path({str(source)!r}), "real.db", {query!r}))
        except InvalidSource as error:
            print(error)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("real.db: a query of the database worked more than "), done
    assert "steps without giving a row" in done.stdout


def test_a_query_that_gives_no_row_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    """With steps to spare, the time between two rows is the store's timeout."""
    source = _database(tmp_path / "real.db", "CREATE TABLE t (x)")
    query = ENDLESS.format(columns="n, 's', '{}'") + " ORDER BY 1"
    done = _in_subprocess(
        f"""
        from pathlib import Path
        from store.errors import InvalidSource
        from store.importing.readers import _sqlite
        from store.importing.source import Reading, read_with
        _sqlite.MIN_STEPS = 10**15
        with read_with(Reading(timeout=0.5)):
            try:
                next(_sqlite.rows(Path({str(source)!r}), "real.db", {query!r}))
            except InvalidSource as error:
                print(error)
        """
    )
    assert done.returncode == 0, done.stderr
    assert "worked longer than 0.5 s (the store's timeout) without giving a row" in done.stdout


def test_the_guard_lets_a_large_real_table_through(tmp_path: Path) -> None:
    """The budget is counted between rows: a table of many rows, sorted, is read whole."""
    source = _database(
        tmp_path / "many.db",
        "CREATE TABLE message_store (id INTEGER PRIMARY KEY, session_id TEXT, message TEXT)",
        "INSERT INTO message_store (session_id, message) "
        + ENDLESS.format(columns="'s' || (n % 97), 'x'")
        + " LIMIT 50000",
    )
    query = "SELECT id, session_id, message FROM message_store ORDER BY session_id, id"
    with read_with(Reading(timeout=30.0)):
        assert sum(1 for _ in _sqlite.rows(source, "many.db", query)) == 50_000


async def test_the_import_reads_with_the_store_limits_and_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from store import HistoryStore

    seen: list[Reading] = []

    def recording(path: Path, source: str, query: str) -> object:
        seen.append(reading())
        return iter(())

    monkeypatch.setattr("store.importing.readers._sqlite.rows", recording)
    source = _database(
        tmp_path / "lc.db",
        "CREATE TABLE message_store (id INTEGER PRIMARY KEY, session_id TEXT, message TEXT)",
    )
    limits = Limits(max_json_depth=8)
    url = f"sqlite:///{tmp_path}/store.db"
    async with HistoryStore.open(url, timeout=7.5, limits=limits) as store:
        await import_sources(store, [source], format="langchain", dry_run=True)
    assert seen and {(r.timeout, r.limits) for r in seen} == {(7.5, limits)}


def _nested(depth: int) -> object:
    value: object = "deep"
    for _ in range(depth):
        value = [value]
    return value


DEPTHS = [200, 100_000]
"""Past the store's bound (max_json_depth and the envelope), and past Python's parser."""


def _deep_text(depth: int) -> str:
    if depth < 1000:
        return json.dumps(_nested(depth))
    return "[" * depth + '"deep"' + "]" * depth


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("fmt", ["openai-chat", "jsonl", "langchain", "anthropic"])
async def test_a_deeply_nested_line_is_refused_naming_it(
    tmp_path: Path, fmt: str, depth: int
) -> None:
    deep = _deep_text(depth)
    good = {
        "openai-chat": {"messages": [{"role": "user", "content": "hi"}]},
        "jsonl": {
            "format": "chatledger",
            "version": 1,
            "session_id": "s",
            "seq": 0,
            "message": {"role": "user", "contents": [{"type": "text", "text": "hi"}]},
        },
        "langchain": {"session_id": "s", "messages": [{"type": "human", "data": {"content": "x"}}]},
        "anthropic": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10},
    }[fmt]
    line = json.dumps(good)
    bad = line.replace('"hi"', deep, 1) if '"hi"' in line else line.replace('"x"', deep, 1)
    source = tmp_path / "deep.jsonl"
    source.write_text(line + "\n" + bad + "\n", encoding="utf-8")
    store = InMemoryHistoryStore()
    with pytest.raises(InvalidSource, match="JSON nested deeper than 128 levels") as refused:
        await import_sources(store, [source], format=fmt, dry_run=True)
    assert refused.value.where == "line 2"
    assert len(str(refused.value)) < 300


@pytest.mark.parametrize("depth", DEPTHS)
async def test_a_deeply_nested_document_is_refused(tmp_path: Path, depth: int) -> None:
    source = tmp_path / "deep.json"
    source.write_text(
        '{"messages": [{"role": "user", "content": ' + _deep_text(depth) + "}]}",
        encoding="utf-8",
    )
    with pytest.raises(InvalidSource, match="JSON nested deeper than 128 levels") as refused:
        await import_sources(InMemoryHistoryStore(), [source], format="openai-chat")
    assert refused.value.where == "document"


DEEP_ROWS = {
    "langchain": (
        "CREATE TABLE message_store (id INTEGER PRIMARY KEY, session_id TEXT, message TEXT)",
        "INSERT INTO message_store (session_id, message) VALUES ('s', ?)",
        '{"type": "human", "data": {"content": "hi", "additional_kwargs": {"x": DEEP}}}',
        "row 2",
    ),
    "openai-agents": (
        "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, "
        "message_data TEXT, created_at TEXT)",
        "INSERT INTO agent_messages (session_id, message_data) VALUES ('s', ?)",
        '{"role": "user", "content": DEEP}',
        "row 2",
    ),
    "adk": (
        "CREATE TABLE events (id TEXT, app_name TEXT, user_id TEXT, session_id TEXT, "
        "timestamp REAL, event_data TEXT)",
        "INSERT INTO events VALUES ('e' || (SELECT count(*) FROM events), 'a', 'u', 's', "
        "(SELECT count(*) FROM events), ?)",
        '{"author": "user", "content": {"role": "user", "parts": [{"text": "hi", "x": DEEP}]}}',
        "row 2 (event e1)",
    ),
}


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("fmt", sorted(DEEP_ROWS))
async def test_a_deeply_nested_row_is_refused_naming_it(
    tmp_path: Path, fmt: str, depth: int
) -> None:
    create, insert, template, where = DEEP_ROWS[fmt]
    source = tmp_path / "deep.db"
    with sqlite3.connect(source) as connection:
        connection.execute(create)
        if fmt == "adk":
            connection.execute(ADK_SESSIONS)
        connection.execute(insert, (template.replace("DEEP", '"fine"'),))
        connection.execute(insert, (template.replace("DEEP", _deep_text(depth)),))
    connection.close()
    with pytest.raises(InvalidSource, match="JSON nested deeper than 128 levels") as refused:
        await import_sources(InMemoryHistoryStore(), [source], format=fmt, dry_run=True)
    assert refused.value.where == where


def test_a_deeply_nested_line_is_one_line_on_the_command_line(tmp_path: Path) -> None:
    source = tmp_path / "deep.jsonl"
    source.write_text(
        '{"messages": [{"role": "user", "content": ' + _deep_text(100_000) + "}]}\n",
        encoding="utf-8",
    )
    result = chatledger(
        "import", "--create", str(source), "--url", str(tmp_path / "s.db"), "--dry-run"
    )
    assert_one_line_error(result, contains="line 1: JSON nested deeper than 128 levels")
    assert "RecursionError" not in result.stderr


async def test_the_depth_bound_follows_the_store_limit(tmp_path: Path) -> None:
    """A store of ``max_json_depth=8`` refuses a line nested 73 levels deep at once."""
    source = tmp_path / "deep.jsonl"
    line = {"messages": [{"role": "user", "content": "hi", "name": "x"}]}
    text = json.dumps(line).replace('"x"', json.dumps(_nested(70)))
    source.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(InvalidSource, match="deeper than 72 levels") as refused:
        await import_sources(InMemoryHistoryStore(limits=Limits(max_json_depth=8)), [source])
    assert refused.value.where == "line 1"
