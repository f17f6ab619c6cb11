"""Exports the target accepts: parallel calls of one model turn are one assistant message
followed by their results, and every exported session of the fixtures validates with
the target's own types. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.exporting import export_sessions
from store.importing import import_sources
from strategies.groups import call_links
from tests.exporting.fixtures import PARALLEL_SESSION, seed
from tests.exporting.targets import TARGET_CHECKS, check_document

PARALLEL_CALLS = ["call_paris", "call_tokyo"]


async def documents(store: HistoryStore, ids: list[str], fmt: str) -> list[dict[str, Any]]:
    """The export of ``ids`` in ``fmt``, one document a session."""
    text = "".join([chunk async for chunk in export_sessions(store, ids, format=fmt)])
    if fmt == "agent-framework":
        found: list[dict[str, Any]] = json.loads(text)
        return found
    return [json.loads(line) for line in text.splitlines()]


async def test_parallel_calls_are_one_chat_message_then_their_results(
    store: HistoryStore, tmp_path: Path
) -> None:
    await seed(store, tmp_path)
    (document,) = await documents(store, [PARALLEL_SESSION], "openai-chat")
    roles = [m["role"] for m in document["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    calls = document["messages"][1]["tool_calls"]
    assert [c["id"] for c in calls] == PARALLEL_CALLS
    assert json.loads(calls[1]["function"]["arguments"]) == {"city": "東京"}
    assert [m["tool_call_id"] for m in document["messages"][2:4]] == PARALLEL_CALLS


async def test_parallel_calls_are_one_anthropic_turn_answered_by_one_user_turn(
    store: HistoryStore, tmp_path: Path
) -> None:
    await seed(store, tmp_path)
    (document,) = await documents(store, [PARALLEL_SESSION], "anthropic")
    assert [m["role"] for m in document["messages"]] == ["user", "assistant", "user", "assistant"]
    uses = [b["id"] for b in document["messages"][1]["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in document["messages"][2]["content"]]
    assert uses == results == PARALLEL_CALLS


async def test_parallel_calls_are_one_langchain_ai_message(
    store: HistoryStore, tmp_path: Path
) -> None:
    await seed(store, tmp_path)
    (document,) = await documents(store, [PARALLEL_SESSION], "langchain")
    kinds = [m["type"] for m in document["messages"]]
    assert kinds == ["human", "ai", "tool", "tool", "ai"]
    assert [c["id"] for c in document["messages"][1]["data"]["tool_calls"]] == PARALLEL_CALLS


async def test_parallel_calls_are_one_pydantic_ai_response_answered_by_one_request(
    store: HistoryStore, tmp_path: Path
) -> None:
    await seed(store, tmp_path)
    (document,) = await documents(store, [PARALLEL_SESSION], "pydantic-ai")
    kinds = [m["kind"] for m in document["messages"]]
    assert kinds == ["request", "response", "request", "response"]
    calls = [p for p in document["messages"][1]["parts"] if p["part_kind"] == "tool-call"]
    returns = document["messages"][2]["parts"]
    assert [c["tool_call_id"] for c in calls] == PARALLEL_CALLS
    assert [r["tool_call_id"] for r in returns] == PARALLEL_CALLS
    assert [r["tool_name"] for r in returns] == [c["tool_name"] for c in calls]
    assert {r["part_kind"] for r in returns} == {"tool-return"}


async def test_parallel_calls_are_one_ui_message_holding_their_results(
    store: HistoryStore, tmp_path: Path
) -> None:
    await seed(store, tmp_path)
    (document,) = await documents(store, [PARALLEL_SESSION], "vercel-ai")
    assert [m["role"] for m in document["messages"]] == ["user", "assistant"]
    tools = [p for p in document["messages"][1]["parts"] if p["type"].startswith("tool-")]
    assert [t["toolCallId"] for t in tools] == PARALLEL_CALLS
    assert {t["state"] for t in tools} == {"output-available"}
    assert all("output" in t for t in tools)


async def test_parallel_calls_are_one_agent_framework_message(
    store: HistoryStore, tmp_path: Path
) -> None:
    await seed(store, tmp_path)
    (document,) = await documents(store, [PARALLEL_SESSION], "agent-framework")
    af = pytest.importorskip("agent_framework")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # AgentSession is marked experimental
        session = af.AgentSession.from_dict(document)
    messages = session.state["in_memory"]["messages"]
    calls = [[c.call_id for c in m.contents if c.type == "function_call"] for m in messages]
    assert [call for call in calls if call] == [PARALLEL_CALLS]


async def test_the_agents_sdk_reads_the_responses_export_as_one_turn(
    store: HistoryStore, tmp_path: Path
) -> None:
    converter = pytest.importorskip("agents.models.chatcmpl_converter")
    await seed(store, tmp_path)
    (document,) = await documents(store, [PARALLEL_SESSION], "openai-responses")
    messages = converter.Converter.items_to_messages(document["input"])
    with_calls = [m for m in messages if m.get("tool_calls")]
    assert len(with_calls) == 1
    assert [c["id"] for c in with_calls[0]["tool_calls"]] == PARALLEL_CALLS


@pytest.mark.parametrize("fmt", sorted(TARGET_CHECKS))
async def test_every_exported_session_validates_with_the_targets_types(
    store: HistoryStore, tmp_path: Path, fmt: str
) -> None:
    ids = await seed(store, tmp_path)
    exported = await documents(store, ids, fmt)
    assert len(exported) == len(ids)
    for document in exported:
        check_document(fmt, document)


async def test_a_round_trip_through_the_agents_sdk_store_keeps_the_turn_whole(
    store: HistoryStore, tmp_path: Path
) -> None:
    agents = pytest.importorskip("agents")
    await seed(store, tmp_path)
    (document,) = await documents(store, [PARALLEL_SESSION], "openai-responses")
    database = tmp_path / "sdk-again.db"
    session = agents.SQLiteSession("again", database)
    await session.add_items(document["input"])  # what the SDK keeps of the export
    session.close()
    await import_sources(store, [database], session_prefix="sdk/")
    (chat,) = await documents(store, ["sdk/again"], "openai-chat")
    with_calls = [m for m in chat["messages"] if m.get("tool_calls")]
    assert [[c["id"] for c in m["tool_calls"]] for m in with_calls] == [PARALLEL_CALLS]


async def test_a_round_trip_through_agent_framework_keeps_the_turn_one_message(
    store: HistoryStore, tmp_path: Path
) -> None:
    af = pytest.importorskip("agent_framework")
    await seed(store, tmp_path)
    (document,) = await documents(store, [PARALLEL_SESSION], "agent-framework")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # AgentSession is marked experimental
        again = af.AgentSession.from_dict(document).to_dict()  # what Agent Framework keeps
    path = tmp_path / "af-again.json"
    path.write_text(json.dumps(again), encoding="utf-8")
    await import_sources(store, [path], session_prefix="af/")
    stored = await store.history(f"af/{PARALLEL_SESSION}", include_excluded=True)
    calls = [call_links(row.message)[0] for row in stored]
    assert [c for c in calls if c] == [PARALLEL_CALLS]
    (chat,) = await documents(store, [f"af/{PARALLEL_SESSION}"], "openai-chat")
    assert [m["role"] for m in chat["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
