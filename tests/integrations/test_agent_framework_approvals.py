"""Agent Framework approvals on every backend: a request and its response are one group.

Agent Framework 1.26 groups a function call, the approval request that asks to run it,
the user's approval response and the call's result as one group (``docs/groups.md``);
the store does the same, appended one message at a time as a live run saves them, so
that compaction keeps or drops the exchange whole. ``tests/groups/test_groups_reference.py``
compares the grouping with the installed Agent Framework's.
"""

from __future__ import annotations

from typing import Any

import pytest

from store import HistoryStore
from store.contract import HistoryBackend
from strategies.changeset import ChangeSet, Exclusion
from strategies.view import View

af = pytest.importorskip("agent_framework")

from store.integrations.agent_framework import from_af_messages  # noqa: E402


def _flow(*, request_apart: bool) -> list[Any]:
    call = af.Content.from_function_call("c1", "get_weather", arguments='{"city": "Oslo"}')
    request = af.Content.from_function_approval_request("c1", call)
    if request_apart:
        asked = [
            af.Message("assistant", [call], message_id="a"),
            af.Message("assistant", [request], message_id="q"),
        ]
    else:
        asked = [af.Message("assistant", [call, request], message_id="a")]
    return [
        af.Message("user", [af.Content.from_text("weather in Oslo?")], message_id="u"),
        *asked,
        af.Message("user", [request.to_function_approval_response(approved=True)], message_id="r"),
        af.Message("tool", [af.Content.from_function_result("c1", result="sunny")], message_id="t"),
        af.Message("assistant", [af.Content.from_text("It is sunny.")], message_id="d"),
    ]


class _ExcludeGroup:
    """Excludes one group."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id

    @property
    def name(self) -> str:
        return "test_exclude"

    def params(self) -> dict[str, object]:
        return {"group": self.group_id}

    async def plan(self, view: View) -> ChangeSet:
        return ChangeSet(exclusions=(Exclusion(self.group_id, "test"),), strategy=self.name)


@pytest.mark.parametrize("request_apart", [False, True], ids=["with_its_call", "apart"])
async def test_an_approval_exchange_is_one_group_appended_one_by_one(
    any_store: HistoryBackend, request_apart: bool
) -> None:
    messages = from_af_messages(_flow(request_apart=request_apart))
    for message in messages:
        await any_store.append("s", [message])
    exchange = ["a", "q", "r", "t"] if request_apart else ["a", "r", "t"]
    stored = {m.message.message_id: m.group_id for m in await any_store.history("s")}
    assert {stored[m] for m in exchange} == {"group_a"}
    assert stored["u"] != "group_a" and stored["d"] != "group_a"
    view = await any_store.view("s")
    group = next(g for g in view.groups if g.group_id == "group_a")
    assert (group.kind, group.message_count, group.pending_calls, group.orphan) == (
        "tool_call",
        len(exchange),
        0,
        False,
    )
    assert [m.message_id for m in await any_store.context("s")] == ["u", *exchange, "d"]

    await any_store.compact("s", _ExcludeGroup("group_a"))
    assert [m.message_id for m in await any_store.context("s")] == ["u", "d"]


async def test_an_unanswered_approval_waits_in_its_group(any_store: HistoryBackend) -> None:
    """Before the user answers, the request's group has the approval pending; the
    response, stored in a later append, joins it."""
    messages = from_af_messages(_flow(request_apart=False))
    await any_store.append("s", messages[:2])
    view = await any_store.view("s")
    assert next(g for g in view.groups if g.group_id == "group_a").pending_calls == 2
    await any_store.append("s", messages[2:3])
    view = await any_store.view("s")
    assert next(g for g in view.groups if g.group_id == "group_a").pending_calls == 1
    assert "group_r" not in {g.group_id for g in view.groups}


@pytest.mark.parametrize("request_apart", [False, True], ids=["beside", "apart"])
async def test_the_doctor_finds_nothing_wrong_with_an_approval(
    db_url: str, request_apart: bool
) -> None:
    """The approval request carries the id of the call it approves: no duplicate call
    (SQLite and PostgreSQL: the doctor checks stored rows)."""
    async with HistoryStore.open(db_url) as store:
        await store.append("s", from_af_messages(_flow(request_apart=request_apart)))
        report = await store.doctor("s")
    assert report.findings == () and report.healthy
