"""Group annotation properties, on thousands of generated conversations.

Every property runs on :func:`tests.groups.conversations.conversations`; together they
see several thousand conversations.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.groups import AnnotationState, annotate_all, group_id_for, kind_is_settled
from strategies.messages import Message
from tests.groups.conversations import (
    Folded,
    conversations,
    declared_count,
    fold,
    linked_pairs,
    split_annotate,
)
from tests.groups.support import early_results

# Together the properties below see 3300 generated conversations.
PROPERTY = settings(max_examples=1000, deadline=None)


def whole(messages: list[Message]) -> Folded:
    return fold([annotate_all(messages)])


@PROPERTY
@given(conversations())
def test_every_split_point_gives_the_whole_annotation(messages: list[Message]) -> None:
    expected = whole(messages)
    for cut in range(len(messages) + 1):
        got = fold(split_annotate(messages, [cut]))
        assert got.group_of == expected.group_of, cut
        assert got.groups == expected.groups, cut


@settings(max_examples=800, deadline=None)
@given(conversations(), st.data())
def test_many_chunks_through_json_give_the_whole_annotation(
    messages: list[Message], data: st.DataObject
) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(messages))))
    annotations = split_annotate(messages, cuts, through_json=True)
    expected = annotate_all(messages)
    got = fold(annotations)
    assert got.group_of == fold([expected]).group_of
    assert got.groups == fold([expected]).groups
    assert annotations[-1].state == expected.state
    assert AnnotationState.from_json(expected.state.to_json()) == expected.state


@settings(max_examples=1500, deadline=None)
@given(conversations())
def test_groups_are_well_formed_and_results_join_their_calls(messages: list[Message]) -> None:
    folded = whole(messages)
    check_well_formed(messages, folded)
    check_linking(messages, folded)


def check_well_formed(messages: list[Message], folded: Folded) -> None:
    """Every message in one group; ids, positions, turns, reasoning flags and roles agree."""
    members = folded.members()
    position = {m.message_id: i for i, m in enumerate(messages)}
    by_id = {m.message_id: m for m in messages}
    # every message has a group, every group has messages, nothing else is reported
    assert set(folded.group_of) == set(position)
    assert set(members) == set(folded.groups)
    turn = 0
    turns: list[int] = []
    for message in messages:
        turn += message.role == "user"
        turns.append(turn)
    early = {messages[i].message_id for i in early_results(messages)}
    for group_id, ids in members.items():
        group = folded.groups[group_id]
        # named and placed after its first message that is not an early result
        first = next((m for m in ids if m not in early), ids[0])
        assert group_id == group.group_id == group_id_for(first)
        assert group.first_position == position[first]
        assert group.turn == turns[position[first]]
        has_reasoning = any(c.type == "reasoning" for m in ids for c in by_id[m].contents)
        assert group.has_reasoning == has_reasoning
        roles = {by_id[m].role for m in ids}
        if group.kind in ("system", "user"):
            assert ids == [first] and roles == {group.kind}
        if group.orphan:
            assert ids == [first] and roles == {"tool"} and group.kind == "tool_call"


def check_linking(messages: list[Message], folded: Folded) -> None:
    """Results sit with the call they answer; pending counts are exact; orphans alone."""
    ids = [m.message_id for m in messages]
    pairs = linked_pairs(messages)
    for call_index, result_index in pairs:
        assert folded.group_of[ids[call_index]] == folded.group_of[ids[result_index]]
    answered = Counter(folded.group_of[ids[c]] for c, _ in pairs)
    declared = Counter[str]()
    for message in messages:
        declared[folded.group_of[message.message_id]] += declared_count(message)
    for group_id, group in folded.groups.items():
        assert group.pending_calls == declared[group_id] - answered[group_id]
        if group.kind != "tool_call":
            assert declared[group_id] == 0
    # a tool message none of whose results links is an orphan group of its own
    linked_results = {r for _, r in pairs}
    for index, message in enumerate(messages):
        group = folded.groups[folded.group_of[message.message_id]]
        if message.role == "tool":
            assert group.orphan == (index not in linked_results)


@settings(max_examples=800, deadline=None)
@given(conversations(), st.data())
def test_a_settled_kind_is_the_kind_the_group_keeps(
    messages: list[Message], data: st.DataObject
) -> None:
    """The kind of a message's group when it is placed, for a message whose kind is
    settled, is its group's kind once everything is appended, in any chunks, and after
    any newest messages are taken back (what a store writes with the row stays true)."""
    cuts = data.draw(st.lists(st.integers(0, len(messages))))
    annotations = split_annotate(messages, cuts)
    placed: dict[str, str] = {}
    for annotation in annotations:
        for message_id, group_id in annotation.message_groups:
            placed[message_id] = annotation.groups[group_id].kind
    kept = data.draw(st.integers(0, len(messages)))
    for prefix in (messages, messages[:kept]):
        final = whole(prefix)
        for message in prefix:
            if kind_is_settled(message):
                kind = final.groups[final.group_of[message.message_id]].kind
                assert placed[message.message_id] == kind, message.message_id
