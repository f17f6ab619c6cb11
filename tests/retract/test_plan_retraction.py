"""``plan_retraction``, the pure rule: the state a session had before its newest message,
replayed from the messages and the groups they are stored in."""

from __future__ import annotations

import pytest

from store.errors import InvalidInput
from store.rules.retract import Retraction, plan_retraction
from strategies.groups import annotate
from strategies.messages import Message
from tests.groups.conversations import assistant, call, result, tool, user


def _plan(stored: list[tuple[Message, str]]) -> Retraction:
    """Plan the retraction of the last of ``stored`` (each message with its group)."""
    return plan_retraction("s", [m for m, _ in stored], [g for _, g in stored])


def test_a_call_kept_apart_from_its_early_result_was_annotated_with_it_frozen() -> None:
    """``a1`` did not join ``t1`` (compacted when ``a1`` came): ``a1`` is pending before
    ``t2`` and ``t1`` waits no more, as the append left them; annotating the whole
    history would have ``t1`` answer ``a1``."""
    stored = [
        (user("u1"), "group_u1"),
        (tool("t1", result("c_a")), "group_t1"),
        (assistant("a1", call("c_a")), "group_a1"),
        (user("u2"), "group_u2"),
        (tool("t2", result("c_a")), "group_a1"),
    ]
    plan = _plan(stored)
    assert plan.group is not None and plan.group.pending_calls == 1
    assert dict(plan.state.open_calls) == {"c_a": "group_a1"}
    assert not plan.state.early_results
    whole = annotate([m for m, _ in stored[:-1]]).state
    assert not whole.open_calls  # what the rule used to give


def test_frozen_is_decided_at_each_call() -> None:
    """``t1`` answers two calls: kept apart from ``a1`` (compacted then), joined by
    ``a2`` (restored since). Neither freezing ``t1`` for good nor never does it."""
    stored = [
        (user("u1"), "group_u1"),
        (tool("t1", result("c_x"), result("c_y")), "group_a2"),
        (assistant("a1", call("c_x")), "group_a1"),
        (assistant("a2", call("c_y")), "group_a2"),
        (user("u2"), "group_u2"),
        (user("u3"), "group_u3"),
    ]
    plan = _plan(stored)
    assert dict(plan.state.open_calls) == {"c_x": "group_a1"}
    assert plan.state.turn == 2 and plan.group is None


def test_a_call_that_joined_its_early_result_is_not_frozen() -> None:
    stored = [
        (user("u1"), "group_u1"),
        (tool("t1", result("c_a")), "group_a1"),
        (assistant("a1", call("c_a")), "group_a1"),
        (user("u2"), "group_u2"),
    ]
    plan = _plan(stored)
    assert not plan.state.open_calls and not plan.state.early_results
    with pytest.raises(InvalidInput, match="split"):
        _plan(stored[:-1])


def test_refuses_stored_groups_that_annotation_cannot_give() -> None:
    """The replay's state would not be the session's: refused, naming a message."""
    stored = [
        (user("u1"), "group_u1"),
        (assistant("a1", call("c1")), "group_a1"),
        (tool("t1", result("c1")), "group_t1"),  # annotation links it to a1
        (user("u2"), "group_u2"),
    ]
    with pytest.raises(InvalidInput, match=r"does not give its stored groups \(message 't1'"):
        _plan(stored)
