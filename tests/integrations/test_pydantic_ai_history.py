"""Pydantic AI: :class:`ChatledgerHistory` sends chatledger's projection and compacts on
request, offline (``FunctionModel``), on the in-memory store and SQLite.

The scripted model answers a user prompt with a call of the ``lookup`` tool (or, for a
prompt that asks for compaction, of the compaction tool), and a tool's result with text;
it records every history it is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, CompactionRequest, CompactionResult
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from store import HistoryStore
from store.contract import HistoryBackend
from store.errors import InvalidInput
from store.integrations.pydantic_ai_history import (
    COMPACTION_HANDLER,
    COMPACTION_TOOL_NAME,
    ChatledgerHistory,
    usage_from_pydantic_ai,
)
from store.memory import InMemoryHistoryStore, MemoryDatabase
from store.models import StoredMessage
from store.provider import ContextWindow
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    OtherContent,
    TextContent,
)
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.tokenizers import Tokenizer

SYSTEM = "Answer briefly."
COMPACT_PROMPT = "please compact the history"
FOCUS = "the looked-up values"


@pytest.fixture(params=["memory", "sqlite"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, tokenizer: Tokenizer
) -> AsyncIterator[HistoryBackend]:
    if request.param == "memory":
        yield InMemoryHistoryStore(MemoryDatabase(), tokenizer=tokenizer)
        return
    async with HistoryStore.open(f"sqlite:///{tmp_path / 'pyd.db'}", tokenizer=tokenizer) as s:
        yield s


class Scripted:
    """The model: a tool call for a prompt, text for a tool's result; every history sent
    is kept in :attr:`sent`."""

    def __init__(self) -> None:
        self.sent: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(list(messages))
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        part = last.parts[-1]
        if isinstance(part, UserPromptPart):
            if part.content == COMPACT_PROMPT:
                call = ToolCallPart(COMPACTION_TOOL_NAME, {"focus": FOCUS})
            else:
                call = ToolCallPart("lookup", {"key": str(part.content)})
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart(f"answered after {len(messages)} messages")])


def agent_with(
    capability: ChatledgerHistory, model: Scripted, *before: AbstractCapability[Any]
) -> Agent[None, str]:
    agent = Agent(FunctionModel(model), capabilities=[*before, capability], system_prompt=SYSTEM)

    @agent.tool_plain
    def lookup(key: str) -> str:
        return f"the value of {key} is {len(key)}"

    return agent


def calls_and_returns(messages: list[ModelMessage]) -> tuple[set[str], set[str]]:
    calls = {
        p.tool_call_id
        for m in messages
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    }
    returns = {
        p.tool_call_id
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    return calls, returns


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


def compaction_parts(messages: list[ModelMessage]) -> list[CompactionPart]:
    return [p for m in messages for p in m.parts if isinstance(p, CompactionPart)]


async def stored(store: HistoryBackend, session_id: str) -> list[StoredMessage]:
    return await store.history(session_id, include_excluded=True)


def texts(messages: list[StoredMessage], role: str) -> list[str]:
    return [
        c.text
        for m in messages
        if m.message.role == role and m.kind != "summary"
        for c in m.message.contents
        if isinstance(c, TextContent)
    ]


async def test_the_projection_trims_a_long_conversation_and_never_splits_a_tool_exchange(
    store: HistoryBackend,
) -> None:
    model = Scripted()
    capability = ChatledgerHistory(
        store, session_id="s", before_strategy="sliding-window:keep_last_groups=3"
    )
    agent = agent_with(capability, model)
    questions = [f"question {i}" for i in range(6)]
    for question in questions:
        await agent.run(question)  # no history given: the projection brings it

    kept = await stored(store, "s")
    assert texts(kept, "user") == questions
    assert texts(kept, "system") == [SYSTEM]
    for sent in model.sent:
        calls, returns = calls_and_returns(sent)
        assert calls == returns
        assert isinstance(sent[0], ModelRequest)
        assert any(isinstance(p, SystemPromptPart) for p in sent[0].parts)
    last = model.sent[-1]
    assert prompts(last)[-1] == questions[-1]
    assert questions[0] not in prompts(last)
    assert len(last) < len(to_sent_shape(kept))
    assert await store.audit("s") == []


def to_sent_shape(messages: list[StoredMessage]) -> list[StoredMessage]:
    """The stored messages the model would be sent without a strategy (all appended)."""
    return [m for m in messages if m.kind != "summary"]


async def test_a_history_given_again_is_stored_once(store: HistoryBackend) -> None:
    model = Scripted()
    agent = agent_with(ChatledgerHistory(store, session_id="s"), model)
    history: list[ModelMessage] | None = None
    questions = [f"question {i}" for i in range(3)]
    for question in questions:
        result = await agent.run(question, message_history=history)
        history = result.all_messages()

    kept = await stored(store, "s")
    assert texts(kept, "user") == questions
    assert texts(kept, "system") == [SYSTEM]
    assert history is not None
    calls, returns = calls_and_returns(history)
    stored_calls = [
        c.call_id for m in kept for c in m.message.contents if isinstance(c, FunctionCallContent)
    ]
    stored_results = [
        c.call_id for m in kept for c in m.message.contents if isinstance(c, FunctionResultContent)
    ]
    assert sorted(stored_calls) == sorted(calls)
    assert sorted(stored_results) == sorted(returns)
    # without a strategy the model is sent exactly the run's history
    assert model.sent[-1] == history[:-1]


async def test_the_session_is_the_runs_conversation_without_a_session_id(
    store: HistoryBackend,
) -> None:
    agent = agent_with(ChatledgerHistory(store), Scripted())
    result = await agent.run("question", conversation_id="conversation-1")
    assert result.conversation_id == "conversation-1"
    assert texts(await stored(store, "conversation-1"), "user") == ["question"]


def summarizing(summarizer: FakeSummarizer) -> SummarizationStrategy:
    """Summarization that only a request sets off (its threshold is never crossed)."""
    return SummarizationStrategy(client=summarizer, target_count=4, threshold=10_000)


async def test_the_model_asks_for_compaction_with_its_tool(store: HistoryBackend) -> None:
    model = Scripted()
    summarizer = FakeSummarizer()
    strategy = summarizing(summarizer)
    capability = ChatledgerHistory(
        store,
        session_id="s",
        before_strategy=strategy,
        after_strategy=strategy,
        compaction_tool=True,
    )
    agent = agent_with(capability, model)
    for i in range(3):
        await agent.run(f"question {i}")
    before = len(model.sent)
    result = await agent.run(COMPACT_PROMPT)

    asked, answered = model.sent[before:]
    assert compaction_parts(asked) == []
    parts = compaction_parts(answered)
    assert len(parts) == 1
    assert parts[0].content is not None and parts[0].content.startswith("Summary of")
    assert len(answered) < len(asked) + 2
    # the tool's call and its result are sent together, after the summary
    calls, returns = calls_and_returns(answered)
    assert calls == returns and len(calls) == 1
    assert prompts(answered) == [COMPACT_PROMPT]
    assert FOCUS in summarizer.calls[-1][1]

    (record,) = result.compactions
    assert (record.handler, record.reason) == (COMPACTION_HANDLER, "model_requested")
    (event,) = await store.audit("s")
    assert (event.phase, event.reason, event.focus) == ("after_run", "model_requested", FOCUS)

    kept = await stored(store, "s")
    (call,) = [
        m
        for m in kept
        if any(
            isinstance(c, FunctionCallContent) and c.name == COMPACTION_TOOL_NAME
            for c in m.message.contents
        )
    ]
    call_id = next(c.call_id for c in call.message.contents if isinstance(c, FunctionCallContent))
    (answer,) = [
        m
        for m in kept
        if any(
            isinstance(c, FunctionResultContent) and c.call_id == call_id
            for c in m.message.contents
        )
    ]
    assert call.group_id == answer.group_id
    assert not call.excluded and not answer.excluded
    assert texts(kept, "user") == [*(f"question {i}" for i in range(3)), COMPACT_PROMPT]


async def test_nothing_is_compacted_between_a_call_and_its_result(
    store: HistoryBackend,
) -> None:
    summarizer = FakeSummarizer()
    strategy = summarizing(summarizer)
    agent = agent_with(
        ChatledgerHistory(
            store,
            session_id="s",
            before_strategy=strategy,
            after_strategy=strategy,
            compaction_tool=True,
        ),
        Scripted(),
    )
    for i in range(3):
        await agent.run(f"question {i}")
    # the compaction tool's call is stored before the tool runs, its result after: the
    # request only reaches the session at the next model request, so no event lies
    # between them, and the one event comes after both
    await agent.run(COMPACT_PROMPT)
    (event,) = await store.audit("s")
    kept = await stored(store, "s")
    for message in kept:
        calls = [c.call_id for c in message.message.contents if isinstance(c, FunctionCallContent)]
        for call_id in calls:
            results = [
                m
                for m in kept
                for c in m.message.contents
                if isinstance(c, FunctionResultContent) and c.call_id == call_id
            ]
            assert len(results) == 1
            assert results[0].excluded == message.excluded
            assert results[0].group_id == message.group_id
    assert event.created_at >= max(m.stored_at for m in kept if m.kind != "summary")


async def test_compaction_a_person_asks_of_the_agent_keeps_its_reason_and_focus(
    store: HistoryBackend,
) -> None:
    summarizer = FakeSummarizer()
    strategy = summarizing(summarizer)
    agent = agent_with(
        ChatledgerHistory(store, session_id="s", before_strategy=strategy, after_strategy=strategy),
        Scripted(),
    )
    history: list[ModelMessage] | None = None
    for i in range(3):
        history = (await agent.run(f"question {i}", message_history=history)).all_messages()
    assert history is not None
    compacted = await agent.compact_history(history, focus="the values")

    (record,) = compacted.compactions
    assert record.reason == "manual"
    (event,) = await store.audit("s")
    assert (event.reason, event.focus) == ("manual", "the values")
    assert len(compacted.all_messages()) < len(history)
    # the request the compaction run adds to compact with holds nothing: not stored
    assert all(m.message.contents for m in await stored(store, "s"))
    # the compacted history given again stores nothing twice
    await agent.run("question 3", message_history=compacted.all_messages())
    assert texts(await stored(store, "s"), "user") == [f"question {i}" for i in range(4)]


async def test_each_model_call_is_recorded_in_the_usage_ledger(store: HistoryBackend) -> None:
    agent = agent_with(ChatledgerHistory(store, session_id="s"), Scripted())
    result = await agent.run("question")
    calls = await store.usage_calls("s")
    responses = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
    assert [c.usage.input_tokens for c in calls] == [r.usage.input_tokens for r in responses]
    assert [c.usage.output_tokens for c in calls] == [r.usage.output_tokens for r in responses]
    assistant_ids = {
        m.message.message_id for m in await stored(store, "s") if m.message.role == "assistant"
    }
    assert all(c.message_id in assistant_ids for c in calls)
    # each call is paired with the projection it was sent
    assert all(c.local_tokens is not None for c in calls)


def test_usage_from_pydantic_ai_keeps_every_lane() -> None:
    usage = RequestUsage(
        input_tokens=120,
        output_tokens=30,
        cache_read_tokens=40,
        cache_write_tokens=20,
        details={"reasoning_tokens": 10},
    )
    converted = usage_from_pydantic_ai(usage, model="m")
    assert converted is not None
    assert (converted.model, converted.input_tokens, converted.output_tokens) == ("m", 120, 30)
    assert (converted.cache_read_tokens, converted.cache_write_tokens) == (40, 20)
    assert converted.reasoning_tokens == 10
    assert usage_from_pydantic_ai(RequestUsage()) is None
    assert usage_from_pydantic_ai(None) is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"session_id": ""}, "session_id must be a non-empty string"),
        ({"compaction_tool": "yes"}, "compaction_tool must be True or False"),
        (
            {"window": ContextWindow(), "before_strategy": "sliding-window:keep_last_groups=2"},
            "give window or before_strategy, not both",
        ),
        ({"max_context_window_tokens": 1000}, "give both max_context_window_tokens"),
        ({"store": object()}, "store must be a chatledger store"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        ChatledgerHistory(**options)


FOREIGN_SUMMARY = "the conversation so far, as another capability summarized it"


class ForeignCompaction(AbstractCapability[Any]):
    """A compaction of another capability: a summary of its own, in a request after the
    standing system prompt, then the turn being answered."""

    async def compact_history(
        self, ctx: RunContext[Any], request: CompactionRequest
    ) -> CompactionResult | None:
        given = request.messages
        turn = 2 if isinstance(given[-2], ModelResponse) and given[-2].tool_calls else 1
        first = given[0]
        standing = [p for p in first.parts if isinstance(p, SystemPromptPart)]
        part = CompactionPart(content=FOREIGN_SUMMARY)
        opening = ModelRequest(parts=[*standing, part])
        return CompactionResult(
            messages=[opening, *given[len(given) - turn :]],
            part=part,
            handler="foreign",
            kept_from=1,
        )


@pytest.mark.parametrize("given", [False, True], ids=["no-history", "history-given"])
async def test_a_compaction_from_elsewhere_is_stored_as_a_summary(
    store: HistoryBackend, given: bool
) -> None:
    model = Scripted()
    capability = ChatledgerHistory(store, session_id="s", compaction_tool=True)
    agent = agent_with(capability, model, ForeignCompaction())
    history: list[ModelMessage] | None = None
    for i in range(3):
        result = await agent.run(f"question {i}", message_history=history if given else None)
        history = result.all_messages()
    result = await agent.run(COMPACT_PROMPT, message_history=history if given else None)
    (record,) = result.compactions
    assert record.handler == "foreign"
    # the request after the compaction is sent the summary, in its place, once
    answered = model.sent[-1]
    assert [p.content for p in compaction_parts(answered)] == [FOREIGN_SUMMARY]
    assert prompts(answered) == []
    calls, returns = calls_and_returns(answered)
    assert calls == returns and len(calls) == 1

    (event,) = await store.audit("s")
    assert (event.strategy, event.phase) == ("pydantic-ai-compaction", "manual")
    kept = await stored(store, "s")
    summaries = [m for m in kept if m.kind == "summary"]
    assert len(summaries) == 1 and not summaries[0].excluded
    appended = [m for m in kept if m.kind != "summary"]
    assert not any(
        isinstance(c, OtherContent) and c.kind == "compaction"
        for m in appended
        for c in m.message.contents
    )
    assert texts(kept, "system") == [SYSTEM]
    # the questions before the compaction are left out, kept stored
    assert all(m.excluded for m in appended if m.message.role == "user")

    # a later run (its history given again, or not) adopts nothing twice
    after = await agent.run("question 4", message_history=result.all_messages() if given else None)
    assert len(await store.audit("s")) == 1
    sent = model.sent[-2]
    assert [p.content for p in compaction_parts(sent)] == [FOREIGN_SUMMARY]
    assert prompts(sent) == ["question 4"]
    assert after.output


async def test_the_window_options_fit_the_projection_to_the_window(store: HistoryBackend) -> None:
    model = Scripted()
    capability = ChatledgerHistory(
        store, session_id="s", max_context_window_tokens=900, max_output_tokens=100
    )
    agent = agent_with(capability, model)
    questions = [f"question {i}: " + "tell me more " * 40 for i in range(8)]
    for question in questions:
        await agent.run(question)

    last = model.sent[-1]
    assert prompts(last)[-1] == questions[-1]
    assert questions[0] not in prompts(last)
    for sent in model.sent:
        calls, returns = calls_and_returns(sent)
        assert calls == returns
    kept = await stored(store, "s")
    assert texts(kept, "user") == questions


class Parallel(Scripted):
    """Asks for compaction among two lookups, in one response (parallel calls)."""

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = messages[-1].parts[-1]
        if isinstance(part, UserPromptPart) and part.content == COMPACT_PROMPT:
            self.sent.append(list(messages))
            return ModelResponse(
                parts=[
                    ToolCallPart("lookup", {"key": "first"}),
                    ToolCallPart(COMPACTION_TOOL_NAME, {"focus": FOCUS}),
                    ToolCallPart("lookup", {"key": "second"}),
                ]
            )
        return super().__call__(messages, info)


async def test_parallel_calls_around_the_compaction_tool_stay_whole(
    store: HistoryBackend,
) -> None:
    model = Parallel()
    strategy = summarizing(FakeSummarizer())
    agent = agent_with(
        ChatledgerHistory(
            store,
            session_id="s",
            before_strategy=strategy,
            after_strategy=strategy,
            compaction_tool=True,
        ),
        model,
    )
    for i in range(3):
        await agent.run(f"question {i}")
    await agent.run(COMPACT_PROMPT)

    answered = model.sent[-1]
    assert len(compaction_parts(answered)) == 1
    calls, returns = calls_and_returns(answered)
    assert calls == returns and len(calls) == 3
    (event,) = await store.audit("s")
    assert (event.reason, event.focus) == ("model_requested", FOCUS)
    kept = await stored(store, "s")
    groups = {
        m.group_id
        for m in kept
        for c in m.message.contents
        if isinstance(c, FunctionCallContent | FunctionResultContent) and c.call_id in calls
    }
    assert len(groups) == 1
    assert not any(m.excluded for m in kept if m.group_id in groups)


async def test_a_store_opened_from_a_url_is_released(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'owned.db'}"
    capability = ChatledgerHistory(url=url, session_id="s")
    await agent_with(capability, Scripted()).run("question")
    owned = await capability.store()
    assert texts(await stored(owned, "s"), "user") == ["question"]
    await capability.aclose()
    async with HistoryStore.open(url) as reopened:
        assert texts(await stored(reopened, "s"), "user") == ["question"]


async def test_a_session_the_conversation_store_keeps_is_refused(store: HistoryBackend) -> None:
    from store.integrations.pydantic_ai import ChatledgerConversationStore

    conversations = ChatledgerConversationStore(store)
    plain = Agent(FunctionModel(Scripted()), system_prompt=SYSTEM)

    @plain.tool_plain
    def lookup(key: str) -> str:
        return key

    await conversations.save(await plain.run("question", conversation_id="kept"))
    agent = agent_with(ChatledgerHistory(store), Scripted())
    with pytest.raises(InvalidInput, match="holds a conversation of ChatledgerConversationStore"):
        await agent.run("again", conversation_id="kept")
    # nothing of the refused run was stored
    assert texts(await stored(store, "kept"), "user") == ["question"]
    await conversations.aclose()
