"""``bounded_tools`` end to end with the real Agent Framework, offline.

A scripted model asks, in one response, for several parallel calls of a ``search`` tool
over thousands of rows. What the store keeps of each result is bounded by its tool's
budget, the results of one response together by the turn's allowance (both policies),
and the next request stays under the provider's budget. Counted with the real
``o200k_base`` tokenizer.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from agent_framework import (
    SKIP_PARSING,
    Agent,
    AgentSession,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    MiddlewareTermination,
    create_harness_agent,
    tool,
)

from store.contract import HistoryBackend
from store.integrations.agent_framework import (
    ChatledgerHistoryProvider,
    bounded_tools,
    from_af_messages,
)
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies import ResultTooLarge, bounded, select_fields
from strategies.bounded import compact_dumps, notice_tokens
from strategies.messages import FunctionResultContent
from strategies.tokenizers import (
    CharacterEstimatorTokenizer,
    Tokenizer,
    count_messages_tokens,
)
from tests.integrations.conftest import AnyStore
from tests.integrations.scripted_client import ParallelSearchClient

WINDOW = 12_000
OUTPUT = 1_000
BUDGET = WINDOW - OUTPUT
PER_TOOL = 1_500
TURN = 2_000
ROWS = [
    {"id": i, "title": f"record {i}", "body": f"body of record {i} " * 4, "team": f"t{i % 7}"}
    for i in range(5_000)
]
SIZES = {"narrow": 4, "medium": 25, "wide": 35, "everything": len(ROWS)}
"""About 155, 950, 1,330 and 214,000 tokens: all but the last fit alone, not all together."""
QUERIES = ["narrow", "everything", "medium", "wide"]


def search(query: str) -> list[dict[str, Any]]:
    """Search the records (``everything`` returns all 5,000 of them)."""
    return ROWS[: SIZES[query]]


def _provider(store: HistoryBackend) -> ChatledgerHistoryProvider:
    return ChatledgerHistoryProvider(
        store, max_context_window_tokens=WINDOW, max_output_tokens=OUTPUT
    )


def _agent(client: ParallelSearchClient, store: HistoryBackend, middleware: list[Any]) -> Any:
    return Agent(
        client,
        instructions="Search, then answer.",
        tools=[search],
        context_providers=[_provider(store)],
        middleware=middleware,
    )


async def _results(store: HistoryBackend, session_id: str) -> dict[str, str]:
    """The stored result of each call, by call id."""
    stored = await store.history(session_id, include_excluded=True)
    return {
        c.call_id: str(c.result)
        for s in stored
        for c in s.message.contents
        if isinstance(c, FunctionResultContent)
    }


def _turns(results: dict[str, str], calls: int) -> list[list[str]]:
    ordered = [results[k] for k in sorted(results, key=lambda k: int(k.rsplit("_", 1)[1]))]
    return [ordered[i : i + calls] for i in range(0, len(ordered), calls)]


def _is_notice(text: str) -> bool:
    return json.loads(text).get("outcome") == "ResultTooLarge" if text.startswith("{") else False


def _assert_bounded(turns: list[list[str]], tokenizer: Tokenizer, *, share: int | None) -> None:
    for results in turns:
        counts = [tokenizer.count_tokens(r) for r in results]
        assert all(c <= PER_TOOL for c in counts), counts
        assert sum(counts) <= TURN, counts
        if share is not None:
            assert all(c <= share for c in counts), counts
        for result, query in zip(results, QUERIES, strict=True):
            json.loads(result)  # compact JSON either way
            if not _is_notice(result):
                assert result == compact_dumps(search(query))
        assert results[0] == compact_dumps(search("narrow"))
        assert ResultTooLarge.model_validate_json(results[1]).items == []


def _assert_requests_in_budget(client: ParallelSearchClient, tokenizer: Tokenizer) -> None:
    for call in client.calls:
        assert count_messages_tokens(from_af_messages(call.messages), tokenizer) <= BUDGET


@pytest.mark.parametrize("policy", ["first_come", "fair_share"])
async def test_parallel_results_are_bounded_and_the_next_request_fits(
    policy: Any, any_store: AnyStore, tokenizer: Tokenizer
) -> None:
    assert tokenizer.count_tokens(compact_dumps(search("everything"))) > 10 * BUDGET
    client = ParallelSearchClient(QUERIES)
    middleware = bounded_tools(PER_TOOL, turn_tokens=TURN, policy=policy)
    agent = _agent(client, any_store, middleware)
    session = AgentSession(session_id=f"bounded-{policy}")
    for turn in range(2):
        response = await agent.run(f"find {turn}", session=session)
        assert response.text == f"done: find {turn}"

    results = await _results(any_store, f"bounded-{policy}")
    assert len(results) == 2 * len(QUERIES)
    fit_alone = [q for q in QUERIES if tokenizer.count_tokens(compact_dumps(search(q))) <= PER_TOOL]
    assert fit_alone == ["narrow", "medium", "wide"]
    share = TURN // len(QUERIES) if policy == "fair_share" else None
    turns = _turns(results, len(QUERIES))
    _assert_bounded(turns, tokenizer, share=share)
    for turn_results in turns:  # results that fit alone need not fit together
        assert any(_is_notice(turn_results[QUERIES.index(q)]) for q in fit_alone)
    if policy == "fair_share":  # the outcome does not depend on completion order
        assert turns[0] == turns[1]
    assert len(client.calls) == 4
    _assert_requests_in_budget(client, tokenizer)
    sent = {
        c.call_id: c.result
        for m in from_af_messages(client.calls[1].messages)
        for c in m.contents
        if isinstance(c, FunctionResultContent)
    }
    assert sent == {k: v for k, v in results.items() if k in sent} and len(sent) == 4


async def test_the_harness_stores_the_bounded_results(
    memory_store: InMemoryHistoryStore, tokenizer: Tokenizer
) -> None:
    client = ParallelSearchClient(QUERIES)
    agent = create_harness_agent(
        client,
        agent_instructions="Search, then answer.",
        tools=[search],
        history_provider=_provider(memory_store),
        middleware=bounded_tools(PER_TOOL, turn_tokens=TURN),
        disable_compaction=True,
        disable_todo=True,
        disable_mode=True,
        disable_file_memory=True,
        disable_web_search=True,
    )
    session = AgentSession(session_id="harness")
    for turn in range(2):
        await agent.run(f"find {turn}", session=session)
    turns = _turns(await _results(memory_store, "harness"), len(QUERIES))
    assert len(turns) == 2
    _assert_bounded(turns, tokenizer, share=None)
    _assert_requests_in_budget(client, tokenizer)


async def test_a_streamed_run_shares_the_allowance_too(
    memory_store: InMemoryHistoryStore, tokenizer: Tokenizer
) -> None:
    client = ParallelSearchClient(QUERIES)
    agent = _agent(client, memory_store, bounded_tools(PER_TOOL, turn_tokens=TURN))
    session = AgentSession(session_id="streamed")
    updates = [u async for u in agent.run("find", session=session, stream=True)]
    assert updates
    turns = _turns(await _results(memory_store, "streamed"), len(QUERIES))
    _assert_bounded(turns, tokenizer, share=None)
    turn_notices = [json.loads(r)["message"] for r in turns[0] if _is_notice(r)]
    assert any(f"the turn's {TURN} tokens" in m for m in turn_notices), turn_notices


async def test_each_run_has_its_own_allowance(
    database: MemoryDatabase, tokenizer: Tokenizer
) -> None:
    """Two runs at once, one set of middleware: each run spends its own allowance."""
    middleware = bounded_tools(PER_TOOL, turn_tokens=TURN)
    store = InMemoryHistoryStore(database, tokenizer=tokenizer)
    clients = [ParallelSearchClient(QUERIES) for _ in range(2)]
    agents = [_agent(client, store, middleware) for client in clients]
    sessions = [AgentSession(session_id=f"run-{i}") for i in range(2)]
    await asyncio.gather(*(a.run("find", session=s) for a, s in zip(agents, sessions, strict=True)))
    per_run = [_turns(await _results(store, f"run-{i}"), len(QUERIES))[0] for i in range(2)]
    spent = [sum(tokenizer.count_tokens(r) for r in results) for results in per_run]
    assert all(s <= TURN for s in spent)
    assert sum(spent) > TURN  # together they used more than one allowance
    assert [not _is_notice(r) for r in per_run[0]] == [not _is_notice(r) for r in per_run[1]]


async def test_the_store_tokenizer_is_the_default(tokenizer: Tokenizer) -> None:
    """With the character estimator as the store's tokenizer, results are counted with it."""
    text = "a" * 1_800  # few o200k tokens, 450 estimated
    assert tokenizer.count_tokens(text) < 300 < CharacterEstimatorTokenizer().count_tokens(text)

    def echo(query: str) -> str:
        """Return a long text."""
        del query
        return text

    async def run(middleware: list[Any]) -> str:
        store = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())
        client = ParallelSearchClient(["x"])
        agent = Agent(
            client, tools=[tool(echo, name="search")], context_providers=[_provider(store)]
        )
        await agent.run("find", session=AgentSession(session_id="s"), middleware=middleware)
        return next(iter((await _results(store, "s")).values()))

    assert _is_notice(await run(bounded_tools(300)))
    assert await run(bounded_tools(300, tokenizer=tokenizer)) == text


async def test_a_budget_too_small_for_the_notice_fails_the_run_early(
    memory_store: InMemoryHistoryStore, tokenizer: Tokenizer
) -> None:
    client = ParallelSearchClient(QUERIES)
    small = notice_tokens(tokenizer) - 1
    agent = _agent(client, memory_store, bounded_tools(PER_TOOL, per_tool={"search": small}))
    with pytest.raises(ValueError, match="ResultTooLarge notice"):
        await agent.run("find", session=AgentSession(session_id="small"))
    assert client.calls == []


async def test_bounded_tools_keep_their_schema_and_raw_values_use_the_rule(
    memory_store: InMemoryHistoryStore,
) -> None:
    @bounded(max_tokens=400)
    def search(query: str, limit: int = 3) -> list[dict[str, Any]]:
        """Search the records, returning ``limit`` of them."""
        return select_fields(ROWS[:limit], ["id", "title"])

    def dated(query: str) -> dict[str, Any]:
        """A result with a datetime in it."""
        del query
        return {"at": dt.datetime(2024, 5, 1, 9, 30, tzinfo=dt.UTC)}

    searching = tool(search)
    assert searching.description == "Search the records, returning ``limit`` of them."
    assert set(searching.parameters()["properties"]) == {"query", "limit"}
    raw = tool(dated, name="dated", result_parser=SKIP_PARSING)
    client = ParallelSearchClient(["a"])
    agent = Agent(client, tools=[searching], context_providers=[_provider(memory_store)])
    await agent.run("find", session=AgentSession(session_id="s"), middleware=bounded_tools(500))
    assert list((await _results(memory_store, "s")).values()) == [search("a")]

    class DatedClient(ParallelSearchClient):
        def _reply(self, messages: Sequence[Any]) -> Any:
            reply = super()._reply(messages)
            for content in reply.contents:
                if content.type == "function_call":
                    content.name = "dated"
            return reply

    agent = Agent(DatedClient(["a"]), tools=[raw], context_providers=[_provider(memory_store)])
    await agent.run("find", session=AgentSession(session_id="d"), middleware=bounded_tools(500))
    assert list((await _results(memory_store, "d")).values()) == ['{"at":"2024-05-01T09:30:00Z"}']


async def test_rich_results_are_left_as_they_are(memory_store: InMemoryHistoryStore) -> None:
    def picture(query: str) -> list[Content]:
        """A caption and an image."""
        del query
        image = Content.from_uri(uri="https://example.invalid/a.png", media_type="image/png")
        return [Content.from_text("caption " * 400), image]

    client = ParallelSearchClient(["a"])
    agent = Agent(
        client,
        tools=[tool(picture, name="search")],
        context_providers=[_provider(memory_store)],
        middleware=bounded_tools(100),
    )
    await agent.run("find", session=AgentSession(session_id="rich"))
    assert list((await _results(memory_store, "rich")).values()) == ["caption " * 400]


async def test_a_result_set_by_a_terminating_inner_middleware_is_bounded(
    memory_store: InMemoryHistoryStore, tokenizer: Tokenizer
) -> None:
    class Cached(FunctionMiddleware):
        """Answers from a cache and ends the tool loop (runs inside the bounding)."""

        async def process(
            self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
        ) -> None:
            context.result = search("everything")
            raise MiddlewareTermination()

    client = ParallelSearchClient(["narrow"])
    agent = _agent(client, memory_store, [*bounded_tools(PER_TOOL), Cached()])
    await agent.run("find", session=AgentSession(session_id="cached"))
    (result,) = (await _results(memory_store, "cached")).values()
    assert _is_notice(result) and tokenizer.count_tokens(result) <= PER_TOOL
