"""fewest_until: the shared "fewest oldest candidates until the target holds".

Each use (exclusions, tool-result summaries, reductions) is compared with a naive
reference that builds the real view after every prefix, as the strategies did before,
on generated views and generated targets (including triggers the helper does not know,
which take the exact fallback). A work count (groups touched by view-level operations:
views built, counts summed, change sets applied) shows planning with a target is linear.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies._selection import Goal, exclude_oldest, remaining_view, stop_when
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet, Reduction, SummaryInsert
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.pipeline import PipelineStrategy
from strategies.reduction import ToolResultReductionStrategy
from strategies.selective import SelectiveToolCallCompactionStrategy
from strategies.sliding_window import SlidingWindowStrategy
from strategies.token_budget import TokenBudgetComposedStrategy
from strategies.tokenizers import CharacterEstimatorTokenizer
from strategies.tool_result import ToolResultCompactionStrategy
from strategies.triggers import (
    All,
    Always,
    GroupsExceed,
    HasToolCalls,
    MessagesExceed,
    Never,
    Not,
    TokensBelow,
    TokensExceed,
    Trigger,
    TurnsExceed,
)
from strategies.triggers import (
    Any as AnyOf,
)
from strategies.truncation import TruncationStrategy
from strategies.view import GroupView, View
from tests.strategies.gen_b import views

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Opaque:
    """A trigger the helper does not know: it must get the real view."""

    inner: Trigger

    def __call__(self, view: View) -> bool:
        assert isinstance(view, View)
        return self.inner(view)

    def params(self) -> dict[str, Any]:
        return {"trigger": "Opaque", "of": self.inner.params()}


_LEAVES: st.SearchStrategy[Trigger] = st.one_of(
    st.builds(TokensExceed, st.integers(0, 3000)),
    st.builds(TokensBelow, st.integers(0, 3000)),
    st.builds(MessagesExceed, st.integers(0, 30)),
    st.builds(TurnsExceed, st.integers(0, 8)),
    st.builds(GroupsExceed, st.integers(0, 16)),
    st.just(HasToolCalls()),
    st.sampled_from([Always, Never]),
)


def _composite(inner: st.SearchStrategy[Trigger]) -> st.SearchStrategy[Trigger]:
    parts = st.lists(inner, max_size=3)
    return st.one_of(
        parts.map(lambda ts: All(*ts)),
        parts.map(lambda ts: AnyOf(*ts)),
        inner.map(Not),
        inner.map(Opaque),
    )


TARGETS: st.SearchStrategy[Trigger] = st.recursive(_LEAVES, _composite, max_leaves=6)


def first_word(text: str) -> str:
    """Keep the first word."""
    return text.split(" ", 1)[0]


def first_three(text: str) -> str:
    """Keep three characters."""
    return text[:3]


# ----------------------------------------------------------------- naive references


def naive_exclude_oldest(
    view: View, candidates: Sequence[GroupView], target: Trigger
) -> list[GroupView]:
    chosen: list[GroupView] = []
    for group in candidates:
        if target(remaining_view(view, [g.group_id for g in chosen])):
            break
        chosen.append(group)
    return chosen


def naive_summaries(
    view: View, summaries: Sequence[SummaryInsert], target: Trigger
) -> tuple[SummaryInsert, ...]:
    for count in range(len(summaries) + 1):
        if target(view.apply(ChangeSet(summaries=tuple(summaries[:count])))):
            return tuple(summaries[:count])
    return tuple(summaries)


def naive_reductions(
    view: View, reductions: Sequence[Reduction], target: Trigger
) -> tuple[Reduction, ...]:
    if target(view):
        return ()
    ends = [
        i + 1
        for i in range(len(reductions))
        if i + 1 == len(reductions) or reductions[i + 1].group_id != reductions[i].group_id
    ]
    for end in ends:
        if target(view.apply(ChangeSet(reductions=tuple(reductions[:end])))):
            return tuple(reductions[:end])
    return tuple(reductions)


# ---------------------------------------------------------------- equivalence tests


@SETTINGS
@given(view=views(max_steps=14), target=TARGETS, data=st.data())
def test_exclude_oldest_matches_the_naive_reference(
    view: View, target: Trigger, data: st.DataObject
) -> None:
    size = len(view.groups)
    picks = data.draw(st.lists(st.integers(0, max(size - 1, 0)), max_size=size + 2))
    candidates = [view.groups[i] for i in picks] if size else []
    goal = Goal(lambda g: 0, 0, target)
    assert exclude_oldest(view, candidates, goal) == naive_exclude_oldest(view, candidates, target)


@SETTINGS
@given(
    view=views(max_steps=14),
    keep=st.integers(0, 2),
    trigger=st.none() | TARGETS,
    target=st.none() | TARGETS,
)
async def test_tool_result_summaries_match_the_naive_reference(
    view: View, keep: int, trigger: Trigger | None, target: Trigger | None
) -> None:
    every = await ToolResultCompactionStrategy(
        keep_last_tool_call_groups=keep, trigger=trigger, target=Never
    ).plan(view)
    stop = stop_when(trigger, target)
    expected = every.summaries if stop is None else naive_summaries(view, every.summaries, stop)
    strategy = ToolResultCompactionStrategy(
        keep_last_tool_call_groups=keep, trigger=trigger, target=target
    )
    assert (await strategy.plan(view)).summaries == expected


@SETTINGS
@given(
    view=views(max_steps=14),
    keep=st.integers(0, 3),
    trigger=st.none() | TARGETS,
    target=st.none() | TARGETS,
)
async def test_reductions_match_the_naive_reference(
    view: View, keep: int, trigger: Trigger | None, target: Trigger | None
) -> None:
    reducers = {"search": first_word, "fetch": first_three}
    every = await ToolResultReductionStrategy(
        reducers=reducers, minimum_preserved_groups=keep, trigger=trigger, target=Never
    ).plan(view)
    stop = stop_when(trigger, target)
    expected = every.reductions if stop is None else naive_reductions(view, every.reductions, stop)
    strategy = ToolResultReductionStrategy(
        reducers=reducers, minimum_preserved_groups=keep, trigger=trigger, target=target
    )
    assert (await strategy.plan(view)).reductions == expected


def test_the_reference_helpers_are_not_trivial() -> None:
    # guard the references themselves: on a known history they stop where counted.
    history = _history(6)
    view = View.from_messages(history)
    tools = [g for g in view.groups if g.kind == "tool_call"]
    # excluding tool groups one by one: the target "at most 9 groups" holds after 3.
    assert len(view.groups) == 12
    chosen = naive_exclude_oldest(view, tools, Not(GroupsExceed(9)))
    assert [g.group_id for g in chosen] == [g.group_id for g in tools[:3]]
    assert exclude_oldest(view, tools, Goal(lambda g: 0, 0, Not(GroupsExceed(9)))) == chosen


# ----------------------------------------------------------------------- work count


def _history(turns: int) -> list[Message]:
    out: list[Message] = []
    for i in range(turns):
        out.append(Message.text_message("user", f"question {i}", message_id=f"u{i}"))
        call = FunctionCallContent(call_id=f"c{i}", name="search", arguments="{}")
        out.append(Message(role="assistant", contents=[call], message_id=f"a{i}"))
        result = FunctionResultContent(call_id=f"c{i}", result=f"found {i} " + "r" * 50)
        out.append(Message(role="tool", contents=[result], message_id=f"t{i}"))
    return out


class Work:
    """Groups touched by view-level operations: each view built (its groups), each
    view-level count read (its groups), each change set applied (the view's groups)."""

    def __init__(self) -> None:
        self.groups = 0
        self.applies = 0

    def patch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        init = View.__init__
        apply = View.apply

        def counting_init(view: View, *args: Any, **kwargs: Any) -> None:
            init(view, *args, **kwargs)
            self.groups += len(view.groups)

        def counting_apply(view: View, changes: ChangeSet) -> View:
            self.applies += 1
            self.groups += len(view.groups)
            return apply(view, changes)

        monkeypatch.setattr(View, "__init__", counting_init)
        monkeypatch.setattr(View, "apply", counting_apply)
        for name in ("token_count", "message_count", "turn_count", "has_tool_calls"):
            monkeypatch.setattr(View, name, self._counting(getattr(View, name)))

    def _counting(self, prop: property | cached_property[Any]) -> property:
        # counted on every read, cached or not: the work a plan asks for
        getter = prop.fget if isinstance(prop, property) else prop.func
        assert getter is not None

        def read(view: View) -> Any:
            self.groups += len(view.groups)
            return getter(view)

        return property(read)


def _strategies() -> Iterator[CompactionStrategy]:
    yield ToolResultCompactionStrategy(trigger=TokensExceed(10))
    yield SelectiveToolCallCompactionStrategy(trigger=TokensExceed(10))
    yield SlidingWindowStrategy(keep_last_groups=4, trigger=GroupsExceed(10))
    yield TruncationStrategy(max_n=10, compact_to=5, trigger=MessagesExceed(10))
    yield ToolResultReductionStrategy(reducers={"search": first_word}, trigger=TokensExceed(10))
    yield PipelineStrategy(
        ToolResultCompactionStrategy(keep_last_tool_call_groups=0),
        SlidingWindowStrategy(keep_last_groups=2),
        trigger=GroupsExceed(10),
    )


@pytest.mark.parametrize("strategy", list(_strategies()), ids=lambda s: s.name)
async def test_planning_with_a_target_is_linear(
    strategy: CompactionStrategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    views_by_size = [View.from_messages(_history(n)) for n in (100, 200, 400)]
    work: list[int] = []
    counter = Work()
    counter.patch(monkeypatch)
    for view in views_by_size:
        counter.groups = counter.applies = 0
        changes = await strategy.plan(view)
        assert not changes.is_empty  # the target is reached only after many candidates
        work.append(counter.groups)
        assert counter.applies <= len(getattr(strategy, "strategies", ())) + 1
    # linear: doubling the groups at most doubles the work (plus a constant part);
    # the quadratic planning this replaces multiplied it by about four.
    assert work[1] <= 2.2 * work[0]
    assert work[2] <= 2.2 * work[1]


async def test_token_budget_work_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    strategy = TokenBudgetComposedStrategy(
        token_budget=400,
        tokenizer=CharacterEstimatorTokenizer(),
        strategies=[ToolResultCompactionStrategy(trigger=TokensExceed(10))],
        trigger=TokensExceed(10),
        target=TokensBelow(400),
    )
    counter = Work()
    counter.patch(monkeypatch)
    work = []
    for n in (100, 200, 400):
        view = View.from_messages(_history(n))
        counter.groups = 0
        assert not (await strategy.plan(view)).is_empty
        work.append(counter.groups)
    assert work[1] <= 2.2 * work[0] and work[2] <= 2.2 * work[1]
