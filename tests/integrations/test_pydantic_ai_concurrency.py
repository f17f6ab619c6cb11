"""Concurrent writes of one Pydantic AI conversation through two store objects on one
SQLite file: an update of the title or metadata is checked and written over the record
it read, so of two titling updates one conflicts, and updates of different fields, or an
update and a save, all land (issue #40 review, finding 2)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from store import HistoryStore
from store.integrations.pydantic_ai import ChatledgerConversationStore

ROUNDS = 8
AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _turn(text: str) -> list[ModelRequest | ModelResponse]:
    return [
        ModelRequest(parts=[UserPromptPart(text, timestamp=AT)], timestamp=AT),
        ModelResponse(parts=[TextPart(f"re: {text}")], timestamp=AT),
    ]


@pytest.fixture
async def backends(tmp_path: Path) -> AsyncIterator[tuple[HistoryStore, HistoryStore]]:
    """Two store objects over one SQLite file."""
    url = f"sqlite:///{tmp_path / 'race.db'}"
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(HistoryStore.open(url))
        second = await stack.enter_async_context(HistoryStore.open(url))
        yield first, second


@pytest.fixture
def two(backends: tuple[HistoryStore, HistoryStore]) -> tuple[ChatledgerConversationStore, ...]:
    """A conversation store on each store object."""
    return tuple(ChatledgerConversationStore(backend) for backend in backends)


async def test_two_titling_updates_at_once_let_one_win(
    two: tuple[ChatledgerConversationStore, ...],
) -> None:
    a, b = two
    for n in range(ROUNDS):
        cid = f"c{n}"
        await a.save(Conversation(conversation_id=cid, messages=_turn("hi")))
        outcomes = await asyncio.gather(
            a.update(cid, title="from a", expected_title=None),
            b.update(cid, title="from b", expected_title=None),
            return_exceptions=True,
        )
        won = [o for o in outcomes if not isinstance(o, BaseException)]
        lost = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(won) == 1 and all(isinstance(o, ConversationConflict) for o in lost), outcomes
        record = await b.read_record(cid)
        assert record is not None and record.title == won[0].title


async def test_updates_of_title_and_metadata_at_once_both_land(
    two: tuple[ChatledgerConversationStore, ...],
) -> None:
    a, b = two
    for n in range(ROUNDS):
        cid = f"c{n}"
        await a.save(Conversation(conversation_id=cid, messages=_turn("hi")))
        await asyncio.gather(a.update(cid, title=f"t{n}"), b.update(cid, metadata={"n": n}))
        record = await a.read_record(cid)
        assert record is not None and (record.title, record.metadata) == (f"t{n}", {"n": n})


async def test_a_save_and_an_update_at_once_both_land(
    two: tuple[ChatledgerConversationStore, ...],
) -> None:
    a, b = two
    for n in range(ROUNDS):
        cid = f"c{n}"
        await a.save(Conversation(conversation_id=cid, messages=_turn("hi")))
        loaded = await a.load(cid)
        assert loaded is not None
        longer = Conversation(
            conversation_id=cid,
            messages=[*loaded.messages, *_turn("more")],
            revision=loaded.revision,
        )
        await asyncio.gather(a.save(longer), b.update(cid, title=f"t{n}", metadata={"n": n}))
        record = await b.read_record(cid)
        assert record is not None and (record.title, record.metadata) == (f"t{n}", {"n": n})
        again = await b.load(cid)
        assert again is not None and again.messages == longer.messages
        moved = await asyncio.gather(
            a.branch(cid, at=2, expected_revision=again.revision),
            b.update(cid, metadata={"n": -n}),
        )
        assert moved[0].messages == longer.messages[:2]
        record = await a.read_record(cid)
        assert record is not None and (record.title, record.metadata) == (f"t{n}", {"n": -n})
        assert record.revision == moved[0].revision


class _Paused(ChatledgerConversationStore):
    """Runs ``between`` once, right after the next read of the stored record made by a
    write (``write_record``, ``write_details``): a write by someone else between a
    write's read and its write, every time."""

    between: Callable[[], Awaitable[object]] | None = None
    _writing = False

    async def _stored(self, conversation_id: str) -> Any:
        found = await super()._stored(conversation_id)
        between = self.between if self._writing else None
        if between is not None:
            self.between = None
            await between()
        return found

    async def write_record(self, *args: Any, **kwargs: Any) -> None:
        self._writing = True
        try:
            await super().write_record(*args, **kwargs)
        finally:
            self._writing = False

    async def write_details(self, *args: Any, **kwargs: Any) -> Any:
        self._writing = True
        try:
            return await super().write_details(*args, **kwargs)
        finally:
            self._writing = False


@pytest.mark.parametrize("move", [False, True])
async def test_a_save_never_writes_back_details_read_before_an_update(
    backends: tuple[HistoryStore, HistoryStore], move: bool
) -> None:
    a, b = (ChatledgerConversationStore(backend) for backend in backends)
    paused = _Paused(backends[0])
    await paused.save(Conversation(conversation_id="c", messages=_turn("hi")))
    loaded = await paused.load("c")
    assert loaded is not None
    kept = loaded.messages[:1] if move else loaded.messages
    later = Conversation(
        conversation_id="c", messages=[*kept, *_turn("more")], revision=loaded.revision
    )
    paused.between = lambda: b.update("c", title="set meanwhile", metadata={"k": 1})
    await paused.save(later)
    record = await a.read_record("c")
    assert record is not None and (record.title, record.metadata) == ("set meanwhile", {"k": 1})
    again = await a.load("c")
    assert again is not None and again.messages == later.messages


async def test_an_update_checks_the_title_it_writes_over(
    backends: tuple[HistoryStore, HistoryStore],
) -> None:
    a, b = (ChatledgerConversationStore(backend) for backend in backends)
    paused = _Paused(backends[0])
    await paused.save(Conversation(conversation_id="c", messages=_turn("hi")))
    paused.between = lambda: b.update("c", title="set meanwhile")
    with pytest.raises(ConversationConflict):
        await paused.update("c", title="agent's title", expected_title=None)
    record = await a.read_record("c")
    assert record is not None and record.title == "set meanwhile"
