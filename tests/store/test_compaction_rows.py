"""Compaction write-back in the SQL rows: message state, session aggregates, event links.

The behaviour every backend shares is in ``tests/conformance/test_compaction.py``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, select

from store import HistoryStore
from store.memory import InMemoryHistoryStore
from store.sql.schema import EVENT_GROUPS, MESSAGES, SESSIONS
from tests.conformance.test_compaction import _chat
from tests.conformance.toy_strategies import (
    ExcludeOldest,
    ReduceResults,
    SummarizeOldest,
)
from tests.groups.conversations import assistant, call, result, tool, user

LINKS = EVENT_GROUPS


async def _rows(store: HistoryStore, table: Table) -> list[dict[str, Any]]:
    query = select(table).where(table.c.tenant == store.tenant)
    async with store.engine.connect() as conn:
        return [dict(r) for r in (await conn.execute(query)).mappings()]


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
