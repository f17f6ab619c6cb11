"""``retract_last`` in a session where compaction changed how later messages were grouped.

A result stored before its call waits for it, and the call joins it, unless compaction
excluded or summarized the waiting result first: then the call stays pending and the
next result for its id answers it (``docs/groups.md``, rule 10). Annotating the whole
history knows nothing of compaction, so a retraction must annotate the session's
messages as its appends did. The oracle is a second session given the same appends,
compactions and restores without the retracted messages: after taking messages back,
both must read alike, and appending the rest must read alike too (the same calls open,
the same results waiting).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput
from strategies.changeset import ChangeSet, Exclusion, SummaryInsert
from strategies.messages import Message
from tests.conformance.toy_strategies import Fixed
from tests.groups.conversations import assistant, call, result, tool, user
from tests.retract.readings import reading
from tests.strategies.invariants import assert_projection_invariants


@dataclass(frozen=True)
class Compact:
    """A compaction step: exclude (or summarize) ``group_id``."""

    group_id: str
    summary: bool = False

    def strategy(self) -> Fixed:
        if self.summary:
            gist = user(f"sum_{self.group_id}", "gist")
            return Fixed(ChangeSet(summaries=(SummaryInsert(gist, (self.group_id,)),)))
        return Fixed(ChangeSet(exclusions=(Exclusion(self.group_id, "test"),)))


@dataclass(frozen=True)
class Restore:
    """A restore step: re-include ``group_id`` (and pin it)."""

    group_id: str


Step = list[Message] | Compact | Restore


def _excluded_early_result(summary: bool) -> list[Step]:
    """The early result ``t1`` is compacted before its call ``a1`` comes; ``t2``, a second
    result for the id, answers ``a1`` later, with user messages around."""
    return [
        [user("u1", "a"), tool("t1", result("c_a", "early")), user("u2", "b")],
        Compact("group_t1", summary),
        [assistant("a1", call("c_a")), user("u3", "c")],
        [user("u4", "d")],
        [tool("t2", result("c_a", "again"))],
        [user("u5", "e")],
    ]


RESTORED: list[Step] = [
    # t1 answers two calls: compacted when a1 (c_x) comes, restored when a2 (c_y) comes,
    # so a1 stays pending (t2 answers it) and a2 joins t1
    [user("u1", "a"), tool("t1", result("c_x", "early"), result("c_y", "early")), user("u2")],
    Compact("group_t1"),
    [assistant("a1", call("c_x")), user("u3", "c")],
    Restore("group_t1"),
    [assistant("a2", call("c_y")), user("u4", "d")],
    [tool("t2", result("c_x", "again"))],
    [user("u5", "e")],
]

SCENARIOS = {
    "excluded": _excluded_early_result(summary=False),
    "summarized": _excluded_early_result(summary=True),
    "restored": RESTORED,
}


def _messages(steps: Sequence[Step]) -> list[Message]:
    return [m for step in steps if isinstance(step, list) for m in step]


async def _replay(store: HistoryBackend, session_id: str, steps: Sequence[Step], keep: int) -> None:
    """Run ``steps`` on ``session_id`` with the first ``keep`` messages only, up to the
    first message left out."""
    kept = {m.message_id for m in _messages(steps)[:keep]}
    for step in steps:
        if isinstance(step, Compact):
            assert await store.compact(session_id, step.strategy()) is not None
        elif isinstance(step, Restore):
            assert await store.restore(session_id, group_ids=[step.group_id]) is not None
        else:
            chunk = [m for m in step if m.message_id in kept]
            if chunk:
                await store.append(session_id, chunk)
            if len(chunk) < len(step):
                return


async def _rest(store: HistoryBackend, session_id: str, steps: Sequence[Step], keep: int) -> None:
    """Append the messages after the first ``keep``, in the appends of ``steps``."""
    later = {m.message_id for m in _messages(steps)[keep:]}
    for step in steps:
        if isinstance(step, list) and (chunk := [m for m in step if m.message_id in later]):
            await store.append(session_id, chunk)


def _cases() -> list[tuple[str, int]]:
    """Each scenario with each number of messages to keep, down to the compacted group
    (or, in ``restored``, to the call that joined the restored result: a retraction that
    would split its group is refused)."""
    floors = {"excluded": 3, "summarized": 3, "restored": 6}
    return [
        (name, keep)
        for name, steps in SCENARIOS.items()
        for keep in range(floors[name], len(_messages(steps)))
    ]


@pytest.mark.parametrize(("scenario", "keep"), _cases())
async def test_retracting_reads_like_never_storing(
    any_store: HistoryBackend, scenario: str, keep: int
) -> None:
    steps = SCENARIOS[scenario]
    messages = _messages(steps)
    await _replay(any_store, "s", steps, len(messages))
    for expected in reversed(messages[keep:]):
        taken = await any_store.retract_last("s")
        assert taken is not None and taken.message_id == expected.message_id
        assert_projection_invariants(await any_store.context("s"))
    await _replay(any_store, "oracle", steps, keep)
    assert await reading(any_store, "s") == await reading(any_store, "oracle")
    # the calls left open are open again, the results waiting wait again
    await _rest(any_store, "s", steps, keep)
    await _rest(any_store, "oracle", steps, keep)
    assert await reading(any_store, "s") == await reading(any_store, "oracle")
    assert_projection_invariants(await any_store.context("s"))


async def test_retracting_the_second_result_leaves_its_call_pending(
    any_store: HistoryBackend,
) -> None:
    """The call is pending again: not sent alone, and sent with its result in flight."""
    await _replay(any_store, "s", _excluded_early_result(summary=False), 7)
    taken = await any_store.retract_last("s")
    assert taken is not None and taken.message_id == "t2"
    view = {g.group_id: g for g in (await any_store.view("s")).groups}
    assert (view["group_a1"].message_count, view["group_a1"].pending_calls) == (1, 1)
    assert [m.message_id for m in await any_store.context("s")] == ["u1", "u2", "u3", "u4"]
    again = tool("t2", result("c_a", "again"))
    sent = await any_store.context("s", pending=[again])
    assert [m.message_id for m in sent] == ["u1", "u2", "a1", "t2", "u3", "u4"]


async def test_retracting_a_call_lets_its_compacted_result_wait_again(
    any_store: HistoryBackend,
) -> None:
    """Before the call came, its result waited for it: once restored, the call joins it."""
    steps = _excluded_early_result(summary=False)
    await _replay(any_store, "s", steps, 5)
    for _ in range(2):
        await any_store.retract_last("s")
    await any_store.restore("s", group_ids=["group_t1"])
    await any_store.append("s", [assistant("a1", call("c_a"))])
    stored = {m.message_id: m.group_id for m in await any_store.history("s")}
    assert stored["t1"] == stored["a1"] == "group_a1"
    view = {g.group_id: g for g in (await any_store.view("s")).groups}
    assert (view["group_a1"].message_count, view["group_a1"].pending_calls) == (2, 0)


async def test_refuses_to_split_a_call_from_the_restored_result_it_joined(
    any_store: HistoryBackend,
) -> None:
    await _replay(any_store, "s", RESTORED, 6)
    with pytest.raises(InvalidInput, match="split"):
        await any_store.retract_last("s")


async def test_refuses_when_the_stored_groups_no_longer_tell_how_a_call_was_annotated(
    any_store: HistoryBackend,
) -> None:
    """``b`` was kept apart from ``t`` (compacted then), and ``m`` merged them later: the
    stored groups read as if ``b`` had joined ``t``, and annotating so does not give them
    (``u`` would be an orphan). Refused, on every backend, and nothing changes."""
    await any_store.append("s", [user("u1"), tool("t", result("X"), result("Y")), user("u2")])
    await any_store.compact("s", Compact("group_t").strategy())
    await any_store.append("s", [assistant("b", call("X"), call("Z"))])
    await any_store.restore("s", group_ids=["group_t"])
    joined = assistant("bY", call("Y"), call("V"))
    await any_store.append(
        "s", [joined, tool("u", result("X")), tool("m", result("Z"), result("V"))]
    )
    await any_store.append("s", [user("w")])
    before = await reading(any_store, "s")
    assert {m.group_id for m in await any_store.history("s") if m.role != "user"} == {"group_b"}
    with pytest.raises(InvalidInput, match="does not give its stored groups"):
        await any_store.retract_last("s")
    assert await reading(any_store, "s") == before
