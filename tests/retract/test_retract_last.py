"""``retract_last``: the same behaviour on the in-memory store, SQLite and PostgreSQL.

The oracle is a second session that never stored the retracted messages: after taking
back the newest messages one by one, a session must read exactly like one that was only
given the prefix, and appending the rest again must read like the whole conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from strategies.changeset import ChangeSet, Exclusion, Reduction, SummaryInsert
from strategies.messages import Message
from strategies.view import View
from tests.groups.conversations import assistant, call, reasoning, result, system, tool, user
from tests.retract.readings import reading

CONVERSATION: list[Message] = [
    system("s1", "rules"),
    user("u1", "question"),
    assistant("r1", reasoning()),
    assistant("a1", call("c1"), call("c2")),
    tool("t1", result("c1")),
    user("u2", "and?"),
    tool("t2", result("c2")),  # a late result joins its call's group
    assistant("a2", call("c3")),
    tool("t3", result("nope")),  # an orphan
    assistant("r2", reasoning()),
    assistant("a3", "done"),
]


async def stored_prefix(
    store: HistoryBackend, session_id: str, messages: Sequence[Message]
) -> None:
    for start in range(0, len(messages), 3):
        await store.append(session_id, messages[start : start + 3])


@pytest.mark.parametrize("keep", range(2, len(CONVERSATION)))
async def test_retracting_reads_like_never_storing(any_store: HistoryBackend, keep: int) -> None:
    await stored_prefix(any_store, "s", CONVERSATION)
    retracted = [await any_store.retract_last("s") for _ in range(len(CONVERSATION) - keep)]
    assert [r.message_id for r in retracted if r is not None] == [
        m.message_id for m in reversed(CONVERSATION[keep:])
    ]
    await stored_prefix(any_store, "oracle", CONVERSATION[:keep])
    assert await reading(any_store, "s") == await reading(any_store, "oracle")
    # and the calls left open are open again: the rest appends as it did the first time
    await any_store.append("s", CONVERSATION[keep:])
    await any_store.append("oracle", CONVERSATION[keep:])
    assert await reading(any_store, "s") == await reading(any_store, "oracle")


async def test_returns_the_message_as_stored_and_audits_it(any_store: HistoryBackend) -> None:
    await any_store.append("s", CONVERSATION[:5])
    [*_, newest] = await any_store.history("s")
    taken = await any_store.retract_last("s")
    assert taken == newest
    [event] = await any_store.audit("s")
    assert (event.phase, event.strategy) == ("manual", "retract")
    assert event.params == {
        "message_id": newest.message_id,
        "seq": newest.seq,
        "role": "tool",
        "group_id": newest.group_id,
    }
    assert event.messages_before - event.messages_after == 1
    assert event.tokens_before - event.tokens_after == newest.token_count
    assert await any_store.audit("s", strategy="retract") == [event]
    with pytest.raises(InvalidInput, match="not stored"):
        await any_store.why("s", newest.message_id)


async def test_empty_and_missing_sessions(any_store: HistoryBackend) -> None:
    with pytest.raises(SessionNotFound):
        await any_store.retract_last("nobody")
    await any_store.set_metadata("blank", {"k": 1})
    assert await any_store.retract_last("blank") is None
    await any_store.append("one", [user("u1")])
    assert (await any_store.retract_last("one")) is not None
    assert await any_store.retract_last("one") is None
    assert (await any_store.session("one")).stored_messages == 0
    await any_store.append("one", [user("u1", "again")])
    assert [m.seq for m in await any_store.history("one")] == [1]


class Planned:
    """A strategy that returns a fixed change set."""

    name = "fixed"

    def __init__(self, changes: ChangeSet) -> None:
        self.changes = changes

    def params(self) -> dict[str, Any]:
        return {}

    async def plan(self, view: View) -> ChangeSet:
        return self.changes


def summarize(summary: Message, *group_ids: str) -> Planned:
    return Planned(ChangeSet(summaries=(SummaryInsert(summary, group_ids),)))


async def test_refuses_what_compaction_touched(any_store: HistoryBackend) -> None:
    await any_store.append("x", [user("u1"), assistant("a1", "hi")])
    await any_store.compact("x", Planned(ChangeSet(exclusions=(Exclusion("group_a1", "test"),))))
    with pytest.raises(InvalidInput, match="excluded"):
        await any_store.retract_last("x")

    await any_store.append("y", [user("u1"), assistant("a1", "hi")])
    summary = Message.text_message("assistant", "summary", message_id="sum1")
    await any_store.compact("y", summarize(summary, "group_a1"))
    with pytest.raises(InvalidInput, match="summarized"):
        await any_store.retract_last("y")

    await any_store.append("z", [user("u1"), assistant("a1", call("c1")), tool("t1", result("c1"))])
    short = tool("t1", result("c1", "short"))
    reduce = Reduction("group_a1", short, "test", tokens_before=10, tokens_after=1)
    await any_store.compact("z", Planned(ChangeSet(reductions=(reduce,))))
    with pytest.raises(InvalidInput, match="reduced"):
        await any_store.retract_last("z")
    for session_id in ("x", "y", "z"):
        assert len(await any_store.history(session_id, include_excluded=True)) >= 2
        assert [e.strategy for e in await any_store.audit(session_id)] == ["fixed"]


async def test_refuses_to_split_a_merged_group(any_store: HistoryBackend) -> None:
    merged = [user("u1"), assistant("a1", call("x")), assistant("a2", call("y"))]
    await any_store.append("s", [*merged, tool("t1", result("x"), result("y"))])
    with pytest.raises(InvalidInput, match="split"):
        await any_store.retract_last("s")
    assert len(await any_store.history("s")) == 4


async def test_a_summary_stored_after_keeps_seq_unique(any_store: HistoryBackend) -> None:
    turns = [user("u1"), assistant("a1", "old"), user("u2"), assistant("a2", "new")]
    await any_store.append("s", turns)
    summary = Message.text_message("assistant", "summary", message_id="sum1")
    await any_store.compact("s", summarize(summary, "group_a1"))
    taken = await any_store.retract_last("s")
    assert taken is not None and taken.message_id == "a2"
    await any_store.append("s", [assistant("a3", "again")])
    seqs = [m.seq for m in await any_store.history("s", include_excluded=True)]
    assert len(seqs) == len(set(seqs)) == 5


async def test_a_retracted_early_result_waits_no_more(any_store: HistoryBackend) -> None:
    """A message stored again under a retracted early result's id does not answer the
    retracted result's call."""
    await any_store.append("s", [user("u1", "a"), tool("t1", result("c9", "early"))])
    await any_store.retract_last("s")
    await any_store.append("s", [tool("t1", result("c8", "other"))])
    await any_store.append("s", [assistant("a1", call("c9")), user("u2", "b")])
    stored = {m.message_id: m.group_id for m in await any_store.history("s")}
    assert stored == {"u1": "group_u1", "t1": "group_t1", "a1": "group_a1", "u2": "group_u2"}
    view = {g.group_id: g for g in (await any_store.view("s")).groups}
    assert (view["group_a1"].pending_calls, view["group_t1"].orphan) == (1, True)
