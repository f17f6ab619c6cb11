"""Issue #5's compaction on write: exclusions, summaries, reductions, events, conflicts."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from store.errors import InvalidInput
from store.memory import InMemoryHistoryStore
from strategies.changeset import ChangeSet, Exclusion, SummaryInsert
from strategies.messages import Message
from strategies.view import View
from tests.conformance.toy_strategies import (
    ExcludeOldest,
    Fixed,
    Gated,
    ReduceResults,
    SummarizeOldest,
)
from tests.groups.conversations import assistant, call, result, system, tool, user
from tests.strategies.invariants import assert_projection_invariants


@dataclass
class Interfering:
    """Plans with ``inner``, then runs ``hook`` (a concurrent writer) before returning."""

    inner: ExcludeOldest
    hook: Callable[[], Awaitable[None]]
    plans: int = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def params(self) -> dict[str, Any]:
        return self.inner.params()

    async def plan(self, view: View) -> ChangeSet:
        self.plans += 1
        changes = await self.inner.plan(view)
        await self.hook()
        return changes


def _chat(prefix: str = "") -> list[Message]:
    p = prefix
    return [
        system(f"{p}sys", "be brief"),
        user(f"{p}u1", "weather in Paris?"),
        assistant(f"{p}a1", call(f"{p}c1", "weather")),
        tool(f"{p}t1", result(f"{p}c1", "sunny and warm all day long")),
        assistant(f"{p}a2", "It is sunny."),
        user(f"{p}u2", "and tomorrow?"),
        assistant(f"{p}a3", "Rain."),
        user(f"{p}u3", "thanks"),
    ]


async def _ids(store: InMemoryHistoryStore, session: str = "s") -> list[str]:
    return [m.message_id for m in await store.context(session)]


async def test_exclusion_event_counts_and_projection(store: InMemoryHistoryStore) -> None:
    await store.append("s", _chat())
    before = await store.view("s")
    event = await store.compact("s", ExcludeOldest(2), phase="after_run")
    assert event is not None
    after = await store.view("s")
    assert event.phase == "after_run" and event.strategy == "exclude_oldest"
    assert event.params == {"n": 2}
    assert (event.messages_before, event.groups_before, event.tokens_before) == (
        before.message_count,
        before.group_count,
        before.token_count,
    )
    assert (event.messages_after, event.groups_after, event.tokens_after) == (
        after.message_count,
        after.group_count,
        after.token_count,
    )
    assert event.excluded == ("group_u1", "group_a1")
    assert event.tokens_saved == sum(before.group(g).token_count for g in event.excluded)
    assert await _ids(store) == ["sys", "a2", "u2", "a3", "u3"]
    assert after.excluded.groups == 2 and after.excluded.messages == 3
    assert len(await store.history("s", include_excluded=True)) == len(_chat())


async def test_summary_takes_anchor_and_next_slot(store: InMemoryHistoryStore) -> None:
    await store.append("s", _chat())
    event = await store.compact("s", SummarizeOldest(3))
    assert event is not None
    (summary_id, replaced), *_ = event.summarized.items()
    assert replaced == ("group_u1", "group_a1", "group_a2")
    everything = {m.message_id: m for m in await store.history("s", include_excluded=True)}
    summary = next(m for m in everything.values() if m.group_id == summary_id)
    assert (summary.anchor, summary.slot, summary.kind) == (everything["u1"].anchor, 1, "summary")
    assert summary.seq == len(_chat()) + 1  # summaries take the next seq, never renumber
    assert await _ids(store) == ["sys", summary.message_id, "u2", "a3", "u3"]
    excluded = {g.group_id: g for g in await store.excluded("s")}
    assert set(excluded) == set(replaced)
    assert all(
        g.reason == "summarized" and g.summary_group_id == summary_id for g in excluded.values()
    )
    assert all(g.event_id == event.id for g in excluded.values())
    # a second summary at the same anchor takes the next slot
    second = await store.compact("s", SummarizeOldest(2))
    assert second is not None
    (second_id, second_replaced), *_ = second.summarized.items()
    assert second_replaced == (summary_id, "group_u2")
    view = await store.view("s")
    assert view.group(second_id).order_key == (everything["u1"].anchor, 2)


async def test_reductions_overlay_and_keep_original(store: InMemoryHistoryStore) -> None:
    await store.append("s", _chat())
    event = await store.compact("s", ReduceResults())
    assert event is not None and event.reduced == ("group_a1",)
    sent = {m.message_id: m for m in await store.context("s")}
    assert sent["t1"].contents[0].result == "[reduced]"  # type: ignore[union-attr]
    stored = next(m for m in await store.history("s") if m.message_id == "t1")
    assert stored.message == _chat()[3] and stored.reduced == sent["t1"]
    assert stored.reduced_event_id == event.id
    assert event.tokens_after == event.tokens_before - stored.token_count + (
        stored.reduced_token_count or 0
    )
    assert await store.compact("s", ReduceResults()) is None  # idempotent


async def test_empty_change_set_and_dry_run(store: InMemoryHistoryStore) -> None:
    await store.append("s", _chat())
    assert await store.compact("s", Fixed(ChangeSet())) is None
    planned = await store.compact("s", ExcludeOldest(1), dry_run=True)
    assert isinstance(planned, ChangeSet) and planned.exclusions
    assert await store.audit("s") == [] and (await store.excluded("s")) == []
    with pytest.raises(InvalidInput):
        await store.compact("s", ExcludeOldest(1), phase="sometime")  # type: ignore[call-overload]


async def test_unknown_and_stale_parts_are_skipped(store: InMemoryHistoryStore) -> None:
    await store.append("s", _chat())
    changes = ChangeSet(
        exclusions=(Exclusion("group_nope", "x"), Exclusion("group_u1", "x")),
        strategy="fixed",
    )
    event = await store.compact("s", Fixed(changes))
    assert event is not None and event.excluded == ("group_u1",)
    assert await store.compact("s", Fixed(changes)) is None  # already excluded: no event


async def test_pinned_groups_are_never_excluded(
    store: InMemoryHistoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.append("s", _chat())
    assert await store.pin("s", ["group_u1", "group_u1"]) == ["group_u1"]
    assert await store.pin("s", ["group_u1"]) == []

    def changes(summary_id: str) -> ChangeSet:
        summary = Message.text_message("assistant", "sum", message_id=summary_id)
        return ChangeSet(
            exclusions=(Exclusion("group_u1", "x"),),
            summaries=(SummaryInsert(summary, ("group_u1", "group_a1", "group_a2")),),
            strategy="fixed",
        )

    with caplog.at_level(logging.WARNING, logger="chatledger.store"):
        event = await store.compact("s", Fixed(changes("sum1")))
    assert event is not None and event.summarized == {"group_sum1": ("group_a1", "group_a2")}
    assert "u1" in await _ids(store)
    assert "pinned" in caplog.text
    assert await store.unpin("s", ["group_u1"]) == ["group_u1"]
    again = await store.compact("s", Fixed(changes("sum2")))
    assert again is not None and again.summarized == {"group_sum2": ("group_u1",)}
    assert not again.excluded  # summarized first, so the exclusion finds it gone
    with pytest.raises(InvalidInput):
        await store.pin("s", ["group_missing"])


async def test_applied_events_are_logged(
    store: InMemoryHistoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.append("s", _chat())
    with caplog.at_level(logging.INFO, logger="chatledger.store"):
        event = await store.compact("s", ExcludeOldest(1))
    assert event is not None
    record = next(r for r in caplog.records if event.id in r.getMessage())
    text = record.getMessage()
    assert f"messages {event.messages_before} -> {event.messages_after}" in text
    assert f"tokens {event.tokens_before} -> {event.tokens_after}" in text


async def test_summary_id_already_stored_gets_a_fresh_id(store: InMemoryHistoryStore) -> None:
    await store.append("s", _chat())
    taken = Message.text_message("assistant", "sum", message_id="a3")
    changes = ChangeSet(summaries=(SummaryInsert(taken, ("group_u1", "group_a1")),))
    event = await store.compact("s", Fixed(changes))
    assert event is not None
    stored = {m.message.message_id: m for m in await store.history("s", include_excluded=True)}
    [fresh] = [m for m in stored.values() if m.message.message_id.startswith("a3@")]
    # stored under "<planned id>@<its seq>", its group following; the original untouched
    assert fresh.message.message_id == f"a3@{fresh.seq}"
    assert event.summarized == {f"group_a3@{fresh.seq}": ("group_u1", "group_a1")}
    assert stored["a3"].message.text != "sum" and fresh.message.text == "sum"


async def test_audit_filters(store: InMemoryHistoryStore) -> None:
    await store.append("s", _chat())
    await store.append("t", _chat("t"))
    first = await store.compact("s", ExcludeOldest(1), phase="after_run")
    second = await store.compact("s", ReduceResults())
    third = await store.compact("t", ExcludeOldest(1))
    assert first and second and third
    assert [e.id for e in await store.audit("s")] == [second.id, first.id]
    assert {e.id for e in await store.audit()} == {first.id, second.id, third.id}
    assert [e.id for e in await store.audit(phase="after_run")] == [first.id]
    assert [e.id for e in await store.audit(strategy="reduce_results")] == [second.id]
    assert len(await store.audit(limit=1)) == 1
    assert [e.id for e in await store.audit("s", since=second.created_at)] == [second.id]


async def test_why_and_stats(store: InMemoryHistoryStore) -> None:
    chat = [*_chat()[:5], assistant("late", call("cx", "never_answered")), *_chat()[5:]]
    chat.append(tool("orphan", result("nobody", "?")))
    await store.append("s", chat)
    event = await store.compact("s", SummarizeOldest(2))
    assert event is not None
    summary_id = next(iter(event.summarized))
    why = await store.why("s", "u1")
    assert not why.in_context and why.reason == "summarized"
    assert why.summary_group_id == summary_id and why.event_id == event.id
    assert (await store.why("s", "a3")).in_context
    assert (await store.why("s", "late")).reason == "stale_pending_call"
    assert (await store.why("s", "orphan")).reason == "orphan_result"
    with pytest.raises(InvalidInput):
        await store.why("s", "missing")
    stats = await store.stats("s")
    view = await store.view("s")
    assert stats.stored_messages == len(chat) + 1
    assert (stats.active_messages, stats.active_groups, stats.active_tokens) == (
        view.message_count,
        view.group_count,
        view.token_count,
    )
    assert stats.excluded_messages == view.excluded.messages
    assert stats.events == 1


async def test_conflict_recomputes_once(store: InMemoryHistoryStore) -> None:
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


async def test_conflict_twice_gives_up_with_a_warning(
    store: InMemoryHistoryStore, caplog: pytest.LogCaptureFixture
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
    store: InMemoryHistoryStore,
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


async def test_appends_meanwhile_are_never_excluded(store: InMemoryHistoryStore) -> None:
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


async def test_a_late_result_joins_its_excluded_call_group(store: InMemoryHistoryStore) -> None:
    await store.append("s", [user("u1", "a"), assistant("a1", call("c1", "f")), user("u2", "b")])
    event = await store.compact("s", ExcludeOldest(2))
    assert event is not None and event.excluded == ("group_u1", "group_a1")
    await store.append("s", [tool("t1", result("c1", "late"))])
    late = next(m for m in await store.history("s", include_excluded=True) if m.message_id == "t1")
    assert late.group_id == "group_a1" and late.excluded and late.excluded_event_id == event.id
    assert [m.message_id for m in await store.context("s")] == ["u2"]
    assert (await store.why("s", "t1")).reason == "test_excluded"
