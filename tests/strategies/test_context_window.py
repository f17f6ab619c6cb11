"""ContextWindowCompactionStrategy: tool-result eviction, then truncation, under a budget.

Counts: one token per character, no framing overhead; three turns make 120 tokens, each
tool-call group (``get_weather`` and ``result 0``) 19, and its tool-result summary
(``[Tool results: get_weather: result 0]``) 37: too big to be worth collapsing.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.changeset import ChangeSet
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.tokenizers import TokenCountPolicy
from strategies.tool_result import ToolResultCompactionStrategy
from strategies.view import View
from tests.strategies.conversations import Chat, chats, plan_and_project, results, say, turns
from tests.strategies.invariants import assert_invariants

NO_OVERHEAD = TokenCountPolicy(per_message_overhead=0)


class Chars:
    """One token per character."""

    name = "chars"

    def count_tokens(self, text: str) -> int:
        return len(text)


def view_of(messages: list) -> View:  # type: ignore[type-arg]
    return View.from_messages(messages, Chars(), policy=NO_OVERHEAD)


def window(budget: int, **kwargs: object) -> ContextWindowCompactionStrategy:
    """A strategy whose input budget is ``budget`` (output 990 tokens, reserve 10)."""
    return ContextWindowCompactionStrategy(
        max_context_window_tokens=budget + 1000,
        max_output_tokens=990,
        reserved_tokens=10,
        keep_last_tool_call_groups=1,
        **kwargs,  # type: ignore[arg-type]
    )


def test_budget_is_window_minus_output_minus_reserve() -> None:
    strategy = ContextWindowCompactionStrategy(
        max_context_window_tokens=128_000, max_output_tokens=16_000, reserved_tokens=2_000
    )
    assert strategy.input_budget_tokens == 110_000
    assert strategy.tool_eviction_tokens == 55_000
    assert strategy.truncation_tokens == 88_000


async def test_below_the_eviction_threshold_nothing_changes() -> None:
    changes, _ = await plan_and_project(window(240), view_of(turns(3)))
    assert changes.is_empty


async def test_a_group_with_a_big_result_collapses() -> None:
    # the summary text is capped at 4096 characters, the result is 5000
    messages = turns(2)
    messages[3] = results("r0", ("k0", "x" * 5000))
    view = view_of(messages)
    # budget 8000: evict above 4000, truncate above 6400
    assert 4000 < view.token_count <= 6400
    changes, sent = await plan_and_project(window(8000), view)
    assert [s.replaces for s in changes.summaries] == [("group_c0",)]
    assert changes.exclusions == ()
    summary = changes.summaries[0].message
    assert view.count(summary) < view.group("group_c0").token_count
    assert sent == ["s", "u0", summary.message_id, "a0", "u1", "c1", "r1", "a1"]


async def test_a_group_whose_summary_is_no_smaller_is_left_alone() -> None:
    # budget 200: evict above 100, truncate above 160; 120 tokens, and each summary would
    # count more than its group (the plain tool-result strategy would collapse both)
    view = view_of(turns(3))
    evicted = await ToolResultCompactionStrategy(keep_last_tool_call_groups=1).plan(view)
    assert [s.replaces for s in evicted.summaries] == [("group_c0",), ("group_c1",)]
    for insert in evicted.summaries:
        assert view.count(insert.message) >= view.group(insert.replaces[0]).token_count
    changes, sent = await plan_and_project(window(200), view)
    assert changes.is_empty
    assert sent == [m.message_id for m in turns(3)]


async def test_only_the_saving_collapses_are_kept_and_planning_again_changes_nothing() -> None:
    messages = turns(3)
    messages[3] = results("r0", ("k0", "x" * 5000))
    view = view_of(messages)
    strategy = window(6000)  # evict above 3000, truncate above 4800
    changes = await strategy.plan(view)
    assert [s.replaces for s in changes.summaries] == [("group_c0",)]  # not group_c1
    after = await assert_invariants(view, changes, strategy=strategy)
    # the view left is still above the eviction threshold, so planning again plans the
    # eviction of group_c1 once more, and drops it once more
    assert strategy.tool_eviction_tokens < after.token_count <= strategy.truncation_tokens
    assert (await strategy.plan(after)).is_empty


async def test_truncation_down_to_the_eviction_threshold() -> None:
    # budget 140: evict above 70 (no summary would save), truncate above 112, down to 54
    changes, sent = await plan_and_project(window(140), view_of(turns(3)))
    assert [(e.group_id, e.reason) for e in changes.exclusions] == [
        ("group_u0", "truncation"),
        ("group_c0", "truncation"),
        ("group_a0", "truncation"),
        ("group_u1", "truncation"),
        ("group_c1", "truncation"),
    ]
    assert changes.summaries == ()
    assert sent == ["s", "a1", "u2", "c2", "r2", "a2"]


async def test_a_summary_excluded_by_truncation_is_never_inserted() -> None:
    # budget 4200: evict above 2100, truncate above 3360: the summary of c0 (4096
    # tokens) is inserted by the eviction, then excluded by the truncation: the change
    # set excludes the groups it replaced instead
    messages = turns(3)
    messages[3] = results("r0", ("k0", "x" * 5000))
    changes, sent = await plan_and_project(window(4200), view_of(messages))
    assert changes.summaries == ()
    assert ("group_c0", "truncation") in [(e.group_id, e.reason) for e in changes.exclusions]
    assert "c0" not in sent and "r0" not in sent


async def test_start_at_user() -> None:
    changes, sent = await plan_and_project(window(140, start_at_user=True), view_of(turns(3)))
    assert sent == ["s", "u2", "c2", "r2", "a2"]
    assert changes.exclusions[-1].reason == "start_at_user"


async def test_start_at_user_also_without_pressure() -> None:
    messages = [say("system", "s"), say("assistant", "hello"), say("user", "u0")]
    _, sent = await plan_and_project(window(500, start_at_user=True), view_of(messages))
    assert sent == ["s", "u0"]


@settings(max_examples=150, deadline=None)
@given(chat=chats(), data=st.data())
def test_every_summary_saves_tokens(chat: Chat, data: st.DataObject) -> None:
    window_tokens = data.draw(st.integers(50, 3000))
    strategy = ContextWindowCompactionStrategy(
        max_context_window_tokens=window_tokens,
        max_output_tokens=data.draw(st.integers(0, window_tokens // 4)),
        keep_last_tool_call_groups=data.draw(st.integers(0, 3)),
    )

    async def run() -> None:
        view = View.from_messages(chat.messages, pinned=chat.pinned_groups)
        changes = await strategy.plan(view)
        await assert_invariants(view, changes, strategy=strategy)
        for insert in changes.summaries:
            replaced = sum(view.group(g).token_count for g in insert.replaces)
            assert view.count(insert.message) < replaced

    asyncio.run(run())


async def test_warns_when_protected_groups_exceed(caplog: pytest.LogCaptureFixture) -> None:
    messages = turns(2)
    view = View.from_messages(
        messages, Chars(), policy=NO_OVERHEAD, pinned=[f"group_{m.message_id}" for m in messages]
    )
    with caplog.at_level(logging.WARNING, logger="chatledger.strategies"):
        changes: ChangeSet = (await plan_and_project(window(20), view))[0]
    assert changes.touched_group_ids == frozenset()
    assert "could not fit" in caplog.text


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_context_window_tokens": 0, "max_output_tokens": 0},
        {"max_context_window_tokens": 100, "max_output_tokens": 100},
        {"max_context_window_tokens": 100, "max_output_tokens": 50, "reserved_tokens": 50},
        {"max_context_window_tokens": 100, "max_output_tokens": 0, "tool_eviction_threshold": 0},
        {"max_context_window_tokens": 100, "max_output_tokens": 0, "truncation_threshold": 1.5},
        {
            "max_context_window_tokens": 100,
            "max_output_tokens": 0,
            "tool_eviction_threshold": 0.9,
            "truncation_threshold": 0.8,
        },
    ],
)
def test_invalid_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ContextWindowCompactionStrategy(**kwargs)  # type: ignore[arg-type]
