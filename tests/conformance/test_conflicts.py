"""Conflicts: a plan applies only if the groups it touches are unchanged since its
snapshot; else it is planned again once, and on a second conflict nothing is applied.
A group another compaction excluded since is no conflict: what the plan does to it is
dropped (done already), and the rest applies."""

from __future__ import annotations

import asyncio
import logging

import pytest

from store.contract import HistoryBackend
from strategies.changeset import ChangeSet, Exclusion
from tests.conformance.test_compaction import _chat, _ids
from tests.conformance.toy_strategies import (
    ExcludeOldest,
    Fixed,
    Gated,
    Interfering,
    SummarizeOldest,
)
from tests.groups.conversations import assistant, call, result, tool, user
from tests.strategies.invariants import assert_projection_invariants


async def test_conflict_recomputes_once(store: HistoryBackend) -> None:
    await store.append("s", [user("u1", "a"), assistant("a1", call("c1", "f"))])
    gated = Gated(ExcludeOldest(5))
    task = asyncio.create_task(store.compact("s", gated))
    await gated.entered.wait()
    # meanwhile the result arrives: it joins the pending call's group, which changes
    await store.append("s", [tool("t1", result("c1", "done")), user("u2", "next")])
    gated.gate.set()
    event = await task
    assert gated.plans == 2 and event is not None
    # the second plan saw the appended messages: u2 (newest user) stays, t1 went whole
    assert set(event.excluded) == {"group_u1", "group_a1"}
    assert await _ids(store) == ["u2"]


async def test_a_group_changed_twice_meanwhile_gives_up_with_a_warning(
    store: HistoryBackend, caplog: pytest.LogCaptureFixture
) -> None:
    await store.append("s", _chat())
    pinned: list[str] = []

    async def pin_the_oldest() -> None:
        # pin the group the plan excludes (the oldest not pinned yet): it changed
        view = await store.view("s")
        oldest = next(g.group_id for g in view.groups if g.kind != "system" and not g.pinned)
        pinned.extend(await store.pin("s", [oldest]))

    strategy = Interfering(ExcludeOldest(1), pin_the_oldest)
    with caplog.at_level(logging.WARNING, logger="chatledger.store"):
        event = await store.compact("s", strategy)
    assert event is not None and event.outcome == "abandoned" and strategy.plans == 2
    assert event.attempts == 2 and event.excluded == () and event.tokens_saved == 0
    assert pinned == ["group_u1", "group_a1"]
    assert "abandoned" in caplog.text
    assert await store.audit("s") == [event] and await store.excluded("s") == []


async def test_a_group_pinned_and_unpinned_meanwhile_is_unchanged(
    store: HistoryBackend,
) -> None:
    """What a conflict compares is the group's state (messages, tokens, exclusion, pin,
    pending calls), not how many writes touched it: back as it was, the plan applies."""
    await store.append("s", _chat())

    async def pin_and_unpin() -> None:
        await store.pin("s", ["group_u1"])
        await store.unpin("s", ["group_u1"])

    strategy = Interfering(ExcludeOldest(1), pin_and_unpin)
    event = await store.compact("s", strategy)
    assert event is not None and strategy.plans == 1
    assert event.excluded == ("group_u1",)


async def test_a_group_another_compaction_excluded_meanwhile_is_done_not_a_conflict(
    store: HistoryBackend, caplog: pytest.LogCaptureFixture
) -> None:
    await store.append("s", _chat())

    async def exclude_the_oldest() -> None:
        # a concurrent compaction excludes one of the groups the plan excludes
        await store.compact("s", ExcludeOldest(1))

    strategy = Interfering(ExcludeOldest(2), exclude_the_oldest)
    with caplog.at_level(logging.INFO, logger="chatledger.store"):
        event = await store.compact("s", strategy)
    assert strategy.plans == 1 and "conflicted" not in caplog.text
    # the rest of the plan applied: the group the other compaction left
    assert event is not None and event.outcome == "applied" and event.excluded == ("group_a1",)
    assert [e.outcome for e in await store.audit("s")] == ["applied", "applied"]
    assert {g.group_id for g in await store.excluded("s")} == {"group_u1", "group_a1"}


async def test_a_plan_done_whole_meanwhile_applies_and_records_nothing(
    store: HistoryBackend,
) -> None:
    await store.append("s", _chat())

    async def exclude_the_same() -> None:
        await store.compact("s", ExcludeOldest(2))

    strategy = Interfering(ExcludeOldest(2), exclude_the_same)
    assert await store.compact("s", strategy) is None
    assert strategy.plans == 1
    assert [e.outcome for e in await store.audit("s")] == ["applied"]
    assert {g.group_id for g in await store.excluded("s")} == {"group_u1", "group_a1"}


async def test_a_summary_of_a_group_excluded_meanwhile_is_dropped_whole(
    store: HistoryBackend,
) -> None:
    await store.append("s", _chat())

    async def exclude_the_oldest() -> None:
        await store.compact("s", ExcludeOldest(1))

    strategy = Interfering(SummarizeOldest(2), exclude_the_oldest)
    assert await store.compact("s", strategy) is None
    assert strategy.plans == 1
    # the other group the summary would have replaced stays as it was, and no summary
    view = await store.view("s")
    assert [g.group_id for g in view.groups][:2] == ["group_sys", "group_a1"]
    assert not any(g.kind == "summary" for g in view.groups)
    assert_projection_invariants(await store.context("s"))


async def test_appends_meanwhile_are_never_excluded(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    gated = Gated(ExcludeOldest(3))
    task = asyncio.create_task(store.compact("s", gated))
    await gated.entered.wait()
    await store.append("s", [user("u4", "new"), assistant("a4", "fresh")])
    gated.gate.set()
    event = await task
    assert event is not None and gated.plans == 1  # untouched groups: applied as planned
    sent = await _ids(store)
    assert sent[-2:] == ["u4", "a4"]
    assert_projection_invariants(await store.context("s"))


async def test_a_plan_made_before_a_restore_is_planned_again(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    first = await store.compact("s", ExcludeOldest(1))
    assert first is not None
    (group,) = first.excluded
    done: list[bool] = []

    async def restore_once() -> None:
        if not done:
            done.append(True)
            await store.restore("s", group_ids=[group])
            await store.unpin("s", [group])

    fixed = Fixed(ChangeSet(exclusions=(Exclusion(group, "x"),), strategy="fixed"))
    strategy = Interfering(fixed, restore_once)
    event = await store.compact("s", strategy)
    # the first plan was made while the group was excluded: planned again on the new view
    assert strategy.plans == 2 and event is not None and event.excluded == (group,)
