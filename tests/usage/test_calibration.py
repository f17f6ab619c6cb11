"""Calibration: a provider that counts 1.3 x chatledger's count + 200 goes over its
budget unless the provider judges the session in its tokens; the event shows the fit."""

from __future__ import annotations

import pytest

from store import InMemoryHistoryStore, TwoPhaseProvider, Usage
from store.usage.calibration import (
    MAX_OFFSET,
    MAX_SCALE,
    MIN_SCALE,
    CalibratedStrategy,
    calibrated,
    fit,
)
from store.usage.models import Calibration
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.messages import Message
from strategies.sliding_window import SlidingWindowStrategy
from strategies.tokenizers import CharacterEstimatorTokenizer
from strategies.triggers import All, Not, TokensBelow, TokensExceed
from tests.groups.conversations import assistant, user

WINDOW, OUTPUT = 2_000, 200
BUDGET = WINDOW - OUTPUT


def provider_count(store: InMemoryHistoryStore, sent: list[Message]) -> int:
    """What the scripted provider reports: 1.3 x the local count + 200."""
    return round(1.3 * sum(store.count_tokens(m) for m in sent) + 200)


async def run_session(*, calibrate: bool, turns: int = 30) -> tuple[list[int], TwoPhaseProvider]:
    store = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer())
    provider = TwoPhaseProvider(
        store,
        max_context_window_tokens=WINDOW,
        max_output_tokens=OUTPUT,
        calibrate=calibrate,
    )
    reported = []
    for turn in range(turns):
        question = user(f"u{turn}", f"question {turn} " + "words " * 40)
        sent = await provider.load("s", [question])
        reported.append(provider_count(store, sent))
        await provider.record_usage(
            "s", Usage(model="scripted", input_tokens=reported[-1], output_tokens=60)
        )
        answer = assistant(f"a{turn}", f"answer {turn} " + "more " * 40)
        await provider.save_turn("s", [question, answer], end_of_turn=True)
    return reported, provider


async def test_without_calibration_the_provider_count_goes_over_its_budget() -> None:
    reported, _ = await run_session(calibrate=False)
    assert max(reported) > BUDGET


async def test_with_calibration_compaction_fires_before_and_the_event_shows_the_fit() -> None:
    reported, provider = await run_session(calibrate=True)
    assert max(reported) <= BUDGET
    store = provider.backend
    assert isinstance(store, InMemoryHistoryStore)
    events = await store.audit("s")
    assert events, "compaction never ran"
    fits = [e.params["calibration"] for e in events]
    assert all(f["model"] == "scripted" for f in fits)
    newest = fits[0]  # the audit lists the newest first
    assert newest["scale"] == pytest.approx(1.3, abs=0.02)
    assert newest["offset"] == pytest.approx(200, abs=5)
    fitted = await provider.calibration("s")
    assert fitted is not None and fitted.calls > 2


async def test_calibrate_must_be_a_flag() -> None:
    from store.errors import InvalidInput

    with pytest.raises(InvalidInput, match="calibrate must be True or False"):
        TwoPhaseProvider(InMemoryHistoryStore(), calibrate="yes")  # type: ignore[arg-type]


def test_one_point_gives_a_ratio_and_no_offset() -> None:
    fitted = fit("s", "m", [(1000, 1500)])
    assert fitted is not None
    assert (fitted.scale, fitted.offset, fitted.bounded) == (1.5, 0.0, False)


def test_a_line_is_found_exactly() -> None:
    points = [(x, round(1.3 * x + 200)) for x in (100, 400, 900, 1600)]
    fitted = fit("s", "m", points)
    assert fitted is not None
    assert fitted.scale == pytest.approx(1.3, abs=1e-3)
    assert fitted.offset == pytest.approx(200, abs=1)


def test_the_newest_calls_weigh_most() -> None:
    old = [(x, 2 * x) for x in (100, 200, 300)]
    new = [(x, x) for x in (150, 250, 350, 450, 550, 650)]
    fitted = fit("s", "m", old + new)
    assert fitted is not None
    predicted = fitted.provider_tokens(700)  # the new calls say 700, the old ones 1,400
    assert abs(predicted - 700) < 0.1 * 700


@pytest.mark.parametrize("factor", [0.0, 0.01, 100.0, 1e6])
def test_no_report_moves_the_fit_past_its_bounds(factor: float) -> None:
    fitted = fit("s", "m", [(x, round(factor * x)) for x in (100, 500, 900)])
    assert fitted is not None and fitted.bounded
    assert MIN_SCALE <= fitted.scale <= MAX_SCALE
    assert 0 <= fitted.offset <= MAX_OFFSET


def test_no_point_no_fit() -> None:
    assert fit("s", "m", []) is None
    assert fit("s", "m", [(0, 100)]) is None


FIT = Calibration(session_id="s", model="m", scale=2.0, offset=100.0, calls=3)


def test_the_window_strategy_gets_the_local_budget() -> None:
    window = ContextWindowCompactionStrategy(
        max_context_window_tokens=10_000, max_output_tokens=1_000, reserved_tokens=500
    )
    scaled = calibrated(window, FIT)
    assert isinstance(scaled, ContextWindowCompactionStrategy)
    assert scaled.input_budget_tokens == (8_500 - 100) // 2
    assert (scaled.max_output_tokens, scaled.reserved_tokens) == (1_000, 500)
    assert window.input_budget_tokens == 8_500  # the strategy given is left as it is


def test_token_triggers_are_scaled_and_others_kept() -> None:
    trigger = All(TokensExceed(2_100), Not(TokensBelow(1_100)))
    strategy = SlidingWindowStrategy(keep_last_groups=4, trigger=trigger)
    scaled = calibrated(strategy, FIT)
    assert scaled.trigger == All(TokensExceed(1_000), Not(TokensBelow(500)))  # type: ignore[attr-defined]
    assert strategy.trigger is trigger
    untouched = SlidingWindowStrategy(keep_last_groups=4)
    assert calibrated(untouched, FIT) is untouched


def test_the_wrapper_records_the_fit_under_the_strategy_name() -> None:
    window = ContextWindowCompactionStrategy(max_context_window_tokens=4_000, max_output_tokens=0)
    wrapped = CalibratedStrategy(window, FIT)
    assert wrapped.name == window.name
    assert wrapped.params()["calibration"] == FIT.as_params()
    assert wrapped.params()["max_context_window_tokens"] == (4_000 - 100) // 2
