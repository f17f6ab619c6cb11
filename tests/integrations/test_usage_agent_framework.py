"""Agent Framework records each model call's usage, offline, in both of its modes.

The scripted client reports every lane (cache reads and writes, reasoning) on each
response; runs of a tool loop (two lookups, then the answer) must leave one recorded
call per model call, tied to the stored assistant message that call produced.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
from agent_framework import Agent, AgentSession, ChatResponseUpdate
from agent_framework import Message as AFMessage

from store.integrations.agent_framework import ChatledgerHistoryProvider
from store.memory import InMemoryHistoryStore
from strategies.messages import FunctionCallContent
from strategies.tokenizers import Tokenizer
from tests.integrations.agents import BUILDERS, OUTPUT, TOOL_CALLS, WINDOW, run_turns
from tests.integrations.scripted_client import (
    SCRIPTED_MODEL,
    ParallelSearchClient,
    ScriptedChatClient,
)
from tests.integrations.usage_support import assert_calibrated, expected_lanes, lanes

RUNS = 2
CALLS = RUNS * (TOOL_CALLS + 1)


@pytest.mark.parametrize("response_ids", [True, False], ids=["ids", "no-ids"])
@pytest.mark.parametrize("mode", sorted(BUILDERS))
async def test_every_model_call_is_recorded_once_and_tied_to_its_message(
    memory_store: InMemoryHistoryStore, tokenizer: Tokenizer, mode: str, response_ids: bool
) -> None:
    provider = ChatledgerHistoryProvider(
        memory_store, max_context_window_tokens=WINDOW, max_output_tokens=OUTPUT
    )
    client = ScriptedChatClient(report_usage=True, response_ids=response_ids)
    agent = BUILDERS[mode](client, provider, tokenizer)
    await run_turns(agent, client, AgentSession(session_id="s"), tokenizer, range(RUNS))

    assert len(client.calls) == CALLS
    calls = await memory_store.usage_calls("s")
    assert len(calls) == CALLS
    stored = {m.message.message_id: m.message for m in await memory_store.history("s")}
    for n, (call, response) in enumerate(zip(calls, client.responses, strict=True), start=1):
        assert lanes(call) == expected_lanes(n)
        assert call.usage.model == SCRIPTED_MODEL and call.usage.exact
        # the function loop adds to the response (its results, and to the last one the
        # loop's earlier messages): the call's own message is its last assistant message
        answer = [m for m in response.messages if m.role == "assistant"][-1]
        assert call.message_id is not None and call.message_id == answer.message_id
        message = stored[call.message_id]
        assert message.role == "assistant"
        if n % (TOOL_CALLS + 1) == 0:
            assert message.text == answer.text and answer.text.startswith("answer to")
        else:
            [content] = answer.contents
            calls_made = [c.call_id for c in message.contents if isinstance(c, FunctionCallContent)]
            assert calls_made == [content.call_id]
        if response_ids:
            assert call.call_id == f"resp_{n}"
        else:
            assert call.call_id == f"chatledger-call-{call.message_id}"
    # every stored assistant message is the answer of exactly one recorded call
    assistant = [i for i, m in stored.items() if m.role == "assistant"]
    assert sorted(assistant) == sorted(c.message_id for c in calls if c.message_id)
    # the first call of a run is paired with the run's projection
    assert calls[0].local_tokens is not None

    # a response seen again (the middleware added twice, a re-delivery) records nothing
    await provider.usage_middleware.record("s", client.responses[0])
    assert len(await memory_store.usage_calls("s")) == CALLS


async def test_a_response_without_usage_records_nothing_and_keeps_its_ids(
    memory_store: InMemoryHistoryStore, tokenizer: Tokenizer
) -> None:
    provider = ChatledgerHistoryProvider(memory_store)
    client = ScriptedChatClient()
    agent = BUILDERS["plain"](client, provider, tokenizer)
    await run_turns(agent, client, AgentSession(session_id="s"), tokenizer, range(1))
    assert await memory_store.usage_calls("s") == []
    stored = await memory_store.history("s")
    assert not any(m.message.message_id.startswith("chatledger-") for m in stored)


async def test_record_usage_false_records_nothing(
    memory_store: InMemoryHistoryStore, tokenizer: Tokenizer
) -> None:
    provider = ChatledgerHistoryProvider(memory_store, record_usage=False)
    for mode in sorted(BUILDERS):
        client = ScriptedChatClient(report_usage=True)
        agent = BUILDERS[mode](client, provider, tokenizer)
        await run_turns(agent, client, AgentSession(session_id=mode), tokenizer, range(1))
        assert await memory_store.usage_calls(mode) == []


@pytest.mark.parametrize("mode", sorted(BUILDERS))
async def test_calibrate_reaches_the_provider_and_the_after_phase(
    memory_store: InMemoryHistoryStore, tokenizer: Tokenizer, mode: str
) -> None:
    provider = ChatledgerHistoryProvider(
        memory_store, after_strategy="sliding-window:keep_last_groups=2", calibrate=True
    )
    assert provider.phases.calibrate is True
    assert ChatledgerHistoryProvider(memory_store).phases.calibrate is False
    client = ScriptedChatClient(report_usage=True)
    agent = BUILDERS[mode](client, provider, tokenizer)
    session = AgentSession(session_id="s")
    await run_turns(agent, client, session, tokenizer, range(RUNS))

    fit = await memory_store.calibration("s")
    assert fit is not None and fit.model == SCRIPTED_MODEL
    assert provider.last_save is not None
    assert await provider.phases.calibration("s") == fit
    event = provider.last_save.compaction
    assert event is not None, "the after phase changed nothing"
    assert_calibrated(event.params, fit)


@pytest.mark.parametrize("stream", [False, True], ids=["run", "streamed"])
async def test_parallel_calls_streamed_or_not_are_recorded_per_response(
    memory_store: InMemoryHistoryStore, stream: bool
) -> None:
    client = ParallelSearchClient(["a", "b"], report_usage=True)
    provider = ChatledgerHistoryProvider(memory_store)

    def search(query: str) -> str:
        """Search for ``query``."""
        return f"found {query}"

    agent = Agent(client, tools=[search], context_providers=[provider])
    session = AgentSession(session_id="s")
    for turn in range(RUNS):
        if stream:
            updates = [u async for u in agent.run(f"find {turn}", session=session, stream=True)]
            assert updates
        else:
            await agent.run(f"find {turn}", session=session)

    calls = await memory_store.usage_calls("s")
    assert len(client.calls) == 2 * RUNS
    assert [lanes(c) for c in calls] == [expected_lanes(n) for n in range(1, 2 * RUNS + 1)]
    stored = {m.message.message_id: m.message for m in await memory_store.history("s")}
    tied = [stored[c.message_id] for c in calls if c.message_id in stored]
    assert len(tied) == len(calls)
    for n, message in enumerate(tied):
        assert message.role == "assistant"
        if n % 2 == 0:
            assert [c.type for c in message.contents] == ["function_call"] * 2  # in parallel
        else:
            assert message.text.startswith("done: find")
    assert len({c.call_id for c in calls}) == len(calls)
    # no other assistant message is stored (a usage-only update makes none)
    assistant = [i for i, m in stored.items() if m.role == "assistant"]
    assert sorted(assistant) == sorted(c.message_id for c in calls if c.message_id)


class _ItemIdClient(ParallelSearchClient):
    """Streams as the Responses API does through the framework: the content updates carry
    the output item's id, the usage update none."""

    async def _stream(self, messages: Sequence[AFMessage]) -> AsyncIterator[ChatResponseUpdate]:
        n = len(self.calls)
        async for update in super()._stream(messages):
            if not all(c.type == "usage" for c in update.contents):
                update.message_id = f"item_{n}"
            yield update


async def test_a_streamed_response_keeps_the_item_id_it_carries(
    memory_store: InMemoryHistoryStore,
) -> None:
    client = _ItemIdClient(["a"], report_usage=True)
    provider = ChatledgerHistoryProvider(memory_store)

    def search(query: str) -> str:
        """Search for ``query``."""
        return f"found {query}"

    agent = Agent(client, tools=[search], context_providers=[provider])
    updates = [
        u async for u in agent.run("find", session=AgentSession(session_id="s"), stream=True)
    ]
    assert updates
    calls = await memory_store.usage_calls("s")
    assert [c.message_id for c in calls] == ["item_1", "item_2"]
    assert [lanes(c) for c in calls] == [expected_lanes(1), expected_lanes(2)]
    stored = {m.message.message_id: m.message for m in await memory_store.history("s")}
    assert sorted(i for i, m in stored.items() if m.role == "assistant") == ["item_1", "item_2"]
