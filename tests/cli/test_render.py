"""The CLI's tables and lines, fed by the in-memory store (same models as the SQL store)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from store.cli._demo import inspect_commands, turn_line
from store.cli._output import Table, render
from store.cli._read import parse_since
from store.cli._render import (
    content_preview,
    context_table,
    events_table,
    history_table,
    stats_table,
)
from store.demo import DemoConfig, DemoReport, run_demo
from store.memory import InMemoryHistoryStore
from strategies.messages import FunctionCallContent, Message
from strategies.tokenizers import count_message_tokens


def _text(table: Table) -> str:
    title, lines = render(table, None)
    return "\n".join([title, *lines])


@pytest.fixture
async def played() -> tuple[InMemoryHistoryStore, DemoReport]:
    store = InMemoryHistoryStore()
    report = await run_demo(store, DemoConfig(turns=25, session_id="r"))
    assert report.events
    return store, report


async def test_history_table_marks_exactly_the_excluded_messages(
    played: tuple[InMemoryHistoryStore, DemoReport],
) -> None:
    store, _ = played
    stored = [m async for m in store.aiter_history("r", include_excluded=True)]
    lines = _text(history_table("t", stored)).splitlines()
    marked = [line for line in lines if "excluded: " in line]
    assert len(marked) == sum(1 for m in stored if m.excluded) > 0


async def test_events_and_stats_tables_show_the_api_figures(
    played: tuple[InMemoryHistoryStore, DemoReport],
) -> None:
    store, report = played
    events = _text(events_table(report.events, "events"))
    assert len(report.events) > 1
    title, _ = render(events_table(report.events, "Events of session r"), None)
    assert title == "Events of session r (phase after_run; strategy context-window)"
    for event in report.events:
        assert f"{event.tokens_before:,} → {event.tokens_after:,}" in events
    stats = await store.stats("r")
    text = _text(stats_table(stats))
    assert f"{stats.stored_tokens:,}" in text and f"{stats.active_tokens:,}" in text
    assert "session r" in text
    assert not any(line.startswith("sessions") for line in text.splitlines())
    tenant = _text(stats_table(await store.stats()))
    assert any(line.split()[:2] == ["sessions", "1"] for line in tenant.splitlines())


async def test_context_table_counts_what_is_sent(
    played: tuple[InMemoryHistoryStore, DemoReport],
) -> None:
    store, _ = played
    messages = await store.context("r")
    tokens = [count_message_tokens(m, store.tokenizer, policy=store.policy) for m in messages]
    text = _text(context_table("ctx", messages, tokens, frozenset()))
    assert len(text.splitlines()) == 2 + len(messages)  # the title, the header, one a message


def test_content_preview_names_calls_and_keeps_long_text_whole() -> None:
    call = Message(
        role="assistant",
        contents=[FunctionCallContent(call_id="c", name="lookup", arguments={"q": 1})],
    )
    assert content_preview(call) == 'call lookup({"q": 1})'
    long = content_preview(Message.text_message("user", "word\n" * 100))
    assert long == " ".join(["word"] * 100)  # a terminal shortens it, a pipe never


def test_turn_line_flags_requests_over_budget() -> None:
    from store.demo import TurnRecord

    base = {
        "turn": 3,
        "request": "r",
        "budget": 100,
        "tool_calls": 1,
        "appended": 4,
        "stored_messages": 9,
        "stored_tokens": 500,
        "active_tokens": 90,
    }
    assert "OVER BUDGET" not in turn_line(TurnRecord(sent_tokens=(80, 100), **base))
    assert "OVER BUDGET" in turn_line(TurnRecord(sent_tokens=(80, 101), **base))


def test_inspect_commands_carry_the_options_the_user_gave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CHATLEDGER_URL", raising=False)
    monkeypatch.delenv("CHATLEDGER_TENANT", raising=False)
    assert inspect_commands("s", None, "default")[0] == "chatledger sessions"
    given = inspect_commands("s 1", "sqlite:///x y.db", "acme")
    assert given[1] == "chatledger show 's 1' --context --url 'sqlite:///x y.db' --tenant acme"
    monkeypatch.setenv("CHATLEDGER_URL", "sqlite:///x y.db")
    assert "--url" not in inspect_commands("s", "sqlite:///x y.db", "default")[0]


def test_parse_since_accepts_ages_and_iso_times() -> None:
    now = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
    assert parse_since("90m", now=now) == datetime(2026, 1, 2, 10, 30, tzinfo=UTC)
    assert parse_since("1d", now=now) == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert parse_since("2026-01-01") == datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_since("2026-01-01T00:00:00+02:00").utcoffset() is not None


def test_inspect_commands_name_the_program_when_it_is_not_on_the_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CHATLEDGER_URL", raising=False)
    monkeypatch.setattr("sys.argv", [".venv/bin/chatledger", "demo"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert inspect_commands("s", None, "default")[0] == ".venv/bin/chatledger sessions"
