"""A Pydantic AI conversation store that meets a session it did not finish, or one it
does not own: a fork left half made (before or after its record) is finished by the next
fork or save of that id; a session the ``ChatledgerHistory`` capability keeps is refused
with a one-line error that says why (issue #40 review, findings 12 and 5)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, InMemoryConversationStore
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from store.integrations.pydantic_ai import ChatledgerConversationStore
from store.integrations.pydantic_ai_history import ChatledgerHistory
from tests.integrations.conftest import AnyStore

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _tool_turn(n: int) -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart(f"q{n}", timestamp=AT)], timestamp=AT),
        ModelResponse(parts=[ToolCallPart("add", {"a": n}, tool_call_id=f"t{n}")], timestamp=AT),
        ModelRequest(parts=[ToolReturnPart("add", n, tool_call_id=f"t{n}", timestamp=AT)]),
        ModelResponse(parts=[TextPart(f"a{n}")], timestamp=AT),
    ]


MESSAGES = _tool_turn(1) + _tool_turn(2) + _tool_turn(3)


class _Crash(Exception):
    """Stands for a writer that stopped half way."""


class _Crashing(ChatledgerConversationStore):
    """Stops the first time it appends entries a fork still misses."""

    crashed = False

    async def _append_entries(self, session_id: str, carried: Any) -> None:
        if not self.crashed:
            self.crashed = True
            raise _Crash
        await super()._append_entries(session_id, carried)


async def _expected_fork(at: int) -> list[ModelMessage]:
    theirs = InMemoryConversationStore()
    await theirs.save(Conversation(conversation_id="c", messages=MESSAGES))
    return (await theirs.fork("c", at=at, new_conversation_id="f")).messages


async def test_a_fork_stopped_before_its_record_is_finished_by_the_next_fork(
    any_store: AnyStore,
) -> None:
    store = ChatledgerConversationStore(any_store)
    saved = await store.save(Conversation(conversation_id="c", messages=MESSAGES))
    await any_store.fork("c", at=saved[3].id, new_session_id="f")  # no record of its own
    assert await store.read_record("f") is None
    forked = await store.fork("c", at=8, new_conversation_id="f")
    assert forked.messages == await _expected_fork(8) == MESSAGES[:8]
    loaded = await store.load("f")
    assert loaded is not None and loaded.messages == MESSAGES[:8]
    loaded.messages.extend(_tool_turn(9))
    await store.save(loaded)
    assert (await store.load("f") or loaded).messages == MESSAGES[:8] + _tool_turn(9)
    assert (await store.load("c") or loaded).messages == MESSAGES


async def test_a_fork_stopped_after_its_record_loads_and_the_next_save_finishes_it(
    any_store: AnyStore,
) -> None:
    store = ChatledgerConversationStore(any_store)
    await store.save(Conversation(conversation_id="c", messages=MESSAGES))
    crashing = _Crashing(any_store)
    cut = 6  # after a tool call: chatledger forks before it, the rest is appended
    with pytest.raises(_Crash):
        await crashing.fork("c", at=cut, new_conversation_id="f")
    loaded = await store.load("f")
    assert loaded is not None and loaded.messages == await _expected_fork(cut)
    loaded.messages.extend(_tool_turn(3)[2:] + _tool_turn(9))
    await store.save(loaded)
    again = await store.load("f")
    assert again is not None and again.messages == MESSAGES[:cut] + _tool_turn(3)[2:] + _tool_turn(
        9
    )
    entries = await store.load_entries("f") or []
    stored = [m.message_id for m in await any_store.history("f", include_excluded=True)]
    assert [i for i in stored if ":" not in i] == [e.id for e in entries]


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("hello")])


async def test_a_session_the_capability_keeps_is_refused_in_one_line(any_store: AnyStore) -> None:
    agent = Agent(FunctionModel(_reply), capabilities=[ChatledgerHistory(any_store)])
    result = await agent.run("hi", conversation_id="shared")
    assert await any_store.history("shared")
    store = ChatledgerConversationStore(any_store)
    with pytest.raises(ConversationConflict, match="holding no conversation") as raised:
        await store.save(Conversation(conversation_id="shared", messages=result.all_messages()))
    assert "\n" not in str(raised.value) and "'shared'" in str(raised.value)
    assert await store.read_record("shared") is None
