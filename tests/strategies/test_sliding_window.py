"""SlidingWindowStrategy: keep the newest groups or turns."""

from __future__ import annotations

import agent_framework as af
import pytest

from strategies.changeset import ChangeSet
from strategies.sliding_window import SlidingWindowStrategy
from strategies.triggers import MessagesExceed
from tests.strategies.conversations import plan_and_project, to_reference, turns


def excluded(changes: ChangeSet) -> list[str]:
    return [e.group_id for e in changes.exclusions]


async def test_keeps_the_last_groups_and_the_newest_request() -> None:
    changes, sent = await plan_and_project(SlidingWindowStrategy(keep_last_groups=2), turns(3))
    assert sent == ["s", "u2", "c2", "r2", "a2"]
    assert {e.reason for e in changes.exclusions} == {"sliding_window"}


async def test_the_reference_drops_the_request_outside_the_window() -> None:
    reference = await af.apply_compaction(
        to_reference(turns(3)), strategy=af.SlidingWindowStrategy(keep_last_groups=2)
    )
    assert [m.message_id for m in reference] == ["s", "c2", "r2", "a2"]


async def test_keep_last_turns() -> None:
    changes, sent = await plan_and_project(SlidingWindowStrategy(keep_last_turns=2), turns(3))
    assert excluded(changes) == ["group_u0", "group_c0", "group_a0"]
    assert sent[:2] == ["s", "u1"]


async def test_fewer_turns_than_the_window_changes_nothing() -> None:
    changes, _ = await plan_and_project(SlidingWindowStrategy(keep_last_turns=5), turns(3))
    assert changes.is_empty


async def test_system_goes_when_told() -> None:
    strategy = SlidingWindowStrategy(keep_last_groups=4, preserve_system=False)
    _, sent = await plan_and_project(strategy, turns(3), system_may_go=True)
    assert sent == ["a1", "u2", "c2", "r2", "a2"]


async def test_trigger_limits_how_much_goes() -> None:
    quiet = SlidingWindowStrategy(keep_last_groups=1, trigger=MessagesExceed(20))
    assert (await plan_and_project(quiet, turns(3)))[0].is_empty  # 13 messages
    strategy = SlidingWindowStrategy(keep_last_groups=1, trigger=MessagesExceed(10))
    changes, _ = await plan_and_project(strategy, turns(3))
    assert excluded(changes) == ["group_u0", "group_c0"]  # 13 -> 12 -> 10


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"keep_last_groups": 1, "keep_last_turns": 1}, {"keep_last_groups": 0}],
    ids=["neither", "both", "zero"],
)
def test_invalid_parameters(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        SlidingWindowStrategy(**kwargs)  # type: ignore[arg-type]
