"""``Limits.max_append_messages``: an append of more messages is refused in one line that
points to ``chatledger import``, on every backend, before anything is written and
without reading an endless iterable to its end."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from store import HistoryStore, InMemoryHistoryStore
from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from store.rules.limits import DEFAULT_LIMITS, MAX_APPEND_MESSAGES, Limits
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conftest import PgServer

TOKENIZER = CharacterEstimatorTokenizer()
TIGHT = Limits(max_append_messages=3)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def tight_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[HistoryBackend]:
    """A fresh store of each backend that takes at most 3 messages an append."""
    if request.param == "memory":
        yield InMemoryHistoryStore(tokenizer=TOKENIZER, limits=TIGHT)
        return
    if request.param == "sqlite":
        async with HistoryStore.open(
            f"sqlite:///{tmp_path}/limit.db", tokenizer=TOKENIZER, limits=TIGHT
        ) as store:
            yield store
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = server.clone()
    try:
        async with HistoryStore.open(
            server.url_for(name), tokenizer=TOKENIZER, limits=TIGHT
        ) as store:
            yield store
    finally:
        server.drop_later(name)


def _messages(count: int | None) -> Iterator[Message]:
    numbers = itertools.count() if count is None else range(count)
    for index in numbers:
        yield Message.text_message("user", f"m{index}", message_id=f"m{index}")


async def test_an_append_up_to_the_limit_is_stored(tight_store: HistoryBackend) -> None:
    await tight_store.append("s", list(_messages(3)))
    assert len(await tight_store.history("s")) == 3


@pytest.mark.parametrize("count", [6, None], ids=["a few too many", "endless"])
async def test_a_larger_append_is_refused_in_one_line_pointing_to_import(
    tight_store: HistoryBackend, count: int | None
) -> None:
    given = _messages(count)
    with pytest.raises(InvalidInput) as refused:
        await tight_store.append("s", given)
    text = str(refused.value)
    assert "at most 3 messages" in text and "chatledger import" in text and "\n" not in text
    assert next(given).message_id == "m4"  # read no further than the first past the limit
    with pytest.raises(SessionNotFound):
        await tight_store.history("s")


def test_the_limit_is_configurable_within_its_bounds() -> None:
    assert DEFAULT_LIMITS.max_append_messages == 100_000
    assert Limits(max_append_messages=MAX_APPEND_MESSAGES).max_append_messages == 1_000_000
    for wrong in (0, MAX_APPEND_MESSAGES + 1):
        with pytest.raises(InvalidInput, match="max_append_messages must be 1 to 1,000,000"):
            Limits(max_append_messages=wrong)
