"""The recall tool end to end with LangChain's ``create_agent``, offline.

A fact stated in the first turn is compacted away by the middleware's window; asked for
it later, the scripted model calls the ``recall`` tool of ``ChatledgerMiddleware(...,
recall=True)``, and the result it is sent holds the fact within the tool's budget. Every
model call keeps its calls next to their results, and each summary it is sent ends with
the note.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from store import InMemoryHistoryStore, SyncHistoryStore
from store.integrations.langchain import ChatledgerMiddleware
from store.integrations.recall import RecallOptions
from store.memory import MemoryDatabase
from strategies.tokenizers import Tokenizer
from strategies.tool_result import tool_results_summary
from tests.integrations.langchain_support import last_user_text, pairing_problems, tokens
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
THREAD = "recall-lc"


class RecallingChatModel(BaseChatModel):
    """Per user request one ``lookup`` then an answer; asked :data:`ASK`, one ``recall``
    then the result it got; every call recorded."""

    counter: int = 0
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-recall"

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecallingChatModel:
        return self

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        self.calls.append([m.model_copy(deep=True) for m in messages])
        asked = last_user_text(messages)
        last_user = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        results = [m for m in messages[last_user:] if isinstance(m, ToolMessage)]
        self.counter += 1
        if asked == STATEMENT:
            reply = AIMessage(content="noted", id=f"ai_{self.counter}")
        elif results:
            text = answer_from(str(results[-1].content)) if asked == ASK else "ok"
            reply = AIMessage(content=text, id=f"ai_{self.counter}")
        else:
            name, args = (
                ("recall", {"query": QUERY}) if asked == ASK else ("lookup", {"query": asked})
            )
            call = {"name": name, "args": args, "id": f"call_{self.counter}", "type": "tool_call"}
            reply = AIMessage(content="", tool_calls=[call], id=f"ai_{self.counter}")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._reply(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._reply(messages)


@tool
def lookup(query: str) -> str:
    """Look ``query`` up."""
    return big_result(query)


def _sync_store(
    backend: str, database: MemoryDatabase, tmp_path: Path, tokenizer: Tokenizer, tenant: str
) -> SyncHistoryStore:
    """A synchronous store of ``backend`` for ``tenant`` (the tenants share a database)."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'recall.db'}"
        return SyncHistoryStore.open(url, tenant=tenant, tokenizer=tokenizer)
    assert backend == "memory", backend

    async def made() -> InMemoryHistoryStore:
        return InMemoryHistoryStore(database, tenant=tenant, tokenizer=tokenizer)

    return SyncHistoryStore.wrap(made)


@pytest.fixture
def open_sync_store(
    recall_backend: str, database: MemoryDatabase, tmp_path: Path, tokenizer: Tokenizer
) -> Iterator[Callable[[str], SyncHistoryStore]]:
    """Open the synchronous store of a tenant, on each backend that searches; each is
    closed after the test."""
    opened: list[SyncHistoryStore] = []

    def open_store(tenant: str) -> SyncHistoryStore:
        opened.append(_sync_store(recall_backend, database, tmp_path, tokenizer, tenant))
        return opened[-1]

    try:
        yield open_store
    finally:
        for store in opened:
            store.close()


@pytest.fixture
def recall_sync_store(open_sync_store: Callable[[str], SyncHistoryStore]) -> SyncHistoryStore:
    """The default tenant's synchronous store, private to the test."""
    return open_sync_store("default")


def _middleware(store: SyncHistoryStore, **options: Any) -> ChatledgerMiddleware:
    return ChatledgerMiddleware(
        store=store,
        max_context_window_tokens=WINDOW,
        max_output_tokens=OUTPUT,
        recall=RecallOptions(max_tokens=RECALL_TOKENS, note=NOTE),
        **options,
    )


async def _turn(agent: Any, text: str, mode: str) -> dict[str, Any]:
    state = {"messages": [HumanMessage(text)]}
    config: Any = {"configurable": {"thread_id": THREAD}}
    if mode == "invoke":
        return dict(agent.invoke(state, config=config))
    return dict(await agent.ainvoke(state, config=config))


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_a_compacted_fact_comes_back_through_recall(
    mode: str, recall_sync_store: SyncHistoryStore, tokenizer: Tokenizer
) -> None:
    model = RecallingChatModel()
    middleware = _middleware(recall_sync_store)
    assert [t.name for t in middleware.tools] == ["recall"]
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    await _turn(agent, STATEMENT, mode)
    for turn in range(FILLER_TURNS):
        await _turn(agent, filler(turn), mode)
    async_store = recall_sync_store.async_store
    fact_id = await recall_sync_store.loop.arun(assert_fact_was_compacted_away(async_store, THREAD))
    recall_sync_store.compact(THREAD, "tool-result:keep_last_tool_call_groups=1")
    start = len(model.calls)

    state = await _turn(agent, ASK, mode)

    asking, answered = model.calls[start:]
    assert all(FACT not in str(m.content) for m in asking)
    [sent] = [m for m in answered if isinstance(m, ToolMessage) and m.name == "recall"]
    assert_recall_result(str(sent.content), fact_id, tokenizer)
    assert FACT in str(state["messages"][-1].content)
    await _turn(agent, filler(FILLER_TURNS), mode)
    assert [pairing_problems(c) for c in model.calls] == [[]] * len(model.calls)
    assert max(tokens(c, tokenizer) for c in model.calls) <= BUDGET + RECALL_TOKENS
    summaries = [
        str(m.content)
        for call in model.calls
        for m in call
        if str(m.content).startswith(SUMMARY_PREFIX)
    ]
    assert summaries and all(s.endswith(f"\n\n{NOTE}") for s in summaries)
    stored = recall_sync_store.history(THREAD, include_excluded=True)
    assert all(NOTE not in m.message.text for m in stored)
    assert sum(m.message.message_id == sent.id for m in stored) == 1  # the result is stored


def test_the_tool_finds_nothing_of_another_tenant(
    recall_sync_store: SyncHistoryStore, open_sync_store: Callable[[str], SyncHistoryStore]
) -> None:
    agent = create_agent(
        RecallingChatModel(), tools=[lookup], middleware=[_middleware(recall_sync_store)]
    )
    agent.invoke(
        {"messages": [HumanMessage(STATEMENT)]}, config={"configurable": {"thread_id": THREAD}}
    )
    for store, found in ((recall_sync_store, True), (open_sync_store("other"), False)):
        [recall] = _middleware(store).tools
        agent = create_agent(RecallingChatModel(), tools=[recall])
        result = agent.invoke(
            {"messages": [HumanMessage(ASK)]}, config={"configurable": {"thread_id": THREAD}}
        )
        [message] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
        assert bool(json.loads(str(message.content))["hits"]) is found
