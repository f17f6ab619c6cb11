"""Calibration: the provider's input count fitted on chatledger's own, and strategies
whose token budgets and triggers are scaled by the fit.

chatledger counts tokens locally (tiktoken); a provider counts what it was sent, with
the framework's instructions and tool schemas, its framing, and its own tokenizer. Per
session and model, :func:`fit` fits the provider's input count on chatledger's count of
what it projected for the same call as ``scale x local + offset``: the offset takes what
the framework adds to every call, the scale the difference of the tokenizers.

The fit is a least-squares line over the session's newest :data:`WINDOW` paired calls,
each weighing :data:`DECAY` times the one after it (smoothed: one odd report moves it
little), and bounded: the scale within [:data:`MIN_SCALE`, :data:`MAX_SCALE`] (the order
two tokenizers differ by), the offset within [0, :data:`MAX_OFFSET`]. A report of 0, or
of 100 times the local count, moves the fit to a bound and no further. With one paired
call (or calls of one size) the line has no slope to fit: the fit is the ratio of the
two counts, no offset, which over-estimates a growing session rather than under-estimate
it (compaction then fires early, not late).

:func:`calibrated` gives the strategy a provider runs with ``calibrate=True``: the same
strategy with each token figure it is judged by, a provider's count, turned into the
local count the fit expects for it (:meth:`Calibration.local_budget`). Strategies stay
pure: they plan on local counts against local budgets.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

from store.usage.models import Calibration
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.requested import requested
from strategies.triggers import All, Not, TokensBelow, TokensExceed, Trigger
from strategies.triggers import Any as AnyOf
from strategies.view import View

__all__ = [
    "CALIBRATION_KEY",
    "DECAY",
    "MAX_OFFSET",
    "MAX_SCALE",
    "MIN_SCALE",
    "WINDOW",
    "CalibratedStrategy",
    "calibrated",
    "fit",
]

MIN_SCALE = 0.5
"""The smallest scale a fit takes."""
MAX_SCALE = 2.0
"""The largest scale a fit takes."""
MAX_OFFSET = 65_536
"""The largest offset a fit takes, in the provider's tokens."""
WINDOW = 32
"""How many of the newest paired calls a fit rests on."""
DECAY = 0.8
"""The weight of a call relative to the call after it."""


def _clamp(value: float, low: float, high: float) -> tuple[float, bool]:
    bounded = min(high, max(low, value))
    return bounded, bounded != value


def fit(
    session_id: str, model: str | None, points: Sequence[tuple[int, int]]
) -> Calibration | None:
    """The fit of ``points``, ``(local, provider)`` pairs oldest first; None without a
    point whose local count is above 0."""
    usable = [(x, y) for x, y in points if x > 0 and y >= 0][-WINDOW:]
    if not usable:
        return None
    n = len(usable)
    weights = [DECAY ** (n - 1 - i) for i in range(n)]
    total = sum(weights)
    mean_x = sum(w * x for w, (x, _) in zip(weights, usable, strict=True)) / total
    mean_y = sum(w * y for w, (_, y) in zip(weights, usable, strict=True)) / total
    spread = sum(w * (x - mean_x) ** 2 for w, (x, _) in zip(weights, usable, strict=True))
    if spread <= 1e-9 * max(1.0, mean_x * mean_x) * total:
        scale, offset = mean_y / mean_x, 0.0
    else:
        cross = sum(
            w * (x - mean_x) * (y - mean_y) for w, (x, y) in zip(weights, usable, strict=True)
        )
        scale = cross / spread
        offset = mean_y - scale * mean_x
    scale, scale_bounded = _clamp(scale, MIN_SCALE, MAX_SCALE)
    if scale_bounded:
        offset = mean_y - scale * mean_x
    offset, offset_bounded = _clamp(offset, 0.0, float(MAX_OFFSET))
    if offset_bounded and not scale_bounded:
        # the line through the origin's side of the bound: refit the scale on it
        through = sum(w * x * (y - offset) for w, (x, y) in zip(weights, usable, strict=True))
        squares = sum(w * x * x for w, (x, _) in zip(weights, usable, strict=True))
        scale, scale_bounded = _clamp(through / squares, MIN_SCALE, MAX_SCALE)
    return Calibration(
        session_id=session_id,
        model=model,
        scale=scale,
        offset=offset,
        calls=n,
        bounded=scale_bounded or offset_bounded,
    )


def _trigger(trigger: Trigger | None, calibration: Calibration) -> Trigger | None:
    """``trigger`` with each token threshold turned into its local count."""
    if trigger is None:
        return None
    if isinstance(trigger, TokensExceed):
        return TokensExceed(calibration.local_budget(trigger.n))
    if isinstance(trigger, TokensBelow):
        return TokensBelow(calibration.local_budget(trigger.n))
    if isinstance(trigger, All):
        return All(*(_required(t, calibration) for t in trigger.triggers))
    if isinstance(trigger, AnyOf):
        return AnyOf(*(_required(t, calibration) for t in trigger.triggers))
    if isinstance(trigger, Not):
        return Not(_required(trigger.inner, calibration))
    return trigger


def _required(trigger: Trigger, calibration: Calibration) -> Trigger:
    scaled = _trigger(trigger, calibration)
    assert scaled is not None
    return scaled


def _window(
    strategy: ContextWindowCompactionStrategy, calibration: Calibration
) -> ContextWindowCompactionStrategy:
    """The window strategy whose input budget is the local count of its own."""
    budget = calibration.local_budget(strategy.input_budget_tokens)
    rebuilt = ContextWindowCompactionStrategy(
        max_context_window_tokens=budget + strategy.max_output_tokens + strategy.reserved_tokens,
        max_output_tokens=strategy.max_output_tokens,
        reserved_tokens=strategy.reserved_tokens,
        tokenizer=strategy.tokenizer,
        tool_eviction_threshold=strategy.tool_eviction_threshold,
        truncation_threshold=strategy.truncation_threshold,
        keep_last_tool_call_groups=strategy.keep_last_tool_call_groups,
        preserve_first_user_group=strategy.preserve_first_user_group,
        start_at_user=strategy.start_at_user,
        min_saving_tokens=strategy.min_saving_tokens,
        eviction_headroom=strategy.eviction_headroom,
        trigger=_trigger(strategy.trigger, calibration),
        target=_trigger(strategy.target, calibration),
    )
    rebuilt.forced = strategy.forced
    return rebuilt


def calibrated(strategy: CompactionStrategy, calibration: Calibration) -> CompactionStrategy:
    """``strategy`` judged in the provider's tokens: the window strategy's input budget,
    a token budget (``token_budget``), and every ``TokensExceed`` and ``TokensBelow``
    threshold of its triggers and targets, each turned into the local count the fit
    expects for it; inner strategies (a pipeline's, a budget's) likewise. The strategy
    given is left as it is."""
    if isinstance(strategy, ContextWindowCompactionStrategy):
        return _window(strategy, calibration)
    scaled: Any = copy.copy(strategy)
    changed = False
    for name in ("trigger", "target"):
        trigger = getattr(strategy, name, None)
        if trigger is not None:
            setattr(scaled, name, _trigger(trigger, calibration))
            changed = True
    budget = getattr(strategy, "token_budget", None)
    if isinstance(budget, int):
        scaled.token_budget = calibration.local_budget(budget)
        changed = True
    inner = getattr(strategy, "strategies", None)
    if isinstance(inner, tuple) and all(isinstance(s, CompactionStrategy) for s in inner):
        scaled.strategies = tuple(calibrated(s, calibration) for s in inner)
        changed = True
    result: CompactionStrategy = scaled if changed else strategy
    return result


CALIBRATION_KEY = "calibration"
"""The key of a compaction event's ``params`` that holds the fit its strategy used."""


class CalibratedStrategy:
    """A strategy planned in the provider's tokens: :func:`calibrated` of ``inner``,
    under ``inner``'s name, whose params record the fit (under :data:`CALIBRATION_KEY`,
    so the compaction event shows it)."""

    def __init__(self, inner: CompactionStrategy, calibration: Calibration) -> None:
        self.inner = inner
        """The strategy as given, in the provider's tokens."""
        self.scaled = calibrated(inner, calibration)
        """The strategy that plans, in local tokens."""
        self.calibration = calibration

    @property
    def name(self) -> str:
        return self.inner.name

    def params(self) -> dict[str, Any]:
        return {**self.scaled.params(), CALIBRATION_KEY: self.calibration.as_params()}

    def as_requested(self, *, focus: str | None = None) -> CalibratedStrategy:
        """Run as asked for (:func:`strategies.requested.requested`): the strategy it
        wraps runs so, judged by the same fit."""
        return CalibratedStrategy(requested(self.inner, focus=focus), self.calibration)

    async def plan(self, view: View) -> ChangeSet:
        changes = await self.scaled.plan(view)
        recorded = {**(changes.params or self.scaled.params())}
        recorded[CALIBRATION_KEY] = self.calibration.as_params()
        return dataclasses.replace(changes, params=recorded)
