"""Compaction asked for: a strategy run as if its trigger fired.

When someone (a person, or the model through a tool) asks for compaction, the next
compaction runs whatever the triggers say. :func:`requested` gives the strategy that
runs then, left pure and planning on the same view:

* a trigger a strategy was given fires (it becomes :data:`~strategies.triggers.Always`);
  a target it was given still says where to stop, and without one the target derived from
  the trigger ("until it no longer fires") never holds, so the strategy compacts as far
  as its own protections allow (system groups, pinned groups, the current turn, calls
  still waiting for their result, its ``keep_last`` settings);
* a strategy whose trigger is its own threshold runs as if the threshold were crossed:
  truncation compacts to ``compact_to`` once the view holds more, summarization keeps the
  newest ``target_count`` messages once more are active;
* the window strategy acts as if both its thresholds were crossed: old tool results are
  collapsed (its ``keep_last_tool_call_groups`` kept) and the oldest groups truncated
  down to its tool-eviction threshold;
* strategies that act at every run on limits of their own (a sliding window's length, a
  token budget) run as they are: a request cannot push them below their limits;
* a strategy may say how it runs as asked: a method ``as_requested(*, focus)`` returning
  that strategy (a wrapper such as the store's calibrated strategy passes the request
  on to the strategy it wraps);
* the strategies inside a pipeline or a token budget likewise, and a summarizer that
  accepts a ``focus`` keyword is given the request's focus.

:class:`RequestedStrategy` wraps a strategy so, under the strategy's own name, with the
request's reason and focus in the change set's params (under :data:`REQUEST_KEY`), which
the compaction event keeps.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.summarization import SummarizationStrategy
from strategies.triggers import Always
from strategies.truncation import TruncationStrategy
from strategies.view import View

__all__ = ["REQUEST_KEY", "RequestedStrategy", "requested"]

REQUEST_KEY = "request"
"""The key of a change set's (and so a compaction event's) ``params`` that holds the
reason and focus of the request it ran for."""


def requested(strategy: CompactionStrategy, *, focus: str | None = None) -> CompactionStrategy:
    """``strategy`` as it runs when compaction was asked for (see the module's
    docstring); the strategy given is left as it is."""
    if isinstance(strategy, RequestedStrategy):
        return requested(strategy.inner, focus=focus if focus is not None else strategy.focus)
    own = getattr(strategy, "as_requested", None)
    if callable(own):
        made: CompactionStrategy = own(focus=focus)
        return made
    forced: Any = copy.copy(strategy)
    changed = False
    if getattr(strategy, "trigger", None) is not None:
        forced.trigger = Always
        changed = True
    elif isinstance(strategy, TruncationStrategy):
        forced.max_n = strategy.compact_to
        changed = True
    elif isinstance(strategy, SummarizationStrategy):
        forced.threshold = 0
        changed = True
    if isinstance(strategy, SummarizationStrategy) and focus is not None:
        forced.focus = focus
        changed = True
    inner = getattr(strategy, "strategies", None)
    if isinstance(inner, tuple) and all(isinstance(s, CompactionStrategy) for s in inner):
        forced.strategies = tuple(requested(s, focus=focus) for s in inner)
        changed = True
    result: CompactionStrategy = forced if changed else strategy
    return result


class RequestedStrategy:
    """``inner`` run for a request (:func:`requested`), under ``inner``'s name, its
    params recording ``reason`` and ``focus`` under :data:`REQUEST_KEY`."""

    def __init__(self, inner: CompactionStrategy, *, reason: str, focus: str | None = None) -> None:
        self.inner = inner
        """The strategy as given."""
        self.reason = reason
        """Why compaction was asked for (``manual``, ``model_requested``, or a person's
        words)."""
        self.focus = focus
        """What the summary should keep, passed to a summarizer that accepts it."""
        self.forced = requested(inner, focus=focus)
        """The strategy that plans."""

    @property
    def name(self) -> str:
        return self.inner.name

    def _request(self) -> dict[str, Any]:
        return {"reason": self.reason, "focus": self.focus}

    def params(self) -> dict[str, Any]:
        return {**self.forced.params(), REQUEST_KEY: self._request()}

    async def plan(self, view: View) -> ChangeSet:
        changes = await self.forced.plan(view)
        recorded = {**(changes.params or self.forced.params()), REQUEST_KEY: self._request()}
        return dataclasses.replace(changes, params=recorded)
