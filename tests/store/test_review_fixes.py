"""Fixes from a review of the store, on the in-memory store, SQLite and PostgreSQL.

* A deterministic summary id planned again after a restore and an unpin is stored under
  a fresh id instead of failing every later compaction.
* A View returned by the SQL store raises only chatledger errors when it loads later.
* A strategy's TokenizerMismatch comes out as InvalidInput.
* Corrupt audit rows raise CorruptRowError.
* Every public method checks its session id (empty, NUL).
* An import appends and applies its event in one transaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import text

import store.sql.store as api_module
from store import HistoryStore
from store.errors import CorruptRowError, InvalidInput, StoreError
from store.memory import InMemoryHistoryStore
from strategies.base import CompactionStrategy, TokenizerMismatch
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.messages import Message
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.tool_result import ToolResultCompactionStrategy
from tests.conformance.toy_strategies import TOKENIZER, ExcludeOldest
from tests.groups.conversations import assistant, call, result, system, tool, user
from tests.store.parity import observed

Store = HistoryStore | InMemoryHistoryStore

POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)
SQL_ONLY = pytest.mark.parametrize("backend", ["sqlite", POSTGRES], indirect=True)
"""For the tests of what only the SQL store has (its ``store`` fixture)."""


@pytest.fixture(params=["memory", "sqlite", POSTGRES])
def backend(request: pytest.FixtureRequest) -> str:
    """The in-memory model, then each SQL backend (overrides the conftest fixture)."""
    return str(request.param)


@pytest.fixture
def target(backend: str, request: pytest.FixtureRequest) -> Store:
    """A store of the backend under test, counting with the character estimator."""
    if backend == "memory":
        return InMemoryHistoryStore(tokenizer=TOKENIZER)
    sql: HistoryStore = request.getfixturevalue("store")
    return sql


def _chat() -> list[Message]:
    return [
        system("sys", "be brief"),
        user("u1", "weather?"),
        assistant("a1", call("c1", "weather")),
        tool("t1", result("c1", "sunny and warm all day long. " * 200)),
        assistant("a2", "sunny"),
        user("u2", "tomorrow?"),
        assistant("a3", "rain"),
        user("u3", "thanks"),
        assistant("a9", call("c9", "weather")),
        tool("t9", result("c9", "x")),
        user("u9", "ok"),
    ]


STRATEGIES: dict[str, Callable[[], CompactionStrategy]] = {
    "tool_result": lambda: ToolResultCompactionStrategy(keep_last_tool_call_groups=1),
    "context_window": lambda: ContextWindowCompactionStrategy(
        # the first call's summary (capped at 4096 characters) is smaller than its result,
        # so it is collapsed; the history then stays under the truncation threshold
        max_context_window_tokens=2010,
        max_output_tokens=10,
        keep_last_tool_call_groups=1,
    ),
    "summarization": lambda: SummarizationStrategy(
        client=FakeSummarizer(), target_count=2, threshold=0
    ),
}


async def _restore_unpin_compact(s: Store, strategy: CompactionStrategy) -> dict[str, Any]:
    await s.append("s", _chat())
    first = await s.compact("s", strategy)
    assert first is not None and first.summarized
    undo = await s.restore("s", event_id=first.id)
    assert undo is not None
    assert sorted(await s.unpin("s", undo.restored)) == sorted(undo.restored)
    second = await s.compact("s", strategy)  # plans the same summary ids again
    assert second is not None and second.summarized
    return {"first": first, "undo": undo, "second": second}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
async def test_a_summary_planned_again_after_restore_and_unpin(target: Store, name: str) -> None:
    strategy = STRATEGIES[name]()
    done = await _restore_unpin_compact(target, strategy)
    first, undo, second = done["first"], done["undo"], done["second"]
    # a new summary, stored under "<planned id>@<its seq>", its group following
    assert not set(second.summarized) & set(first.summarized)
    rows = {m.group_id: m for m in await target.history("s", include_excluded=True)}
    for group_id in second.summarized:
        row = rows[group_id]
        assert row.kind == "summary" and not row.excluded
        assert group_id == f"group_{row.message.message_id}"
        planned = f"group_{row.message.message_id.rsplit('@', 1)[0]}"
        if planned in first.summarized:
            assert row.message.message_id.endswith(f"@{row.seq}")
    # the audit agrees: three events, each replaced group excluded by the new one
    assert [e.id for e in await target.audit("s")] == [second.id, undo.id, first.id]
    excluded = {g.group_id: g for g in await target.excluded("s")}
    for summary, replaced in second.summarized.items():
        for group_id in replaced:
            assert excluded[group_id].event_id == second.id
            assert excluded[group_id].summary_group_id == summary
    # the projection never holds a summary next to what it replaced
    view = await target.view("s")
    active = {g.group_id for g in view.groups}
    for group in view.groups:
        assert not set(group.summary_of) & active
    sent = {m.message_id for m in await target.context("s")}
    replaced_ids = {
        m.message.message_id
        for m in rows.values()
        if any(m.group_id in r for r in second.summarized.values())
    }
    assert not sent & replaced_ids
    # running the strategy once more changes nothing
    assert await target.compact("s", strategy) is None


@SQL_ONLY
@pytest.mark.parametrize("name", sorted(STRATEGIES))
async def test_the_sql_store_agrees_with_the_model(store: HistoryStore, name: str) -> None:
    model = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for s in (store, model):
        await _restore_unpin_compact(s, STRATEGIES[name]())
    assert await observed(store, "s") == await observed(model, "s")


@SQL_ONLY
async def test_a_returned_view_translates_driver_errors(store: HistoryStore) -> None:
    await store.append("s", _chat())
    view = await store.view("s")
    async with store.engine.begin() as conn:
        await conn.execute(text("ALTER TABLE chatledger_messages RENAME TO chatledger_gone"))
    with pytest.raises(StoreError) as info:
        await view.project()
    assert info.value.__cause__ is not None


class _OtherTokenizer:
    name = "other_tokenizer"

    def count_tokens(self, text: str) -> int:
        return len(text)


async def test_tokenizer_mismatch_is_invalid_input(target: Store) -> None:
    await target.append("s", _chat())
    strategy = ContextWindowCompactionStrategy(
        max_context_window_tokens=110, max_output_tokens=10, tokenizer=_OtherTokenizer()
    )
    with pytest.raises(InvalidInput, match="other_tokenizer") as info:
        await target.compact("s", strategy)
    assert isinstance(info.value.__cause__, TokenizerMismatch)
    with pytest.raises(InvalidInput, match="other_tokenizer"):
        await target.context("s", strategy=strategy)
    assert await target.audit("s") == []


async def _corrupt(store: HistoryStore, statement: str) -> None:
    async with store.engine.begin() as conn:
        if store.engine.dialect.name == "sqlite":
            await conn.execute(text("PRAGMA ignore_check_constraints = ON"))
        else:
            found = await conn.execute(
                text(
                    "SELECT conname FROM pg_constraint WHERE contype = 'c' "
                    "AND conrelid = 'chatledger_groups'::regclass"
                )
            )
            for (name,) in found.all():
                await conn.execute(text(f'ALTER TABLE chatledger_groups DROP CONSTRAINT "{name}"'))
        await conn.execute(text(statement))


@SQL_ONLY
async def test_a_corrupt_group_kind_is_reported(store: HistoryStore) -> None:
    await store.append("s", _chat())
    event = await store.compact("s", ExcludeOldest(2))
    assert event is not None
    await _corrupt(
        store, "UPDATE chatledger_groups SET kind = 'no_such_kind' WHERE group_id = 'group_u1'"
    )
    with pytest.raises(CorruptRowError, match="'s'"):
        await store.excluded("s")
    with pytest.raises(CorruptRowError, match="group_u1"):
        await store.why("s", "u1")


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_corrupt_reason_is_reported(store: HistoryStore) -> None:
    """Only SQLite holds bytes that are not text in a text column."""
    await store.append("s", _chat())
    assert await store.compact("s", ExcludeOldest(2)) is not None
    await _corrupt(
        store,
        "UPDATE chatledger_groups SET excluded_reason = X'FFFE' WHERE group_id = 'group_u1'",
    )
    with pytest.raises(CorruptRowError, match="group_u1"):
        await store.excluded("s")
    with pytest.raises(CorruptRowError, match="group_u1"):
        await store.why("s", "u1")


def _calls(s: Store, sid: str) -> list[Callable[[], Awaitable[object]]]:
    strategy = ExcludeOldest(1)
    one = [user("x1", "hi")]

    async def drain() -> None:
        async for _ in s.aiter_history(sid):
            pass

    return [
        lambda: s.append(sid, one),
        lambda: s.append(sid, []),
        lambda: s.history(sid),
        drain,
        lambda: s.session(sid),
        lambda: s.get_metadata(sid),
        lambda: s.set_metadata(sid, {"k": 1}),
        lambda: s.delete_session(sid),
        lambda: s.recount(sid),
        lambda: s.view(sid),
        lambda: s.context(sid),
        lambda: s.compact(sid, strategy),
        lambda: s.compact(sid, strategy, dry_run=True),
        lambda: s.audit(sid),
        lambda: s.excluded(sid),
        lambda: s.why(sid, "u1"),
        lambda: s.stats(sid),
        lambda: s.restore(sid, group_ids=["group_u1"]),
        lambda: s.pin(sid, ["group_u1"]),
        lambda: s.unpin(sid, ["group_u1"]),
        lambda: s.import_messages(sid, one),
    ]


@pytest.mark.parametrize("bad", ["", "s\x00", "\x00"])
async def test_every_method_checks_the_session_id(target: Store, bad: str) -> None:
    await target.append("s", _chat())
    before = await observed(target, "s")
    for attempt in _calls(target, bad):
        with pytest.raises(InvalidInput, match="session_id"):
            await attempt()
    assert await observed(target, "s") == before
    assert [i.session_id for i in await target.sessions()] == ["s"]


@SQL_ONLY
async def test_an_import_is_one_transaction(
    store: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("import planning failed")

    monkeypatch.setattr(api_module, "import_changes", broken)
    await store.append("s", _chat()[:2])
    before = await observed(store, "s")
    with pytest.raises(RuntimeError, match="import planning failed"):
        await store.import_messages("s", _chat())
    # the appends of the failed import were rolled back with it
    assert await observed(store, "s") == before
    with pytest.raises(RuntimeError):
        await store.import_messages("fresh", _chat())
    assert [i.session_id for i in await store.sessions()] == ["s"]
