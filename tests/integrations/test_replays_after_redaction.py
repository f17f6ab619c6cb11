"""A framework that resends its transcript after a redaction stores nothing new and
never brings the redacted text back: Agent Framework (positional ``msg_N`` ids, no ids,
stable ids), the OpenAI chat format through the provider (no ids), the OpenAI Agents
SDK session (item ids) and LangChain (the middleware's state ids, and the chat history),
on every backend. A batch of new messages after a redacted tail is still stored."""

from __future__ import annotations

from typing import Any

import pytest
from agent_framework import Message as AFMessage
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from store import SyncHistoryStore
from store.contract import HistoryBackend
from store.formats.openai_chat import from_openai_chat
from store.integrations.agent_framework import ChatledgerHistoryProvider
from store.integrations.langchain import ChatledgerChatMessageHistory, ChatledgerMiddleware
from store.integrations.openai_agents import ChatledgerSession
from store.provider import TwoPhaseProvider
from tests.integrations.conftest import AnyStore
from tests.integrations.langchain_support import ScriptedChatModel, lookup
from tests.integrations.test_langchain_e2e import config, sync_store

__all__ = ["sync_store"]

PIN = "4711-zq"
"""Not hexadecimal: never found inside a random id (a uuid4 holds "4711" about once in
2,300), only in the text it was written into."""


def _texts(store_rows: list[Any]) -> list[str]:
    return [row.message.model_dump_json() for row in store_rows]


async def _stored(store: HistoryBackend, session: str) -> list[Any]:
    return await store.history(session, include_excluded=True)


async def _redact_secret(store: HistoryBackend, session: str) -> None:
    rows = await _stored(store, session)
    ids = [r.message_id for r in rows if PIN in r.message.model_dump_json()]
    assert ids  # the control: the text is stored before
    await store.redact(session, ids, reason="erasure request")


def _af(ids: list[str | None], texts: list[tuple[str, str]]) -> list[AFMessage]:
    return [
        AFMessage(role=role, contents=[text], message_id=i)
        for i, (role, text) in zip(ids, texts, strict=True)
    ]


TURN_1 = [("user", f"my PIN is {PIN}"), ("assistant", "noted")]
TURN_2 = [("user", "what next?"), ("assistant", "nothing")]


def _ids(kind: str, count: int) -> list[str | None]:
    if kind == "positional":
        return [f"msg_{i}" for i in range(count)]
    if kind == "none":
        return [None] * count
    return [f"stable-{i}" for i in range(count)]


@pytest.mark.parametrize("kind", ["positional", "none", "stable"])
async def test_agent_framework_replay_after_a_redaction(any_store: AnyStore, kind: str) -> None:
    provider = ChatledgerHistoryProvider(any_store)
    await provider.save_messages("s", _af(_ids(kind, 2), TURN_1))
    await _redact_secret(any_store, "s")
    # the harness resends the whole transcript with the next turn
    await provider.save_messages("s", _af(_ids(kind, 4), TURN_1 + TURN_2))
    assert provider.last_save is not None and provider.last_save.replayed == 2
    rows = await _stored(any_store, "s")
    assert len(rows) == 4
    assert not any(PIN in text for text in _texts(rows))
    # and again: still nothing new
    await provider.save_messages("s", _af(_ids(kind, 4), TURN_1 + TURN_2))
    assert len(await _stored(any_store, "s")) == 4


@pytest.mark.parametrize("kind", ["positional", "none"])
async def test_new_messages_after_a_redacted_tail_are_stored(
    any_store: AnyStore, kind: str
) -> None:
    """Only new messages (Agent Framework's agent mode saves a run's own): the tombstones
    at the end of the stored tail do not swallow them, although their roles match."""
    provider = ChatledgerHistoryProvider(any_store)
    await provider.save_messages("s", _af(_ids(kind, 2), [("user", "hi"), ("assistant", "yo")]))
    await provider.save_messages("s", _af(_ids(kind, 2), TURN_1))
    await _redact_secret(any_store, "s")
    await provider.save_messages("s", _af(_ids(kind, 2), TURN_2))
    rows = await _stored(any_store, "s")
    assert [r.message.text for r in rows][-2:] == ["what next?", "nothing"]
    assert len(rows) == 6


async def test_openai_chat_transcript_replay_after_a_redaction(any_store: AnyStore) -> None:
    phases = TwoPhaseProvider(any_store)
    first = [{"role": r, "content": t} for r, t in TURN_1]
    await phases.save_turn("s", from_openai_chat(first), end_of_turn=True)
    await _redact_secret(any_store, "s")
    both = first + [{"role": r, "content": t} for r, t in TURN_2]
    saved = await phases.save_turn("s", from_openai_chat(both), end_of_turn=True)
    assert saved.replayed == 2 and len(saved.appended) == 2
    rows = await _stored(any_store, "s")
    assert len(rows) == 4 and not any(PIN in text for text in _texts(rows))


async def test_openai_agents_session_replay_after_a_redaction(any_store: AnyStore) -> None:
    session = ChatledgerSession("s", store=any_store)
    items: list[Any] = [
        {"id": "in-1", "type": "message", "role": "user", "content": f"my PIN is {PIN}"},
        {
            "id": "msg_abc",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "noted", "annotations": []}],
        },
    ]
    await session.add_items(items)
    await _redact_secret(any_store, "s")
    await session.add_items(items)
    rows = await _stored(any_store, "s")
    assert len(rows) == 2 and not any(PIN in text for text in _texts(rows))
    assert PIN not in str(await session.get_items())


def test_langchain_middleware_replays_its_state_after_a_redaction(
    sync_store: SyncHistoryStore,
) -> None:
    """The middleware stores the run's whole state at every model call (by the state's
    message ids); the checkpointer still holds the original after the redaction."""
    agent = create_agent(
        ScriptedChatModel(tool_calls=0),
        tools=[lookup],
        middleware=[ChatledgerMiddleware(store=sync_store)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage(f"my PIN is {PIN}")]}, config=config("t", "thread_id"))
    before = len(sync_store.history("t", include_excluded=True))
    ids = [
        r.message_id
        for r in sync_store.history("t", include_excluded=True)
        if PIN in r.message.model_dump_json()
    ]
    assert ids
    sync_store.redact("t", ids, reason="erasure request")
    state = agent.invoke(
        {"messages": [HumanMessage("what next?")]}, config=config("t", "thread_id")
    )
    assert any(PIN in str(m.content) for m in state["messages"])  # LangGraph's own copy
    rows = sync_store.history("t", include_excluded=True)
    assert len(rows) == before + 2
    assert not any(PIN in r.message.model_dump_json() for r in rows)


def test_langchain_history_replay_after_a_redaction(sync_store: SyncHistoryStore) -> None:
    history = ChatledgerChatMessageHistory("s", store=sync_store)
    transcript = [HumanMessage(f"my PIN is {PIN}", id="h1"), AIMessage("noted", id="h2")]
    history.add_messages(transcript)
    ids = [r.message_id for r in sync_store.history("s") if PIN in r.message.model_dump_json()]
    sync_store.redact("s", ids, reason="erasure request")
    history.add_messages(transcript)
    rows = sync_store.history("s", include_excluded=True)
    assert len(rows) == 2 and not any(PIN in r.message.model_dump_json() for r in rows)
