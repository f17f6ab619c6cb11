"""ContextWindowCompactionStrategy: tool-result eviction, then truncation, under a budget.

Counts: one token per character, no framing overhead; three turns make 120 tokens, and a
tool-result summary (``[Tool results: get_weather: result 0]``) is 37.
"""

from __future__ import annotations

import logging

import pytest

from strategies.changeset import ChangeSet
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.tokenizers import TokenCountPolicy
from strategies.view import View
from tests.strategies.conversations import plan_and_project, say, turns

NO_OVERHEAD = TokenCountPolicy(per_message_overhead=0)


class Chars:
    """One token per character."""

    name = "chars"

    def count_tokens(self, text: str) -> int:
        return len(text)


def view_of(messages: list) -> View:  # type: ignore[type-arg]
    return View.from_messages(messages, Chars(), policy=NO_OVERHEAD)


def window(budget: int, **kwargs: object) -> ContextWindowCompactionStrategy:
    """A strategy whose input budget is ``budget`` (window 1000, the rest output/reserve)."""
    return ContextWindowCompactionStrategy(
        max_context_window_tokens=1000,
        max_output_tokens=1000 - budget - 10,
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


async def test_eviction_only_between_the_thresholds() -> None:
    # budget 200: evict above 100, truncate above 160; 120 -> 156 after two summaries
    changes, _ = await plan_and_project(window(200), view_of(turns(3)))
    assert [s.replaces for s in changes.summaries] == [("group_c0",), ("group_c1",)]
    assert changes.exclusions == ()


async def test_truncation_down_to_the_eviction_threshold() -> None:
    # budget 150: evict above 75, truncate above 120; 156 after eviction, down to 54
    changes, sent = await plan_and_project(window(150), view_of(turns(3)))
    # u0, the summary of c0, a0, u1 and the summary of c1 go: summaries excluded in the
    # same change set are never inserted; the groups they replaced are excluded instead
    assert [(e.group_id, e.reason) for e in changes.exclusions] == [
        ("group_u0", "truncation"),
        ("group_c0", "truncation"),
        ("group_a0", "truncation"),
        ("group_u1", "truncation"),
        ("group_c1", "truncation"),
    ]
    assert changes.summaries == ()
    assert sent == ["s", "a1", "u2", "c2", "r2", "a2"]


async def test_start_at_user() -> None:
    changes, sent = await plan_and_project(window(150, start_at_user=True), view_of(turns(3)))
    assert sent == ["s", "u2", "c2", "r2", "a2"]
    assert changes.exclusions[-1].reason == "start_at_user"


async def test_start_at_user_also_without_pressure() -> None:
    messages = [say("system", "s"), say("assistant", "hello"), say("user", "u0")]
    _, sent = await plan_and_project(window(500, start_at_user=True), view_of(messages))
    assert sent == ["s", "u0"]


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
