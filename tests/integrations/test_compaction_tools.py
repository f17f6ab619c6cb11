"""The model's compaction tool, ``compact_context(reason, focus=None)``, end to end and
offline: the OpenAI Agents SDK's runner with ``compaction_tool(session)``, and LangChain's
``create_agent`` with ``ChatledgerMiddleware(compaction_tool=True)``.

Three chatty turns fit the window; in the fourth the scripted model calls the tool. The
next model call is sent the compacted projection (the old turns gone, the tool's call
next to its result), the after-run compaction records reason ``model_requested`` and the
model's focus, the call and its result are stored side by side, and the request is
consumed (the next compaction is back to the triggers).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from store import InMemoryHistoryStore, SyncHistoryStore
from store.contract import HistoryBackend
from store.integrations.compaction_tool import COMPACT_TOOL_NAME, MODEL_REQUESTED
from store.memory import MemoryDatabase
from strategies.tokenizers import Tokenizer

ASK = "please compact now"
FOCUS = "the user's name"
SPEC = "truncation:max_n=400,compact_to=4"
"""Never fires on the chat by itself: only a request makes it act."""


def _turn(n: int) -> str:
    return f"chatty turn number {n} with some words in it"


def _stored_ids_in_order(messages: Sequence[Any]) -> list[str]:
    return [m.message_id for m in messages]


async def _assert_compacted_as_asked(store: HistoryBackend, session_id: str) -> None:
    events = [e for e in await store.audit(session_id) if e.outcome == "applied"]
    assert [(e.phase, e.reason, e.focus) for e in events] == [("after_run", MODEL_REQUESTED, FOCUS)]
    # stored whole: every call has its result beside it, in one group
    stored = await store.history(session_id, include_excluded=True)
    calls = [m for m in stored if any(c.type == "function_call" for c in m.message.contents)]
    results = [m for m in stored if any(c.type == "function_result" for c in m.message.contents)]
    assert len(calls) == len(results) == 1
    assert calls[0].group_id == results[0].group_id and not calls[0].excluded
    # consumed: the next compaction is back to the triggers
    assert await store.compact(session_id, SPEC, phase="after_run") is None


# --------------------------------------------------------------------------- OpenAI Agents


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_openai_agents_model_asks_for_compaction(
    backend: str, tmp_path: Path, tokenizer: Tokenizer
) -> None:
    pytest.importorskip("agents")
    from agents import Agent, RunConfig, Runner
    from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message
    from agents.testing import function_call as call_item

    from store import HistoryStore
    from store.integrations.openai_agents import ChatledgerSession, compaction_tool
    from tests.integrations.openai_agents_support import (
        item_text,
        last_user_text,
        model_inputs,
        pairing_problems,
    )

    store: HistoryBackend
    if backend == "memory":
        store = InMemoryHistoryStore(MemoryDatabase(), tokenizer=tokenizer)
    else:
        store = await HistoryStore.open(f"sqlite:///{tmp_path / 'oa.db'}", tokenizer=tokenizer)
    counter = 0

    def respond(call: ModelCall) -> ModelStep:
        nonlocal counter
        counter += 1
        items = [dict(i) for i in call.input] if not isinstance(call.input, str) else []
        asked = call.input if isinstance(call.input, str) else last_user_text(items)
        answered = any(i.get("type") == "function_call_output" for i in items)
        if asked == ASK and not answered:
            args = {"reason": "the context is long", "focus": FOCUS}
            out: Any = call_item(
                COMPACT_TOOL_NAME, args, call_id=f"call_{counter}", item_id=f"fc_{counter}"
            )
        else:
            out = assistant_message(f"ok {counter}", item_id=f"msg_{counter}")
        return ModelStep(output=[out], response_id=f"resp_{counter}")

    model = ScriptedModel([ModelStep.respond(respond) for _ in range(20)])
    session = ChatledgerSession("oa", store=store, before_strategy=SPEC, after_strategy=SPEC)
    tool = compaction_tool(session)
    assert tool.name == COMPACT_TOOL_NAME
    agent = Agent(name="assistant", model=model, tools=[tool])
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    try:
        for n in range(3):
            await Runner.run(agent, _turn(n), session=session, run_config=config)
        assert [e for e in await store.audit("oa") if e.outcome == "applied"] == []
        start = len(model.calls)
        await Runner.run(agent, ASK, session=session, run_config=config)
        asking, after_tool = model_inputs(model)[start:]
        assert any(_turn(0) in item_text(i) for i in asking)
        # the call that follows the tool's result is sent the compacted projection
        assert all(_turn(n) not in item_text(i) for i in after_tool for n in range(3))
        assert [i.get("type") for i in after_tool][-2:] == ["function_call", "function_call_output"]
        assert pairing_problems(after_tool) == []
        await _assert_compacted_as_asked(store, "oa")
    finally:
        await session.aclose()
        await store.aclose()


# --------------------------------------------------------------------------- LangChain


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_langchain_model_asks_for_compaction(
    backend: str, tmp_path: Path, tokenizer: Tokenizer
) -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    from store.integrations.langchain import ChatledgerMiddleware

    sent: list[list[BaseMessage]] = []

    class Model(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted-compaction"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Model:
            return self

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None,
            **kwargs: Any,
        ) -> ChatResult:
            sent.append(list(messages))
            n = len(sent)
            asked = next(m for m in reversed(messages) if isinstance(m, HumanMessage)).content
            answered = any(isinstance(m, ToolMessage) for m in messages)
            if asked == ASK and not answered:
                args = {"reason": "the context is long", "focus": FOCUS}
                call = {"name": COMPACT_TOOL_NAME, "args": args, "id": f"c{n}", "type": "tool_call"}
                reply = AIMessage(content="", tool_calls=[call], id=f"ai_{n}")
            else:
                reply = AIMessage(content=f"ok {n}", id=f"ai_{n}")
            return ChatResult(generations=[ChatGeneration(message=reply)])

    if backend == "sqlite":
        store = SyncHistoryStore.open(f"sqlite:///{tmp_path / 'lc.db'}", tokenizer=tokenizer)
    else:

        async def made() -> InMemoryHistoryStore:
            return InMemoryHistoryStore(MemoryDatabase(), tokenizer=tokenizer)

        store = SyncHistoryStore.wrap(made)
    middleware = ChatledgerMiddleware(
        store=store, before_strategy=SPEC, after_strategy=SPEC, compaction_tool=True
    )
    assert [t.name for t in middleware.tools] == [COMPACT_TOOL_NAME]
    agent = create_agent(Model(), tools=middleware.tools, middleware=[middleware])
    config: Any = {"configurable": {"thread_id": "lc"}}
    try:
        history: list[BaseMessage] = []
        for text in [_turn(0), _turn(1), _turn(2), ASK]:
            start = len(sent)
            state = agent.invoke({"messages": [*history, HumanMessage(text)]}, config)
            history = list(state["messages"])
        asking, after_tool = sent[start:]
        assert any(_turn(0) in str(m.content) for m in asking)
        assert all(_turn(n) not in str(m.content) for m in after_tool for n in range(3))
        assert isinstance(after_tool[-1], ToolMessage)
        assert isinstance(after_tool[-2], AIMessage) and after_tool[-2].tool_calls
        store.loop.run(_assert_compacted_as_asked(store.async_store, "lc"))
    finally:
        middleware.close()
        store.close()
