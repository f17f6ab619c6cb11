"""The context-window options: checked once when made, resolved into the strategies of
both phases, and used as they are by the provider."""

from __future__ import annotations

import dataclasses

import pytest

from store import ContextWindow
from store.errors import InvalidInput
from store.memory import InMemoryHistoryStore
from store.provider import WINDOW_MIN_SAVING, TwoPhaseProvider
from strategies import format_strategy
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.sliding_window import SlidingWindowStrategy
from strategies.tokenizers import CharacterEstimatorTokenizer


def test_no_option_means_no_strategy() -> None:
    window = ContextWindow()
    assert window.before is None and window.after is None


def test_the_sizes_give_one_window_strategy_for_both_phases() -> None:
    tokenizer = CharacterEstimatorTokenizer()
    window = ContextWindow(
        max_context_window_tokens=1000,
        max_output_tokens=200,
        reserved_tokens=50,
        tokenizer=tokenizer,
    )
    strategy = window.before
    assert isinstance(strategy, ContextWindowCompactionStrategy)
    assert window.after is strategy
    assert strategy.input_budget_tokens == 750
    assert strategy.tokenizer is tokenizer
    assert strategy.min_saving_tokens == round(750 * WINDOW_MIN_SAVING)


def test_an_explicit_strategy_or_spec_replaces_the_window_for_its_phase() -> None:
    own = SlidingWindowStrategy(keep_last_groups=3)
    window = ContextWindow(
        max_context_window_tokens=1000,
        max_output_tokens=200,
        before_strategy=own,
        after_strategy="truncation:max_n=8,compact_to=4",
    )
    assert window.before is own
    assert window.after is not None
    assert format_strategy(window.after).startswith("truncation:")


@pytest.mark.parametrize(
    ("options", "error", "problem"),
    [
        ({"max_context_window_tokens": 1000}, ValueError, "give both"),
        ({"max_output_tokens": 10}, ValueError, "give both"),
        ({"reserved_tokens": 10}, ValueError, "reserved_tokens needs"),
        (
            {"max_context_window_tokens": 100, "max_output_tokens": 200},
            ValueError,
            "max_output_tokens must",
        ),
        (
            {"max_context_window_tokens": 100, "max_output_tokens": 20, "reserved_tokens": 80},
            ValueError,
            "reserved_tokens must",
        ),
        ({"before_strategy": "no-such-strategy"}, InvalidInput, "unknown strategy"),
        ({"after_strategy": 3}, InvalidInput, "expected a compaction strategy"),
    ],
)
def test_a_bad_option_is_refused_when_the_window_is_made(
    options: dict[str, object], error: type[Exception], problem: str
) -> None:
    with pytest.raises(error, match=problem):
        ContextWindow(**options)  # type: ignore[arg-type]


def test_a_window_is_frozen_and_keyword_only() -> None:
    window = ContextWindow()
    with pytest.raises(dataclasses.FrozenInstanceError):
        window.reserved_tokens = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        ContextWindow(1000, 200)  # type: ignore[misc]


def test_of_gives_the_window_given_or_makes_one_from_the_keywords() -> None:
    window = ContextWindow(max_context_window_tokens=1000, max_output_tokens=200)
    assert ContextWindow.of(window) is window
    assert ContextWindow.of(window, reserved_tokens=0) is window  # a default is not an option
    made = ContextWindow.of(None, max_context_window_tokens=1000, max_output_tokens=200)
    assert made == window
    with pytest.raises(ValueError, match="give window or reserved_tokens, tokenizer, not both"):
        ContextWindow.of(window, reserved_tokens=5, tokenizer=CharacterEstimatorTokenizer())


def test_the_provider_runs_the_window_it_is_given_without_checking_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    window = ContextWindow(max_context_window_tokens=1000, max_output_tokens=200)
    checks: list[ContextWindow] = []
    monkeypatch.setattr(ContextWindow, "__post_init__", lambda self: checks.append(self))
    provider = TwoPhaseProvider(InMemoryHistoryStore(), window=window)
    assert provider.window is window
    assert provider.before_strategy is window.before
    assert provider.after_strategy is window.after
    assert checks == []
    with pytest.raises(ValueError, match="give window or max_output_tokens, not both"):
        TwoPhaseProvider(InMemoryHistoryStore(), window=window, max_output_tokens=100)


def test_the_provider_makes_its_window_from_its_keywords_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checks: list[ContextWindow] = []
    check = ContextWindow.__post_init__

    def counted(self: ContextWindow) -> None:
        checks.append(self)
        check(self)

    monkeypatch.setattr(ContextWindow, "__post_init__", counted)
    provider = TwoPhaseProvider(
        InMemoryHistoryStore(), max_context_window_tokens=1000, max_output_tokens=200
    )
    assert checks == [provider.window]
    assert provider.window.max_context_window_tokens == 1000
