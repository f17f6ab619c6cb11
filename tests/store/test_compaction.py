"""Compaction on write on the SQL store (SQLite and PostgreSQL).

The in-memory store's compaction tests run here unchanged against the SQL store (the
two must behave the same), plus checks of what only SQL has: rows and aggregates.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from sqlalchemy import Table, select

from store import HistoryStore
from store.memory import InMemoryHistoryStore
from store.sql.schema import EVENT_GROUPS, MESSAGES, SESSIONS
from strategies.changeset import ChangeSet, Exclusion
from tests.conformance.toy_strategies import (
    TOKENIZER,
    ExcludeOldest,
    Fixed,
    ReduceResults,
    SummarizeOldest,
)
from tests.groups.conversations import assistant, call, result, tool, user
from tests.memory.test_compaction import (  # noqa: F401  (collected here, run on SQL)
    Interfering,
    _chat,
    test_a_group_pinned_and_unpinned_meanwhile_is_unchanged,
    test_a_late_result_joins_its_excluded_call_group,
    test_appends_meanwhile_are_never_excluded,
    test_applied_events_are_logged,
    test_audit_filters,
    test_conflict_recomputes_once,
    test_empty_change_set_and_dry_run,
    test_exclusion_event_counts_and_projection,
    test_pinned_groups_are_never_excluded,
    test_reductions_overlay_and_keep_original,
    test_summary_id_already_stored_gets_a_fresh_id,
    test_summary_takes_anchor_and_next_slot,
    test_unknown_and_stale_parts_are_skipped,
    test_why_and_stats,
)
from tests.memory.test_with_strategies import (  # noqa: F401
    test_slow_summarizer_never_excludes_concurrent_appends,
    test_truncation_applies_what_the_view_would,
)
from tests.store.parity import observed

LINKS = EVENT_GROUPS


async def _rows(store: HistoryStore, table: Table) -> list[dict[str, Any]]:
    query = select(table).where(table.c.tenant == store.tenant)
    async with store.engine.connect() as conn:
        return [dict(r) for r in (await conn.execute(query)).mappings()]


@pytest.mark.parametrize("memory", [False, True])
async def test_conflict_twice_gives_up_with_a_warning(
    store: HistoryStore, memory: bool, caplog: pytest.LogCaptureFixture
) -> None:
    target: HistoryStore | InMemoryHistoryStore = (
        InMemoryHistoryStore(tokenizer=TOKENIZER) if memory else store
    )
    await target.append("s", _chat())

    async def exclude_it_first() -> None:
        # a concurrent compaction excludes the very group the plan excludes
        await target.compact("s", ExcludeOldest(1))

    strategy = Interfering(ExcludeOldest(1), exclude_it_first)
    with caplog.at_level(logging.WARNING, logger="chatledger.store"):
        event = await target.compact("s", strategy)
    assert event is not None and event.outcome == "abandoned" and strategy.plans == 2
    assert "abandoned" in caplog.text
    # the two concurrent compactions, and the abandoned one
    assert [e.outcome for e in await target.audit("s")] == ["abandoned", "applied", "applied"]


STEPS: list[Any] = [
    ("append", _chat()),
    ("compact", ReduceResults()),
    ("compact", SummarizeOldest(2)),
    ("append", [user("u4", "more"), assistant("a4", call("c9", "lookup"))]),
    ("compact", ExcludeOldest(2)),
    ("append", [tool("t9", result("c9", "found it"))]),
    ("restore_last", None),
    ("pin", 0),
    ("compact", SummarizeOldest(3)),
    ("unpin", 0),
    ("compact", ExcludeOldest(1)),
    ("restore_first", None),
]


async def _step(target: HistoryStore | InMemoryHistoryStore, step: tuple[str, Any]) -> None:
    action, arg = step
    if action == "append":
        await target.append("s", arg)
    elif action == "compact":
        await target.compact("s", arg)
    elif action in ("restore_last", "restore_first"):
        events = await target.audit("s")
        event = events[0] if action == "restore_last" else events[-1]
        await target.restore("s", event_id=event.id)
    else:
        group = (await target.view("s")).groups[arg].group_id
        await (target.pin if action == "pin" else target.unpin)("s", [group])


async def test_same_outcome_as_the_memory_store_step_by_step(store: HistoryStore) -> None:
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for step in STEPS:
        await _step(store, step)
        await _step(memory, step)
        assert await observed(store, "s") == await observed(memory, "s"), step


async def test_rows_and_aggregates_stay_consistent(store: HistoryStore) -> None:
    for step in STEPS:
        await _step(store, step)
        groups = {g.group_id: g for g in (await store.view("s")).groups}
        messages = await _rows(store, MESSAGES)
        for row in messages:  # a message carries its group's state
            assert (row["group_id"] in groups) == (not row["excluded"]), (step, row["message_id"])
        (session,) = await _rows(store, SESSIONS)
        active = [r for r in messages if not r["excluded"]]
        assert session["stored_messages"] == len(messages)
        assert session["stored_tokens"] == sum(r["token_count"] for r in messages)
        assert session["active_messages"] == len(active)
        assert session["active_groups"] == len(groups)
        effective = [r["reduced_token_count"] or r["token_count"] for r in active]
        assert (
            session["active_tokens"]
            == sum(effective)
            == sum(g.token_count for g in groups.values())
        )
        assert session["event_count"] == len(await store.audit("s"))


async def test_events_link_to_their_groups(store: HistoryStore) -> None:
    await store.append("s", _chat())
    summary = await store.compact("s", SummarizeOldest(2))
    excluded = await store.compact("s", ExcludeOldest(1))
    assert summary is not None and excluded is not None
    links = {(r["event_id"], r["group_id"], r["action"]) for r in await _rows(store, LINKS)}
    (summary_group, replaced) = next(iter(summary.summarized.items()))
    assert (summary.id, summary_group, "summary_inserted") in links
    assert {(summary.id, g, "summarized") for g in replaced} <= links
    assert {(excluded.id, g, "excluded") for g in excluded.excluded} <= links


async def test_a_plan_made_before_a_restore_is_planned_again(store: HistoryStore) -> None:
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
    strategy = Interfering(cast(Any, fixed), restore_once)
    event = await store.compact("s", strategy)
    # the first plan was made while the group was excluded: planned again on the new view
    assert strategy.plans == 2 and event is not None and event.excluded == (group,)
