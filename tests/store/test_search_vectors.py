"""PostgreSQL's search vectors live in a table beside the messages, kept in step by
triggers: every searchable row has exactly its vector there, through appends, moves
(rewind, deleting a fork's parent), redaction and deletion; and an update the index
does not care about (a compaction excluding rows) leaves the vectors' rows as they
were, which is why they are not in the messages' rows."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from store import HistoryStore
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conformance.toy_strategies import ExcludeOldest

pytestmark = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)]
)

_MIRRORED = text(
    "SELECT m.tenant, m.session_id, m.seq, "
    "to_tsvector('simple'::regconfig, m.search_text)::text "
    "FROM chatledger_messages m WHERE m.search_text IS NOT NULL ORDER BY 1, 2, 3"
)
_VECTORS = text(
    "SELECT tenant, session_id, seq, vector::text FROM chatledger_search_vectors ORDER BY 1, 2, 3"
)


async def _in_step(store: HistoryStore) -> int:
    """Assert the vectors' table holds each searchable row's vector and nothing else;
    the rows it holds."""
    async with store.engine.connect() as conn:
        wanted = (await conn.execute(_MIRRORED)).all()
        held = (await conn.execute(_VECTORS)).all()
    assert held == wanted
    return len(held)


def _chat(prefix: str, turns: int) -> list[Message]:
    return [
        Message.text_message(
            "user" if index % 2 == 0 else "assistant",
            f"{prefix} turn {index} latency report",
            message_id=f"{prefix}{index}",
        )
        for index in range(turns)
    ]


async def test_every_write_keeps_the_vectors_in_step(db_url: str) -> None:
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append("root", _chat("r", 6))
        await store.append("gone", _chat("g", 3))
        assert await _in_step(store) == 9
        await store.fork("root", new_session_id="fork", at="r3")
        await store.append("fork", _chat("f", 2))
        assert await _in_step(store) == 11
        await store.rewind("root", to="r1")  # the tail's rows move to a holder
        assert await _in_step(store) == 11
        await store.redact("fork", ["f0"], reason="test")
        await _in_step(store)
        await store.delete_session("gone")
        assert await _in_step(store) == 7  # 11, less the tombstone and the 3 deleted
        hits = await store.search("latency", session_id="fork")
        assert {h.message_id for h in hits.hits} == {"r0", "r1", "r2", "r3", "f1"}


async def test_excluding_rows_leaves_their_vectors_untouched(db_url: str) -> None:
    versions = text("SELECT seq, xmin::text FROM chatledger_search_vectors ORDER BY seq")
    rows = text("SELECT seq, xmin::text FROM chatledger_messages ORDER BY seq")
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append("s", _chat("a", 4))
        async with store.engine.connect() as conn:
            vectors_before = (await conn.execute(versions)).all()
            rows_before = (await conn.execute(rows)).all()
        await store.compact("s", ExcludeOldest(2))
        history = [s async for s in store.aiter_history("s", include_excluded=True)]
        assert any(s.excluded for s in history[:4])
        async with store.engine.connect() as conn:
            vectors_after = (await conn.execute(versions)).all()
            rows_after = (await conn.execute(rows)).all()
    assert vectors_after == vectors_before
    assert rows_after != rows_before  # the rows themselves were updated
