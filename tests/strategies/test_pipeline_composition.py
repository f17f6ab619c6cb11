"""One composition path: pipelines and budgets chain change sets the same way; the
pipeline's trigger and target; nested params of one shape; the tool-group base."""

from __future__ import annotations

import json
from typing import Any

import pytest

from strategies._selection import combine
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.pipeline import MAX_PASSES, PipelineStrategy
from strategies.reduction import ToolResultReductionStrategy
from strategies.selective import SelectiveToolCallCompactionStrategy, ToolGroupStrategy
from strategies.sliding_window import SlidingWindowStrategy
from strategies.token_budget import TokenBudgetComposedStrategy
from strategies.tokenizers import CharacterEstimatorTokenizer
from strategies.tool_result import ToolResultCompactionStrategy
from strategies.triggers import GroupsExceed, Never, TokensBelow, TokensExceed
from strategies.view import View
from tests.strategies.invariants import assert_invariants


def first_word(text: str) -> str:
    """Keep the first word."""
    return text.split(" ", 1)[0]


def history(turns: int = 4) -> list[Message]:
    out: list[Message] = []
    for i in range(turns):
        out.append(Message.text_message("user", f"question {i} " + "q" * 40, message_id=f"u{i}"))
        call = FunctionCallContent(call_id=f"c{i}", name="search", arguments="{}")
        out.append(Message(role="assistant", contents=[call], message_id=f"a{i}"))
        result = FunctionResultContent(call_id=f"c{i}", result=f"found {i} " + "r" * 400)
        out.append(Message(role="tool", contents=[result], message_id=f"t{i}"))
    return out


class Spy:
    """A strategy that records the views it plans on and excludes the oldest group."""

    name = "Spy"

    def __init__(self) -> None:
        self.seen: list[int] = []

    def params(self) -> dict[str, Any]:
        return {}

    async def plan(self, view: View) -> ChangeSet:
        self.seen.append(len(view.groups))
        return await SlidingWindowStrategy(keep_last_groups=len(view.groups) - 1).plan(view)


async def _sequential(view: View, parts: list[CompactionStrategy]) -> list[ChangeSet]:
    out: list[ChangeSet] = []
    for part in parts:
        changes = await part.plan(view)
        out.append(changes)
        view = view.apply(changes)
    return out


# -------------------------------------------------------------- one composition path


async def test_pipeline_never_writes_a_summary_it_excludes() -> None:
    view = View.from_messages(history())
    parts: list[CompactionStrategy] = [
        ToolResultCompactionStrategy(keep_last_tool_call_groups=0),
        SlidingWindowStrategy(keep_last_groups=2),
    ]
    raw = await _sequential(view, parts)
    inserted = {s.group_id for s in raw[0].summaries}
    # the situation under test: the window excludes summaries the first part inserted.
    assert inserted & {e.group_id for e in raw[1].exclusions}

    pipeline = PipelineStrategy(*parts)
    changes = await pipeline.plan(view)
    written = {s.group_id for s in changes.summaries}
    assert not written & {e.group_id for e in changes.exclusions}
    assert written == inserted - {e.group_id for e in raw[1].exclusions}
    # the same composition as the budget's: one function, same exclusions and summaries.
    expected = combine(raw, strategy=pipeline.name, params=pipeline.params())
    assert changes == expected
    budget = TokenBudgetComposedStrategy(
        token_budget=1, tokenizer=CharacterEstimatorTokenizer(), strategies=parts, early_stop=False
    )
    budgeted = await budget.plan(view)
    assert budgeted.summaries == changes.summaries
    assert budgeted.exclusions[: len(changes.exclusions)] == changes.exclusions
    # and the projection is the one the parts leave one after the other.
    after = await assert_invariants(view, changes, strategy=pipeline)
    sequential = view.apply(raw[0]).apply(raw[1])
    assert await after.project() == await sequential.project()


async def test_combine_drops_reductions_of_groups_a_later_part_removes() -> None:
    view = View.from_messages(history())
    parts: list[CompactionStrategy] = [
        ToolResultReductionStrategy(reducers={"search": first_word}),
        SlidingWindowStrategy(keep_last_groups=2),
    ]
    raw = await _sequential(view, parts)
    excluded = {e.group_id for e in raw[1].exclusions}
    assert {r.group_id for r in raw[0].reductions} & excluded
    combined = combine(raw, strategy="x", params={})
    assert combined.reductions == tuple(r for r in raw[0].reductions if r.group_id not in excluded)
    assert combined.reductions  # the newest tool group is still reduced
    assert (await PipelineStrategy(*parts).plan(view)).reductions == combined.reductions


# --------------------------------------------------------------- trigger and target


async def test_pipeline_trigger_gates_the_whole_pipeline() -> None:
    view = View.from_messages(history())
    spy = Spy()
    for trigger in (Never, GroupsExceed(len(view.groups))):
        assert (await PipelineStrategy(spy, trigger=trigger).plan(view)).is_empty
    assert spy.seen == []
    fired = await PipelineStrategy(spy, trigger=GroupsExceed(len(view.groups) - 1)).plan(view)
    assert len(fired.exclusions) == 1 and spy.seen == [len(view.groups)]


async def test_pipeline_stops_once_its_target_holds() -> None:
    view = View.from_messages(history())
    size = len(view.groups)
    spy = Spy()
    # default target: the trigger no longer fires; the first step gets there.
    changes = await PipelineStrategy(spy, spy, spy, trigger=GroupsExceed(size - 1)).plan(view)
    assert spy.seen == [size] and len(changes.exclusions) == 1

    spy = Spy()
    target = TokensBelow(view.token_count - view.groups[0].token_count - 1)
    changes = await PipelineStrategy(spy, spy, spy, target=target).plan(view)
    assert spy.seen == [size, size - 1]  # checked before each step; the third never runs
    assert len(changes.exclusions) == 2

    spy = Spy()
    assert (await PipelineStrategy(spy, target=TokensExceed(0)).plan(view)).is_empty
    assert spy.seen == []


async def test_pipeline_without_trigger_runs_every_step() -> None:
    view = View.from_messages(history())
    spy = Spy()
    changes = await PipelineStrategy(spy, spy, spy).plan(view)
    size = len(view.groups)
    # the first pass runs every step on what the step before left; Spy never settles, so
    # passes go on, each step planned at most MAX_PASSES times (test_pipeline_idempotent)
    assert spy.seen[:3] == [size, size - 1, size - 2]
    assert 3 < len(spy.seen) <= 3 * MAX_PASSES
    assert len(changes.exclusions) >= 3


def test_pipeline_trigger_is_keyword_only_and_in_params() -> None:
    with pytest.raises(TypeError, match="not a compaction strategy"):
        PipelineStrategy(GroupsExceed(3))  # type: ignore[arg-type]
    pipeline = PipelineStrategy(trigger=GroupsExceed(3), target=TokensBelow(10))
    assert pipeline.params()["trigger"] == GroupsExceed(3).params()
    assert pipeline.params()["target"] == TokensBelow(10).params()


# --------------------------------------------------------------------- params shape


def test_nested_strategies_have_one_params_shape() -> None:
    window = SlidingWindowStrategy(keep_last_groups=3)
    inner = PipelineStrategy(window)
    budget = TokenBudgetComposedStrategy(
        token_budget=10, tokenizer=CharacterEstimatorTokenizer(), strategies=[window, inner]
    )
    pipeline = PipelineStrategy(window, inner)
    expected = [
        {"name": window.name, "params": window.params()},
        {"name": inner.name, "params": inner.params()},
    ]
    assert pipeline.params()["strategies"] == expected
    assert budget.params()["strategies"] == expected
    json.dumps([pipeline.params(), budget.params()])


# ---------------------------------------------------------------- tool-group base


@pytest.mark.parametrize(
    "kind", [ToolResultCompactionStrategy, SelectiveToolCallCompactionStrategy]
)
def test_tool_group_strategies_share_keywords_and_params(kind: type[ToolGroupStrategy]) -> None:
    strategy = kind(keep_last_tool_call_groups=2, trigger=TokensExceed(5))
    assert isinstance(strategy, ToolGroupStrategy)
    assert strategy.params() == {
        "keep_last_tool_call_groups": 2,
        "trigger": TokensExceed(5).params(),
        "target": None,
    }
    with pytest.raises(ValueError, match="keep_last_tool_call_groups"):
        kind(keep_last_tool_call_groups=-1)
    assert kind().params()["keep_last_tool_call_groups"] == 1
