"""LangChain records each model call's usage (``AIMessage.usage_metadata``), offline.

``create_agent`` with :class:`ChatledgerMiddleware` (``invoke`` and ``ainvoke``), and
``RunnableWithMessageHistory`` with :class:`ChatledgerChatMessageHistory`, around the
scripted model reporting every lane (cache reads and writes, reasoning); each run is a
tool loop (two lookups, then the answer).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables.history import RunnableWithMessageHistory
from langgraph.checkpoint.memory import InMemorySaver

from store import InMemoryHistoryStore, SyncHistoryStore
from store.integrations.langchain import ChatledgerChatMessageHistory, ChatledgerMiddleware
from store.usage import UsageCall
from strategies.tokenizers import Tokenizer
from tests.integrations.langchain_support import (
    SCRIPTED_MODEL,
    TOOL_CALLS,
    ScriptedChatModel,
    lookup,
    tool_loop,
)
from tests.integrations.usage_support import assert_calibrated, expected_lanes, lanes

pytestmark = pytest.mark.filterwarnings(
    "ignore:RunnableWithMessageHistory is deprecated:DeprecationWarning"
)

RUNS = 2
CALLS = RUNS * (TOOL_CALLS + 1)


@pytest.fixture
def sync_store(tokenizer: Tokenizer) -> Iterator[SyncHistoryStore]:
    async def made() -> InMemoryHistoryStore:
        return InMemoryHistoryStore(tokenizer=tokenizer)

    store = SyncHistoryStore.wrap(made)
    try:
        yield store
    finally:
        store.close()


def config(session_id: str, key: str = "thread_id") -> Any:
    return {"configurable": {key: session_id}}


async def run_agent(agent: Any, mode: str, turns: range) -> None:
    for turn in turns:
        state = {"messages": [HumanMessage(f"question {turn}")]}
        if mode == "invoke":
            agent.invoke(state, config=config("t1"))
        else:
            await agent.ainvoke(state, config=config("t1"))


def assert_tied(store: SyncHistoryStore, session_id: str, calls: list[UsageCall]) -> None:
    """Each call is tied to the stored AI message the ``n``-th reply was (``ai_<n>``)."""
    stored = {m.message.message_id: m.message for m in store.history(session_id)}
    for n, call in enumerate(calls, start=1):
        assert call.message_id == f"ai_{n}"
        message = stored[call.message_id]
        assert message.role == "assistant"
        if n % (TOOL_CALLS + 1) == 0:
            assert message.text == f"answer to question {(n - 1) // (TOOL_CALLS + 1)}"
        else:
            assert [c.call_id for c in message.contents if c.type == "function_call"] == [
                f"call_{n}"
            ]
    assistant = [i for i, m in stored.items() if m.role == "assistant"]
    assert sorted(assistant) == sorted(c.message_id for c in calls if c.message_id)


@pytest.mark.parametrize("response_ids", [True, False], ids=["ids", "no-ids"])
@pytest.mark.parametrize("checkpointer", [False, True], ids=["no-checkpointer", "checkpointer"])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_the_middleware_records_every_model_call_once(
    sync_store: SyncHistoryStore, mode: str, checkpointer: bool, response_ids: bool
) -> None:
    model = ScriptedChatModel(report_usage=True, response_ids=response_ids)
    agent = create_agent(
        model,
        tools=[lookup],
        middleware=[ChatledgerMiddleware(store=sync_store)],
        checkpointer=InMemorySaver() if checkpointer else None,
    )
    await run_agent(agent, mode, range(RUNS))

    assert len(model.calls) == CALLS
    calls = sync_store.loop.run(sync_store.async_store.usage_calls("t1"))
    assert [lanes(c) for c in calls] == [expected_lanes(n) for n in range(1, CALLS + 1)]
    assert all(c.usage.model == SCRIPTED_MODEL and c.usage.exact for c in calls)
    assert_tied(sync_store, "t1", calls)
    for n, call in enumerate(calls, start=1):
        assert call.call_id == (f"resp_{n}" if response_ids else f"langchain-ai_{n}")
    # each model call is paired with the projection the middleware sent it
    assert all(c.local_tokens is not None for c in calls)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_the_history_records_the_ai_messages_it_is_given_once(
    sync_store: SyncHistoryStore, mode: str
) -> None:
    history = ChatledgerChatMessageHistory("s", store=sync_store)
    model = ScriptedChatModel(report_usage=True)
    chain = RunnableWithMessageHistory(tool_loop(model), lambda session_id: history)
    for turn in range(RUNS):
        if mode == "invoke":
            chain.invoke(f"question {turn}", config=config("s", "session_id"))
        else:
            await chain.ainvoke(f"question {turn}", config=config("s", "session_id"))
    calls = sync_store.loop.run(sync_store.async_store.usage_calls("s"))
    assert [lanes(c) for c in calls] == [expected_lanes(n) for n in range(1, CALLS + 1)]
    assert_tied(sync_store, "s", calls)
    # the same message added again records nothing more
    again = history.messages[-1]
    assert isinstance(again, AIMessage)
    history.add_messages([again])
    assert len(sync_store.loop.run(sync_store.async_store.usage_calls("s"))) == CALLS


def test_an_ai_message_without_an_id_is_given_the_one_it_is_stored_under(
    sync_store: SyncHistoryStore,
) -> None:
    history = ChatledgerChatMessageHistory("s", store=sync_store)
    reply = AIMessage(
        "hi", usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}
    )
    plain = AIMessage("no usage")
    history.add_messages([HumanMessage("hello"), reply, plain])
    [call] = sync_store.loop.run(sync_store.async_store.usage_calls("s"))
    assert reply.id is not None and call.message_id == reply.id
    assert plain.id is None
    stored = [m.message.message_id for m in sync_store.history("s")]
    assert reply.id in stored
    assert lanes(call) == (5, 1, None, None, None)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_calibrate_reaches_the_provider_and_the_after_phase(
    sync_store: SyncHistoryStore, mode: str
) -> None:
    middleware = ChatledgerMiddleware(
        store=sync_store, after_strategy="sliding-window:keep_last_groups=2", calibrate=True
    )
    assert middleware.phases.calibrate is True
    assert ChatledgerMiddleware(store=sync_store).phases.calibrate is False
    model = ScriptedChatModel(report_usage=True)
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    await run_agent(agent, mode, range(RUNS))

    fit = sync_store.loop.run(sync_store.async_store.calibration("t1"))
    assert fit is not None and fit.model == SCRIPTED_MODEL and fit.calls == CALLS
    assert sync_store.loop.run(middleware.phases.calibration("t1")) == fit
    events = [e for e in sync_store.audit("t1") if e.phase == "after_run"]
    assert events, "the after phase changed nothing"
    newest = max(events, key=lambda e: e.created_at)
    assert_calibrated(newest.params, fit)
