"""``requested(strategy)``: a strategy as it runs when compaction was asked for.

Counts are one token per character with no framing overhead (see ``test_context_window``).
Each case plans the strategy as given (which changes nothing on the view) and as
asked (which does), and checks the strategy given is left as it was.
"""

from __future__ import annotations

from store.usage.calibration import CalibratedStrategy
from store.usage.models import Calibration
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.requested import REQUEST_KEY, RequestedStrategy, requested
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.triggers import Always, TokensExceed
from strategies.truncation import TruncationStrategy
from tests.strategies.conversations import turns
from tests.strategies.test_context_window import view_of, window


async def test_the_window_strategy_acts_as_if_both_thresholds_were_crossed() -> None:
    view = view_of(turns(3))  # 120 tokens
    quiet = window(1000)  # evicts above 500, truncates above 800: nothing to do
    assert (await quiet.plan(view)).is_empty
    forced = requested(quiet)
    assert isinstance(forced, ContextWindowCompactionStrategy) and forced.forced
    assert not quiet.forced  # the strategy given is left as it is
    small = window(200)  # evicts above 100, truncates above 160: the view is under both
    assert (await small.plan(view)).is_empty
    changes = await requested(small).plan(view)
    after = view.apply(changes)
    assert not changes.is_empty and after.token_count <= small.tool_eviction_tokens


async def test_a_calibrated_strategy_passes_the_request_on() -> None:
    view = view_of(turns(3))
    fit = Calibration(session_id="s", model=None, scale=1.0, offset=0, calls=3, bounded=False)
    calibrated = CalibratedStrategy(window(200), fit)
    assert (await calibrated.plan(view)).is_empty
    forced = requested(calibrated)
    assert isinstance(forced, CalibratedStrategy)
    changes = await forced.plan(view)
    assert not changes.is_empty and "calibration" in changes.params


async def test_a_trigger_given_fires_and_the_threshold_of_one_not_given_is_crossed() -> None:
    view = view_of(turns(3))
    triggered = TruncationStrategy(max_n=4, compact_to=2, trigger=TokensExceed(10_000))
    assert (await triggered.plan(view)).is_empty
    forced = requested(triggered)
    assert getattr(forced, "trigger", None) is Always and triggered.trigger is not Always
    assert not (await forced.plan(view)).is_empty
    own = TruncationStrategy(max_n=100, compact_to=3)  # groups: 9 here, never above 100
    assert (await own.plan(view)).is_empty
    assert len(view.apply(await requested(own).plan(view)).groups) <= 3


async def test_a_summarizer_gets_the_focus_and_the_event_the_request() -> None:
    view = view_of(turns(4))
    fake = FakeSummarizer()
    quiet = SummarizationStrategy(client=fake, target_count=2, threshold=50)
    assert (await quiet.plan(view)).is_empty
    asked = RequestedStrategy(quiet, reason="model_requested", focus="the weather")
    changes = await asked.plan(view)
    assert changes.summaries and fake.calls[-1][1].endswith(
        "Keep in the summary above all: the weather"
    )
    assert changes.params[REQUEST_KEY] == {"reason": "model_requested", "focus": "the weather"}
    assert asked.name == quiet.name and quiet.focus is None
