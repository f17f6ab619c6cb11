"""A result stored before its call joins the call when it arrives, on every backend.

Both used to stay out of every context for good, as ``orphan_result`` and
``stale_pending_call``. The rule (``strategies/groups.py``, ``docs/groups.md``): the
call's group absorbs the waiting orphan and keeps the call's id, turn and place; the
projection shows the call before its result. An orphan that compaction excluded or
summarized before the call arrived joins nothing (the call stays pending); a pinned
orphan passes its pin to the joined group.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from store.contract import HistoryBackend
from strategies.changeset import ChangeSet, Exclusion, SummaryInsert
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from strategies.view import View

TOKENIZER = CharacterEstimatorTokenizer()


def _user(text: str, message_id: str) -> Message:
    return Message.text_message("user", text, message_id=message_id)


def _result(call_id: str = "c1") -> Message:
    return Message(
        role="tool",
        message_id=f"r_{call_id}",
        contents=[FunctionResultContent(call_id=call_id, result=f"result of {call_id}")],
    )


def _call(call_id: str = "c1") -> Message:
    return Message(
        role="assistant",
        message_id=f"a_{call_id}",
        contents=[FunctionCallContent(call_id=call_id, name="lookup", arguments={"q": 1})],
    )


def _ids(messages: list[Message]) -> list[str]:
    return [m.message_id for m in messages]


@dataclass(frozen=True)
class _Exclude:
    """Excludes the given groups (or summarizes them, with ``summary``)."""

    groups: tuple[str, ...]
    summary: bool = False

    @property
    def name(self) -> str:
        return "test_exclude"

    def params(self) -> dict[str, object]:
        return {"groups": list(self.groups)}

    async def plan(self, view: View) -> ChangeSet:
        if self.summary:
            text = Message.text_message("assistant", "summary", message_id="sum1")
            return ChangeSet(summaries=(SummaryInsert(text, self.groups),), strategy=self.name)
        excluded = tuple(Exclusion(g, "test") for g in self.groups)
        return ChangeSet(exclusions=excluded, strategy=self.name)


async def _setup(store: HistoryBackend) -> None:
    await store.append("s", [_user("first", "u1"), _result()])
    await store.append("s", [_user("second", "u2")])


async def test_the_call_joins_its_early_result(any_store: HistoryBackend) -> None:
    await _setup(any_store)
    assert _ids(await any_store.context("s")) == ["u1", "u2"]  # the orphan is left out
    await any_store.append(
        "s", [_call(), Message.text_message("assistant", "done", message_id="t")]
    )
    assert _ids(await any_store.context("s")) == ["u1", "u2", "a_c1", "r_c1", "t"]
    view = await any_store.view("s")
    group = next(g for g in view.groups if g.group_id == "group_a_c1")
    assert (group.turn, group.message_count, group.orphan, group.pending_calls) == (2, 2, False, 0)
    assert "group_r_c1" not in {g.group_id for g in view.groups}
    stored = {m.message.message_id: m for m in await any_store.history("s")}
    assert stored["r_c1"].group_id == stored["a_c1"].group_id == "group_a_c1"
    assert _ids([m.message for m in await any_store.history("s")]) == [
        "u1",
        "r_c1",
        "u2",
        "a_c1",
        "t",
    ]  # the history keeps the order things were stored in
    assert (await any_store.why("s", "r_c1")).in_context


async def test_a_call_in_flight_shows_its_stored_result(any_store: HistoryBackend) -> None:
    await _setup(any_store)
    shown = await any_store.context("s", pending=[_call()])
    assert _ids(shown) == ["u1", "u2", "a_c1", "r_c1"]


@pytest.mark.parametrize("summary", [False, True], ids=["excluded", "summarized"])
async def test_a_compacted_orphan_joins_nothing(any_store: HistoryBackend, summary: bool) -> None:
    await _setup(any_store)
    await any_store.compact("s", _Exclude(("group_r_c1",), summary=summary))
    await any_store.append("s", [_call(), _user("third", "u3")])
    excluded = {g.group_id for g in await any_store.excluded("s")}
    assert "group_r_c1" in excluded  # as compaction left it, audit intact
    shown = _ids(await any_store.context("s"))
    assert "a_c1" not in shown and "r_c1" not in shown  # a stale pending call
    view = await any_store.view("s")
    call = next(g for g in view.groups if g.group_id == "group_a_c1")
    assert call.pending_calls == 1
    restored = await any_store.restore("s", group_ids=["group_r_c1"])
    assert restored is not None
    assert (await any_store.why("s", "r_c1")).reason == "orphan_result"


async def test_a_pinned_orphan_passes_its_pin_on(any_store: HistoryBackend) -> None:
    await _setup(any_store)
    assert await any_store.pin("s", ["group_r_c1"]) == ["group_r_c1"]
    await any_store.append("s", [_call()])
    view = await any_store.view("s")
    group = next(g for g in view.groups if g.group_id == "group_a_c1")
    assert group.pinned
    assert group.message_count == 2


async def test_one_result_message_for_two_later_calls(any_store: HistoryBackend) -> None:
    both = Message(
        role="tool",
        message_id="r_both",
        contents=[
            FunctionResultContent(call_id="c1", result="one"),
            FunctionResultContent(call_id="c2", result="two"),
        ],
    )
    await any_store.append("s", [_user("go", "u1"), both])
    await any_store.append("s", [_call("c1")])
    await any_store.append("s", [_user("again", "u2"), _call("c2")])
    shown = _ids(await any_store.context("s"))
    assert shown == ["u1", "a_c1", "a_c2", "r_both", "u2"]
    view = await any_store.view("s")
    assert [g.group_id for g in view.groups if g.kind == "tool_call"] == ["group_a_c1"]


async def test_the_first_early_result_of_an_id_is_the_one_joined(any_store: HistoryBackend) -> None:
    again = Message(
        role="tool",
        message_id="r_again",
        contents=[FunctionResultContent(call_id="c1", result="x")],
    )
    await any_store.append("s", [_user("go", "u1"), _result(), again])
    await any_store.append("s", [_call()])
    shown = _ids(await any_store.context("s"))
    assert shown == ["u1", "a_c1", "r_c1"]
    assert (await any_store.why("s", "r_again")).reason == "orphan_result"
