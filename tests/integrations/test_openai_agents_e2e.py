"""The OpenAI Agents SDK's real runner on a chatledger session, offline.

``Runner.run`` and ``Runner.run_streamed`` drive the SDK's own ``ScriptedModel`` (with
and without response ids, tracing disabled) on each backend, and every run is compared
with the same run on the SDK's own ``SQLiteSession``: what is stored, and what each
model call was sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, RunResult, RunResultStreaming, SQLiteSession
from agents.memory import Session

from store import HistoryStore
from store.errors import InvalidInput, StoreClosed
from store.integrations.openai_agents import ChatledgerSession
from strategies.messages import Message, ReasoningContent
from strategies.tokenizers import Tokenizer
from tests.conftest import PgServer
from tests.integrations.conftest import AnyStore
from tests.integrations.openai_agents_support import (
    TOOL_CALLS,
    Policy,
    input_tokens,
    make_agent,
    model_inputs,
    pairing_problems,
)

TURNS = 4
ROOT = Path(__file__).resolve().parents[2]


async def run_turns(
    agent: Agent[Any],
    session: Session,
    turns: range,
    *,
    streamed: bool = False,
    config: RunConfig | None = None,
) -> list[Any]:
    """Run one user turn per number of ``turns``; return the final outputs."""
    outputs: list[Any] = []
    for turn in turns:
        question = f"question {turn}"
        result: RunResult | RunResultStreaming
        if streamed:
            result = Runner.run_streamed(agent, question, session=session, run_config=config)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, question, session=session, run_config=config)
        outputs.append(result.final_output)
    return outputs


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
@pytest.mark.parametrize("response_ids", [True, False], ids=["ids", "no-ids"])
async def test_stores_what_the_sdks_own_session_holds(
    any_store: AnyStore, streamed: bool, response_ids: bool
) -> None:
    ours = ChatledgerSession("s", store=any_store)
    theirs = SQLiteSession("s")
    policy, reference = Policy(response_ids=response_ids), Policy(response_ids=response_ids)
    model, reference_model = policy.model(), reference.model()
    outputs = await run_turns(make_agent(model), ours, range(TURNS), streamed=streamed)
    expected = await run_turns(make_agent(reference_model), theirs, range(TURNS), streamed=streamed)
    assert outputs == expected == [f"answer to question {t}" for t in range(TURNS)]
    stored = await theirs.get_items()
    assert await ours.get_items(limit=len(stored) + 5) == stored
    assert await ours.get_items(limit=3) == stored[-3:]
    assert len(model.calls) == TURNS * (TOOL_CALLS + 1)
    assert model_inputs(model) == model_inputs(reference_model)
    assert [pairing_problems(sent) for sent in model_inputs(model)] == [[]] * len(model.calls)
    # the request context is the whole history while nothing is compacted
    assert await ours.get_items() == stored


async def test_a_small_window_keeps_every_model_call_under_budget(
    any_store: AnyStore, tokenizer: Tokenizer
) -> None:
    window, output = 2_000, 200
    session = ChatledgerSession(
        "s", store=any_store, max_context_window_tokens=window, max_output_tokens=output
    )
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    model = Policy(response_ids=False).model()
    outputs = await run_turns(make_agent(model), session, range(8), config=config)
    assert outputs == [f"answer to question {t}" for t in range(8)]
    sent = model_inputs(model)
    assert max(input_tokens(items, tokenizer) for items in sent) <= window - output
    assert [pairing_problems(items) for items in sent] == [[]] * len(sent)
    excluded = await any_store.excluded("s")
    events = {e.id: e for e in await any_store.audit("s")}
    assert excluded, "the window never compacted: the test proves nothing"
    assert {g.event_id for g in excluded} <= set(events)
    assert {events[g.event_id].phase for g in excluded if g.event_id} == {"after_run"}
    # nothing is lost: the verbatim reads still give every item
    stored = await session.get_items(limit=10_000)
    assert len(stored) == sum(1 + 2 * TOOL_CALLS + 1 for _ in range(8))
    # the newest request is sent whole, with its calls and their outputs
    assert [i.get("content") for i in sent[-1] if i.get("role") == "user"][-1] == "question 7"


async def test_an_interrupted_run_resumes_after_approval(any_store: AnyStore) -> None:
    async def interrupted_then_approved(session: Session) -> tuple[Any, list[Any]]:
        model = Policy(tool_calls=1).model()
        agent = make_agent(model, needs_approval=True)
        first = await Runner.run(agent, "question 0", session=session)
        assert first.interruptions, "the tool call should wait for approval"
        state = first.to_state()
        for interruption in first.interruptions:
            state.approve(interruption)
        resumed = await Runner.run(agent, state, session=session)
        return resumed.final_output, model_inputs(model)

    ours = ChatledgerSession("s", store=any_store)
    theirs = SQLiteSession("s")
    output, sent = await interrupted_then_approved(ours)
    expected, reference_sent = await interrupted_then_approved(theirs)
    assert output == expected == "answer to question 0"
    assert await ours.get_items(limit=100) == await theirs.get_items()
    assert sent == reference_sent
    assert [pairing_problems(items) for items in sent] == [[]] * len(sent)
    assert await ours.get_items() == await theirs.get_items()


async def test_pop_item_and_clear_session(any_store: AnyStore) -> None:
    ours = ChatledgerSession("s", store=any_store)
    theirs = SQLiteSession("s")
    for session in (ours, theirs):
        await run_turns(make_agent(Policy().model()), session, range(2))
    assert await ours.pop_item() == await theirs.pop_item()
    assert await ours.pop_item() == await theirs.pop_item()
    assert await ours.get_items(limit=100) == await theirs.get_items()
    events = await any_store.audit("s", strategy="retract")
    assert len(events) == 2
    await ours.clear_session()
    assert await ours.get_items() == []
    assert await ours.pop_item() is None
    await ours.clear_session()
    # the session goes on after a rewind: the next run sees what is left
    await run_turns(make_agent(Policy().model()), ours, range(1))
    assert len(await ours.get_items(limit=100)) == 1 + 2 * TOOL_CALLS + 1


async def test_pop_item_of_a_message_the_responses_api_cannot_carry(any_store: AnyStore) -> None:
    # reasoning without its item id, as another format stores it: no Responses item
    foreign = Message(
        role="assistant", contents=[ReasoningContent(text="thinking")], message_id="r-1"
    )
    await any_store.append("s", [Message.text_message("user", "hi"), foreign])
    ours = ChatledgerSession("s", store=any_store)
    assert await ours.pop_item() is None
    assert [m.message.role for m in await any_store.history("s")] == ["user"]
    assert len(await any_store.audit("s", strategy="retract")) == 1


async def test_pop_item_of_a_message_a_fork_shares_is_refused(any_store: AnyStore) -> None:
    ours = ChatledgerSession("s", store=any_store)
    await run_turns(make_agent(Policy().model()), ours, range(1))
    await any_store.fork("s", new_session_id="retry")
    with pytest.raises(InvalidInput, match="shared with branch 'retry'"):
        await ours.pop_item()
    with pytest.raises(InvalidInput, match="shared with branch 's'"):
        await ChatledgerSession("retry", store=any_store).pop_item()
    assert len(await ours.get_items(limit=100)) == 1 + 2 * TOOL_CALLS + 1  # nothing taken


def _url(store: HistoryStore) -> str:
    return store.engine.url.render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def sql_store(
    request: pytest.FixtureRequest, tmp_path: Path, tokenizer: Tokenizer
) -> AsyncIterator[HistoryStore]:
    """A SQL store of each dialect, private to the test."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'sdk.db'}"
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        name = server.clone()
        request.addfinalizer(lambda: server.drop_later(name))
        url = server.url_for(name)
    async with HistoryStore.open(url, tokenizer=tokenizer) as store:
        yield store


async def test_resume_from_a_new_process_with_only_the_session_id(sql_store: HistoryStore) -> None:
    url = _url(sql_store)
    with pytest.raises(InvalidInput, match="max_output_tokens"):
        ChatledgerSession("resumed", url=url, max_context_window_tokens=4_000)
    session = ChatledgerSession(
        "resumed", url=url, max_context_window_tokens=4_000, max_output_tokens=400
    )
    await run_turns(make_agent(Policy().model()), session, range(2))
    await session.aclose()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integrations.openai_agents_child",
        url,
        "resumed",
        "2",
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await child.communicate()
    assert child.returncode == 0, err.decode()
    report = json.loads(out)
    first_call = report["first_call"]
    assert [i["content"] for i in first_call if i.get("role") == "user"] == [
        "question 0",
        "question 1",
        "question 2",
    ]
    assert report["pairing"] == [[]] * report["model_calls"]
    assert report["stored_items"] == 3 * (1 + 2 * TOOL_CALLS + 1)


async def test_shares_a_database_with_the_sdks_own_tables(sql_store: HistoryStore) -> None:
    sqlalchemy_session = pytest.importorskip("agents.extensions.memory.sqlalchemy_session")
    theirs = sqlalchemy_session.SQLAlchemySession(
        "shared", engine=sql_store.engine, create_tables=True
    )
    ours = ChatledgerSession("shared", store=sql_store)
    for session in (theirs, ours):
        await run_turns(make_agent(Policy().model()), session, range(2))
    assert await ours.get_items(limit=100) == await theirs.get_items()
    async with sql_store.engine.connect() as conn:
        tables = await conn.run_sync(lambda c: inspect(c).get_table_names())
    assert {"agent_sessions", "agent_messages", "chatledger_messages"} <= set(tables)
    await theirs.clear_session()
    assert len(await ours.get_items(limit=100)) == 2 * (1 + 2 * TOOL_CALLS + 1)


async def test_sessions_share_one_store_opened_on_first_use(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first, second = ChatledgerSession("a", url=url), ChatledgerSession("b", url=url)
    assert not (tmp_path / "shared.db").exists(), "the constructor opened the database"
    await run_turns(make_agent(Policy().model()), first, range(1))
    await run_turns(make_agent(Policy().model()), second, range(1))
    store = await first.store()
    assert store is await second.store()
    await first.aclose()
    assert len(await second.get_items()) == 1 + 2 * TOOL_CALLS + 1
    await second.aclose()
    await second.aclose()
    with pytest.raises(StoreClosed):
        await store.sessions()
    other = ChatledgerSession("c", url=url, tenant="other")
    assert await other.get_items() == []
    assert await other.store() is not store
    await other.aclose()


def test_without_the_extra_the_import_names_it() -> None:
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "try:\n    import store.integrations.openai_agents\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert "pip install 'chatledger[openai-agents]'" in out
