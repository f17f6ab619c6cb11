"""What the in-memory store and the store limits refuse when they are built."""

from __future__ import annotations

import pytest

from store.errors import InvalidInput
from store.memory import InMemoryHistoryStore
from store.rules.limits import Limits
from strategies.tokenizers import CharacterEstimatorTokenizer, CountingTokenizer
from tests.groups.conversations import user


def test_a_database_url_is_not_a_memory_database() -> None:
    with pytest.raises(InvalidInput, match=r"takes a MemoryDatabase .*got str.*HistoryStore\.open"):
        InMemoryHistoryStore("sqlite:///chat.db")  # type: ignore[arg-type]


def test_limits_must_be_a_limits() -> None:
    with pytest.raises(InvalidInput, match="limits must be a Limits, got int"):
        InMemoryHistoryStore(limits=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options", [{"max_json_depth": 0}, {"max_json_depth": 129}, {"max_int_digits": 4001}]
)
def test_limits_refuse_json_bounds_out_of_range(options: dict[str, int]) -> None:
    with pytest.raises(InvalidInput, match="max_json_depth must be 1 to 128, max_int_digits 1"):
        Limits(**options)


async def test_limits_within_range_are_kept() -> None:
    store = InMemoryHistoryStore(limits=Limits(max_json_depth=3))
    with pytest.raises(InvalidInput, match="nested deeper than 3 levels"):
        await store.set_metadata("s", {"a": {"b": {"c": 1}}})
    await store.set_metadata("s", {"a": {"b": 1}})
    assert await store.get_metadata("s") == {"a": {"b": 1}}


async def test_deleting_a_session_forgets_its_pending_counts() -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    store = InMemoryHistoryStore(tokenizer=counting)
    pending = [user("u1", "first"), user("u2", "second")]
    await store.append("s", [user("u0", "start")])
    await store.context("s", pending=pending)
    await store.delete_session("s")
    counting.reset()
    await store.append("s", pending)
    assert counting.calls == len(pending)  # counted afresh: the cached counts went with "s"
