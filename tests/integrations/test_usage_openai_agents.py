"""The OpenAI Agents SDK's runner records each model call's usage on a chatledger
session, offline.

The SDK's ``ScriptedModel`` reports every lane (cache reads and writes, reasoning) on
each response; each run is a tool loop (two lookups, then the answer). The session
accepts the run's context (``wrapper``) on its four history methods, so the SDK hands it
the run's per-request usage.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Runner
from agents.memory.session import _session_accepts_wrapper

from store.integrations.openai_agents import ChatledgerSession
from store.memory import InMemoryHistoryStore
from tests.integrations.openai_agents_support import TOOL_CALLS, Policy, make_agent
from tests.integrations.usage_support import assert_calibrated, expected_lanes, lanes

RUNS = 2
CALLS = RUNS * (TOOL_CALLS + 1)


async def run(agent: Any, session: ChatledgerSession, turns: range, *, streamed: bool) -> None:
    for turn in turns:
        question = f"question {turn}"
        if streamed:
            result = Runner.run_streamed(agent, question, session=session)
            async for _ in result.stream_events():
                pass
        else:
            await Runner.run(agent, question, session=session)


def test_the_session_opts_in_to_the_run_context() -> None:
    assert _session_accepts_wrapper(ChatledgerSession("s", store=InMemoryHistoryStore()))


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
@pytest.mark.parametrize("response_ids", [True, False], ids=["ids", "no-ids"])
async def test_every_model_call_is_recorded_once_and_tied_to_its_message(
    memory_store: InMemoryHistoryStore, streamed: bool, response_ids: bool
) -> None:
    session = ChatledgerSession("s", store=memory_store, model="scripted-1")
    policy = Policy(response_ids=response_ids, report_usage=True)
    model = policy.model()
    await run(make_agent(model), session, range(RUNS), streamed=streamed)

    assert len(model.calls) == CALLS
    calls = await memory_store.usage_calls("s")
    assert [lanes(c) for c in calls] == [expected_lanes(n) for n in range(1, CALLS + 1)]
    assert all(c.usage.model == "scripted-1" and c.usage.exact for c in calls)
    stored = {m.message.message_id: m.message for m in await memory_store.history("s")}
    for n, call in enumerate(calls, start=1):
        assert call.message_id is not None
        message = stored[call.message_id]
        assert message.role == "assistant"
        assert call.call_id == f"openai-agents-{call.message_id}"
        if n % (TOOL_CALLS + 1) == 0:
            assert message.text == f"answer to question {(n - 1) // (TOOL_CALLS + 1)}"
        else:
            [content] = message.contents
            assert content.type == "function_call"
            assert content.call_id == f"call_{n}"  # the n-th response's own call
        if response_ids:
            assert call.message_id in {f"fc_{n}", f"msg_{n}"}
    # every stored model output is the answer of exactly one recorded call
    outputs = [i for i, m in stored.items() if m.role == "assistant"]
    assert sorted(outputs) == sorted(c.message_id for c in calls if c.message_id)


async def test_a_batch_saved_again_records_nothing_more(memory_store: InMemoryHistoryStore) -> None:
    session = ChatledgerSession("s", store=memory_store)
    model = Policy(report_usage=True).model()
    result = await Runner.run(make_agent(model), "question 0", session=session)
    calls = await memory_store.usage_calls("s")
    assert len(calls) == TOOL_CALLS + 1
    # the SDK hands the same run's context again (a retried save): nothing new is seen
    items = [i.to_input_item() for i in result.new_items]
    await session.add_items(items, wrapper=result.context_wrapper)
    assert await memory_store.usage_calls("s") == calls
    # another session object reading the same context records each call once: its
    # call ids are those of the stored messages
    other = ChatledgerSession("s", store=memory_store)
    await other.add_items(items[-1:], wrapper=result.context_wrapper)
    assert len(await memory_store.usage_calls("s")) == len(calls)


async def test_without_the_run_context_nothing_is_recorded(
    memory_store: InMemoryHistoryStore,
) -> None:
    session = ChatledgerSession("s", store=memory_store)
    await session.add_items([{"role": "user", "content": "hi"}])
    assert await memory_store.usage_calls("s") == []


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_calibrate_reaches_the_provider_and_the_after_phase(
    memory_store: InMemoryHistoryStore, streamed: bool
) -> None:
    session = ChatledgerSession(
        "s",
        store=memory_store,
        after_strategy="sliding-window:keep_last_groups=2",
        calibrate=True,
        model="scripted-1",
    )
    assert session.provider.calibrate is True
    assert ChatledgerSession("t", store=memory_store).provider.calibrate is False
    model = Policy(report_usage=True).model()
    await run(make_agent(model), session, range(RUNS), streamed=streamed)

    fit = await memory_store.calibration("s")
    assert fit is not None and fit.model == "scripted-1"
    assert await session.provider.calibration("s") == fit
    events = [e for e in await memory_store.audit("s") if e.phase == "after_run"]
    assert events, "the after phase changed nothing"
    newest = max(events, key=lambda e: e.created_at)
    assert_calibrated(newest.params, fit)


class _Usage:
    def __init__(self, *entries: Any) -> None:
        self.request_usage_entries = list(entries)


class _Wrapper:
    """What the session reads of the SDK's ``RunContextWrapper``: its usage."""

    def __init__(self, *entries: Any) -> None:
        self.usage = _Usage(*entries)


def _entry(n: int) -> Any:
    from tests.integrations.openai_agents_support import scripted_usage

    return scripted_usage(n)


CALL = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}", "id": "fc_1"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "found"}
ANSWER = {
    "type": "message",
    "role": "assistant",
    "id": "msg_2",
    "content": [{"type": "output_text", "text": "done", "annotations": []}],
}


async def test_entries_wait_for_the_batch_that_holds_their_response(
    memory_store: InMemoryHistoryStore,
) -> None:
    session = ChatledgerSession("s", store=memory_store)
    wrapper = _Wrapper(_entry(1))
    await session.add_items([{"role": "user", "content": "hi"}], wrapper=wrapper)  # type: ignore[arg-type]
    assert await memory_store.usage_calls("s") == []
    await session.add_items([CALL, OUTPUT], wrapper=wrapper)  # type: ignore[list-item, arg-type]
    [call] = await memory_store.usage_calls("s")
    assert (call.message_id, lanes(call)) == ("fc_1", expected_lanes(1))


async def test_a_resumed_run_records_only_its_new_requests(
    memory_store: InMemoryHistoryStore,
) -> None:
    session = ChatledgerSession("s", store=memory_store)
    await session.add_items([CALL, OUTPUT], wrapper=_Wrapper(_entry(1)))  # type: ignore[list-item, arg-type]
    # a run resumed from a RunState: a new context whose usage holds the old entry too
    await session.add_items([ANSWER], wrapper=_Wrapper(_entry(1), _entry(2)))  # type: ignore[list-item, arg-type]
    calls = await memory_store.usage_calls("s")
    assert [(c.message_id, lanes(c)) for c in calls] == [
        ("fc_1", expected_lanes(1)),
        ("msg_2", expected_lanes(2)),
    ]
