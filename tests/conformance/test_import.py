"""Importing history that Agent Framework already compacted: exclusions and summaries."""

from __future__ import annotations

import asyncio
from typing import Any

from store.contract import HistoryBackend
from store.formats import AF_ANNOTATIONS_KEY, from_agent_framework
from strategies.messages import Message
from tests.groups.conversations import assistant, call, result, tool, user
from tests.strategies.invariants import assert_projection_invariants


def _annotated(message: Message, **annotations: Any) -> Message:
    return message.model_copy(update={"metadata": {AF_ANNOTATIONS_KEY: annotations}})


def _reference_history() -> list[dict[str, Any]]:
    """A history compacted by Agent Framework itself (tool results collapsed)."""
    from agent_framework import Content as AFContent
    from agent_framework import Message as AFMessage
    from agent_framework._compaction import (
        CharacterEstimatorTokenizer,
        ToolResultCompactionStrategy,
        annotate_message_groups,
    )

    messages = [AFMessage("user", ["first question"])]
    for i in range(3):
        messages.append(
            AFMessage(
                "assistant", [AFContent.from_function_call(f"c{i}", "get", arguments={"i": i})]
            )
        )
        messages.append(
            AFMessage("tool", [AFContent.from_function_result(f"c{i}", result=f"r{i}")])
        )
    messages += [AFMessage("assistant", ["done"]), AFMessage("user", ["next"])]
    annotate_message_groups(messages, tokenizer=CharacterEstimatorTokenizer())
    assert asyncio.run(ToolResultCompactionStrategy(keep_last_tool_call_groups=1)(messages))
    return [m.to_dict() for m in messages]


async def test_reference_compaction_is_imported(store: HistoryBackend) -> None:
    dicts = await asyncio.to_thread(_reference_history)
    converted = from_agent_framework(dicts)
    sent_by_reference = [
        m
        for m, d in zip(converted, dicts, strict=True)
        if not d["additional_properties"]["_excluded"]
    ]
    imported = await store.import_messages("s", converted)
    assert imported.message_ids == tuple(m.message_id for m in converted)
    event = imported.event
    assert event is not None and event.phase == "import"
    assert event.strategy == "import:agent_framework" and len(event.summarized) == 2
    sent = await store.context("s")
    assert_projection_invariants(sent)
    assert [m.message_id for m in sent] == [m.message_id for m in sent_by_reference]
    stored = await store.history("s", include_excluded=True)
    assert len(stored) == len(converted)
    assert all(m.source_system == "agent_framework" for m in stored)
    summaries = [m for m in stored if m.kind == "summary"]
    assert len(summaries) == 2 and all(m.slot == 1 for m in summaries)
    # importing again changes nothing
    again = await store.import_messages("s", converted)
    assert again.event is None and len(await store.history("s", include_excluded=True)) == len(
        converted
    )
    # the import is audited and can be undone like any event
    undo = await store.restore("s", event_id=event.id)
    assert undo is not None
    assert {m.message_id for m in await store.context("s")} == {
        m.message_id for m in converted if m.message_id not in {s.message_id for s in summaries}
    }


async def test_plain_exclusions_exclude_whole_groups(store: HistoryBackend) -> None:
    messages = [
        _annotated(user("u1", "old"), _excluded=True, _exclude_reason="truncation"),
        _annotated(assistant("a1", call("c1", "f")), _excluded=True),
        tool("t1", result("c1", "r")),  # not flagged, but its group is excluded whole
        user("u2", "new"),
    ]
    imported = await store.import_messages("s", messages)
    assert imported.event is not None
    excluded = {g.group_id: g for g in await store.excluded("s")}
    assert excluded["group_u1"].reason == "truncation"
    assert excluded["group_a1"].reason == "imported" and excluded["group_a1"].message_count == 2
    assert [m.message_id for m in await store.context("s")] == ["u2"]


async def test_nested_summaries_by_group_and_back_link(store: HistoryBackend) -> None:
    messages = [
        _annotated(
            assistant("s1", "summary of the start"),
            _group={"id": "group_s1", "_summary_of_group_ids": ["g_u1"]},
            _excluded=True,
        ),
        _annotated(user("u1", "a"), _group={"id": "g_u1"}, _excluded=True),
        _annotated(
            assistant("a1", "b"), _group={"_summarized_by_summary_id": "s2"}, _excluded=True
        ),
        _annotated(
            assistant("s2", "summary of everything"),
            _group={"_summary_of_message_ids": ["s1"]},
        ),
        user("u2", "now"),
    ]
    imported = await store.import_messages("s", messages)
    assert imported.event is not None
    assert imported.event.summarized == {
        "group_s1": ("group_u1",),
        "group_s2": ("group_s1", "group_a1"),
    }
    assert [m.message_id for m in await store.context("s")] == ["s2", "u2"]
    why = await store.why("s", "u1")
    assert why.summary_group_id == "group_s1" and not why.in_context


async def test_unresolvable_summary_is_stored_as_a_message(store: HistoryBackend) -> None:
    messages = [
        _annotated(assistant("s1", "summary"), _group={"_summary_of_message_ids": ["gone"]}),
        user("u1", "hi"),
    ]
    imported = await store.import_messages("s", messages)
    assert imported.event is None
    assert [m.message_id for m in await store.context("s")] == ["s1", "u1"]


async def test_messages_without_annotations_are_appended(store: HistoryBackend) -> None:
    imported = await store.import_messages("s", [user("u1", "hi")], source="openai_jsonl")
    assert imported.event is None
    (stored,) = await store.history("s")
    assert stored.source_system == "openai_jsonl" and stored.source_id == "u1"
