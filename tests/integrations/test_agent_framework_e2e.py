"""End to end with the real Agent Framework, offline: plain Agent and harness agent."""

from __future__ import annotations

from typing import Any

import pytest
from agent_framework import Agent, AgentSession, create_harness_agent

from store.integrations.agent_framework import ChatledgerHistoryProvider, as_agent_framework
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.tokenizers import Tokenizer
from tests.integrations.conftest import BUDGET, OUTPUT, WINDOW, check_call, lookup
from tests.integrations.scripted_client import ScriptedChatClient

TURNS = 12
TOOL_CALLS = 2
INSTRUCTIONS = "You are terse."
# Per turn: the user request, TOOL_CALLS calls and results, the answer.
PER_TURN = 1 + 2 * TOOL_CALLS + 1


def _provider(store: InMemoryHistoryStore) -> ChatledgerHistoryProvider:
    return ChatledgerHistoryProvider(
        store, max_context_window_tokens=WINDOW, max_output_tokens=OUTPUT
    )


def _plain(client: ScriptedChatClient, provider: ChatledgerHistoryProvider, tok: Tokenizer) -> Any:
    in_run = ContextWindowCompactionStrategy(
        max_context_window_tokens=WINDOW, max_output_tokens=OUTPUT, tokenizer=tok
    )
    return Agent(
        client,
        instructions=INSTRUCTIONS,
        tools=[lookup],
        context_providers=[provider],
        compaction_strategy=as_agent_framework(in_run),
    )


def _harness(client: ScriptedChatClient, provider: ChatledgerHistoryProvider, _: Tokenizer) -> Any:
    return create_harness_agent(
        client,
        agent_instructions=INSTRUCTIONS,
        tools=[lookup],
        history_provider=provider,
        disable_compaction=True,
        disable_todo=True,
        disable_mode=True,
        disable_file_memory=True,
        disable_web_search=True,
    )


BUILDERS = {"plain": _plain, "harness": _harness}


async def _run_turns(
    agent: Any, client: ScriptedChatClient, session: AgentSession, tok: Tokenizer, turns: range
) -> None:
    for turn in turns:
        request = f"question {turn}"
        start = len(client.calls)
        response = await agent.run(request, session=session)
        assert response.text == f"answer to {request}"
        made = client.calls[start:]
        assert len(made) == TOOL_CALLS + 1
        for call in made:
            seen = check_call(call, tok, budget=BUDGET)
            assert seen.newest_user == request
            assert INSTRUCTIONS in str(call.options.get("instructions"))


@pytest.mark.parametrize("mode", sorted(BUILDERS))
async def test_many_turns_stay_in_budget_and_lose_nothing(
    mode: str, memory_store: InMemoryHistoryStore, tokenizer: Tokenizer
) -> None:
    provider = _provider(memory_store)
    client = ScriptedChatClient(tool_calls=TOOL_CALLS)
    agent = BUILDERS[mode](client, provider, tokenizer)
    session = AgentSession(session_id=f"e2e-{mode}")
    await _run_turns(agent, client, session, tokenizer, range(TURNS))

    stored = [
        r.message for r in await memory_store.history(session.session_id, include_excluded=True)
    ]
    assert len(stored) == TURNS * PER_TURN
    assert [m.text for m in stored if m.role == "user"] == [f"question {t}" for t in range(TURNS)]
    sent_results = {
        c.call_id
        for call in client.calls
        for m in call.messages
        for c in m.contents
        if c.type == "function_result"
    }
    stored_results = {c.call_id for m in stored for c in m.contents if c.type == "function_result"}
    assert sent_results <= stored_results
    assert len(stored_results) == TURNS * TOOL_CALLS

    events = await memory_store.audit(session.session_id)
    assert events, "the after phase never compacted"
    assert {e.phase for e in events} == {"after_run"}
    excluded = await memory_store.excluded(session.session_id)
    assert excluded and all(g.event_id in {e.id for e in events} for g in excluded)
    stored_tokens = sum(g.tokens for g in excluded)
    assert stored_tokens > BUDGET  # far more is stored than could ever be sent


@pytest.mark.parametrize("mode", sorted(BUILDERS))
async def test_resume_from_a_fresh_store_object_with_only_the_session_id(
    mode: str, database: MemoryDatabase, tokenizer: Tokenizer
) -> None:
    session_id = f"resume-{mode}"
    first = InMemoryHistoryStore(database, tokenizer=tokenizer)
    client = ScriptedChatClient(tool_calls=TOOL_CALLS)
    agent = BUILDERS[mode](client, _provider(first), tokenizer)
    await _run_turns(agent, client, AgentSession(session_id=session_id), tokenizer, range(3))

    second = InMemoryHistoryStore(database, tokenizer=tokenizer)
    client2 = ScriptedChatClient(tool_calls=TOOL_CALLS)
    agent2 = BUILDERS[mode](client2, _provider(second), tokenizer)
    await _run_turns(agent2, client2, AgentSession(session_id=session_id), tokenizer, range(3, 5))
    first_call = [m.text for m in client2.calls[0].messages]
    assert "answer to question 2" in first_call  # the stored history came back
    stored = [r.message for r in await second.history(session_id, include_excluded=True)]
    assert len(stored) == 5 * PER_TURN


async def test_resume_on_sqlite_from_a_fresh_provider(tmp_path: Any, tokenizer: Tokenizer) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    session_id = "sql-resume"
    async with ChatledgerHistoryProvider(
        url=url, tokenizer=tokenizer, max_context_window_tokens=WINDOW, max_output_tokens=OUTPUT
    ) as provider:
        client = ScriptedChatClient(tool_calls=TOOL_CALLS)
        agent = _harness(client, provider, tokenizer)
        await _run_turns(agent, client, AgentSession(session_id=session_id), tokenizer, range(3))
    async with ChatledgerHistoryProvider(
        url=url, tokenizer=tokenizer, max_context_window_tokens=WINDOW, max_output_tokens=OUTPUT
    ) as fresh:
        client2 = ScriptedChatClient(tool_calls=TOOL_CALLS)
        agent2 = _harness(client2, fresh, tokenizer)
        await _run_turns(
            agent2, client2, AgentSession(session_id=session_id), tokenizer, range(3, 4)
        )
        assert "answer to question 2" in [m.text for m in client2.calls[0].messages]
        store: Any = await fresh.store()
        stored = await store.history(session_id, include_excluded=True)
        assert len(stored) == 4 * PER_TURN
        assert await store.audit(session_id)
