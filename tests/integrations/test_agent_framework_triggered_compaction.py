"""Compaction the model asks for on Agent Framework 1.26: ``AgentTriggeredCompactionStrategy``
wrapping a chatledger strategy (``as_agent_framework``), its ``compact_context`` tool on
the agent, and :class:`ChatledgerHistoryProvider`.

Three chatty turns fit; in the fourth the scripted model calls ``compact_context``. The
framework compacts the next model call's messages with the chatledger strategy; the
provider saves the turn, the call and its result side by side, and asks the store for
compaction, so the after-run compaction runs as asked and records ``model_requested``;
the request is consumed. Offline, memory and SQLite.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import agent_framework
import pytest

if not hasattr(agent_framework, "AgentTriggeredCompactionStrategy"):
    pytest.skip(
        "AgentTriggeredCompactionStrategy is new in Agent Framework 1.26",
        allow_module_level=True,
    )

from agent_framework import (
    Agent,
    AgentTriggeredCompactionStrategy,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
)
from agent_framework.observability import ChatTelemetryLayer

from store import HistoryStore
from store.contract import HistoryBackend
from store.integrations.agent_framework import ChatledgerHistoryProvider, agent_triggered
from store.integrations.compaction_tool import COMPACT_TOOL_NAME, MODEL_REQUESTED
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies.tokenizers import Tokenizer
from strategies.truncation import TruncationStrategy

ASK = "please compact now"
SPEC = "truncation:max_n=400,compact_to=4"
"""Never fires on the chat by itself: only a request makes it act."""


def _turn(n: int) -> str:
    return f"chatty turn number {n} with some words in it"


class TriggeringClient(
    FunctionInvocationLayer[Any],
    ChatMiddlewareLayer[Any],
    ChatTelemetryLayer[Any],
    BaseChatClient[Any],
):
    """Answers each turn; asked :data:`ASK`, first calls ``compact_context``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[list[Message]] = []

    async def _respond(self, messages: Sequence[Message]) -> ChatResponse:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        answered = any(
            c.type == "function_result" for m in messages[last_user:] for c in m.contents
        )
        n = len(self.sent)
        if messages[last_user].text == ASK and not answered:
            call = Content.from_function_call(
                call_id=f"call_{n}", name=COMPACT_TOOL_NAME, arguments={"reason": "long"}
            )
            reply = Message(role="assistant", contents=[call])
        else:
            reply = Message(role="assistant", contents=[f"ok {n}"])
        return ChatResponse(messages=[reply])

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kw: Any
    ) -> Any:
        assert not stream
        self.sent.append(list(messages))
        return self._respond(messages)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_the_model_asks_for_compaction_through_the_frameworks_tool(
    backend: str, tmp_path: Path, tokenizer: Tokenizer
) -> None:
    store: HistoryBackend
    if backend == "memory":
        store = InMemoryHistoryStore(MemoryDatabase(), tokenizer=tokenizer)
    else:
        store = await HistoryStore.open(f"sqlite:///{tmp_path / 'af.db'}", tokenizer=tokenizer)
    provider = ChatledgerHistoryProvider(store, after_strategy=SPEC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the framework marks the strategy experimental
        trigger = agent_triggered(TruncationStrategy(max_n=400, compact_to=2))
    assert isinstance(trigger, AgentTriggeredCompactionStrategy)
    assert trigger.tool.name == COMPACT_TOOL_NAME
    client = TriggeringClient()
    agent = Agent(
        client,
        tools=[trigger.tool],
        context_providers=[provider],
        compaction_strategy=trigger,
        default_options={"store": False},
    )
    session = agent.create_session()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            for n in range(3):
                await agent.run(_turn(n), session=session)
            sid = session.session_id
            assert [e for e in await store.audit(sid) if e.outcome == "applied"] == []
            start = len(client.sent)
            await agent.run(ASK, session=session)
        asking, after_tool = client.sent[start:]
        assert any(_turn(0) in (m.text or "") for m in asking)
        # the framework compacted the next call's messages with the chatledger strategy
        assert all(_turn(n) not in (m.text or "") for m in after_tool for n in range(3))
        types = [c.type for m in after_tool for c in m.contents]
        assert types[-2:] == ["function_call", "function_result"]
        events = [e for e in await store.audit(sid) if e.outcome == "applied"]
        assert [(e.phase, e.reason) for e in events] == [("after_run", MODEL_REQUESTED)]
        stored = await store.history(sid, include_excluded=True)
        calls = [m for m in stored if any(c.type == "function_call" for c in m.message.contents)]
        results = [
            m for m in stored if any(c.type == "function_result" for c in m.message.contents)
        ]
        assert len(calls) == len(results) == 1 and calls[0].group_id == results[0].group_id
        assert not calls[0].excluded
        assert (await store.stats(sid)).active_messages == 4
        # consumed: the next compaction is back to the triggers
        assert await store.compact(sid, SPEC, phase="after_run") is None
    finally:
        await provider.aclose()
        await store.aclose()


async def test_a_replayed_result_asks_for_nothing(tokenizer: Tokenizer) -> None:
    store = InMemoryHistoryStore(MemoryDatabase(), tokenizer=tokenizer)
    # projection only: the end of the turn runs what was asked with this strategy
    provider = ChatledgerHistoryProvider(store, before_strategy=SPEC)
    call = Message(
        role="assistant",
        contents=[Content.from_function_call(call_id="c1", name=COMPACT_TOOL_NAME, arguments={})],
    )
    result = Message(
        role="tool", contents=[Content.from_function_result(call_id="c1", result="ok")]
    )
    turn: list[Message] = []
    for n in range(3):
        turn += [
            Message(role="user", contents=[_turn(n)]),
            Message(role="assistant", contents=["ok"]),
        ]
    turn += [Message(role="user", contents=[ASK]), call, result]
    turn.append(Message(role="assistant", contents=["done"]))
    await provider.save_messages("s", turn)
    assert provider.last_save is not None and provider.last_save.compaction is not None
    assert provider.last_save.compaction.reason == MODEL_REQUESTED
    active = len(await store.context("s"))
    assert active <= 4
    # the turn saved again (a replay) with a new exchange after it: the result is not
    # new, so nothing is asked and nothing compacted
    more = [Message(role="user", contents=["one more"]), Message(role="assistant", contents=["ok"])]
    await provider.save_messages("s", [*turn, *more])
    assert len(provider.last_save.appended) == 2 and provider.last_save.compaction is None
    assert len(await store.context("s")) == active + 2
    await provider.aclose()
