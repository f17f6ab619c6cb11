"""TokenBudgetComposedStrategy: strategies in order, then a fallback, until a budget holds.

Counts here come from a view counted one token per character with no framing overhead,
so that every figure can be read off the texts: ``s`` 9, ``u<i>`` 10, ``c<i>`` 11
(the tool name), ``r<i>`` 8, ``a<i>`` 8; three turns make 120 tokens.
"""

from __future__ import annotations

from typing import Any

import agent_framework as af
import pytest

from strategies.base import TokenizerMismatch
from strategies.changeset import ChangeSet
from strategies.selective import SelectiveToolCallCompactionStrategy
from strategies.sliding_window import SlidingWindowStrategy
from strategies.token_budget import TokenBudgetComposedStrategy
from strategies.tokenizers import TokenCountPolicy
from strategies.view import View
from tests.strategies.conversations import ViewCounts, plan_and_project, to_reference, turns

NO_OVERHEAD = TokenCountPolicy(per_message_overhead=0)


class Chars:
    """One token per character."""

    name = "chars"

    def count_tokens(self, text: str) -> int:
        return len(text)


def view_of_turns(count: int = 3) -> View:
    return View.from_messages(turns(count), Chars(), policy=NO_OVERHEAD)


def reasons(changes: ChangeSet) -> dict[str, str]:
    return {e.group_id: e.reason for e in changes.exclusions}


def budget(token_budget: int, *strategies: object, **kwargs: Any) -> TokenBudgetComposedStrategy:
    return TokenBudgetComposedStrategy(
        token_budget=token_budget,
        tokenizer=Chars(),
        strategies=strategies,  # type: ignore[arg-type]
        **kwargs,
    )


def test_counts_are_what_the_docstring_says() -> None:
    assert view_of_turns().token_count == 120


async def test_within_budget_changes_nothing() -> None:
    changes, _ = await plan_and_project(
        budget(120, SlidingWindowStrategy(keep_last_groups=1)), view_of_turns()
    )
    assert changes.is_empty


async def test_stops_early_once_the_budget_holds() -> None:
    selective = SelectiveToolCallCompactionStrategy()
    window = SlidingWindowStrategy(keep_last_groups=1)
    early, _ = await plan_and_project(budget(100, selective, window), view_of_turns())
    assert reasons(early) == {
        "group_c0": "tool_call_compaction",
        "group_c1": "tool_call_compaction",
    }
    late, _ = await plan_and_project(
        budget(100, selective, window, early_stop=False), view_of_turns()
    )
    assert set(reasons(late).values()) == {"tool_call_compaction", "sliding_window"}


async def test_fallback_excludes_oldest_groups() -> None:
    strategy = budget(50, SelectiveToolCallCompactionStrategy())
    changes, sent = await plan_and_project(strategy, view_of_turns())
    # 82 after the selective pass; u0, a0, u1, a1 bring it to 46
    fallback = [g for g, r in reasons(changes).items() if r == "token_budget_fallback"]
    assert fallback == ["group_u0", "group_a0", "group_u1", "group_a1"]
    assert sent == ["s", "u2", "c2", "r2", "a2"]


async def test_system_stays_unless_told_where_the_reference_drops_it() -> None:
    view = view_of_turns()
    _, sent = await plan_and_project(budget(15), view)
    assert sent == ["s", "u2", "a2"]  # 27 tokens: over budget, but prompt and request stay
    dropped, sent = await plan_and_project(
        budget(15, exclude_system_on_fallback=True), view, system_may_go=True
    )
    assert reasons(dropped)["group_s"] == "token_budget_fallback_strict"
    assert sent == ["u2", "a2"]
    reference = af.TokenBudgetComposedStrategy(
        token_budget=15, tokenizer=await ViewCounts(view).load(), strategies=[]
    )
    projected = await af.apply_compaction(to_reference(turns(3)), strategy=reference)
    assert [m.message_id for m in projected] == ["a2"]  # prompt and request both gone


async def test_tokenizer_must_be_the_views() -> None:
    strategy = budget(10)
    with pytest.raises(TokenizerMismatch, match="chars"):
        await strategy.plan(View.from_messages(turns(1)))


def test_params_nest_the_strategies() -> None:
    params = budget(10, SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=2)).params()
    assert params["strategies"] == [
        {
            "name": "SelectiveToolCallCompactionStrategy",
            "params": {"keep_last_tool_call_groups": 2, "trigger": None, "target": None},
        }
    ]
    assert params["tokenizer"] == "chars"
