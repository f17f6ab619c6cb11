"""SelectiveToolCallCompactionStrategy: exclude all but the newest tool-call groups."""

from __future__ import annotations

import agent_framework as af
import pytest

from strategies.changeset import ChangeSet
from strategies.selective import SelectiveToolCallCompactionStrategy
from strategies.triggers import TokensExceed
from tests.strategies.conversations import calls, plan_and_project, results, to_reference, turns


def excluded(changes: ChangeSet) -> list[str]:
    return [e.group_id for e in changes.exclusions]


@pytest.mark.parametrize(
    ("keep", "expected"),
    [(0, ["group_c0", "group_c1", "group_c2"]), (1, ["group_c0", "group_c1"]), (3, [])],
)
async def test_keeps_the_newest_tool_groups(keep: int, expected: list[str]) -> None:
    strategy = SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=keep)
    changes, sent = await plan_and_project(strategy, turns(3))
    assert excluded(changes) == expected
    assert {e.reason for e in changes.exclusions} <= {"tool_call_compaction"}
    assert all(f"c{i}" not in sent for i in range(3 - keep))


async def test_in_flight_calls_stay_where_the_reference_drops_them() -> None:
    messages = [*turns(1), calls("c9", "k9")]  # the model just asked for a tool
    strategy = SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=0)
    _, sent = await plan_and_project(strategy, messages)
    assert sent == ["s", "u0", "a0", "c9"]
    reference = await af.apply_compaction(
        to_reference(messages),
        strategy=af.SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=0),
    )
    assert [m.message_id for m in reference] == ["s", "u0", "a0"]


async def test_orphan_results_neither_count_nor_are_touched() -> None:
    messages = [*turns(2)]
    messages.insert(5, results("o", ("nobody", "stray")))
    strategy = SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=1)
    changes, sent = await plan_and_project(strategy, messages)
    assert excluded(changes) == ["group_c0"]
    assert "o" not in sent


async def test_trigger_and_target() -> None:
    strategy = SelectiveToolCallCompactionStrategy(
        keep_last_tool_call_groups=0, trigger=TokensExceed(10**6)
    )
    assert (await plan_and_project(strategy, turns(3)))[0].is_empty


def test_negative_keep_is_rejected() -> None:
    with pytest.raises(ValueError):
        SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=-1)
