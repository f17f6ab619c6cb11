"""Importing Agent Framework's compacted history into the SQL store.

The in-memory store's import tests run here unchanged against the SQL store.
"""

from __future__ import annotations

import asyncio

from store import HistoryStore
from store.formats import from_agent_framework
from store.memory import InMemoryHistoryStore
from tests.conformance.toy_strategies import TOKENIZER
from tests.memory.test_import import (  # noqa: F401  (collected here, run on SQL)
    _reference_history,
    test_messages_without_annotations_are_appended,
    test_nested_summaries_by_group_and_back_link,
    test_plain_exclusions_exclude_whole_groups,
    test_reference_compaction_is_imported,
    test_unresolvable_summary_is_stored_as_a_message,
)
from tests.store.parity import observed


async def test_import_matches_memory_and_is_idempotent(store: HistoryStore) -> None:
    messages = from_agent_framework(await asyncio.to_thread(_reference_history))
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for target in (store, memory):
        result = await target.import_messages("s", messages)
        assert result.event is not None and result.event.strategy == "import:agent_framework"
        again = await target.import_messages("s", messages)
        assert again.event is None
    assert await observed(store, "s") == await observed(memory, "s")
    imported = await store.history("s", include_excluded=True)
    assert {m.source_system for m in imported} == {"agent_framework"}
