"""Every framework adapter reads the compaction options as the two-phase provider does.

The options are checked in the constructor, before anything is opened, and a bad one
raises :class:`InvalidInput` whichever adapter is given it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain")

from store.errors import InvalidInput
from store.integrations.agent_framework import ChatledgerHistoryProvider
from store.integrations.langchain import ChatledgerMiddleware
from store.integrations.openai_agents import ChatledgerSession
from store.memory import InMemoryHistoryStore
from store.provider import TwoPhaseProvider
from strategies import format_strategy
from strategies.base import CompactionStrategy

URL = "sqlite:///does/not/exist/nowhere.db"  # opened on first use only, so never here


def _strategies(adapter: object) -> tuple[CompactionStrategy | None, CompactionStrategy | None]:
    if isinstance(adapter, ChatledgerHistoryProvider):
        return adapter.phases.before_strategy, adapter.phases.after_strategy
    if isinstance(adapter, ChatledgerSession):
        return adapter.provider.before_strategy, adapter.provider.after_strategy
    assert isinstance(adapter, ChatledgerMiddleware)
    return adapter.before_strategy, adapter.after_strategy


ADAPTERS: dict[str, Callable[..., object]] = {
    "agent_framework": lambda **options: ChatledgerHistoryProvider(url=URL, **options),
    "openai_agents": lambda **options: ChatledgerSession("s", url=URL, **options),
    "langchain": lambda **options: ChatledgerMiddleware(url=URL, **options),
}

GOOD: list[dict[str, Any]] = [
    {},
    {"max_context_window_tokens": 1000, "max_output_tokens": 200, "reserved_tokens": 50},
    {"before_strategy": "truncation:max_n=8,compact_to=4"},
    {
        "after_strategy": "sliding-window:keep_last_groups=3",
        "max_context_window_tokens": 1000,
        "max_output_tokens": 200,
    },
]

BAD: list[tuple[dict[str, Any], str]] = [
    ({"max_context_window_tokens": 1000}, "give both"),
    ({"reserved_tokens": 10}, "reserved_tokens needs"),
    ({"max_context_window_tokens": 100, "max_output_tokens": 200}, "max_output_tokens must"),
    ({"before_strategy": "no-such-strategy"}, "unknown strategy"),
]


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize("options", GOOD)
def test_an_adapter_resolves_the_strategies_a_provider_would(
    adapter: str, options: dict[str, Any]
) -> None:
    provider = TwoPhaseProvider(InMemoryHistoryStore(), **options)
    expected = (provider.before_strategy, provider.after_strategy)
    got = _strategies(ADAPTERS[adapter](**options))
    assert [s and format_strategy(s) for s in got] == [s and format_strategy(s) for s in expected]


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize(("options", "problem"), BAD)
def test_a_bad_option_is_invalid_input_in_every_adapter(
    adapter: str, options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidInput, match=problem):
        ADAPTERS[adapter](**options)
