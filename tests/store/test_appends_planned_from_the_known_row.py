"""An append planned from the session row a view last read, without reading it again.

After a view (``context``, a compaction's snapshot) read the session row, this store's
next append to the session is planned from that row, as if the read before it had found
none of the messages' ids stored and none of the calls they name open or answered early,
and sent as one statement whose gate checks all of that. Where it does not hold, the
statement writes nothing, and the append reads and is planned again: what is stored is
what an append that read first stores. Each case here counts the exchanges, so that the
statement planned without the read is known to have been sent first.
"""

from __future__ import annotations

import pytest

from store import HistoryStore
from store.errors import InvalidInput
from strategies.groups import annotate
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.groups.conversations import assistant, call, result, tool, user
from tests.store.test_round_trips import _counting, sent_statements

pytestmark = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)]
)

_WRITE = "bind_execute: WITH written_session"
_READ = "bind_execute: SELECT"


async def _appended(store: HistoryStore, batch: list[Message]) -> list[str]:
    """The exchanges of an append of ``batch`` to ``s`` after a view of ``s``."""
    await store.context("s")  # the view reads the session row the append plans from
    with _counting(store) as seen:
        await store.append("s", batch)
    return _sent(seen)


def _sent(seen: list[str]) -> list[str]:
    """The statements of ``seen``, a write or a read named as such."""
    return [
        _WRITE if e.startswith(_WRITE) else _READ if e.startswith(_READ) else e
        for e in sent_statements(seen)
    ]


async def _grouped_as_one_batch(db_url: str, messages: list[Message]) -> None:
    """The stored groups are those of annotating every message at once, and the
    session's records check out."""
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as fresh:
        stored = await fresh.history("s")
        assert [m.message_id for m in stored] == [m.message_id for m in messages]
        expected = [group for _, group in annotate(messages).message_groups]
        assert [m.group_id for m in stored] == expected
        assert (await fresh.doctor("s")).findings == ()


async def test_an_append_after_a_view_is_one_statement(db_url: str) -> None:
    first = [user("u1", "hi"), assistant("a1", "hello")]
    second = [user("u2", "and?"), assistant("a2", call("c1", "f")), tool("t1", result("c1", "1"))]
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append("warm", first)  # its statements prepared
        await store.append("s", first)
        assert await _appended(store, second) == [_WRITE]
    await _grouped_as_one_batch(db_url, first + second)


async def test_stored_ids_are_read_and_skipped(db_url: str) -> None:
    first = [user("u1", "hi"), assistant("a1", "hello")]
    again = [*first, user("u2", "more"), assistant("a2", "yes")]  # a harness resends all
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append("s", first)
        exchanges = await _appended(store, again)
        # the statement planned from the row found stored ids and wrote nothing; the read
        # found them, and the statement planned from it stores the two new ones
        assert exchanges == [_WRITE, _READ, _WRITE], exchanges
        await store.context("s")
        with pytest.raises(InvalidInput):  # a stored id with other content: refused
            await store.append("s", [user("u1", "changed"), user("u3", "new")])
    await _grouped_as_one_batch(db_url, again)


async def test_a_result_of_a_call_stored_open_joins_its_group(db_url: str) -> None:
    first = [user("u1", "hi"), assistant("a1", call("c1", "f")), user("u2", "still there?")]
    second = [tool("t1", result("c1", "one")), assistant("a2", "done")]
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append("s", first)
        exchanges = await _appended(store, second)
        # an open call named (the tail closed by the user's message): the statement
        # planned from the row writes nothing; the read finds the call, its group is
        # read, and the result joins it
        assert exchanges == [_WRITE, _READ, _READ, _WRITE], exchanges
    await _grouped_as_one_batch(db_url, first + second)


async def test_an_open_tail_is_read_first(db_url: str) -> None:
    first = [user("u1", "hi"), assistant("a1", call("c1", "f"), call("c2", "g"))]
    second = [tool("t1", result("c1", "one")), tool("t2", result("c2", "two"))]
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append("s", first)
        exchanges = await _appended(store, second)
        # the calls' group is the session's tail: the annotation needs it, so the
        # append reads first (nothing is sent before the read)
        assert exchanges == [_READ, _READ, _WRITE], exchanges
    await _grouped_as_one_batch(db_url, first + second)


async def test_a_call_whose_result_came_first_joins_its_group(db_url: str) -> None:
    first = [user("u1", "hi"), tool("t9", result("c9", "early"))]
    second = [assistant("a9", call("c9", "h")), user("u2", "bye")]
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append("s", first)
        exchanges = await _appended(store, second)
        # the result answered early is named: the statement planned from the row writes
        # nothing; the read finds it and its group, which the call joins: a merge of a
        # stored group, which the transactional append writes
        assert exchanges[:3] == [_WRITE, _READ, _READ], exchanges
        assert exchanges[3].startswith("query: BEGIN"), exchanges
    await _grouped_as_one_batch(db_url, first + second)


async def test_an_append_after_another_writers_lands_after_it(db_url: str) -> None:
    first = [user("u1", "hi"), assistant("a1", "hello")]
    theirs = [user("o1", "other"), assistant("o2", "writer")]
    mine = [user("u2", "mine"), assistant("a2", "too")]
    tokenizer = CharacterEstimatorTokenizer()
    async with (
        HistoryStore.open(db_url, tokenizer=tokenizer) as store,
        HistoryStore.open(db_url, tokenizer=tokenizer) as other,
    ):
        await store.append("s", first)
        await store.context("s")
        await other.append("s", theirs)  # the row this store read is one revision behind
        with _counting(store) as seen:
            await store.append("s", mine)
        # the statement planned from the row this store read lands after the other's
        # append (it names no stored call, adds only its own groups)
        assert _sent(seen) == [_WRITE], seen
        context = [m.message_id for m in await store.context("s")]
    assert context == ["u1", "a1", "o1", "o2", "u2", "a2"]
    await _grouped_as_one_batch(db_url, first + theirs + mine)
