"""Retention and erasure: ``purge`` and ``redact`` on every backend.

A redacted message becomes a tombstone that keeps its id, role, call ids and pairing;
its tokens are recounted, the summaries that cover it are redacted, its reductions
cleared, and an audit event records it. Appending or importing it again is a replay,
never a restore. A purge removes whole sessions last updated before a cutoff.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from store import HistoryStore, InMemoryHistoryStore
from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from store.rules.erasure import REDACTED_SUMMARY_TEXT, REDACTED_TEXT
from store.rules.identity import REDACTION_KEY
from strategies.changeset import ChangeSet, SummaryInsert
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from tests.conformance.toy_strategies import Fixed, ReduceResults
from tests.groups.conversations import assistant, result, system, tool, user
from tests.strategies.invariants import assert_projection_invariants

SECRET = "card 4111-1111-1111-1111 exp 12/29"


def _chat() -> list[Message]:
    return [
        system("sys", "be brief"),
        user("u1", f"my {SECRET}, please book it"),
        assistant("a1", FunctionCallContent(call_id="c1", name="book", arguments={"card": SECRET})),
        tool("t1", result("c1", f"booked with {SECRET}")),
        assistant("a2", "Booked."),
        user("u2", "thanks"),
    ]


async def _by_id(store: HistoryBackend, session: str = "s") -> dict[str, Message]:
    return {m.message_id: m.message for m in await store.history(session, include_excluded=True)}


async def test_redact_keeps_the_history_valid(any_store: HistoryBackend) -> None:
    await any_store.append("s", _chat())
    before = await any_store.session("s")
    report = await any_store.redact("s", ["u1", "a1", "t1", "u1"], reason="customer request")
    assert report.redacted == ("u1", "a1", "t1")
    stored = await _by_id(any_store)
    assert all(SECRET not in m.model_dump_json() for m in stored.values())
    assert [c.type for c in stored["a1"].contents] == ["function_call"]
    called = stored["a1"].contents[0]
    assert isinstance(called, FunctionCallContent) and (called.call_id, called.name) == (
        "c1",
        "book",
    )
    answered = stored["t1"].contents[0]
    assert isinstance(answered, FunctionResultContent) and answered.call_id == "c1"
    assert stored["u1"].text == REDACTED_TEXT and stored["u1"].role == "user"
    assert stored["u1"].metadata[REDACTION_KEY] == {
        "reason": "customer request",
        "event_id": report.event.id if report.event else None,
    }
    # the pairing holds: the call and its result are still sent together
    sent = await any_store.context("s")
    assert [m.message_id for m in sent] == ["sys", "u1", "a1", "t1", "a2", "u2"]
    assert_projection_invariants(sent)
    # tokens recounted, on the messages and in the aggregates
    after = await any_store.session("s")
    counted = sum(m.token_count for m in await any_store.history("s", include_excluded=True))
    assert after.stored_tokens == counted == report.tokens_after < before.stored_tokens
    assert report.tokens_before == before.stored_tokens
    assert after.active_tokens == (await any_store.view("s")).token_count
    # audited
    (event,) = await any_store.audit("s")
    assert (event.strategy, event.phase) == ("redact", "manual")
    assert event.params["message_ids"] == ["u1", "a1", "t1"]
    assert event.params["reason"] == "customer request"
    # redacting again changes nothing
    again = await any_store.redact("s", ["u1"], reason="customer request")
    assert again.redacted == () and again.event is None
    assert len(await any_store.audit("s")) == 1


async def test_redacted_messages_are_never_restored(any_store: HistoryBackend) -> None:
    await any_store.append("s", _chat())
    await any_store.redact("s", ["u1", "t1"], reason="gdpr")
    original = _chat()
    assert await any_store.append("s", original) == [m.message_id for m in original]
    imported = await any_store.import_messages("s", original, source="openai_jsonl")
    assert imported.message_ids == tuple(m.message_id for m in original)
    assert imported.event is None
    tombstones = list((await _by_id(any_store)).values())
    assert await any_store.append("s", tombstones) == [m.message_id for m in tombstones]
    stored = await _by_id(any_store)
    assert len(stored) == len(original)
    assert stored["u1"].text == REDACTED_TEXT
    assert SECRET not in stored["t1"].model_dump_json()
    assert (await any_store.session("s")).stored_messages == len(original)


async def test_redact_reaches_summaries_and_reductions(any_store: HistoryBackend) -> None:
    await any_store.append("s", _chat())
    summary = Message.text_message("assistant", f"user paid with {SECRET}", message_id="sum")
    changes = ChangeSet(
        summaries=(SummaryInsert(summary, ("group_u1",)),), strategy="fixed_summary"
    )
    assert await any_store.compact("s", Fixed(changes)) is not None
    reduced = await any_store.compact("s", ReduceResults())
    assert reduced is not None and reduced.reduced == ("group_a1",)
    report = await any_store.redact("s", ["u1", "a1", "t1"], reason="gdpr")
    assert report.summaries == ("sum",)
    assert report.reductions_cleared == ("t1",)
    history = {m.message_id: m for m in await any_store.history("s", include_excluded=True)}
    assert history["sum"].message.text == REDACTED_SUMMARY_TEXT
    assert history["sum"].kind == "summary"
    assert history["t1"].reduced is None and history["t1"].reduced_token_count is None
    sent = await any_store.context("s")
    assert all(SECRET not in m.model_dump_json() for m in sent)
    assert "sum" in [m.message_id for m in sent]  # still replacing what it summarized
    info = await any_store.session("s")
    assert info.active_tokens == (await any_store.view("s")).token_count


async def test_redact_refuses_bad_requests(any_store: HistoryBackend) -> None:
    await any_store.append("s", _chat())
    revision = (await any_store.session("s")).revision
    with pytest.raises(InvalidInput, match="nope"):
        await any_store.redact("s", ["u1", "nope"], reason="x")
    with pytest.raises(InvalidInput):
        await any_store.redact("s", [], reason="x")
    with pytest.raises(InvalidInput):
        await any_store.redact("s", ["u1"], reason="  ")
    with pytest.raises(InvalidInput):
        await any_store.redact("s", "u1", reason="x")
    with pytest.raises(InvalidInput):
        await any_store.redact("s", ["u1"], reason="\ud800")
    with pytest.raises(SessionNotFound):
        await any_store.redact("missing", ["u1"], reason="x")
    assert (await any_store.session("s")).revision == revision
    assert (await _by_id(any_store))["u1"] == _chat()[1]


async def test_purge_removes_old_sessions_only(any_store: HistoryBackend) -> None:
    await any_store.append("old-1", _chat())
    await any_store.append("old-2", _chat()[:2])
    await any_store.compact("old-1", ReduceResults())
    cutoff = datetime.now(UTC) + timedelta(microseconds=1)
    while datetime.now(UTC) <= cutoff:
        pass  # the next write is after the cutoff, on every clock
    await any_store.append("new", _chat())
    other = (
        any_store.for_tenant("other")
        if isinstance(any_store, InMemoryHistoryStore)
        else HistoryStore(any_store.engine, tenant="other", tokenizer=any_store.tokenizer)
        if isinstance(any_store, HistoryStore)
        else None
    )
    assert other is not None
    await other.append("old-1", _chat())
    old = [await any_store.session(s) for s in ("old-1", "old-2")]
    events = len(await any_store.audit("old-1")) + len(await any_store.audit("old-2"))
    assert events
    preview = await any_store.purge(older_than=cutoff, dry_run=True)
    assert preview.dry_run and preview.sessions == ("old-1", "old-2")
    assert (preview.messages, preview.groups, preview.events) == (
        sum(s.stored_messages for s in old),
        sum(s.stored_groups for s in old),
        events,
    )
    assert [s.session_id for s in await any_store.sessions()] == ["new", "old-1", "old-2"]
    report = await any_store.purge(older_than=cutoff)
    assert report.model_dump(exclude={"dry_run"}) == preview.model_dump(exclude={"dry_run"})
    assert [s.session_id for s in await any_store.sessions()] == ["new"]
    with pytest.raises(SessionNotFound):
        await any_store.history("old-1")
    assert await any_store.context("old-1") == []
    assert len(await other.history("old-1")) == len(_chat())
    assert (await any_store.purge(older_than=cutoff)).sessions == ()
    # a timedelta counts back from now: nothing is older than a day here
    assert (await any_store.purge(older_than=timedelta(days=1))).sessions == ()


@pytest.mark.parametrize(
    "older_than",
    [datetime(2024, 1, 1), "2024-01-01", timedelta(days=-1), timedelta.max, None],
)
async def test_purge_refuses_bad_cutoffs(any_store: HistoryBackend, older_than: object) -> None:
    await any_store.append("s", _chat()[:1])
    with pytest.raises(InvalidInput):
        await any_store.purge(older_than=older_than)  # type: ignore[arg-type]
    assert [s.session_id for s in await any_store.sessions()] == ["s"]
