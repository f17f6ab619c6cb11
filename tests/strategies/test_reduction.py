"""ToolResultReductionStrategy: registered tools only, originals kept, idempotent."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import JsonValue

from strategies.changeset import ChangeSet
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.reduction import REDUCED_KEY, ToolResultReductionStrategy
from strategies.triggers import Never, TokensExceed
from strategies.view import View
from tests.strategies.gen_b import views
from tests.strategies.invariants import assert_invariants

LONG = "line of output " * 40


def head(text: str) -> str:
    """Keep the first 20 characters."""
    return text[:20]


def same(text: str) -> str:
    """Change nothing."""
    return text


def shout(text: str) -> str:
    """Upper-case."""
    return text.upper()


def tool_round(
    n: int, *tools: str, result: JsonValue = LONG, together: bool = True
) -> list[Message]:
    """An assistant message calling ``tools`` in parallel, then the results."""
    calls = [FunctionCallContent(call_id=f"c{n}_{i}", name=t) for i, t in enumerate(tools)]
    results = [FunctionResultContent(call_id=c.call_id, result=result) for c in calls]
    out = [Message(role="assistant", contents=list(calls), message_id=f"call{n}")]
    if together:
        out.append(Message(role="tool", contents=list(results), message_id=f"res{n}"))
    else:
        out += [
            Message(role="tool", contents=[r], message_id=f"res{n}_{i}")
            for i, r in enumerate(results)
        ]
    return out


def history() -> list[Message]:
    return [
        Message.text_message("system", "sys", message_id="s"),
        Message.text_message("user", "go", message_id="u1"),
        *tool_round(1, "search", "fetch"),
        *tool_round(2, "fetch"),
        *tool_round(3, "search", together=False),
        Message.text_message("assistant", "done", message_id="a1"),
    ]


async def test_reduces_registered_tools_only_and_keeps_originals() -> None:
    view = View.from_messages(history())
    strategy = ToolResultReductionStrategy(reducers={"search": head})
    changes = await strategy.plan(view)
    assert [r.message_id for r in changes.reductions] == ["res1", "res3_0"]
    assert not changes.exclusions and not changes.summaries

    originals = {m.message_id: m for m in history()}
    for reduction in changes.reductions:
        original = originals[reduction.message_id]
        assert reduction.message.role == original.role
        assert reduction.tokens_before == view.count(original)
        assert reduction.tokens_after == view.count(reduction.message)
        assert reduction.tokens_after < reduction.tokens_before
        assert reduction.message.metadata[REDUCED_KEY]
    res1 = changes.reductions[0].message.contents
    assert isinstance(res1[0], FunctionResultContent) and res1[0].result == head(LONG)
    assert res1[1] == originals["res1"].contents[1]  # the fetch result in the same message

    after = view.apply(changes)
    projected = {m.message_id: m for m in await after.project()}
    assert projected["res1"] == changes.reductions[0].message
    assert projected["res2"] == originals["res2"]
    stored = await view.messages()
    assert stored["group_call1"][1] == originals["res1"]  # the original is still there
    saved = sum(r.tokens_before - r.tokens_after for r in changes.reductions)
    assert after.token_count == view.token_count - saved
    await assert_invariants(view, changes, strategy=strategy)


async def test_second_run_changes_nothing() -> None:
    view = View.from_messages(history())
    strategy = ToolResultReductionStrategy(reducers={"search": head, "fetch": head})
    first = await strategy.plan(view)
    assert len(first.reductions) == 3
    assert (await strategy.plan(view.apply(first))).is_empty


async def test_unchanged_output_is_no_reduction() -> None:
    view = View.from_messages(history())
    strategy = ToolResultReductionStrategy(reducers={"search": same})
    assert (await strategy.plan(view)).reductions == ()


async def test_minimum_preserved_groups() -> None:
    view = View.from_messages(history())
    # the newest two non-system groups are round 3 and the final answer.
    strategy = ToolResultReductionStrategy(reducers={"search": head}, minimum_preserved_groups=2)
    changes = await strategy.plan(view)
    assert [r.message_id for r in changes.reductions] == ["res1"]


async def test_pinned_and_orphan_groups_are_left_alone() -> None:
    messages = history()
    messages.append(
        Message(
            role="tool",
            contents=[FunctionResultContent(call_id="c1_0", result=LONG)],
            message_id="late_orphan",
        )
    )
    view = View.from_messages(messages, pinned=["group_call1"])
    assert view.group("group_late_orphan").orphan
    changes = await ToolResultReductionStrategy(reducers={"search": head}).plan(view)
    assert [r.message_id for r in changes.reductions] == ["res3_0"]


async def test_json_results_reach_the_reducer_as_json_text() -> None:
    seen: list[str] = []

    def record(text: str) -> str:
        seen.append(text)
        return "short"

    payload: dict[str, JsonValue] = {"rows": [1, 2], "note": "é"}
    view = View.from_messages(
        [Message.text_message("user", "q"), *tool_round(1, "db", result=payload)]
    )
    changes = await ToolResultReductionStrategy(reducers={"db": record}).plan(view)
    assert [json.loads(t) for t in seen] == [payload]
    assert "é" in seen[0]
    content = changes.reductions[0].message.contents[0]
    assert isinstance(content, FunctionResultContent) and content.result == "short"


async def test_trigger_and_target() -> None:
    view = View.from_messages(history())
    strategy = ToolResultReductionStrategy(reducers={"search": head}, trigger=Never)
    assert (await strategy.plan(view)).is_empty

    everything = await ToolResultReductionStrategy(reducers={"search": head}).plan(view)
    first_saving = everything.reductions[0].tokens_before - everything.reductions[0].tokens_after
    limit = view.token_count - first_saving
    strategy = ToolResultReductionStrategy(reducers={"search": head}, trigger=TokensExceed(limit))
    changes = await strategy.plan(view)
    assert [r.message_id for r in changes.reductions] == ["res1"]  # oldest first, then stop
    assert view.apply(changes).token_count <= limit


def test_params_name_reducers() -> None:
    strategy = ToolResultReductionStrategy(reducers={"search": head, "fetch": shout})
    params = json.loads(json.dumps(strategy.params()))
    assert params["reducers"] == {
        "fetch": f"{__name__}.shout",
        "search": f"{__name__}.head",
    }
    assert params["trigger"] is None and params["minimum_preserved_groups"] == 0


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="minimum_preserved_groups"):
        ToolResultReductionStrategy(reducers={}, minimum_preserved_groups=-1)
    with pytest.raises(TypeError, match="search"):
        ToolResultReductionStrategy(reducers={"search": "nope"})  # type: ignore[dict-item]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(view=views(max_steps=14))
async def test_invariants_and_originals_on_generated_conversations(view: View) -> None:
    strategy = ToolResultReductionStrategy(reducers={"search": head, "calc": shout})
    changes = await strategy.plan(view)
    after = await assert_invariants(view, changes, strategy=strategy)
    stored = await view.messages()
    by_id = {m.message_id: m for msgs in stored.values() for m in msgs}
    projected = {m.message_id: m for m in await after.project()}
    reduced = {r.message_id for r in changes.reductions}
    for message_id, message in projected.items():
        if message_id not in reduced:
            assert message == by_id[message_id]
    for reduction in changes.reductions:
        assert by_id[reduction.message_id].metadata.get(REDUCED_KEY) is None
        names = {
            c.call_id: c.name
            for m in stored[reduction.group_id]
            for c in m.contents
            if isinstance(c, FunctionCallContent)
        }
        for old, new in zip(by_id[reduction.message_id].contents, reduction.contents, strict=True):
            if isinstance(old, FunctionResultContent) and names.get(old.call_id) == "fetch":
                assert new == old
    assert after.token_count == view.apply(ChangeSet(reductions=changes.reductions)).token_count


async def test_a_failing_reducer_leaves_the_result_and_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(text: str) -> str:
        raise RuntimeError("boom")

    def not_text(text: str) -> str:
        return 42  # type: ignore[return-value]

    view = View.from_messages(history())
    strategy = ToolResultReductionStrategy(reducers={"search": broken, "fetch": not_text})
    with caplog.at_level(logging.WARNING, logger="chatledger.strategies"):
        changes = await strategy.plan(view)
    assert changes.is_empty
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4  # two search results, two fetch results
    assert sum("boom" in m for m in messages) == 2
    assert sum("returned int" in m for m in messages) == 2
