"""The ``claude-ai`` format: Claude.ai's data export (``conversations.json``, its folder
or its ``.zip``), built from the export's documented and observed shapes
(``fixtures/claude_ai/conversations.json``; ``docs/importing.md`` says where each shape
comes from), imported into SQLite and PostgreSQL: roles, texts, thinking, the tools run
inside an assistant turn cut into calls and results with their error flags, ids, times,
attachments and files as metadata; idempotence; damaged exports that write nothing; the
command line."""

from __future__ import annotations

import json
import zipfile
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.formats import ATTACHMENTS_KEY
from store.formats.claude_ai import CLAUDE_AI_CONTINUES_KEY, CLAUDE_AI_MESSAGE_KEY
from store.importing import detect_format, import_sources
from store.importing.readers import claude_ai
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
)
from tests.cli.helpers import assert_one_line_error, chatledger

FIXTURE = Path(__file__).parent / "fixtures" / "claude_ai" / "conversations.json"
ROOT = Path(__file__).resolve().parents[2]
SLIDE = "0811c458-706c-4673-87e4-8146857bea96"
HAIKU = "2a33e67a-928e-4895-a906-a368a79d0c18"
ASKED, ANSWERED = "019d8248-31f4-7a84-bfca-23c88f2618e0", "019d8249-0a11-7c3e-9d52-5be0a1c2d3e4"
SEARCH, FETCH = "toolu_01A6zfPtFxbTK1xa8gCUhpbE", "toolu_01Bq9rKd2mNf7Lw3Xy5Zt8Pa"


def _source() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(FIXTURE.read_text())
    return loaded


async def _messages(store: HistoryStore, session: str) -> list[Message]:
    return [row.message for row in await store.history(session, include_excluded=True)]


async def test_a_conversation_imports_exactly(store: HistoryStore) -> None:
    assert detect_format(FIXTURE) == "claude-ai"
    report = await import_sources(store, [FIXTURE])
    assert report.session_ids == [SLIDE, HAIKU]  # the conversation without messages: none
    assert (report.messages, report.tool_calls, report.tool_results) == (10, 2, 2)
    assert report.warnings == []
    messages = await _messages(store, SLIDE)
    assert [(m.message_id, m.role) for m in messages] == [
        (ASKED, "user"),
        (ANSWERED, "assistant"),
        (f"{ANSWERED}/{SEARCH}", "tool"),
        (f"{ANSWERED}#2", "assistant"),
        (f"{ANSWERED}/{FETCH}", "tool"),
        (f"{ANSWERED}#4", "assistant"),
        ("019d824a-77c0-7e1f-8a3b-6cf1b2d3e4f5", "user"),
        ("019d824b-1d2e-7f30-9b4c-7d02c3e4f506", "assistant"),
    ]
    chat = _source()[0]["chat_messages"]
    times = [datetime.fromisoformat(chat[i]["created_at"]) for i in (0, 1, 1, 1, 1, 1, 2, 3)]
    assert [m.created_at for m in messages] == times
    question, thought, searched, fetching, fetched, answer, follow_up, last = messages
    assert question.text == "Fact-check the citation on this slide."
    assert question.metadata[ATTACHMENTS_KEY] == [
        {"name": "slide-notes.txt", "media_type": "txt", "size": 812, "reference": None},
        {
            "name": "1776007249059_image.png",
            "media_type": None,
            "size": None,
            "reference": "019d8248-00b6-769d-a7ff-fe95364a4142",
        },
    ]
    kept = question.metadata[CLAUDE_AI_MESSAGE_KEY]
    assert isinstance(kept, dict)
    assert kept["attachments"] == chat[0]["attachments"]  # extracted_content included
    assert "text" not in kept  # the text block gives it back
    reasoning, search = thought.contents
    assert isinstance(reasoning, ReasoningContent)
    assert reasoning.text == "I should look the review up before confirming it."
    assert reasoning.extra["summaries"] == [{"summary": "Planning a citation check"}]
    assert isinstance(search, FunctionCallContent)
    assert (search.call_id, search.name, search.arguments) == (
        SEARCH,
        "web_search",
        {"query": "Escher surrogate reactions Rev Mod Phys 84 353"},
    )
    assert search.extra["message"] == "Searching the web"
    fetch = fetching.contents[0]
    assert isinstance(fetch, FunctionCallContent)
    assert (fetch.call_id, fetch.name, fetch.arguments) == (
        FETCH,
        "web_fetch",
        {"url": "https://example.org/slide-source"},
    )
    results = [searched.contents[0], fetched.contents[0]]
    assert all(isinstance(r, FunctionResultContent) for r in results)
    assert [(r.call_id, r.is_error) for r in results] == [(SEARCH, False), (FETCH, True)]  # type: ignore[union-attr]
    assert [r.result for r in results] == [  # type: ignore[union-attr]
        chat[1]["content"][2]["content"],
        [{"type": "text", "text": "Failed to fetch https://example.org/slide-source: 404"}],
    ]
    assert [m.metadata.get(CLAUDE_AI_CONTINUES_KEY) for m in messages[1:6]] == [
        None, ANSWERED, ANSWERED, ANSWERED, ANSWERED,
    ]  # fmt: skip
    assert answer.text == "The citation is right: Escher et al., Rev. Mod. Phys. 84, 353 (2012)."
    assert answer.contents[0].extra["citations"] == chat[1]["content"][5]["citations"]
    assert follow_up.text == "Thanks! Is the half-life of U-238 right too?"  # no blocks: text
    assert last.text == "Yes: 4.468 billion years."
    budget = last.contents[1]
    assert isinstance(budget, OtherContent)
    assert budget.kind == "token_budget"
    rows = await store.history(SLIDE, include_excluded=True)
    assert {row.source_system for row in rows} == {"claude-ai"}
    haiku = await _messages(store, HAIKU)
    assert [(m.role, m.text) for m in haiku] == [
        ("user", "Write a haiku about rain."),
        ("assistant", "Soft rain on the roof\nthe gutter hums a low note\nnight drinks the garden"),
    ]


def test_names_are_the_sessions_titles() -> None:
    found = [(c.source_session, c.title) for c in claude_ai.read(FIXTURE, str(FIXTURE))]
    assert found == [(SLIDE, "Fact-checking a physics slide"), (HAIKU, "Haiku")]


async def test_a_second_import_of_the_zip_stores_nothing(
    store: HistoryStore, tmp_path: Path
) -> None:
    archive = tmp_path / "data-2026-04-13.zip"
    with zipfile.ZipFile(archive, "w") as packed:
        packed.writestr("users.json", '[{"uuid": "c1a9a5f8"}]')
        packed.writestr("projects.json", "[]")
        packed.write(FIXTURE, "conversations.json")
    assert detect_format(archive) == "claude-ai"
    first = await import_sources(store, [archive])
    assert (first.new, first.already_stored) == (10, 0)
    again = await import_sources(store, [FIXTURE])
    assert (again.new, again.already_stored) == (0, 10)


async def test_a_result_without_its_call_is_an_orphan_or_refused_with_strict(
    store: HistoryStore, tmp_path: Path
) -> None:
    exported = _source()
    del exported[0]["chat_messages"][1]["content"][1]  # the web_search call
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(exported))
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [path], strict=True)
    assert str(raised.value).startswith(f"{path}: conversation 1 message 2: a result for call")
    assert await store.sessions() == []
    report = await import_sources(store, [path])
    assert any(SEARCH in w and "orphan" in w for w in report.warnings)


@pytest.mark.parametrize(
    ("damage", "place", "reason"),
    [
        (
            lambda c: c[0]["chat_messages"][2].__setitem__("sender", "robot"),
            "conversation 1 message 3",
            "unknown role 'robot'",
        ),
        (
            lambda c: c[2]["chat_messages"][1].pop("uuid"),
            "conversation 3 message 2",
            "uuid",
        ),
        (
            lambda c: c[0]["chat_messages"][1]["content"][1].pop("name"),
            "conversation 1 message 2",
            "tool_use block needs a name",
        ),
        (
            lambda c: c[2]["chat_messages"][0].__setitem__("created_at", "yesterday"),
            "conversation 3 message 1",
            "created_at",
        ),
    ],
)
async def test_a_damaged_conversation_is_refused_naming_its_place_and_nothing_is_written(
    store: HistoryStore, tmp_path: Path, damage: Any, place: str, reason: str
) -> None:
    exported = _source()
    damage(exported)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(exported))
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [path], format="claude-ai")
    message = str(raised.value)
    assert message.startswith(f"{path}: {place}: ")
    assert reason in message
    assert "\n" not in message
    assert await store.sessions() == []


async def test_a_cut_off_export_is_refused_and_nothing_is_written(
    store: HistoryStore, tmp_path: Path
) -> None:
    text = FIXTURE.read_text()
    cut = tmp_path / "conversations.json"
    cut.write_text(text[: text.index('"Haiku"')])
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [cut], format="claude-ai")
    assert str(raised.value).startswith(f"{cut}: conversation 3: not JSON")
    assert "cut off" in str(raised.value)
    assert await store.sessions() == []


def test_cli_imports_then_says_already_stored(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "conversations.json"
    source.write_bytes(FIXTURE.read_bytes())
    args = ("import", "--create", str(source), "--format", "claude-ai", "--url", db_url)
    first = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[1] == "10 stored, 0 already stored"
    second = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert second.stdout.splitlines()[1] == "0 stored, 10 already stored"
    exported = _source()
    exported[2]["chat_messages"][0]["sender"] = "robot"
    source.write_text(json.dumps(exported))
    refused = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert_one_line_error(refused, contains="conversation 3 message 1: unknown role 'robot'")
