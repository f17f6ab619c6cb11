"""Group annotation, one test per case (issue #2 item 6)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from strategies.groups import (
    GROUP_KINDS,
    AnnotationState,
    GroupInfo,
    annotate,
    annotate_all,
    call_ids,
    group_id_for,
    result_ids,
)
from strategies.messages import Message
from tests.groups.conversations import (
    Folded,
    assistant,
    call,
    custom,
    fold,
    hosted_call,
    hosted_result,
    reasoning,
    result,
    system,
    text,
    tool,
    user,
)


def folded(messages: Sequence[Message]) -> Folded:
    return fold([annotate_all(messages)])


def partition(messages: Sequence[Message]) -> list[list[str]]:
    """Groups as lists of message ids, in order of their first message."""
    return list(folded(messages).members().values())


def info(messages: Sequence[Message], first_message_id: str) -> GroupInfo:
    return folded(messages).groups[group_id_for(first_message_id)]


def test_parallel_calls_with_one_result_message_each() -> None:
    msgs = [
        user("u"),
        assistant("a", call("c1"), call("c2")),
        tool("t1", result("c1")),
        tool("t2", result("c2")),
    ]
    assert partition(msgs) == [["u"], ["a", "t1", "t2"]]
    group = info(msgs, "a")
    assert (group.kind, group.pending_calls, group.orphan) == ("tool_call", 0, False)


def test_parallel_calls_answered_by_one_message() -> None:
    msgs = [
        user("u"),
        assistant("a", call("c1"), call("c2")),
        tool("t", result("c2"), result("c1")),
    ]
    assert partition(msgs) == [["u"], ["a", "t"]]
    assert info(msgs, "a").pending_calls == 0


def test_assistant_text_and_calls_in_one_message() -> None:
    msgs = [user("u"), assistant("a", text("let me look"), call("c1")), tool("t", result("c1"))]
    assert partition(msgs) == [["u"], ["a", "t"]]
    assert info(msgs, "a").kind == "tool_call"


def test_reasoning_only_messages_lead_into_a_call() -> None:
    msgs = [
        user("u"),
        assistant("r1", reasoning()),
        assistant("r2", reasoning()),
        assistant("a", call("c1")),
        tool("t", result("c1")),
    ]
    assert partition(msgs) == [["u"], ["r1", "r2", "a", "t"]]
    group = info(msgs, "r1")
    assert (group.kind, group.has_reasoning, group.first_position) == ("tool_call", True, 1)


def test_reasoning_only_between_call_and_results() -> None:
    msgs = [
        user("u"),
        assistant("a", call("c1")),
        assistant("r", reasoning()),
        tool("t", result("c1")),
    ]
    assert partition(msgs) == [["u"], ["a", "r", "t"]]
    assert info(msgs, "a").has_reasoning


def test_reasoning_run_not_leading_into_a_call_is_one_assistant_text_group() -> None:
    msgs = [user("u"), assistant("r1", reasoning()), assistant("r2", reasoning()), assistant("x")]
    assert partition(msgs) == [["u"], ["r1", "r2"], ["x"]]
    assert info(msgs, "r1").kind == "assistant_text"
    assert info(msgs, "r1").has_reasoning
    assert not info(msgs, "x").has_reasoning


def test_result_after_an_interleaved_message_is_linked_by_call_id() -> None:
    msgs = [
        user("u1"),
        assistant("a", call("c1")),
        user("u2", "still there?"),
        assistant("x", "waiting"),
        tool("t", result("c1")),
    ]
    assert partition(msgs) == [["u1"], ["a", "t"], ["u2"], ["x"]]
    assert info(msgs, "a").pending_calls == 0


def test_pending_call_is_its_own_group_and_counts_its_calls() -> None:
    msgs = [user("u"), assistant("a", call("c1"), call("c2")), tool("t", result("c1"))]
    assert partition(msgs) == [["u"], ["a", "t"]]
    assert info(msgs, "a").pending_calls == 1
    state = annotate_all(msgs).state
    assert dict(state.open_calls) == {"c2": group_id_for("a")}
    assert set(state.pending_groups) == {group_id_for("a")}


def test_orphan_result_is_its_own_flagged_group() -> None:
    msgs = [user("u"), tool("t", result("nobody"))]
    assert partition(msgs) == [["u"], ["t"]]
    group = info(msgs, "t")
    assert (group.kind, group.orphan, group.pending_calls) == ("tool_call", True, 0)
    assert not info(msgs, "u").orphan


def test_orphan_result_right_after_a_call_group_stays_apart() -> None:
    msgs = [assistant("a", call("c1")), tool("t1", result("c1")), tool("t2", result("zz"))]
    assert partition(msgs) == [["a", "t1"], ["t2"]]
    assert info(msgs, "t2").orphan


def test_reused_call_id_after_being_answered_links_to_the_new_call() -> None:
    msgs = [
        assistant("a1", call("c")),
        tool("t1", result("c")),
        user("u"),
        assistant("a2", call("c")),
        tool("t2", result("c")),
    ]
    assert partition(msgs) == [["a1", "t1"], ["u"], ["a2", "t2"]]
    assert info(msgs, "a1").pending_calls == info(msgs, "a2").pending_calls == 0


def test_two_unmatched_calls_with_the_same_id_are_ambiguous() -> None:
    msgs = [
        assistant("a1", call("c")),
        user("u"),
        assistant("a2", call("c")),
        tool("t", result("c")),
    ]
    assert partition(msgs) == [["a1"], ["u"], ["a2"], ["t"]]
    assert info(msgs, "t").orphan
    assert info(msgs, "a1").pending_calls == info(msgs, "a2").pending_calls == 1
    state = annotate_all(msgs).state
    assert state.ambiguous_calls == frozenset({"c"})
    assert "c" not in state.open_calls


def test_duplicated_call_id_in_one_message_is_ambiguous() -> None:
    msgs = [assistant("a", call("c"), call("c")), tool("t", result("c"))]
    assert partition(msgs) == [["a"], ["t"]]
    assert info(msgs, "a").pending_calls == 2


def test_duplicated_call_id_in_one_message_is_ambiguous_for_an_early_result() -> None:
    """Whether the results come after the message or before it: none links."""
    early = tool("t", result("c"))
    msgs = [early, assistant("a", call("c"), call("x"), call("c")), tool("t2", result("c"))]
    assert partition(msgs) == [["t"], ["a"], ["t2"]]
    assert info(msgs, "t").orphan and info(msgs, "t2").orphan
    assert info(msgs, "a").pending_calls == 3
    state = annotate_all(msgs).state
    assert (state.ambiguous_calls, state.early_results) == (frozenset({"c"}), {})
    after = [msgs[1], early, msgs[2]]
    assert partition(after) == [["a"], ["t"], ["t2"]]
    assert info(after, "a").pending_calls == 3


def test_a_call_whose_early_result_is_frozen_takes_a_later_result() -> None:
    """Rule 10's frozen result joins nothing; the call pends and the next result answers
    it, where annotating without ``frozen`` makes that result an orphan."""
    first = annotate([user("u"), tool("t", result("c"))])
    rest = [assistant("a", call("c")), tool("t2", result("c"))]
    thawed = fold([first, annotate(rest, first.state)])
    assert thawed.group_of == {"u": "group_u", "t": "group_a", "a": "group_a", "t2": "group_t2"}
    assert thawed.groups["group_t2"].orphan
    frozen = fold([first, annotate(rest, first.state, frozen={"group_t"})])
    assert frozen.group_of == {"u": "group_u", "t": "group_t", "a": "group_a", "t2": "group_a"}
    assert frozen.groups["group_a"].pending_calls == 0


def test_result_before_its_call_is_an_orphan_until_the_call_joins_it() -> None:
    before = [user("u"), tool("t", result("c"))]
    assert partition(before) == [["u"], ["t"]]
    assert info(before, "t").orphan
    msgs = [*before, assistant("a", call("c"))]
    assert partition(msgs) == [["u"], ["t", "a"]]
    group = info(msgs, "a")
    assert (group.group_id, group.orphan, group.pending_calls) == ("group_a", False, 0)


@pytest.mark.parametrize("role", ["system", "user"])
def test_consecutive_system_or_user_messages_are_one_group_each(role: str) -> None:
    make = system if role == "system" else user
    msgs = [make("m1"), make("m2"), make("m3")]
    assert partition(msgs) == [["m1"], ["m2"], ["m3"]]
    assert {info(msgs, m).kind for m in ("m1", "m2", "m3")} == {role}


def test_hosted_tool_pair_in_one_message() -> None:
    msgs = [user("u"), assistant("a", hosted_call("h1"), hosted_result("h1"), text("done"))]
    assert partition(msgs) == [["u"], ["a"]]
    group = info(msgs, "a")
    assert (group.kind, group.pending_calls) == ("tool_call", 0)


def test_hosted_tool_result_in_a_later_message_is_linked() -> None:
    msgs = [
        assistant("a", hosted_call("h1")),
        assistant("x", "working"),
        assistant("b", hosted_result("h1")),
    ]
    assert partition(msgs) == [["a", "b"], ["x"]]
    assert info(msgs, "a").pending_calls == 0


def test_hosted_call_without_id_is_a_call_that_nothing_answers() -> None:
    msgs = [assistant("a", hosted_call(None)), tool("t", hosted_result(None))]
    assert partition(msgs) == [["a"], ["t"]]
    assert info(msgs, "a").pending_calls == 0
    assert info(msgs, "t").orphan


def test_one_tool_message_answering_two_assistant_messages_merges_them() -> None:
    msgs = [
        user("u"),
        assistant("a1", call("c1")),
        assistant("a2", call("c2")),
        tool("t", result("c2"), result("c1")),
    ]
    annotation = annotate_all(msgs)
    assert annotation.merged == {group_id_for("a2"): group_id_for("a1")}
    assert partition(msgs) == [["u"], ["a1", "a2", "t"]]
    assert info(msgs, "a1").pending_calls == 0


def test_merge_across_annotate_calls_reports_the_absorbed_group() -> None:
    first = [assistant("a1", call("c1")), user("u"), assistant("a2", call("c2"))]
    head = annotate(first)
    tail = annotate([tool("t", result("c1"), result("c2"))], head.state)
    assert tail.merged == {group_id_for("a2"): group_id_for("a1")}
    assert tail.message_groups == [("t", group_id_for("a1"))]
    merged_group = tail.groups[group_id_for("a1")]
    assert (merged_group.first_position, merged_group.turn, merged_group.pending_calls) == (0, 0, 0)
    assert fold([head, tail]).members() == {
        group_id_for("a1"): ["a1", "a2", "t"],
        group_id_for("u"): ["u"],
    }


def test_call_message_that_also_answers_an_earlier_call_joins_that_group() -> None:
    msgs = [assistant("a1", call("c1")), user("u"), assistant("a2", call("c2"), result("c1"))]
    result_ = fold([annotate_all(msgs)])
    assert result_.members() == {group_id_for("a1"): ["a1", "a2"], group_id_for("u"): ["u"]}
    assert result_.groups[group_id_for("a1")].pending_calls == 1
    # the merged group is still the one a reasoning message or a result joins
    more = annotate(
        [assistant("r", reasoning()), tool("t", result("c2"))], annotate_all(msgs).state
    )
    assert more.message_groups == [("r", group_id_for("a1")), ("t", group_id_for("a1"))]
    assert more.groups[group_id_for("a1")].pending_calls == 0


def test_result_in_an_assistant_message_links_to_its_call() -> None:
    msgs = [assistant("a", call("c1")), user("u"), assistant("b", result("c1"))]
    assert partition(msgs) == [["a", "b"], ["u"]]
    lone = [assistant("b", result("zz"))]
    assert info(lone, "b").kind == "assistant_text"
    assert not info(lone, "b").orphan


def test_results_in_user_messages_are_not_linked() -> None:
    msgs = [assistant("a", call("c1")), user("u", result("c1"))]
    assert partition(msgs) == [["a"], ["u"]]
    assert info(msgs, "a").pending_calls == 1


def test_turn_numbers_count_user_messages() -> None:
    msgs = [
        system("s"),
        user("u1"),
        assistant("a", call("c1")),
        user("u2"),
        tool("t", result("c1")),
        assistant("x", "answer"),
    ]
    turns = {m: info(msgs, m).turn for m in ("s", "u1", "a", "u2", "x")}
    assert turns == {"s": 0, "u1": 1, "a": 1, "u2": 2, "x": 2}
    assert annotate_all(msgs).state.turn == 2


def test_group_ids_are_group_and_first_message_id() -> None:
    msgs = [
        user("ü-1"),
        assistant("r", reasoning()),
        assistant("a", call("c")),
        tool("t", result("c")),
    ]
    assert set(folded(msgs).groups) == {"group_ü-1", "group_r"}
    assert group_id_for("xyz") == "group_xyz"


def test_custom_role_and_empty_messages_are_assistant_text() -> None:
    msgs = [assistant("a", call("c")), custom("n"), assistant("e"), tool("t", result("c"))]
    assert partition(msgs) == [["a", "t"], ["n"], ["e"]]
    assert info(msgs, "n").kind == info(msgs, "e").kind == "assistant_text"


def test_tool_message_without_results_is_an_orphan() -> None:
    msgs = [assistant("a", call("c")), tool("t", "free text")]
    assert partition(msgs) == [["a"], ["t"]]
    assert info(msgs, "t").orphan


def test_empty_call_ids_are_never_linked() -> None:
    msgs = [assistant("a", call("")), tool("t", result(""))]
    assert call_ids(msgs[0]) == [None]
    assert result_ids(msgs[1]) == []
    assert partition(msgs) == [["a"], ["t"]]
    assert info(msgs, "a").pending_calls == 0


def test_call_and_result_ids_helpers() -> None:
    message = assistant(
        "a", call("c1"), hosted_call("h1"), result("c0"), hosted_result("h0"), text()
    )
    assert call_ids(message) == ["c1", "h1"]
    assert result_ids(message) == ["c0", "h0"]


def test_annotate_reports_only_new_and_changed_groups() -> None:
    head = annotate([user("u"), assistant("a", call("c1")), assistant("x", "hm")])
    tail = annotate([tool("t", result("c1"))], head.state)
    assert set(tail.groups) == {group_id_for("a")}
    assert tail.state.position == 4
    assert tail.groups[group_id_for("a")].first_position == 1


def test_reasoning_group_becomes_a_call_group_across_calls() -> None:
    head = annotate([user("u"), assistant("r", reasoning())])
    assert head.groups[group_id_for("r")].kind == "assistant_text"
    tail = annotate([assistant("a", call("c"))], head.state)
    assert tail.message_groups == [("a", group_id_for("r"))]
    assert tail.groups[group_id_for("r")].kind == "tool_call"


def test_group_kinds_constant() -> None:
    assert GROUP_KINDS == ("system", "user", "assistant_text", "tool_call", "summary")


def test_state_json_roundtrip_keeps_everything() -> None:
    msgs = [
        user("u"),
        assistant("a", call("c1"), call("c2"), call("d"), call("d")),
        tool("t", result("c1")),
        assistant("r", reasoning("думаю 🤔")),
    ]
    state = annotate_all(msgs).state
    assert state.tail is not None and state.ambiguous_calls and state.pending_groups
    assert AnnotationState.from_json(state.to_json()) == state
    assert AnnotationState.from_json(AnnotationState().to_json()) == AnnotationState()


@pytest.mark.parametrize(
    "bad",
    [
        "[]",
        '{"format": 99}',
        '{"format": 1}',
        '{"format": 1, "position": 0, "turn": 0, "open_calls": {}, "ambiguous_calls": [],'
        ' "pending_groups": [{"group_id": "g", "kind": "nope", "turn": 0,'
        ' "first_position": 0}], "tail": null}',
        '{"format": 1, "position": 0, "turn": 0, "open_calls": {"c": 1}, "ambiguous_calls": [],'
        ' "pending_groups": [], "tail": null}',
        '{"format": 1, "position": 0, "turn": 0, "open_calls": {}, "ambiguous_calls": [],'
        ' "pending_groups": [], "tail": {"group": {}, "mode": "calls"}}',
        '{"format": 1, "position": 0, "turn": 0, "open_calls": {}, "ambiguous_calls": [],'
        ' "pending_groups": [], "tail": {"group": {}, "mode": "other"}}',
    ],
)
def test_state_from_malformed_json_raises_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="annotation state"):
        AnnotationState.from_json(bad)
