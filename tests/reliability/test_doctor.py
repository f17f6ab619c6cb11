"""``HistoryStore.doctor``: checks a database, repairs what can be repaired, audits each
fix, and makes a session poisoned by an older version readable again (its bad rows
quarantined, not deleted). The bad rows are written directly with SQL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text

from store import HistoryStore
from store.errors import CorruptRowError, SessionNotFound
from store.sql.upkeep.doctor import QUARANTINE_KEY, QUARANTINED_REASON
from strategies.changeset import ChangeSet, SummaryInsert
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conformance.toy_strategies import ExcludeOldest, Fixed, ReduceResults
from tests.groups.conversations import assistant, call, result, system, tool, user
from tests.strategies.invariants import assert_projection_invariants


def _chat(p: str = "") -> list[Message]:
    return [
        system(f"{p}sys", "be brief"),
        user(f"{p}u1", "weather in Paris?"),
        assistant(f"{p}a1", call(f"{p}c1", "weather")),
        tool(f"{p}t1", result(f"{p}c1", "sunny and warm all day long")),
        assistant(f"{p}a2", "It is sunny."),
        user(f"{p}u2", "and tomorrow?"),
        assistant(f"{p}a3", "Rain."),
        user(f"{p}u3", "thanks"),
    ]


async def _sql(store: HistoryStore, statement: str, **params: Any) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(text(statement), params)


async def _compacted(store: HistoryStore, session: str = "s") -> None:
    await store.append(session, _chat())
    summary = Message.text_message("assistant", "they talked weather", message_id="sum")
    changes = ChangeSet(summaries=(SummaryInsert(summary, ("group_u2",)),), strategy="fixed")
    await store.compact(session, Fixed(changes))
    await store.compact(session, ReduceResults())
    event = await store.compact(session, ExcludeOldest(1))
    assert event is not None
    await store.restore(session, event_id=event.id)


async def test_a_healthy_database_has_no_findings(store: HistoryStore) -> None:
    await _compacted(store)
    await store.append("other", _chat("o-")[:3])  # a call in flight: not stale
    report = await store.doctor()
    assert report.sessions == 2 and report.findings == () and report.healthy
    assert (await store.doctor(fix=True)).findings == ()
    assert len(await store.audit("s")) == 4  # nothing was recorded


async def test_reported_states_are_left_alone(store: HistoryStore) -> None:
    await store.append(
        "s",
        [
            user("u1", "go"),
            tool("t0", result("nowhere", "a result for no call")),
            assistant("a1", call("c1", "lookup")),
            user("u2", "never mind"),
            assistant("a2", call("c2", "lookup"), call("c2", "lookup")),
            tool("t2", result("c2", "done")),
        ],
    )
    report = await store.doctor("s", fix=True)
    checks = sorted(f.check for f in report.findings)
    # c2 declared twice is ambiguous: its result is never linked, so it is an orphan too
    assert checks == ["duplicate_call_id", "orphan_result", "orphan_result", "stale_call"]
    assert not any(f.fixable or f.fixed for f in report.findings)
    assert not report.healthy
    assert await store.audit("s") == []


async def test_a_poisoned_session_reads_again_after_fix(store: HistoryStore) -> None:
    await _compacted(store)
    before = {m.message_id: m for m in await store.history("s", include_excluded=True)}
    # what older versions let in: a lone surrogate (SQLite only: PostgreSQL's json
    # refuses it), contents of an unknown shape, metadata that is not an object
    poisoned = '[{"type":"text","text":"\\ud800 lone","extra":{}}]'
    if store.engine.dialect.name != "sqlite":
        poisoned = '[{"type":"text","extra":{}}]'
    await _sql(
        store, "UPDATE chatledger_messages SET contents = :v WHERE message_id = 'u1'", v=poisoned
    )
    await _sql(store, "UPDATE chatledger_messages SET metadata = '[1, 2]' WHERE message_id = 't1'")
    with pytest.raises(CorruptRowError):
        await store.history("s")
    with pytest.raises(CorruptRowError):
        await store.context("s")

    found = await store.doctor("s")
    bad = [f for f in found.findings if f.check == "unparsable_row"]
    assert sorted(f.seq for f in bad) == sorted([before["u1"].seq, before["t1"].seq])
    assert all(f.fixable and not f.fixed for f in bad) and not found.healthy

    fixed = await store.doctor("s", fix=True)
    assert fixed.healthy and all(f.fixed for f in fixed.findings)
    (event,) = [e for e in await store.audit("s") if e.params.get("check") == "unparsable_row"]
    assert event.strategy == "doctor" and event.phase == "manual"
    kept = {q["columns"]["message_id"]: q for q in event.params["quarantined"]}
    assert json.loads(json.loads(kept['"u1"']["columns"]["contents"])) == json.loads(poisoned)
    assert json.loads(json.loads(kept['"t1"']["columns"]["metadata"])) == [1, 2]

    history = {m.message_id: m for m in await store.history("s", include_excluded=True)}
    assert history.keys() == before.keys()  # nothing deleted
    for message_id in ("u1", "t1"):
        assert history[message_id].seq == before[message_id].seq
        assert history[message_id].message.metadata[QUARANTINE_KEY] == {"event_id": event.id}
        assert history[message_id].excluded
        assert history[message_id].excluded_reason == QUARANTINED_REASON
    sent = await store.context("s")
    assert "u1" not in {m.message_id for m in sent} and "t1" not in {m.message_id for m in sent}
    assert_projection_invariants(sent)
    async with HistoryStore.open(
        store.engine.url, tokenizer=CharacterEstimatorTokenizer()
    ) as fresh:
        assert len(await fresh.history("s", include_excluded=True)) == len(before)
        info = await fresh.session("s")
        assert info.active_tokens == (await fresh.view("s")).token_count
    assert (await store.doctor("s")).findings == ()


async def test_totals_and_flags_are_repaired(store: HistoryStore) -> None:
    await _compacted(store)
    good = await store.session("s")
    await _sql(
        store,
        "UPDATE chatledger_sessions SET stored_tokens = stored_tokens + 7, "
        "active_messages = 0, next_seq = 2, event_count = 99",
    )
    await _sql(store, "UPDATE chatledger_groups SET token_count = 1 WHERE group_id = 'group_a3'")
    await _sql(store, "UPDATE chatledger_messages SET excluded = true WHERE message_id = 'a2'")
    found = await store.doctor("s")
    assert {f.check for f in found.findings} == {"totals_mismatch", "audit_mismatch"}
    assert all(f.fixable for f in found.findings)
    fixed = await store.doctor("s", fix=True)
    assert fixed.healthy
    events = [e for e in await store.audit("s") if e.strategy == "doctor"]
    assert sorted(e.params["check"] for e in events) == ["audit_mismatch", "totals_mismatch"]
    after = await store.session("s")
    for column in (
        "stored_messages",
        "stored_groups",
        "stored_tokens",
        "active_messages",
        "active_groups",
        "active_tokens",
    ):
        assert getattr(after, column) == getattr(good, column), column
    assert not next(m for m in await store.history("s") if m.message_id == "a2").excluded
    assert (await store.doctor("s")).findings == ()
    await store.append("s", [user("u4", "one more")])  # next_seq was repaired
    assert (await store.history("s"))[-1].message_id == "u4"


async def test_an_audit_that_disagrees_with_the_flags_is_reported(store: HistoryStore) -> None:
    await _compacted(store)
    event = await store.compact("s", ExcludeOldest(1))
    assert event is not None
    (group_id,) = event.excluded
    await _sql(
        store,
        "UPDATE chatledger_groups SET excluded = false, excluded_reason = NULL, "
        "excluded_event_id = NULL WHERE group_id = :g",
        g=group_id,
    )
    await _sql(
        store,
        "UPDATE chatledger_messages SET excluded = false, excluded_reason = NULL, "
        "excluded_event_id = NULL WHERE group_id = :g",
        g=group_id,
    )
    report = await store.doctor("s", fix=True)
    (finding,) = [f for f in report.findings if f.check == "audit_mismatch"]
    assert finding.group_id == group_id and event.id in finding.detail
    assert not finding.fixable and not report.healthy


async def test_session_metadata_that_does_not_parse_is_quarantined(store: HistoryStore) -> None:
    await store.append("s", _chat())
    await store.set_metadata("s", {"owner": "ops"})
    bad = "[1, 2]" if store.engine.dialect.name != "sqlite" else "{not json"
    await _sql(store, "UPDATE chatledger_sessions SET metadata = :m", m=bad)
    found = await store.doctor("s")
    (finding,) = found.findings
    assert finding.check == "unparsable_row" and finding.fixable and finding.seq is None
    fixed = await store.doctor("s", fix=True)
    assert fixed.healthy
    assert await store.get_metadata("s") == {}
    (event,) = await store.audit("s")
    assert json.loads(event.params["session_metadata"]["metadata"]) == bad
    assert len(await store.history("s")) == len(_chat())


async def test_session_metadata_that_does_not_parse_fails_only_the_reads_of_it(
    store: HistoryStore,
) -> None:
    await store.append("s", _chat())
    bad = "[1, 2]" if store.engine.dialect.name != "sqlite" else "{not json"
    await _sql(store, "UPDATE chatledger_sessions SET metadata = :m", m=bad)
    for read in (store.get_metadata("s"), store.session("s"), store.sessions()):
        with pytest.raises(CorruptRowError, match=r"session 's'.*doctor --fix"):
            await read
    more = [user("u4", "one more")]
    await store.append("s", more)  # the turn goes on: nothing else reads the metadata
    assert [m.message for m in await store.history("s")] == [*_chat(), *more]
    assert len(await store.context("s")) == len(_chat()) + 1
    await store.set_metadata("s", {"owner": "ops"})  # a write replaces it
    assert await store.get_metadata("s") == {"owner": "ops"}


async def test_doctor_names_a_missing_session(store: HistoryStore) -> None:
    with pytest.raises(SessionNotFound):
        await store.doctor("missing")
