"""Every framework adapter reads the compaction options as the two-phase provider does.

The options are checked in the constructor, once, before anything is opened, and a bad
one raises :class:`InvalidInput` whichever adapter is given it; a
:class:`~store.provider.ContextWindow` given as ``window=`` is used as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain")

from store.errors import InvalidInput
from store.integrations.agent_framework import ChatledgerHistoryProvider
from store.integrations.langchain import ChatledgerMiddleware
from store.integrations.openai_agents import ChatledgerSession
from store.memory import InMemoryHistoryStore
from store.provider import ContextWindow, TwoPhaseProvider
from strategies import format_strategy
from strategies.base import CompactionStrategy
from strategies.tokenizers import CharacterEstimatorTokenizer

URL = "sqlite:///does/not/exist/nowhere.db"  # opened on first use only, so never here


def _strategies(adapter: object) -> tuple[CompactionStrategy | None, CompactionStrategy | None]:
    if isinstance(adapter, ChatledgerHistoryProvider):
        return adapter.phases.before_strategy, adapter.phases.after_strategy
    if isinstance(adapter, ChatledgerSession):
        return adapter.provider.before_strategy, adapter.provider.after_strategy
    assert isinstance(adapter, ChatledgerMiddleware)
    return adapter.before_strategy, adapter.after_strategy


def _window(adapter: object) -> ContextWindow:
    if isinstance(adapter, ChatledgerHistoryProvider):
        return adapter.phases.window
    if isinstance(adapter, ChatledgerSession):
        return adapter.provider.window
    assert isinstance(adapter, ChatledgerMiddleware)
    return adapter.window


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


def _count_checks(monkeypatch: pytest.MonkeyPatch) -> list[ContextWindow]:
    """The windows checked from now on, one entry a check."""
    checks: list[ContextWindow] = []
    check = ContextWindow.__post_init__

    def counted(self: ContextWindow) -> None:
        checks.append(self)
        check(self)

    monkeypatch.setattr(ContextWindow, "__post_init__", counted)
    return checks


@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_an_adapter_checks_its_keywords_once(adapter: str, monkeypatch: pytest.MonkeyPatch) -> None:
    checks = _count_checks(monkeypatch)
    built = ADAPTERS[adapter](max_context_window_tokens=1000, max_output_tokens=200)
    assert checks == [_window(built)]
    assert _window(built).max_context_window_tokens == 1000


@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_an_adapter_passes_the_window_it_is_given_down_unchanged(
    adapter: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = ContextWindow(
        max_context_window_tokens=1000,
        max_output_tokens=200,
        after_strategy="sliding-window:keep_last_groups=3",
    )
    checks = _count_checks(monkeypatch)
    built = ADAPTERS[adapter](window=window)
    assert _window(built) is window
    before, after = _strategies(built)
    assert before is window.before and after is window.after
    assert checks == []


@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_a_window_and_its_keywords_together_are_invalid_input(adapter: str) -> None:
    with pytest.raises(InvalidInput, match="give window or max_output_tokens, not both"):
        ADAPTERS[adapter](window=ContextWindow(), max_output_tokens=200)


async def test_an_owned_store_is_opened_with_the_window_tokenizer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'window.db'}"
    window = ContextWindow(tokenizer=CharacterEstimatorTokenizer())
    name = CharacterEstimatorTokenizer().name
    session = ChatledgerSession("s", url=url, window=window)
    provider = ChatledgerHistoryProvider(url=url, window=window)
    middleware = ChatledgerMiddleware(url=url, window=window)
    try:
        assert (await session.store()).tokenizer.name == name
        assert (await provider.store()).tokenizer.name == name
        assert middleware.store().tokenizer.name == name
    finally:
        await session.aclose()
        await provider.aclose()
        middleware.close()


def _phases(adapter: object) -> TwoPhaseProvider:
    if isinstance(adapter, ChatledgerHistoryProvider | ChatledgerMiddleware):
        return adapter.phases
    assert isinstance(adapter, ChatledgerSession)
    return adapter.provider


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_calibrate_reaches_the_provider(name: str) -> None:
    assert _phases(ADAPTERS[name](calibrate=True)).calibrate is True
    assert _phases(ADAPTERS[name]()).calibrate is False
    with pytest.raises(InvalidInput, match="calibrate"):
        ADAPTERS[name](calibrate="yes")
