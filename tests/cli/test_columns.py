"""Every table at 80 columns: piped, one line a row, no id or number split; on an
80-column terminal, only the content column shortens."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.admin import list_tenants
from store.cli._output import Column, Table, number, render
from store.cli._render import (
    context_table,
    events_table,
    excluded_table,
    history_table,
    sessions_table,
    stats_table,
    tenants_table,
)
from store.cli._width import width
from tests.cli.helpers import Result, conversation, invoke, run_api

SESSION = "demo-9c7a53279f60"
"""An id of the length the demo makes (the one the old table split in two)."""
WINDOW = "sliding-window:keep_last_turns=1"
COLUMNS = {"COLUMNS": "80"}


@pytest.fixture
def url(tmp_path: Path) -> str:
    """Two tenants' sessions, one compacted with a group restored: every table has rows."""
    value = f"sqlite:///{tmp_path}/columns.db"

    async def fill(store: HistoryStore) -> None:
        await store.append(SESSION, conversation(6, size=120))
        await store.append("b" * 40, conversation(1))
        event = await store.compact(SESSION, WINDOW)
        assert event is not None
        await store.restore(SESSION, group_ids=[event.excluded[0]])

    run_api(value, fill)
    run_api(value, lambda s: s.append("other-session", conversation(1)), tenant="t2")
    return value


def _run(*args: str) -> Result:
    result = invoke(*args, env=COLUMNS)
    assert result.returncode == 0, result
    return result


def _assert_rows(output: str, expected: Iterable[Iterable[str]], *, extra_lines: int = 0) -> None:
    """``output`` is a title, a header and one line a row (plus ``extra_lines`` after),
    and each expected row's ids and numbers are whole words of one line."""
    wanted = [list(cells) for cells in expected]
    lines = output.splitlines()
    assert len(lines) == 2 + len(wanted) + extra_lines, output
    body = [line.split() for line in lines[2 : 2 + len(wanted)]]
    assert any(len(line) > 80 for line in lines), "nothing to wrap: the test proves nothing"
    for cells in wanted:
        assert any(all(c in words for c in cells) for words in body), (cells, output)


def _json(*args: str) -> Any:
    return _run(*args, "--json").json()


def test_every_command_table_piped_at_80_columns(url: str) -> None:
    sessions = _json("sessions", "--url", url)
    _assert_rows(
        _run("sessions", "--url", url).stdout,
        [
            [
                s["session_id"],
                number(s["stored_messages"]),
                number(s["stored_tokens"]),
                number(s["active_tokens"]),
            ]
            for s in sessions
        ],
    )
    stored = _json("show", SESSION, "--all", "--url", url)
    _assert_rows(
        _run("show", SESSION, "--all", "--url", url).stdout,
        [[str(m["seq"]), number(m["reduced_token_count"] or m["token_count"])] for m in stored],
    )
    active = _json("show", SESSION, "--url", url)
    _assert_rows(
        _run("show", SESSION, "--url", url).stdout,
        [[str(m["seq"])] for m in active],
    )
    context = _run("show", SESSION, "--context", "--strategy", WINDOW, "--url", url).stdout
    sent = _json("show", SESSION, "--context", "--strategy", WINDOW, "--url", url)
    _assert_rows(context, [[str(i)] for i in range(1, len(sent) + 1)], extra_lines=1)
    events = _json("audit", SESSION, "--url", url)
    _assert_rows(
        _run("audit", SESSION, "--url", url).stdout,
        [
            [e["id"], number(e["tokens_before"]), number(e["tokens_before"] - e["tokens_after"])]
            for e in events
        ],
    )
    excluded = _json("excluded", SESSION, "--url", url)
    _assert_rows(
        _run("excluded", SESSION, "--url", url).stdout,
        [[g["group_id"], g["event_id"], number(g["tokens"])] for g in excluded],
    )
    what_if = _json(
        "compact",
        SESSION,
        "--strategy",
        "sliding-window:keep_last_groups=1",
        "--dry-run",
        "--url",
        url,
    )
    _assert_rows(
        _run(
            "compact",
            SESSION,
            "--strategy",
            "sliding-window:keep_last_groups=1",
            "--dry-run",
            "--url",
            url,
        ).stdout,
        [[g["group_id"], number(g["tokens_before"])] for g in what_if["groups"]],
        extra_lines=1,
    )


def test_narrow_tables_stay_whole_when_piped(url: str) -> None:
    tenants = _json("tenants", "--url", url)
    lines = _run("tenants", "--url", url).stdout.splitlines()
    assert len(lines) == 2 + len(tenants)
    for tenant in tenants:
        assert any(
            line.split()[:4]
            == [
                tenant["tenant"],
                number(tenant["sessions"]),
                number(tenant["stored_messages"]),
                number(tenant["stored_tokens"]),
            ]
            for line in lines
        )
    stats = _json("stats", SESSION, "--url", url)
    table = _run("stats", SESSION, "--url", url).stdout.splitlines()
    assert table[2].split() == [
        "messages",
        number(stats["stored_messages"]),
        number(stats["active_messages"]),
    ]
    history = _run("db", "history", "--url", url).stdout.splitlines()
    revisions = [r["revision"] for r in _json("db", "history")]
    assert [line.split()[0] for line in history[2 : 2 + len(revisions)]] == revisions


def _tables(url: str) -> list[Table]:
    """Every table builder, fed from the API."""

    async def build(store: HistoryStore) -> list[Table]:
        stored = [m async for m in store.aiter_history(SESSION, include_excluded=True)]
        context = await store.context(SESSION, strategy=WINDOW)
        tokens = [store.count_tokens(m) for m in context]
        return [
            sessions_table(await store.sessions(order="updated"), "sessions"),
            history_table("history", stored),
            context_table("context", context, tokens, frozenset()),
            events_table(await store.audit(SESSION), "events"),
            excluded_table(await store.excluded(SESSION), "excluded"),
            stats_table(await store.stats(SESSION)),
            stats_table(await store.stats()),
        ]

    return [*run_api(url, build), tenants_table(asyncio.run(list_tenants(url)))]


@pytest.mark.parametrize("limit", [60, 80, 120])
def test_every_table_on_a_terminal_fits_and_keeps_ids_and_numbers_whole(
    url: str, limit: int
) -> None:
    for table in _tables(url):
        assert table.rows, table.title
        title, lines = render(table, limit)
        assert width(title) <= limit, title
        assert len(lines) == 1 + len(table.rows), title
        header = lines[0].split()
        for cells, line in zip(table.rows, lines[1:], strict=True):
            assert width(line) <= limit, (title, line)
            words = line.split()
            for column, cell in zip(table.columns, cells, strict=True):
                if column.flex or not cell or cell in title or column.header not in header:
                    continue  # shortened, stated once in the title, or left out
                if column.ids:  # a unique start of the id, as one word
                    start = next(w for w in words if cell.startswith(w) and len(w) >= 8)
                    others = {row[table.columns.index(column)] for row in table.rows}
                    assert [o for o in others if o.startswith(start)] == [cell], (title, start)
                else:
                    assert all(w in words for w in cell.split()), (title, cell, line)


def test_ids_shorten_before_text_gets_narrower_than_a_fair_share() -> None:
    table = Table("t", [Column("id", ids=True), Column("n", "right"), Column("text", flex=True)])
    ids = [f"message-{i:02d}-" + "x" * 30 for i in range(5)]
    for value in ids:
        table.add(value, "1,234", "word " * 30)
    _, lines = render(table, 80)
    for value, line in zip(ids, lines[1:], strict=True):
        start, count, text = line.split("  ", 2)
        assert value.startswith(start) and len(start) >= len("message-00-")
        assert count == "1,234"
        assert width(text.strip()) >= 80 // 4 and width(line) <= 80


def test_columns_that_may_drop_drop_before_text_is_cut_short() -> None:
    table = Table("t", [Column("when", drop=1), Column("text", flex=True)])
    table.add("2026-12-05T21:00:22Z", "a long line of text " * 5)
    _, lines = render(table, 30)
    assert lines[0].split() == ["text"] and lines[1].endswith("…") and width(lines[1]) == 30
    _, wide = render(table, 200)
    assert wide[0].split() == ["when", "text"]
