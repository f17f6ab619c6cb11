"""End to end with the real Agent Framework, offline: plain Agent and harness agent.

The many-turn test runs on every backend (in-memory, SQLite, PostgreSQL) and checks both
what the model was sent (per call, in :func:`tests.integrations.agents.run_turns`) and
what the store holds: every message of the conversation, the exclusions and summaries
the after phase made, and one audit event for each change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agent_framework import AgentSession
from sqlalchemy import text

from store import HistoryStore
from store.integrations.agent_framework import from_af_messages
from store.memory import InMemoryHistoryStore, MemoryDatabase
from store.models import StoredMessage
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.tokenizers import Tokenizer
from strategies.tool_result import tool_results_summary
from tests.integrations.agents import (
    BUDGET,
    BUILDERS,
    PER_TURN,
    TOOL_CALLS,
    answer,
    lookup,
    request,
    run_turns,
    window_provider,
)
from tests.integrations.conftest import AnyStore
from tests.integrations.scripted_client import ScriptedChatClient

TURNS = 12
SUMMARY_PREFIX = tool_results_summary(["|"]).split("|")[0]

Described = tuple[str, str, tuple[Any, ...], tuple[Any, ...]]


def describe(message: Message) -> Described:
    """Role, text, calls and results of ``message`` (what the model sees of it)."""
    calls = tuple(
        (
            c.call_id,
            c.name,
            json.loads(c.arguments) if isinstance(c.arguments, str) else c.arguments,
        )
        for c in message.contents
        if isinstance(c, FunctionCallContent)
    )
    results = tuple(
        (c.call_id, c.result) for c in message.contents if isinstance(c, FunctionResultContent)
    )
    return (message.role, message.text, calls, results)


def expected_transcript(turns: range, *, first_call: int = 1) -> list[Described]:
    """The conversation the scripted client and the tool produce over ``turns``."""
    out: list[Described] = []
    number = first_call
    for turn in turns:
        out.append(("user", request(turn), (), ()))
        for made in range(TOOL_CALLS):
            query, call_id = f"{request(turn)}#{made}", f"call_{number}"
            number += 1
            out.append(("assistant", "", ((call_id, "lookup", {"query": query}),), ()))
            out.append(("tool", "", (), ((call_id, lookup(query)),)))
        out.append(("assistant", answer(turn), (), ()))
    return out


def _assert_everything_sent_is_stored(client: ScriptedChatClient, stored: list[Message]) -> None:
    kept = {json.dumps(describe(m), sort_keys=True) for m in stored}
    for call in client.calls:
        for message in from_af_messages(call.messages):
            if message.text.startswith(SUMMARY_PREFIX):
                continue  # a summary made for this request only
            assert json.dumps(describe(message), sort_keys=True) in kept, describe(message)


async def _assert_exclusions_and_summaries(
    store: AnyStore, session_id: str, stored: list[StoredMessage]
) -> None:
    events = {e.id: e for e in await store.audit(session_id)}
    assert events, "the after phase never compacted"
    assert {e.phase for e in events.values()} == {"after_run"}
    assert {e.strategy for e in events.values()} == {"ContextWindowCompactionStrategy"}
    assert all(e.tokens_after < e.tokens_before for e in events.values())
    excluded = await store.excluded(session_id)
    assert excluded
    for group in excluded:
        event = events[str(group.event_id)]
        if group.summary_group_id is None:
            assert group.group_id in event.excluded
        else:
            assert group.group_id in event.summarized[group.summary_group_id]
    summarized = {s: r for e in events.values() for s, r in e.summarized.items()}
    summary_groups = {m.group_id for m in stored if m.kind == "summary"}
    assert summary_groups, "no tool results were collapsed into summaries"
    assert summary_groups == set(summarized)
    by_group = {g.group_id: g for g in excluded}
    for summary, replaced in summarized.items():
        assert replaced and all(by_group[g].summary_group_id == summary for g in replaced)
    first_replaced = next(m for m in stored if m.group_id in by_group and m.kind != "summary")
    why = await store.why(session_id, first_replaced.message.message_id)
    assert not why.in_context and why.event_id == by_group[first_replaced.group_id].event_id


async def _assert_sql_rows(
    store: HistoryStore, session_id: str, stored: list[StoredMessage], events: int
) -> None:
    """The same figures, read straight from the tables."""
    where = "WHERE tenant = :tenant AND session_id = :session"
    params = {"tenant": store.tenant, "session": session_id}
    async with store.engine.connect() as conn:

        async def count(sql: str) -> int:
            return int((await conn.execute(text(sql), params)).scalar_one())

        assert await count(f"SELECT count(*) FROM chatledger_messages {where}") == len(stored)
        excluded = await count(
            f"SELECT count(*) FROM chatledger_messages {where} AND excluded = :yes".replace(
                ":yes", "true" if store.engine.dialect.name == "postgresql" else "1"
            )
        )
        assert excluded == sum(m.excluded for m in stored) > 0
        assert await count(f"SELECT count(*) FROM chatledger_events {where}") == events
        assert (
            await count(f"SELECT count(DISTINCT event_id) FROM chatledger_event_groups {where}")
            == events
        )


@pytest.mark.parametrize("mode", sorted(BUILDERS))
async def test_many_turns_stay_in_budget_and_lose_nothing(
    mode: str, any_store: AnyStore, tokenizer: Tokenizer
) -> None:
    client = ScriptedChatClient(tool_calls=TOOL_CALLS)
    agent = BUILDERS[mode](client, window_provider(any_store), tokenizer)
    session_id = f"e2e-{mode}"
    checks = await run_turns(
        agent, client, AgentSession(session_id=session_id), tokenizer, range(TURNS)
    )

    stored = await any_store.history(session_id, include_excluded=True)
    appended = [s.message for s in stored if s.kind != "summary"]
    assert [describe(m) for m in appended] == expected_transcript(range(TURNS))
    _assert_everything_sent_is_stored(client, [s.message for s in stored])
    await _assert_exclusions_and_summaries(any_store, session_id, stored)

    stats = await any_store.stats(session_id)
    assert stats.stored_messages == len(stored)
    assert stats.stored_tokens > BUDGET >= max(c.tokens for c in checks)
    assert stats.active_tokens < stats.stored_tokens
    if isinstance(any_store, HistoryStore):
        await _assert_sql_rows(any_store, session_id, stored, stats.events)


@pytest.mark.parametrize("mode", sorted(BUILDERS))
async def test_resume_from_a_fresh_store_object_with_only_the_session_id(
    mode: str, database: MemoryDatabase, tokenizer: Tokenizer
) -> None:
    session_id = f"resume-{mode}"
    first = InMemoryHistoryStore(database, tokenizer=tokenizer)
    client = ScriptedChatClient(tool_calls=TOOL_CALLS)
    agent = BUILDERS[mode](client, window_provider(first), tokenizer)
    await run_turns(agent, client, AgentSession(session_id=session_id), tokenizer, range(3))

    second = InMemoryHistoryStore(database, tokenizer=tokenizer)
    client2 = ScriptedChatClient(tool_calls=TOOL_CALLS)
    agent2 = BUILDERS[mode](client2, window_provider(second), tokenizer)
    await run_turns(agent2, client2, AgentSession(session_id=session_id), tokenizer, range(3, 5))
    assert answer(2) in [m.text for m in client2.calls[0].messages]  # the history came back
    stored = await second.history(session_id, include_excluded=True)
    assert sum(s.kind != "summary" for s in stored) == 5 * PER_TURN
