"""Compaction on write: exclusions, summaries, reductions, their events and the projection."""

from __future__ import annotations

import logging

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput
from strategies.changeset import ChangeSet, Exclusion, SummaryInsert
from strategies.messages import Message
from strategies.view import GroupView
from tests.conformance.toy_strategies import (
    ExcludeOldest,
    Fixed,
    ReduceResults,
    SummarizeOldest,
)
from tests.groups.conversations import assistant, call, result, system, tool, user


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


async def _ids(store: HistoryBackend, session: str = "s") -> list[str]:
    return [m.message_id for m in await store.context(session)]


async def test_exclusion_event_counts_and_projection(store: HistoryBackend) -> None:
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


async def test_summary_takes_anchor_and_next_slot(store: HistoryBackend) -> None:
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


async def test_reductions_overlay_and_keep_original(store: HistoryBackend) -> None:
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


async def test_empty_change_set_and_dry_run(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    assert await store.compact("s", Fixed(ChangeSet())) is None
    planned = await store.compact("s", ExcludeOldest(1), dry_run=True)
    assert isinstance(planned, ChangeSet) and planned.exclusions
    assert await store.audit("s") == [] and (await store.excluded("s")) == []
    with pytest.raises(InvalidInput):
        await store.compact("s", ExcludeOldest(1), phase="sometime")  # type: ignore[call-overload]


async def test_unknown_and_stale_parts_are_skipped(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    changes = ChangeSet(
        exclusions=(Exclusion("group_nope", "x"), Exclusion("group_u1", "x")),
        strategy="fixed",
    )
    event = await store.compact("s", Fixed(changes))
    assert event is not None and event.excluded == ("group_u1",)
    assert await store.compact("s", Fixed(changes)) is None  # already excluded: no event


async def test_pinned_groups_are_never_excluded(
    store: HistoryBackend, caplog: pytest.LogCaptureFixture
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
    store: HistoryBackend, caplog: pytest.LogCaptureFixture
) -> None:
    await store.append("s", _chat())
    with caplog.at_level(logging.INFO, logger="chatledger.store"):
        event = await store.compact("s", ExcludeOldest(1))
    assert event is not None
    record = next(r for r in caplog.records if event.id in r.getMessage())
    text = record.getMessage()
    assert f"messages {event.messages_before} -> {event.messages_after}" in text
    assert f"tokens {event.tokens_before} -> {event.tokens_after}" in text


async def test_summary_id_already_stored_gets_a_fresh_id(store: HistoryBackend) -> None:
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


async def test_a_late_result_joins_its_excluded_call_group(store: HistoryBackend) -> None:
    await store.append("s", [user("u1", "a"), assistant("a1", call("c1", "f")), user("u2", "b")])
    event = await store.compact("s", ExcludeOldest(2))
    assert event is not None and event.excluded == ("group_u1", "group_a1")
    await store.append("s", [tool("t1", result("c1", "late"))])
    late = next(m for m in await store.history("s", include_excluded=True) if m.message_id == "t1")
    assert late.group_id == "group_a1" and late.excluded and late.excluded_event_id == event.id
    assert [m.message_id for m in await store.context("s")] == ["u2"]
    assert (await store.why("s", "t1")).reason == "test_excluded"


def _compact_early_result(summary: bool) -> Fixed:
    if summary:
        return Fixed(ChangeSet(summaries=(SummaryInsert(user("sum", "gist"), ("group_t1",)),)))
    return Fixed(ChangeSet(exclusions=(Exclusion("group_t1", "test"),)))


@pytest.mark.parametrize("summary", [False, True], ids=["excluded", "summarized"])
async def test_a_call_whose_early_result_was_excluded_takes_the_next_result(
    store: HistoryBackend, summary: bool
) -> None:
    """A compacted early result joins nothing, so its call is pending as usual and the
    next result for its id answers it (docs/groups.md, rule 10): sent with the call,
    also while in flight."""
    await store.append("s", [user("u1", "a"), tool("t1", result("c1", "early")), user("u2", "b")])
    assert await store.compact("s", _compact_early_result(summary)) is not None
    await store.append("s", [assistant("a1", call("c1", "f")), user("u3", "c")])
    assert "a1" not in await _ids(store)  # a stale pending call
    again = tool("t2", result("c1", "again"))
    assert [m.message_id for m in await store.context("s", pending=[again])][-3:] == [
        "a1",
        "t2",
        "u3",
    ]
    await store.append("s", [again])
    assert (await _ids(store))[-3:] == ["a1", "t2", "u3"]
    group = await _second_result_joined_the_call(store)
    assert (group.message_count, group.pending_calls, group.orphan) == (2, 0, False)


async def _second_result_joined_the_call(store: HistoryBackend) -> GroupView:
    """The excluded early result ``t1`` kept its own group; the second result ``t2``
    joined the call ``a1``: that group, as the view has it."""
    stored = {m.message_id: m for m in await store.history("s", include_excluded=True)}
    assert stored["t1"].group_id == "group_t1" and stored["t1"].excluded
    assert stored["t2"].group_id == stored["a1"].group_id == "group_a1"
    view = await store.view("s")
    return next(g for g in view.groups if g.group_id == "group_a1")


async def test_a_second_result_beside_ambiguous_calls(store: HistoryBackend) -> None:
    """The example the random operations found: the call message also declares one id
    twice; those two calls stay pending (rule 7), so the group is not sent."""
    await store.append("s", [user("u1", "a"), tool("t1", result("c_a", "early")), user("u2", "b")])
    assert await store.compact("s", _compact_early_result(False)) is not None
    calls = assistant("a1", call("x", "f"), call("c_a", "f"), call("x", "f"))
    await store.append("s", [calls, user("u3", "c"), tool("t2", result("c_a", "again"))])
    group = await _second_result_joined_the_call(store)
    assert (group.message_count, group.pending_calls, group.orphan) == (2, 2, False)
    assert await _ids(store) == ["u1", "u2", "u3"]


async def test_a_call_id_declared_twice_in_one_message_is_ambiguous_for_an_early_result(
    store: HistoryBackend,
) -> None:
    """The early result joins neither call; the id stays ambiguous across appends."""
    await store.append("s", [user("u1", "a"), tool("t1", result("c1", "early"))])
    await store.append("s", [assistant("a1", call("c1", "f"), call("c1", "f"))])
    await store.append("s", [tool("t2", result("c1", "late")), assistant("a2", call("c1", "f"))])
    await store.append("s", [tool("t3", result("c1", "later"))])
    stored = {m.message_id: m.group_id for m in await store.history("s")}
    assert stored == {m: f"group_{m}" for m in ("u1", "t1", "a1", "t2", "a2", "t3")}
    view = {g.group_id: g for g in (await store.view("s")).groups}
    assert [view[f"group_{m}"].pending_calls for m in ("a1", "a2")] == [2, 1]
    assert all(view[f"group_{m}"].orphan for m in ("t1", "t2", "t3"))
