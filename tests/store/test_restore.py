"""Restore and pin on the SQL store; the in-memory store's restore tests run here too."""

from __future__ import annotations

import pytest

from store import HistoryStore
from store.errors import InvalidInput, SessionNotFound
from store.memory import InMemoryHistoryStore
from tests.conformance.toy_strategies import (
    TOKENIZER,
    ExcludeOldest,
    ReduceResults,
    SummarizeOldest,
)
from tests.memory.test_restore import (  # noqa: F401  (collected here, run on SQL)
    _chat,
    chat_store,
    test_every_restore_is_audited,
    test_nested_summaries_restore_up_the_chain,
    test_restore_arguments_are_checked,
    test_restore_event_undoes_exclusions_summaries_and_reductions,
    test_restore_groups_reincludes_and_pins,
    test_restoring_a_restore_brings_the_summary_back,
    test_restoring_one_group_restores_its_summary_siblings,
    test_undoing_a_restore_of_nested_summaries_hides_what_they_replaced,
)
from tests.store.parity import observed


async def test_restores_match_memory(store: HistoryStore) -> None:
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for target in (store, memory):
        await target.append("s", _chat())
        await target.compact("s", ReduceResults())
        await target.compact("s", SummarizeOldest(2))
        await target.compact("s", SummarizeOldest(2))  # nests the first summary
        await target.compact("s", ExcludeOldest(1))
    assert await observed(store, "s") == await observed(memory, "s")
    for index in (-1, 0):
        for target in (store, memory):
            excluded = await target.excluded("s")
            await target.restore("s", group_ids=[excluded[index].group_id])
        assert await observed(store, "s") == await observed(memory, "s")
    for target in (store, memory):
        oldest = (await target.audit("s"))[-1]
        await target.restore("s", event_id=oldest.id)
    assert await observed(store, "s") == await observed(memory, "s")


async def test_pin_and_unpin(store: HistoryStore) -> None:
    await store.append("s", _chat())
    first = (await store.view("s")).groups[1].group_id
    assert await store.pin("s", [first, first]) == [first]
    assert await store.pin("s", [first]) == []
    assert (await store.view("s")).groups[1].pinned
    event = await store.compact("s", ExcludeOldest(1))
    assert event is not None and first not in event.excluded
    assert await store.unpin("s", [first]) == [first]
    with pytest.raises(InvalidInput):
        await store.pin("s", ["nope"])
    with pytest.raises(SessionNotFound):
        await store.pin("missing", [first])
    with pytest.raises(InvalidInput):
        await store.restore("s", event_id="evt_unknown")
