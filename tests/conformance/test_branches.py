"""Branches (``docs/branches.md``): fork, rewind, superseded tails and ``branches()``.

Every rule of the spec, on each backend: the cut and what a prefix inherits, the fork's
event and ids, the independence of branches (compaction, pins, late results), the
redaction that reaches every branch, rewind and the restore of its tail, the refusals,
and deleting or purging a session that forks still read.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from store.exporting import export_sessions
from strategies.changeset import ChangeSet, Exclusion, SummaryInsert
from strategies.messages import Message
from tests.conformance.conftest import Stores
from tests.conformance.toy_strategies import ExcludeOldest, Fixed, ReduceResults, SummarizeOldest
from tests.groups.conversations import assistant, call, reasoning, result, system, tool, user
from tests.strategies.invariants import assert_projection_invariants

FORK_ID = re.compile(r"fork-[0-9a-f]{32}")
TAIL_ID = re.compile(r"tail-[0-9a-f]{32}")


def _chat() -> list[Message]:
    return [
        system("sys", "be brief"),
        user("u1", "weather?"),
        assistant("a1", call("c1", "weather")),
        tool("t1", result("c1", "sunny")),
        assistant("a2", "sunny"),
        user("u2", "tomorrow?"),
        assistant("a3", "rain"),
        user("u3", "thanks"),
    ]


IDS = [m.message_id for m in _chat()]


async def _ids(store: HistoryBackend, session_id: str, *, everything: bool = True) -> list[str]:
    stored = await store.history(session_id, include_excluded=everything)
    return [m.message_id for m in stored]


async def _sent(store: HistoryBackend, session_id: str) -> list[str]:
    messages = await store.context(session_id)
    assert_projection_invariants(messages, nonempty=False)
    return [m.message_id for m in messages]


@pytest.fixture
async def chat_store(store: HistoryBackend) -> HistoryBackend:
    await store.append("s", _chat())
    return store


# -- fork: the prefix, its ids and its event -----------------------------------------


async def test_fork_takes_the_prefix_then_its_own_appends(chat_store: HistoryBackend) -> None:
    store = chat_store
    await store.set_metadata("s", {"topic": "weather"})
    parent = await store.history("s")
    fork = await store.fork("s", at="a2", new_session_id="f")
    assert fork.session_id == "f"
    assert (fork.parent_session_id, fork.fork_message_id) == ("s", "a2")
    assert fork.revision == 1 and fork.tokenizer == (await store.session("s")).tokenizer
    assert await store.get_metadata("f") == {"topic": "weather"}
    stored = await store.history("f")
    assert [m.message_id for m in stored] == IDS[:5]
    assert {m.session_id for m in stored} == {"f"}
    assert [(m.seq, m.message, m.group_id) for m in stored] == [
        (m.seq, m.message, m.group_id) for m in parent[:5]
    ]
    await store.append("f", [user("u2f", "and Paris?")])
    own = (await store.history("f"))[-1]
    assert own.message_id == "u2f" and own.seq == parent[4].seq + 1
    assert await _ids(store, "s") == IDS, "the parent changed"
    assert (await store.session("s")).parent_session_id is None


async def test_fork_defaults_to_the_last_message_and_a_fork_id(
    chat_store: HistoryBackend,
) -> None:
    store = chat_store
    fork = await store.fork("s")
    assert FORK_ID.fullmatch(fork.session_id)
    assert fork.fork_message_id == "u3"
    assert await _ids(store, fork.session_id) == IDS
    assert await _sent(store, fork.session_id) == await _sent(store, "s")


async def test_fork_of_an_empty_session(store: HistoryBackend) -> None:
    await store.set_metadata("empty", {"k": 1})
    fork = await store.fork("empty", new_session_id="f")
    assert fork.fork_message_id is None and fork.parent_session_id == "empty"
    assert await store.history("f") == []
    await store.append("f", [user("u1")])
    assert await _ids(store, "f") == ["u1"]
    assert await store.history("empty") == []


async def test_fork_event_says_what_it_inherited(chat_store: HistoryBackend) -> None:
    store = chat_store
    excluded = await store.compact("s", ExcludeOldest(1))  # group_u1
    assert excluded is not None
    await store.compact("s", ReduceResults())
    await store.pin("s", ["group_a2"])
    await store.fork("s", at="u2", new_session_id="f")
    (event,) = await store.audit("f")
    assert (event.phase, event.strategy, event.outcome) == ("fork", "fork", "applied")
    assert event.session_id == "f"
    assert event.params == {
        "source_session_id": "s",
        "at": "u2",
        "inherited": {
            "groups": 5,
            "excluded_groups": 1,
            "summaries": 0,
            "reductions": 1,
            "pins": 1,
        },
        "dropped_summaries": [],
    }
    assert all(e.phase != "fork" for e in await store.audit("s"))
    view = await store.view("f")
    assert view.group("group_a2").pinned
    assert [g.group_id for g in await store.excluded("f")] == ["group_u1"]
    sent = {m.message_id: m for m in await store.context("f")}
    assert sent["t1"] != _chat()[3], "the reduction was not carried over"
    branches = await store.branches("f")
    assert [(b.relation, b.session_id, b.event_id) for b in branches] == [("parent", "s", event.id)]


async def test_fork_refusals(chat_store: HistoryBackend) -> None:
    store = chat_store
    await store.append("other", [user("o1")])
    with pytest.raises(InvalidInput, match="other"):
        await store.fork("s", new_session_id="other")
    with pytest.raises(InvalidInput, match="nope"):
        await store.fork("s", at="nope")
    with pytest.raises(InvalidInput, match="a1"):  # a call at the cut answered after it
        await store.fork("s", at="a1")
    with pytest.raises(SessionNotFound):
        await store.fork("missing")
    summarized = await store.compact("s", SummarizeOldest(2))
    assert summarized is not None
    (summary_group,) = summarized.summarized
    summary_message = next(
        m.message_id for m in await store.history("s") if m.group_id == summary_group
    )
    with pytest.raises(InvalidInput, match=summary_message):
        await store.fork("s", at=summary_message)
    rewound = await store.rewind("s", to="u2")
    assert rewound is not None
    tail = rewound.params["tail_session_id"]
    with pytest.raises(InvalidInput, match=tail):
        await store.fork("s", new_session_id=tail)
    with pytest.raises(InvalidInput, match="superseded tail"):
        await store.fork(tail)
    assert [s.session_id for s in await store.sessions()] == ["other", "s"]


async def test_a_cut_that_parts_a_result_from_its_later_call_is_refused(
    store: HistoryBackend,
) -> None:
    await store.append(
        "s", [user("u1"), tool("t1", result("c1", "early")), assistant("a1", call("c1"))]
    )
    with pytest.raises(InvalidInput, match="t1"):
        await store.fork("s", at="t1")
    with pytest.raises(InvalidInput, match="t1"):
        await store.rewind("s", to="t1")
    assert await store.rewind("s", to="u1") is not None


# -- the cut's rules -------------------------------------------------------------------


async def test_a_split_group_keeps_its_members_up_to_the_cut(store: HistoryBackend) -> None:
    await store.append(
        "s",
        [
            user("u1"),
            assistant("r1", reasoning("let me look")),
            assistant("a1", call("c1")),
            tool("t1", result("c1")),
        ],
    )
    assert (await store.view("s")).group("group_r1").kind == "tool_call"
    await store.fork("s", at="r1", new_session_id="f")
    group = (await store.view("f")).group("group_r1")
    assert (group.kind, group.message_count, group.pending_calls) == ("assistant_text", 1, 0)
    assert group.has_reasoning
    # the annotation goes on from the cut: a call joins the reasoning that leads into it
    await store.append("f", [assistant("a1f", call("c9")), tool("t1f", result("c9"))])
    group = (await store.view("f")).group("group_r1")
    assert (group.kind, group.message_count, group.pending_calls) == ("tool_call", 3, 0)
    assert (await store.view("s")).group("group_r1").message_count == 3


async def test_a_summary_spanning_the_cut_is_not_inherited(chat_store: HistoryBackend) -> None:
    store = chat_store
    summarized = await store.compact("s", SummarizeOldest(3))  # u1, a1+t1, a2
    assert summarized is not None
    (summary_group, replaced) = next(iter(summarized.summarized.items()))
    assert set(replaced) == {"group_u1", "group_a1", "group_a2"}
    await store.fork("s", at="t1", new_session_id="f")
    (event,) = await store.audit("f")
    assert event.params["dropped_summaries"] == [summary_group]
    assert event.params["inherited"]["summaries"] == 0
    assert event.params["inherited"]["excluded_groups"] == 0
    assert await _ids(store, "f") == IDS[:4]
    assert await _sent(store, "f") == IDS[:4]
    assert await store.excluded("f") == []
    why = await store.why("f", "u1")
    assert why.in_context and why.summary_group_id is None
    # the parent keeps its summary
    assert summary_group in {g.summary_group_id for g in await store.excluded("s")}


async def test_a_summary_inside_the_prefix_is_carried(chat_store: HistoryBackend) -> None:
    store = chat_store
    summarized = await store.compact("s", SummarizeOldest(2))  # u1, a1+t1
    assert summarized is not None
    (summary_group,) = summarized.summarized
    await store.fork("s", at="a2", new_session_id="f")
    (event,) = await store.audit("f")
    assert event.params["inherited"]["summaries"] == 1
    assert event.params["inherited"]["excluded_groups"] == 2
    assert event.params["dropped_summaries"] == []
    parent_sent = await _sent(store, "s")
    assert await _sent(store, "f") == parent_sent[: parent_sent.index("a2") + 1]
    assert {g.summary_group_id for g in await store.excluded("f")} == {summary_group}
    # restoring the inherited summary in the fork changes the fork only
    assert await store.restore("f", group_ids=["group_u1"]) is not None
    assert "u1" in await _sent(store, "f")
    assert await _sent(store, "s") == parent_sent


async def test_the_annotation_goes_on_from_the_cut_as_the_appends_left_it(
    store: HistoryBackend,
) -> None:
    # a result stored before its call, compacted before the call came: the call did not
    # join it and is pending; a fork at the call must be annotated as the parent is
    await store.append("s", [user("u1"), tool("t1", result("c1", "early"))])
    assert await store.compact("s", Fixed(ChangeSet(exclusions=(Exclusion("group_t1", "x"),))))
    await store.append("s", [assistant("a1", call("c1")), user("u2")])
    parent = (await store.view("s")).group("group_a1")
    assert (parent.message_count, parent.pending_calls) == (1, 1)
    await store.fork("s", at="a1", new_session_id="f")
    fork = (await store.view("f")).group("group_a1")
    assert (fork.message_count, fork.pending_calls) == (1, 1)
    for session in ("s", "f"):
        await store.append(session, [tool(f"t2-{session}", result("c1", "late"))])
        group = (await store.view(session)).group("group_a1")
        assert (group.message_count, group.pending_calls) == (2, 0), session
    assert [g.group_id for g in await store.excluded("f")] == ["group_t1"]


# -- independence of branches ---------------------------------------------------------


async def test_compacting_a_fork_leaves_the_parent_as_it_was(chat_store: HistoryBackend) -> None:
    store = chat_store
    await store.fork("s", new_session_id="f")
    before = await store.context("s")
    parent_history = await store.history("s", include_excluded=True)
    parent_info = await store.session("s")
    assert await store.compact("f", SummarizeOldest(3)) is not None
    assert await store.compact("f", ExcludeOldest(1)) is not None
    await store.compact("f", ReduceResults())
    assert await store.context("s") == before
    assert await store.history("s", include_excluded=True) == parent_history
    assert (await store.session("s")).revision == parent_info.revision
    assert await _sent(store, "f") != [m.message_id for m in before]
    # and the other way round
    fork_context = await store.context("f")
    assert await store.compact("s", ExcludeOldest(2)) is not None
    assert await store.context("f") == fork_context


async def test_a_fork_summary_named_as_an_inherited_message_takes_a_fresh_id(
    chat_store: HistoryBackend,
) -> None:
    """A summary whose planned id is a message id the fork inherits (a tool result's, then
    a group's first message's, whose group id it would take too) is renamed, as in a
    session of its own: the fork's ids stay unique and the inherited message stays."""
    store = chat_store
    await store.fork("s", new_session_id="f")
    await store.append("f", [user("u4", "and then?"), assistant("a4", "more rain")])
    for planned, replaces in (("t1", ("group_u2", "group_a3")), ("a2", ("group_u3",))):
        summary = SummaryInsert(
            Message.text_message("assistant", "so far", message_id=planned), replaces
        )
        assert await store.compact("f", Fixed(ChangeSet(summaries=(summary,)))) is not None
    stored = await _ids(store, "f")
    assert len(stored) == len(set(stored)), stored
    assert [i.split("@")[0] for i in stored if "@" in i] == ["t1", "a2"]
    sent = await store.context("f")
    assert len({m.message_id for m in sent}) == len(sent)
    assert [m.text for m in sent if m.message_id == "a2"] == ["sunny"]
    assert await _ids(store, "s") == IDS  # the parent as it was


async def test_an_inherited_exclusion_restored_in_the_fork_only(
    chat_store: HistoryBackend,
) -> None:
    store = chat_store
    assert await store.compact("s", ExcludeOldest(1)) is not None
    await store.fork("s", new_session_id="f")
    assert await store.restore("f", group_ids=["group_u1"]) is not None
    assert "u1" in await _sent(store, "f")
    assert "u1" not in await _sent(store, "s")


async def test_a_pin_in_the_parent_does_not_pin_in_the_fork(chat_store: HistoryBackend) -> None:
    store = chat_store
    await store.fork("s", new_session_id="f")
    assert await store.pin("s", ["group_u1"]) == ["group_u1"]
    assert (await store.view("s")).group("group_u1").pinned
    assert not (await store.view("f")).group("group_u1").pinned
    excluded = await store.compact("f", ExcludeOldest(1))
    assert excluded is not None and excluded.excluded == ("group_u1",)
    assert await store.unpin("f", ["group_a1"]) == []


async def test_a_late_result_in_the_parent_does_not_regroup_the_fork(
    store: HistoryBackend,
) -> None:
    await store.append("s", [user("u1"), assistant("a1", call("c1"))])
    await store.fork("s", new_session_id="f")
    await store.append("s", [tool("t1", result("c1", "late"))])
    parent = (await store.view("s")).group("group_a1")
    assert (parent.message_count, parent.pending_calls) == (2, 0)
    fork = (await store.view("f")).group("group_a1")
    assert (fork.message_count, fork.pending_calls) == (1, 1)
    assert await _ids(store, "f") == ["u1", "a1"]
    # the fork's own result joins the fork's group
    await store.append("f", [tool("t1f", result("c1", "other"))])
    fork = (await store.view("f")).group("group_a1")
    assert (fork.message_count, fork.pending_calls) == (2, 0)
    assert (await store.view("s")).group("group_a1").message_count == 2


async def test_concurrent_appends_to_parent_and_fork_lose_nothing(
    chat_store: HistoryBackend,
) -> None:
    store = chat_store
    await store.fork("s", new_session_id="f")
    writes = [
        store.append(session, [user(f"{session}-{i}", f"message {i}")])
        for i in range(20)
        for session in ("s", "f")
    ]
    await asyncio.gather(*writes)
    for session in ("s", "f"):
        ids = await _ids(store, session)
        assert ids[: len(IDS)] == IDS
        assert sorted(ids[len(IDS) :]) == sorted(f"{session}-{i}" for i in range(20))
        seqs = [m.seq for m in await store.history(session)]
        assert len(set(seqs)) == len(seqs)


# -- redaction ---------------------------------------------------------------------------


async def test_redaction_reaches_every_branch_holding_the_message(
    chat_store: HistoryBackend,
) -> None:
    store = chat_store
    await store.fork("s", at="a2", new_session_id="f")
    await store.append("f", [user("own", "private to the fork")])
    revisions = {s: (await store.session(s)).revision for s in ("s", "f")}
    report = await store.redact("f", ["u1"], reason="pii")
    assert report.redacted == ("u1",) and report.session_id == "f"
    for session in ("s", "f"):
        stored = {m.message_id: m for m in await store.history(session)}
        assert stored["u1"].message != _chat()[1], f"u1 not redacted in {session}"
        events = [e for e in await store.audit(session) if e.strategy == "redact"]
        assert len(events) == 1 and events[0].session_id == session
        assert events[0].params["message_ids"] == ["u1"]
        assert (await store.session(session)).revision == revisions[session] + 1
    parent = {m.message_id: m.message for m in await store.history("s")}
    fork = {m.message_id: m.message for m in await store.history("f")}
    assert parent["u1"].text == fork["u1"].text
    # a message only the fork holds stays the fork's
    await store.redact("f", ["own"], reason="pii")
    assert len([e for e in await store.audit("s") if e.strategy == "redact"]) == 1


async def test_redaction_reaches_a_superseded_tail(chat_store: HistoryBackend) -> None:
    store = chat_store
    rewound = await store.rewind("s", to="a2")
    assert rewound is not None
    tail = rewound.params["tail_session_id"]
    await store.redact("s", ["u1"], reason="pii")
    stored = {m.message_id: m for m in await store.history(tail)}
    assert stored["u1"].message != _chat()[1]
    # a tail may be redacted itself, and that reaches the session
    await store.redact(tail, ["a1"], reason="pii")
    assert {m.message_id: m for m in await store.history("s")}["a1"].message != _chat()[2]
    await store.redact(tail, ["u3"], reason="pii")  # the tail's own message
    assert [e.strategy for e in await store.audit(tail)] == ["redact"] * 3


# -- refusals of shared rows --------------------------------------------------------------


async def test_retract_last_of_a_shared_message_is_refused(chat_store: HistoryBackend) -> None:
    store = chat_store
    await store.fork("s", new_session_id="f")
    with pytest.raises(InvalidInput, match="'f'"):
        await store.retract_last("s")
    with pytest.raises(InvalidInput, match="'s'"):
        await store.retract_last("f")
    await store.append("f", [user("own")])
    retracted = await store.retract_last("f")
    assert retracted is not None and retracted.message_id == "own"
    assert await _ids(store, "s") == IDS


async def test_recount_of_a_session_sharing_messages_is_refused(
    chat_store: HistoryBackend,
) -> None:
    store = chat_store
    await store.fork("s", at="u1", new_session_id="f")
    with pytest.raises(InvalidInput, match="'f'"):
        await store.recount("s")
    with pytest.raises(InvalidInput, match="'s'"):
        await store.recount("f")
    await store.append("lonely", [user("x")])
    assert (await store.recount("lonely")).session_id == "lonely"


# -- rewind ------------------------------------------------------------------------------


async def test_rewind_sets_the_tail_aside(chat_store: HistoryBackend) -> None:
    store = chat_store
    before = await store.history("s", include_excluded=True)
    event = await store.rewind("s", to="u2")
    assert event is not None
    assert (event.phase, event.strategy, event.outcome) == ("rewind", "rewind", "applied")
    tail = event.params["tail_session_id"]
    assert TAIL_ID.fullmatch(tail)
    assert event.params == {"to": "u2", "tail_session_id": tail, "messages": 2}
    assert await _ids(store, "s") == IDS[:6]
    assert await _sent(store, "s") == IDS[:6]
    tail_history = await store.history(tail, include_excluded=True)
    assert [m.message_id for m in tail_history] == [m.message_id for m in before]
    assert {m.session_id for m in tail_history} == {tail}
    (branch,) = await store.branches("s")
    assert (branch.relation, branch.session_id) == ("tail", tail)
    assert (branch.fork_message_id, branch.event_id, branch.messages) == ("u2", event.id, 2)
    assert [s.session_id for s in await store.sessions()] == ["s"]
    # appends continue at the cut: the tail's ids and seqs are free again
    await store.append("s", [assistant("a3", "snow")])
    again = (await store.history("s"))[-1]
    assert (again.message_id, again.seq) == ("a3", before[6].seq)
    assert again.message != before[6].message


async def test_rewind_to_the_last_message_changes_nothing(chat_store: HistoryBackend) -> None:
    store = chat_store
    revision = (await store.session("s")).revision
    assert await store.rewind("s", to="u3") is None
    assert (await store.session("s")).revision == revision
    assert await store.branches("s") == []


async def test_rewind_to_none_sets_everything_aside(chat_store: HistoryBackend) -> None:
    store = chat_store
    event = await store.rewind("s", to=None)
    assert event is not None and event.params["messages"] == len(IDS)
    assert await store.history("s", include_excluded=True) == []
    assert await store.context("s") == []
    await store.append("s", _chat()[:2])
    assert [m.seq for m in await store.history("s")] == [1, 2]
    assert await store.rewind("s", to=None) is not None
    assert await store.rewind("s", to=None) is None


async def test_rewind_refusals(chat_store: HistoryBackend) -> None:
    store = chat_store
    with pytest.raises(InvalidInput, match="nope"):
        await store.rewind("s", to="nope")
    with pytest.raises(InvalidInput, match="a1"):
        await store.rewind("s", to="a1")
    with pytest.raises(SessionNotFound):
        await store.rewind("missing", to=None)


async def test_a_tail_is_read_only_but_redacted_and_deleted(chat_store: HistoryBackend) -> None:
    store = chat_store
    event = await store.rewind("s", to="a2")
    assert event is not None
    tail = event.params["tail_session_id"]
    refused: list[Callable[[], Awaitable[object]]] = [
        lambda: store.append(tail, [user("x")]),
        lambda: store.compact(tail, ExcludeOldest(1)),
        lambda: store.pin(tail, ["group_u1"]),
        lambda: store.unpin(tail, ["group_u1"]),
        lambda: store.restore(tail, group_ids=["group_u1"]),
        lambda: store.set_metadata(tail, {"k": 1}),
        lambda: store.retract_last(tail),
        lambda: store.recount(tail),
        lambda: store.rewind(tail, to="u1"),
        lambda: store.import_messages(tail, [user("x")]),
    ]
    for attempt in refused:
        with pytest.raises(InvalidInput, match=f"restore\\('s', event_id='{event.id}'\\)"):
            await attempt()
    assert len(await store.context(tail)) == len(IDS)
    assert (await store.why(tail, "u3")).in_context
    await store.delete_session(tail)
    assert await store.branches("s") == []
    with pytest.raises(SessionNotFound):
        await store.history(tail)
    with pytest.raises(InvalidInput, match=tail):
        await store.restore("s", event_id=event.id)


async def test_a_rewind_restored_after_further_appends(chat_store: HistoryBackend) -> None:
    store = chat_store
    before = await store.history("s", include_excluded=True)
    rewound = await store.rewind("s", to="u2")
    assert rewound is not None
    first_tail = rewound.params["tail_session_id"]
    await store.append("s", [assistant("a3", "snow"), user("u4", "ok")])
    after_rewind = await store.history("s", include_excluded=True)
    restored = await store.restore("s", event_id=rewound.id)
    assert restored is not None and restored.phase == "restore"
    second_tail = restored.params["tail_session_id"]
    assert restored.params == {"event_id": rewound.id, "tail_session_id": second_tail}
    assert TAIL_ID.fullmatch(second_tail) and second_tail != first_tail
    now = await store.history("s", include_excluded=True)
    assert [(m.message_id, m.seq, m.message) for m in now] == [
        (m.message_id, m.seq, m.message) for m in before
    ]
    assert [(m.message_id, m.message) for m in await store.history(second_tail)] == [
        (m.message_id, m.message) for m in after_rewind
    ]
    tails = await store.branches("s")
    assert [(b.relation, b.session_id, b.event_id, b.messages) for b in tails] == [
        ("tail", second_tail, restored.id, 2)
    ]
    with pytest.raises(InvalidInput, match=first_tail):
        await store.restore("s", event_id=rewound.id)
    # the restore's tail can be brought back in its turn
    back = await store.restore("s", event_id=restored.id)
    assert back is not None
    assert [(m.message_id, m.message) for m in await store.history("s")] == [
        (m.message_id, m.message) for m in after_rewind
    ]


async def test_a_restored_rewind_sets_the_prefix_state_since_aside_with_the_appends(
    chat_store: HistoryBackend,
) -> None:
    store = chat_store
    rewound = await store.rewind("s", to="u2")
    assert rewound is not None
    assert await store.compact("s", ExcludeOldest(1)) is not None  # group_u1
    await store.append("s", [assistant("a3", "snow")])
    restored = await store.restore("s", event_id=rewound.id)
    assert restored is not None
    tail = restored.params["tail_session_id"]
    assert await store.excluded("s") == []
    assert await _sent(store, "s") == IDS
    assert [g.group_id for g in await store.excluded(tail)] == ["group_u1"]
    assert "u1" not in await _sent(store, tail)


async def test_a_rewind_restored_with_nothing_appended_since(chat_store: HistoryBackend) -> None:
    store = chat_store
    rewound = await store.rewind("s", to="u2")
    assert rewound is not None
    restored = await store.restore("s", event_id=rewound.id)
    assert restored is not None and restored.params["tail_session_id"] is None
    assert await _ids(store, "s") == IDS
    assert await store.branches("s") == []


async def test_a_fork_of_a_superseded_tail(chat_store: HistoryBackend) -> None:
    store = chat_store
    rewound = await store.rewind("s", to="a2")
    assert rewound is not None
    await store.append("s", [user("u2", "something else")])
    fork = await store.fork("s", at="a3", new_session_id="f")
    assert (fork.parent_session_id, fork.fork_message_id) == ("s", "a3")
    stored = await store.history("f")
    assert [m.message_id for m in stored] == IDS[:7]
    assert stored[5].message == _chat()[5], "the prefix is the tail's, not the session's"
    # a message the session holds is cut from the session
    fork = await store.fork("s", at="u2", new_session_id="g")
    assert (await store.history("g"))[-1].message.text == "something else"


async def test_a_shallow_rewind_restored_after_a_deeper_one(chat_store: HistoryBackend) -> None:
    """The restored tail reads the session's prefix, then rows the deeper rewind's tail
    took: the session holds all of them again, in order, and forks of it too."""
    store = chat_store
    before = await _ids(store, "s")
    shallow = await store.rewind("s", to="u2")
    assert shallow is not None
    deeper = await store.rewind("s", to="u1")
    assert deeper is not None
    await store.append("s", [assistant("a9", "other")])
    restored = await store.restore("s", event_id=shallow.id)
    assert restored is not None
    assert await _ids(store, "s") == before
    assert await _sent(store, "s") == before
    await store.fork("s", at="a3", new_session_id="f")
    assert await _ids(store, "f") == before[:7]
    assert await _ids(store, restored.params["tail_session_id"]) == ["sys", "u1", "a9"]
    # the deeper rewind's tail still reads what it took
    assert await _ids(store, deeper.params["tail_session_id"]) == before[:6]
    await store.append("s", [user("u4", "more")])
    assert await _ids(store, "s") == [*before, "u4"]


async def test_both_rewinds_restored_in_turn(chat_store: HistoryBackend) -> None:
    store = chat_store
    before = await _ids(store, "s")
    shallow = await store.rewind("s", to="t1")
    assert shallow is not None
    to_start = await store.rewind("s", to=None)
    assert to_start is not None
    assert await store.restore("s", event_id=shallow.id) is not None
    assert await _ids(store, "s") == before
    # the tail of the rewind to the start held what the session held then
    again = await store.restore("s", event_id=to_start.id)
    assert again is not None
    assert await _ids(store, "s") == before[:4]
    assert await _sent(store, "s") == before[:4]
    assert await _ids(store, again.params["tail_session_id"]) == before


async def test_a_rewind_to_the_start_restored_under_forks_of_forks(
    chat_store: HistoryBackend,
) -> None:
    store = chat_store
    before = await _ids(store, "s")
    await store.fork("s", new_session_id="f0")
    await store.append("f0", [user("v1", "fork")])
    await store.fork("f0", new_session_id="f1")
    await store.append("f1", [user("w1", "fork of fork")])
    rewound = await store.rewind("s", to=None)
    assert rewound is not None
    assert await store.restore("s", event_id=rewound.id) is not None
    assert await _ids(store, "s") == before
    assert await _ids(store, "f0") == [*before, "v1"]
    assert await _ids(store, "f1") == [*before, "v1", "w1"]
    assert await _sent(store, "f1") == [*before, "v1", "w1"]


async def test_retracting_the_last_row_a_deleted_parent_left(chat_store: HistoryBackend) -> None:
    """A fork of a fork whose parents are deleted reads their kept rows; retracting the
    one row the nearer parent had left takes it back and keeps the rest."""
    store = chat_store
    before = await _ids(store, "s")
    await store.fork("s", new_session_id="f0")
    await store.append("f0", [user("v1", "fork")])
    await store.fork("f0", new_session_id="f2")
    await store.delete_session("s")
    await store.delete_session("f0")
    retracted = await store.retract_last("f2")
    assert retracted is not None and retracted.message_id == "v1"
    assert await _ids(store, "f2") == before
    assert await _sent(store, "f2") == before


# -- branches and listing ----------------------------------------------------------------


async def test_branches_lists_parent_then_forks_then_tails(chat_store: HistoryBackend) -> None:
    store = chat_store
    await store.fork("s", at="a2", new_session_id="f1")
    await store.fork("s", at="u2", new_session_id="f0")
    rewound = await store.rewind("s", to="u2")
    assert rewound is not None
    tail = rewound.params["tail_session_id"]
    await store.append("s", [user("u9")])
    await store.fork("f1", new_session_id="ff")
    branches = await store.branches("s")
    assert [(b.relation, b.session_id, b.fork_message_id) for b in branches] == [
        ("fork", "f1", "a2"),
        ("fork", "f0", "u2"),
        ("tail", tail, "u2"),
    ]
    fork_events = {s: (await store.audit(s, phase="fork"))[0].id for s in ("f1", "f0", "ff")}
    assert [b.event_id for b in branches] == [fork_events["f1"], fork_events["f0"], rewound.id]
    assert [b.messages for b in branches] == [5, 6, 2]
    f1 = await store.branches("f1")
    assert [(b.relation, b.session_id, b.fork_message_id, b.event_id) for b in f1] == [
        ("parent", "s", "a2", fork_events["f1"]),
        ("fork", "ff", "a2", fork_events["ff"]),
    ]
    assert f1[0].messages == 7
    await store.append("lonely", [user("x")])
    assert await store.branches("lonely") == []
    with pytest.raises(SessionNotFound):
        await store.branches("missing")
    listed = [s.session_id for s in await store.sessions()]
    assert listed == ["f0", "f1", "ff", "lonely", "s"]
    assert (await store.stats()).sessions == 5


async def test_reads_of_a_fork_cover_its_whole_conversation(chat_store: HistoryBackend) -> None:
    store = chat_store
    assert await store.compact("s", ExcludeOldest(1)) is not None
    await store.fork("s", new_session_id="f")
    await store.append("f", [assistant("a4", "bye")])
    stored = await store.history("f", include_excluded=True)
    assert [m.message_id for m in stored] == [*IDS, "a4"]
    assert {m.session_id for m in stored} == {"f"}
    streamed = [m async for m in store.aiter_history("f", include_excluded=True)]
    assert streamed == stored
    assert await _sent(store, "f") == [i for i in [*IDS, "a4"] if i != "u1"]
    why = await store.why("f", "u1")
    assert not why.in_context and why.group_id == "group_u1"
    assert (await store.why("f", "a1")).in_context
    stats = await store.stats("f")
    assert (stats.stored_messages, stats.active_messages) == (len(IDS) + 1, len(IDS))
    assert stats.events == 1
    assert [g.group_id for g in await store.excluded("f")] == ["group_u1"]
    info = await store.session("f")
    assert info.stored_messages == len(IDS) + 1
    view = await store.view("f")
    assert view.groups[0].group_id == "group_sys"


# -- deleting and purging --------------------------------------------------------------


async def test_deleting_a_parent_leaves_its_forks(chat_store: HistoryBackend) -> None:
    store = chat_store
    await store.fork("s", at="a2", new_session_id="f")
    rewound = await store.rewind("s", to="u2")
    assert rewound is not None
    tail = rewound.params["tail_session_id"]
    await store.delete_session("s")
    with pytest.raises(SessionNotFound):
        await store.history(tail)
    info = await store.session("f")
    assert info.parent_session_id is None
    assert await _ids(store, "f") == IDS[:5]
    assert await store.branches("f") == []
    await store.append("f", [user("u2f")])
    assert await store.compact("f", SummarizeOldest(2)) is not None
    await store.append("s", [user("fresh")])  # the id is free at once
    assert await _ids(store, "s") == ["fresh"]
    assert (await store.session("f")).parent_session_id is None


async def test_purge_keeps_the_rows_forks_read(stores: Stores) -> None:
    store = await stores.open()
    await store.append("s", _chat())
    await asyncio.sleep(0.01)
    fork = await store.fork("s", at="a2", new_session_id="f")
    dry = await store.purge(older_than=fork.updated_at, dry_run=True)
    assert dry.sessions == ("s",) and dry.kept_messages == 5
    report = await store.purge(older_than=fork.updated_at)
    assert report.sessions == ("s",) and report.kept_messages == 5
    assert report.messages == len(IDS) - 5
    assert [s.session_id for s in await store.sessions()] == ["f"]
    assert await _ids(store, "f") == IDS[:5]
    assert (await store.session("f")).parent_session_id is None


async def test_a_tail_names_its_session_and_the_cut_and_lists_no_branch(
    chat_store: HistoryBackend,
) -> None:
    store = chat_store
    rewound = await store.rewind("s", to="a2")
    assert rewound is not None
    tail = await store.session(rewound.params["tail_session_id"])
    assert (tail.parent_session_id, tail.fork_message_id) == ("s", "a2")
    assert await store.branches(tail.session_id) == []


async def test_the_export_of_a_fork_covers_its_whole_conversation(
    chat_store: HistoryBackend,
) -> None:
    store = chat_store
    await store.fork("s", at="a2", new_session_id="f")
    await store.append("f", [user("own")])
    chunks = [c async for c in export_sessions(store, ["f"], format="jsonl")]
    exported = "".join(chunks)
    for message in [*(await store.history("f", include_excluded=True))]:
        assert message.message_id in exported
    assert "own" in exported and "a2" in exported


async def test_the_fork_event_counts_from_nothing_to_the_forks_totals(
    chat_store: HistoryBackend,
) -> None:
    store = chat_store
    fork = await store.fork("s", at="a2", new_session_id="f")
    (event,) = await store.audit("f")
    before = (event.messages_before, event.groups_before, event.tokens_before)
    after = (event.messages_after, event.groups_after, event.tokens_after)
    assert before == (0, 0, 0)
    assert after == (fork.active_messages, fork.active_groups, fork.active_tokens)
    assert fork.revision == 1
