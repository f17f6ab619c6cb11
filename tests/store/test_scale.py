"""Bulk appends in batches, then compaction and full reads: the paths the benchmarks take.

A regression guard for a report of a ``CorruptRowError`` (a message whose group had no
kind) in ``compact()`` after a long session was bulk-appended in batches: batches here
split tool calls from their results, every stored message must read back whole and
equal to what was appended, and every group must be the one a one-shot annotation gives.
"""

from __future__ import annotations

from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from benchmarks.generator import ConversationGenerator, to_message
from store import HistoryStore
from strategies import ContextWindowCompactionStrategy
from strategies.messages import FunctionResultContent, Message, TextContent
from strategies.tokenizers import (
    CharacterEstimatorTokenizer,
    count_message_tokens,
)
from strategies.view import GENERATED_COUNTS
from tests.store.helpers import expected_groups, group_rows

SESSION = "long"


def _conversation(count: int, seed: int = 3) -> list[Message]:
    return list(ConversationGenerator(seed).messages(count))


def _strategy(window: int) -> ContextWindowCompactionStrategy:
    return ContextWindowCompactionStrategy(
        max_context_window_tokens=window, max_output_tokens=window // 8
    )


async def _bulk(store: HistoryStore, messages: list[Message], batch: int) -> None:
    for start in range(0, len(messages), batch):
        await store.append(SESSION, messages[start : start + batch])


@pytest.mark.parametrize("batch", [37, 250])
async def test_batched_bulk_append_then_compact_reads_back_every_row(
    store: HistoryStore, batch: int
) -> None:
    messages = _conversation(600)
    await _bulk(store, messages, batch)

    # the groups written batch by batch are those of annotating everything at once
    rows = await group_rows(store, SESSION)
    expected = expected_groups(store, messages)
    assert set(rows) == set(expected)
    for group_id, want in expected.items():
        got = {key: rows[group_id][key] for key in want}
        assert got == want, group_id

    event = await store.compact(SESSION, _strategy(16_000), phase="after_run")
    assert event is not None and event.messages_after < event.messages_before

    read = [m async for m in store.aiter_history(SESSION, include_excluded=True, page_size=64)]
    appended = [m for m in read if m.slot == 0]
    assert [m.message for m in appended] == messages
    assert [m.seq for m in read] == sorted(m.seq for m in read)
    assert len({m.seq for m in read}) == len(read)
    stats = await store.stats(SESSION)
    assert stats.stored_messages == len(read)
    assert stats.active_messages == sum(1 for m in read if not m.excluded)
    assert stats.stored_tokens == sum(m.token_count for m in read)


async def test_turns_after_a_bulk_import_keep_the_context_bounded(store: HistoryStore) -> None:
    await _bulk(store, _conversation(400), 100)
    strategy = _strategy(16_000)
    await store.compact(SESSION, strategy, phase="after_run")
    generator = ConversationGenerator(11, id_prefix="t")
    sizes = []
    for turn in islice(generator.turns(), 5):
        await store.append(SESSION, [to_message(item) for item in turn])
        await store.compact(SESSION, strategy, phase="after_run")
        context = await store.context(SESSION)
        assert context and context[-1].message_id == turn[-1]["id"]
        sizes.append(sum(store.count_tokens(m) for m in context))
    assert max(sizes) <= strategy.input_budget_tokens


async def test_contents_round_trip_through_the_bulk_path(store: HistoryStore) -> None:
    odd = [
        Message(
            role="tool",
            contents=[
                FunctionResultContent(
                    call_id="c1",
                    result={"big": 10**17, "small": 1e-7, "text": 'é ✓ \u0000 "q" \\'},
                )
            ],
            metadata={"nested": {"list": [1, 2.5, None, True]}, "unicode": "日本"},
            author_name="naïve",
        ),
        Message(role="user", contents=[TextContent(text="line\nbreak\ttab")]),
    ]
    await store.append(SESSION, odd)
    assert [m.message for m in await store.history(SESSION)] == odd
    # appending the same messages again is a no-op (same stored content hash)
    await store.append(SESSION, odd)
    assert len(await store.history(SESSION)) == 2


class _TextCounter:
    """Counts how often each text is tokenized."""

    def __init__(self) -> None:
        self.inner = CharacterEstimatorTokenizer()
        self.name = self.inner.name
        self.texts: Counter[str] = Counter()

    def count_tokens(self, text: str) -> int:
        self.texts[text] += 1
        return self.inner.count_tokens(text)


async def test_each_stored_message_is_tokenized_exactly_once(db_url: str) -> None:
    GENERATED_COUNTS.clear()  # summaries of other tests may share ids and contents
    counter = _TextCounter()
    strategy = _strategy(8_000)
    generator = ConversationGenerator(5)
    async with HistoryStore.open(db_url, tokenizer=counter) as store:
        await store.append(SESSION, list(generator.messages(1)))
        for turn in islice(generator.turns(), 30):
            batch = [to_message(item) for item in turn]
            await store.context(SESSION, strategy=strategy, pending=batch[:1])
            await store.append(SESSION, batch)
            await store.compact(SESSION, strategy, phase="after_run")
            await store.context(SESSION, strategy=strategy)
        stored = [m async for m in store.aiter_history(SESSION, include_excluded=True)]
    assert any(m.message.message_id.startswith("tool_summary_") for m in stored)
    one_pass = _TextCounter()
    for m in stored:
        count_message_tokens(m.message, one_pass, policy=store.policy)
    # every text of a stored message was tokenized as often as one pass needs
    assert {t: counter.texts[t] for t in one_pass.texts} == dict(one_pass.texts)
    # the rest are summaries planned but never stored, each tokenized once
    extra = {t: n for t, n in counter.texts.items() if t not in one_pass.texts}
    assert all(t.startswith("[Tool results:") and n == 1 for t, n in extra.items())


_SESSION_WIDE = "(tenant=? AND session_id=?)"
_HISTORY_TABLES = ("chatledger_messages", "chatledger_groups", "chatledger_event_groups")


def _scans_history(plan: list[str]) -> bool:
    """Whether a query plan walks a session's rows (no key narrower than the session)."""
    return any(
        table in step and (step.startswith("SCAN") or step.endswith(_SESSION_WIDE))
        for step in plan
        for table in _HISTORY_TABLES
    )


async def _turn_plans(tmp_path: Path) -> dict[str, list[str]]:
    """The SQLite plan of every read, update and delete of four turns (append, after-run
    compaction, context) after a compaction, by statement."""
    url = f"sqlite:///{tmp_path}/plans.db"
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await _bulk(store, _conversation(400), 100)
        strategy = _strategy(16_000)
        await store.compact(SESSION, strategy, phase="after_run")
        statements: dict[str, Any] = {}

        def capture(*args: Any) -> None:
            _conn, _cursor, statement, parameters, _context, many = args
            if not many and statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
                statements.setdefault(statement, parameters)

        sync_engine = store.engine.sync_engine
        event.listen(sync_engine, "before_cursor_execute", capture)
        for turn in islice(ConversationGenerator(11, id_prefix="t").turns(), 4):
            await store.append(SESSION, [to_message(item) for item in turn])
            await store.compact(SESSION, strategy, phase="after_run")
            await store.context(SESSION)
        event.remove(sync_engine, "before_cursor_execute", capture)
        async with store.engine.connect() as conn:
            return {
                statement: [
                    str(row[-1])
                    for row in await conn.exec_driver_sql(
                        f"EXPLAIN QUERY PLAN {statement}", parameters
                    )
                ]
                for statement, parameters in statements.items()
            }


async def test_a_turn_after_compaction_never_walks_the_session(tmp_path: Path) -> None:
    """Every statement of a turn (append, after-run compaction, context) uses a key
    narrower than the session on SQLite, so a turn costs the same at any history size."""
    plans = await _turn_plans(tmp_path)
    assert plans
    assert [s for s, plan in plans.items() if _scans_history(plan)] == []


async def test_a_turn_looks_rows_up_by_their_keys_not_by_the_active_index(tmp_path: Path) -> None:
    """A turn's look-ups of a list of ids search by those ids, never walking the session's
    active rows by the index on ``excluded`` and testing each against the list (which
    grows with the window, and was the dearest statement of a cached turn)."""
    plans = await _turn_plans(tmp_path)
    by_ids = {s: plan for s, plan in plans.items() if "json_each" in s}
    assert by_ids
    assert [s for s, plan in by_ids.items() if any("excluded=?)" in p for p in plan)] == []
