"""The agents the end-to-end tests drive, and the per-call checks (no pytest here).

Kept apart from ``conftest.py`` so that the fresh-process resume script
(:mod:`tests.integrations.resume_child`) can build the same agents.

The window is small against the tool results: each result is about a tenth of the input
budget, and a turn makes :data:`TOOL_CALLS` of them, so after a few turns the context
window strategy collapses old tool groups into summaries and then truncates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_framework import Agent, AgentSession, create_harness_agent
from agent_framework import Message as AFMessage

from store.contract import HistoryBackend
from store.integrations.agent_framework import (
    ChatledgerHistoryProvider,
    as_agent_framework,
    from_af_messages,
)
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.messages import FunctionCallContent, FunctionResultContent
from strategies.tokenizers import Tokenizer, count_messages_tokens
from tests.integrations.scripted_client import Recorded, ScriptedChatClient, big_result

WINDOW = 3000
OUTPUT = 500
BUDGET = WINDOW - OUTPUT
RESULT_WORDS = 30
TOOL_CALLS = 2
INSTRUCTIONS = "You are terse."
PER_TURN = 1 + 2 * TOOL_CALLS + 1
"""Messages per turn: the user request, TOOL_CALLS calls and results, the answer."""


def lookup(query: str) -> str:
    """Look ``query`` up (returns a large, deterministic result)."""
    return big_result(query, RESULT_WORDS)


def window_provider(
    store: HistoryBackend | None = None,
    *,
    url: str | None = None,
    tokenizer: Tokenizer | None = None,
) -> ChatledgerHistoryProvider:
    """A provider whose two phases both use the context window strategy of the window."""
    return ChatledgerHistoryProvider(
        store,
        url=url,
        tokenizer=tokenizer,
        max_context_window_tokens=WINDOW,
        max_output_tokens=OUTPUT,
    )


def plain_agent(
    client: ScriptedChatClient, provider: ChatledgerHistoryProvider, tokenizer: Tokenizer
) -> Any:
    """``Agent`` with the provider as context provider; in-run compaction by the adapter."""
    in_run = ContextWindowCompactionStrategy(
        max_context_window_tokens=WINDOW, max_output_tokens=OUTPUT, tokenizer=tokenizer
    )
    return Agent(
        client,
        instructions=INSTRUCTIONS,
        tools=[lookup],
        context_providers=[provider],
        compaction_strategy=as_agent_framework(in_run),
    )


def harness_agent(
    client: ScriptedChatClient, provider: ChatledgerHistoryProvider, tokenizer: Tokenizer
) -> Any:
    """``create_harness_agent`` with the provider as its history provider."""
    del tokenizer  # the provider's window does the compaction
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


Builder = Callable[[ScriptedChatClient, ChatledgerHistoryProvider, Tokenizer], Any]
BUILDERS: dict[str, Builder] = {"plain": plain_agent, "harness": harness_agent}


@dataclass
class CallCheck:
    """What one recorded model call showed."""

    tokens: int
    newest_user: str | None


def check_call(call: Recorded, tokenizer: Tokenizer, *, budget: int) -> CallCheck:
    """Assert the per-call invariants on what the client received; return its figures."""
    ours = from_af_messages(call.messages)
    calls = {c.call_id for m in ours for c in m.contents if isinstance(c, FunctionCallContent)}
    results = {c.call_id for m in ours for c in m.contents if isinstance(c, FunctionResultContent)}
    assert results <= calls, f"results without their call: {results - calls}"
    # The framework answers every call before the next model call, so nothing is pending.
    assert calls <= results, f"calls without their result: {calls - results}"
    tokens = count_messages_tokens(ours, tokenizer)
    assert tokens <= budget, f"{tokens} tokens sent, budget {budget}"
    users = [m.text for m in ours if m.role == "user"]
    return CallCheck(tokens=tokens, newest_user=users[-1] if users else None)


def request(turn: int) -> str:
    """The user's request of turn ``turn``."""
    return f"question {turn}"


def answer(turn: int) -> str:
    """The scripted model's answer to turn ``turn``."""
    return f"answer to {request(turn)}"


async def run_turns(
    agent: Any,
    client: ScriptedChatClient,
    session: AgentSession,
    tokenizer: Tokenizer,
    turns: range,
) -> list[CallCheck]:
    """Run one user turn per item of ``turns``, checking every model call it makes."""
    checks: list[CallCheck] = []
    for turn in turns:
        start = len(client.calls)
        response = await agent.run(request(turn), session=session)
        assert response.text == answer(turn)
        made = client.calls[start:]
        assert len(made) == TOOL_CALLS + 1
        for call in made:
            seen = check_call(call, tokenizer, budget=BUDGET)
            assert seen.newest_user == request(turn)
            assert INSTRUCTIONS in str(call.options.get("instructions"))
            checks.append(seen)
    return checks


def texts(messages: Sequence[AFMessage]) -> list[str]:
    """The text of each message."""
    return [m.text for m in messages]
