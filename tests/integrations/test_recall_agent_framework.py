"""The recall tool end to end with the real Agent Framework, offline.

A fact stated in the first turn is compacted away by the provider's window; asked for
it later, the scripted model calls the ``recall`` tool the provider added to the run,
and the result it is sent holds the fact within the tool's budget. Every request keeps
its calls next to their results, and each summary it is sent ends with the note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from agent_framework import (
    Agent,
    AgentSession,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
    create_harness_agent,
)
from agent_framework.observability import ChatTelemetryLayer

from store.contract import HistoryBackend
from store.integrations.agent_framework import ChatledgerHistoryProvider, from_af_messages
from store.integrations.recall import RecallOptions
from strategies.messages import FunctionCallContent, FunctionResultContent
from strategies.tokenizers import Tokenizer, count_messages_tokens
from strategies.tool_result import tool_results_summary
from tests.integrations.recall_support import (
    ASK,
    BUDGET,
    FACT,
    FILLER_TURNS,
    NOTE,
    OUTPUT,
    QUERY,
    RECALL_TOKENS,
    STATEMENT,
    WINDOW,
    answer_from,
    assert_fact_was_compacted_away,
    assert_recall_result,
    big_result,
    filler,
)

SUMMARY_PREFIX = tool_results_summary(["|"]).split("|")[0]


class RecallingClient(
    FunctionInvocationLayer[Any],
    ChatMiddlewareLayer[Any],
    ChatTelemetryLayer[Any],
    BaseChatClient[Any],
):
    """Per user turn: one ``lookup`` then an answer; asked :data:`ASK`, one ``recall``
    then the result it got; every request recorded."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.requests: list[list[Message]] = []
        self._counter = 0

    def _reply(self, messages: Sequence[Message]) -> Message:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        asked = messages[last_user].text
        results = [
            c for m in messages[last_user:] for c in m.contents if c.type == "function_result"
        ]
        if asked == STATEMENT:
            return Message(role="assistant", contents=["noted"])
        if results:
            text = str(results[-1].result)
            return Message(role="assistant", contents=[answer_from(text) if asked == ASK else "ok"])
        self._counter += 1
        name, query = ("recall", QUERY) if asked == ASK else ("lookup", asked)
        call = Content.from_function_call(
            call_id=f"call_{self._counter}", name=name, arguments={"query": query}
        )
        return Message(role="assistant", contents=[call])

    async def _respond(self, messages: Sequence[Message]) -> ChatResponse:
        return ChatResponse(messages=[self._reply(messages)])

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kw: Any
    ) -> Any:
        self.requests.append(list(messages))
        return self._respond(messages)


def lookup(query: str) -> str:
    """Look ``query`` up."""
    return big_result(query)


def _provider(store: HistoryBackend) -> ChatledgerHistoryProvider:
    return ChatledgerHistoryProvider(
        store,
        max_context_window_tokens=WINDOW,
        max_output_tokens=OUTPUT,
        recall=RecallOptions(max_tokens=RECALL_TOKENS, note=NOTE),
    )


def _agent(mode: str, client: RecallingClient, provider: ChatledgerHistoryProvider) -> Any:
    if mode == "plain":
        return Agent(client, tools=[lookup], context_providers=[provider])
    return create_harness_agent(
        client,
        tools=[lookup],
        history_provider=provider,
        disable_compaction=True,
        disable_todo=True,
        disable_mode=True,
        disable_file_memory=True,
        disable_web_search=True,
    )


def _check_request(messages: list[Message], tokenizer: Tokenizer) -> None:
    ours = from_af_messages(messages)
    calls = {c.call_id for m in ours for c in m.contents if isinstance(c, FunctionCallContent)}
    results = {c.call_id for m in ours for c in m.contents if isinstance(c, FunctionResultContent)}
    assert calls == results, f"unpaired: {calls ^ results}"
    assert count_messages_tokens(ours, tokenizer) <= BUDGET + RECALL_TOKENS
    for message in ours:
        if message.text.startswith(SUMMARY_PREFIX):
            assert message.text.endswith(f"\n\n{NOTE}")


@pytest.mark.parametrize("mode", ["plain", "harness"])
async def test_a_compacted_fact_comes_back_through_recall(
    mode: str, recall_store: HistoryBackend, tokenizer: Tokenizer
) -> None:
    client = RecallingClient()
    provider = _provider(recall_store)
    agent = _agent(mode, client, provider)
    session = AgentSession(session_id=f"recall-{mode}")
    await agent.run(STATEMENT, session=session)
    for turn in range(FILLER_TURNS):
        await agent.run(filler(turn), session=session)
    fact_id = await assert_fact_was_compacted_away(recall_store, session.session_id)
    await recall_store.compact(session.session_id, "tool-result:keep_last_tool_call_groups=1")
    start = len(client.requests)

    response = await agent.run(ASK, session=session)

    asking, answered = client.requests[start:]
    assert all(FACT not in m.text for m in asking)
    [sent] = [
        c.result
        for m in answered
        for c in m.contents
        if c.type == "function_result" and c.call_id == f"call_{client._counter}"
    ]
    assert_recall_result(str(sent), fact_id, tokenizer)
    assert FACT in response.text
    await agent.run(filler(FILLER_TURNS), session=session)
    for request in client.requests:
        _check_request(request, tokenizer)
    stored = await recall_store.history(session.session_id, include_excluded=True)
    summaries = [m for m in stored if m.kind == "summary"]
    assert summaries and all(NOTE not in m.message.text for m in summaries)
    assert any(m.text.startswith(SUMMARY_PREFIX) for m in answered)


async def test_the_tool_finds_nothing_of_another_tenant(
    recall_store: HistoryBackend, other_tenant_store: HistoryBackend
) -> None:
    client = RecallingClient()
    agent = _agent("plain", client, _provider(recall_store))
    session = AgentSession(session_id="shared-id")
    await agent.run(STATEMENT, session=session)
    mine = await _provider(recall_store).recall_tool("shared-id").invoke(arguments={"query": QUERY})
    assert json.loads(mine[0].text)["hits"]
    other = _provider(other_tenant_store).recall_tool("shared-id")
    [content] = await other.invoke(arguments={"query": QUERY})
    assert json.loads(str(content.text))["hits"] == []
