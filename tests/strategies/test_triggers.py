"""Triggers: each predicate, the compositions, params as JSON, no message loading."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.messages import FunctionCallContent, Message
from strategies.tokenizers import count_message_tokens
from strategies.triggers import (
    All,
    Always,
    Any,
    GroupsExceed,
    HasToolCalls,
    MessagesExceed,
    Never,
    Not,
    TokensBelow,
    TokensExceed,
    Trigger,
    TurnsExceed,
)
from strategies.view import View
from tests.strategies.gen_b import conversations


class NoLoading:
    """A source that fails the test if a trigger loads messages."""

    async def load(self, group_ids: Sequence[str]) -> dict[str, list[Message]]:
        raise AssertionError("a trigger loaded messages")


def blind(messages: Sequence[Message]) -> View:
    """A view of ``messages`` whose messages cannot be loaded."""
    return replace(View.from_messages(messages), source=NoLoading())


@dataclass(frozen=True)
class Facts:
    """What the triggers read, computed from the messages themselves."""

    tokens: int
    messages: int
    turns: int
    groups: int
    tools: bool


def facts(messages: Sequence[Message], view: View) -> Facts:
    return Facts(
        tokens=sum(count_message_tokens(m, view.tokenizer, policy=view.policy) for m in messages),
        messages=len(messages),
        turns=sum(1 for m in messages if m.role == "user"),
        groups=len({g.group_id for g in view.groups}),
        tools=any(m.role == "tool" or view_has_calls(m) for m in messages),
    )


def view_has_calls(message: Message) -> bool:
    return any(c.type == "function_call" for c in message.contents)


SIMPLE = [
    Message.text_message("system", "sys"),
    Message.text_message("user", "hello there"),
    Message.text_message("assistant", "hi, how can I help"),
    Message.text_message("user", "tell me more"),
]


def test_each_counting_trigger_at_its_boundary() -> None:
    view = blind(SIMPLE)
    known = facts(SIMPLE, view)
    cases: list[tuple[Callable[[int], Trigger], int]] = [
        (TokensExceed, known.tokens),
        (MessagesExceed, known.messages),
        (TurnsExceed, known.turns),
        (GroupsExceed, known.groups),
    ]
    for build, value in cases:
        assert build(value - 1)(view), build(value - 1)
        assert not build(value)(view), build(value)
    assert TokensBelow(known.tokens + 1)(view)
    assert not TokensBelow(known.tokens)(view)
    assert not HasToolCalls()(view)


def test_has_tool_calls() -> None:
    call = Message(role="assistant", contents=[FunctionCallContent(call_id="c1", name="search")])
    assert HasToolCalls()(blind([*SIMPLE, call]))


def test_constants_and_compositions() -> None:
    view = blind(SIMPLE)
    assert Always(view) and not Never(view)
    assert All()(view) and not Any()(view)
    assert All(Always, Always)(view) and not All(Always, Never)(view)
    assert Any(Never, Always)(view) and not Any(Never, Never)(view)
    assert Not(Never)(view) and not Not(Always)(view)
    assert All(Any(Never, Not(Never)), Not(All(Always, Never)))(view)


def test_params_are_json_and_nest() -> None:
    trigger = All(TokensExceed(10), Any(TurnsExceed(2), Not(HasToolCalls())), Always)
    params = json.loads(json.dumps(trigger.params()))
    assert params == {
        "trigger": "All",
        "of": [
            {"trigger": "TokensExceed", "n": 10},
            {
                "trigger": "Any",
                "of": [
                    {"trigger": "TurnsExceed", "n": 2},
                    {"trigger": "Not", "of": {"trigger": "HasToolCalls"}},
                ],
            },
            {"trigger": "Always"},
        ],
    }
    assert Never.params() == {"trigger": "Never"}
    for simple in (TokensBelow(1), MessagesExceed(2), GroupsExceed(3)):
        assert isinstance(simple, Trigger)
        assert json.loads(json.dumps(simple.params()))["n"] == simple.n


# --------------------------------------------------------------------- random trees

Expected = Callable[[Facts], bool]
Tree = tuple[Trigger, Expected]


def _leaves() -> st.SearchStrategy[Tree]:
    n = st.integers(0, 400)

    def counted(
        build: Callable[[int], Trigger], read: Callable[[Facts], int]
    ) -> st.SearchStrategy[Tree]:
        return n.map(lambda k: (build(k), lambda f: read(f) > k))

    return st.one_of(
        counted(TokensExceed, lambda f: f.tokens),
        counted(MessagesExceed, lambda f: f.messages),
        counted(TurnsExceed, lambda f: f.turns),
        counted(GroupsExceed, lambda f: f.groups),
        n.map(lambda k: (TokensBelow(k), lambda f: f.tokens < k)),
        st.just((HasToolCalls(), lambda f: f.tools)),
        st.just((Always, lambda f: True)),
        st.just((Never, lambda f: False)),
    )


def _extend(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
    many = st.lists(children, max_size=3)
    return st.one_of(
        many.map(lambda ts: (All(*(t for t, _ in ts)), lambda f: all(e(f) for _, e in ts))),
        many.map(lambda ts: (Any(*(t for t, _ in ts)), lambda f: any(e(f) for _, e in ts))),
        children.map(lambda t: (Not(t[0]), lambda f: not t[1](f))),
    )


@settings(max_examples=300, deadline=None)
@given(messages=conversations(max_steps=10), tree=st.recursive(_leaves(), _extend, max_leaves=8))
def test_random_trees_agree_with_the_counts(messages: list[Message], tree: Tree) -> None:
    trigger, expected = tree
    view = blind(messages)
    assert trigger(view) == expected(facts(messages, view))
    json.dumps(trigger.params())
