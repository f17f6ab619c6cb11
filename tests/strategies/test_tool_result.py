"""ToolResultCompactionStrategy: older tool groups become one summary message each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import agent_framework as af
import pytest

from strategies.messages import Message, TextContent
from strategies.tool_result import (
    SUMMARY_METADATA_KEY,
    ToolResultCompactionStrategy,
    tool_results_summary,
)
from strategies.view import MessageSource, View
from tests.strategies.conversations import (
    calls,
    plan_and_project,
    results,
    say,
    to_reference,
    turns,
)


async def reference_summaries(messages: list[Message], keep: int = 1) -> list[str]:
    strategy = af.ToolResultCompactionStrategy(keep_last_tool_call_groups=keep)
    sent = await af.apply_compaction(to_reference(messages), strategy=strategy)
    return [m.text for m in sent if str(m.message_id).startswith("tool_summary_")]


async def test_older_groups_become_summaries_in_place() -> None:
    changes, sent = await plan_and_project(ToolResultCompactionStrategy(), turns(3))
    assert sent == [
        "s", "u0", "tool_summary_group_c0", "a0",
        "u1", "tool_summary_group_c1", "a1",
        "u2", "c2", "r2", "a2",
    ]  # fmt: skip
    assert [s.replaces for s in changes.summaries] == [("group_c0",), ("group_c1",)]
    first = changes.summaries[0].message
    assert first.role == "assistant"
    assert first.text == "[Tool results: get_weather: result 0]"
    assert first.metadata[SUMMARY_METADATA_KEY] == {
        "strategy": "ToolResultCompactionStrategy",
        "summary_of_group_ids": ["group_c0"],
        "summary_of_message_ids": ["c0", "r0"],
    }


async def test_parallel_and_json_results_match_the_reference_text() -> None:
    messages = [
        say("user", "u0"),
        calls("c0", "k0", "k1"),
        results("r0", ("k0", "sunny"), ("k1", {"temp": 18, "city": "Zürich"})),
        calls("c1", "k2"),
        results("r2", ("k2", [1, "two"])),
        say("assistant", "a0"),
    ]
    changes, _ = await plan_and_project(
        ToolResultCompactionStrategy(keep_last_tool_call_groups=0), messages
    )
    ours = [s.message.text for s in changes.summaries]
    assert ours == await reference_summaries(messages, keep=0)
    assert ours[0] == (
        '[Tool results: get_weather: sunny; get_weather: {"temp": 18, "city": "Z\\u00fcrich"}]'
    )


async def test_long_summaries_are_capped_like_the_reference() -> None:
    messages = [*turns(1), say("user", "u9"), calls("c9", "k9"), results("r9", ("k9", "ok"))]
    messages[3] = results("r0", ("k0", "ü" * 5000))
    changes, _ = await plan_and_project(ToolResultCompactionStrategy(), messages)
    text = changes.summaries[0].message.text
    assert len(text) == 4096
    assert text.endswith("ü... [truncated]]")
    assert [text] == await reference_summaries(messages)


def test_no_results() -> None:
    assert tool_results_summary([]) == "[Tool results: no results]"


async def test_text_beside_the_calls_is_kept_where_the_reference_drops_it() -> None:
    messages = [*turns(2)]
    messages[2] = calls("c0", "k0", text="Let me check the weather.")
    changes, _ = await plan_and_project(ToolResultCompactionStrategy(), messages)
    contents = changes.summaries[0].message.contents
    assert contents == [
        TextContent(text="Let me check the weather."),
        TextContent(text="[Tool results: get_weather: result 0]"),
    ]
    assert await reference_summaries(messages) == ["[Tool results: get_weather: result 0]"]


@dataclass
class RecordingSource:
    inner: MessageSource
    asked: list[str] = field(default_factory=list)

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        self.asked.extend(group_ids)
        return await self.inner.load(group_ids)


async def test_loads_only_the_groups_it_summarizes() -> None:
    view = View.from_messages(turns(4))
    source = RecordingSource(view.source)
    view = View(groups=view.groups, source=source, tokenizer=view.tokenizer)
    await ToolResultCompactionStrategy().plan(view)
    assert source.asked == ["group_c0", "group_c1", "group_c2"]


def test_negative_keep_is_rejected() -> None:
    with pytest.raises(ValueError):
        ToolResultCompactionStrategy(keep_last_tool_call_groups=-1)
