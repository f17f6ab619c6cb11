"""LangChain's real runners on chatledger, offline.

``RunnableWithMessageHistory`` (``invoke`` and ``ainvoke``) with
:class:`ChatledgerChatMessageHistory`, and ``create_agent`` with
:class:`ChatledgerMiddleware`, around a scripted chat model that calls a tool, on each
backend; each compared with the framework's own in-memory store for the same run.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables.history import RunnableWithMessageHistory
from langgraph.checkpoint.memory import InMemorySaver

from store import InMemoryHistoryStore, SyncHistoryStore
from store.errors import InvalidInput, StoreClosed
from store.integrations.langchain import ChatledgerChatMessageHistory, ChatledgerMiddleware
from strategies.tokenizers import TiktokenTokenizer, Tokenizer
from tests.conftest import PgServer
from tests.integrations.langchain_support import (
    TOOL_CALLS,
    ScriptedChatModel,
    lookup,
    pairing_problems,
    tokens,
    tool_loop,
    without_ids,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:RunnableWithMessageHistory is deprecated:DeprecationWarning"
)

TURNS = 3
PER_TURN = 1 + 2 * TOOL_CALLS + 1
ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def reference_history() -> InMemoryChatMessageHistory:
    """LangChain's own in-memory history (deprecated upstream in 1.6.4, like the
    runnable: the comparison needs it, so its own warning is silenced here only)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The class `InMemoryChatMessageHistory` was deprecated")
        return InMemoryChatMessageHistory()


@pytest.fixture(params=BACKENDS)
def sync_store(
    request: pytest.FixtureRequest, tmp_path: Path, tokenizer: Tokenizer
) -> Iterator[SyncHistoryStore]:
    """A synchronous store of each backend, private to the test."""
    if request.param == "memory":

        async def made() -> InMemoryHistoryStore:
            return InMemoryHistoryStore(tokenizer=tokenizer)

        store = SyncHistoryStore.wrap(made)
    elif request.param == "sqlite":
        store = SyncHistoryStore.open(f"sqlite:///{tmp_path / 'lc.db'}", tokenizer=tokenizer)
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        name = server.clone()
        request.addfinalizer(lambda: server.drop_later(name))
        store = SyncHistoryStore.open(server.url_for(name), tokenizer=tokenizer)
    try:
        yield store
    finally:
        store.close()


def config(session_id: str, key: str = "session_id") -> Any:
    return {"configurable": {key: session_id}}


# -- RunnableWithMessageHistory ------------------------------------------------------


def history_chain(model: ScriptedChatModel, history: BaseChatMessageHistory) -> Any:
    return RunnableWithMessageHistory(tool_loop(model), lambda session_id: history)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_runnable_with_message_history(sync_store: SyncHistoryStore, mode: str) -> None:
    ours = ChatledgerChatMessageHistory("s", store=sync_store)
    theirs = reference_history()
    model, reference = ScriptedChatModel(), ScriptedChatModel()
    for history, chat in ((ours, model), (theirs, reference)):
        chain = history_chain(chat, history)
        for turn in range(TURNS):
            if mode == "invoke":
                out = chain.invoke(f"question {turn}", config=config("s"))
            else:
                out = await chain.ainvoke(f"question {turn}", config=config("s"))
            assert out[-1].content == f"answer to question {turn}"
    assert len(theirs.messages) == TURNS * PER_TURN
    assert ours.messages == theirs.messages
    assert await ours.aget_messages() == theirs.messages
    assert [m.message for m in sync_store.history("s")] != []
    assert model.calls == reference.calls
    assert [pairing_problems(c) for c in model.calls] == [[]] * len(model.calls)


async def test_history_length_holds_until_the_next_add(sync_store: SyncHistoryStore) -> None:
    history = ChatledgerChatMessageHistory("s", store=sync_store)
    history.add_messages([HumanMessage("hi"), AIMessage("hello")])
    read = history.messages
    other = ChatledgerChatMessageHistory("s", store=sync_store)
    other.add_messages([HumanMessage("more")])
    assert history.messages == read  # what LangChain slices by is stable
    await history.aadd_messages([AIMessage("and you?")])
    assert [m.content for m in await history.aget_messages()] == [
        "hi",
        "hello",
        "more",
        "and you?",
    ]
    await history.aclear()
    assert history.messages == []
    history.clear()


# -- create_agent with the middleware -------------------------------------------------


def run_agent(agent: Any, turns: range, *, thread: str = "t1") -> list[Any]:
    states = []
    for turn in turns:
        state = agent.invoke(
            {"messages": [HumanMessage(f"question {turn}")]}, config=config(thread, "thread_id")
        )
        states.append(state)
    return states


async def arun_agent(agent: Any, turns: range, *, thread: str = "t1") -> list[Any]:
    states = []
    for turn in turns:
        state = await agent.ainvoke(
            {"messages": [HumanMessage(f"question {turn}")]}, config=config(thread, "thread_id")
        )
        states.append(state)
    return states


def stored_objects(store: SyncHistoryStore, session_id: str) -> list[BaseMessage]:
    from langchain_core.messages import messages_from_dict

    from store.formats.langchain import to_langchain

    stored = [m.message for m in store.history(session_id, include_excluded=True)]
    return list(messages_from_dict(to_langchain(stored)))


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("checkpointer", [False, True], ids=["no-checkpointer", "checkpointer"])
async def test_create_agent_with_the_middleware(
    sync_store: SyncHistoryStore, mode: str, checkpointer: bool
) -> None:
    model, reference = ScriptedChatModel(), ScriptedChatModel()
    agent = create_agent(
        model,
        tools=[lookup],
        middleware=[ChatledgerMiddleware(store=sync_store)],
        checkpointer=InMemorySaver() if checkpointer else None,
    )
    theirs = create_agent(reference, tools=[lookup], checkpointer=InMemorySaver())
    if mode == "invoke":
        run_agent(agent, range(TURNS))
    else:
        await arun_agent(agent, range(TURNS))
    [*_, final] = run_agent(theirs, range(TURNS))
    # what is stored is what LangGraph's own checkpointer holds, and nothing twice
    assert without_ids(stored_objects(sync_store, "t1")) == without_ids(final["messages"])
    assert [without_ids(c) for c in model.calls] == [without_ids(c) for c in reference.calls]
    assert [pairing_problems(c) for c in model.calls] == [[]] * len(model.calls)


async def test_a_small_window_keeps_every_model_call_under_budget(
    sync_store: SyncHistoryStore, tokenizer: Tokenizer
) -> None:
    window, output = 2_000, 200
    model = ScriptedChatModel()
    middleware = ChatledgerMiddleware(
        store=sync_store, max_context_window_tokens=window, max_output_tokens=output
    )
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    states = run_agent(agent, range(8))
    answers = [s["messages"][-1].content for s in states]
    assert answers == [f"answer to question {t}" for t in range(8)]
    assert max(tokens(call, tokenizer) for call in model.calls) <= window - output
    assert [pairing_problems(c) for c in model.calls] == [[]] * len(model.calls)
    excluded = sync_store.excluded("t1")
    assert excluded, "the window never compacted: the test proves nothing"
    events = {e.id: e for e in sync_store.audit("t1")}
    assert {g.event_id for g in excluded} <= set(events)
    assert {events[g.event_id].phase for g in excluded if g.event_id} == {"after_run"}
    assert len(sync_store.history("t1", include_excluded=True)) >= 8 * PER_TURN


def test_an_interrupted_run_loses_nothing(sync_store: SyncHistoryStore) -> None:
    class Broken(ScriptedChatModel):
        def _reply(self, messages: list[BaseMessage]) -> Any:
            if self.counter == TOOL_CALLS:
                raise RuntimeError("the model went away")
            return super()._reply(messages)

    agent = create_agent(
        Broken(), tools=[lookup], middleware=[ChatledgerMiddleware(store=sync_store)]
    )
    with pytest.raises(RuntimeError, match="went away"):
        run_agent(agent, range(1))
    stored = stored_objects(sync_store, "t1")
    kinds = [type(m).__name__ for m in stored]
    assert kinds == ["HumanMessage"] + ["AIMessage", "ToolMessage"] * TOOL_CALLS
    # the next run goes on from there: the model sees the calls already made
    model = ScriptedChatModel(made={"question 0": TOOL_CALLS}, counter=100)
    agent = create_agent(model, tools=[lookup], middleware=[ChatledgerMiddleware(store=sync_store)])
    assert agent.invoke({"messages": []}, config=config("t1", "thread_id"))["messages"]
    assert isinstance(model.calls[0][-1], ToolMessage)


def test_the_session_id_comes_from_the_config(sync_store: SyncHistoryStore) -> None:
    model = ScriptedChatModel()
    middleware = ChatledgerMiddleware(store=sync_store, session_id_key="user")
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    with pytest.raises(InvalidInput, match="user"):
        agent.invoke({"messages": [HumanMessage("hi")]}, config=config("x", "thread_id"))
    agent.invoke({"messages": [HumanMessage("hi")]}, config=config("u-1", "user"))
    assert len(sync_store.history("u-1")) == PER_TURN


@pytest.fixture
def sql_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'resume.db'}"


async def test_resume_from_a_new_process_with_only_the_session_id(sql_url: str) -> None:
    middleware = ChatledgerMiddleware(url=sql_url)
    history = ChatledgerChatMessageHistory("h", url=sql_url)
    run_agent(create_agent(ScriptedChatModel(), tools=[lookup], middleware=[middleware]), range(2))
    history_chain(ScriptedChatModel(), history).invoke("question 0", config=config("h"))
    middleware.close()
    history.close()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integrations.langchain_child",
        sql_url,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await child.communicate()
    assert child.returncode == 0, err.decode()
    report = json.loads(out)
    assert report["agent_first_call"] == ["question 0", "question 1", "question 2"]
    assert report["agent_pairing"] == [[]] * report["agent_calls"]
    assert report["history_first_call"] == ["question 0", "question 1"]
    assert report["history_stored"] == 2 * PER_TURN


def test_instances_on_one_url_share_one_store(sql_url: str) -> None:
    first = ChatledgerChatMessageHistory("a", url=sql_url)
    second = ChatledgerMiddleware(url=sql_url)
    assert not Path(sql_url.removeprefix("sqlite:///")).exists()
    first.add_messages([HumanMessage("hi")])
    store = first.store()
    assert second.store() is store
    first.close()
    assert store.loop.thread.is_alive()
    second.close()
    assert not store.loop.thread.is_alive()
    with pytest.raises(StoreClosed):
        store.sessions()
    with pytest.raises(InvalidInput, match="SyncHistoryStore"):
        ChatledgerChatMessageHistory("a", store=TiktokenTokenizer())  # type: ignore[arg-type]


def test_without_the_extra_the_import_names_it() -> None:
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "try:\n    import store.integrations.langchain\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert "pip install 'chatledger[langchain]'" in out
