"""Group annotation against the installed Agent Framework's ``group_messages``.

Agent Framework 1.23.0 and 1.26.0 are both supported (``make test`` runs this file
against each). On conversations without the shapes where chatledger deliberately
differs, both give the same partition, the same group ids and the same kinds. Each
deliberate deviation (``docs/groups.md``) has a test below that shows both behaviours;
where 1.26 changed how it groups, the test says which version does what.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import pytest
from hypothesis import given, settings

from strategies.groups import annotate_all, in_call_order
from strategies.messages import (
    Content,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
)
from tests.groups.conversations import (
    aligned_conversations,
    assistant,
    call,
    fold,
    hosted_call,
    hosted_result,
    reasoning,
    result,
    tool,
    user,
)

af = pytest.importorskip("agent_framework")
af_compaction = pytest.importorskip("agent_framework._compaction")

AF_126 = tuple(int(part) for part in version("agent-framework-core").split(".")[:2]) >= (1, 26)
"""Whether the installed Agent Framework groups as 1.26 does (there is no 1.24 or 1.25):
approval requests and responses in one group, every hosted call type a call."""


def _af_content(content: Content) -> Any:
    make = af.Content
    if isinstance(content, TextContent):
        return make.from_text(content.text)
    if isinstance(content, ReasoningContent):
        return make.from_text_reasoning(text=content.text)
    if isinstance(content, FunctionCallContent):
        return make.from_function_call(content.call_id, content.name, arguments=content.arguments)
    if isinstance(content, FunctionResultContent):
        return make.from_function_result(content.call_id, result=content.result)
    if isinstance(content, OtherContent) and content.call_id is not None:
        if content.kind == "mcp_server_tool_call":
            return make.from_mcp_server_tool_call(content.call_id, "tool")
        if content.kind == "mcp_server_tool_result":
            return make.from_mcp_server_tool_result(content.call_id, output="out")
        if content.kind == "search_tool_call":
            return make.from_search_tool_call(content.call_id, tool_name="search")
    raise NotImplementedError(f"no Agent Framework form for {content!r} in this test")


def to_af(messages: Sequence[Message]) -> list[Any]:
    """Our messages as Agent Framework messages, built with its own constructors."""
    return [
        af.Message(m.role, [_af_content(c) for c in m.contents], message_id=m.message_id)
        for m in messages
    ]


def reference(messages: Sequence[Message]) -> tuple[dict[str, str], dict[str, set[str]]]:
    """Agent Framework's grouping: message id to group id, and group id to its kinds.

    Agent Framework gives a kind per span; a linked result can make one group of spans
    of two kinds, which is why this returns a set per group.
    """
    group_of: dict[str, str] = {}
    kinds: dict[str, set[str]] = {}
    for span in af_compaction.group_messages(to_af(messages)):
        for index in range(span["start_index"], span["end_index"] + 1):
            group_of[messages[index].message_id] = span["group_id"]
        kinds.setdefault(span["group_id"], set()).add(span["kind"])
    return group_of, kinds


def ours(messages: Sequence[Message]) -> tuple[dict[str, str], dict[str, set[str]]]:
    folded = fold([annotate_all(messages)])
    return folded.group_of, {g: {info.kind} for g, info in folded.groups.items()}


def partition(group_of: dict[str, str]) -> list[list[str]]:
    members: dict[str, list[str]] = {}
    for message_id, group_id in group_of.items():
        members.setdefault(group_id, []).append(message_id)
    return list(members.values())


@settings(max_examples=600, deadline=None)
@given(aligned_conversations())
def test_same_groups_as_agent_framework(messages: list[Message]) -> None:
    assert ours(messages) == reference(messages)


def test_the_converter_keeps_what_grouping_reads() -> None:
    messages = [
        user("u"),
        assistant("a", reasoning(), call("c")),
        tool("t", result("c")),
        assistant("h", hosted_call("h1"), hosted_result("h1")),
    ]
    converted = to_af(messages)
    assert [m.role for m in converted] == ["user", "assistant", "tool", "assistant"]
    assert [c.type for c in converted[1].contents] == ["text_reasoning", "function_call"]
    assert converted[2].contents[0].call_id == "c"
    assert [c.type for c in converted[3].contents] == [
        "mcp_server_tool_call",
        "mcp_server_tool_result",
    ]


# --- deliberate deviations: each test shows both behaviours -----------------------------


@pytest.mark.parametrize(
    "declared",
    [["c1"], ["c1", "x", "x"]],
    ids=["orphan", "ambiguous"],
)
def test_unlinked_result_right_after_a_call_group(declared: list[str]) -> None:
    answered = "zz" if declared == ["c1"] else "x"
    messages = [
        user("u"),
        assistant("a", *(call(c) for c in declared)),
        tool("t1", result("c1")),
        tool("t2", result(answered)),
    ]
    assert partition(reference(messages)[0]) == [["u"], ["a", "t1", "t2"]]
    assert partition(ours(messages)[0]) == [["u"], ["a", "t1"], ["t2"]]
    assert fold([annotate_all(messages)]).groups["group_t2"].orphan


def test_result_of_an_earlier_call_right_after_another_call_group() -> None:
    messages = [
        user("u"),
        assistant("a1", call("c1")),
        assistant("a2", call("c2")),
        tool("t1", result("c1")),
        tool("t2", result("c2")),
    ]
    assert partition(reference(messages)[0]) == [["u"], ["a1", "a2", "t1", "t2"]]
    assert partition(ours(messages)[0]) == [["u"], ["a1", "t1"], ["a2", "t2"]]


def test_consecutive_tool_messages_not_after_a_call_group() -> None:
    messages = [
        assistant("a", call("c1")),
        user("u"),
        tool("t1", result("zz")),
        tool("t2", result("c1")),
        tool("t3", result("yy")),
    ]
    assert partition(reference(messages)[0]) == [["a", "t1", "t2", "t3"], ["u"]]
    assert partition(ours(messages)[0]) == [["a", "t2"], ["u"], ["t1"], ["t3"]]


def test_consecutive_reasoning_only_messages_not_leading_into_a_call() -> None:
    messages = [user("u"), assistant("r1", reasoning()), assistant("r2", reasoning()), user("v")]
    assert partition(reference(messages)[0]) == [["u"], ["r1"], ["r2"], ["v"]]
    assert partition(ours(messages)[0]) == [["u"], ["r1", "r2"], ["v"]]
    assert ours(messages)[1]["group_r1"] == {"assistant_text"}


def test_hosted_result_in_a_later_message() -> None:
    messages = [
        assistant("a", hosted_call("h1")),
        user("u"),
        assistant("b", hosted_result("h1")),
    ]
    assert partition(reference(messages)[0]) == [["a"], ["u"], ["b"]]
    assert partition(ours(messages)[0]) == [["a", "b"], ["u"]]


def test_result_stored_before_its_call() -> None:
    """The reference leaves the result alone (a lone tool group) and the call unanswered;
    here the call joins the waiting result, under the call's id, shown call first."""
    messages = [user("u"), tool("t", result("c1")), user("v"), assistant("a", call("c1"))]
    assert partition(reference(messages)[0]) == [["u"], ["t"], ["v"], ["a"]]
    group_of, kinds = ours(messages)
    assert partition(group_of) == [["u"], ["t", "a"], ["v"]]
    assert group_of["t"] == "group_a" and kinds["group_a"] == {"tool_call"}
    members = [m for m in messages if group_of[m.message_id] == "group_a"]
    assert [m.message_id for m in in_call_order(members, lambda m: m)] == ["a", "t"]


def test_every_hosted_call_makes_a_call_group() -> None:
    """1.23 treats a search-tool call as text; 1.26 added it to its call types, so the
    deviation is 1.23's only (every hosted call type of 1.26 is a call there too)."""
    messages = [user("u"), assistant("a", hosted_call("s1", kind="search_tool_call"))]
    assert reference(messages)[1]["group_a"] == ({"tool_call"} if AF_126 else {"assistant_text"})
    assert ours(messages)[1]["group_a"] == {"tool_call"}


def test_one_call_id_namespace_for_function_and_hosted_calls() -> None:
    messages = [
        assistant("a", call("x"), hosted_call("x")),
        user("u"),
        tool("t", result("x")),
    ]
    assert partition(reference(messages)[0]) == [["a", "t"], ["u"]]
    assert partition(ours(messages)[0]) == [["a"], ["u"], ["t"]]


# --- shapes that look unusual but agree -------------------------------------------------


def test_result_in_an_assistant_message_links_in_both() -> None:
    """Same partition; the reference labels the result's span assistant_text, we one kind."""
    messages = [assistant("a", call("c1")), user("u"), assistant("b", result("c1"))]
    assert partition(reference(messages)[0]) == partition(ours(messages)[0]) == [["a", "b"], ["u"]]
    assert reference(messages)[1]["group_a"] == {"assistant_text", "tool_call"}
    assert ours(messages)[1]["group_a"] == {"tool_call"}


def test_one_tool_message_answering_two_call_groups_merges_in_both() -> None:
    messages = [
        assistant("a1", call("c1")),
        user("u"),
        assistant("a2", call("c2")),
        tool("t", result("c1"), result("c2")),
    ]
    assert ours(messages)[0] == reference(messages)[0]
    assert partition(ours(messages)[0]) == [["a1", "a2", "t"], ["u"]]


# --- approvals: grouped as Agent Framework 1.26 groups them -----------------------------
#
# These are built as Agent Framework messages and read through the converter, as the
# adapter stores them, so the comparison covers the approval ids the converter keeps.


def _af_call(call_id: str) -> Any:
    return af.Content.from_function_call(call_id, "get_weather", arguments='{"city": "Oslo"}')


def _approval_flow(*, request_apart: bool) -> list[Any]:
    """A run that asks to approve a call, the user's approval, the call's result. With
    ``request_apart`` the request is a message of its own after the call's."""
    call = _af_call("c1")
    request = af.Content.from_function_approval_request("c1", call)
    if request_apart:
        asked = [
            af.Message("assistant", [call], message_id="a"),
            af.Message("assistant", [request], message_id="q"),
        ]
    else:
        asked = [af.Message("assistant", [call, request], message_id="a")]
    return [
        af.Message("user", [af.Content.from_text("weather?")], message_id="u"),
        *asked,
        af.Message("user", [request.to_function_approval_response(approved=True)], message_id="r"),
        af.Message("tool", [af.Content.from_function_result("c1", result="sunny")], message_id="t"),
        af.Message("assistant", [af.Content.from_text("It is sunny.")], message_id="d"),
    ]


def _af_partition(messages: list[Any]) -> list[list[str]]:
    group_of: dict[str, str] = {}
    for span in af_compaction.group_messages(messages):
        for index in range(span["start_index"], span["end_index"] + 1):
            group_of[messages[index].message_id] = span["group_id"]
    return partition(group_of)


def _our_annotation(messages: list[Any]) -> Any:
    from store.integrations.agent_framework import from_af_messages

    return fold([annotate_all(from_af_messages(messages))])


@pytest.mark.parametrize("request_apart", [False, True], ids=["with_its_call", "apart"])
def test_an_approval_request_and_its_response_are_one_group(request_apart: bool) -> None:
    """1.26 puts the approval response (a user message) in the group of its request,
    and the request in the group of the call it approves: one group, which compaction
    keeps or drops whole. 1.23 knows no approval pairs: the response is a user group of
    its own, and a request apart from its call an assistant text group; our grouping
    follows 1.26 whichever version is installed."""
    messages = _approval_flow(request_apart=request_apart)
    asked = ["a", "q"] if request_apart else ["a"]
    one_group = [["u"], [*asked, "r", "t"], ["d"]]
    folded = _our_annotation(messages)
    assert partition(folded.group_of) == one_group
    group = folded.groups["group_a"]
    assert (group.kind, group.pending_calls, group.orphan) == ("tool_call", 0, False)
    if AF_126:
        assert _af_partition(messages) == one_group
    elif request_apart:
        assert _af_partition(messages) == [["u"], ["a", "t"], ["q"], ["r"], ["d"]]
    else:
        assert _af_partition(messages) == [["u"], ["a", "t"], ["r"], ["d"]]


def test_an_unanswered_approval_request_is_pending() -> None:
    """Until the user answers, the request's group has a call pending (the approval)
    besides the function call itself; the response answers the approval only."""
    call = _af_call("c1")
    request = af.Content.from_function_approval_request("c1", call)
    messages = [af.Message("assistant", [call, request], message_id="a")]
    assert _our_annotation(messages).groups["group_a"].pending_calls == 2
    messages.append(
        af.Message("user", [request.to_function_approval_response(approved=False)], message_id="r")
    )
    folded = _our_annotation(messages)
    assert partition(folded.group_of) == [["a", "r"]]
    assert folded.groups["group_a"].pending_calls == 1


def test_a_response_answers_the_latest_request_with_its_id() -> None:
    """A request asked again (same id) takes the response in both; the earlier one stays
    apart, unanswered."""
    call = _af_call("c1")
    first = af.Content.from_function_approval_request("c1", call)
    again = af.Content.from_function_approval_request("c1", call)
    messages = [
        af.Message("assistant", [first], message_id="q1"),
        af.Message("user", [af.Content.from_text("later")], message_id="u"),
        af.Message("assistant", [again], message_id="q2"),
        af.Message("user", [again.to_function_approval_response(approved=True)], message_id="r"),
    ]
    expected = [["q1"], ["u"], ["q2", "r"]]
    assert partition(_our_annotation(messages).group_of) == expected
    assert _af_partition(messages) == (expected if AF_126 else [["q1"], ["u"], ["q2"], ["r"]])


def test_an_approval_response_in_a_tool_or_assistant_message_links_too() -> None:
    call = _af_call("c1")
    request = af.Content.from_function_approval_request("c1", call)
    response = request.to_function_approval_response(approved=True)
    for role in ("tool", "assistant", "system"):
        messages = [
            af.Message("assistant", [call, request], message_id="a"),
            af.Message(role, [response], message_id="r"),
        ]
        assert partition(_our_annotation(messages).group_of) == [["a", "r"]], role
        if AF_126:
            assert _af_partition(messages) == [["a", "r"]], role


def test_approval_keys_stay_apart_from_call_ids() -> None:
    """The approval's id is the call's ``call_id``: they pair apart, so the call and its
    request in one message are not one call id declared twice (which would leave the
    call's result unlinked, as it was before approvals had their own keys)."""
    from store.integrations.agent_framework import from_af_messages
    from strategies.groups import approval_key, call_links, is_approval_key

    call = _af_call("c1")
    [message] = from_af_messages(
        [af.Message("assistant", [call, af.Content.from_function_approval_request("c1", call)])]
    )
    assert call_links(message) == (["c1", approval_key("c1")], [])
    assert is_approval_key(approval_key("c1")) and not is_approval_key("c1")
    long_key = approval_key("x" * 300)
    assert is_approval_key(long_key) and len(long_key) <= 255
    assert long_key != approval_key("x" * 299)
