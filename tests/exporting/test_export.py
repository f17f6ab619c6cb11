"""export_sessions on SQLite and PostgreSQL: every format's shape, and the round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store import HistoryStore
from store.errors import InvalidInput, SessionNotFound
from store.exporting import EXPORT_FORMATS, export_sessions
from store.importing import import_sources
from strategies.groups import call_links
from strategies.messages import FunctionResultContent, Message
from tests.importing.sources import anthropic_body, weather_chat, write_chat_jsonl


async def _export(store: HistoryStore, ids: list[str], fmt: str, **kw: object) -> str:
    return "".join([chunk async for chunk in export_sessions(store, ids, format=fmt, **kw)])  # type: ignore[arg-type]


def _shape(messages: list[Message]) -> list[tuple[str, str, list[str | None], list[str]]]:
    """What every format keeps: roles, texts, call ids and result ids, in order."""
    return [(m.role, m.text, *call_links(m)) for m in messages]


def _results(messages: list[Message]) -> list[object]:
    return [c.result for m in messages for c in m.contents if isinstance(c, FunctionResultContent)]


async def _seed(store: HistoryStore, tmp_path: Path) -> list[str]:
    chats = tmp_path / "chats.jsonl"
    write_chat_jsonl(chats, {"chat": weather_chat(2)})
    bodies = tmp_path / "bodies.json"
    bodies.write_text(json.dumps([{**anthropic_body(2), "id": "claude"}]), encoding="utf-8")
    await import_sources(store, [chats, bodies])
    return ["chat", "claude"]


async def _messages(store: HistoryStore, session_id: str) -> list[Message]:
    return [row.message for row in await store.history(session_id, include_excluded=True)]


async def test_jsonl_round_trip_is_exact_and_already_stored(
    store: HistoryStore, tmp_path: Path
) -> None:
    ids = await _seed(store, tmp_path)
    text = await _export(store, ids, "jsonl")
    lines = [json.loads(line) for line in text.splitlines()]
    assert all(line["format"] == "chatledger" and line["version"] == 1 for line in lines)
    assert [line["seq"] for line in lines if line["session_id"] == "chat"] == list(
        range(1, len(await store.history("chat")) + 1)
    )
    path = tmp_path / "export.jsonl"
    path.write_text(text, encoding="utf-8")
    again = await import_sources(store, [path])
    assert (again.new, again.already_stored) == (0, len(lines))
    copy = await import_sources(store, [path], session_prefix="copy/")
    assert copy.new == len(lines)
    for session_id in ids:
        assert await _messages(store, f"copy/{session_id}") == await _messages(store, session_id)


@pytest.mark.parametrize("fmt", [f for f in EXPORT_FORMATS if f != "jsonl"])
async def test_every_format_round_trips_roles_texts_and_calls(
    store: HistoryStore, tmp_path: Path, fmt: str
) -> None:
    ids = await _seed(store, tmp_path)
    text = await _export(store, ids, fmt)
    suffix = ".json" if fmt == "agent-framework" else ".jsonl"
    path = tmp_path / f"export{suffix}"
    path.write_text(text, encoding="utf-8")
    report = await import_sources(store, [path], format=fmt, session_prefix="back/")
    assert sorted(report.session_ids) == [f"back/{s}" for s in ids]
    for session_id in ids:
        original = await _messages(store, session_id)
        back = await _messages(store, f"back/{session_id}")
        assert _shape(back) == _shape(original)
        assert _results(back) == _results(original)


async def test_anthropic_session_as_chat_keeps_calls_paired(
    store: HistoryStore, tmp_path: Path
) -> None:
    await _seed(store, tmp_path)
    (line,) = (await _export(store, ["claude"], "openai-chat")).splitlines()
    messages = json.loads(line)["messages"]
    for index, message in enumerate(messages):
        for call in message.get("tool_calls") or []:
            assert messages[index + 1] == {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": messages[index + 1]["content"],
            }
    (body,) = (await _export(store, ["chat"], "anthropic")).splitlines()
    turns = json.loads(body)["messages"]
    for index, turn in enumerate(turns):
        uses = [
            b["id"]
            for b in turn["content"]
            if isinstance(turn["content"], list) and b["type"] == "tool_use"
        ]
        if uses:
            answered = [b["tool_use_id"] for b in turns[index + 1]["content"]]
            assert answered == uses


async def test_context_exports_what_the_model_is_sent(store: HistoryStore, tmp_path: Path) -> None:
    await _seed(store, tmp_path)
    await store.compact("chat", "truncation:max_n=5,compact_to=3")
    full = (await _export(store, ["chat"], "jsonl")).splitlines()
    context = (await _export(store, ["chat"], "jsonl", context=True)).splitlines()
    assert len(context) == len(await store.context("chat")) < len(full)
    strategy = "sliding-window:keep_last_groups=1"
    windowed = await _export(store, ["chat"], "jsonl", context=True, strategy=strategy)
    assert len(windowed.splitlines()) == len(await store.context("chat", strategy=strategy))


async def test_errors(store: HistoryStore, tmp_path: Path) -> None:
    await _seed(store, tmp_path)
    with pytest.raises(InvalidInput, match="unknown format"):
        await _export(store, ["chat"], "yaml")
    with pytest.raises(InvalidInput, match="context"):
        await _export(store, ["chat"], "jsonl", strategy="truncation:max_n=2,compact_to=1")
    with pytest.raises(SessionNotFound):
        await _export(store, ["chat", "nope"], "jsonl")
