"""Appends that land after another writer's, in one statement (PostgreSQL).

Two stores write one session. The second plans its append, then the first appends
before the second's statement runs (a stand-in for ``plan_append`` makes the first
write at that moment, every time, without timing). Where the second append adds groups
of its own only, its statement lands after the first's and moves its rows by what the
first added (``seq``, positions, turns); where the other writer left something the
append would read differently (an open tail, a call of the same id), it is written by
the transactional append instead. Either way the session must be what one writer
appending the same messages in the stored order makes: the oracle is a second session
written that way, compared row by row.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import text

import store.sql.append.one_statement as one_statement
import store.sql.store as store_module
from store import HistoryStore
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.groups.support import assistant, call, reasoning, result, system, tool, user

pytestmark = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)]
)

_GROUP_COLUMNS = (
    "group_id, kind, turn, anchor, slot, first_seq, first_position, message_count, "
    "token_count, has_reasoning, pending_calls, orphan, excluded"
)
_MESSAGE_COLUMNS = "seq, anchor, slot, message_id, group_id, group_kind, token_count, excluded"
_SESSION_COLUMNS = (
    "next_seq, position, turn, tail_group_id, tail_mode, stored_messages, stored_groups, "
    "stored_tokens, active_messages, active_groups, active_tokens"
)


def _turn(prefix: str) -> list[Message]:
    return [user(f"{prefix}u", "hello"), assistant(f"{prefix}a", "hi there")]


def _tool_turn(prefix: str) -> list[Message]:
    return [
        user(f"{prefix}u", "weather?"),
        assistant(f"{prefix}c", call(f"{prefix}k", "weather")),
        tool(f"{prefix}t", result(f"{prefix}k", "sunny")),
        assistant(f"{prefix}a", "It is sunny."),
    ]


@contextmanager
def _first_writes_meanwhile(
    write: Callable[[], Awaitable[Any]],
) -> Iterator[None]:
    """While active, the other writer's ``write`` runs once, between the next append's
    reads and its one statement."""
    planned = one_statement.plan_append
    pending = [write]

    async def plan_then_let_the_other_write(*args: Any, **kwargs: Any) -> Any:
        plan = await planned(*args, **kwargs)
        if pending:
            await pending.pop()()
        return plan

    one_statement.plan_append = plan_then_let_the_other_write  # type: ignore[assignment]
    try:
        yield
    finally:
        one_statement.plan_append = planned


async def _rows(store: HistoryStore, session_id: str) -> dict[str, Any]:
    async with store.engine.connect() as conn:
        params = {"s": session_id}
        groups = await conn.execute(
            text(
                f"SELECT {_GROUP_COLUMNS} FROM chatledger_groups WHERE session_id = :s "
                "ORDER BY anchor, slot"
            ),
            params,
        )
        messages = await conn.execute(
            text(
                f"SELECT {_MESSAGE_COLUMNS} FROM chatledger_messages WHERE session_id = :s "
                "ORDER BY seq"
            ),
            params,
        )
        session = await conn.execute(
            text(f"SELECT {_SESSION_COLUMNS} FROM chatledger_sessions WHERE session_id = :s"),
            params,
        )
        calls = await conn.execute(
            text(
                "SELECT call_id, group_id, ambiguous FROM chatledger_open_calls "
                "WHERE session_id = :s ORDER BY call_id"
            ),
            params,
        )
        return {
            "groups": [tuple(r) for r in groups],
            "messages": [tuple(r) for r in messages],
            "session": tuple(session.one()),
            "calls": [tuple(r) for r in calls],
        }


async def _as_one_writer(store: HistoryStore, shared: dict[str, Any]) -> None:
    """Session ``serial`` appended by one writer, batch by batch, in the order the
    messages of ``shared`` were stored (each batch: the messages one append stored)."""
    history = await store.history("s", include_excluded=True)
    batches: list[list[Message]] = []
    previous = None
    for stored in history:
        batch = stored.message.message_id[:2]  # the test's ids: a two-letter batch prefix
        if batch != previous:
            batches.append([])
            previous = batch
        batches[-1].append(stored.message)
    for messages in batches:
        await store.append("serial", messages)
    serial = await _rows(store, "serial")
    for part in ("groups", "messages", "session", "calls"):
        assert serial[part] == shared[part], part
    # what the doctor finds (a result whose call id was declared twice) is the messages'
    found = [(f.check, f.group_id) for f in (await store.doctor("s")).findings]
    assert found == [(f.check, f.group_id) for f in (await store.doctor("serial")).findings]


async def _outcome(
    first: HistoryStore, second: HistoryStore, before: Sequence[Message], after: Sequence[Message]
) -> str:
    """Append ``after`` by ``second`` while ``first`` appends ``before`` meanwhile: how
    the second's append was written (``"landed after"`` in one statement after the
    first's, ``"as read"`` in one statement, ``"locked"`` by the transactional append)."""
    found: list[Any] = []
    through = store_module.append_in_one_statement

    async def noted(*args: Any, **kwargs: Any) -> Any:
        appended = await through(*args, **kwargs)
        found.append(appended)
        return appended

    store_module.append_in_one_statement = noted  # type: ignore[assignment]
    try:
        with _first_writes_meanwhile(lambda: first.append("s", list(before))):
            await second.append("s", list(after))
    finally:
        store_module.append_in_one_statement = through
    first_append, appended = found  # the first's, made while the second's ran, ends first
    assert first_append is not None  # in one statement (after the second's last, or as read)
    if appended is None:
        return "locked"
    return "landed after" if appended.before is None else "as read"


def _open(db_url: str) -> Any:
    return HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer())


@pytest.mark.parametrize("shape", [_turn, _tool_turn], ids=["plain", "tools"])
async def test_an_append_lands_after_another_writers_in_one_statement(
    db_url: str, shape: Callable[[str], list[Message]]
) -> None:
    async with _open(db_url) as first, _open(db_url) as second:
        await first.append("s", [system("s0sys", "be brief"), *shape("a0")])
        await second.context("s")  # each store holds the session's view
        await first.context("s")
        for n in range(1, 4):
            outcome = await _outcome(first, second, shape(f"a{n}"), shape(f"b{n}"))
            assert outcome == "landed after"
        shared = await _rows(first, "s")
        assert (await first.doctor("s")).findings == ()
        # each store's view caught up with the other's appends
        fresh = [m.message_id for m in await first.context("s")]
        assert [m.message_id for m in await second.context("s")] == fresh
        await _as_one_writer(first, shared)


_READ_UNDER_THE_LOCK = {
    # the first leaves the tail open (reasoning alone): the answer joins its group
    "open tail": (
        [user("a1u", "think"), assistant("a1r", reasoning("hmm"))],
        [assistant("b1a", "answer")],
    ),
    # the first leaves call "k" open; the second's append declares "k" and answers it
    "same call id": (
        [user("a1u", "look"), assistant("a1c", call("k", "lookup"))],
        [
            assistant("b1c", call("k", "lookup")),
            tool("b1t", result("k", "found")),
            assistant("b1a", "done"),
        ],
    ),
    # planned as an early result (no call "k" stored); the first then stores "k"
    "call stored meanwhile": (
        [user("a1u", "look"), assistant("a1c", call("k", "lookup"))],
        [tool("b1t", result("k", "found"))],
    ),
}


@pytest.mark.parametrize("case", list(_READ_UNDER_THE_LOCK))
async def test_what_the_other_writer_left_that_annotation_reads_is_read_under_the_lock(
    db_url: str, case: str
) -> None:
    before, after = _READ_UNDER_THE_LOCK[case]
    async with _open(db_url) as first, _open(db_url) as second:
        await first.append("s", [system("s0sys", "be brief"), *_turn("a0")])
        assert await _outcome(first, second, before, after) == "locked"
        await _as_one_writer(first, await _rows(first, "s"))
