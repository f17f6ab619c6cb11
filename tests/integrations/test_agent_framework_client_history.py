"""A strategy that needs client-managed history is refused on a service-kept conversation.

Agent Framework 1.26 lets a compaction strategy say ``requires_client_managed_history =
True`` (its agent-triggered compaction does) and its chat client then refuses to run it
when the service keeps the conversation: ``store`` on, or a service conversation id.
The provider refuses such a chatledger strategy in the same cases, with
``ClientManagedHistoryRequired``, on 1.23 as on 1.26; the adapted strategy passes the
capability on, so that 1.26's client refuses it as it refuses its own.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput
from strategies.changeset import ChangeSet
from strategies.pipeline import PipelineStrategy
from strategies.sliding_window import SlidingWindowStrategy
from strategies.view import View

af = pytest.importorskip("agent_framework")

from store.integrations.agent_framework import (  # noqa: E402
    ChatledgerHistoryProvider,
    ClientManagedHistoryRequired,
    as_agent_framework,
    needs_client_managed_history,
)
from tests.integrations.scripted_client import ScriptedChatClient  # noqa: E402

AF_126 = tuple(int(part) for part in version("agent-framework-core").split(".")[:2]) >= (1, 26)
"""Whether the installed chat client knows the capability (1.23's does not)."""


class LocalOnly:
    """A strategy that plans nothing and needs the history kept on the client."""

    requires_client_managed_history = True

    def __init__(self) -> None:
        self.plans = 0

    @property
    def name(self) -> str:
        return "local_only"

    def params(self) -> dict[str, Any]:
        return {}

    async def plan(self, view: View) -> ChangeSet:
        self.plans += 1
        return ChangeSet(strategy=self.name)


def test_the_capability_is_read_through_wrappers_and_compositions() -> None:
    sliding = SlidingWindowStrategy(keep_last_groups=4)
    assert not needs_client_managed_history(sliding)
    assert needs_client_managed_history(LocalOnly())
    assert needs_client_managed_history(PipelineStrategy(sliding, LocalOnly()))
    assert not needs_client_managed_history(PipelineStrategy(sliding))
    assert as_agent_framework(
        PipelineStrategy(sliding, LocalOnly())
    ).requires_client_managed_history
    assert not as_agent_framework(sliding).requires_client_managed_history
    not_quite = LocalOnly()
    not_quite.requires_client_managed_history = "yes"  # type: ignore[assignment]
    assert not needs_client_managed_history(not_quite)  # True itself, as the framework reads it


def _agent(provider: ChatledgerHistoryProvider, **kwargs: Any) -> Any:
    return af.Agent(ScriptedChatClient(tool_calls=0), context_providers=[provider], **kwargs)


SERVICE_KEPT = [
    ({"store": True}, "store=True"),
    ({"conversation_id": "conv_service_1"}, "conversation_id='conv_service_1'"),
]


@pytest.mark.parametrize(("options", "how"), SERVICE_KEPT, ids=["store", "conversation_id"])
@pytest.mark.parametrize("phase", ["before_strategy", "after_strategy"])
async def test_the_provider_refuses_a_service_kept_conversation(
    memory_store: HistoryBackend, options: dict[str, Any], how: str, phase: str
) -> None:
    strategy = LocalOnly()
    provider = ChatledgerHistoryProvider(memory_store, **{phase: strategy})
    agent = _agent(provider)
    with pytest.raises(ClientManagedHistoryRequired) as raised:
        await agent.run("hi", session=agent.create_session(), options=options)
    message = str(raised.value)
    assert "\n" not in message and "'local_only'" in message and how in message
    assert isinstance(raised.value, InvalidInput)
    assert strategy.plans == 0


async def test_the_agents_default_store_counts(memory_store: HistoryBackend) -> None:
    provider = ChatledgerHistoryProvider(memory_store, before_strategy=LocalOnly())
    agent = _agent(provider, default_options={"store": True})
    with pytest.raises(ClientManagedHistoryRequired, match="store=True"):
        await agent.run("hi", session=agent.create_session())
    # the run's own store=False wins over the agent's default, as in the framework
    session = agent.create_session()
    await agent.run("hi", session=session, options={"store": False})
    assert [m.role for m in await memory_store.context(session.session_id)] == [
        "user",
        "assistant",
    ]


async def test_a_client_kept_conversation_runs(memory_store: HistoryBackend) -> None:
    strategy = LocalOnly()
    provider = ChatledgerHistoryProvider(memory_store, before_strategy=strategy)
    agent = _agent(provider)
    session = agent.create_session()
    await agent.run("hi", session=session)
    await agent.run("again", session=session, options={"store": False})
    assert strategy.plans >= 2
    assert len(await memory_store.context(session.session_id)) == 4


async def test_other_strategies_run_on_a_service_kept_conversation(
    memory_store: HistoryBackend,
) -> None:
    """Only a strategy that says it needs client-managed history is refused, as in the
    framework: the others compact the store's copy as before."""
    provider = ChatledgerHistoryProvider(
        memory_store, before_strategy=SlidingWindowStrategy(keep_last_groups=8)
    )
    agent = _agent(provider)
    session = agent.create_session()
    await agent.run("hi", session=session, options={"store": True})
    assert len(await memory_store.context(session.session_id)) == 2


async def test_the_chat_client_refuses_the_adapted_strategy_from_1_26() -> None:
    """1.26's chat client reads the capability the adapted strategy passes on and
    refuses it in its own words; 1.23's has no such check and runs it."""
    strategy = LocalOnly()
    agent = af.Agent(
        ScriptedChatClient(tool_calls=0), compaction_strategy=as_agent_framework(strategy)
    )
    if AF_126:
        from agent_framework.exceptions import ChatClientInvalidRequestException

        with pytest.raises(ChatClientInvalidRequestException, match="client-managed history"):
            await agent.run("hi", options={"store": True})
        assert strategy.plans == 0
    else:
        await agent.run("hi", options={"store": True})
        assert strategy.plans == 1
    await agent.run("hi", options={"store": False})  # client-managed: runs in both
    assert strategy.plans == (1 if AF_126 else 2)


class ServiceKeptClient(ScriptedChatClient):
    """Keeps the conversation on the service: each response names it."""

    async def _respond(self, messages: Any) -> Any:
        response = await super()._respond(messages)
        response.conversation_id = "conv_service_1"
        return response


async def test_a_harness_agent_is_refused_too(memory_store: HistoryBackend) -> None:
    """An agent that saves around every model call skips the provider's loading when the
    service keeps the history; its saving refuses the strategy instead, before anything
    is stored. 1.26 tells the provider the run's ``store=True``; 1.23 gives the saving
    no options, and the refusal then comes from the conversation id the service
    returned (so this client returns one)."""
    provider = ChatledgerHistoryProvider(memory_store, after_strategy=LocalOnly())
    agent = af.create_harness_agent(
        ServiceKeptClient(tool_calls=0),
        history_provider=provider,
        disable_compaction=True,
        disable_todo=True,
        disable_mode=True,
        disable_file_memory=True,
        disable_web_search=True,
    )
    session = agent.create_session()
    how = "store=True" if AF_126 else "conv_service_1"
    with pytest.raises(ClientManagedHistoryRequired, match=how):
        await agent.run("hi", session=session, options={"store": True})
    assert await memory_store.context(session.session_id) == []
