"""The store with the library's own strategies: truncation, summarization under writers,
summaries planned again after a restore, a strategy counting with another tokenizer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput
from strategies.base import CompactionStrategy, TokenizerMismatch
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.messages import Message
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.tool_result import ToolResultCompactionStrategy
from strategies.truncation import TruncationStrategy
from tests.groups.conversations import assistant, call, result, system, tool, user
from tests.strategies.conversations import say, turns
from tests.strategies.invariants import assert_invariants, assert_projection_invariants


async def test_truncation_applies_what_the_view_would(store: HistoryBackend) -> None:
    await store.append("s", turns(5))
    strategy = TruncationStrategy(max_n=6, compact_to=3)
    view = await store.view("s")
    planned = await strategy.plan(view)
    expected = await assert_invariants(view, planned, strategy=strategy)
    event = await store.compact("s", strategy, phase="after_run")
    assert event is not None and event.strategy == "TruncationStrategy"
    assert set(event.excluded) == {e.group_id for e in planned.exclusions}
    assert await store.context("s") == await expected.project()
    assert await store.compact("s", strategy) is None  # idempotent on the stored result


async def test_slow_summarizer_never_excludes_concurrent_appends(
    store: HistoryBackend,
) -> None:
    await store.append("s", turns(6))
    summarizer = FakeSummarizer(delay=0.01)
    strategy = SummarizationStrategy(client=summarizer, target_count=4, threshold=0)

    async def writer(n: int) -> list[str]:
        ids = []
        for i in range(5):
            batch = [say("user", f"w{n}u{i}"), say("assistant", f"w{n}a{i}")]
            ids += await store.append("s", batch)
            await asyncio.sleep(0)
        return ids

    compaction = asyncio.create_task(store.compact("s", strategy, phase="after_run"))
    written = await asyncio.gather(*(writer(n) for n in range(4)))
    event = await compaction
    assert event is not None and event.summarized
    stored = {m.message_id: m for m in await store.history("s", include_excluded=True)}
    new_ids = [i for ids in written for i in ids]
    assert len(stored) == len(turns(6)) + len(new_ids) + len(event.summarized)
    assert not [i for i in new_ids if stored[i].excluded]
    assert [m.seq for m in stored.values()] == list(range(1, len(stored) + 1))
    assert_projection_invariants(await store.context("s"))


def long_result_chat() -> list[Message]:
    return [
        system("sys", "be brief"),
        user("u1", "weather?"),
        assistant("a1", call("c1", "weather")),
        tool("t1", result("c1", "sunny and warm all day long. " * 200)),
        assistant("a2", "sunny"),
        user("u2", "tomorrow?"),
        assistant("a3", "rain"),
        user("u3", "thanks"),
        assistant("a9", call("c9", "weather")),
        tool("t9", result("c9", "x")),
        user("u9", "ok"),
    ]


STRATEGIES: dict[str, Callable[[], CompactionStrategy]] = {
    "tool_result": lambda: ToolResultCompactionStrategy(keep_last_tool_call_groups=1),
    "context_window": lambda: ContextWindowCompactionStrategy(
        # the first call's summary (capped at 4096 characters) is smaller than its result,
        # so it is collapsed; the history then stays under the truncation threshold
        max_context_window_tokens=2010,
        max_output_tokens=10,
        keep_last_tool_call_groups=1,
    ),
    "summarization": lambda: SummarizationStrategy(
        client=FakeSummarizer(), target_count=2, threshold=0
    ),
}


async def restore_unpin_compact(s: HistoryBackend, strategy: CompactionStrategy) -> dict[str, Any]:
    await s.append("s", long_result_chat())
    first = await s.compact("s", strategy)
    assert first is not None and first.summarized
    undo = await s.restore("s", event_id=first.id)
    assert undo is not None
    assert sorted(await s.unpin("s", undo.restored)) == sorted(undo.restored)
    second = await s.compact("s", strategy)  # plans the same summary ids again
    assert second is not None and second.summarized
    return {"first": first, "undo": undo, "second": second}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
async def test_a_summary_planned_again_after_restore_and_unpin(
    store: HistoryBackend, name: str
) -> None:
    strategy = STRATEGIES[name]()
    done = await restore_unpin_compact(store, strategy)
    first, undo, second = done["first"], done["undo"], done["second"]
    # a new summary, stored under "<planned id>@<its seq>", its group following
    assert not set(second.summarized) & set(first.summarized)
    rows = {m.group_id: m for m in await store.history("s", include_excluded=True)}
    for group_id in second.summarized:
        row = rows[group_id]
        assert row.kind == "summary" and not row.excluded
        assert group_id == f"group_{row.message.message_id}"
        planned = f"group_{row.message.message_id.rsplit('@', 1)[0]}"
        if planned in first.summarized:
            assert row.message.message_id.endswith(f"@{row.seq}")
    # the audit agrees: three events, each replaced group excluded by the new one
    assert [e.id for e in await store.audit("s")] == [second.id, undo.id, first.id]
    excluded = {g.group_id: g for g in await store.excluded("s")}
    for summary, replaced in second.summarized.items():
        for group_id in replaced:
            assert excluded[group_id].event_id == second.id
            assert excluded[group_id].summary_group_id == summary
    # the projection never holds a summary next to what it replaced
    view = await store.view("s")
    active = {g.group_id for g in view.groups}
    for group in view.groups:
        assert not set(group.summary_of) & active
    sent = {m.message_id for m in await store.context("s")}
    replaced_ids = {
        m.message.message_id
        for m in rows.values()
        if any(m.group_id in r for r in second.summarized.values())
    }
    assert not sent & replaced_ids
    # running the strategy once more changes nothing
    assert await store.compact("s", strategy) is None


class _OtherTokenizer:
    name = "other_tokenizer"

    def count_tokens(self, text: str) -> int:
        return len(text)


async def test_tokenizer_mismatch_is_invalid_input(store: HistoryBackend) -> None:
    await store.append("s", long_result_chat())
    strategy = ContextWindowCompactionStrategy(
        max_context_window_tokens=110, max_output_tokens=10, tokenizer=_OtherTokenizer()
    )
    with pytest.raises(InvalidInput, match="other_tokenizer") as info:
        await store.compact("s", strategy)
    assert isinstance(info.value.__cause__, TokenizerMismatch)
    with pytest.raises(InvalidInput, match="other_tokenizer"):
        await store.context("s", strategy=strategy)
    assert await store.audit("s") == []
