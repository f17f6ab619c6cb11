"""A source that knows how its groups pair (:class:`~strategies.view.LinkedSource`)
projects exactly what the walk over every message projects."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hypothesis import HealthCheck, given, settings

from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.view import GroupLinks, InMemorySource, View
from tests.groups.conversations import conversations


@dataclass(frozen=True)
class _Linked:
    inner: InMemorySource

    def links(self, group_id: str) -> GroupLinks | None:
        return GroupLinks.of(self.inner.groups[group_id])

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        return await self.inner.load(group_ids)


def _both(messages: list[Message]) -> tuple[list[Message], list[Message]]:
    view = View.from_messages(messages)
    assert isinstance(view.source, InMemorySource)
    linked = replace(view, source=_Linked(view.source))
    return asyncio.run(view.project()), asyncio.run(linked.project())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations())
def test_linked_groups_project_as_the_walk_does(messages: list[Message]) -> None:
    walked, linked = _both(messages)
    assert linked == walked


def test_a_group_with_a_result_before_its_call_is_not_closed() -> None:
    call = Message(
        role="assistant",
        contents=[FunctionCallContent(call_id="c", name="f", arguments="{}")],
        message_id="a",
    )
    result = Message(
        role="tool", contents=[FunctionResultContent(call_id="c", result="r")], message_id="t"
    )
    assert GroupLinks.of([call, result]) == GroupLinks(frozenset({"c"}), closed=True)
    assert not GroupLinks.of([result, call]).closed
    assert not GroupLinks.of([result]).closed
