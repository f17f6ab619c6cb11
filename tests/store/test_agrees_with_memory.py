"""The SQL store against the in-memory model: the same scenario gives the same answers.

Each test runs one scenario on the SQL store and on an
:class:`~store.memory.InMemoryHistoryStore` and compares everything a user can see
(:func:`tests.store.parity.observed`). What every backend must do is stated once in
``tests/conformance/``; these scenarios check that the two agree on the paths where
their code differs most (write-back through the mirror, late results, nested restores).
"""

from __future__ import annotations

from typing import Any

import pytest

from store import HistoryStore
from store.memory import InMemoryHistoryStore
from tests.conformance.toy_strategies import TOKENIZER, ExcludeOldest
from tests.groups.conversations import assistant, call, reasoning, result, system, tool, user
from tests.store.parity import observed


def _merging_chat() -> list[Any]:
    return [
        system("sys", "be brief"),
        user("u1", "two lookups"),
        assistant("r1", reasoning("thinking")),
        assistant("a1", call("c1", "one")),
        assistant("a2", call("c2", "two")),
        user("u2", "next"),
        assistant("b1", "ok"),
    ]


@pytest.mark.parametrize(
    "late",
    [
        [tool("t12", result("c1", "r1"), result("c2", "r2"))],
        [tool("t1", result("c1", "r1")), tool("t2", result("c2", "r2"))],
    ],
)
async def test_pending_and_late_results_with_excluded_groups_match_memory(
    store: HistoryStore, late: list[Any]
) -> None:
    """Late results joining (and merging) excluded and active groups, as memory does."""
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for target in (store, memory):
        await target.append("s", _merging_chat())
        await target.compact("s", ExcludeOldest(2))
    assert await store.context("s", pending=late) == await memory.context("s", pending=late)
    for target in (store, memory):
        await target.append("s", late)
    assert await observed(store, "s") == await observed(memory, "s")
